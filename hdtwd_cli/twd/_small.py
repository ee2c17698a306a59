r"""NumPy twins of the distance step's compiled kernels (:mod:`._kernels`) for small problems.

Below ``_runtime.twins.SMALL_WORK`` elementary operations the callers use these functions instead
of the compiled kernels (whose first call costs numba's start-up). Each performs the same IEEE
operations in the same order as its compiled twin, so the results are the same float64 values
(tested bit for bit):

- sums along a row are sequential (``np.cumsum``, i.e. ``np.add.accumulate``, never pairwise);
- the L1 kernel's overlap sums keep its two-level order (passes of ``TK`` columns summed one
  value at a time, then the passes added);
- element-wise expressions keep the compiled code's parenthesisation.

A sequential sum started from ``0.0`` and ``np.cumsum`` differ only in the sign of an all-zero
result (``0.0 + -0.0``); a final ``+ 0.0`` removes that difference.
"""

from __future__ import annotations

import numpy as np


def _sequential_sum(X: np.ndarray) -> np.ndarray:
    """``((0 + x_0) + x_1) + ...`` along the last axis."""
    if X.shape[-1] == 0:
        return np.zeros(X.shape[:-1])
    return np.cumsum(X, axis=-1)[..., -1] + 0.0


def row_sums_dense(X: np.ndarray) -> np.ndarray:
    """``_kernels._row_sums_dense``: each row summed one value at a time in column order."""
    return _sequential_sum(np.asarray(X, dtype=np.float64))


def _passes(d: int, tk: int) -> list[slice]:
    return [slice(k0, min(k0 + tk, d)) for k0 in range(0, d, tk)]


def norms(A: np.ndarray, tk: int) -> np.ndarray:
    """``_kernels.row_norms``: the two-level row sums of the L1 kernel."""
    A = np.asarray(A, dtype=np.float64)
    tot = np.zeros(A.shape[0])
    for s in _passes(A.shape[1], tk):
        tot += _sequential_sum(A[:, s])
    return tot


def l1_distances(A: np.ndarray, B: np.ndarray | None, dtype: np.dtype, tk: int) -> np.ndarray:
    """``_kernels.l1_distances`` (non-negative rows): ``max((S_a + S_b) - 2 M, 0)``, M in the kernel's order."""
    A = np.asarray(A, dtype=np.float64)
    Bm = A if B is None else np.asarray(B, dtype=np.float64)
    sa = norms(A, tk)
    sb = sa if B is None else norms(Bm, tk)
    M = np.zeros((A.shape[0], Bm.shape[0]))
    for s in _passes(A.shape[1], tk):
        M += _sequential_sum(np.minimum(A[:, None, s], Bm[None, :, s]))
    D = np.maximum((sa[:, None] + sb[None, :]) - 2.0 * M, 0.0)
    if B is None:
        np.fill_diagonal(D, 0.0)
    return D.astype(dtype, copy=False)


def fill_tree_vectors(x: np.ndarray, parent: np.ndarray, cols: np.ndarray, scale: np.ndarray, out: np.ndarray) -> None:
    """``_kernels.tree_vectors_dense`` / ``tree_vectors_csr`` (give ``x`` dense): masses added child to
    parent in node order."""
    n, L = x.shape
    y = np.zeros((n, parent.shape[0]))
    y[:, :L] = x
    for c in range(parent.shape[0] - 1):
        y[:, parent[c]] += y[:, c]
    keep = np.flatnonzero(cols >= 0)
    out[:, cols[keep]] = y[:, keep] * scale[keep]
