"""HypHC's tree (the HHC-TWD competitor): the hyperbolic LCA's closed form, the relaxed Dasgupta cost
and its gradient, training, the decoding, and the tree hdtwd's exact TWD runs on.

The oracles are independent of the module: the geodesic's closest point to the origin found on the
geodesic itself (Möbius maps of the disk), finite differences, the cost written out in NumPy,
SciPy's single linkage, Dijkstra's path metric and linear-programming OT (``conftest``).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from conftest import clades, feature_names, path_metric, planted_groups
from scipy.cluster.hierarchy import cophenet, linkage
from scipy.spatial.distance import squareform

from hdtwd_cli.evaluate._hyperbolic_hc import (
    decode_circle,
    hhc_embedding,
    hhc_loss,
    hhc_tree,
    lca_depth,
    merge_height,
    sample_triplets,
    triplet_similarities,
)


def _disk_distance(z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Poincaré-disk distance between complex points."""
    num = np.abs(z - w) ** 2
    return np.arccosh(1.0 + 2.0 * num / ((1.0 - np.abs(z) ** 2) * (1.0 - np.abs(w) ** 2)))


@pytest.mark.parametrize("r", [0.05, 0.5, 0.9, 0.999])
def test_lca_depth_is_the_geodesics_closest_point_to_the_origin(r):
    # the geodesic from a to b: the Möbius map z -> (z - a) / (1 - conj(a) z) sends a to 0 and the
    # geodesic to a segment from 0; pulled back, its points' distance to the origin is minimised on a
    # grid, refined around the coarse minimum
    def depth_on_geodesic(a: complex, b: complex, s: np.ndarray) -> np.ndarray:
        phi_b = (b - a) / (1 - np.conj(a) * b)
        z = (s * phi_b + a) / (1 + np.conj(a) * s * phi_b)
        return 2.0 * np.arctanh(np.abs(z))

    for delta in [0.0, 0.01, 0.7, 2.0, 3.1, np.pi]:
        a, b = r + 0j, r * np.exp(1j * delta)
        coarse = np.linspace(0.0, 1.0, 10001)
        k = int(np.argmin(depth_on_geodesic(a, b, coarse)))
        fine = np.linspace(coarse[max(k - 1, 0)], coarse[min(k + 1, 10000)], 200001)
        found = float(np.min(depth_on_geodesic(a, b, fine)))
        assert float(lca_depth(delta, r)) == pytest.approx(found, abs=1e-7)
        assert float(lca_depth(-delta, r)) == float(lca_depth(delta, r))
        assert float(lca_depth(2 * np.pi - delta, r)) == pytest.approx(float(lca_depth(delta, r)), rel=1e-12, abs=1e-15)
        L = 2.0 * np.arctanh(r)
        assert float(merge_height(delta, r)) == pytest.approx(L - found, rel=1e-6, abs=1e-7)
    assert float(lca_depth(0.0, r)) == pytest.approx(2.0 * np.arctanh(r), rel=1e-12)  # the leaf itself
    assert float(lca_depth(np.pi, r)) == pytest.approx(0.0, abs=1e-15)  # a diameter through the origin


def _cost_in_numpy(P: np.ndarray, r: float, trip: np.ndarray, w: np.ndarray, tau: float) -> float:
    theta = np.arctan2(P[:, 1], P[:, 0])
    d = np.stack([lca_depth(theta[trip[:, a]] - theta[trip[:, b]], r) for a, b in ((0, 1), (0, 2), (1, 2))], 1)
    sigma = np.exp((d - d.max(axis=1, keepdims=True)) / tau)
    sigma /= sigma.sum(axis=1, keepdims=True)
    return float(np.mean(w.sum(axis=1) - (w * sigma).sum(axis=1)))


