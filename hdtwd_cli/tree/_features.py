r"""Feature weights and the features' ambient space (docs/method.md section 7; departures from the paper).

The paper builds its diffusion operator on the features' ambient vectors: word2vec vectors for
words, Gene2vec vectors for genes (its Sec. 5). hdtwd can take such vectors from a file
(``--feature-embedding``), use the data columns themselves (``feature_space="data"``, the
reference code), or derive a latent space from the data alone (``feature_space="svd"``).

Feature weights (``weighting="idf"``)
    :math:`u_j = \log\frac{1 + n}{1 + \mathrm{df}_j} + 1`, with :math:`\mathrm{df}_j` the number of
    samples in which feature ``j`` is non-zero (the smoothed idf of scikit-learn's
    ``TfidfTransformer``). A sample's values are multiplied by ``u`` before they become a
    histogram, :math:`x_i = (X_i \odot u) / \lVert X_i \odot u\rVert_1`.

Choice of the space (``feature_space="auto"``, the default)
    The diffusion needs features with graded distances. Two data columns that never share a
    sample are at cosine distance exactly 1 from each other, whatever their meaning; when more
    than :data:`NEVER_COOCCUR_LIMIT` of the pairs of features, weighted by their mass, never
    co-occur (:func:`never_cooccur_fraction`: word counts, where frequent words too rarely share a
    document) the latent space is used, otherwise the data columns (cells over measured genes,
    whose columns co-occur: the genes that never meet are the rarely detected ones, which carry
    almost none of the mass).

Latent feature space (``feature_space="svd"``)
    Rows of :math:`X \odot u` scaled to unit Euclidean norm, :math:`M`; its rank-``r`` truncated SVD
    :math:`M \approx U_r \Sigma_r V_r^\top`; feature ``j``'s vector is row ``j`` of
    :math:`V_r \Sigma_r` (latent semantic analysis, Deerwester et al. 1990). On sparse documents
    two word columns rarely share a document, so their cosine distance is exactly 1 and the
    diffusion has no neighbourhoods; in the latent space words that share contexts are near.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import FEATURE_SPACES, WEIGHTINGS
from hdtwd_cli._runtime.blas import serial_blas
from hdtwd_cli._runtime.sparse import require_canonical
from hdtwd_cli.tree._denoise import DenoisedRows

__all__ = [
    "WEIGHTINGS",
    "FEATURE_SPACES",
    "document_frequency",
    "idf_weights",
    "weight_features",
    "latent_feature_space",
    "never_cooccur_fraction",
    "NEVER_COOCCUR_LIMIT",
]

Weighting = Literal["none", "idf"]
#: ``auto`` takes the latent space (and ``denoise="auto"`` does not denoise) when more than this share of the
#: pairs of features, weighted by their mass (:func:`never_cooccur_fraction`), never co-occur: every cell set
#: we have is at most 0.0003 (all genes, rare ones included), sample_data/corpus.npz 0.023, the real corpora
#: 0.23-0.46 (docs/method.md section 7).
NEVER_COOCCUR_LIMIT = 0.1
#: Features sampled to estimate that fraction.
COOCCUR_SAMPLE = 1000
#: Extra random directions of the randomized SVD and its power iterations (Halko et al. 2011).
SVD_OVERSAMPLE = 10
SVD_POWER_ITERATIONS = 4


#: Stored entries counted at a time by :func:`document_frequency`.
_DF_CHUNK = 1 << 22


def document_frequency(X: np.ndarray | sp.spmatrix | DenoisedRows) -> np.ndarray:
    """Number of rows in which each column is non-zero."""
    if isinstance(X, DenoisedRows):
        return X.column_stats()[0]
    if sp.issparse(X):
        C = require_canonical(X)
        df = np.zeros(C.shape[1], dtype=np.int64)
        for s in range(
            0, C.nnz, _DF_CHUNK
        ):  # chunks of stored entries: no nnz-long temporaries, one chunk's mask and bincount at a time
            stored, values = C.indices[s : s + _DF_CHUNK], C.data[s : s + _DF_CHUNK]
            df += np.bincount(stored if values.all() else stored[values != 0], minlength=C.shape[1])
        return df
    return np.count_nonzero(np.asarray(X), axis=0).astype(np.int64)


def idf_weights(X: np.ndarray | sp.spmatrix, df: np.ndarray | None = None) -> np.ndarray:
    r"""Smoothed inverse document frequencies :math:`u_j = \log\frac{1+n}{1+\mathrm{df}_j} + 1` (>= 1);
    ``df``: :func:`document_frequency` of ``X`` when the caller has it."""
    n = X.shape[0]
    return np.log((1.0 + n) / (1.0 + (document_frequency(X) if df is None else df))) + 1.0


def weight_features(X: np.ndarray | sp.spmatrix, weights: np.ndarray | None) -> np.ndarray | sp.csr_matrix:
    """``X`` with column ``j`` multiplied by ``weights[j]`` (a new array; sparse stays sparse)."""
    if weights is None:
        return X
    if sp.issparse(X):
        Y = sp.csr_matrix(X, dtype=np.float64, copy=True)
        Y.data *= weights[Y.indices]
        return Y
    return np.asarray(X, dtype=np.float64) * weights[None, :]


def _row_unit(X: np.ndarray | sp.spmatrix) -> np.ndarray | sp.csr_matrix:
    if sp.issparse(X):
        Y = sp.csr_matrix(X, dtype=np.float64, copy=True)
        s = np.sqrt(
            np.bincount(np.repeat(np.arange(Y.shape[0]), np.diff(Y.indptr)), weights=Y.data**2, minlength=Y.shape[0])
        )
        s[s == 0] = 1.0
        Y.data /= np.repeat(s, np.diff(Y.indptr))
        return Y
    Y = np.array(X, dtype=np.float64)
    s = np.linalg.norm(Y, axis=1)
    s[s == 0] = 1.0
    return Y / s[:, None]


def latent_feature_space(
    X: np.ndarray | sp.spmatrix, dims: int = 100, seed: int = 0, weights: np.ndarray | None = None
) -> np.ndarray:
    r"""Latent vectors of the features, one per COLUMN of the result (module docstring).

    A randomized SVD (Halko, Martinsson & Tropp 2011: a Gaussian test matrix drawn from
    ``numpy.random.default_rng(seed)``, :data:`SVD_POWER_ITERATIONS` QR-orthonormalised power
    iterations) of :math:`M` = the rows of :math:`X \odot u` at unit Euclidean norm.

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, m)
        Samples x features, non-negative.
    dims : int
        Rank ``r`` (capped at ``min(n, m) - 1``).
    weights : ndarray, shape (m,), optional
        Column weights ``u`` (default: :func:`idf_weights` of ``X``).

    Returns
    -------
    ndarray, shape (r, m)
        :math:`\Sigma_r V_r^\top`: column ``j`` is feature ``j``'s vector, so the result can stand in
        for the data wherever the diffusion reads feature columns.
    """
    n, m = X.shape
    r = int(max(1, min(dims, min(n, m) - 1)))
    u = idf_weights(X) if weights is None else weights
    # one storage (CSR) whatever the input's, so dense and sparse files give the same bits
    M = _row_unit(weight_features(sp.csr_matrix(X, dtype=np.float64), u))
    rng = np.random.default_rng(seed)
    p = min(r + SVD_OVERSAMPLE, min(n, m))
    Q = np.asarray(M @ rng.standard_normal((m, p)))
    with serial_blas():  # the same bits at any thread count
        Q, _ = np.linalg.qr(Q)
        for _ in range(SVD_POWER_ITERATIONS):
            Z, _ = np.linalg.qr(np.asarray(M.T @ Q))
            Q, _ = np.linalg.qr(np.asarray(M @ Z))
        B = np.asarray((M.T @ Q).T)  # p x m, M ~ Q B
        _, s, Vt = np.linalg.svd(B, full_matrices=False)
    # fix each singular vector's sign (largest |entry| positive) so the result is reproducible
    sign = np.sign(Vt[np.arange(Vt.shape[0]), np.argmax(np.abs(Vt), axis=1)])
    sign[sign == 0] = 1.0
    return np.ascontiguousarray((s[:r, None] * Vt[:r]) * sign[:r, None])


def never_cooccur_fraction(
    X: np.ndarray | sp.spmatrix, sample: int = COOCCUR_SAMPLE, seed: int = 0, df: np.ndarray | None = None
) -> float:
    r"""Share of the pairs of (non-zero) feature columns that share no sample, each pair weighted by its mass.

    With :math:`w_j` column ``j``'s share of the values' total and :math:`N_{jk} = 1` when columns ``j``
    and ``k`` are never non-zero in the same sample,

    .. math:: \nu = \frac{\sum_{j \ne k} w_j w_k N_{jk}}{\sum_{j \ne k} w_j w_k}.

    Weighted so that what is measured is the data's mass, not the count of rarely detected features:
    an all-genes matrix has thousands of genes seen in a handful of cells, whose pairs never meet
    (half of all pairs on 20,000 genes) while they hold almost none of the counts; words that never
    share a document are frequent ones too. Estimated on ``sample`` columns drawn with
    ``numpy.random.default_rng(seed)`` (all columns when there are fewer), from the co-occurrence counts
    :math:`B^\top B` of the 0/1 presence matrix ``B`` (:func:`_kernels.column_gram_csr` for sparse
    data, a float32 BLAS product otherwise; counts below :math:`2^{24}` are exact either way). ``df``:
    :func:`document_frequency` of ``X`` when the caller has it.
    """
    df = document_frequency(X) if df is None else df
    cols = np.flatnonzero(df > 0)
    if cols.size < 2:
        return 0.0
    if cols.size > sample:
        cols = np.sort(np.random.default_rng(seed).choice(cols, size=sample, replace=False))
    if sp.issparse(X):
        from hdtwd_cli.tree._kernels import column_gram_csr, column_presence_csr

        met = column_gram_csr(column_presence_csr(X, cols)) != 0
        S = sp.csr_matrix(X)[:, cols]  # the sampled columns only: never a copy of the whole matrix
    else:
        A = np.asarray(X)[:, cols]
        B = (A != 0).astype(np.float32)
        met = (B.T @ B) != 0
        S = sp.csr_matrix(A)
    # the columns' masses summed in one order (rows in turn) for dense and sparse storage alike: the same bits
    S.sum_duplicates()
    mass = np.bincount(S.indices, weights=np.abs(S.data).astype(np.float64), minlength=cols.size)
    w = mass / mass.sum()
    # NumPy's own sums, not BLAS products: the same bits at any thread count
    own = float((w * w).sum())  # the diagonal: every column meets itself
    pairs = 1.0 - own  # sum over j != k of w_j w_k, with sum w = 1
    if not pairs > 0:
        return 0.0
    together = float((w * np.where(met, w[None, :], 0.0).sum(axis=1)).sum()) - own
    return float(min(1.0, max(0.0, 1.0 - together / pairs)))
