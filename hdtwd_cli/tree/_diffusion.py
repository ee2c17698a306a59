r"""Feature diffusion operator (paper Sec. 3.2 and Eq. 1; docs/method.md section 1).

The tree is learned over the m FEATURES (columns of the n x m data matrix ``X``).  Each feature
is the vector :math:`a_j = X_{:,j} \in \mathbb{R}^n` and the diffusion operator is built from
their pairwise distances:

1. initial distance, cosine by default,
   :math:`d(j,j') = 1 - \langle a_j, a_{j'}\rangle / (\lVert a_j\rVert \lVert a_{j'}\rVert)`, or the
   correlation distance, the cosine of the centred columns :math:`a_j - \bar a_j \mathbf 1`;
2. kernel scale :math:`\epsilon = c\,\sigma`, :math:`\sigma = \operatorname{median}_{j<j'} d(j,j')`;
3. Gaussian kernel :math:`Q = \exp(-d^2/\epsilon)`;
4. density normalisation (alpha = 1) :math:`\hat Q = D^{-1} Q D^{-1}`, :math:`D = \mathrm{diag}(Q\mathbf 1)`;
5. column-stochastic :math:`P = \hat Q \hat D^{-1}`, :math:`\hat D = \mathrm{diag}(\hat Q \mathbf 1)`.

Fractional powers are taken through the symmetric conjugate
:math:`S = \hat D^{-1/2} \hat Q \hat D^{-1/2} = V \Lambda V^\top`, so that
:math:`P^t = \hat D^{1/2} V \Lambda^t V^\top \hat D^{-1/2}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import Bandwidth, Metric
from hdtwd_cli._runtime.blas import block_pairs as _block_pairs
from hdtwd_cli._runtime.blas import gram_upper, symmetric_eigh
from hdtwd_cli._runtime.blas import mirror_upper as _mirror_upper
from hdtwd_cli._runtime.sparse import require_canonical
from hdtwd_cli.errors import ParameterError
from hdtwd_cli.tree._denoise import DenoisedRows, ordered_column_sums

__all__ = [
    "DiffusionOperator",
    "feature_distances",
    "zero_rounding",
    "kernel_scale",
    "diffusion_operator",
    "operator_from_distances",
    "diffusion_densities",
    "clip_negative",
    "diffusion_sqrt_densities",
    "EIGENVALUE_FLOOR",
    "POWER_DTYPE",
    "column_scale",
    "column_gram",
    "column_sums",
    "correlation_gram",
    "inverse_spread",
    "SPREAD_ROUNDING",
]


#: Eigenvalues of the symmetric conjugate are clipped to ``[EIGENVALUE_FLOOR, 1]`` before the
#: fractional power ``lambda ** t``; the cosine Gaussian kernel is not positive semi-definite.
EIGENVALUE_FLOOR = 1e-12

#: Distances at or below the rounding error of their formula are exactly 0 (:func:`zero_rounding`):
#: ``1 - cos`` of two identical unit columns is a few 1e-16 (not 0, and not the same on every CPU),
#: and ``sqrt(|a|^2 + |b|^2 - 2 a.b)`` of two identical columns about 1e-8 of their norm.
COSINE_ROUNDING = 1e-9
EUCLIDEAN_ROUNDING = 1e-6
#: A column whose centred squared norm is at most this share of its squared norm has no spread beyond the
#: rounding of the centring (:func:`correlation_gram`): it is treated as constant (no correlation with any column).
SPREAD_ROUNDING = 1e-12

#: Precision of the BLAS product :math:`S^t = W W^\top` behind the embedding
#: (:func:`diffusion_sqrt_densities`): float32, like the HD-LCA Gram matrices
#: (:data:`hdtwd_cli.tree._hd_lca.PRODUCT_DTYPE`). ``W`` is formed in float64 and rounded once; the scaling,
#: clipping and square root run in float64. Tolerance: docs/method.md section 3.
POWER_DTYPE = np.float32


@dataclass(frozen=True)
class DiffusionOperator:
    r"""Spectral form of the column-stochastic feature diffusion operator ``P``.

    Attributes
    ----------
    eigenvalues : ndarray, shape (m,)
        Eigenvalues of :math:`S` clipped to ``[floor, 1]``, in descending order.
    eigenvectors : ndarray, shape (m, m)
        Orthonormal eigenvectors :math:`V` of :math:`S` (columns).
    sqrt_degree : ndarray, shape (m,)
        :math:`\hat D^{1/2}`, the square root of the degrees of :math:`\hat Q`.
    raw_eigenvalues : ndarray, shape (m,)
        Eigenvalues before clipping.
    eps : float
        Kernel scale actually used, :math:`\epsilon = c\sigma`.
    sigma : float
        Median pairwise initial distance.
    clipped_spectral_mass : float
        :math:`\sum_i |\lambda_i - \mathrm{clip}(\lambda_i)| / \sum_i |\lambda_i|`.
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    sqrt_degree: np.ndarray
    raw_eigenvalues: np.ndarray
    eps: float
    sigma: float
    clipped_spectral_mass: float

    @property
    def n_features(self) -> int:
        return int(self.eigenvalues.shape[0])

    @property
    def density_width(self) -> int:
        """Densities are over all ``m`` features."""
        return self.n_features

    def densities(self, t: float) -> tuple[np.ndarray, float]:
        """Densities of every feature at time ``t`` (see :func:`diffusion_densities`)."""
        return diffusion_densities(self, t)

    def sqrt_densities(self, t: float, dtype: Any = np.float64) -> tuple[np.ndarray, float]:
        """Their square roots in ``dtype`` (see :func:`diffusion_sqrt_densities`)."""
        return diffusion_sqrt_densities(self, t, dtype)