@pytest.mark.parametrize("r, tau", [(0.3, 0.1), (0.95, 0.05)])
def test_the_cost_is_hyphcs_and_its_gradient_matches_finite_differences(r, tau):
    rng = np.random.default_rng(1)
    m = 12
    F = rng.normal(size=(m, 6))
    trip = sample_triplets(m, 400, seed=3)
    w = triplet_similarities(F, trip)
    U = F / np.linalg.norm(F, axis=1, keepdims=True)
    for c, (a, b) in enumerate(((0, 1), (0, 2), (1, 2))):  # w = (1 + cos) / 2
        np.testing.assert_allclose(w[:, c], (1 + np.einsum("ij,ij->i", U[trip[:, a]], U[trip[:, b]])) / 2, atol=1e-15)
    P = rng.normal(size=(m, 2)) * 0.4
    loss, grad, grad_r = hhc_loss(P, r, trip, w, tau)
    assert loss == pytest.approx(_cost_in_numpy(P, r, trip, w, tau), rel=1e-12)
    eps = 1e-6
    num = np.zeros_like(P)
    for i in range(m):
        for e in range(2):
            step = np.zeros_like(P)
            step[i, e] = eps
            num[i, e] = (hhc_loss(P + step, r, trip, w, tau)[0] - hhc_loss(P - step, r, trip, w, tau)[0]) / (2 * eps)
    np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-8 * np.abs(num).max())
    assert np.abs(grad).max() > 1e-3  # a gradient that could be wrong
    num_r = (hhc_loss(P, r + eps, trip, w, tau)[0] - hhc_loss(P, r - eps, trip, w, tau)[0]) / (2 * eps)
    assert grad_r == pytest.approx(num_r, rel=1e-5)
    # only the directions count
    assert hhc_loss(P * rng.uniform(0.1, 2.0, size=(m, 1)), r, trip, w, tau)[0] == pytest.approx(loss, rel=1e-12)


def test_training_lowers_the_relaxed_cost():
    F, _ = planted_groups(0, 5)
    emb = hhc_embedding(F, seed=0, epochs=10, triplets=20000)
    assert emb.triplets == 20000 and emb.epoch_loss.shape == (10,)
    assert emb.loss < emb.loss_first - 0.05
    assert emb.epoch_loss[-1] < emb.epoch_loss[0] < emb.loss_first
    assert np.all(np.diff(emb.epoch_loss) < 0)
    assert 0.05 < emb.radius <= 1 - 1e-3  # the leaves move out from HypHC's start towards the boundary
    assert emb.loss == pytest.approx(_cost_in_numpy(emb.points, emb.radius, *_triplets_of(F, 20000, 0), 0.1))


