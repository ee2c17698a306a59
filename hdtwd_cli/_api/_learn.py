"""The public functions that learn the features' tree: ``learn_tree``, ``embed``, ``decode_tree``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._api._common import (
    Matrix,
    as_reporter,
    checked_histograms,
    checked_matrix,
    checked_names,
    data_errors,
    embedding_pair,
)
from hdtwd_cli._runtime.memory import available_memory
from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli._version import __version__
from hdtwd_cli.errors import (
    ParameterError,
)
from hdtwd_cli.tree._budget import check_tree_memory
from hdtwd_cli.tree._denoise import Denoiser
from hdtwd_cli.tree._hyperbolic import HyperbolicEmbedding
from hdtwd_cli.tree._learn import (
    Prepared,
    decode_from_embedding,
    embed_prepared,
    extend_tree,
    learn_trees,
    prepare,
)
from hdtwd_cli.tree._params import TreeParams, apply_transform
from hdtwd_cli.tree._space import FeatureSpace
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._histograms import check_histograms


def learn_tree(
    X: Matrix,
    feature_names: Sequence[str] | None = None,
    *,
    params: TreeParams | None = None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None = None,
    check_memory: bool = True,
    progress: Reporter | bool | None = None,
) -> Tree:
    r"""Learn the hierarchy of the FEATURES (columns) of ``X``: a binary tree with one leaf per column.

    Diffusion operator on the features (paper Eq. 1), multi-scale hyperbolic embedding
    (Sec. 3.2), HD-LCA binary tree (Alg. 1), then the departures of docs/method.md section 7
    (features' space, idf weights, leaf term; features that cannot be placed hang from the root).

    Parameters
    ----------
    X : array-like or sparse matrix, shape (n_samples, n_features)
        Non-negative values, one row per sample.
    feature_names : sequence of str, optional
        Leaf names (default ``f0, f1, ...``).
    params : TreeParams, optional
        Configuration (default ``TreeParams()``, the library default; ``TreeParams.from_preset("paper")``
        reproduces the paper). ``params.transform`` is applied to ``X`` first.
    feature_embedding : (vectors, names), optional
        The features' own vectors (one row per name, e.g. word vectors), matched by name.
    check_memory : bool
        Refuse (:class:`~hdtwd_cli.errors.ResourceError`) before a stage that would not fit in
        the available memory.
    progress : bool or Reporter, optional
        Progress bars on stderr (terminals only).

    Returns
    -------
    Tree
        ``tree.metadata`` records every parameter used.

    Examples
    --------
    >>> import numpy as np, hdtwd_cli as hd
    >>> X = np.random.default_rng(0).poisson(2.0, size=(60, 12))
    >>> tree = hd.learn_tree(X, [f"g{j}" for j in range(12)])
    >>> tree.n_leaves, tree.n_nodes
    (12, 23)
    """
    params = params or TreeParams()
    Xm = apply_transform(checked_matrix(X), params.transform)
    return learn_checked(
        Xm, checked_names(feature_names, Xm.shape[1]), params, feature_embedding, check_memory, progress
    )


def learn_checked(
    Xt: np.ndarray | sp.csr_matrix,
    names: list[str],
    params: TreeParams,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None,
    check_memory: bool,
    progress: Reporter | bool | None,
) -> Tree:
    """:func:`learn_tree` on data already checked and transformed by ``params.transform``."""
    data_errors(lambda: check_histograms(Xt))
    vectors = embedding_pair(feature_embedding)
    have = available_memory() if check_memory else None
    return data_errors(
        lambda: learn_trees(Xt, names, params, [params.scales], as_reporter(progress), None, have, vectors)[
            params.scales
        ]
    )


def tree_for(
    X: np.ndarray | sp.csr_matrix,
    names: list[str],
    tree: Tree | None,
    params: TreeParams | None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None,
    unseen: str,
    transform: str | None,
    more_names: Sequence[str],
    progress: Reporter | bool | None,
) -> tuple[Tree, str, dict[str, Any], np.ndarray | sp.csr_matrix]:
    """The tree to use (learned from ``X`` or the given one), its data transform, a record, and
    ``X`` transformed (once)."""
    if unseen not in ("error", "root"):
        raise ParameterError(f"must be 'error' or 'root', not {unseen!r}", "unseen")
    if tree is None:
        if unseen != "error":
            raise ParameterError("applies to a stored tree only ({b})", "unseen", b="tree")
        params = params or TreeParams()
        if transform is not None:
            params = params.replace(transform=transform)
        Xt = apply_transform(X, params.transform)
        T = learn_checked(Xt, names, params, feature_embedding, True, progress)
        return T, params.transform, {"tree_source": "learned", "params": dict(T.metadata)}, Xt
    if params is not None or feature_embedding is not None:
        raise ParameterError(
            "{arg} only applies when the tree is learned (tree=None)",
            "params" if params is not None else "feature_embedding",
        )
    stored = str(tree.metadata.get("transform", "none"))
    if transform is not None and transform != stored:
        raise ParameterError(f"is {transform!r} but the tree was learned with {stored!r}", "transform")
    if unseen == "root":
        tree = extend_tree(tree, list(names) + list(more_names))
    return tree, stored, {"tree_source": "given", "transform": stored, "unseen": unseen}, apply_transform(X, stored)


@dataclass
class FeatureEmbedding:
    """The stages before the tree (``hdtwd embed``): the prepared rows (features' space, denoiser,
    weights), the operator and the multi-scale embedding; :func:`decode_tree` finishes the tree
    exactly as :func:`learn_tree` does."""

    embedding: HyperbolicEmbedding
    operator: Any
    prepared: Prepared
    params: TreeParams

    @property
    def space(self) -> FeatureSpace:
        """The features' space: placed features (the embedding's rows), unplaced ones, weights."""
        return self.prepared.space

    def write(self, path: str, meta: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> None:
        """Write the HDF5 embedding file (layout: :mod:`hdtwd_cli.io._hdf5`) atomically.

        ``meta``: file attributes (the input's record); ``extra``: more entries of ``/params``.
        """
        from hdtwd_cli.io import atomic_path

        with atomic_path(path) as tmp:
            self._write(tmp, meta, extra)

    def _write(self, target: Any, meta: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> None:
        from hdtwd_cli.io import write_embedding

        s, p = self.space, self.prepared
        order = s.names + s.unplaced
        weights = None if s.weights is None else [s.weights[n] for n in order]
        denoiser = p.denoiser_for(order)  # in the file's feature order (names, then dropped)
        record = {
            **self.params.as_dict(),
            "feature_source": s.source,
            "latent_energy": s.shared,
            "never_cooccur": s.never_cooccur,
            "denoise_rule": p.rule,
            **(extra or {}),
        }
        write_embedding(
            target,
            self.embedding,
            self.operator,
            s.names,
            s.unplaced,
            record,
            {"hdtwd_version": __version__, **(meta or {})},
            weights,
            denoiser,
        )

    def stored(self) -> Any:
        """What :func:`hdtwd_cli.io.read_embedding` would read back from :meth:`write`'s file (an
        in-memory round trip of the same layout, so :func:`decode_tree` gives the same tree either way)."""
        import io as _io

        from hdtwd_cli.io import read_embedding

        buf = _io.BytesIO()
        self._write(buf)
        buf.seek(0)
        return read_embedding(buf)  # type: ignore[arg-type]


def embed(
    X: Matrix,
    feature_names: Sequence[str] | None = None,
    *,
    params: TreeParams | None = None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None = None,
    check_memory: bool = True,
    progress: Reporter | bool | None = None,
) -> FeatureEmbedding:
    """Diffusion operator and multi-scale hyperbolic embedding of the features (paper Sec. 3.2).

    The same first stages as :func:`learn_tree` (value scale and denoising, features' space,
    operator), kept: :func:`decode_tree` turns the result (or the file :meth:`FeatureEmbedding.write`
    makes) into the tree that :func:`learn_tree` gives for the same ``X`` and ``params`` (the same
    bits; the file stores the denoiser and the weights the tree applies to samples).
    """
    params = params or TreeParams()
    if params.learner != "diffusion":
        raise ParameterError(
            f"{{arg}} is {params.learner!r}: only the diffusion learner has an embedding to keep (give "
            "{arg} diffusion; the average learner's tree is kept by learn_tree / distance --save-tree)",
            "learner",
        )
    rep = as_reporter(progress)
    Xm, names = checked_histograms(X, feature_names, params.transform)
    vectors = embedding_pair(feature_embedding)
    have = available_memory() if check_memory else None
    prepared = data_errors(lambda: prepare(Xm, names, params, embedding=vectors, reporter=rep, available=have))
    prepared, op, emb = data_errors(lambda: embed_prepared(prepared, params, rep, None, have))
    return FeatureEmbedding(emb, op, prepared, params)


def decode_tree(
    stored: Any,
    *,
    linkage: str | None = None,
    edge_weights: str | None = None,
    check_memory: bool = True,
    progress: Reporter | bool | None = None,
) -> Tree:
    """The HD-LCA binary tree (Alg. 1) of an embedding: :func:`embed`'s result or a stored one
    (:func:`hdtwd_cli.io.read_embedding`).

    ``linkage`` and ``edge_weights`` default to the embedding's; the tree is finished as
    :func:`learn_tree` finishes it (:meth:`~hdtwd_cli.tree._learn.Prepared.finish`: unplaced
    features from the root, the leaf term, the weights and the denoiser the embedding stores).
    """
    from hdtwd_cli._defaults import PRESETS

    if isinstance(stored, FeatureEmbedding):
        stored = stored.stored()
    rep = as_reporter(progress)
    cfg = PRESETS.get(str(stored.params.get("preset", "default")), PRESETS["default"])
    rule = linkage or str(stored.params.get("linkage", cfg["linkage"]))  # the embedding's configuration
    weights = edge_weights or str(stored.params.get("edge_weights", cfg["edge_weights"]))
    n_landmarks = int(stored.diffusion.get("n_landmarks", 0))
    emb = HyperbolicEmbedding(psi=stored.psi, heights=stored.heights, negative_mass=stored.negative_mass)
    tp = TreeParams(scales=emb.n_scales - 1, linkage=rule, edge_weights=weights, landmarks=n_landmarks)
    if check_memory:
        have = available_memory()
        need = check_tree_memory(0, len(stored.feature_names), None, tp, have, None, ("tree",), store_embedding=True)
        rep.note(f"decoding the tree needs about {need / 1e9:.2f} GB (estimate; {have / 1e9:.1f} GB available)")
    tree = decode_from_embedding(emb, stored.feature_names, rep, rule, weights, tie_ranks=n_landmarks == 0)
    dropped = list(stored.diffusion.get("dropped", []))
    order = stored.feature_names + dropped
    fw = stored.diffusion.get("feature_weights")
    d = stored.denoiser
    prepared = Prepared(
        FeatureSpace(
            None,
            stored.feature_names,
            dropped,
            None if fw is None else dict(zip(order, np.asarray(fw).tolist())),
            str(stored.params.get("feature_source", "data")),
            float(stored.params.get("latent_energy", 1.0)),
            float(stored.params.get("never_cooccur", -1.0)),
        ),
        order,
        None if d is None else Denoiser(mean=d.mean, axes=d.axes, log_counts=d.log_counts, covered=d.covered),
        str(stored.params.get("denoise_rule", "not recorded")),
    )
    lam = stored.params.get("leaf_length")  # absent: the automatic rule, from the stored energy
    tree.metadata.update(
        {
            **{k: v for k, v in stored.params.items() if k not in ("denoise_rule", "never_cooccur")},
            "linkage": rule,
            "edge_weights": weights,
            "scales": emb.n_scales - 1,
            "eps_used": stored.diffusion.get("eps"),
            "sigma": stored.diffusion.get("sigma"),
            "unplaced_features": len(dropped),
            "n_landmarks": n_landmarks,
        }
    )
    return prepared.finish(tree, TreeParams(leaf_length=None if lam is None else float(lam)))
