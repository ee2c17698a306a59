"""Compiled pairwise L1 kernel (numba): the hot loop of the distance step (spec section 4).

:math:`D_{ij} = \\sum_k |A_{ik} - B_{jk}|`, computed in tiles of rows x rows x columns small enough
for the core's cache (so each row is read from memory once per tile, not once per pair), tiles
spread over threads, every sum accumulated in float64 whatever the storage type.

Determinism: the per-pair sum is a separate compiled function that is NOT force-inlined at the
numba IR level; with ``inline="always"`` the freshly compiled and the cache-loaded machine code
summed in different orders (last-bit differences between the first and later runs).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["l1_distances"]

_TI = 16  # rows of A per tile
_TJ = 16  # rows of B per tile
_TK = 256  # columns per pass: (16 + 16) rows x 256 columns stay in L1/L2


@njit(fastmath=True, cache=True, nogil=True)
def _l1_pair(a, b):  # pragma: no cover - compiled
    s = 0.0  # float64 accumulator, whatever the storage type
    for k in range(a.shape[0]):
        s += abs(a[k] - b[k])
    return s


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _l1_tiles(A, B, out, symmetric):  # pragma: no cover - compiled
    na, d = A.shape
    nb = B.shape[0]
    nti = (na + _TI - 1) // _TI
    ntj = (nb + _TJ - 1) // _TJ
    for t in prange(nti * ntj):
        bi = t // ntj
        bj = t - bi * ntj
        if symmetric and bj < bi:
            continue
        i0 = bi * _TI
        i1 = min(i0 + _TI, na)
        j0 = bj * _TJ
        j1 = min(j0 + _TJ, nb)
        acc = np.zeros((_TI, _TJ), dtype=np.float64)
        for k0 in range(0, d, _TK):
            k1 = min(k0 + _TK, d)
            for i in range(i0, i1):
                a = A[i, k0:k1]
                for j in range(j0, j1):
                    acc[i - i0, j - j0] += _l1_pair(a, B[j, k0:k1])
        for i in range(i0, i1):
            for j in range(j0, j1):
                out[i, j] = acc[i - i0, j - j0]
                if symmetric:
                    out[j, i] = acc[i - i0, j - j0]
    if symmetric:
        for i in range(na):
            out[i, i] = 0.0


def l1_distances(A: np.ndarray, B: np.ndarray | None = None, dtype: np.dtype | str = np.float64) -> np.ndarray:
    """All L1 distances between the rows of ``A`` (and ``B``); float64 accumulation.

    Parameters
    ----------
    A : ndarray, shape (na, d)
    B : ndarray, shape (nb, d), optional
        When omitted, the symmetric ``na x na`` matrix with an exact zero diagonal.
    dtype : dtype of the result
    """
    A = np.ascontiguousarray(A)
    sym = B is None
    Bm = A if sym else np.ascontiguousarray(B, dtype=A.dtype)
    out = np.empty((A.shape[0], Bm.shape[0]), dtype=np.dtype(dtype))
    if A.shape[0] and Bm.shape[0]:
        _l1_tiles(A, Bm, out, sym)
    return out


@njit(parallel=True, cache=True, nogil=True)
def lca_factor_block(acc, G, sq_rows, sq_cols, h2):  # pragma: no cover - compiled
    """``acc[r, c] *= max(sq_rows[r] + sq_cols[c] - 2 G[r, c], 0) / 4 + h2`` for ``c >= r``.

    One scale's factor of the HD-LCA product (tree.hd_lca_product) on the upper triangle of a
    row block; entries left of the diagonal are not touched (they belong to earlier blocks).
    """
    b, w = G.shape
    for r in prange(b):
        s = sq_rows[r]
        for c in range(r, w):
            d2 = s + sq_cols[c] - 2.0 * G[r, c]
            if d2 < 0.0:
                d2 = 0.0
            acc[r, c] *= 0.25 * d2 + h2


@njit(parallel=True, cache=True, nogil=True)
def scatter_condensed(acc, out, i0, m):  # pragma: no cover - compiled
    """Copy row ``i = i0 + r``'s tail ``acc[r, r:]`` (pairs ``j > i``) to its condensed slot."""
    for r in prange(acc.shape[0]):
        i = i0 + r
        start = i * m - (i * (i + 1)) // 2
        for t in range(m - 1 - i):
            out[start + t] = acc[r, r + t]
