r"""The features' space: the vectors the diffusion (or the average learner) reads, and the leaf term.

:func:`feature_space` (docs/method.md section 7) turns the rows a tree is learned from into one
vector per placed feature: the data columns (cells), their latent SVD space (words, whose features
rarely share a sample) or a given embedding; it keeps the features with mass in enough rows, the
idf weights, and the share of the data's energy the input keeps (:func:`latent_energy`), from which
:func:`auto_leaf_length` gives the automatic leaf term. The first stage of every tree, composed by
:func:`hdtwd_cli.tree._learn.prepare`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import AVERAGE_LEAF_LENGTH, DIFFUSION_LEAF_LENGTH
from hdtwd_cli._runtime.blas import serial_blas
from hdtwd_cli.tree._denoise import DenoisedRows
from hdtwd_cli.tree._features import (
    FEATURE_SPACES,
    NEVER_COOCCUR_LIMIT,
    WEIGHTINGS,
    document_frequency,
    idf_weights,
    latent_feature_space,
    never_cooccur_fraction,
)
from hdtwd_cli.tree._params import TreeParams


@dataclass
class FeatureSpace:
    """The features' ambient vectors that the diffusion reads, and the features it cannot place.

    Attributes
    ----------
    matrix : ndarray or sparse matrix, shape (d, m_placed)
        One column per placed feature (data columns, latent vectors or given embedding vectors).
    names : list of str
        The placed features, in column order.
    unplaced : list of str
        Features without a vector: non-zero in fewer than ``min_df`` (at least 1) of the rows the
        tree is learned from (``data``, ``svd``), or absent from the given embedding. They hang
        from the root (:func:`finish_tree`).
    weights : dict of str to float, or None
        Feature weight of every input feature (``weighting="idf"``), else ``None``.
    source : str
        ``data``, ``svd`` or ``embedding`` (what was used; ``auto`` resolves to one of the first two).
    never_cooccur : float
        Estimated fraction of feature pairs that share no row (``auto`` only, else ``-1``).
    shared : float
        Fraction of the data's energy that the tree's input keeps: what ``feature_dims`` latent
        dimensions capture (``svd``, and the data's latent space for a given embedding), 1 for
        the data columns; see :func:`auto_leaf_length`.
    """

    matrix: np.ndarray | sp.spmatrix | None  # None once learn_trees has handed it to the operator
    names: list[str]
    unplaced: list[str]
    weights: dict[str, float] | None
    source: str
    shared: float = 1.0
    never_cooccur: float = -1.0


@serial_blas()  # the tree's stages: the same bits at any BLAS thread count (_blas)
def feature_space(
    X: np.ndarray | sp.spmatrix,
    feature_names: list[str],
    params: TreeParams,
    embedding: tuple[np.ndarray, list[str]] | None = None,
    *,
    df: np.ndarray | None = None,
) -> FeatureSpace:
    r"""The features' ambient space for the initial distance (docs/method.md section 7).

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, m)
        The rows the tree is learned from (already transformed).
    embedding : (vectors, names), optional
        Given feature vectors, one ROW per name (``--feature-embedding``); overrides
        ``params.feature_space``. Features are matched by name; every data feature with a
        non-zero vector is placed, whether or not it has mass in ``X``.
    df : ndarray, optional
        :func:`document_frequency` of ``X`` when the caller has it.

    Notes
    -----
    ``svd`` needs more samples and more features (with mass) than ``feature_dims``: a rank-r
    truncation of a smaller matrix reduces nothing, so the data columns are used instead and
    ``source`` says ``data``.
    """
    if params.leaf_length is not None and not params.leaf_length >= 0:
        raise ValueError("leaf_length must be non-negative (or None for the automatic choice)")
    if params.weighting not in WEIGHTINGS:
        raise ValueError(f"unknown weighting {params.weighting!r}; choose from {', '.join(WEIGHTINGS)}")
    if params.feature_space not in FEATURE_SPACES:
        raise ValueError(f"unknown feature_space {params.feature_space!r}; choose from {', '.join(FEATURE_SPACES)}")
    weights = None
    if df is None:  # once: idf, the kept columns and the co-occurrence test read it
        df = document_frequency(X)
    if params.weighting == "idf":
        weights = dict(zip(feature_names, idf_weights(X, df).tolist()))
    names = np.asarray(feature_names, dtype=object)
    latent: np.ndarray | None = None
    shared = 1.0
    ok = df >= max(1, int(params.min_df))
    if params.max_features and int(ok.sum()) > params.max_features:
        order = np.lexsort((np.arange(df.size), -df))  # most frequent first, ties by index
        ok = np.zeros_like(ok)
        ok[order[: params.max_features]] = True
        ok &= df >= max(1, int(params.min_df))
    cols = np.flatnonzero(ok)
    keep_all = cols.size == X.shape[1]
    Xk: np.ndarray | sp.spmatrix | DenoisedRows
    if keep_all:
        Xk = X  # every column kept (the usual case): no copy
    else:
        Xk = X.select(cols) if isinstance(X, DenoisedRows) else X[:, cols]
    big = min(X.shape[0], cols.size) > params.feature_dims
    wanted, never = params.feature_space, -1.0
    if wanted == "auto" and embedding is None:
        if isinstance(Xk, DenoisedRows):  # reconstructions from shared axes: graded column distances
            wanted = "data"
        else:
            never = never_cooccur_fraction(Xk, seed=params.seed, df=df[cols])
            wanted = "svd" if never > NEVER_COOCCUR_LIMIT else "data"
    if big and (wanted == "svd" or (embedding is not None and params.leaf_length is None)):
        Xd = Xk.dense() if isinstance(Xk, DenoisedRows) else Xk
        latent = latent_feature_space(Xd, params.feature_dims, params.seed)
        shared = latent_energy(latent, Xd)  # kept below only where the tree's input is truncated
    if embedding is not None:
        vectors, vnames = embedding
        index = {str(v): i for i, v in enumerate(vnames)}
        rows = np.array([index.get(str(f), -1) for f in feature_names], dtype=np.int64)
        ok = rows >= 0
        ok[ok] = np.any(np.asarray(vectors)[rows[ok]] != 0, axis=1)
        matrix: np.ndarray | sp.spmatrix = np.ascontiguousarray(np.asarray(vectors, dtype=np.float64)[rows[ok]].T)
        source = "embedding"
    else:
        source = "svd" if wanted == "svd" and big else "data"
        if source == "svd" and latent is not None:
            matrix = latent
            nz = np.any(matrix != 0, axis=0)
            if not nz.all():
                ok[cols[~nz]] = False
                matrix = np.ascontiguousarray(matrix[:, nz])
        else:
            matrix = sp.csr_matrix(Xk) if sp.issparse(Xk) else Xk
            shared = 1.0  # the diffusion reads the whole columns: nothing is left to a leaf term
    return FeatureSpace(matrix, names[ok].tolist(), names[~ok].tolist(), weights, source, shared, never)


def latent_energy(latent: np.ndarray, X: np.ndarray | sp.spmatrix) -> float:
    r"""Fraction :math:`\varepsilon = \sum_{i \le r} s_i^2 / \lVert M\rVert_F^2` of the energy of the unit rows ``M``
    (:func:`_features.latent_feature_space`) that its ``r`` latent dimensions capture."""
    nonzero_rows = int(np.count_nonzero(np.asarray(abs(X).sum(axis=1)).ravel()))
    return float(min(1.0, float(np.sum(latent * latent)) / max(nonzero_rows, 1)))


def auto_leaf_length(shared: float, learner: str = "diffusion") -> float:
    r"""The automatic leaf term :math:`\lambda = (1 - \varepsilon) / \varepsilon + \lambda_0` (docs/method.md
    section 7), :math:`\lambda_0` the learner's own: :data:`~hdtwd_cli._defaults.DIFFUSION_LEAF_LENGTH` (1) or
    :data:`~hdtwd_cli._defaults.AVERAGE_LEAF_LENGTH` (2, section 14).

    :math:`\varepsilon` is the fraction of the data's energy that the tree's input keeps
    (:attr:`FeatureSpace.shared`): with the latent space, what its ``feature_dims`` dimensions
    capture, the part of the samples that the features SHARE and the tree can represent; the
    rest is feature-specific, and the leaf term gives it the weight :math:`1 - \varepsilon`
    against the tree's :math:`\varepsilon`. Documents (a few dozen words of tens of thousands)
    keep most of their energy outside any low-rank space (CLASSIC: :math:`\varepsilon = 0.19`,
    4.1 + 1; BBCSPORT 0.39, 1.5 + 1). A tree learned from the data columns themselves (cells)
    sees all of it: :math:`\varepsilon = 1`, only :math:`\lambda_0`. :math:`\lambda_0` is the feature-resolution
    term a tree whose coarse levels carry the hierarchy still needs (the fine clusters of noisy features are
    not resolved by any tree; RESULTS.md section 15).
    """
    own = AVERAGE_LEAF_LENGTH if learner == "average" else DIFFUSION_LEAF_LENGTH
    return (1.0 - shared) / max(shared, 1e-3) + own
