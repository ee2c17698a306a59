r"""Compiled complete linkage (numba): the nearest-neighbour chain on a square matrix.

Complete linkage merges, at every step, the two clusters whose largest pairwise value is the
smallest; after merging :math:`A` and :math:`B`

.. math:: d(A \cup B, C) = \max\big(d(A, C),\ d(B, C)\big)

(Lance-Williams). The rule is *reducible*, so the nearest-neighbour chain (Murtagh 1983;
Muellner 2011, Alg. 3) finds the same merges in :math:`O(m^2)` time: follow nearest neighbours
until two clusters are each other's, merge them, go on from the rest of the chain. The merges
come out of height order; a stable sort by height (a cluster is created before it is used, at
no greater height) and a relabelling give SciPy's linkage matrix.

SciPy runs the same algorithm on the condensed vector, where the values of one cluster lie
``m - i`` entries apart: every scan and every update touches a new cache line for most entries.
Here the matrix is square and
symmetric and only the ACTIVE clusters are visited (a sorted list, shortened at each merge): a scan
reads one row in increasing order, an update writes one row and the active entries of one column,
so the work shrinks with the number of clusters (:math:`\sum_s (m - s) \approx m^2/2` entries).
Where the square matrix does not fit, the same chain runs on the condensed vector itself, in
place (:func:`_nn_chain_condensed`: no second copy, slower scans).

Ties: among equal values the chain keeps its predecessor (which guarantees termination), else
takes the smallest active slot; the union keeps the slot of the nearest neighbour found. This is
the one tie rule of complete linkage here: the square and the condensed chains (and the NumPy
twin) make the same comparisons in the same order, so they give the same merges on any values,
ties included, and the tree never depends on which of them the available memory chose. It is not
necessarily SciPy's choice among tied clusters (SciPy keeps the union in the larger slot); with
distinct values the complete-linkage tree is unique and all give it. The chain also reports
whether any of its decisions met a tie (:func:`untied_complete_linkage`): when none did and the
heights are distinct, the tree is the one of EVERY strict order that refines the values (e.g.
``(value, pair index)``), so the caller needs no ranks.
"""

from __future__ import annotations

import numpy as np

from hdtwd_cli._runtime import twins
from hdtwd_cli._runtime.jit import njit, prange
from hdtwd_cli.tree import _small

__all__ = ["complete_linkage", "untied_complete_linkage", "square_bytes", "square_fits"]


@njit(parallel=True, cache=True, nogil=True)
def _square(g, m, D):  # pragma: no cover - compiled
    """``D[i, j] = D[j, i] = g[condensed(i, j)]``; the diagonal is never read.

    The upper triangle is copied row by row (contiguous on both sides), the lower one mirrored
    in 64 x 64 blocks (a block and its transpose stay in cache).
    """
    for i in prange(m):
        start = i * m - (i * (i + 1)) // 2 - i - 1
        D[i, i] = np.inf
        for j in range(i + 1, m):
            D[i, j] = g[start + j]
    nb = (m + 63) // 64
    for bi in prange(nb):
        i0 = bi * 64
        i1 = min(i0 + 64, m)
        for j0 in range(0, i1, 64):
            j1 = min(j0 + 64, m)
            for i in range(i0, i1):
                for j in range(j0, min(j1, i)):
                    D[i, j] = D[j, i]


