r"""TreeRep (Sonthalia & Gilbert 2020): a weighted tree with Steiner nodes fitted to the features' metric.

TreeRep (R. Sonthalia and A. C. Gilbert, "Tree! I am no Tree! I am a Low Dimensional Hyperbolic
Embedding", NeurIPS 2020, Algorithms 1 and 2) builds a tree from a metric :math:`d` by divide and
conquer; the tree of TR-TWD, the paper's Table 1 competitor, is TreeRep's tree on the Euclidean
distances of the features' unit vectors. Everything rests on the Gromov product

.. math::

    (x|y)_w = \tfrac12 \big(d(w, x) + d(w, y) - d(x, y)\big),

which in a tree is the distance from :math:`w` to the path between :math:`x` and :math:`y`.

**One step.** Given three nodes :math:`x, y, z` and the points :math:`W` still to place near them,
a Steiner node :math:`r` (the median of the three) joins them, with

.. math::

    d(r, x) = (y|z)_x, \qquad d(r, y) = (x|z)_y, \qquad d(r, z) = (x|y)_z .

If one of these is (within the tolerance) 0, :math:`r` is that node itself (the paper's
retraction; this is how data points become internal nodes). Each :math:`w \in W` is sorted by its
three products :math:`g_x = (y|z)_w`, :math:`g_y = (x|z)_w`, :math:`g_z = (x|y)_w`: in a tree the
largest is :math:`d(w, r)` and the other two are equal, and

- all three equal: :math:`w` hangs from :math:`r` on a fourth branch (zone :math:`Z_1(r)`); a
  point with all three 0 *is* the Steiner node, which it then replaces (the paper's retraction of
  :math:`r` onto :math:`w`);
- :math:`g_x` the largest: :math:`w` is on :math:`x`'s side of :math:`r` and
  :math:`d(w, r) = g_x`. Its attachment point on the path :math:`r`--:math:`x` is at distance
  :math:`t_x(w) = (r|w)_x = \tfrac12 (d(x, r) + d(x, w) - d(w, r))` from :math:`x`. With
  :math:`t_x(w) = 0`, :math:`x` lies between :math:`r` and :math:`w` (zone :math:`Z_1(x)`, a
  subtree hanging from :math:`x`); otherwise it attaches strictly between them (zone
  :math:`Z_2(x)`). Likewise for :math:`y` and :math:`z`.

**Recursion.** A zone :math:`Z_1(v)` (one anchor :math:`v`, the points beyond it) is one point
(an edge :math:`v`--:math:`w` of length :math:`d(v, w)`) or the step again on :math:`v` and two of
its points drawn at random; a zone :math:`Z_2(x)` (two anchors :math:`r, x`, joined by an edge
that the step now subdivides) is the step on :math:`r, x` and one of its points drawn at random.
The first step runs on three random points. The distances from a Steiner node to the points of its
zones are the largest Gromov products :math:`d(w, r) = \max(g_x, g_y, g_z)`, so only distances
*from* at most three data points *to* the points of one zone are ever computed (on demand, never
the :math:`m \times m` matrix) and the work is :math:`O(d \sum |W|)` over the steps: about
:math:`O(m d \log m)` when the zones split evenly. Every step places at least one data point, so
there are at most :math:`m` steps and at most :math:`m` Steiner nodes; the steps run from an
explicit stack, not by recursion. For a tree metric each step's products are exact and the path
metric of the result is :math:`d` whichever points are drawn (the paper's exactness theorem for
:math:`\delta = 0`).

**Departures from the paper.**

- A metric that is not a tree metric (Euclidean distances of unit vectors are not) never makes the
  three products equal, nor one of them the other two's. Here :math:`w` goes to the branch of the
  *largest* product (the lowest of :math:`x, y, z` on ties), to :math:`Z_1(r)` only when all three
  are within the tolerance :data:`TREEREP_TOL` times the metric's scale (the largest distance from
  the first three points, at least half the diameter), and to :math:`Z_1(x)` when
  :math:`t_x(w) \le` that tolerance (:math:`t_x(w)` is the mean of the paper's two tests
  :math:`(w|y)_x` and :math:`(w|z)_x`, which agree in a tree). The paper leaves the tolerance to
  the user; this one only absorbs rounding, and being relative it gives the same tree for the
  metric scaled.
- The distance from a Steiner node retracted onto an existing node :math:`v` is :math:`v`'s own
  (a data point's true distances, a Steiner node's stored ones), not the Gromov estimate; a Steiner
  node retracted onto a point :math:`w` of :math:`Z_1(r)` keeps the estimates.
- Off tree metrics the Gromov products of estimated distances can be negative, and so can an edge
  length: edges are clipped to length 0 and ``metadata`` records how many and by how much in all
  (``clipped_edges``, ``clipped_length``; none on the random unit vectors and random metrics tried).
- For hdtwd's :class:`~hdtwd_cli.tree._tree.Tree` the tree is rooted (at the first step's centre:
  the root does not change the distance); a data point at an internal node becomes a leaf hung from
  that node by an edge of length 0, which leaves every path length, hence the TWD, unchanged.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from hdtwd_cli.tree._tree import Tree

__all__ = ["TREEREP_TOL", "treerep_tree"]

#: Relative tolerance of TreeRep's equality tests (retractions, zones), times the metric's scale.
TREEREP_TOL = 1e-9

#: ``dist(sources, targets)``: the ``(len(sources), len(targets))`` distances between data points.
DistFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


class _Zone(NamedTuple):
    """Points still to place near 0, 1 or 2 anchors (tree nodes), with each anchor's distances to them
    and, for two anchors (joined by an edge that the next step subdivides), their distance."""

    points: np.ndarray
    anchors: tuple[int, ...]
    dists: tuple[np.ndarray, ...]
    between: float = 0.0


def _euclidean_fn(F: np.ndarray) -> DistFn:
    """Exact Euclidean distances between rows of ``F`` (differences, not the Gram trick: identical
    rows are at distance exactly 0)."""

    def dist(sources: np.ndarray, targets: np.ndarray) -> np.ndarray:
        T = F[targets]
        out = np.empty((len(sources), len(targets)))
        for a, s in enumerate(sources.tolist()):
            diff = T - F[s]
            out[a] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
        return out

    return dist


def _edges(dist: DistFn, m: int, seed: int, tol_rel: float) -> tuple[dict[tuple[int, int], float], int, int]:
    """TreeRep's tree on data points ``0 .. m-1``: its edges ``{(u, v): length}`` (``u < v``, raw lengths,
    possibly negative), the number of nodes (Steiner nodes are ``m ..``) and the first step's centre."""
    rng = np.random.default_rng(seed)
    edges: dict[tuple[int, int], float] = {}
    n_nodes = m
    first_center = -1
    tol = -1.0  # set from the first step's distances

    def link(u: int, v: int, length: float) -> None:
        key = (u, v) if u < v else (v, u)
        assert key not in edges
        edges[key] = float(length)

    stack = [_Zone(np.arange(m, dtype=np.int64), (), ())]
    while stack:
        zone = stack.pop()
        P, anchors = zone.points, zone.anchors
        na = len(anchors)
        if na == 0 and P.size < 3:  # m = 1 or 2
            if P.size == 2:
                link(int(P[0]), int(P[1]), float(dist(P[:1], P[1:])[0, 0]))
            continue
        if na == 1 and P.size == 1:  # one point beyond an anchor: an edge
            link(anchors[0], int(P[0]), float(zone.dists[0][0]))
            continue
        pos = rng.choice(P.size, size=3 - na, replace=False)
        keep = np.ones(P.size, dtype=bool)
        keep[pos] = False
        picks, rest = P[pos], P[keep]
        nodes = [*anchors, *picks.tolist()]
        # D[k]: distances of triple node k to the rest; pair: between the triple's nodes
        D = np.empty((3, rest.size))
        pair = np.zeros((3, 3))
        for a in range(na):
            D[a] = zone.dists[a][keep]
            pair[a, na:] = zone.dists[a][pos]
        if na == 2:
            pair[0, 1] = zone.between
        both = dist(picks, np.concatenate([rest, picks]))
        D[na:] = both[:, : rest.size]
        pair[na:, na:] = both[:, rest.size :]
        pair = np.triu(pair, 1)
        pair += pair.T  # symmetric from the upper triangle (the estimated distances may be negative)
        if tol < 0:
            tol = tol_rel * max(float(pair.max()), float(D.max()) if D.size else 0.0)
        # the Steiner node's distances to x, y, z and the points' three products (g[k]: large on k's side)
        other = ((1, 2), (0, 2), (0, 1))
        dr = np.array([0.5 * (pair[k, i] + pair[k, j] - pair[i, j]) for k, (i, j) in enumerate(other)])
        g = np.stack([0.5 * (D[i] + D[j] - pair[i, j]) for i, j in other])
        gmax = g.max(axis=0)
        at_center = gmax - g.min(axis=0) <= tol
        branch = g.argmax(axis=0)
        merged = int(np.argmin(dr))
        alive = np.ones(rest.size, dtype=bool)
        if dr[merged] <= tol:  # retract onto a node of the triple
            center = nodes[merged]
            center_dist = D[merged]
        else:
            merged = -1
            center_dist = gmax
            onto = np.flatnonzero(at_center & (gmax <= tol))
            if onto.size:  # retract onto a point sitting at the Steiner node
                center = int(rest[onto[0]])
                alive[onto[0]] = False
            else:
                center = n_nodes
                n_nodes += 1
        if first_center < 0:
            first_center = center
        if na == 2:
            del edges[(anchors[0], anchors[1]) if anchors[0] < anchors[1] else (anchors[1], anchors[0])]
        for k in range(3):
            if nodes[k] != center:
                link(center, nodes[k], dr[k])
        here = at_center & alive
        if here.any():
            stack.append(_Zone(rest[here], (center,), (center_dist[here],)))
        for k in range(3):
            side = ~at_center & (branch == k) & alive
            if not side.any():
                continue
            if k == merged:
                stack.append(_Zone(rest[side], (center,), (center_dist[side],)))
                continue
            t = 0.5 * (dr[k] + D[k] - center_dist)
            beyond = side & (t <= tol)
            inside = side & ~beyond
            if beyond.any():
                stack.append(_Zone(rest[beyond], (nodes[k],), (D[k][beyond],)))
            if inside.any():
                stack.append(_Zone(rest[inside], (center, nodes[k]), (center_dist[inside], D[k][inside]), float(dr[k])))
    return edges, n_nodes, max(first_center, 0)


