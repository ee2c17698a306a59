"""Linkage rules (the same merges whatever the available memory), presets, and a planted random tree.

Planted-tree threshold measured with the library defaults on seeds 0-2 (400 samples, 64 genes,
4 classes): Spearman(hdtwd TWD, true-tree TWD) = 0.903, 0.891, 0.911 (mean 0.902; the paper preset:
0.943, 0.850, 0.915), against 0.859, 0.870, 0.852 (mean 0.860) for the L1 distance between
histograms (a star tree).
"""

import numpy as np
import pytest
from conftest import SAMPLE, exact_ot, path_metric, run_hdtwd
from scipy.spatial.distance import pdist, squareform
from scipy.stats import spearmanr

from hdtwd_cli._defaults import EDGE_WEIGHTS, LINKAGES, PRESETS
from hdtwd_cli.evaluate._synthetic import planted_counts
from hdtwd_cli.tree._learn import learn_tree
from hdtwd_cli.tree._params import TreeParams, resolve_params
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._distance import tree_wasserstein
from hdtwd_cli.twd._histograms import normalize_rows


@pytest.mark.parametrize("weights", EDGE_WEIGHTS)
@pytest.mark.parametrize("rule", LINKAGES)
def test_every_linkage_gives_a_valid_tree_whose_twd_is_exact_ot(rule, weights):
    X, _, _ = planted_counts(40, 12, 3, seed=5)
    tree = learn_tree(
        X, [f"g{j}" for j in range(12)], TreeParams.from_preset("paper", linkage=rule, edge_weights=weights)
    )
    tree.validate()
    assert tree.n_nodes == 23
    assert np.all(np.diff(tree.merge_height) >= -1e-12)
    D = tree_wasserstein(tree, X)
    C = path_metric(tree.parent, tree.length, 12)
    H = normalize_rows(X)
    for i, j in [(0, 1), (2, 7), (5, 30)]:
        ot = exact_ot(H[i], H[j], C)
        assert abs(D[i, j] - ot) <= 1e-8 * ot


def test_linkage_rules_differ_on_real_structure():
    X, _, _ = planted_counts(200, 40, 4, seed=1)
    names = [f"g{j}" for j in range(40)]
    parents = {
        rule: learn_tree(X, names, TreeParams.from_preset("paper", linkage=rule)).parent.tolist() for rule in LINKAGES
    }
    assert len({tuple(p) for p in parents.values()}) >= 3


def test_paper_preset_is_the_specification():
    params, transform = resolve_params("paper")
    assert (params.linkage, params.bandwidth, params.metric, transform) == ("single", "median", "cosine", "none")
    assert (params.eps, params.scales) == (1.0, 7)
    # explicit options win over the preset
    params, _ = resolve_params("paper", eps=2.0, linkage="complete")
    assert params.eps == 2.0 and params.linkage == "complete" and params.scales == 7
    assert set(PRESETS) >= {"paper", "default"}


def test_paper_preset_cli_equals_the_spec_functions(tmp_path):
    run_hdtwd("distance", SAMPLE / "produce.csv", "--preset", "paper", "-o", tmp_path / "D.npy")
    import csv

    rows = list(csv.reader(open(SAMPLE / "produce.csv")))
    X = np.array([[float(v) for v in r[1:]] for r in rows[1:]])
    tree = learn_tree(
        X, rows[0][1:], TreeParams.from_preset("paper", eps=1.0, scales=7, linkage="single", bandwidth="median")
    )
    assert np.array_equal(np.load(tmp_path / "D.npy"), tree_wasserstein(tree, X))


def test_planted_random_tree_twd_is_recovered():
    m = 64
    names = [f"g{j}" for j in range(m)]
    params, transform = resolve_params("default")
    ours, star = [], []
    for seed in range(3):
        X, _, parent = planted_counts(400, m, 4, seed=seed)
        truth = Tree(parent=parent, length=np.r_[np.ones(2 * m - 2), 0.0], leaf_names=names)
        T = tree_wasserstein(truth, X)
        iu = np.triu_indices(X.shape[0], 1)
        from hdtwd_cli.tree._params import apply_transform

        Xt = apply_transform(X, transform)
        D = tree_wasserstein(learn_tree(Xt, names, params), Xt)
        ours.append(spearmanr(D[iu], T[iu])[0])
        star.append(spearmanr(squareform(pdist(normalize_rows(X), "cityblock"))[iu], T[iu])[0])
    print("Spearman hdtwd:", np.round(ours, 3), "L1:", np.round(star, 3))
    assert min(ours) > 0.80
    assert np.mean(ours) > np.mean(star)


