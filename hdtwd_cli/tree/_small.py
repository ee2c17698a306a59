r"""NumPy twins of the tree's compiled kernels (:mod:`._kernels`, :mod:`._linkage`) for small problems.

The first call of any compiled function costs numba's start-up (typing context, cached machine
code), more than the whole work on a matrix of a few hundred samples. Below
``_runtime.twins.SMALL_WORK`` elementary operations the callers use these functions instead. Each
performs the same IEEE operations in the same order as its compiled twin, so the results are the
same float64 values (tested bit for bit); element-wise expressions keep the compiled code's
parenthesisation.
"""

from __future__ import annotations

import numpy as np


def lca_factor_condensed(
    out: np.ndarray, G: np.ndarray, sq_rows: np.ndarray, sq_cols: np.ndarray, h2: float, i0: int, c0: int, m: int
) -> None:
    """``_kernels.lca_factor_condensed``: ``g[i, j] *= max((s_r + s_c) - 2 G, 0) / 4 + h2`` for ``j > i``."""
    for r in range(G.shape[0]):
        i = i0 + r
        start = i * m - (i * (i + 1)) // 2
        n = m - 1 - i
        c = i + 1 - c0
        out[start : start + n] *= _lca_factor(sq_rows[r], sq_cols[c : c + n], G[r, c : c + n], h2)


def lca_factor_tile(acc: np.ndarray, G: np.ndarray, sq_rows: np.ndarray, sq_cols: np.ndarray, h2: float) -> None:
    """One scale of ``_kernels.lca_product_tile``: ``acc *= max((s_r + s_c) - 2 G, 0) / 4 + h2``."""
    acc *= _lca_factor(sq_rows[:, None], sq_cols[None, :], G, h2)


def _lca_factor(sq_rows: np.ndarray, sq_cols: np.ndarray, G: np.ndarray, h2: float) -> np.ndarray:
    """One scale's HD-LCA factor ``max((s_r + s_c) - 2 G, 0) / 4 + h2`` (the kernels' expression, broadcast)."""
    d2 = (sq_rows + sq_cols) - 2.0 * G
    d2[d2 < 0.0] = 0.0
    return 0.25 * d2 + h2


def tile_to_condensed(acc: np.ndarray, out: np.ndarray, i0: int, j0: int, m: int) -> None:
    """``_kernels.tile_to_condensed``: the pairs ``j > i`` of the tile to their condensed slots."""
    for r in range(acc.shape[0]):
        i = i0 + r
        cf = max(i + 1 - j0, 0)
        start = i * m - (i * (i + 1)) // 2 + (j0 + cf - i - 1)
        out[start : start + acc.shape[1] - cf] = acc[r, cf:]


def nn_chain(g: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """``_linkage._square`` and ``_linkage._nn_chain``: the same chain, ties and merges, one NumPy step each.

    Left clusters are marked with ``inf`` (their row and column) instead of leaving the active
    list; a scan's ``argmin`` takes the first minimum, i.e. the smallest slot, as the compiled
    scan does. Returns the slots ``a``, ``b`` and heights ``h`` of each merge, and whether a scan's
    smallest value was held by two slots.
    """
    D = np.empty((m, m), dtype=np.float64)
    iu = np.triu_indices(m, 1)
    D[iu] = g
    D.T[iu] = g
    np.fill_diagonal(D, np.inf)
    a = np.empty(max(m - 1, 0), dtype=np.int64)
    b = np.empty(max(m - 1, 0), dtype=np.int64)
    h = np.empty(max(m - 1, 0), dtype=np.float64)
    chain: list[int] = []
    active = np.ones(m, dtype=bool)
    tied = False
    for s in range(m - 1):
        if not chain:  # a new chain starts at the smallest active slot
            chain.append(int(np.argmax(active)))
        while True:
            x = chain[-1]
            y = int(np.argmin(D[x]))
            best = D[x, y]
            if not np.isfinite(best):
                raise ValueError("complete linkage: the values are not finite")
            tied = tied or int(np.count_nonzero(D[x] == best)) > 1
            if len(chain) > 1 and D[x, chain[-2]] == best:
                y = chain[-2]
                break
            chain.append(y)
        del chain[-2:]
        a[s], b[s], h[s] = x, y, best
        v = np.maximum(D[x], D[y])  # the union in slot y; x leaves (its row and column: inf)
        v[y] = np.inf
        D[y] = v
        D[:, y] = v
        D[x] = np.inf
        D[:, x] = np.inf
        active[x] = False
    return a, b, h, tied


def reconstruct_rows(F: np.ndarray, mu: np.ndarray, V: np.ndarray, Vt: np.ndarray, out: np.ndarray) -> None:
    """``_kernels.reconstruct_rows``: the same sums in the same order, vectorised across rows (a zero value's
    product adds nothing to a sum that is never ``-0.0``, so the twin need not skip it)."""
    z = np.zeros((F.shape[0], V.shape[1]))
    muV = np.zeros(V.shape[1])
    for j in range(F.shape[1]):
        z += F[:, j : j + 1] * V[j]
        muV += mu[j] * V[j]
    z -= muV
    out[:] = mu
    for k in range(V.shape[1]):
        out += z[:, k : k + 1] * Vt[k]
