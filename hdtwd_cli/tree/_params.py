r"""The configuration of a tree (:class:`TreeParams`), its presets, and the data transform.

``TreeParams()`` is the library default and ``TreeParams.from_preset("paper")`` the paper's
configuration (docs/defaults.md lists both); :func:`apply_transform` applies the element-wise
transform a configuration names (e.g. ``log1p``) before anything else sees the data.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import (
    BANDWIDTHS,
    DEFAULT_EPS,
    DEFAULT_SCALES,
    EDGE_WEIGHTS,
    LEARNERS,
    LINKAGES,
    METRICS,
    PRESETS,
    TRANSFORMS,
)
from hdtwd_cli.errors import ParameterError
from hdtwd_cli.tree._diffusion import EIGENVALUE_FLOOR
from hdtwd_cli.tree._features import FEATURE_SPACES, WEIGHTINGS
from hdtwd_cli.tree._landmarks import LANDMARK_METHODS


@dataclass(frozen=True)
class TreeParams:
    """Parameters of the tree-learning stages (docs/method.md sections 1-3 and 6-7).

    Bare ``TreeParams()`` is the library default (the ``"default"`` preset, chosen by an ablation
    across the data sets: docs/defaults.md); ``TreeParams.from_preset("paper")`` reproduces the paper.
    Every value is checked on construction (:class:`hdtwd_cli.errors.ParameterError` names the field).
    ``learner`` is how the tree is learned from the features' vectors: ``diffusion`` (the operator,
    the multi-scale embedding and the HD-LCA tree: every option below about the kernel, the scales,
    the linkage, the edge weights and the landmarks) or ``average`` (average linkage on their
    correlation distances, :mod:`._average`; those options do not apply).
    ``transform`` is the element-wise transform of the data before everything (:func:`apply_transform`).
    ``linkage`` is the agglomeration rule on the HD-LCA values (``single`` = the paper's Alg. 1);
    ``bandwidth`` is ``median`` (the paper's eps = c x median) or ``knn`` (self-tuning);
    ``edge_weights`` is ``midpoint`` (docs/method.md section 3) or ``lca`` (HD-LCA heights);
    ``landmarks`` is the number of diffusion landmarks (``0``: exact operator, ``None``: automatic,
    see :func:`_landmarks.effective_landmarks`) and ``landmark_method`` ``random`` or ``kmeans``;
    ``landmark_eps`` is the kernel-scale multiplier used on the landmark path instead of ``eps``
    (``None``: ``eps``). The distance to the k-th nearest LANDMARK is much larger than to the k-th
    nearest feature, so the self-tuning kernel needs a smaller c there, and the global one keeps the
    planted hierarchies' coarse levels with it too (docs/defaults.md, "Large feature counts: landmarks").
    ``feature_space`` is the features' ambient space for the initial distance: ``data`` (the data
    columns), ``svd`` (``feature_dims`` latent dimensions, :mod:`._features`) or ``auto`` (``svd``
    when the features rarely co-occur, :func:`_features.never_cooccur_fraction`); a
    feature embedding given to :func:`learn_tree` overrides it. ``weighting`` (``none`` or ``idf``) weights the
    features' values before they become histograms; ``leaf_length`` (lambda) lengthens every leaf
    edge by lambda times the tree's mean leaf depth (``None``: automatic, :func:`_space.auto_leaf_length`;
    docs/method.md section 7). Features non-zero
    in fewer than ``min_df`` rows are not placed by the diffusion: they hang from the root; so do
    all but the ``max_features`` most frequent ones (``0``: no cap), which bounds the
    ``m(m-1)/2`` HD-LCA values and the linkage (docs/method.md section 6). ``denoise`` (``r > 0``)
    replaces every sample's values by their rank-``r`` principal-component reconstruction,
    clipped at zero: the tree is learned from the denoised rows and every sample is denoised
    before it becomes a histogram; the map is fitted on the rows the tree is learned from and
    stored with the tree (:mod:`hdtwd_cli.tree._denoise`, docs/method.md section 11). ``"auto"``
    (the default): by the form of the values (:func:`hdtwd_cli.tree._forms.value_form`) where the
    features co-occur: rank 50 for raw counts, their log1p and log-normalised values over all
    genes, rank 20 for log-normalised values of a gene subset, off otherwise
    (:func:`hdtwd_cli.tree._values.auto_rank`); ``0``: off.
    """

    eps: float = DEFAULT_EPS
    scales: int = DEFAULT_SCALES
    metric: str = "correlation"
    seed: int = 0
    linkage: str = "complete"
    bandwidth: str = "median"
    knn: int = 7
    edge_weights: str = "lca"
    landmarks: int | None = None
    landmark_method: str = "random"
    landmark_eps: float | None = 0.1
    feature_space: str = "auto"
    feature_dims: int = 100
    weighting: str = "idf"
    leaf_length: float | None = None
    min_df: int = 1
    max_features: int = 20000
    transform: str = "none"
    denoise: int | str = "auto"
    learner: str = "diffusion"

    def __post_init__(self) -> None:
        choices = {
            "learner": LEARNERS,
            "metric": METRICS,
            "linkage": LINKAGES,
            "bandwidth": BANDWIDTHS,
            "edge_weights": EDGE_WEIGHTS,
            "landmark_method": LANDMARK_METHODS,
            "feature_space": FEATURE_SPACES,
            "weighting": WEIGHTINGS,
            "transform": TRANSFORMS,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ParameterError(f"must be one of {', '.join(allowed)}, not {getattr(self, name)!r}", name)
        positive = {"eps": self.eps, "landmark_eps": self.landmark_eps}
        for name, v in positive.items():
            if v is not None and not (np.isfinite(v) and v > 0):
                raise ParameterError("(the kernel scale multiplier) must be positive", name)
        if isinstance(self.denoise, str) and self.denoise != "auto":
            raise ParameterError(f"must be 'auto' or an integer >= 0, not {self.denoise!r}", "denoise")
        at_least: dict[str, tuple[Any, int]] = {
            "scales": (self.scales, 0),
            "knn": (self.knn, 1),
            "feature_dims": (self.feature_dims, 1),
            "min_df": (self.min_df, 1),
            "max_features": (self.max_features, 0),
            "landmarks": (self.landmarks, 0),
            "denoise": (None if self.denoise == "auto" else self.denoise, 0),
        }
        for name, (v, lo) in at_least.items():
            if v is not None and not (int(v) == v and v >= lo):
                raise ParameterError(f"must be an integer >= {lo}", name)
        if self.landmarks == 1:
            raise ParameterError("needs at least 2 landmarks (or 0 for the exact operator)", "landmarks")
        if self.leaf_length is not None and not (np.isfinite(self.leaf_length) and self.leaf_length >= 0):
            raise ParameterError("must be non-negative (or None for the automatic choice)", "leaf_length")

    @classmethod
    def from_preset(cls, preset: str = "default", **overrides: Any) -> TreeParams:
        """The named configuration ``preset`` with ``overrides`` (values that are not ``None``) on top.

        ``"default"`` is the library default (= ``TreeParams()``); ``"paper"`` reproduces the
        paper's Alg. 1 and Eq. 5 exactly (docs/method.md sections 1-4). An explicit ``eps``
        applies on the landmark path too (``landmark_eps`` is dropped unless also given).

        Examples
        --------
        >>> from hdtwd_cli import TreeParams
        >>> TreeParams.from_preset("paper").linkage
        'single'
        >>> TreeParams.from_preset("default", scales=3) == TreeParams(scales=3)
        True
        """
        if preset not in PRESETS:
            raise ParameterError(f"must be one of {', '.join(PRESETS)}, not {preset!r}", "preset")
        cfg = dict(PRESETS[preset])
        given = {k: v for k, v in overrides.items() if v is not None}
        unknown = sorted(set(given) - {f.name for f in fields(cls)})
        if unknown:
            raise ParameterError(
                f"is not a tree parameter; choose from {', '.join(f.name for f in fields(cls))}", unknown[0]
            )
        cfg.update(given)
        if "eps" in given and "landmark_eps" not in given:
            cfg["landmark_eps"] = None  # an explicit eps applies to both paths
        return cls(**cfg)

    def kernel_eps(self, landmark_path: bool) -> float:
        """The multiplier c actually used: ``landmark_eps`` on the landmark path when set, else ``eps``."""
        return float(self.landmark_eps) if landmark_path and self.landmark_eps is not None else float(self.eps)

    def replace(self, **changes: Any) -> TreeParams:
        """A copy with ``changes`` applied (validated)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["alpha"] = 1.0
        d["eigenvalue_floor"] = EIGENVALUE_FLOOR
        return d


def resolve_params(preset: str = "default", seed: int = 0, **overrides: Any) -> tuple[TreeParams, str]:
    """Tree parameters and data transform from a preset, with explicit values (not None) winning."""
    params = TreeParams.from_preset(preset, seed=seed, **overrides)
    return params, params.transform


def apply_transform(X: np.ndarray | sp.spmatrix, transform: str) -> np.ndarray | sp.spmatrix:
    r"""Element-wise variance-stabilising transform of the data before everything else.

    ``none``; ``log1p``: :math:`\log(1 + x)` (the usual single-cell choice for counts);
    ``sqrt``: :math:`\sqrt{x}` (Anscombe-like). Zeros stay zero, so sparse input stays sparse.
    """
    if transform == "none":
        return X
    if transform not in TRANSFORMS:
        raise ParameterError(f"must be one of {', '.join(TRANSFORMS)}, not {transform!r}", "transform")
    f = np.log1p if transform == "log1p" else np.sqrt
    if sp.issparse(X):
        Y = sp.csr_matrix(X, copy=True)
        Y.data = f(Y.data)
        return Y
    return f(X)
