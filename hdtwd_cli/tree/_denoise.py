r"""Denoised histograms: the samples' values projected onto their leading principal axes.

A cell's histogram over thousands of sparse genes is mostly sampling noise at the leaves; the
principal components that scanpy's users compare cells by average that noise out ACROSS genes.
This stage gives the TWD the same denoising while keeping it an exact tree-Wasserstein
distance: each sample's values are replaced by their rank-``r`` reconstruction, clipped at zero;
the tree is learned from these rows and the TWD compares the histograms of these non-negative
values on it (docs/method.md section 11). The axes are fitted on the rows the tree is learned from and are
stored with the tree, so ``--tree`` applies the same map to new samples (as it applies the idf
weights).

With :math:`f` the value scale (``log1p(1e4 x / sum x)`` for counts, the identity otherwise),
:math:`\mu` the mean of :math:`f(X)` over the fitted rows and :math:`V` (``m x r``) its ``r``
leading principal axes,

.. math:: \hat x = \max\bigl(0,\ \mu + (f(x) - \mu)\,V V^\top\bigr).

Leaves the axes do not cover (features hung from a stored tree's root later, ``--unseen root``)
keep :math:`f(x)`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime import twins
from hdtwd_cli.tree._forms import is_count_data, is_log1p_counts

__all__ = [
    "BLOCK_ROWS",
    "ordered_column_sums",
    "Denoiser",
    "DenoisedRows",
    "HeldRows",
    "denoise",
    "fit_denoiser",
    "fit_is_implicit",
    "fit_memory_bytes",
    "is_count_data",
    "is_log1p_counts",
    "log_cp10k",
    "principal_axes",
    "row_nonzeros",
]

#: Rows per block of every streamed pass; fixed, so that sums over blocks have one order everywhere.
BLOCK_ROWS = 4096

#: A block of values at least this dense gets its Gram matrix from BLAS in fixed tiles rather than
#: from the compiled sparse kernel (:func:`_column_sums_and_gram`): above the density where the two
#: break even (docs/performance.md, "Dense blocks' Gram").
DENSE_GRAM_FRACTION = 0.25


@dataclass(frozen=True)
class Denoiser:
    """The rank-``r`` map of :func:`denoise`, one row per leaf of the tree it belongs to.

    Attributes
    ----------
    mean : ndarray, shape (m,)
        :math:`\\mu`, the mean of :math:`f(X)` over the fitted rows (0 on uncovered leaves).
    axes : ndarray, shape (m, r)
        :math:`V`, orthonormal principal axes (zero rows on uncovered leaves).
    log_counts : bool
        :math:`f` is ``log1p(1e4 x / sum x)`` (the fitted rows were counts), else the identity.
    covered : ndarray of bool, shape (m,)
        Leaves the axes were fitted on; the others keep :math:`f(x)`.
    """

    mean: np.ndarray
    axes: np.ndarray
    log_counts: bool
    covered: np.ndarray

    @property
    def axes_t(self) -> np.ndarray:
        """:math:`V^\top`, C order (the reconstruction reads it by rows)."""
        return np.ascontiguousarray(self.axes.T)

    @property
    def rank(self) -> int:
        return int(self.axes.shape[1])

    def reordered(self, order: np.ndarray) -> Denoiser:
        """The map with its entries in the order ``order`` (e.g. data columns -> tree leaves)."""
        return Denoiser(self.mean[order], np.ascontiguousarray(self.axes[order]), self.log_counts, self.covered[order])

    def extended(self, extra: int) -> Denoiser:
        """The map for ``extra`` more leaves appended after the existing ones (not covered)."""
        if extra == 0:
            return self
        r = self.rank
        return Denoiser(
            np.concatenate([self.mean, np.zeros(extra)]),
            np.vstack([self.axes, np.zeros((extra, r))]),
            self.log_counts,
            np.concatenate([self.covered, np.zeros(extra, dtype=bool)]),
        )


def log_cp10k(X: np.ndarray | sp.spmatrix) -> np.ndarray | sp.csr_matrix:
    r"""Scanpy's log-normalisation :math:`\log(1 + 10^4 X_{ij} / \sum_j X_{ij})` (all-zero rows stay zero)."""
    s = np.asarray(X.sum(axis=1), dtype=np.float64).ravel()
    s[s == 0] = 1.0
    if sp.issparse(X):
        Y = sp.csr_matrix(X, dtype=np.float64, copy=True)
        Y.data = np.log1p(Y.data * np.repeat(1e4 / s, np.diff(Y.indptr)))
        return Y
    return np.log1p(np.asarray(X, dtype=np.float64) * (1e4 / s)[:, None])