def _rooted(
    edges: dict[tuple[int, int], float], n_nodes: int, root: int, m: int, names: Sequence[str], metadata: dict
) -> Tree:
    """The graph of ``edges`` (data points ``0 .. m-1``, Steiner nodes after) as a :class:`Tree` rooted at
    ``root``: breadth first from the root (iterative), internal nodes numbered in reverse order so the
    root is last, a data point with children replaced by an internal node with the point's leaf hung
    from it by an edge of length 0, negative lengths clipped to 0 (counted in ``metadata``)."""
    keys = np.array(list(edges), dtype=np.int64).reshape(-1, 2)
    raw = np.fromiter(edges.values(), dtype=np.float64, count=len(edges))
    ends = np.concatenate([keys[:, 0], keys[:, 1]])
    order = np.argsort(ends, kind="stable")
    other = np.concatenate([keys[:, 1], keys[:, 0]])[order].tolist()
    weight = np.concatenate([raw, raw])[order].tolist()
    start = np.searchsorted(ends[order], np.arange(n_nodes + 1)).tolist()
    up = np.full(n_nodes, -1, dtype=np.int64)  # parent in the rooted graph
    up_length = np.zeros(n_nodes)
    seen = np.zeros(n_nodes, dtype=bool)
    seen[root] = True
    queue = deque([root])
    bfs = []
    while queue:
        x = queue.popleft()
        bfs.append(x)
        for e in range(start[x], start[x + 1]):
            y = other[e]
            if not seen[y]:
                seen[y] = True
                up[y] = x
                up_length[y] = weight[e]
                queue.append(y)
    if len(bfs) != n_nodes:
        raise AssertionError("TreeRep's graph is not connected")
    has_child = np.zeros(n_nodes, dtype=bool)
    has_child[up[up >= 0]] = True
    inner = [x for x in bfs if has_child[x]]  # parents before children
    if np.any(~has_child[m:]):
        raise AssertionError("a Steiner node of TreeRep's graph is a leaf")
    k = len(inner)
    rep = np.arange(n_nodes)  # the tree node of each graph node: its internal node, or its leaf
    rep[inner] = m + k - 1 - np.arange(k)
    parent = np.full(m + k, -1, dtype=np.int64)
    length = np.zeros(m + k)
    data = np.arange(m)
    site = has_child[:m]
    parent[data[site]] = rep[data[site]]  # a data point at an internal node: its leaf, at length 0
    tip = data[~site & (up[:m] >= 0)]  # (the root is a leaf only when it is the one point)
    parent[tip] = rep[up[tip]]
    length[tip] = up_length[tip]
    inner_arr = np.array(inner, dtype=np.int64)
    below = inner_arr[up[inner_arr] >= 0]
    parent[rep[below]] = rep[up[below]]
    length[rep[below]] = up_length[below]
    negative = length < 0
    metadata = dict(metadata)
    metadata["steiner_nodes"] = int(n_nodes - m)
    metadata["clipped_edges"] = int(negative.sum())
    metadata["clipped_length"] = float(np.maximum(-length, 0.0).sum())
    tree = Tree(parent=parent, length=np.maximum(length, 0.0), leaf_names=list(names), metadata=metadata)
    tree.validate()
    return tree