def column_gram(
    X: np.ndarray | sp.spmatrix | DenoisedRows, scale: np.ndarray | float = 1.0, *, release: bool = False
) -> np.ndarray:
    """Dense m x m Gram matrix of the columns of ``X / scale`` (:func:`_kernels.column_gram_csr` when X is sparse,
    :func:`~hdtwd_cli._runtime.blas.gram_upper`'s tiles on every core when dense, streamed over row
    blocks for denoised rows; ``release``: their kept Gram matrix is handed over, :meth:`DenoisedRows.gram_upper`).

    Dividing by a per-column (cosine) or global (euclidean) scale first keeps huge counts from
    overflowing the products; the distances are unchanged (cosine) or rescaled back (euclidean).
    """
    if isinstance(X, DenoisedRows):
        return _mirror_upper(X.gram_upper(scale, release=release))
    if sp.issparse(X):
        from hdtwd_cli.tree._kernels import column_gram_csr

        X = require_canonical(X)  # x / s as x * (1 / s): s is a power of two, so exact and the same bits
        inv = 1.0 / np.broadcast_to(np.asarray(scale, dtype=np.float64), (X.shape[1],))
        return column_gram_csr(sp.csr_matrix((X.data * inv[X.indices], X.indices, X.indptr), shape=X.shape))
    X = np.asarray(X, dtype=np.float64) / scale
    return _mirror_upper(gram_upper(X.T))


def column_scale(X: np.ndarray | sp.spmatrix | DenoisedRows) -> np.ndarray:
    """Per-column scale: a power of two within a factor 2 of the column's largest value.

    Dividing by a power of two is exact, so integer counts keep exact products and sums whatever
    the storage (dense or sparse) and the distances are the same bit for bit.
    """
    if isinstance(X, DenoisedRows):  # non-negative values
        m = X.column_stats()[1]
    elif sp.issparse(X):
        from hdtwd_cli.tree._kernels import column_absmax_csr

        m = column_absmax_csr(X)
    else:  # max |x| = max(max x, -min x): two reductions, no |X| copy (exact either way)
        X = np.asarray(X)
        m = np.maximum(X.max(axis=0), -X.min(axis=0)) if X.shape[0] else np.zeros(X.shape[1])
    _, e = np.frexp(np.where(m > 0, m, 1.0))  # m = f * 2**e, 0.5 <= f < 1
    return np.ldexp(1.0, e - 1)


def column_sums(X: np.ndarray | sp.spmatrix | DenoisedRows, scale: np.ndarray) -> np.ndarray:
    """Column sums of ``X / scale``: the sums of ``X`` over the rows in order
    (:func:`_denoise.ordered_column_sums`: dense and sparse storage give the same bits), divided by the
    power-of-two ``scale`` (exact)."""
    return (X.column_sums() if isinstance(X, DenoisedRows) else ordered_column_sums(X)) / scale