def principal_axes(A: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    r"""The ``r`` leading principal axes of the CENTRED rows ``A`` (``n x m``) and their eigenvalues.

    From the eigenvectors of the smaller of :math:`A^\top A` (``m x m``) and :math:`A A^\top`
    (``n x n``, then :math:`V = A^\top U \Lambda^{-1/2}`); ARPACK with a fixed start vector when
    ``r`` is well below that size, LAPACK otherwise. Returns ``(V, lam)``, ``V`` of shape ``(m, r)``,
    eigenvalues descending.
    """
    from scipy.sparse.linalg import eigsh

    n, m = A.shape
    gram = n < m
    C = A @ A.T if gram else A.T @ A
    if r >= C.shape[0] - 1:
        lam, U = np.linalg.eigh(C)
        lam, U = lam[::-1][:r], U[:, ::-1][:, :r]
    else:
        lam, U = eigsh(C, k=r, which="LA", v0=np.ones(C.shape[0]) / np.sqrt(C.shape[0]))
        lam, U = lam[::-1], U[:, ::-1]
    V = A.T @ (U / np.sqrt(np.maximum(lam, 1e-300))[None, :]) if gram else U
    return np.ascontiguousarray(V), np.asarray(lam)


def _dense(X: np.ndarray | sp.spmatrix) -> np.ndarray:
    """``X`` as a dense float64 array (``X`` itself when it already is one: do not write to it)."""
    return X.toarray().astype(np.float64, copy=False) if sp.issparse(X) else np.asarray(X, dtype=np.float64)  # type: ignore[union-attr]


def _values(rows: np.ndarray | sp.spmatrix, log_counts: bool) -> np.ndarray | sp.csr_matrix:
    """:math:`f` of a block of rows (sparse stays sparse)."""
    return log_cp10k(rows) if log_counts else (sp.csr_matrix(rows, dtype=np.float64) if sp.issparse(rows) else rows)


def _stored_csr(F: np.ndarray | sp.spmatrix) -> sp.csr_matrix:
    """``F`` as canonical float64 CSR with no stored zero (the caller's matrix untouched): the same arrays for
    dense or sparse storage of the same values."""
    from hdtwd_cli._runtime.sparse import require_canonical

    C = require_canonical(F) if sp.issparse(F) else sp.csr_matrix(np.asarray(F, dtype=np.float64))
    if C.nnz and not C.data.all():
        C = sp.csr_matrix(C, copy=True)
        C.eliminate_zeros()
    return C


def _column_sums_and_gram(F: np.ndarray | sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
    r"""Column sums and :math:`F^\top F` of a block, decided by its values, never by their storage.

    The block's non-zero values decide (zeros dropped), so dense and sparse storage of the same
    values give the same bits (a dense block on the BLAS path is read as it is; a sparse one there
    is made dense: :func:`_dense_column_sums_and_gram`). A block with at
    least :data:`DENSE_GRAM_FRACTION` of its entries non-zero: :math:`F^\top F` by BLAS in fixed
    tiles on every core (:func:`~hdtwd_cli._runtime.blas.gram_upper`: the same bits at any thread
    count; the BLAS kernel's rounding, so equal across CPU kinds to rounding); a sparser one: the
    compiled kernel :func:`_kernels.column_gram_csr` (each entry summed over the rows in order,
    the same bits on every machine). Column sums: each column's values added in row order
    (``bincount`` of the stored values on the sparse side).
    """
    from hdtwd_cli.tree._kernels import column_gram_csr

    if not sp.issparse(F):
        F = np.asarray(F, dtype=np.float64)
        if np.count_nonzero(F) >= DENSE_GRAM_FRACTION * F.size:
            return _dense_column_sums_and_gram(F)
    C = _stored_csr(F)
    if C.nnz >= DENSE_GRAM_FRACTION * C.shape[0] * C.shape[1]:
        return _dense_column_sums_and_gram(C.toarray())
    return ordered_column_sums(C), column_gram_csr(C)


def _dense_column_sums_and_gram(F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r""":func:`_column_sums_and_gram` of a block (dense values) that takes the BLAS path.

    The same bits as the values' CSR form: each column summed over the rows in order (adding a
    zero changes no sum of non-negative values), and :math:`F^\top F` by
    :func:`~hdtwd_cli._runtime.blas.gram_upper` on ``F``'s values with ``-0.0`` as ``+0.0`` (as
    ``toarray`` of the CSR form gives them).
    """
    from hdtwd_cli._runtime.blas import gram_upper, mirror_upper

    sums = ordered_column_sums(F)
    Ft = F.T.copy(order="C")  # a copy: the caller's block is never written
    Ft += 0.0  # -0.0 -> +0.0
    return sums, mirror_upper(gram_upper(Ft))


def _blocks(n: int) -> range:
    return range(0, n, BLOCK_ROWS)


#: Costs of the fit's two ways, in multiply-adds of the BLAS Gram tiles (about their measured ratios,
#: docs/performance.md, "Denoising fit"): one multiply-add of the compiled sparse Gram kernel, and
#: one stored value's share of the Lanczos products (~250 products with ``r = 50``, each reading every
#: stored value twice, ~25x slower per multiply-add than the tiles).
SPARSE_GRAM_COST = 75
IMPLICIT_COST_PER_VALUE = 11_500


def row_nonzeros(X: np.ndarray | sp.spmatrix) -> np.ndarray:
    """Each row's non-zero values (``f`` keeps zeros zero): the same counts for dense or sparse storage."""
    if sp.issparse(X):
        return np.diff(_stored_csr(X).indptr).astype(np.int64)
    return np.count_nonzero(np.asarray(X), axis=1).astype(np.int64)


def fit_is_implicit(n: int, m: int, nonzeros: np.ndarray, rank: int) -> bool:
    """Whether :func:`fit_denoiser` reads the ``n x m`` values (``nonzeros`` in each row) through products
    with them rather than through the smaller Gram matrix: the predicted costs decide, from the shape
    and the counts alone (the same choice for dense or sparse storage, on every machine).

    The Gram matrix costs ``n^2 m / 2`` tile multiply-adds (``n <= m``), or per block of
    :data:`BLOCK_ROWS` rows ``b m^2 / 2`` (at least :data:`DENSE_GRAM_FRACTION` non-zero) or
    :data:`SPARSE_GRAM_COST` times half the sum of its rows' squared counts (the sparse kernel); the
    products :data:`IMPLICIT_COST_PER_VALUE` per stored value.
    """
    k = min(n, m)
    if min(rank, k - 1) >= k - 1:
        return False
    nz = np.asarray(nonzeros, dtype=np.float64)
    if n <= m:
        gram = n * n * m / 2
    else:
        gram = 0.0
        for i0 in _blocks(n):
            c = nz[i0 : i0 + BLOCK_ROWS]
            dense = c.sum() >= DENSE_GRAM_FRACTION * c.size * m
            gram += c.size * m * m / 2 if dense else SPARSE_GRAM_COST * float(np.dot(c, c)) / 2
    return gram > IMPLICIT_COST_PER_VALUE * float(nz.sum())


def fit_memory_bytes(n: int, m: int, nonzeros: np.ndarray, rank: int) -> int:
    """Bytes :func:`fit_denoiser` allocates for ``n`` rows of ``m`` features (``nonzeros`` in each row):
    the values' two sparse copies and the Lanczos vectors (:func:`fit_is_implicit`), the ``m x m``
    scatter matrix and its eigensolver's copy (more rows than features), or the ``n x m`` centred
    values and the ``n x n`` Gram matrix with its copy (as many features as rows, or more)."""
    if fit_is_implicit(n, m, nonzeros, rank):
        stored = int(np.sum(nonzeros))
        return 2 * (12 * stored + 8 * (n + m)) + 8 * (2 * rank + 2) * min(n, m) + 16 * m * rank
    return 8 * n * m + 16 * n * n if n <= m else 16 * m * m


def fit_denoiser(X: np.ndarray | sp.spmatrix, rank: int, *, nonzeros: np.ndarray | None = None) -> Denoiser:
    r"""Fit :math:`\mu` and :math:`V` on the rows ``X`` (``n x m``, columns in leaf order).

    With :math:`F = f(X)` and :math:`F_c = F - 1\mu^\top`, :math:`V` spans the ``r`` leading principal
    axes of :math:`F_c`, from the smaller of its two Gram matrices (the shape alone decides):

    - **more rows than features** (``n > m``): one pass over blocks of :data:`BLOCK_ROWS` rows
      accumulates the column sums and :math:`F^\top F` (in block order, each block by
      :func:`_column_sums_and_gram`: the same bits for dense or sparse storage and at any thread
      count), then :math:`\mu = F^\top 1 / n` and the centred scatter matrix
      :math:`C = F^\top F - n\,\mu\mu^\top = F_c^\top F_c`, whose ``r`` leading eigenvectors are
      :math:`V`. Memory: ``m x m`` plus one block, never the ``n x m`` values.
    - **as many features as rows, or more** (``n <= m``; cells over all their genes): :math:`\mu` from
      the column sums, then the ``n x n`` Gram matrix :math:`G = F_c F_c^\top` (fixed tiles,
      :func:`~hdtwd_cli._runtime.blas.gram_upper`), its ``r`` leading eigenpairs
      :math:`G u_k = \lambda_k u_k` and :math:`V = F_c^\top U \Lambda^{-1/2}`: the same axes (the
      left and right singular vectors of :math:`F_c`), for :math:`n^2 m` operations instead of
      :math:`n m^2` and ``n x m + n x n`` values instead of ``m x m``. An axis whose eigenvalue is
      below :math:`10^{-12} \lambda_1` (rows that repeat) is left out (a zero column).

    - **where forming the Gram matrix would cost more than products with the values**
      (:func:`fit_is_implicit`; cells over all their genes): neither Gram matrix is formed;
      :func:`_fit_implicit` finds the same axes from products with the sparse values (Lanczos),
      in ``O(nnz)`` memory.

    The eigenvectors come from ARPACK with a fixed start vector, or from LAPACK when ``r`` is close
    to the matrix's size, on one BLAS thread: the same bits at any thread count. ``rank`` is
    capped at ``min(n, m) - 1`` (a full-rank projection denoises nothing). ``nonzeros``:
    :func:`row_nonzeros` of ``X`` where the caller has it already.
    """
    from hdtwd_cli._runtime.blas import gram_upper, mirror_upper, serial_blas

    counts = is_count_data(X)
    n, m = X.shape
    r = int(min(rank, min(n, m) - 1))
    if r < 1:
        raise ValueError("denoising needs at least 3 samples and 3 features")
    with serial_blas():
        if fit_is_implicit(n, m, row_nonzeros(X) if nonzeros is None else nonzeros, r):
            mu, V = _fit_implicit(X, counts, r)
        elif n <= m:
            total = np.zeros(m)
            for i0 in _blocks(n):
                total += ordered_column_sums(_values(X[i0 : i0 + BLOCK_ROWS], counts))
            mu = total / n
            Fc = np.empty((n, m))
            for i0 in _blocks(n):
                Fc[i0 : i0 + BLOCK_ROWS] = _dense(_values(X[i0 : i0 + BLOCK_ROWS], counts))
            Fc += 0.0  # -0.0 -> +0.0, as the values' CSR form gives them
            Fc -= mu
            lam, U = _leading(mirror_upper(gram_upper(Fc)), r)
            live = lam > 1e-12 * max(float(lam[0]), 0.0)
            V = Fc.T @ (U * np.where(live, 1.0 / np.sqrt(np.where(live, lam, 1.0)), 0.0)[None, :])
        else:
            total = np.zeros(m)
            C = np.zeros((m, m))
            for i0 in _blocks(n):
                sums, gram = _column_sums_and_gram(_values(X[i0 : i0 + BLOCK_ROWS], counts))
                total += sums
                C += gram
            mu = total / n
            C -= n * np.outer(mu, mu)
            V = _leading(C, r)[1]
    return Denoiser(mu, np.ascontiguousarray(V), counts, np.ones(m, dtype=bool))


def _fit_implicit(X: np.ndarray | sp.spmatrix, counts: bool, r: int) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\mu` and the axes :math:`V` of :func:`fit_denoiser` from products with the values, no Gram matrix formed.

    :math:`F = f(X)` is held twice in CSR form (by rows and by columns, zeros dropped, indices sorted:
    the same arrays for dense or sparse ``X``). ARPACK's Lanczos iteration, from the same fixed start
    vector as the explicit fit, finds the ``r`` leading eigenpairs of the smaller Gram operator, never
    formed: :math:`y \mapsto F_c (F_c^\top y)` (``n <= m``; then :math:`V = F_c^\top U \Lambda^{-1/2}`)
    or :math:`x \mapsto F_c^\top (F_c x)` (``n > m``; then :math:`V = U`), with
    :math:`F_c x = F x - 1\,(\mu^\top x)` and :math:`F_c^\top y = F^\top y - \mu\,(1^\top y)`
    (:func:`~hdtwd_cli.tree._kernels.centred_csr_matvec`: every sum in a fixed order). About
    :math:`4\,\mathrm{nnz}(F)` operations per step instead of :math:`\min(n, m)^2 \max(n, m)` for the
    Gram matrix, and two copies of the stored values instead of ``n x m + n x n`` or ``m x m``
    (:func:`fit_is_implicit` decides). The same axes to the eigensolver's tolerance (machine
    precision), not the same bits as the explicit fit.
    """
    from scipy.sparse.linalg import LinearOperator

    from hdtwd_cli.tree._kernels import centred_csr_matvec

    F = _stored_csr(_values(X, counts))
    n, m = F.shape
    mu = np.bincount(F.indices, weights=F.data, minlength=m) / n
    FT = F.T.tocsr()  # by columns: within each, rows ascending
    ones_n = np.ones(n)
    tn, tm = np.empty(n), np.empty(m)

    def rows(x: np.ndarray, out: np.ndarray) -> np.ndarray:  # F_c x
        centred_csr_matvec(F.indptr, F.indices, F.data, np.ascontiguousarray(x, dtype=np.float64), ones_n, mu, out)
        return out

    def cols(y: np.ndarray, out: np.ndarray) -> np.ndarray:  # F_c^T y
        centred_csr_matvec(FT.indptr, FT.indices, FT.data, np.ascontiguousarray(y, dtype=np.float64), mu, ones_n, out)
        return out

    if n <= m:
        op = LinearOperator((n, n), matvec=lambda y: rows(cols(np.ravel(y), tm), np.empty(n)), dtype=np.float64)
        lam, U = _leading(op, r)
        live = lam > 1e-12 * max(float(lam[0]), 0.0)
        scale = np.where(live, 1.0 / np.sqrt(np.where(live, lam, 1.0)), 0.0)
        V = np.empty((m, r))
        for k in range(r):
            V[:, k] = cols(U[:, k], np.empty(m)) * scale[k]
        return mu, V
    op = LinearOperator((m, m), matvec=lambda x: cols(rows(np.ravel(x), tn), np.empty(m)), dtype=np.float64)
    return mu, _leading(op, r)[1]


def _leading(C: Any, r: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``r`` leading eigenpairs of the symmetric ``C`` (an array or an operator; eigenvalues descending):
    ARPACK from a fixed start vector, LAPACK when ``r`` is close to ``C``'s size (arrays only)."""
    from scipy.sparse.linalg import eigsh

    k = C.shape[0]
    if r >= k - 1:
        lam, U = np.linalg.eigh(C)
    else:
        lam, U = eigsh(C, k=r, which="LA", v0=np.ones(k) / np.sqrt(k))
    return lam[::-1][:r].copy(), np.ascontiguousarray(U[:, ::-1][:, :r])


def ordered_column_sums(F: np.ndarray | sp.spmatrix) -> np.ndarray:
    """Each column's values added in row order (dense) or stored order (canonical CSR, zeros dropped): the
    same bits for either storage (adding a zero changes no sum)."""
    from hdtwd_cli._runtime.sparse import require_canonical

    if not sp.issparse(F):
        F = np.asarray(F, dtype=np.float64)
        sums = np.zeros(F.shape[1])
        for row in F:
            sums += row
        return sums
    C = require_canonical(F)
    return np.bincount(C.indices, weights=C.data, minlength=C.shape[1])


def _denoise_block(rows: np.ndarray | sp.spmatrix, d: Denoiser, out: np.ndarray | None = None) -> np.ndarray:
    r""":math:`\hat x` of a block of rows (dense, float64), with the fallbacks of :func:`denoise`.

    Sparse values beyond the twins' size go to :func:`~hdtwd_cli.tree._kernels.reconstruct_rows_csr`,
    which reads the CSR rows in place: the bits of the dense kernel on their dense copy (tested),
    without making it. ``out``: a C-order float64 array of the block's shape to write into (a held
    matrix's rows: no block-sized temporary and copy); returned.
    """
    from hdtwd_cli._runtime.sparse import require_canonical

    V = _values(rows, d.log_counts)
    n, m = V.shape
    R = np.empty((n, m)) if out is None else out
    F: np.ndarray | sp.csr_matrix
    if n * m * d.rank <= twins.SMALL_WORK:  # the NumPy twin: no numba start-up
        from hdtwd_cli.tree._small import reconstruct_rows

        F = np.ascontiguousarray(_dense(V))  # read only
        reconstruct_rows(F, d.mean, d.axes, d.axes_t, R)
    elif sp.issparse(V):
        from hdtwd_cli.tree._kernels import reconstruct_rows_csr

        F = require_canonical(V)
        reconstruct_rows_csr(F.indptr, F.indices, F.data, d.mean, d.axes, d.axes_t, R)
    else:
        from hdtwd_cli.tree._kernels import reconstruct_rows

        F = np.ascontiguousarray(_dense(V))
        reconstruct_rows(F, d.mean, d.axes, d.axes_t, R)
    cov = d.covered
    if not cov.all():
        R[:, ~cov] = _dense(F[:, ~cov])
    np.maximum(R, 0.0, out=R)
    empty = ~np.any(R > 0, axis=1)
    if empty.any():
        R[empty] = _dense(F[empty])
    return R


def denoise(X: np.ndarray | sp.spmatrix, d: Denoiser) -> np.ndarray:
    r"""The denoised values :math:`\hat x = \max(0, \mu + (f(x) - \mu) V V^\top)` of every row (dense).

    Rows are processed in blocks of :data:`BLOCK_ROWS` (memory ``O(BLOCK_ROWS * m)`` beyond the
    output). A row whose reconstruction is zero everywhere (possible only far from the fitted
    rows) keeps :math:`f(x)`, so every non-zero sample stays a histogram. :class:`DenoisedRows`
    computes the same rows on demand, without the ``n x m`` output.
    """
    n, m = X.shape
    if m != d.mean.shape[0]:
        raise ValueError("the denoiser has one entry per leaf: columns do not match")
    out = np.empty((n, m), dtype=np.float64)
    for i0 in _blocks(n):
        _denoise_block(X[i0 : i0 + BLOCK_ROWS], d, out=out[i0 : i0 + BLOCK_ROWS])
    return out


class DenoisedRows:
    r"""The rows :math:`\hat x_i \odot w` of ``X``, computed on demand: never the ``n x m`` dense matrix.

    ``X`` holds the samples' values in the denoiser's column order (sparse stays sparse); ``w``
    the tree's feature weights (``None``: none). Rows are denoised when asked for
    (:meth:`rows`), block by block on one BLAS thread (the same bits at any thread count and in
    any grouping of the rows: every row is computed alone by the same products); the column
    statistics and the Gram matrix that learning the tree reads come from one streamed pass over
    row blocks, summed in block order (:meth:`summarise`). ``columns`` restricts the rows to some
    of the columns (the features the diffusion places).

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, m)
    denoiser : Denoiser
    weights : ndarray, shape (m,), optional
    """

    def __init__(
        self,
        X: np.ndarray | sp.spmatrix,
        denoiser: Denoiser,
        weights: np.ndarray | None = None,
        columns: np.ndarray | None = None,
    ) -> None:
        if X.shape[1] != denoiser.mean.shape[0]:
            raise ValueError("the denoiser has one entry per leaf: columns do not match")
        self.values = sp.csr_matrix(X) if sp.issparse(X) else np.ascontiguousarray(X)
        self.denoiser = denoiser
        self.weights = weights
        self.columns = columns
        self._stats: tuple[np.ndarray, np.ndarray] | None = None
        self._squares: np.ndarray | None = None  # per column: the sum of its squared values, with the stats
        self._gram: np.ndarray | None = None
        self._sums: np.ndarray = np.zeros(0)

    @property
    def shape(self) -> tuple[int, int]:
        n, m = self.values.shape
        return int(n), int(m if self.columns is None else self.columns.size)

    def select(self, columns: np.ndarray) -> DenoisedRows:
        """These rows restricted to ``columns`` (indices into the current columns)."""
        cols = np.asarray(columns, dtype=np.int64)
        out = DenoisedRows(
            self.values, self.denoiser, self.weights, cols if self.columns is None else self.columns[cols]
        )
        if self._stats is not None:
            out._stats = (self._stats[0][cols], self._stats[1][cols])
        if self._squares is not None:
            out._squares = self._squares[cols]
        if self._gram is not None and np.all(np.diff(cols) > 0):  # increasing: the upper triangle stays upper
            out._gram = self._gram[np.ix_(cols, cols)]
            out._sums = self._sums[cols]
        return out

    def _weighted(self, idx: np.ndarray | slice | None, out: np.ndarray | None = None) -> np.ndarray:
        """The rows ``idx`` over all columns, weighted (into ``out`` where given)."""
        R = _denoise_block(self.values if idx is None else self.values[idx], self.denoiser, out=out)
        if self.weights is not None:
            R *= self.weights[None, :]
        return R

    def rows(self, idx: np.ndarray | slice | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """The rows ``idx`` (default: all), dense float64, C order; a new array, or written into ``out``
        (a C-order float64 array of their shape) and returned: a caller that reads block after block
        reuses one buffer instead of touching fresh memory for each (the same bits)."""
        if self.columns is None:
            return self._weighted(idx, out)
        # mode="clip": the indices are valid, and NumPy buffers ``out`` under the default "raise"
        return np.take(self._weighted(idx), self.columns, axis=1, out=out, mode="clip")

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """``(i0, rows i0 .. i0 + BLOCK_ROWS - 1)`` in order, to be read only, each valid until the next is
        asked for: one buffer serves every block."""
        n, m = self.shape
        buf = np.empty((min(n, BLOCK_ROWS), m))
        for i0 in _blocks(n):
            i1 = min(n, i0 + BLOCK_ROWS)
            yield i0, self.rows(slice(i0, i1), out=buf[: i1 - i0])

    def support(self) -> np.ndarray:
        """Columns that may carry mass: those the axes cover, and uncovered ones with values (no pass over the rows)."""
        sup = self.denoiser.covered.copy()
        if not sup.all():
            v = self.values
            has = (np.diff(sp.csc_matrix(v).indptr) > 0) if sp.issparse(v) else np.any(v != 0, axis=0)
            sup |= has
        return sup if self.columns is None else sup[self.columns]

    def summarise(self, *, gram: bool = False) -> None:
        r"""One pass over the row blocks, in order: the column statistics (:meth:`column_stats`,
        :meth:`column_squares`, :meth:`column_sums`) and, with
        ``gram``, the upper triangle of :math:`\hat X^\top \hat X` (:meth:`gram_upper`), kept for later.

        Learning the tree by the exact operator reads both: one pass denoises every row once instead
        of twice. Each block's Gram matrix comes from :func:`~hdtwd_cli._runtime.blas.gram_upper`
        (fixed tiles on every core): the same bits at any thread count.
        """
        from hdtwd_cli._runtime.blas import gram_upper

        m = self.shape[1]
        stats = self._stats is None or self._squares is None
        nonzero, absmax, squares = np.zeros(m, dtype=np.int64), np.zeros(m), np.zeros(m)
        G = np.zeros((m, m)) if gram else None
        sums = np.zeros(m)
        for _, R in self.blocks():
            if stats:
                nonzero += np.count_nonzero(R > 0, axis=0)
                np.maximum(absmax, R.max(axis=0), out=absmax)
                squares += np.einsum("ij,ij->j", R, R)
            if G is not None:
                gram_upper(R.T, add_to=G)
            sums += R.sum(axis=0)
        if stats:
            self._stats = (nonzero, absmax)
            self._squares = squares
        if G is not None:
            self._gram = G
        self._sums = sums

    def column_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """Per column: the number of rows where it is positive (its document frequency) and its largest value."""
        if self._stats is None:
            self.summarise()
        assert self._stats is not None
        return self._stats

    def column_squares(self) -> np.ndarray:
        """Per column: the sum of its squared values, each row block's ``einsum`` added in block order (read in
        the statistics' pass: a column scaled by a power of two has these sums scaled exactly)."""
        if self._squares is None:
            self.summarise()
        assert self._squares is not None
        return self._squares

    def column_sums(self) -> np.ndarray:
        """Per column: the sum of its values over the rows (row blocks in order; read in whichever pass of
        :meth:`summarise` ran: the same bits)."""
        if self._sums.size != self.shape[1]:
            self.summarise()
        return self._sums

    def gram_upper(self, scale: np.ndarray | float = 1.0, *, release: bool = False) -> np.ndarray:
        r"""The upper triangle of :math:`(\hat X / s)^\top (\hat X / s)` (``m x m``; a new array).

        :math:`\hat X^\top \hat X` from :meth:`summarise` (summed over row blocks in order), each
        entry then divided by :math:`s_i s_j`: exact for the powers of two that
        :func:`~hdtwd_cli.tree._diffusion.column_scale` gives, so the same bits as scaling the rows first.
        ``release``: the kept matrix itself is scaled in place, handed over and forgotten (one ``m x m``
        array instead of three, for a caller that reads it once).
        """
        if self._gram is None:
            self.summarise(gram=True)
        assert self._gram is not None
        inv = 1.0 / np.broadcast_to(np.asarray(scale, dtype=np.float64), (self.shape[1],))
        G = self._gram if release else self._gram.copy()
        if release:
            self._gram = None
        G *= inv[:, None]
        G *= inv[None, :]
        return G

    def held(self, rows: np.ndarray) -> DenoisedRows:
        """These rows with those of ``rows`` computed once and kept (:class:`HeldRows`): the same values, faster
        where a search reads the same rows several times."""
        return HeldRows(self, rows)

    def dense(self) -> np.ndarray:
        """All rows as one dense matrix (the routes that need the columns themselves: landmarks, latent space)."""
        return self.rows()


class HeldRows(DenoisedRows):
    """:class:`DenoisedRows` with the rows ``rows`` computed once, at construction, and kept.

    A row asked for again is copied from memory: the same bits as computing it (every row is
    computed alone), so holding changes the time of a search, never its result. Rows not held are
    computed as usual; :meth:`select` keeps the held rows (their columns picked on reading).
    Memory: ``|rows| x m`` float64 values.
    """

    def __init__(self, source: DenoisedRows, rows: np.ndarray) -> None:
        super().__init__(source.values, source.denoiser, source.weights, source.columns)
        self._stats, self._gram, self._sums = source._stats, source._gram, source._sums
        self._squares = source._squares
        rows = np.asarray(rows, dtype=np.int64)
        self._where = np.full(self.shape[0], -1, dtype=np.int64)
        self._where[rows] = np.arange(rows.size)
        self._held = np.empty((rows.size, self.shape[1]))
        self._picked: np.ndarray | None = None  # columns of _held these rows have (None: all)
        for i0 in range(0, rows.size, BLOCK_ROWS):  # computed (the base class's rows), straight into place
            super().rows(rows[i0 : i0 + BLOCK_ROWS], out=self._held[i0 : i0 + BLOCK_ROWS])

    def holds(self, rows: np.ndarray) -> bool:
        """Whether every one of ``rows`` is held."""
        rows = np.asarray(rows, dtype=np.int64)
        return bool(rows.size == 0 or self._where[rows].min() >= 0)

    def select(self, columns: np.ndarray) -> DenoisedRows:
        out = super().select(columns)
        cols = np.asarray(columns, dtype=np.int64)
        view = HeldRows.__new__(HeldRows)
        view.__dict__.update(out.__dict__)
        view._where, view._held = self._where, self._held
        view._picked = cols if self._picked is None else self._picked[cols]
        return view

    def _run(self, idx: np.ndarray | slice | None) -> tuple[np.ndarray, bool]:
        """Where the rows ``idx`` are held (``-1``: not held), and whether they are held in a run, in order."""
        if idx is None or isinstance(idx, slice):
            want = np.arange(self.shape[0])[idx if idx is not None else slice(None)]
        else:
            want = np.asarray(idx, dtype=np.int64)
        at = self._where[want]
        run = at.size > 0 and at[0] >= 0 and at[-1] - at[0] == at.size - 1 and bool(np.all(np.diff(at) == 1))
        return at, run

    def rows(self, idx: np.ndarray | slice | None = None, out: np.ndarray | None = None) -> np.ndarray:
        at, run = self._run(idx)
        if not (at.size and at.min() >= 0):
            return super().rows(idx, out)
        # a run of held rows is read through a view, others by one gather (np.take: a tenth of the time of
        # fancy indexing on a wide block); mode="clip" (valid indices) keeps NumPy from buffering ``out``
        if self._picked is None:
            if not run:
                return np.take(self._held, at, axis=0, out=out, mode="clip")
            H = self._held[at[0] : at[-1] + 1]
            if out is None:
                return H.copy()
            out[...] = H
            return out
        H = self._held[at[0] : at[-1] + 1] if run else np.take(self._held, at, axis=0)
        return np.take(H, self._picked, axis=1, out=out, mode="clip")

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """Held rows in a run and all their columns: read-only views of the held matrix, no copy."""
        at, run = self._run(None)
        if self._picked is not None or not run:
            yield from super().blocks()
            return
        for i0 in _blocks(self.shape[0]):
            view = self._held[at[0] + i0 : at[0] + i0 + BLOCK_ROWS]
            view.flags.writeable = False
            yield i0, view
