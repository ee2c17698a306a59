r"""How well a learned tree recovers a planted hierarchy (benchmarks/bench_recovery.py, tests).

Two measures over the leaves both trees share, each independent of edge lengths or of leaf order:

- **rooted-triplet agreement**: for random triples of leaves :math:`\{i, j, k\}` the planted tree
  joins one pair first (its lowest common ancestor lies strictly below the other two pairs'); the
  share of triples whose learned tree joins the same pair first. A triple the learned tree leaves
  unresolved (one node joins all three) counts :math:`1/3`, so a star tree and a random binary tree
  both score about :math:`1/3` (chance). Triples that the planted tree leaves unresolved are
  drawn again.
- **path-length correlation**: the Spearman correlation, over random pairs of leaves, of the two
  trees' leaf-to-leaf path lengths :math:`d(i, j) = r_i + r_j - 2\,r_{\mathrm{lca}(i,j)}`
  (``r`` the distance from the root; the planted tree with every edge of length 1 unless lengths
  are given).

Lowest common ancestors are found by binary lifting, vectorised over all queries, with no
recursion (single-linkage trees are chains thousands deep).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr

__all__ = ["Recovery", "LcaIndex", "recovery", "triplet_agreement", "path_correlation"]


class LcaIndex:
    """Lowest common ancestors of a rooted tree given by a parent array (``-1`` at the root).

    Parameters
    ----------
    parent : ndarray of int, shape (n_nodes,)
        Any node order (children need not precede parents).
    length : ndarray of float, shape (n_nodes,), optional
        Edge length to the parent; ``None``: every edge has length 1.
    """

    def __init__(self, parent: np.ndarray, length: np.ndarray | None = None) -> None:
        parent = np.asarray(parent, dtype=np.int64)
        n = parent.shape[0]
        roots = np.flatnonzero(parent < 0)
        if roots.size != 1:
            raise ValueError(f"a rooted tree has one root; this parent array has {roots.size}")
        root = int(roots[0])
        lengths = np.ones(n) if length is None else np.asarray(length, dtype=np.float64).copy()
        lengths[root] = 0.0
        # a top-down order (breadth-first from the root) without recursion
        order = np.empty(n, dtype=np.int64)
        children_start = np.zeros(n + 1, dtype=np.int64)
        kids = np.flatnonzero(parent >= 0)
        by_parent = kids[np.argsort(parent[kids], kind="stable")]
        np.add.at(children_start, parent[kids] + 1, 1)
        children_start = np.cumsum(children_start)
        order[0] = root
        head, tail = 0, 1
        while head < tail:
            v = order[head]
            head += 1
            c = by_parent[children_start[v] : children_start[v + 1]]
            order[tail : tail + c.size] = c
            tail += c.size
        if tail != n:
            raise ValueError("the parent array is not one tree (a cycle or an unreachable node)")
        depth = np.zeros(n, dtype=np.int64)
        rootdist = np.zeros(n, dtype=np.float64)
        for v in order[1:]:  # parents come before their children in a breadth-first order
            depth[v] = depth[parent[v]] + 1
            rootdist[v] = rootdist[parent[v]] + lengths[v]
        self.depth = depth
        self.root_distance = rootdist
        up = np.where(parent < 0, root, parent)
        levels = [up]
        for _ in range(max(1, int(depth.max()).bit_length())):
            levels.append(levels[-1][levels[-1]])
        self._up = levels

    def lca(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The lowest common ancestor of each pair ``(a[q], b[q])``."""
        a = np.asarray(a, dtype=np.int64).copy()
        b = np.asarray(b, dtype=np.int64).copy()
        swap = self.depth[a] < self.depth[b]
        a[swap], b[swap] = b[swap], a[swap].copy()
        diff = self.depth[a] - self.depth[b]
        for k, up in enumerate(self._up):
            bit = (diff >> k) & 1 == 1
            a[bit] = up[a[bit]]
        for up in reversed(self._up):
            move = up[a] != up[b]
            a[move] = up[a[move]]
            b[move] = up[b[move]]
        return np.where(a == b, a, self._up[0][a])

    def path_length(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Leaf-to-leaf (node-to-node) path lengths."""
        c = self.lca(a, b)
        return self.root_distance[a] + self.root_distance[b] - 2.0 * self.root_distance[c]


def _first_joined(index: LcaIndex, t: np.ndarray) -> np.ndarray:
    """For triples ``t`` (q x 3 node ids): 0, 1 or 2 for the pair (0,1), (0,2), (1,2) joined first; -1: unresolved."""
    l01 = index.lca(t[:, 0], t[:, 1])
    l02 = index.lca(t[:, 0], t[:, 2])
    l12 = index.lca(t[:, 1], t[:, 2])
    d = np.stack([index.depth[l01], index.depth[l02], index.depth[l12]], axis=1)
    best = np.argmax(d, axis=1)
    top = d[np.arange(d.shape[0]), best]
    unresolved = (d == top[:, None]).sum(axis=1) > 1
    return np.where(unresolved, -1, best)


def triplet_agreement(
    learned: LcaIndex,
    planted: LcaIndex,
    learned_leaf: np.ndarray,
    planted_leaf: np.ndarray,
    *,
    n_triples: int = 20000,
    seed: int = 0,
) -> float:
    r"""Share of random leaf triples that both trees resolve the same way (unresolved in ``learned``: 1/3).

    ``learned_leaf[i]`` and ``planted_leaf[i]`` are the node ids of the i-th shared leaf in each tree.
    """
    n = len(learned_leaf)
    if n < 3:
        raise ValueError("triplets need at least three shared leaves")
    rng = np.random.default_rng(seed)
    got = 0.0
    total = 0
    for _ in range(50):
        t = np.stack([rng.choice(n, size=3, replace=False) for _ in range(n_triples - total)])
        truth = _first_joined(planted, planted_leaf[t])
        keep = truth >= 0
        mine = _first_joined(learned, learned_leaf[t[keep]])
        got += float(np.sum(mine == truth[keep])) + float(np.sum(mine < 0)) / 3.0
        total += int(keep.sum())
        if total >= n_triples:
            break
    if total == 0:
        raise ValueError("the planted tree resolves none of the triples drawn")
    return got / total


def path_correlation(
    learned: LcaIndex,
    planted: LcaIndex,
    learned_leaf: np.ndarray,
    planted_leaf: np.ndarray,
    *,
    n_pairs: int = 20000,
    seed: int = 0,
) -> float:
    """Spearman correlation of the two trees' path lengths over random pairs of distinct shared leaves."""
    n = len(learned_leaf)
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, size=n_pairs)
    j = (i + 1 + rng.integers(0, n - 1, size=n_pairs)) % n
    a = learned.path_length(learned_leaf[i], learned_leaf[j])
    b = planted.path_length(planted_leaf[i], planted_leaf[j])
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(spearmanr(a, b).statistic)


