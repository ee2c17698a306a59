"""Issue 26 (first part): the competitors' trees (Quadtree, MST) of ``classify --methods``.

Each tree is a valid tree over all features whose TWD equals exact OT on its path metric; the
Quadtree is deterministic per seed and its path metric dominates the Euclidean ground cost (so
exact OT with that cost never exceeds its TWD); the MST's path metric is the distance along it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import exact_ot, path_metric, run_hdtwd
from hdtwd_cli.api import classify_methods
from hdtwd_cli.competitors import cluster_tree, competitor_trees, mst_tree, quadtree
from hdtwd_cli.distance import normalize_rows, tree_wasserstein
from hdtwd_cli.errors import ParameterError
from hdtwd_cli.pipeline import TreeParams, align_to_tree


def _vectors(seed: int, m: int = 14, d: int = 3) -> np.ndarray:
    F = np.random.default_rng(seed).normal(size=(m, d))
    F[5] = F[4]  # identical vectors: never separated by the grid, zero-length edges in the MST
    return F


def _euclid(F: np.ndarray) -> np.ndarray:
    return np.sqrt(((F[:, None, :] - F[None, :, :]) ** 2).sum(axis=-1))


@pytest.mark.parametrize("build", ["quadtree-0", "quadtree-3", "mst", "cluster-0", "cluster-5"])
def test_each_tree_is_valid_and_its_twd_is_exact_ot(build):
    F = _vectors(1)
    names = [f"g{j}" for j in range(F.shape[0])]
    tree = (mst_tree(F, names) if build == "mst" else cluster_tree(F, names, seed=int(build[-1]), branches=3, height=3)
            if build.startswith("cluster") else quadtree(F, names, seed=int(build[-1])))
    tree.validate()
    assert tree.leaf_names == names
    C = path_metric(tree.parent, tree.length, tree.n_leaves)
    H = np.random.default_rng(2).random((5, len(names)))
    H /= H.sum(axis=1, keepdims=True)
    D = tree_wasserstein(tree, H)
    for i in range(5):
        for j in range(i + 1, 5):
            assert D[i, j] == pytest.approx(exact_ot(H[i], H[j], C), rel=1e-8, abs=1e-12)
    if build.startswith("cluster"):
        return  # edges join cluster means: no domination of the Euclidean cost is claimed
    # the path metric dominates the Euclidean ground cost: exact OT on it never exceeds the TWD
    E = _euclid(F)
    assert np.all(C >= E - 1e-9 * E.max())
    for i, j in [(0, 1), (2, 4)]:
        assert exact_ot(H[i], H[j], E) <= D[i, j] * (1 + 1e-9)


def test_quadtree_is_deterministic_per_seed_and_the_seed_matters():
    F = _vectors(3, m=30, d=4)
    names = [f"g{j}" for j in range(30)]
    a, b = quadtree(F, names, seed=7), quadtree(F, names, seed=7)
    assert a.parent.tobytes() == b.parent.tobytes() and a.length.tobytes() == b.length.tobytes()
    metrics = {path_metric(t.parent, t.length, 30).round(12).tobytes() for t in
               (quadtree(F, names, seed=s) for s in range(4))}
    assert len(metrics) > 1


def test_cluster_trees_are_deterministic_per_seed_and_tswd_trees_differ():
    F = _vectors(6, m=40, d=5)
    names = [f"g{j}" for j in range(40)]
    a, b = cluster_tree(F, names, seed=3), cluster_tree(F, names, seed=3)
    assert a.parent.tobytes() == b.parent.tobytes() and a.length.tobytes() == b.length.tobytes()
    X = np.abs(np.random.default_rng(7).normal(size=(50, 40)))
    one = competitor_trees("cluster-tree", X, names, TreeParams(), split=0)[0]
    again = competitor_trees("cluster-tree", X, names, TreeParams(), split=3)[0]
    assert one.parent.tobytes() == again.parent.tobytes()  # no randomness across splits
    sliced = competitor_trees("tswd-5", X, names, TreeParams(), split=0)
    assert len({path_metric(t.parent, t.length, 40).round(12).tobytes() for t in sliced}) > 1


def test_mst_path_metric_is_the_distance_along_the_spanning_tree():
    x = np.array([0.0, 1.0, 1.5, 4.0, 4.25, 9.0])
    rng = np.random.default_rng(0).permutation(6)
    F = x[rng][:, None]  # collinear points: the MST is the line, its path metric |x_i - x_j|
    tree = mst_tree(F, [f"p{j}" for j in range(6)])
    np.testing.assert_allclose(path_metric(tree.parent, tree.length, 6), np.abs(F - F.T), atol=1e-12)


def test_competitor_tree_has_every_column_as_a_leaf_with_hdtwds_weights():
    rng = np.random.default_rng(4)
    X = rng.poisson(2.0, size=(40, 12)).astype(float)
    X[:, 11] = 0.0
    X[0, 11] = 3.0  # non-zero in one row only: absent from the training rows below
    names = [f"g{j}" for j in range(12)]
    for method in ("quadtree", "mst", "cluster-tree", "tswd-5"):
        trees = competitor_trees(method, X[1:], names, TreeParams(), split=1)
        assert len(trees) == (5 if method == "tswd-5" else 1)
        tree = trees[-1]
        assert sorted(tree.leaf_names) == sorted(names)
        assert tree.parent[tree.leaf_names.index("g11")] == tree.root  # unplaced: hung from the root
        assert tree.feature_weights is not None
        H = normalize_rows(align_to_tree(X, names, tree))
        C = path_metric(tree.parent, tree.length, tree.n_leaves)
        D = tree_wasserstein(tree, H)
        assert D[0, 1] == pytest.approx(exact_ot(H[0], H[1], C), rel=1e-8, abs=1e-12)


def test_classify_runs_the_competitors_on_the_same_splits(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.poisson(1.0, size=(60, 16)).astype(float)
    y = np.repeat([0, 1], 30)
    X[y == 0, :8] += rng.poisson(3.0, size=(30, 8))
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "y.txt").write_text("\n".join(map(str, y)) + "\n")
    run_hdtwd("classify", tmp_path / "x.npy", "--labels", tmp_path / "y.txt", "--methods",
              "hdtwd,quadtree,mst,cluster-tree,tswd-5", "--splits", "2", "--json", tmp_path / "r.json", "-q")
    rep = json.loads((tmp_path / "r.json").read_text())
    assert list(rep["methods"]) == ["hdtwd", "quadtree", "mst", "cluster-tree", "tswd-5"]
    for m in ("quadtree", "mst", "cluster-tree", "tswd-5"):
        assert len(rep["methods"][m]["per_split"]) == 2 and rep["methods"][m]["mean"] > 60
    with pytest.raises(ParameterError, match="flowtree"):
        classify_methods(X, ["hdtwd", "flowtree"])
