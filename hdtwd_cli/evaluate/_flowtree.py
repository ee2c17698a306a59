r"""Flowtree (Backurs et al., ICML 2020): the quadtree's optimal flow, costed in the ground metric.

For histograms :math:`a, b` over the features and a tree whose leaves are the features, a flow
that moves every unit of surplus :math:`a_u - b_u` to a deficit inside the smallest subtree that
holds both is optimal for the tree metric (its cost is the TWD). Flowtree computes one such flow on
the quadtree (:func:`._competitors.quadtree`) and evaluates it with the Euclidean ground cost of
the unit feature vectors instead of the tree's lengths:

.. math::

    \mathrm{FT}(a, b) = \sum_{(u, v)} f_{uv} \, \lVert x_u - x_v \rVert_2 .

The flow is built bottom-up: the leaves where :math:`a` and :math:`b` differ carry their signed
surplus; node by node, deepest first, the surpluses of opposite sign that meet at a node are
matched greedily (in the order of the leaves' indices) and what is left moves to the parent. At the
root everything is matched (both histograms sum to 1). Since :math:`f` is a feasible transport
plan, :math:`\mathrm{FT} \ge W` (exact OT on the Euclidean cost), and since the quadtree's path
metric dominates the Euclidean one, :math:`\mathrm{FT} \le` the quadtree TWD (both tested). Which
tree-optimal flow is chosen (the greedy order) changes the value; Backurs et al. leave it open.

``classify --methods flowtree`` scores it on the test rows of ``ot``'s budget
(:func:`._exact_ot.scored_rows`: the same rows as exact OT, all training rows as neighbours), between
the split's histograms (the quadtree carries the training rows' denoiser and weights).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.jit import njit, prange

__all__ = ["flowtree_distances", "node_depths"]


def node_depths(parent: np.ndarray) -> np.ndarray:
    """Edges from each node to the root (every node precedes its parent: one pass from the root down)."""
    depth = np.zeros(parent.size, dtype=np.int64)
    for v in range(parent.size - 1, -1, -1):
        if parent[v] >= 0:
            depth[v] = depth[parent[v]] + 1
    return depth


@njit(cache=True, nogil=True)
def _pair_cost(ai, av, bi, bv, parent, depth, V, leaf, node, mass, order):  # pragma: no cover - compiled
    # signed surplus per leaf where the histograms differ (indices sorted in both rows)
    p, q, k = 0, 0, 0
    while p < ai.size or q < bi.size:
        if q >= bi.size or (p < ai.size and ai[p] < bi[q]):
            u, d = ai[p], av[p]
            p += 1
        elif p >= ai.size or bi[q] < ai[p]:
            u, d = bi[q], -bv[q]
            q += 1
        else:
            u, d = ai[p], av[p] - bv[q]
            p += 1
            q += 1
        if d != 0.0:
            leaf[k] = u
            node[k] = u
            mass[k] = d
            k += 1
    cost = 0.0
    active = k
    while active > 0:
        deepest = 0
        for e in range(active):
            if depth[node[e]] > deepest:
                deepest = depth[node[e]]
        # the entries at the deepest level, grouped by node (then by leaf: a fixed order)
        n_sel = 0
        for e in range(active):
            if depth[node[e]] == deepest:
                order[n_sel] = e
                n_sel += 1
        keys = np.empty(n_sel, dtype=np.int64)
        for t in range(n_sel):
            keys[t] = node[order[t]] * (parent.size + 1) + leaf[order[t]]
        sel = order[:n_sel][np.argsort(keys)]
        g0 = 0
        while g0 < n_sel:
            g1 = g0
            while g1 < n_sel and node[sel[g1]] == node[sel[g0]]:
                g1 += 1
            i, j = g0, g0  # next positive, next negative in the group
            while True:
                while i < g1 and mass[sel[i]] <= 0.0:
                    i += 1
                while j < g1 and mass[sel[j]] >= 0.0:
                    j += 1
                if i >= g1 or j >= g1:
                    break
                f = min(mass[sel[i]], -mass[sel[j]])
                u, v = leaf[sel[i]], leaf[sel[j]]
                s = 0.0
                for c in range(V.shape[1]):
                    t = V[u, c] - V[v, c]
                    s += t * t
                cost += f * np.sqrt(s)
                mass[sel[i]] -= f
                mass[sel[j]] += f
                if mass[sel[i]] <= 0.0:
                    mass[sel[i]] = 0.0
                    i += 1
                if mass[sel[j]] >= 0.0:
                    mass[sel[j]] = 0.0
                    j += 1
            for t in range(g0, g1):  # what is left moves up (at the root nothing is left)
                node[sel[t]] = parent[node[sel[t]]]
            g0 = g1
        kept = 0  # drop the matched entries and those past the root
        for e in range(active):
            if mass[e] != 0.0 and node[e] >= 0:
                leaf[kept] = leaf[e]
                node[kept] = node[e]
                mass[kept] = mass[e]
                kept += 1
        active = kept
    return cost


@njit(parallel=True, cache=True, nogil=True)
def _flowtree(aptr, aidx, aval, bptr, bidx, bval, parent, depth, V, out):  # pragma: no cover - compiled
    widest = 0
    for i in range(bptr.size - 1):
        widest = max(widest, bptr[i + 1] - bptr[i])
    for i in range(aptr.size - 1):
        widest = max(widest, aptr[i + 1] - aptr[i])
    for i in prange(aptr.size - 1):
        leaf = np.empty(2 * widest, dtype=np.int64)
        node = np.empty(2 * widest, dtype=np.int64)
        mass = np.empty(2 * widest, dtype=np.float64)
        order = np.empty(2 * widest, dtype=np.int64)
        ai, av = aidx[aptr[i] : aptr[i + 1]], aval[aptr[i] : aptr[i + 1]]
        for j in range(bptr.size - 1):
            bi, bv = bidx[bptr[j] : bptr[j + 1]], bval[bptr[j] : bptr[j + 1]]
            out[i, j] = _pair_cost(ai, av, bi, bv, parent, depth, V, leaf, node, mass, order)


def flowtree_distances(A: sp.spmatrix, B: sp.spmatrix, parent: np.ndarray, V: np.ndarray) -> np.ndarray:
    r"""Flowtree cost between every row of ``A`` and every row of ``B`` (``p x q``).

    Parameters
    ----------
    A, B : sparse matrix, shape (p, m) and (q, m)
        Histograms over the tree's ``m`` leaves (rows summing to 1), columns in leaf order.
    parent : ndarray, shape (n_nodes,)
        The tree (leaves ``0..m-1``; every node precedes its parent; the root's parent is -1).
    V : ndarray, shape (m, d)
        The leaves' ground vectors (cost :math:`\lVert V_u - V_v\rVert_2`).

    Returns
    -------
    ndarray, shape (p, q)
        Each entry computed alone (one thread per row of ``A``): the same at any thread count.
    """
    A = sp.csr_matrix(A, dtype=np.float64)
    B = sp.csr_matrix(B, dtype=np.float64)
    for H in (A, B):
        H.sum_duplicates()
        H.sort_indices()
    out = np.empty((A.shape[0], B.shape[0]))
    parent = np.asarray(parent, dtype=np.int64)
    a = (A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data)
    b = (B.indptr.astype(np.int64), B.indices.astype(np.int64), B.data)
    _flowtree(*a, *b, parent, node_depths(parent), np.ascontiguousarray(V, dtype=np.float64), out)
    return out
