r"""An ultrametric fitted to the features' Euclidean distances (UltraFit, Chierchia & Perret 2019), as a tree.

An ultrametric :math:`u` on the features is a dendrogram: :math:`u(i, j)` is the height of the
merge that first joins :math:`i` and :math:`j`. UltraFit looks for the ultrametric closest to the
Euclidean distances :math:`d` of the unit feature vectors,

.. math::

    \min_u \sum_{i<j} \big(u(i, j) - d(i, j)\big)^2 ,

parametrising :math:`u` as the subdominant ultrametric (single linkage) of a weighted graph and
descending the gradient of the loss in the edge weights. The gradient reaches only the edge that
creates each merge: for merge :math:`c` of height :math:`h_c`, joining the leaf sets :math:`L_c`
and :math:`R_c`, it is :math:`2 (n_c h_c - S_c)` with :math:`n_c = |L_c||R_c|` and
:math:`S_c = \sum_{i \in L_c, j \in R_c} d(i, j)`. Here each step goes straight to the stationary
point of that coordinate, :math:`h_c = S_c / n_c` (the mean distance across the merge), raised
where needed to its children's heights (an ultrametric's merges never go down), written back to
the creating edges of the complete graph, and single linkage is run again; the loop stops when the
merges no longer change or after :data:`ULTRAFIT_STEPS` steps, keeping the step of least loss.
Chierchia & Perret take Adam steps on the same loss (and add optional terms); for a fixed
hierarchy the stationary point is the same.

The tree: leaves at height 0, merge :math:`c` at height :math:`h_c / 2`, each edge the difference of
its ends' heights, so the path metric is :math:`u` itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hdtwd_cli.tree._tree import Tree

__all__ = ["ULTRAFIT_STEPS", "dendrogram_tree", "ultrafit_tree"]

#: Most single-linkage / re-fit steps of :func:`ultrafit_tree`.
ULTRAFIT_STEPS = 30


def _spanning_edges(W: np.ndarray) -> np.ndarray:
    """The minimum spanning tree of the complete graph ``W`` (dense, symmetric) by Prim's algorithm:
    ``(m - 1, 2)`` edges, ties to the lowest index (deterministic)."""
    m = W.shape[0]
    done = np.zeros(m, dtype=bool)
    done[0] = True
    best = W[0].copy()
    best[0] = np.inf
    source = np.zeros(m, dtype=np.int64)
    edges = np.empty((m - 1, 2), dtype=np.int64)
    for k in range(m - 1):
        v = int(np.argmin(best))
        edges[k] = (source[v], v)
        done[v] = True
        best[v] = np.inf
        closer = (W[v] < best) & ~done
        best[closer] = W[v][closer]
        source[closer] = v
    return edges


def _merges(W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Single linkage of ``W`` from its spanning tree (Kruskal's order: weight, then the edge's ends).

    Returns the creating edge of each merge ``(m - 1, 2)``, scipy's linkage ``Z`` with merge ``c`` at
    height ``c``, and each pair's merge (condensed, from ``cophenet``).
    """
    from scipy.cluster.hierarchy import cophenet

    m = W.shape[0]
    edges = np.sort(_spanning_edges(W), axis=1)
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0], W[edges[:, 0], edges[:, 1]]))]
    root = np.arange(m)  # union-find over the features; cluster id of each root
    cluster = np.arange(m)
    size = np.ones(m, dtype=np.int64)

    def find(a: int) -> int:
        while root[a] != a:
            root[a] = root[root[a]]
            a = int(root[a])
        return a

    Z = np.empty((m - 1, 4))
    for c, (i, j) in enumerate(edges):
        a, b = find(int(i)), find(int(j))
        Z[c] = (min(cluster[a], cluster[b]), max(cluster[a], cluster[b]), c, size[a] + size[b])
        root[b] = a
        size[a] += size[b]
        cluster[a] = m + c
    return edges, Z, np.rint(cophenet(Z)).astype(np.int64)


def ultrafit_tree(F: np.ndarray, names: Sequence[str], steps: int = ULTRAFIT_STEPS) -> Tree:
    r"""The UltraFit tree of the feature vectors ``F`` (one row per feature; Euclidean distances).

    Returns
    -------
    Tree
        Binary, leaves in the order of ``names``; ``metadata`` records ``method``, the steps taken and
        the loss :math:`\sum (u - d)^2` before and after.
    """
    from scipy.spatial.distance import pdist, squareform

    m = F.shape[0]
    if m < 1 or len(names) != m:
        raise ValueError("one vector per feature name is needed")
    if m == 1:  # one leaf, the root: no distance to fit
        return Tree(parent=np.array([-1]), length=np.zeros(1), leaf_names=list(names), metadata={"method": "ultrafit"})
    d = pdist(np.asarray(F, dtype=np.float64))
    W = squareform(d)
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    first_loss = float("nan")
    taken = 0
    at = np.empty(0, dtype=np.int64)
    for taken in range(1, steps + 1):
        edges, Z, new_at = _merges(W)
        if np.array_equal(new_at, at):
            break
        at = new_at
        heights = np.bincount(at, weights=d, minlength=m - 1) / np.bincount(at, minlength=m - 1)
        children = Z[:, :2].astype(np.int64)
        for c in range(m - 1):  # merges in order, children first: never below a child
            for child in children[c]:
                if child >= m:
                    heights[c] = max(heights[c], heights[child - m])
        loss = float(np.sum((heights[at] - d) ** 2))
        first_loss = loss if taken == 1 else first_loss
        if best is None or loss < best[0]:
            best = (loss, children, heights.copy())
        W[edges[:, 0], edges[:, 1]] = W[edges[:, 1], edges[:, 0]] = heights  # the creating edges move
    assert best is not None
    loss, children, heights = best
    meta = {"method": "ultrafit", "steps": taken, "loss_first": first_loss, "loss": loss}
    return dendrogram_tree(children, heights / 2.0, names, meta)


def dendrogram_tree(children: np.ndarray, heights: np.ndarray, names: Sequence[str], metadata: dict) -> Tree:
    """The :class:`Tree` of a binary dendrogram: merge ``c`` (node ``m + c``) joins ``children[c]`` (leaves
    ``< m``, merges ``m + c'``) at ``heights[c]``; leaves at height 0, each edge the difference of its
    ends' heights (clipped at 0), so the path metric is twice the merge heights."""
    m = len(names)
    parent = np.full(2 * m - 1, -1, dtype=np.int64)
    node_height = np.zeros(2 * m - 1)
    node_height[m:] = heights
    for c in range(m - 1):
        parent[children[c]] = m + c
    length = np.where(parent >= 0, node_height[np.maximum(parent, 0)] - node_height, 0.0)
    tree = Tree(parent=parent, length=np.maximum(length, 0.0), leaf_names=list(names), metadata=metadata)
    tree.validate()
    return tree
