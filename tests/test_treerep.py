"""TreeRep (Sonthalia & Gilbert 2020), the tree of TR-TWD.

On an exact tree metric TreeRep recovers it: the path metric of its tree equals the input distances,
and with every node of the planted tree given as a point it is that tree (no Steiner node left).
On vectors: a valid tree with the features as leaves in order, whose TWD is exact OT on its path
metric, the same bits per seed, another tree for another seed; identical vectors, 1 to 3 features
and a line of 3,000 points (a path thousands of edges deep) are handled; distances come from at
most three points at a time, never as the full matrix.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import feature_names, path_metric
from scipy.sparse.csgraph import shortest_path

from hdtwd_cli.evaluate._treerep import _euclidean_fn, _rooted, _treerep, treerep_tree


def _planted(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A random tree on ``n`` nodes (each node's parent drawn among the earlier ones, edge lengths in
    [0.2, 2]): all its nodes' pairwise path lengths and each node's degree."""
    rng = np.random.default_rng(seed)
    parent = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
    length = rng.uniform(0.2, 2.0, n)
    child = np.arange(1, n)
    G = sp.coo_matrix((length[child], (child, parent[child])), shape=(n, n))
    degree = np.bincount(parent[child], minlength=n) + (parent >= 0)
    return shortest_path(G.tocsr(), directed=False), degree


def _on(M: np.ndarray, seed: int = 0):
    m = M.shape[0]
    return _treerep(lambda a, b: M[np.ix_(a, b)], m, [f"p{i}" for i in range(m)], seed)


def _unit(seed: int, m: int, d: int = 4) -> np.ndarray:
    F = np.random.default_rng(seed).normal(size=(m, d))
    return F / np.linalg.norm(F, axis=1, keepdims=True)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("scale", [1.0, 1e-4, 1e5])
def test_a_planted_tree_is_recovered_when_every_node_is_a_point(seed, scale):
    D, degree = _planted(seed, 70)
    perm = np.random.default_rng(100 + seed).permutation(70)
    M = scale * D[np.ix_(perm, perm)]
    for run in range(3):
        tree = _on(M, run)
        tree.validate()
        np.testing.assert_allclose(path_metric(tree.parent, tree.length, 70), M, rtol=0, atol=1e-9 * scale)
        # every Steiner node retracts onto the point at its place: the tree is the planted one, with a
        # node (and the point's leaf under it, at length 0) for each node of degree >= 2
        assert tree.metadata["steiner_nodes"] == 0 and tree.metadata["clipped_edges"] == 0
        assert tree.n_nodes == 70 + int(np.sum(degree >= 2))