@dataclass(frozen=True)
class Recovery:
    """Both measures of one learned tree against the planted one."""

    triplets: float
    spearman: float


def recovery(
    learned_parent: np.ndarray,
    learned_names: list[str],
    planted_parent: np.ndarray,
    planted_names: list[str],
    *,
    learned_length: np.ndarray | None = None,
    planted_length: np.ndarray | None = None,
    n_triples: int = 20000,
    seed: int = 0,
) -> Recovery:
    """Rooted-triplet agreement and path-length correlation of a learned tree against a planted one.

    Leaves are matched by name: ``learned_names[i]`` names node ``i`` of the learned tree (leaves
    first), likewise for the planted tree; only the names both trees have are compared.
    """
    planted_at = {name: i for i, name in enumerate(planted_names)}
    shared = [(i, planted_at[name]) for i, name in enumerate(learned_names) if name in planted_at]
    if len(shared) < 3:
        raise ValueError("fewer than three leaves are shared by the two trees")
    lq = np.array([s[0] for s in shared], dtype=np.int64)
    pq = np.array([s[1] for s in shared], dtype=np.int64)
    L = LcaIndex(learned_parent, learned_length)
    P = LcaIndex(planted_parent, planted_length)
    return Recovery(
        triplets=triplet_agreement(L, P, lq, pq, n_triples=n_triples, seed=seed),
        spearman=path_correlation(L, P, lq, pq, n_pairs=n_triples, seed=seed),
    )