def _treerep(dist: DistFn, m: int, names: Sequence[str], seed: int = 0, tol: float = TREEREP_TOL) -> Tree:
    """TreeRep's tree on ``m`` data points whose distances ``dist`` gives (any metric), as a :class:`Tree`."""
    if m < 1 or len(names) != m:
        raise ValueError("one data point per leaf name is needed")
    edges, n_nodes, root = _edges(dist, m, int(seed), float(tol))
    return _rooted(edges, n_nodes, root, m, names, {"method": "treerep", "seed": int(seed), "tol": float(tol)})


def treerep_tree(F: np.ndarray, names: Sequence[str], seed: int = 0) -> Tree:
    r"""TreeRep's tree (Sonthalia & Gilbert 2020) on the Euclidean distances of the feature vectors ``F``.

    Parameters
    ----------
    F : ndarray of float64, shape (m, d)
        One row per feature (unit vectors in the features' space); distances are computed from
        them on demand, never as an ``m x m`` matrix.
    names : sequence of str
        The features' names, one per row of ``F``.
    seed : int
        Seeds ``numpy.random.default_rng``, which draws the points of every step: the same ``F``
        and seed give the same tree, bit for bit.

    Returns
    -------
    Tree
        Leaves in the order of ``names``, Steiner nodes (and the sites of features TreeRep placed
        at internal nodes) as internal nodes, root last; ``metadata`` records ``method``, ``seed``,
        ``tol``, ``steiner_nodes`` and the clipped negative edges (``clipped_edges``,
        ``clipped_length``).
    """
    F = np.asarray(F, dtype=np.float64)
    if F.ndim != 2 or not np.all(np.isfinite(F)):
        raise ValueError("the feature vectors must be a finite m x d array")
    return _treerep(_euclidean_fn(F), F.shape[0], names, seed)