@njit(cache=True, nogil=True)
def _nn_chain(D, m, a, b, h):  # pragma: no cover - compiled
    """Complete linkage by nearest-neighbour chain on the square ``D`` (overwritten).

    Merge ``s`` joins the clusters held in slots ``a[s]`` and ``b[s]`` at height ``h[s]``; the
    union keeps slot ``b[s]``. ``act[:n]`` lists the active slots in increasing order. Returns
    True when some scan's smallest value was held by two slots (a decision made by slot order).
    """
    act = np.arange(m)
    n = m
    chain = np.empty(m, dtype=np.int64)
    L = 0
    tied = False
    for s in range(m - 1):
        if L == 0:
            chain[0] = act[0]
            L = 1
        while True:
            x = chain[L - 1]
            row = D[x]
            best = np.inf
            y = -1
            seen = np.nan  # a value met twice while it was the smallest so far
            for k in range(n):
                i = act[k]
                if i != x:
                    v = row[i]
                    if v < best:
                        best = v
                        y = i
                    elif v == best:
                        seen = v
            if seen == best:
                tied = True
            if y < 0:
                raise ValueError("complete linkage: the values are not finite")
            if L > 1 and row[chain[L - 2]] == best:
                y = chain[L - 2]
                break
            chain[L] = y
            L += 1
        L -= 2
        x = chain[L + 1]
        a[s] = x
        b[s] = y
        h[s] = best
        rx = D[x]
        ry = D[y]
        w = 0
        for k in range(n):  # the union in slot y; x leaves the active list
            i = act[k]
            if i == x:
                continue
            act[w] = i
            w += 1
            if i != y:
                v = max(rx[i], ry[i])
                ry[i] = v
                D[i, y] = v
        n = w
    return tied


@njit(cache=True, nogil=True)
def _pair(i, j, m):  # pragma: no cover - compiled
    """Index of the pair ``{i, j}`` (``i != j``) in the condensed vector (row-major upper triangle)."""
    if i > j:
        i, j = j, i
    return i * m - (i * (i + 1)) // 2 + j - i - 1


@njit(cache=True, nogil=True)
def _nn_chain_condensed(g, m, a, b, h):  # pragma: no cover - compiled
    """:func:`_nn_chain` on the condensed vector ``g`` itself (overwritten): the same scans, the same merges.

    Every step is :func:`_nn_chain`'s with ``D[i, j]`` read from and written to ``g[_pair(i, j, m)]``
    (the square chain writes both ``D[i, y]`` and ``D[y, i]``, one entry here). The same values
    meet the same comparisons in the same order, so the merges, the heights and the tie flag are
    the square chain's.
    """
    act = np.arange(m)
    n = m
    chain = np.empty(m, dtype=np.int64)
    L = 0
    tied = False
    for s in range(m - 1):
        if L == 0:
            chain[0] = act[0]
            L = 1
        while True:
            x = chain[L - 1]
            best = np.inf
            y = -1
            seen = np.nan  # a value met twice while it was the smallest so far
            for k in range(n):
                i = act[k]
                if i != x:
                    v = g[_pair(x, i, m)]
                    if v < best:
                        best = v
                        y = i
                    elif v == best:
                        seen = v
            if seen == best:
                tied = True
            if y < 0:
                raise ValueError("complete linkage: the values are not finite")
            if L > 1 and g[_pair(x, chain[L - 2], m)] == best:
                y = chain[L - 2]
                break
            chain[L] = y
            L += 1
        L -= 2
        x = chain[L + 1]
        a[s] = x
        b[s] = y
        h[s] = best
        w = 0
        for k in range(n):  # the union in slot y; x leaves the active list
            i = act[k]
            if i == x:
                continue
            act[w] = i
            w += 1
            if i != y:
                cy = _pair(y, i, m)
                g[cy] = max(g[_pair(x, i, m)], g[cy])
        n = w
    return tied


@njit(cache=True, nogil=True)
def _relabel(a, b, order, m, Z):  # pragma: no cover - compiled
    """Slots to SciPy cluster ids, in height order: merge ``s`` creates cluster ``m + s``."""
    label = np.arange(m)  # slot -> current cluster id
    for s in range(order.shape[0]):
        t = order[s]
        ca, cb = label[a[t]], label[b[t]]
        Z[s, 0] = min(ca, cb)
        Z[s, 1] = max(ca, cb)
        label[b[t]] = m + s


def square_bytes(m: int) -> int:
    """Memory of :func:`complete_linkage` beyond its input: the ``m x m`` float64 matrix."""
    return 8 * m * m


def square_fits(m: int, available: int) -> bool:
    """Whether :func:`complete_linkage` copies condensed values into its square matrix (at most half of
    ``available`` bytes); else the chain runs on the condensed vector in place, with the same merges."""
    return square_bytes(m) <= available // 2


