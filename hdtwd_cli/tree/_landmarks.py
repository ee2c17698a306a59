r"""Landmark diffusion for large feature counts (Roseland, Shen & Wu 2022; docs/method.md section 6).

The exact operator of :mod:`._diffusion` needs an ``m x m`` kernel and its eigendecomposition
(:math:`O(m^3)` time, :math:`m^2` memory). With ``m'`` landmarks :math:`l_1..l_{m'}` (feature
columns chosen at random, or k-means centroids of the feature columns) only the ``m x m'``
affinity

.. math:: W_{jl} = \exp\big(-d(x_j, l_l)^2 / \epsilon\big)

is formed, and the paper's alpha = 1 normalisation is applied to the composite kernel
:math:`A = W W^\top` in factored form (never forming ``A``):

.. math::
   d = W (W^\top \mathbf 1),\quad B = \mathrm{diag}(d)^{-1} W,\quad b = B^\top \mathbf 1,\quad
   \tilde d = B b,\quad C = \mathrm{diag}(\tilde d)^{-1/2} B = U \Sigma V^\top .

Then :math:`R = \mathrm{diag}(\tilde d)^{-1} B\,\mathrm{diag}(b)` (feature -> landmark) and
:math:`S = \mathrm{diag}(b)^{-1} B^\top` (landmark -> feature) are row-stochastic and
:math:`R S = \tilde D^{-1} \hat A` is the alpha = 1 (row-stochastic) operator of ``A``.
The landmark-restricted densities of feature ``j`` at time ``t`` are the ``m'``-vectors

.. math:: \rho_j^t = R_j (S R)^t = \tilde d_j^{-1/2}\, U_j \Sigma^{2t+1} V^\top \mathrm{diag}(b),

whose rows sum to 1; the embedding uses :math:`\psi_j^k = \sqrt{\max(\rho_j^{2^{-k}}, 0)}`.
Here :math:`U\Sigma = C V` and :math:`V, \Sigma^2` come from the ``m' x m'`` Gram matrix
:math:`C^\top C = V \Sigma^2 V^\top` (``eigh`` in float64), so the cost is :math:`O(m\,m'^2)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import (
    AUTO_LANDMARKS_ABOVE,
    DEFAULT_LANDMARKS,
    LANDMARK_METHODS,
)
from hdtwd_cli._runtime.blas import serial_blas
from hdtwd_cli.errors import InputError, ParameterError
from hdtwd_cli.tree._denoise import BLOCK_ROWS, DenoisedRows
from hdtwd_cli.tree._diffusion import (
    EIGENVALUE_FLOOR,
    Bandwidth,
    Metric,
    clip_negative,
    column_scale,
    column_sums,
    inverse_spread,
    zero_rounding,
)

__all__ = [
    "LandmarkOperator",
    "StreamedColumns",
    "LANDMARK_METHODS",
    "AUTO_LANDMARKS_ABOVE",
    "DEFAULT_LANDMARKS",
    "MIN_AFFINITY",
    "effective_landmarks",
    "select_landmarks",
    "landmark_distances",
    "landmark_affinity",
    "landmark_factors",
    "landmark_operator",
    "landmark_operator_from_distances",
    "landmark_densities",
]

LandmarkMethod = Literal["random", "kmeans"]
#: The smallest allowed row sum of ``W`` (a feature far from every landmark has no transition).
MIN_AFFINITY = 1e-12
KMEANS_ITERATIONS = 10


def effective_landmarks(requested: int | None, m: int) -> int:
    """Number of landmarks actually used: ``0`` means the exact path.

    ``None`` is the automatic choice: exact up to :data:`AUTO_LANDMARKS_ABOVE` features, then
    :data:`DEFAULT_LANDMARKS` landmarks. A request of ``m`` or more is capped at ``m``.
    """
    if requested is None:
        return 0 if m <= AUTO_LANDMARKS_ABOVE else min(DEFAULT_LANDMARKS, m)
    if requested < 0:
        raise ParameterError("must be >= 0", "landmarks")
    if requested == 1:
        raise ParameterError("needs at least 2 landmarks (or 0 for the exact operator)", "landmarks")
    return min(int(requested), m)


@dataclass(frozen=True)
class LandmarkOperator:
    r"""Spectral form of the landmark diffusion operator :math:`R S` (module docstring).

    Attributes
    ----------
    eigenvalues : ndarray, shape (m',)
        :math:`\sigma_i^2`, eigenvalues of :math:`S R` (equivalently of :math:`C^\top C`), clipped
        to ``[floor, 1]``, descending; ``eigenvalues[0] = 1``.
    raw_eigenvalues : ndarray, shape (m',)
        Before clipping.
    left : ndarray, shape (m, m')
        :math:`\tilde D^{-1/2} C V` (equal to :math:`\tilde D^{-1/2} U \Sigma`).
    right : ndarray, shape (m', m')
        :math:`V^\top \mathrm{diag}(b)`.
    sqrt_degree : ndarray, shape (m,)
        :math:`\tilde d^{1/2}`.
    landmarks : ndarray of int64, shape (m',)
        Feature index of each landmark (``random``), or of the feature nearest each centroid
        (``kmeans``).
    method : str
        ``random`` or ``kmeans``.
    eps, sigma, clipped_spectral_mass, min_affinity : float
        Kernel scale used, median feature-landmark distance, clipped spectral mass and the
        smallest row sum of ``W`` over the placed features.
    unplaced : ndarray of int64
        Columns of ``X`` whose affinity to every landmark is below :data:`MIN_AFFINITY`: the
        diffusion cannot place them, so they have no row here (the rows are the other columns,
        in order) and hang from the root of the tree (docs/method.md section 6).
    """

    eigenvalues: np.ndarray
    raw_eigenvalues: np.ndarray
    left: np.ndarray
    right: np.ndarray
    sqrt_degree: np.ndarray
    landmarks: np.ndarray
    method: str
    eps: float
    sigma: float
    clipped_spectral_mass: float
    min_affinity: float
    unplaced: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def n_features(self) -> int:
        return int(self.left.shape[0])

    @property
    def n_landmarks(self) -> int:
        return int(self.left.shape[1])

    @property
    def density_width(self) -> int:
        """Densities are over the landmarks."""
        return self.n_landmarks

    def densities(self, t: float) -> tuple[np.ndarray, float]:
        """Landmark-restricted densities ``rho^t`` (see :func:`landmark_densities`)."""
        return landmark_densities(self, t)

    def sqrt_densities(self, t: float, dtype: Any = np.float64) -> tuple[np.ndarray, float]:
        """Their square roots, computed in float64 and rounded to ``dtype``."""
        rho, neg = landmark_densities(self, t)
        return np.sqrt(rho, out=rho).astype(dtype, copy=False), neg


class StreamedColumns:
    r"""The scaled feature columns :math:`X_s` of denoised rows (:class:`~hdtwd_cli.tree._denoise.DenoisedRows`),
    read one block of :data:`~hdtwd_cli.tree._denoise.BLOCK_ROWS` rows at a time: never the ``n x m`` matrix.

    Each block is scaled as :func:`_scaled_columns` scales the whole matrix (the same elementwise
    operations: each entry has the same bits), the squared column norms and every product
    :math:`X_s^\top L` are summed over the blocks in order, each block's product one BLAS call on one
    thread: the same bits at any thread count, and with one block (at most ``BLOCK_ROWS`` rows) the
    bits of the dense matrix. Rows held in memory (:meth:`DenoisedRows.held`) are read instead of
    computed again: the same bits, faster.

    Attributes
    ----------
    sq : ndarray, shape (m,)
        Squared norms of the scaled (for ``correlation``, centred) columns: ones for ``cosine`` and
        ``correlation`` (0 for a constant column).
    scale : float
        The global scale of ``euclidean`` distances (1 otherwise).
    sums : ndarray or None
        ``correlation``: the sums of the scaled columns, whose centring :func:`_products` applies.
    """

    def __init__(self, rows: DenoisedRows, metric: Metric) -> None:
        n, m = rows.shape
        colmax = column_scale(rows)
        self.rows, self.metric = rows, metric
        self.div = colmax if metric != "euclidean" else np.full(m, float(colmax.max()))
        self.mul: np.ndarray | None = None
        self.sums: np.ndarray | None = None
        self._taken: tuple[np.ndarray, np.ndarray] | None = None
        # the scaled columns' squared norms from the statistics' pass: every column is divided by a power of
        # two, which scales its squares and their sums exactly (the bits of summing the scaled blocks' squares)
        sq = rows.column_squares() / (self.div * self.div)
        if metric == "cosine":
            if np.any(sq <= 0):
                raise ValueError("cosine distance is undefined for an all-zero feature column")
            self.mul = 1.0 / np.sqrt(sq)
            sq = np.ones_like(sq)
        elif metric == "correlation":
            s = rows.column_sums() / self.div
            self.mul, sq = _centred_unit(sq, s, n)
            self.sums = s * self.mul
        self.sq = sq
        self.scale = float(self.div.max()) if metric == "euclidean" else 1.0

    @property
    def shape(self) -> tuple[int, int]:
        return self.rows.shape

    def blocks(self) -> Iterator[tuple[slice, np.ndarray]]:
        """``(rows, scaled block)`` in order, each valid until the next is asked for: one buffer serves every
        block (rows computed or copied into it, then scaled in place)."""
        n, m = self.shape
        buf = np.empty((min(n, BLOCK_ROWS), m))
        for i0 in range(0, n, BLOCK_ROWS):
            B = self.rows.rows(np.arange(i0, min(i0 + BLOCK_ROWS, n)), out=buf[: min(BLOCK_ROWS, n - i0)])
            B /= self.div
            if self.mul is not None:
                B *= self.mul
            yield slice(i0, i0 + B.shape[0]), B

    def take(self, columns: np.ndarray, *, with_products: bool = False) -> np.ndarray:
        """The scaled columns ``columns`` (``n x k``, dense; Fortran order, as NumPy's ``X[:, columns]`` gives them).

        ``with_products``: :meth:`t_dot` of the result is computed in the same pass (each block's product
        as :meth:`t_dot` computes it, on the same view of the result: the same bits) and kept for the
        one call of :meth:`t_dot` with that result (random landmarks: the distances to the columns just
        taken), one pass over the denoised rows instead of two.
        """
        out = np.empty((self.shape[0], len(columns)), order="F")
        G: np.ndarray | None = None
        for rows, B in self.blocks():
            out[rows] = B[:, columns]
            if with_products:
                G = _add_product(G, B, out[rows])
        self._taken = None if G is None else (out, G)
        return out

    def t_dot(self, L: np.ndarray | sp.spmatrix) -> np.ndarray:
        """:math:`X_s^\top L` (``m x k``), summed over the row blocks in order."""
        if self._taken is not None and L is self._taken[0]:
            kept, self._taken = self._taken[1], None
            return kept
        G: np.ndarray | None = None
        for rows, B in self.blocks():
            G = _add_product(G, B, L[rows])
        assert G is not None
        return G

    def dot(self, M: sp.spmatrix) -> np.ndarray:
        """:math:`X_s M` (``n x k``, dense, block by block; Fortran order, as SciPy's ``X @ M`` gives it)."""
        out = np.empty((self.shape[0], M.shape[1]), order="F")
        for rows, B in self.blocks():
            out[rows] = np.asarray(B @ M)
        return out


def _add_product(G: np.ndarray | None, B: np.ndarray, L: np.ndarray | sp.spmatrix) -> np.ndarray:
    """``G + B^T L`` (``B^T L`` itself when ``G`` is None): one block's term of :meth:`StreamedColumns.t_dot`."""
    P = B.T @ L
    P = np.asarray(P.toarray() if sp.issparse(P) else P, dtype=np.float64)
    if G is None:
        return P
    G += P
    return G


Scaled: TypeAlias = np.ndarray | sp.csc_matrix | StreamedColumns


def _centred_unit(sq: np.ndarray, sums: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    r"""The factors that make the centred columns unit vectors, and their squared norms after it.

    ``sq`` and ``sums``: the columns' squared norms and sums; the centred squared norm is
    :math:`v = \lVert x\rVert^2 - s^2 / n`. A column without spread beyond the rounding of the centring
    (:data:`~._diffusion.SPREAD_ROUNDING`) gets the factor 0: a zero column, uncorrelated with every other.
    """
    mul = inverse_spread(sq - sums * (sums / n), sq)
    return mul, (mul > 0).astype(np.float64)


def _scaled_columns(
    X: np.ndarray | sp.spmatrix | DenoisedRows | StreamedColumns, metric: Metric
) -> tuple[Scaled, np.ndarray, float, np.ndarray | None]:
    r"""Columns of ``X`` scaled for the metric, their squared norms, the global scale and, for ``correlation``,
    their sums (the centring that :func:`_products` applies).

    cosine: unit columns (scaled first by an exact power of two, so counts cannot overflow);
    correlation: columns whose centred versions are unit vectors, never centred themselves (a sparse
    matrix stays sparse): the products of the centred columns are :math:`X_s^\top L - s\,\bar l^\top`;
    euclidean: ``X / s`` with one power-of-two scale ``s`` (distances are multiplied back by ``s``).
    Sparse input stays sparse (CSC); denoised rows are read by row blocks (:class:`StreamedColumns`).
    """
    if isinstance(X, DenoisedRows):
        X = StreamedColumns(X, metric)
    if isinstance(X, StreamedColumns):
        if X.metric != metric:
            raise ValueError("the streamed columns were scaled for another metric")
        return X, X.sq, X.scale, X.sums
    colmax = column_scale(X)
    scale = colmax if metric != "euclidean" else np.full(X.shape[1], float(colmax.max()))
    if sp.issparse(X):
        Xs = sp.csc_matrix(X, dtype=np.float64) @ sp.diags(1.0 / scale)
        sq = np.asarray(Xs.multiply(Xs).sum(axis=0)).ravel()
    else:
        Xs = np.asarray(X, dtype=np.float64) / scale
        sq = np.einsum("ij,ij->j", Xs, Xs)
    sums = None
    if metric == "cosine":
        if np.any(sq <= 0):
            raise ValueError("cosine distance is undefined for an all-zero feature column")
        inv = 1.0 / np.sqrt(sq)
        sq = np.ones_like(sq)
    elif metric == "correlation":
        s = column_sums(X, scale)
        inv, sq = _centred_unit(sq, s, X.shape[0])
        sums = s * inv
    if metric != "euclidean":
        Xs = Xs @ sp.diags(inv) if sp.issparse(Xs) else Xs * inv[None, :]
        if sp.issparse(Xs):
            Xs = sp.csc_matrix(Xs)
    return Xs, sq, float(scale.max()) if metric == "euclidean" else 1.0, sums


def _gram_with(Xs: Scaled, L: np.ndarray | sp.spmatrix) -> np.ndarray:
    """Dense ``m x m'`` products :math:`X_s^\top L` (sparse-dense or sparse-sparse when X is sparse)."""
    if isinstance(Xs, StreamedColumns):
        return Xs.t_dot(L)
    G = Xs.T @ L
    return np.asarray(G.toarray() if sp.issparse(G) else G, dtype=np.float64)


def _column_means(L: np.ndarray | sp.spmatrix) -> np.ndarray:
    """The mean of each column of ``L`` (dense or sparse)."""
    return np.asarray(L.sum(axis=0), dtype=np.float64).ravel() / L.shape[0]


def _products(Xs: Scaled, sums: np.ndarray | None, L: np.ndarray | sp.spmatrix) -> np.ndarray:
    r"""``m x m'`` products of the columns with ``L``: :math:`X_s^\top L`, and for ``correlation`` (``sums``
    given) those of the centred columns, :math:`(X_s - \mathbf 1 \bar x^\top)^\top L = X_s^\top L - s\,\bar l^\top`
    (``L`` itself need not be centred: a centred column is orthogonal to :math:`\mathbf 1`)."""
    G = _gram_with(Xs, L)
    if sums is not None:
        G -= np.outer(sums, _column_means(L))
    return G


def select_landmarks(
    X: np.ndarray | sp.spmatrix | DenoisedRows | StreamedColumns,
    n_landmarks: int,
    method: LandmarkMethod = "random",
    seed: int = 0,
    metric: Metric = "cosine",
    progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray | sp.spmatrix, np.ndarray]:
    r"""Landmark vectors in feature space (``n x m'``) and the feature index of each landmark.

    ``random``: ``m'`` distinct feature columns drawn with ``numpy.random.default_rng(seed)``.
    ``kmeans``: :data:`KMEANS_ITERATIONS` Lloyd iterations started from those columns
    (spherical k-means for ``cosine``: centroids renormalised to unit length; for ``correlation`` the
    same on the centred columns, so the centroids are centred); a cluster that
    empties keeps its previous centroid. The index returned for a centroid is its nearest feature.
    """
    m = X.shape[1]
    if not 2 <= n_landmarks <= m:
        raise ValueError(f"the number of landmarks must be between 2 and the number of features ({m})")
    Xs, sq, _, sums = _scaled_columns(X, metric)
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(m, size=n_landmarks, replace=False)).astype(np.int64)
    L = Xs.take(idx, with_products=method == "random") if isinstance(Xs, StreamedColumns) else Xs[:, idx]
    if method == "random":
        if progress is not None:
            progress(KMEANS_ITERATIONS)
        return L, idx
    if method != "kmeans":
        raise ValueError(f"unknown landmark method {method!r}; choose from {', '.join(LANDMARK_METHODS)}")
    C = np.asarray(L.toarray() if sp.issparse(L) else L, dtype=np.float64)  # type: ignore[union-attr]
    n = C.shape[0]
    if sums is not None:  # the centred columns
        C -= sums[idx][None, :] / n
    for _ in range(KMEANS_ITERATIONS):
        G = _products(Xs, sums, C)
        if metric != "euclidean":
            score = G
        else:
            score = 2.0 * G - np.einsum("ij,ij->j", C, C)[None, :]
        labels = np.argmax(score, axis=1)
        counts = np.bincount(labels, minlength=n_landmarks).astype(np.float64)
        onehot = sp.csr_matrix((np.ones(m), (np.arange(m), labels)), shape=(m, n_landmarks))
        if isinstance(Xs, StreamedColumns):
            S = Xs.dot(onehot)
        else:
            P = Xs @ onehot
            S = np.asarray(P.toarray() if sp.issparse(P) else P, dtype=np.float64)
        if sums is not None:  # the sums of the centred members
            S -= (onehot.T @ sums)[None, :] / n
        live = counts > 0
        if metric != "euclidean":
            norm = np.sqrt(np.einsum("ij,ij->j", S, S))
            live &= norm > 0
            C[:, live] = S[:, live] / norm[None, live]
        else:
            C[:, live] = S[:, live] / counts[None, live]
        if progress is not None:
            progress(1)
    G = _products(Xs, sums, C)
    if metric != "euclidean":
        near = np.argmax(G, axis=0)
    else:
        near = np.argmin(sq[:, None] - 2.0 * G, axis=0)
    return C, near.astype(np.int64)


def landmark_distances(
    X: np.ndarray | sp.spmatrix | DenoisedRows | StreamedColumns,
    L: np.ndarray | sp.spmatrix,
    metric: Metric = "cosine",
    landmark_index: np.ndarray | None = None,
) -> np.ndarray:
    r"""Initial distances ``m x m'`` between the feature columns of ``X`` and the landmarks.

    ``L`` holds landmark vectors in the scaled space of :func:`select_landmarks` (unit columns
    for ``cosine``; for ``correlation`` columns whose centred versions are unit, or centred centroids:
    the correlation is that of the centred ``L``). Distances from a landmark feature to itself
    (``landmark_index``, random landmarks) are set to exactly 0, and so are distances within rounding of 0
    (:func:`_diffusion.zero_rounding`).
    """
    Xs, sq, scale, sums = _scaled_columns(X, metric)
    G = _products(Xs, sums, L)
    if sp.issparse(L):
        lsq = np.asarray(L.multiply(L).sum(axis=0)).ravel()  # type: ignore[union-attr]
    else:
        lsq = np.einsum("ij,ij->j", L, L)
    if metric == "correlation":  # 1 / |l - mean|, or 0 for a landmark without spread
        n = L.shape[0]
        linv, _ = _centred_unit(lsq, _column_means(L) * n, n)
        D = 1.0 - G * linv[None, :]
        np.clip(D, 0.0, 2.0, out=D)
        zero_rounding(D, "correlation", sq, lsq)
    elif metric == "cosine":
        D = 1.0 - G / np.sqrt(lsq)[None, :]
        np.clip(D, 0.0, 2.0, out=D)
        zero_rounding(D, "cosine", sq, lsq)
    else:
        D = sq[:, None] + lsq[None, :] - 2.0 * G
        np.maximum(D, 0.0, out=D)
        np.sqrt(D, out=D)
        zero_rounding(D, "euclidean", sq, lsq)
        D *= scale
    if landmark_index is not None:
        D[landmark_index, np.arange(D.shape[1])] = 0.0
    return D


def landmark_affinity(
    D: np.ndarray,
    eps: float = 1.0,
    bandwidth: Bandwidth = "median",
    knn: int = 7,
) -> tuple[np.ndarray, float, float]:
    r"""Gaussian affinity :math:`W = \exp(-d^2/\epsilon)` between features and landmarks.

    ``median``: :math:`\epsilon = c\,\sigma` with :math:`\sigma` the median feature-landmark
    distance. ``knn``: :math:`W_{jl} = \exp(-d^2/(c\,\sigma_j\sigma_l))` with :math:`\sigma_j` the
    distance from feature ``j`` to its ``knn``-th nearest landmark and :math:`\sigma_l` that from
    landmark ``l`` to its ``knn``-th nearest feature (with every feature a landmark this is the
    exact path's self-tuning kernel).

    Returns
    -------
    W : ndarray, shape (m, m')
    eps_used : float
    sigma : float
    """
    if not eps > 0:
        raise ParameterError("(the kernel scale multiplier) must be positive", "eps")
    sigma = float(np.median(D))
    if not sigma > 0:
        raise ValueError("all features are proportional across the samples (median distance is 0; too few samples?)")
    W = np.square(D)
    if bandwidth == "knn":
        kr = min(max(int(knn), 1), D.shape[1] - 1)
        kc = min(max(int(knn), 1), D.shape[0] - 1)
        s_row = np.partition(D, kr, axis=1)[:, kr]
        s_col = np.partition(D, kc, axis=0)[kc, :]
        s_row = np.where(s_row > 0, s_row, sigma)
        s_col = np.where(s_col > 0, s_col, sigma)
        W /= -(float(eps) * s_row[:, None] * s_col[None, :])
        eps_used = float(eps) * float(np.median(s_row)) ** 2
    elif bandwidth == "median":
        eps_used = float(eps) * sigma
        W /= -eps_used
    else:
        raise ValueError(f"unknown bandwidth {bandwidth!r}")
    np.exp(W, out=W)
    return W, eps_used, sigma


def _normalise(W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""``B``, ``b`` and :math:`\tilde d` of the factored alpha = 1 normalisation of :math:`W W^\top`."""
    d = W @ W.sum(axis=0)
    B = W / d[:, None]
    b = B.sum(axis=0)
    dt = B @ b
    return B, b, dt


def landmark_factors(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The explicit stochastic factors :math:`R` (``m x m'``) and :math:`S` (``m' x m``).

    :math:`R S` is the row-stochastic alpha = 1 operator of :math:`W W^\top`. For tests and small
    problems; the pipeline uses the spectral form of :func:`landmark_operator`.
    """
    B, b, dt = _normalise(W)
    R = B * b[None, :] / dt[:, None]
    S = B.T / b[:, None]
    return R, S


def landmark_operator(
    X: np.ndarray | sp.spmatrix | DenoisedRows | StreamedColumns,
    n_landmarks: int,
    eps: float = 1.0,
    metric: Metric = "cosine",
    bandwidth: Bandwidth = "median",
    knn: int = 7,
    method: LandmarkMethod = "random",
    seed: int = 0,
    eigenvalue_floor: float = EIGENVALUE_FLOOR,
    progress: Callable[[int], None] | None = None,
) -> LandmarkOperator:
    r"""Landmark diffusion operator in spectral form (module docstring; docs/method.md section 6).

    Parameters
    ----------
    X : ndarray, sparse matrix or DenoisedRows, shape (n, m)
        Samples x features; never densified when sparse; denoised rows are read by row blocks
        (:class:`StreamedColumns`), never as one ``n x m`` matrix.
    n_landmarks : int
        ``m'``, between 2 and ``m``.
    eps, metric, bandwidth, knn
        As for :func:`_diffusion.diffusion_operator`.
    method : {"random", "kmeans"}
    seed : int
        Seed of the landmark draw.
    progress : callable, optional
        Called with the number of finished steps (``KMEANS_ITERATIONS`` + 2 in all).

    Notes
    -----
    A feature whose affinity to every landmark is below :data:`MIN_AFFINITY` (a word far from
    every landmark's neighbourhood: its row of ``W`` underflows) is left out of the operator and
    listed in :attr:`LandmarkOperator.unplaced`; the tree hangs it from the root. This is what
    the exact operator does with an isolated feature (its only affinity is to itself, so its
    densities never spread and it joins the tree at the top), and the rule that already holds
    for features the diffusion does not see (``min_df``, ``max_features``).

    Raises
    ------
    ValueError
        When fewer than two features have affinity to some landmark.
    """
    if isinstance(X, DenoisedRows):  # scaled once for both stages
        X = StreamedColumns(X, metric)
    L, idx = select_landmarks(X, n_landmarks, method, seed, metric, progress)
    D = landmark_distances(X, L, metric, idx if method == "random" else None)
    del L
    return landmark_operator_from_distances(D, idx, eps, bandwidth, knn, method, eigenvalue_floor, progress)


def landmark_operator_from_distances(
    D: np.ndarray,
    landmarks: np.ndarray,
    eps: float = 1.0,
    bandwidth: Bandwidth = "median",
    knn: int = 7,
    method: LandmarkMethod = "random",
    eigenvalue_floor: float = EIGENVALUE_FLOOR,
    progress: Callable[[int], None] | None = None,
) -> LandmarkOperator:
    r"""The operator of :func:`landmark_operator` from given item-to-landmark distances ``D`` (``m x m'``).

    ``landmarks``: the items chosen as landmarks (recorded in the operator). The entry point for
    items whose distances are not those of vectors under one metric (the joint hierarchies' trees).
    """
    idx = landmarks
    W, eps_used, sigma = landmark_affinity(D, eps, bandwidth, knn)
    del D
    rows = W.sum(axis=1)
    placed = rows > MIN_AFFINITY
    unplaced = np.flatnonzero(~placed)
    if unplaced.size:
        if placed.sum() < 2:
            raise InputError(
                f"{unplaced.size} of {rows.size} features have affinity below {MIN_AFFINITY:g} to "
                "every landmark: raise {a} or use more {b}",
                a="eps",
                b="landmarks",
            )
        W = W[placed]
        rows = rows[placed]
    low = float(rows.min())
    if progress is not None:
        progress(1)
    B, b, dt = _normalise(W)
    del W
    s = np.sqrt(dt)
    C = B / s[:, None]
    del B
    with serial_blas():  # the same bits at any thread count
        M = C.T @ C
        lam, V = np.linalg.eigh(0.5 * (M + M.T))
    lam = lam[::-1].copy()
    V = np.ascontiguousarray(V[:, ::-1])
    clipped = np.clip(lam, eigenvalue_floor, 1.0)
    total = float(np.abs(lam).sum())
    mass = float(np.abs(lam - clipped).sum() / total) if total > 0 else 0.0
    left = C @ V
    left /= s[:, None]
    del C
    if progress is not None:
        progress(1)
    return LandmarkOperator(
        eigenvalues=clipped,
        raw_eigenvalues=lam,
        left=left,
        right=V.T * b[None, :],
        sqrt_degree=s,
        landmarks=idx,
        method=method,
        eps=eps_used,
        sigma=sigma,
        clipped_spectral_mass=mass,
        min_affinity=low,
        unplaced=unplaced,
    )


def landmark_densities(op: LandmarkOperator, t: float) -> tuple[np.ndarray, float]:
    r"""Landmark-restricted densities :math:`\rho_j^t = \tilde d_j^{-1/2} U_j \Sigma^{2t+1} V^\top \mathrm{diag}(b)`.

    Returns
    -------
    rho : ndarray, shape (m, m')
        One row per feature (each sums to 1 before clipping), negative entries clipped to 0.
    negative_mass : float
        Clipped negative mass as a fraction of the total mass ``m``.
    """
    rho = (op.left * (op.eigenvalues**t)[None, :]) @ op.right
    return rho, clip_negative(rho)