@pytest.mark.parametrize("seed", range(10))
def test_a_planted_tree_metric_on_leaves_and_some_inner_nodes_is_recovered(seed):
    D, degree = _planted(seed, 90)
    rng = np.random.default_rng(seed)
    inner = np.flatnonzero(degree >= 2)
    points = np.concatenate([np.flatnonzero(degree == 1), rng.choice(inner, inner.size // 3, replace=False)])
    points = np.append(points, points[0])  # two points at the same place: distance 0
    rng.shuffle(points)
    M = D[np.ix_(points, points)]
    m = points.size
    for run in range(3):
        tree = _on(M, run)
        tree.validate()
        assert tree.leaf_names == [f"p{i}" for i in range(m)]
        np.testing.assert_allclose(path_metric(tree.parent, tree.length, m), M, rtol=0, atol=1e-9)
        assert 0 < tree.metadata["steiner_nodes"] <= m and tree.metadata["clipped_edges"] == 0


@pytest.mark.parametrize("seed", range(4))
def test_on_vectors_identical_ones_share_a_point_and_the_metadata(seed):
    """(Validity and TWD = exact OT: tests/test_tree_contract.py, for every registered tree.)"""
    F = _unit(seed, 14)
    F[5] = F[4]  # identical vectors
    tree = treerep_tree(F, feature_names(14), seed=seed)
    assert tree.metadata["method"] == "treerep" and tree.metadata["seed"] == seed
    C = path_metric(tree.parent, tree.length, 14)
    assert C[4, 5] == pytest.approx(0.0, abs=1e-12)


def test_the_tree_approximates_the_euclidean_distances():
    """Not a tree metric: the path metric is off, but on average by a fraction of the distance."""
    F = _unit(3, 300, d=20)
    C = path_metric(*(lambda t: (t.parent, t.length, 300))(treerep_tree(F, feature_names(300))))
    E = np.sqrt(((F[:, None] - F[None]) ** 2).sum(axis=-1))
    iu = np.triu_indices(300, 1)
    assert np.mean(np.abs(C[iu] / E[iu] - 1)) < 0.5


def test_another_seed_another_tree():
    """(The same seed, the same bytes: tests/test_tree_contract.py.)"""
    F = _unit(5, 200, d=10)
    a, c = (treerep_tree(F, feature_names(200), seed=s) for s in (7, 8))
    assert a.parent.tobytes() != c.parent.tobytes() or a.length.tobytes() != c.length.tobytes()


def test_identical_vectors_are_at_distance_zero():
    F = _unit(1, 30)
    F[10:20] = F[3]  # eleven copies of one vector
    tree = treerep_tree(F, feature_names(30))
    tree.validate()
    C = path_metric(tree.parent, tree.length, 30)
    same = [3, *range(10, 20)]
    np.testing.assert_allclose(C[np.ix_(same, same)], 0.0, atol=1e-12)
    one = treerep_tree(np.tile(F[:1], (9, 1)), feature_names(9))  # all identical
    one.validate()
    assert np.all(one.length == 0.0)


def test_two_and_three_features_are_recovered_exactly():
    """Any metric on 3 points is a tree metric. (Validity at 1-3 features: tests/test_tree_contract.py.)"""
    assert treerep_tree(_unit(0, 1), ["a"]).n_nodes == 1
    for m in (2, 3):
        F = _unit(m, m)
        tree = treerep_tree(F, feature_names(m))
        E = np.sqrt(((F[:, None] - F[None]) ** 2).sum(axis=-1))
        np.testing.assert_allclose(path_metric(tree.parent, tree.length, m), E, rtol=0, atol=1e-12)


def test_points_on_a_line_give_a_path_thousands_deep():
    x = np.sort(np.random.default_rng(4).random(3000))[::-1][:, None]
    tree = treerep_tree(x, feature_names(3000))
    tree.validate()
    assert tree.depth().max() > 1000 and tree.metadata["steiner_nodes"] == 0
    n = tree.n_nodes
    child = np.flatnonzero(tree.parent >= 0)
    G = sp.coo_matrix((tree.length[child] + 1e-300, (child, tree.parent[child])), shape=(n, n))
    src = np.array([0, 1234, 2999])
    C = shortest_path(G.tocsr(), directed=False, indices=src)[:, :3000]
    np.testing.assert_allclose(C, np.abs(x[src] - x[:, 0]), rtol=0, atol=1e-9)


def test_distances_come_from_at_most_three_points_at_a_time():
    F = _unit(6, 2000, d=8)
    base = _euclidean_fn(F)
    asked: list[int] = []
    sources: list[int] = []

    def dist(s: np.ndarray, t: np.ndarray) -> np.ndarray:
        asked.append(s.size * t.size)
        sources.append(s.size)
        return base(s, t)

    tree = _treerep(dist, 2000, feature_names(2000), seed=0)
    assert max(sources) <= 3 and sum(asked) < 2000**2 / 20
    ref = treerep_tree(F, feature_names(2000), seed=0)
    assert tree.length.tobytes() == ref.length.tobytes()


def test_negative_edges_are_clipped_and_points_at_inner_nodes_get_a_leaf():
    edges = {(0, 4): 1.0, (1, 4): -0.5, (3, 4): 0.25, (2, 3): 2.0}
    tree = _rooted(edges, 5, 4, 4, feature_names(4), {"method": "treerep"})
    tree.validate()
    assert tree.metadata["clipped_edges"] == 1 and tree.metadata["clipped_length"] == 0.5
    C = path_metric(tree.parent, tree.length, 4)
    assert C[0, 1] == 1.0 and C[0, 3] == 1.25 and C[2, 3] == 2.0 and C[0, 2] == 3.25
    # point 3 sits between the root and point 2: an internal node with its leaf at length 0
    assert tree.parent[3] >= 4 and tree.length[3] == 0.0