def correlation_gram(
    X: np.ndarray | sp.spmatrix | DenoisedRows, *, release: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    r"""The centred Gram matrix of the columns and the inverse norms of the centred columns.

    With the columns scaled by powers of two (:func:`column_scale`, exact), ``G`` their Gram matrix
    (:func:`column_gram`) and ``s`` their sums (:func:`column_sums`),

    .. math:: C = G - s\,s^\top / n = (X_s - \mathbf 1 \bar x^\top)^\top (X_s - \mathbf 1 \bar x^\top),

    formed in place by row blocks (no second ``m x m`` array, and no centred copy of a sparse ``X``).
    ``inv[j]`` is :math:`C_{jj}^{-1/2}`, or 0 for a column without spread (:data:`SPREAD_ROUNDING`):
    Pearson's :math:`r_{jl} = C_{jl}\,\mathrm{inv}_j \mathrm{inv}_l`, and 0 against a constant column.
    ``release``: as for :func:`column_gram`.

    Returns
    -------
    C : ndarray, shape (m, m)
    inv : ndarray, shape (m,)
    """
    n, m = X.shape
    scale = column_scale(X)
    G = column_gram(X, scale, release=release)
    s = column_sums(X, scale)  # after: the denoised rows' Gram pass reads their sums too
    norm2 = np.diag(G).copy()
    mean = s / n
    for i0 in range(0, m, 1024):  # C = G - s mean^T by row blocks: no m x m temporary
        G[i0 : i0 + 1024] -= np.outer(s[i0 : i0 + 1024], mean)
    return G, inverse_spread(np.diag(G).copy(), norm2)


def inverse_spread(var: np.ndarray, norm2: np.ndarray) -> np.ndarray:
    """``1 / sqrt(var)`` per column, 0 where the centred squared norm ``var`` is within the rounding of the
    centring of the squared norm ``norm2`` (:data:`SPREAD_ROUNDING`: a constant column, uncorrelated with every
    other); refuses data in which fewer than two columns vary (they have no correlations)."""
    spread = var > SPREAD_ROUNDING * norm2
    if np.count_nonzero(spread) < 2:
        raise ValueError("fewer than two features vary across the samples: no correlations (too few samples?)")
    return np.where(spread, 1.0 / np.sqrt(np.where(spread, var, 1.0)), 0.0)


def zero_rounding(D: np.ndarray, metric: Metric, sq_rows: np.ndarray, sq_cols: np.ndarray) -> None:
    r"""Set, in place, the distances that are zero up to the rounding of their formula to exactly 0.

    ``cosine`` and ``correlation``: :math:`d \le` :data:`COSINE_ROUNDING`; ``euclidean`` (``D`` in the scaled units of
    the squared norms ``sq``): :math:`d \le` :data:`EUCLIDEAN_ROUNDING` :math:`\sqrt{s_j + s_l}`.

    Why: the self-tuning bandwidth replaces a zero k-th neighbour distance by the median (a
    feature with k identical copies), so a distance that is 0 on one CPU and 3e-16 on another
    gives kernels that differ by 1.0, and so different trees on the AVX-512 and AVX2 code paths
    (docs/method.md section 10). Identical columns are now
    identical on every CPU; two genuinely different features are never this close. Row blocks of
    256: the masks and tolerances take 256 x m' values, never another m x m array.
    """
    for i0 in range(0, D.shape[0], 256):
        blk = D[i0 : i0 + 256]
        if metric != "euclidean":
            tol: np.ndarray | float = COSINE_ROUNDING
        else:
            tol = np.sqrt(sq_rows[i0 : i0 + 256, None] + sq_cols[None, :])
            tol *= EUCLIDEAN_ROUNDING
        np.copyto(blk, 0.0, where=blk <= tol)


def feature_distances(X: np.ndarray | sp.spmatrix | DenoisedRows, metric: Metric = "cosine") -> np.ndarray:
    r"""Initial distances between the feature columns of ``X`` (docs/method.md section 1, step 1).

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, m)
        Samples x features, non-negative. No column may be all zero.
    metric : {"cosine", "correlation", "euclidean"}
        ``cosine``: :math:`d = 1 - \cos(a_j, a_{j'})`, clipped to ``[0, 2]``;
        ``correlation``: :math:`d = 1 - r_{jj'}`, Pearson's correlation across the samples (the cosine of
        the centred columns, :func:`correlation_gram`), clipped to ``[0, 2]``; a constant column is at
        distance 1 from every other;
        ``euclidean``: :math:`d = \lVert a_j - a_{j'}\rVert_2`.

    Returns
    -------
    ndarray, shape (m, m)
        Symmetric with a zero diagonal; distances within rounding of 0 are exactly 0
        (:func:`zero_rounding`).
    """
    if metric == "correlation":
        C, inv = correlation_gram(X)
        for i0 in range(0, C.shape[0], 1024):  # 1 - C_jl (inv_j inv_l) by row blocks
            C[i0 : i0 + 1024] *= inv[i0 : i0 + 1024, None] * inv[None, :]
        D = np.subtract(1.0, C, out=C)
        np.clip(D, 0.0, 2.0, out=D)
        zero_rounding(D, "correlation", inv, inv)
        np.fill_diagonal(D, 0.0)
        return _mirror_upper(D)  # the centring's products are not symmetric to the last bit
    colmax = column_scale(X)
    if metric == "cosine":
        G = column_gram(X, colmax)
    else:
        G = column_gram(X, float(colmax.max()))
    sq = np.diag(G).copy()
    if metric == "cosine":
        if np.any(sq <= 0):
            raise ValueError("cosine distance is undefined for an all-zero feature column")
        inv = 1.0 / np.sqrt(sq)
        G *= inv[:, None]  # 1 - (G * inv_j) * inv_j', in place: the operations of the expression
        G *= inv[None, :]
        D = np.subtract(1.0, G, out=G)
        np.clip(D, 0.0, 2.0, out=D)
        zero_rounding(D, "cosine", sq, sq)
    elif metric == "euclidean":
        D = sq[:, None] + sq[None, :] - 2.0 * G
        np.maximum(D, 0.0, out=D)
        np.sqrt(D, out=D)
        zero_rounding(D, "euclidean", sq, sq)
        D *= float(colmax.max())
    else:
        raise ValueError(f"unknown metric {metric!r}")
    np.fill_diagonal(D, 0.0)
    return D


def kernel_scale(D: np.ndarray) -> float:
    r"""Median of the off-diagonal distances, :math:`\sigma = \operatorname{median}_{j<j'} d(j,j')`."""
    m = D.shape[0]
    if m < 2:
        raise ValueError("at least two features are needed")
    # the upper triangle copied row by row and partitioned in place: the same multiset as
    # ``D[np.triu_indices(m, 1)]`` (so the same median, bit for bit) without the two index arrays
    # of m^2/2 int64 each and their gather
    upper = np.concatenate([D[i, i + 1 :] for i in range(m - 1)])
    return float(np.median(upper, overwrite_input=True))


def _symmetrize(A: np.ndarray, block: int = 256) -> np.ndarray:
    """``A = (A + A^T) * 0.5`` in place, block pair by block pair (each pair and its transpose in cache).

    The same bits as ``A += A.T; A *= 0.5`` (every entry is ``(a_ij + a_ji) * 0.5``) without that
    expression's strided pass over the whole matrix and its temporary copy.
    """
    for I, J in _block_pairs(A.shape[0], block):
        avg = A[I, J] + A[J, I].T
        avg *= 0.5
        A[I, J] = avg
        A[J, I] = avg.T
    return A


def diffusion_operator(
    X: np.ndarray | sp.spmatrix | DenoisedRows,
    eps: float = 1.0,
    metric: Metric = "cosine",
    eigenvalue_floor: float = EIGENVALUE_FLOOR,
    bandwidth: Bandwidth = "median",
    knn: int = 7,
) -> DiffusionOperator:
    r"""Build the alpha = 1 feature diffusion operator ``P`` in spectral form (Eq. 1).

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, m)
        Samples x features.
    eps : float
        Multiplier ``c`` of the median distance: :math:`\epsilon = c\,\sigma` (paper grid
        ``{0.1, 1, 2, 5, 10}``).
    metric : {"cosine", "correlation", "euclidean"}
        Initial distance between feature columns (:func:`feature_distances`).
    eigenvalue_floor : float
        Eigenvalues of :math:`S` are clipped to ``[eigenvalue_floor, 1]``.
    bandwidth : {"median", "knn"}
        ``median``: one global scale :math:`\epsilon = c\sigma` (the paper). ``knn``: the
        self-tuning kernel of Zelnik-Manor & Perona (2004),
        :math:`Q_{jj'} = \exp(-d^2 / (c\,\sigma_j\sigma_{j'}))` with :math:`\sigma_j` the distance
        from feature ``j`` to its ``knn``-th nearest feature.
    knn : int
        Neighbour rank of the self-tuning bandwidth.

    Returns
    -------
    DiffusionOperator
        :math:`S = \hat D^{-1/2}\hat Q\hat D^{-1/2} = V\Lambda V^\top` with
        :math:`\hat Q = D^{-1} e^{-d^2/\epsilon} D^{-1}`.

    Notes
    -----
    The reference code uses ``exp(-d / sigma)``; the paper's text (and this function) use
    :math:`\exp(-d^2/\epsilon)` (docs/method.md section 1, step 3).
    """
    if not eps > 0:
        raise ParameterError("(the kernel scale multiplier) must be positive", "eps")
    return operator_from_distances(feature_distances(X, metric), eps, eigenvalue_floor, bandwidth, knn)


def operator_from_distances(
    D: np.ndarray,
    eps: float = 1.0,
    eigenvalue_floor: float = EIGENVALUE_FLOOR,
    bandwidth: Bandwidth = "median",
    knn: int = 7,
) -> DiffusionOperator:
    r"""The operator of :func:`diffusion_operator` from a given symmetric distance matrix (steps 2-5).

    ``D`` (``m x m``, zero diagonal) is overwritten. The entry point for items whose distances
    are not those of vectors under one metric: the samples' and features' trees of the joint
    hierarchies read their (informed) tree-Wasserstein distances here.
    """
    if not eps > 0:
        raise ParameterError("(the kernel scale multiplier) must be positive", "eps")
    sigma = kernel_scale(D)
    if not sigma > 0:
        raise ValueError("all features are proportional across the samples (median distance is 0; too few samples?)")
    eps_used = float(eps) * sigma
    if bandwidth == "knn":
        kk = min(max(int(knn), 1), D.shape[0] - 1)
        local = np.partition(D, kk, axis=1)[:, kk]
        local = np.where(local > 0, local, sigma)
        np.square(D, out=D)
        D /= -(float(eps) * local[:, None] * local[None, :])
        eps_used = float(eps) * float(np.median(local)) ** 2
    elif bandwidth == "median":
        np.square(D, out=D)
        D /= -eps_used
    else:
        raise ValueError(f"unknown bandwidth {bandwidth!r}")
    Q = np.exp(D, out=D)
    q = Q.sum(axis=1)
    Q /= q[:, None]
    Q /= q[None, :]  # Qh = D^-1 Q D^-1
    qh = Q.sum(axis=1)
    s = 1.0 / np.sqrt(qh)
    Q *= s[:, None]
    Q *= s[None, :]  # S = Dh^-1/2 Qh Dh^-1/2
    S = _symmetrize(Q)  # exactly symmetric (the sums above are not, to the last bit)
    del Q
    # LAPACK's divide and conquer on S^T (= S, Fortran order), its back-transformation on every
    # core in fixed blocks: the bits of one-threaded syevd at any thread count
    lam, V = symmetric_eigh(S.T)
    del S
    lam = lam[::-1].copy()
    V = V[:, ::-1]  # descending order: a view of LAPACK's column-major output (no 128 MB copy at m = 4,000)
    clipped = np.clip(lam, eigenvalue_floor, 1.0)
    total = float(np.abs(lam).sum())
    mass = float(np.abs(lam - clipped).sum() / total) if total > 0 else 0.0
    return DiffusionOperator(
        eigenvalues=clipped,
        eigenvectors=V,
        sqrt_degree=np.sqrt(qh),
        raw_eigenvalues=lam,
        eps=eps_used,
        sigma=sigma,
        clipped_spectral_mass=mass,
    )


def clip_negative(phi: np.ndarray) -> float:
    r"""Set the negative entries of ``phi`` to 0 in place; return their mass over the number of rows.

    :math:`\big(\sum_{ij} \max(\phi_{ij}, 0) - \sum_{ij}\phi_{ij}\big) / m`, from two sums
    (no boolean mask, no copy of ``phi``).
    """
    before = float(phi.sum(dtype=np.float64))
    np.maximum(phi, 0, out=phi)
    return max(0.0, (float(phi.sum(dtype=np.float64)) - before) / phi.shape[0])


def _power_upper(op: DiffusionOperator, t: float, dtype: Any = np.float64) -> np.ndarray:
    r""":math:`S^t = V\Lambda^t V^\top` with the entries ``[j, i]``, ``i >= j``, filled (C order).

    :math:`W W^\top` with :math:`W = V\Lambda^{t/2}` (computed in float64, rounded once to
    ``dtype``, the precision of the product) by :func:`~hdtwd_cli._runtime.blas.gram_upper`: half a
    GEMM on every core, and no mirror pass (S^t is
    symmetric; :func:`_symmetric_power` mirrors it where the full matrix is wanted).
    """
    V, lam = op.eigenvectors, op.eigenvalues
    if lam.min() < 0:  # a negative floor (tests, integer t): the general product, all entries
        return ((V * (lam**t)[None, :]) @ V.T).astype(dtype, copy=False)
    W = np.empty_like(V, dtype=dtype, order="K")  # V's (column-major) layout
    np.multiply(V, (lam ** (0.5 * t))[None, :], out=W, casting="same_kind")
    return gram_upper(W)


def _symmetric_power(op: DiffusionOperator, t: float, dtype: Any = np.float64) -> np.ndarray:
    r"""The full :math:`S^t`: :func:`_power_upper` mirrored (exactly symmetric)."""
    return _mirror_upper(_power_upper(op, t, dtype))


def _scaled(St: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, float]:
    r""":math:`\phi = \hat D^{-1/2} S^t \hat D^{1/2}` in place on ``St``, negatives clipped (:func:`clip_negative`)."""
    St *= s[None, :]
    St /= s[:, None]
    return St, clip_negative(St)


def diffusion_sqrt_densities(op: DiffusionOperator, t: float, dtype: Any = np.float64) -> tuple[np.ndarray, float]:
    r""":math:`\psi = \sqrt{\phi}` of the densities at time ``t`` in ``dtype``, without forming ``phi``.

    :math:`S^t` is the float32 product (:data:`POWER_DTYPE`), its upper triangle only
    (:func:`_power_upper`); one compiled pass over it (:func:`_kernels.sqrt_densities`, tile by
    tile, both ``[j, i]`` and ``[i, j]`` from each value) does the scaling, the clipping and the
    root in float64, in the order of :func:`diffusion_densities` (NumPy's passes on the mirrored
    matrix for a small ``m``, the same bits), and rounds once to ``dtype``. Hence ``psi`` in
    float32 is the float32 rounding of ``psi`` in float64. The clipped mass is summed in another
    order (equal to rounding).
    """
    from hdtwd_cli._runtime import twins
    from hdtwd_cli.tree._kernels import sqrt_densities

    St = _power_upper(op, t, POWER_DTYPE)
    if St.size <= twins.SMALL_WORK:  # no numba start-up
        phi, neg = _scaled(_mirror_upper(St).astype(np.float64), op.sqrt_degree)
        return np.sqrt(phi, out=phi).astype(dtype, copy=False), neg
    return sqrt_densities(St, op.sqrt_degree, dtype)


def diffusion_densities(op: DiffusionOperator, t: float) -> tuple[np.ndarray, float]:
    r"""Diffusion densities :math:`\phi_j = P^t e_j` of every feature, one per ROW.

    :math:`P^t = \hat D^{1/2} V \Lambda^t V^\top \hat D^{-1/2}`; row ``j`` of the result is
    column ``j`` of :math:`P^t`, i.e. row ``j`` of
    :math:`(P^t)^\top = \hat D^{-1/2} V \Lambda^t V^\top \hat D^{1/2}`. Each row sums to 1.
    The symmetric middle factor is formed as :math:`S^t = W W^\top` with
    :math:`W = V\Lambda^{t/2}` (when the clipped eigenvalues are non-negative, as by default), which BLAS computes as a
    symmetric rank-k update: half the flops of a general product, and exactly symmetric.
    This float64 form is the reference; the embedding takes the float32 product
    (:func:`diffusion_sqrt_densities`).

    Parameters
    ----------
    op : DiffusionOperator
    t : float
        Diffusion time (the paper uses the dyadic grid ``t = 2**-k``).

    Returns
    -------
    phi : ndarray, shape (m, m)
        Densities, negative entries clipped to 0.
    negative_mass : float
        Mass of the negative entries that were clipped, as a fraction of the total mass ``m``
        (fractional powers of a stochastic matrix can have negative entries).
    """
    return _scaled(_symmetric_power(op, t), op.sqrt_degree)