def _triplets_of(F: np.ndarray, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    trip = sample_triplets(F.shape[0], count, [seed, 0])
    return trip, triplet_similarities(F, trip)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_planted_hierarchy_is_recovered(seed):
    F, sub = planted_groups(seed, 5)
    tree = hhc_tree(F, feature_names(F.shape[0]), seed=seed, triplets=100_000)
    found = clades(tree.parent, tree.n_leaves)
    for g in range(4):
        assert frozenset(np.flatnonzero(sub // 2 == g).tolist()) in found, g
    assert tree.metadata["loss"] < tree.metadata["loss_first"]


def test_the_tree_is_binary_and_ultrametric():
    """(Validity and TWD = exact OT: tests/test_tree_contract.py, for every registered tree.)"""
    F, _ = planted_groups(4, 2)
    F[3] = F[2]  # identical vectors
    names = feature_names(F.shape[0])
    tree = hhc_tree(F, names, seed=5, triplets=20000)
    assert tree.n_nodes == 2 * len(names) - 1  # binary
    assert np.all(tree.parent[:-1] > np.arange(tree.n_nodes - 1)) and tree.parent[-1] == -1
    assert np.all(tree.length >= 0) and tree.length[-1] == 0
    assert tree.metadata["method"] == "hhc" and tree.metadata["seed"] == 5
    depth = np.zeros(tree.n_nodes)  # root-to-node path lengths: every leaf equally deep
    for v in range(tree.n_nodes - 2, -1, -1):
        depth[v] = depth[tree.parent[v]] + tree.length[v]
    np.testing.assert_allclose(depth[: tree.n_leaves], depth[0], rtol=1e-12)


def _tree_parent(children: np.ndarray, m: int) -> np.ndarray:
    parent = np.full(2 * m - 1, -1, dtype=np.int64)
    for c, pair in enumerate(children):
        parent[pair] = m + c
    return parent


def test_the_decoding_is_single_linkage_on_the_lca_depth_and_the_heights_bound_the_hyperbolic_distance():
    rng = np.random.default_rng(7)
    m, r = 25, 0.9
    theta = rng.uniform(-np.pi, np.pi, size=m)
    theta[5] = theta[4]  # an exact tie
    children, heights = decode_circle(theta, r)
    assert np.all(np.diff(heights) >= 0)
    parent = _tree_parent(children, m)
    height = np.r_[np.zeros(m), heights]
    length = np.where(parent >= 0, height[np.maximum(parent, 0)] - height, 0.0)
    T = path_metric(parent, length, m)
    # SciPy's single linkage on the merge score L - d_o(z_i v z_j) over every pair
    L = 2.0 * np.arctanh(r)
    gap = theta[:, None] - theta[None, :]
    score = L - lca_depth(gap, r)
    np.fill_diagonal(score, 0.0)
    coph = squareform(cophenet(linkage(squareform(np.maximum(score, 0.0), checks=False), "single")))
    np.testing.assert_allclose(T, 2.0 * coph, atol=1e-9)
    # path lengths never exceed the leaves' hyperbolic distance, and for neighbours on the circle
    # (each merged by its own gap) stay within 2 log 2 of it
    z = r * np.exp(1j * theta)
    Dh = _disk_distance(z[:, None], z[None, :])
    np.fill_diagonal(Dh, 0.0)
    assert np.all(T <= Dh + 1e-9)
    order = np.argsort(np.mod(theta, 2 * np.pi), kind="stable")
    pairs = list(zip(order, np.roll(order, -1)))
    close = [T[i, j] >= Dh[i, j] - 2 * np.log(2) - 1e-9 for i, j in pairs]
    assert sum(close) >= m - 1  # all but the cut (largest) gap


def test_the_decoding_is_light_for_many_leaves():
    m = 15000
    tracemalloc.start()
    try:
        children, heights = decode_circle(np.random.default_rng(0).uniform(0, 7, size=m), 0.99)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert children.shape == (m - 1, 2) and np.all(np.diff(heights) >= 0)
    assert peak < 16 * 2**20  # no m x m array (1.8 GB here)
    assert sorted(np.r_[children.ravel(), 2 * m - 2].tolist()) == list(range(2 * m - 1))


def test_many_features_train_without_an_m_by_m_array():
    F = np.random.default_rng(3).normal(size=(15000, 5))
    tracemalloc.start()
    try:
        tree = hhc_tree(F, feature_names(15000), epochs=1, triplets=5000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    tree.validate()
    assert peak < 64 * 2**20


def test_same_seed_same_embedding_and_the_seed_matters():
    """(The same seed, the same tree bytes: tests/test_tree_contract.py.)"""
    F, _ = planted_groups(3, 3)
    names = feature_names(F.shape[0])
    a = hhc_tree(F, names, seed=11, triplets=10000, epochs=5)
    assert a.metadata == hhc_tree(F, names, seed=11, triplets=10000, epochs=5).metadata
    ea = hhc_embedding(F, seed=11, triplets=10000, epochs=5)
    assert ea.points.tobytes() == hhc_embedding(F, seed=11, triplets=10000, epochs=5).points.tobytes()
    c = hhc_tree(F, names, seed=12, triplets=10000, epochs=5)
    assert a.length.tobytes() != c.length.tobytes() or a.parent.tobytes() != c.parent.tobytes()
    assert not np.array_equal(ea.points, hhc_embedding(F, seed=12, triplets=10000, epochs=5).points)


def test_one_two_and_three_features():
    one = hhc_tree(np.ones((1, 3)), ["a"])
    assert one.parent.tolist() == [-1] and one.length.tolist() == [0.0]
    two = hhc_tree(np.array([[1.0, 0.0], [0.0, 1.0]]), ["a", "b"])
    assert two.parent.tolist() == [2, 2, -1] and two.length[0] == two.length[1] >= 0
    assert two.metadata["triplets"] == 0 and two.metadata["loss"] == 0.0
    rng = np.random.default_rng(0)
    for s in range(10):  # the most similar pair is merged first
        F = rng.normal(size=(3, 4))
        U = F / np.linalg.norm(F, axis=1, keepdims=True)
        C = U @ U.T
        np.fill_diagonal(C, -np.inf)
        i, j = np.unravel_index(np.argmax(C), C.shape)
        tree = hhc_tree(F, ["a", "b", "c"], seed=s, triplets=2000)
        assert tree.parent[i] == tree.parent[j] == 3 and tree.parent[3] == tree.parent[3 - i - j] == 4
        assert tree.metadata["triplets"] == 2000
        assert tree.length[3 - i - j] > tree.length[i] == tree.length[j]


def test_identical_vectors():
    # all identical: every similarity is 1, the cost is 2 per triplet and nothing moves
    F = np.tile([0.6, 0.8, 0.0], (6, 1))
    emb = hhc_embedding(F, seed=0, epochs=2, triplets=1000)
    start = np.random.default_rng([0, 1]).uniform(-0.05, 0.05, size=(6, 2))
    assert emb.loss_first == pytest.approx(2.0) and emb.loss == pytest.approx(2.0)
    np.testing.assert_allclose(emb.points, start, rtol=0, atol=1e-9)
    hhc_tree(F, feature_names(6), triplets=1000).validate()
    # three identical among distinct vectors: their path lengths are among the shortest 5%
    rng = np.random.default_rng(0)
    iu = np.triu_indices(30, 1)
    for s in range(3):
        F = rng.normal(size=(30, 8))
        F[[3, 11, 20]] = F[3]
        tree = hhc_tree(F, feature_names(30), seed=s, triplets=100_000)
        tree.validate()
        C = path_metric(tree.parent, tree.length, 30)
        for a, b in ((3, 11), (3, 20), (11, 20)):
            assert np.mean(C[iu] < C[a, b]) < 0.05


def test_triplets_are_distinct_seeded_and_cover_small_sets_evenly():
    t = sample_triplets(500, 20000, seed=4)
    assert t.shape == (20000, 3) and t.dtype == np.int64
    assert np.all((t >= 0) & (t < 500))
    assert np.all((t[:, 0] != t[:, 1]) & (t[:, 0] != t[:, 2]) & (t[:, 1] != t[:, 2]))
    assert np.array_equal(t, sample_triplets(500, 20000, seed=4))
    assert not np.array_equal(t, sample_triplets(500, 20000, seed=5))
    small = sample_triplets(5, 25, seed=1)  # 10 triplets: each twice, 5 of them three times
    keys = np.sort(small, axis=1) @ np.array([25, 5, 1])
    _, counts = np.unique(keys, return_counts=True)
    assert counts.size == 10 and sorted(counts.tolist()) == [2] * 5 + [3] * 5
    assert sample_triplets(2, 100).shape == (0, 3)


def test_bad_options_are_a_value_error():
    """(Vectors that do not fit the names: tests/test_tree_contract.py.)"""
    with pytest.raises(ValueError, match="temperature"):
        hhc_tree(np.eye(3), ["a", "b", "c"], temperature=0.0)
