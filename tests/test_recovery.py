"""Recovering a planted feature hierarchy: the measures themselves, and the learners against them.

The measures (:mod:`hdtwd_cli.evaluate._recovery`) against brute force: lowest common ancestors by
ancestor sets, rooted triplets by which pair's ancestor is deepest. Then the average-linkage
learner (``learner="average"``, docs/method.md section 14): its correlation distances against
SciPy's ``pdist``, the same bits from dense, sparse and denoised storage, its TWD equal to exact OT,
and a planted tree recovered; every competitor tree measured by the same function.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import SAMPLE, assert_twd_is_exact_ot
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import pdist
from scipy.stats import rankdata

from hdtwd_cli._defaults import AVERAGE_HEIGHT_POWER
from hdtwd_cli.evaluate._competitors import BUILDERS, feature_vectors, star_tree
from hdtwd_cli.evaluate._recovery import LcaIndex, recovery, triplet_agreement
from hdtwd_cli.evaluate._synthetic import planted_hierarchy, random_binary_tree, shaped_binary_tree
from hdtwd_cli.tree._average import average_linkage_tree, correlation_distances, tree_from_linkage
from hdtwd_cli.tree._learn import learn_tree, prepare
from hdtwd_cli.tree._params import TreeParams


def _ancestors(parent: np.ndarray, v: int) -> list[int]:
    out = [v]
    while parent[v] >= 0:
        v = int(parent[v])
        out.append(v)
    return out


def _brute_lca(parent: np.ndarray, a: int, b: int) -> int:
    up = set(_ancestors(parent, a))
    return next(v for v in _ancestors(parent, b) if v in up)


@pytest.mark.parametrize("shape", ["random", "balanced", "deep"])
def test_lca_and_path_lengths_equal_brute_force(shape):
    parent = shaped_binary_tree(60, shape, seed=3)
    length = np.random.default_rng(0).random(parent.shape[0])
    index = LcaIndex(parent, length)
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, parent.shape[0], 300), rng.integers(0, parent.shape[0], 300)
    want = np.array([_brute_lca(parent, int(x), int(y)) for x, y in zip(a, b)])
    assert np.array_equal(index.lca(a, b), want)

    def rootdist(v: int) -> float:
        return float(sum(length[u] for u in _ancestors(parent, v)[:-1]))

    paths = [rootdist(int(x)) + rootdist(int(y)) - 2 * rootdist(int(c)) for x, y, c in zip(a, b, want)]
    assert np.allclose(index.path_length(a, b), paths)


def test_lca_needs_no_recursion_on_a_chain_thousands_deep():
    m = 5000  # caterpillar: leaf j joins the chain at depth m - j
    parent = np.full(2 * m - 1, -1, dtype=np.int64)
    parent[0] = parent[1] = m
    for i in range(1, m - 1):
        parent[m + i - 1] = parent[i + 1] = m + i
    index = LcaIndex(parent)
    assert index.depth.max() == m - 1
    assert int(index.lca(np.array([0]), np.array([m - 1]))[0]) == 2 * m - 2


def test_triplets_a_tree_itself_one_a_star_a_third_a_random_tree_chance():
    m = 80
    parent = random_binary_tree(m, seed=4)
    names = [f"g{j}" for j in range(m)]
    pnames = names + [f"n{j}" for j in range(m - 1)]
    assert recovery(parent, pnames, parent, pnames).triplets == 1.0
    assert recovery(parent, pnames, parent, pnames).spearman == pytest.approx(1.0)
    star = star_tree(names)
    assert recovery(star.parent, star.leaf_names, parent, pnames).triplets == pytest.approx(1 / 3)
    other = random_binary_tree(m, seed=5)
    chance = recovery(other, pnames, parent, pnames, n_triples=40000).triplets
    assert abs(chance - 1 / 3) < 0.05
    # leaves matched by name, not by position: a renamed copy is the same tree
    perm = np.random.default_rng(2).permutation(m)
    renamed = [names[p] for p in perm] + pnames[m:]
    shuffled = parent.copy()
    shuffled[:m] = parent[perm]  # node i now carries leaf perm[i]'s name and place
    assert recovery(shuffled, renamed, parent, pnames).triplets == 1.0


def test_triplet_agreement_counts_disagreement():
    # ((0,1),2) planted; the learned tree says ((0,2),1): every triple of these three disagrees
    planted = LcaIndex(np.array([3, 3, 4, 4, -1]))
    learned = LcaIndex(np.array([3, 4, 3, 4, -1]))
    leaves = np.arange(3)
    assert triplet_agreement(learned, planted, leaves, leaves, n_triples=50) == 0.0


def test_correlation_distances_equal_pdist_and_storage_gives_the_same_bits():
    X = np.random.default_rng(0).poisson(1.5, size=(70, 25)).astype(np.float64)
    X[:, 3] = 2.0  # no spread: distance 1 from everything
    d = correlation_distances(X)
    ref = pdist(np.delete(X, 3, axis=1).T, "correlation")
    assert np.allclose(np.delete(_square(d, 25), 3, 0)[:, np.r_[0:3, 4:25]][np.triu_indices(24, 1)], ref, atol=1e-12)
    assert np.all(_square(d, 25)[3, np.r_[0:3, 4:25]] == 1.0)
    assert correlation_distances(sp.csr_matrix(X)).tobytes() == d.tobytes()
    assert correlation_distances(X.astype(np.float32)).tobytes() == d.tobytes()


def _square(d: np.ndarray, m: int) -> np.ndarray:
    D = np.zeros((m, m))
    D[np.triu_indices(m, 1)] = d
    return D + D.T


def test_average_tree_is_upgma_and_its_twd_is_exact_ot():
    X = np.random.default_rng(1).poisson(2.0, size=(40, 12)).astype(np.float64)
    names = [f"g{j}" for j in range(12)]
    Z = linkage(pdist(X.T, "correlation"), "average")
    ref = tree_from_linkage(Z, names)
    upgma = average_linkage_tree(X, names, height_power=1)
    assert np.array_equal(upgma.parent, ref.parent)
    assert np.allclose(upgma.merge_height, Z[:, 2] / 2)
    tree = average_linkage_tree(X, names)  # the shipped height power: the same merges, heights h = H (u / H)^p
    p, top = AVERAGE_HEIGHT_POWER, Z[-1, 2] / 2
    assert p > 1 and np.array_equal(tree.parent, ref.parent)
    assert np.allclose(tree.merge_height, top * (Z[:, 2] / 2 / top) ** p)
    u = upgma.merge_height  # by p - 1 products in order: no pow, whose SIMD rounding may vary by CPU
    r = u / u[-1]
    assert p == 4 and tree.merge_height.tobytes() == (u[-1] * (((r * r) * r) * r)).tobytes()
    a, b = np.triu_indices(12, 1)  # the height power is monotone: leaf-to-leaf path lengths keep their order
    paths = [LcaIndex(t.parent, t.length).path_length(a, b) for t in (upgma, tree)]
    ranks = [rankdata(np.round(q / q.max(), 9)) for q in paths]  # equal LCAs: equal paths up to rounding
    assert np.array_equal(ranks[0], ranks[1])
    assert not np.allclose(paths[0] / paths[0].max(), paths[1] / paths[1].max())  # but their weights differ
    for t in (upgma, tree):
        assert t.length.min() >= 0
        assert_twd_is_exact_ot(t)


def test_learner_average_is_one_answer_across_storage_and_threads():
    X, _, _ = planted_hierarchy(120, 60, counts_per_feature=2.0, seed=3)
    names = [f"g{j}" for j in range(60)]
    params = TreeParams(learner="average")
    a = learn_tree(X, names, params)
    b = learn_tree(sp.csr_matrix(X), names, params)
    c = learn_tree(X.astype(np.float32), names, params)
    for t in (b, c):
        assert t.parent.tobytes() == a.parent.tobytes() and t.length.tobytes() == a.length.tobytes()
    assert a.metadata["learner"] == "average"


def test_learner_average_recovers_a_planted_hierarchy():
    """A planted balanced tree of 256 features, sparse UMI-like counts (0.15 a feature and sample, about
    90 % zeros): rooted triplets >= 0.95 (the diffusion's HD-LCA tree with complete linkage: 0.83)."""
    X, _, parent = planted_hierarchy(512, 256, shape="balanced", counts_per_feature=0.15, seed=1)
    names = [f"g{j}" for j in range(256)]
    pnames = names + [f"n{j}" for j in range(255)]
    tree = learn_tree(X, names, TreeParams(learner="average"))
    got = recovery(tree.parent, tree.leaf_names, parent, pnames)
    assert got.triplets >= 0.95
    assert got.spearman >= 0.7


@pytest.mark.parametrize("landmarks", [0, 100])
def test_the_default_learner_recovers_a_planted_hierarchy(landmarks):
    """The defaults (the diffusion on correlation distances with the global bandwidth) on a planted balanced tree
    of 512 features, Poisson counts at bulk depth: rooted triplets >= 0.95 on the exact operator and through 100
    landmarks (the paper's cosine with the self-tuning bandwidth, the former defaults: 0.38, chance 1/3)."""
    X, _, parent = planted_hierarchy(1000, 512, shape="balanced", counts_per_feature=20.0, seed=1)
    names = [f"g{j}" for j in range(512)]
    tree = learn_tree(X, names, TreeParams(landmarks=landmarks))
    got = recovery(tree.parent, tree.leaf_names, parent, names + [f"n{j}" for j in range(511)])
    assert got.triplets >= 0.95
    assert got.spearman >= 0.7


def test_the_defaults_give_the_produce_models_tree():
    """sample_data/produce.csv (the paper's Sec. 5.1 produce model): the learned tree joins the fruits, the root
    vegetables and the leaf vegetables, and the two kinds of vegetable before the fruits (the paper's Fig. 2(b))."""
    import hdtwd_cli as hd

    table = np.genfromtxt(SAMPLE / "produce.csv", delimiter=",", names=True, dtype=None, encoding="utf-8")
    words = list(table.dtype.names[1:])
    X = np.column_stack([table[w] for w in words]).astype(np.float64)
    tree = hd.learn_tree(X, words)
    # each word's path to the root, as sets of leaves under each ancestor
    leaves_under: dict[int, set[str]] = {}
    for j, w in enumerate(tree.leaf_names):
        v = j
        while v >= 0:
            leaves_under.setdefault(v, set()).add(w)
            v = int(tree.parent[v])
    clusters = {frozenset(c) for c in leaves_under.values()}
    fruits, roots, leaves = {"apple", "orange", "banana"}, {"carrot", "beetroot"}, {"kale", "spinach", "lettuce"}
    for group in (fruits, roots, leaves, roots | leaves):
        assert frozenset(group) in clusters


@pytest.mark.parametrize("builder", sorted(set(BUILDERS) - {"hhc", "ghhc"}))
def test_every_competitor_tree_is_measured_by_the_same_function(builder):
    """The recovery of classify's competitor trees (built on hdtwd's features' space): a value in [0, 1];
    the star tree exactly chance."""
    X, _, parent = planted_hierarchy(120, 40, shape="random", counts_per_feature=20.0, seed=2)
    names = [f"g{j}" for j in range(40)]
    placed, V = feature_vectors(prepare(X, names, TreeParams()))
    tree = BUILDERS[builder](V, placed, 0)
    r = recovery(tree.parent, tree.leaf_names, parent, names + [f"n{j}" for j in range(39)], n_triples=3000)
    assert 0.0 <= r.triplets <= 1.0 and -1.0 <= r.spearman <= 1.0
    if builder == "star":
        assert r.triplets == pytest.approx(1 / 3)


def test_trees_from_given_distances_under_the_average_learner_are_upgma():
    """The joint layer's trees from distances (``tree_from_distances``) under ``learner="average"``: SciPy's
    UPGMA merges (the same cophenetic distances), and no landmark path (UPGMA reads all pairs)."""
    from scipy.cluster.hierarchy import cophenet
    from scipy.spatial.distance import squareform

    from hdtwd_cli.tree._learn import tree_from_distances

    P = np.random.default_rng(4).normal(size=(40, 3))
    D = squareform(pdist(P))
    names = [f"s{i}" for i in range(40)]
    tree = tree_from_distances(D.copy(), names, TreeParams(learner="average"))
    tree.validate()
    heights = np.zeros(tree.n_nodes)
    heights[tree.n_leaves :] = tree.merge_height
    lca = LcaIndex(tree.parent)
    i, j = np.triu_indices(40, 1)
    ours = 2 * heights[lca.lca(i, j)]  # node heights are half the merge distances
    np.testing.assert_allclose(ours, cophenet(linkage(pdist(P), method="average")), rtol=1e-12)
    with pytest.raises(ValueError, match="all pairs"):
        tree_from_distances(D[:, :5].copy(), names, TreeParams(learner="average"), landmarks=np.arange(5))


def test_the_joint_samples_tree_under_the_average_learner_recovers_planted_samples():
    import hdtwd_cli as hd

    Xt, _, parent = planted_hierarchy(600, 120, shape="balanced", counts_per_feature=20.0, seed=1)
    X = Xt.T.copy()  # 120 samples, the leaves of a planted balanced tree, x 600 features
    names = [f"s{i}" for i in range(120)]
    J = hd.learn_joint(X, sample_names=names, params=hd.TreeParams(learner="average"), with_distances=False)
    t = J.samples_tree
    r = recovery(t.parent, t.leaf_names, parent, names + [f"n{i}" for i in range(119)], learned_length=t.length)
    assert r.triplets >= 0.95


def test_classify_average_is_the_average_learners_hdtwd_on_the_same_splits():
    """classify's ``average`` method (the other learner from the split's same prepared stage) scores what
    ``hdtwd`` scores under ``TreeParams(learner="average")``: one answer by two routes."""
    import hdtwd_cli as hd

    X, y, _ = planted_hierarchy(160, 60, shape="random", counts_per_feature=0.5, seed=3)
    names = [f"g{j}" for j in range(60)]
    both = hd.classify(X, y.astype(str), feature_names=names, methods=["hdtwd", "average"], splits=2, k=[1, 3])
    alone = hd.classify(
        X,
        y.astype(str),
        feature_names=names,
        methods=["hdtwd"],
        splits=2,
        k=[1, 3],
        params=hd.TreeParams(learner="average"),
    )
    assert both["methods"]["average"]["per_split"] == alone["methods"]["hdtwd"]["per_split"]
    assert both["methods"]["average"]["params"]["learner"] == "average"
    assert both["methods"]["average"]["per_split"] != both["methods"]["hdtwd"]["per_split"]  # the learner matters here


def test_the_joint_hierarchies_under_the_average_learner_refuse_what_would_not_fit(monkeypatch):
    """All pairs of informed distances, refused before any work when they would not fit (exit 4 on the CLI)."""
    import hdtwd_cli as hd
    import hdtwd_cli._api._joint as api_joint

    X, _, _ = planted_hierarchy(200, 30, shape="balanced", counts_per_feature=20.0, seed=1)
    monkeypatch.setattr(api_joint, "available_memory", lambda: 24 * 200 * 200 - 1)
    with pytest.raises(hd.ResourceError, match="learner"):
        hd.learn_joint(X, params=hd.TreeParams(learner="average"))
    hd.learn_joint(X, params=hd.TreeParams(learner="average"), check_memory=False)  # the same data, unchecked: runs


def test_the_public_datasets_give_a_planted_tree_that_the_average_learner_recovers():
    """``hd.datasets``: a planted hierarchy and the measure of its recovery, through public names only. The
    planted tree itself scores 1 (a Tree built from its parent array), the average learner's tree on its
    counts well above chance, a star tree at chance; a tree that is not a Tree, or a planted tree that
    shares no leaves, is a ParameterError."""
    import hdtwd_cli as hd

    X, labels, planted = hd.datasets.planted_hierarchy(400, 60, shape="balanced", seed=3)
    assert X.shape == (400, 60) and labels.shape == (400,) and planted.shape == (119,)
    tree = hd.learn_tree(X, params=hd.TreeParams(learner="average"))
    got = hd.datasets.recovery(tree, planted)
    exact = hd.Tree(planted, np.ones(planted.size), [f"f{j}" for j in range(60)])
    assert hd.datasets.recovery(exact, planted).triplets == 1.0
    star = hd.Tree(np.array([60] * 60 + [-1]), np.ones(61), [f"f{j}" for j in range(60)])
    assert abs(hd.datasets.recovery(star, planted).triplets - 1 / 3) < 0.02
    assert got.triplets > 0.8 and got.spearman > 0.3
    with pytest.raises(hd.ParameterError, match="tree must be a hdtwd Tree"):
        hd.datasets.recovery(planted, planted)
    with pytest.raises(hd.ParameterError, match="planted"):
        hd.datasets.recovery(tree, planted, planted_names=["x", "y", "z"])