def test_lca_weights_make_the_tree_ultrametric():
    X, _, _ = planted_counts(60, 15, 3, seed=2)
    tree = learn_tree(
        X, [f"g{j}" for j in range(15)], TreeParams.from_preset("paper", linkage="average", edge_weights="lca")
    )
    root_dist = np.zeros(tree.n_nodes)
    for v in range(tree.n_nodes - 2, -1, -1):
        root_dist[v] = root_dist[tree.parent[v]] + tree.length[v]
    # every leaf is equally far from the root: heights are log a, leaves all at mean_k log h_k
    assert np.allclose(root_dist[:15], root_dist[0], rtol=1e-12)
    assert np.all(tree.length[:-1] >= 0)


def _tied_products(seed: int = 0) -> list[tuple[np.ndarray, int, int]]:
    """Condensed HD-LCA products ``(g, m, K + 1)`` with many exact ties, as the linkage receives them.

    A planted embedding whose ``psi`` rows are drawn from a few dyadic prototypes per scale (every
    sum and product exact, so pairs with the same prototypes at every scale tie bit for bit); a
    hand-made vector of four values; and the real product of a landmark embedding of counts whose
    features come in identical copies (a copy's row is the same bits through every stage).
    """
    from hdtwd_cli.tree._hd_lca import hd_lca_product
    from hdtwd_cli.tree._hyperbolic import HyperbolicEmbedding, hyperbolic_embedding, scale_heights
    from hdtwd_cli.tree._landmarks import landmark_operator

    rng = np.random.default_rng(seed)
    m, K = 60, 3
    protos = rng.integers(0, 3, size=(K + 1, 4, 3)) / 4.0
    groups = rng.integers(0, 4, size=(K + 1, m))
    psi = np.stack([protos[k, groups[k]] for k in range(K + 1)])
    planted = hd_lca_product(HyperbolicEmbedding(psi=psi, heights=scale_heights(K), negative_mass=np.zeros(K + 1)))
    hand = np.round(rng.random(m * (m - 1) // 2) * 3) + 1.0
    X = rng.poisson(0.8, size=(80, 30)).astype(float)[:, rng.integers(0, 30, size=90)]
    real = hd_lca_product(hyperbolic_embedding(landmark_operator(X, 12, seed=0), 4))
    out = [(planted, m, K + 1), (hand, m, K + 1), (real, 90, 5)]
    for g, _, _ in out:
        assert np.unique(g).size < g.size // 2  # many exact ties
    return out


@pytest.mark.parametrize("compiled", [True, False])  # numba, or the NumPy twins (small problems)
@pytest.mark.parametrize("tie_ranks", [True, False], ids=["exact", "landmarks"])
@pytest.mark.parametrize("rule", LINKAGES)
def test_the_merges_never_depend_on_the_available_memory(rule, tie_ranks, compiled, monkeypatch):
    # where the square matrix fits, complete linkage runs on it (a copy, or the square product
    # itself); else on the condensed vector: the same merges, exact ties included, for every rule
    from scipy.spatial.distance import squareform

    from hdtwd_cli._runtime import memory, twins
    from hdtwd_cli.tree._hd_lca import lca_merges, lca_tree
    from hdtwd_cli.tree._hyperbolic import scale_heights

    if compiled:
        monkeypatch.setattr(twins, "SMALL_WORK", 0)
    for g, m, n_scales in _tied_products():
        merges = []
        for have in (1 << 62, 0):  # every square matrix fits; none does
            monkeypatch.setattr(memory, "available_memory", lambda have=have: have)
            merges.append(lca_merges(g.copy(), m, n_scales, rule, tie_ranks))
        assert all(np.array_equal(u, v) for u, v in zip(*merges))
        if rule == "complete" and not tie_ranks:  # landmarks, one K: the product written into the square matrix
            names = [f"f{j}" for j in range(m)]
            tree = lca_tree(g.copy(), scale_heights(n_scales - 1), names, rule, tie_ranks=False)
            square = lca_tree(squareform(g), scale_heights(n_scales - 1), names, rule, tie_ranks=False)
            assert np.array_equal(tree.parent, square.parent) and np.array_equal(tree.length, square.length)


@pytest.mark.parametrize("weights", EDGE_WEIGHTS)
def test_a_landmark_tree_with_ties_never_depends_on_the_available_memory(weights, monkeypatch):
    # the whole chain (landmarks, complete linkage; with lca weights and 3 scales the product is written
    # straight into the square matrix where it fits) on counts whose features come in identical copies
    from hdtwd_cli._runtime import memory

    rng = np.random.default_rng(3)
    X = rng.poisson(0.8, size=(80, 30)).astype(float)[:, rng.integers(0, 30, size=90)]
    names = [f"f{j}" for j in range(90)]
    params = TreeParams(landmarks=12, scales=3, linkage="complete", edge_weights=weights, denoise=0)
    trees = []
    for have in (1 << 62, 0):
        monkeypatch.setattr(memory, "available_memory", lambda have=have: have)
        trees.append(learn_tree(X, names, params))
    a, b = trees
    assert np.array_equal(a.parent, b.parent) and np.array_equal(a.length, b.length)
    assert np.array_equal(a.merge_height, b.merge_height)