def _merges(g: np.ndarray, m: int, in_place: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Slots ``a``, ``b``, heights ``h`` of the chain's merges, and whether a scan met a tie.

    ``g``: the condensed values, or the symmetric ``m x m`` float64 matrix itself (C order; used in
    place and overwritten, its diagonal never read: no copy, no second ``8 m^2`` bytes).
    ``in_place``: condensed values are worked on in place (overwritten where they are contiguous
    float64; no square matrix).
    Every route makes the same decisions (module docstring, "Ties").
    """
    square = g.ndim == 2
    if (g.shape != (m, m)) if square else (g.shape[0] != m * (m - 1) // 2):
        raise ValueError("the values are neither m (m - 1) / 2 condensed values nor an m x m matrix")
    if m * (m - 1) // 2 <= twins.SMALL_WORK:  # the NumPy twin: no numba start-up (and no scipy.cluster)
        return _small.nn_chain(g[np.triu_indices(m, 1)] if square else g, m)
    a = np.empty(max(m - 1, 0), dtype=np.int64)
    b = np.empty(max(m - 1, 0), dtype=np.int64)
    h = np.empty(max(m - 1, 0), dtype=np.float64)
    if square or not in_place:
        if square:
            if g.dtype != np.float64 or not g.flags.c_contiguous:
                raise ValueError("the square matrix must be C-ordered float64")
            D = g
            np.fill_diagonal(D, np.inf)
        else:
            D = np.empty((m, m), dtype=np.float64)
            _square(g, m, D)
        tied = bool(_nn_chain(D, m, a, b, h))
    else:  # in place where g is contiguous float64 (else on a float64 copy: the same values)
        tied = bool(_nn_chain_condensed(np.ascontiguousarray(g, dtype=np.float64), m, a, b, h))
    return a, b, h, tied


def _linkage_matrix(a: np.ndarray, b: np.ndarray, h: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(h, kind="stable")
    Z = np.empty((max(m - 1, 0), 2), dtype=np.int64)
    small = m * (m - 1) // 2 <= twins.SMALL_WORK
    (_relabel.py_func if small else _relabel)(a, b, order, m, Z)
    return Z, h[order]


def complete_linkage(g: np.ndarray, m: int, in_place: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Complete linkage on the condensed values ``g`` (order of ``scipy.spatial.distance.squareform``),
    or on the square matrix ``g`` (overwritten; see :func:`_merges`).

    ``in_place``: the condensed ``g`` is worked on (and overwritten) instead of a square copy, where
    the copy's ``8 m^2`` bytes do not fit; the merges are the same bits either way.

    Returns
    -------
    children : ndarray of int64, shape (m - 1, 2)
        SciPy's ``Z[:, :2]`` (smaller id first; leaves ``< m``, merge ``s`` creates ``m + s``).
    heights : ndarray, shape (m - 1,)
        SciPy's ``Z[:, 2]``, non-decreasing.
    """
    a, b, h, _ = _merges(g, m, in_place)
    return _linkage_matrix(a, b, h, m)


def untied_complete_linkage(g: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`complete_linkage` when no tie decided anything; ``None`` otherwise.

    "Untied": every scan of the chain found its smallest value in one slot only, and the ``m - 1``
    heights are distinct. Then the result equals the complete linkage, on the same values, under
    any strict order that refines them (ties broken by ``(value, min, max)`` ranks, say): let
    ``r`` be the ranks and ``v(r)`` the non-decreasing map back to the values. By induction the
    chain on ``r`` holds ``v``'s preimage of the chain on ``g`` at every step: a strict smallest
    value is the strict smallest rank, and ``max(v(r1), v(r2)) = v(max(r1, r2))``; so both chains
    take the same slots, and distinct heights sort the same way. Returns what
    :func:`complete_linkage` returns (the heights are values of ``g``).
    """
    a, b, h, tied = _merges(g, m)
    if tied:
        return None
    Z, heights = _linkage_matrix(a, b, h, m)
    if heights.shape[0] > 1 and np.any(heights[1:] == heights[:-1]):
        return None
    return Z, heights
