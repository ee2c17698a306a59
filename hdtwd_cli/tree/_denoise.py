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

from dataclasses import dataclass

import numpy as np

from hdtwd_cli._runtime.sparse import sp

__all__ = ["Denoiser", "principal_axes", "fit_denoiser", "denoise", "log_cp10k", "is_count_data"]


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


def is_count_data(X: np.ndarray | sp.spmatrix) -> bool:
    """True when every stored value is a whole number (raw counts rather than a log scale)."""
    v = X.data if sp.issparse(X) else np.asarray(X).ravel()
    return bool(np.all(v == np.rint(v)))


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


def fit_denoiser(X: np.ndarray | sp.spmatrix, rank: int) -> Denoiser:
    r"""Fit :math:`\mu` and :math:`V` on the rows ``X`` (``n x m``, columns in leaf order).

    ``rank`` is capped at ``min(n, m) - 1`` (a full-rank projection denoises nothing).
    """
    counts = is_count_data(X)
    F = _dense(log_cp10k(X) if counts else X)  # may be X itself: never written
    n, m = F.shape
    r = int(min(rank, min(n, m) - 1))
    if r < 1:
        raise ValueError("denoising needs at least 3 samples and 3 features")
    mu = F.mean(axis=0)
    V, _ = principal_axes(F - mu, r)
    return Denoiser(mu, V, counts, np.ones(m, dtype=bool))


def denoise(X: np.ndarray | sp.spmatrix, d: Denoiser, block: int = 4096) -> np.ndarray:
    r"""The denoised values :math:`\hat x = \max(0, \mu + (f(x) - \mu) V V^\top)` of every row (dense).

    Rows are processed in blocks of ``block`` (memory ``O(block * m)`` beyond the output). A row
    whose reconstruction is zero everywhere (possible only far from the fitted rows) keeps
    :math:`f(x)`, so every non-zero sample stays a histogram.
    """
    n, m = X.shape
    if m != d.mean.shape[0]:
        raise ValueError("the denoiser has one entry per leaf: columns do not match")
    out = np.empty((n, m), dtype=np.float64)
    cov = d.covered
    for i0 in range(0, n, block):
        rows = X[i0 : i0 + block]
        F = _dense(log_cp10k(rows) if d.log_counts else rows)  # read only
        R = d.mean + ((F - d.mean) @ d.axes) @ d.axes.T
        if not cov.all():
            R[:, ~cov] = F[:, ~cov]
        np.maximum(R, 0.0, out=R)
        empty = ~np.any(R > 0, axis=1)
        if empty.any():
            R[empty] = F[empty]
        out[i0 : i0 + block] = R
    return out
