"""HD-LCA tree decoding (Alg. 1) against a brute-force Kruskal and the cherry property of Thm. 1."""

import numpy as np
import pytest

from hdtwd_cli.tree import _hd_lca as tree_mod
from hdtwd_cli.tree._hd_lca import decode_tree, hd_lca, hd_lca_merge_order
from hdtwd_cli.tree._hyperbolic import HyperbolicEmbedding, halfspace_distance, scale_heights


def random_embedding(m, K, seed, duplicates=0, width=None):
    rng = np.random.default_rng(seed)
    psi = np.sqrt(rng.dirichlet(np.ones(width or m), size=(K + 1, m)))
    for d in range(duplicates):  # exact ties: copy feature d into feature m-1-d
        psi[:, m - 1 - d] = psi[:, d]
    return HyperbolicEmbedding(psi=psi, heights=scale_heights(K), negative_mass=np.zeros(K + 1))


def brute_force_log_a(emb):
    m = emb.n_features
    out = {}
    for j in range(m):
        for jj in range(j + 1, m):
            vals = [
                np.sqrt(np.sum((emb.psi[k, j] - emb.psi[k, jj]) ** 2) / 4 + 2.0 ** (k - 4)) for k in range(emb.n_scales)
            ]
            out[(j, jj)] = np.mean(np.log(vals))
    return out


def brute_force_kruskal(log_a, m, order_key):
    """Python Kruskal over pairs sorted by (a, j, j'): the merges as (cluster, cluster) ids."""
    pairs = sorted(log_a, key=order_key)
    cluster = list(range(m))  # leaf -> current cluster id
    members = {j: {j} for j in range(m)}
    merges = []
    nxt = m
    for j, jj in pairs:
        a, b = cluster[j], cluster[jj]
        if a == b:
            continue
        merges.append(tuple(sorted((a, b))))
        members[nxt] = members.pop(a) | members.pop(b)
        for leaf in members[nxt]:
            cluster[leaf] = nxt
        nxt += 1
    return merges


def test_hd_lca_matches_closed_form():
    emb = random_embedding(9, 4, 0)
    bf = brute_force_log_a(emb)
    iu = np.triu_indices(9, 1)
    expected = [bf[(i, j)] for i, j in zip(*iu)]
    assert np.allclose(hd_lca(emb, dtype=np.float64), expected, rtol=1e-12)
    # the default float32 Gram matrices: within float32 rounding of the same values
    assert np.allclose(hd_lca(emb), expected, rtol=1e-6)
    assert not np.array_equal(hd_lca(emb), hd_lca(emb, dtype=np.float64))


def test_merge_order_is_kruskal_with_deterministic_ties():
    for seed in range(8):
        m = 12
        emb = random_embedding(m, 3, seed, duplicates=seed % 3)
        la = hd_lca(emb)
        iu = np.triu_indices(m, 1)
        log_a = {(int(i), int(j)): float(v) for i, j, v in zip(*iu, la)}
        expected = brute_force_kruskal(log_a, m, lambda p, log_a=log_a: (log_a[p], p[0], p[1]))
        children, merge_log_a = hd_lca_merge_order(la, m)
        assert [tuple(c) for c in children.tolist()] == expected
        assert np.all(np.diff(merge_log_a) >= 0)


def test_exact_ties_are_broken_by_index():
    # four identical features: every pair ties; Kruskal by (a, j, j') merges (0,1), (2,4)->...
    psi = np.ones((2, 4, 4)) / 2.0
    emb = HyperbolicEmbedding(psi=psi, heights=scale_heights(1), negative_mass=np.zeros(2))
    children, _ = hd_lca_merge_order(hd_lca(emb), 4)
    assert [tuple(c) for c in children.tolist()] == [(0, 1), (2, 4), (3, 5)]


def test_cherries_keep_the_product_manifold_distance():
    emb = random_embedding(10, 5, 3)
    tree = decode_tree(emb, [f"g{j}" for j in range(10)])
    tree.validate()
    assert tree.n_nodes == 19 and tree.parent[-1] == -1
    children = tree.children()
    n_cherries = 0
    for v in range(10, 19):
        a, b = children[v]
        if a < 10 and b < 10:
            n_cherries += 1
            dM = sum(
                halfspace_distance(emb.psi[k, a], emb.heights[k], emb.psi[k, b], emb.heights[k])
                for k in range(emb.n_scales)
            )
            assert np.isclose(tree.length[a] + tree.length[b], dM, rtol=1e-12)
            assert tree.length[a] == tree.length[b]
    assert n_cherries >= 1
    assert np.all(tree.length[:-1] > 0)
    assert np.all(np.diff(tree.merge_height) >= 0)


def test_deep_chain_needs_no_recursion():  # (float64 products: the chain's steps are below float32 resolution)
    # features on a line: single linkage builds a chain far deeper than Python's recursion limit
    m = 1500
    t = np.linspace(0, 1, m)
    psi = np.zeros((1, m, 2))
    psi[0, :, 0] = t**2
    psi[0, :, 1] = 0
    emb = HyperbolicEmbedding(psi=psi, heights=scale_heights(0), negative_mass=np.zeros(1))
    tree = decode_tree(emb, [f"g{j}" for j in range(m)], lca_values=tree_mod.hd_lca_product(emb, dtype=np.float64))
    assert tree.depth().max() > 1000
    tree.validate()


@pytest.mark.parametrize("width", [3, 150])  # 3: tiled over the stored embedding; 150: scale by scale
def test_blocked_hd_lca_matches_a_single_block(width):
    emb = random_embedding(150, 4, 9, width=width)
    assert tree_mod._tiled(150, width, 5, tree_mod.PRODUCT_DTYPE) == (width == 3)
    one = hd_lca(emb, block=10_000, dtype=np.float64)
    for block in (1, 7, 64):
        assert np.allclose(hd_lca(emb, block=block, dtype=np.float64), one, rtol=1e-13, atol=1e-15)
    bf = brute_force_log_a(random_embedding(9, 4, 0))
    small = hd_lca(random_embedding(9, 4, 0), block=2, dtype=np.float64)
    iu = np.triu_indices(9, 1)
    assert np.allclose(small, [bf[(i, j)] for i, j in zip(*iu)], rtol=1e-12)


@pytest.mark.parametrize("square", [False, True])
def test_tiled_products_are_the_same_bits_on_any_thread_count_and_row_blocks(square, monkeypatch):
    """The tiled schedule runs its row blocks on every core: 1 and 2 threads give the same bits for the
    same row blocks (compiled kernels: the NumPy twins run alone), close to the float64 values."""
    import numba

    from hdtwd_cli._runtime import twins

    monkeypatch.setattr(twins, "SMALL_WORK", 0)
    emb = random_embedding(150, 4, 9, width=3)
    emb32 = HyperbolicEmbedding(psi=emb.psi.astype(np.float32), heights=emb.heights, negative_mass=emb.negative_mass)
    got, steps = {}, []
    before = numba.get_num_threads()
    try:
        for threads, rows in ((1, 7), (2, 7), (1, 64), (2, 64)):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            got[threads, rows] = tree_mod._tiled_products(emb32, [2, 4], rows, steps.append, square)
    finally:
        numba.set_num_threads(before)
    off = ~np.eye(150, dtype=bool) if square else np.ones(150 * 149 // 2, dtype=bool)  # the diagonal: not written
    for K in (2, 4):
        for rows in (7, 64):
            assert got[2, rows][K][off].tobytes() == got[1, rows][K][off].tobytes(), (K, rows)
    assert sum(steps) == 4 * 5 * 149  # every row block reported once, scales x rows
    g = got[1, 7][4]
    want = tree_mod.hd_lca_product(emb, dtype=np.float64)
    assert np.allclose(g[np.triu_indices(150, 1)] if square else g, want, rtol=1e-5)


@pytest.mark.parametrize("landmarks", [0, 12])  # exact operator: scales streamed; 12 landmarks: tiled
def test_products_from_the_operator_equal_the_stored_embedding(landmarks):
    # hd_lca_products never stores the embedding on the exact path; its values must be the bits of
    # hd_lca_product on the embedding that `hdtwd embed` stores (what `decode-tree` reads)
    from hdtwd_cli.tree._diffusion import diffusion_operator
    from hdtwd_cli.tree._hyperbolic import hyperbolic_embedding
    from hdtwd_cli.tree._landmarks import landmark_operator

    X = np.random.default_rng(3).poisson(1.0, size=(60, 120)).astype(float) + 0.01
    op = landmark_operator(X, landmarks, seed=0) if landmarks else diffusion_operator(X)
    assert tree_mod._tiled(120, landmarks or 120, 5, tree_mod.PRODUCT_DTYPE) == bool(landmarks)
    products, neg = tree_mod.hd_lca_products(op, [2, 4])
    for K in (2, 4):
        emb = hyperbolic_embedding(op, K)
        assert np.array_equal(products[K], tree_mod.hd_lca_product(emb))
        assert np.allclose(neg[: K + 1], emb.negative_mass, rtol=1e-9, atol=1e-15)
        # float32 Gram matrices: log a within the stated tolerance (1e-6) of the float64 values
        exact = tree_mod.hd_lca_product(emb, dtype=np.float64)
        err = np.abs(np.log(products[K]) - np.log(exact)).max() * 0.5 / (K + 1)
        assert 0 < err < 1e-6


@pytest.mark.parametrize("compiled", [True, False])  # numba, or the NumPy twin (small problems)
@pytest.mark.parametrize("m", [2, 3, 17, 300])
def test_compiled_complete_linkage_equals_scipy(m, compiled, monkeypatch):
    from scipy.cluster.hierarchy import linkage

    from hdtwd_cli._runtime import twins as _small
    from hdtwd_cli.tree._linkage import complete_linkage

    if compiled:
        monkeypatch.setattr(_small, "SMALL_WORK", 0)
    g = np.random.default_rng(m).random(m * (m - 1) // 2)  # distinct values: the tree is unique
    Z = linkage(g, method="complete")
    children, heights = complete_linkage(g, m)
    assert np.array_equal(children, np.sort(Z[:, :2].astype(np.int64), axis=1))
    assert np.array_equal(heights, Z[:, 2])
    in_place = complete_linkage(g.copy(), m, in_place=True)  # the chain on the condensed values
    assert np.array_equal(in_place[0], children) and np.array_equal(in_place[1], heights)


def test_compiled_complete_linkage_with_ties_is_a_complete_linkage(monkeypatch):
    # with ties several trees are complete-linkage trees; check the defining property directly:
    # each merge joins two current clusters at the smallest complete-linkage distance
    from scipy.spatial.distance import squareform

    from hdtwd_cli._runtime import twins as _small
    from hdtwd_cli.tree._linkage import complete_linkage

    m = 25
    g = np.round(np.random.default_rng(1).random(m * (m - 1) // 2) * 4)
    D = squareform(g)
    children, heights = complete_linkage(g, m)  # the NumPy twin
    monkeypatch.setattr(_small, "SMALL_WORK", 0)
    assert all(np.array_equal(u, v) for u, v in zip(complete_linkage(g, m), (children, heights)))  # same ties
    in_place = complete_linkage(g.copy(), m, in_place=True)  # the condensed chain: the same ties too
    assert all(np.array_equal(u, v) for u, v in zip(in_place, (children, heights)))
    members = {i: [i] for i in range(m)}
    for s, (p, q) in enumerate(children.tolist()):
        ids = list(members)
        best = min(D[np.ix_(members[u], members[v])].max() for i, u in enumerate(ids) for v in ids[i + 1 :])
        assert heights[s] == D[np.ix_(members[p], members[q])].max() == best
        members[m + s] = members.pop(p) + members.pop(q)
    assert np.all(np.diff(heights) >= 0)


def _complete_by_ranks(log_a, m):
    """The reference: complete linkage on the ranks of ``(log a, pair index)`` (distinct: unique tree)."""
    from scipy.cluster.hierarchy import linkage

    order = np.argsort(log_a, kind="stable")
    ranks = np.empty(order.shape[0])
    ranks[order] = np.arange(order.shape[0])
    Z = linkage(ranks, method="complete")
    return np.sort(Z[:, :2].astype(np.int64), axis=1), log_a[order[Z[:, 2].astype(np.int64)]]


@pytest.mark.parametrize("compiled", [True, False])
def test_untied_complete_linkage_is_the_tree_of_the_ranks(compiled, monkeypatch):
    # the chain on the values themselves is taken when no tie decided anything; else None, and
    # hd_lca_merge_order falls back to the ranks: either way the tree of the ranks, bit for bit
    from hdtwd_cli._runtime import twins as _small
    from hdtwd_cli.tree._linkage import complete_linkage, untied_complete_linkage

    if compiled:
        monkeypatch.setattr(_small, "SMALL_WORK", 0)
    outcomes = set()
    for seed in range(40):
        rng = np.random.default_rng(seed)
        m = int(rng.integers(3, 40))
        levels = (4, 50, 10**6)[seed % 3]  # many ties, a few, none
        log_a = -np.round(rng.random(m * (m - 1) // 2) * levels) / levels - 0.5
        expected = _complete_by_ranks(log_a, m)
        got = hd_lca_merge_order(log_a.copy(), m, "complete")
        assert all(np.array_equal(u, v) for u, v in zip(got, expected))
        untied = untied_complete_linkage(log_a, m)
        outcomes.add(untied is None)
        if untied is not None:
            assert all(np.array_equal(u, v) for u, v in zip(untied, expected))
            assert all(np.array_equal(u, v) for u, v in zip(untied, complete_linkage(log_a, m)))
    assert outcomes == {True, False}  # both branches were exercised
    # identical features: every scan ties
    assert untied_complete_linkage(np.full(10, -1.0), 5) is None


@pytest.mark.parametrize("compiled", [True, False])
def test_square_product_is_the_condensed_one_and_gives_the_same_tree(compiled, monkeypatch):
    # landmarks + complete linkage: the tiled product written straight into the m x m matrix the
    # chain works on; the same values on both sides of the diagonal, the same merges as the condensed path
    from hdtwd_cli._runtime import twins as _small
    from hdtwd_cli.tree._landmarks import landmark_operator

    if compiled:
        monkeypatch.setattr(_small, "SMALL_WORK", 0)
    X = np.random.default_rng(4).poisson(0.9, size=(50, 90)).astype(float) + 0.01
    op = landmark_operator(X, 12, seed=0)
    monkeypatch.setattr(tree_mod, "_TILE_ROWS", 16)  # several tiles on and off the diagonal
    monkeypatch.setattr(tree_mod, "_TILE_COLS", 32)
    g = tree_mod.hd_lca_products(op, [4])[0][4]
    D = tree_mod.hd_lca_products(op, [4], square=True)[0][4]
    iu = np.triu_indices(90, 1)
    assert D.shape == (90, 90) and np.array_equal(D[iu], g) and np.array_equal(D.T[iu], g)
    names = [f"f{j}" for j in range(90)]
    a = tree_mod.lca_tree(g.copy(), scale_heights(4), names, "complete", tie_ranks=False)
    b = tree_mod.lca_tree(D, scale_heights(4), names, "complete", tie_ranks=False)
    assert np.array_equal(a.parent, b.parent) and np.array_equal(a.length, b.length)
    with pytest.raises(ValueError, match="complete"):
        tree_mod.hd_lca_product_merge_order(np.zeros((90, 90)), 90, 5, "single")


def test_stable_argsort_is_numpys_stable_sort():
    """The HD-LCA values' order from the default sort plus a lexsort of ties: NumPy's stable order."""
    from hdtwd_cli.tree._hd_lca import stable_argsort

    rng = np.random.default_rng(2)
    for x in (rng.random(5000), rng.integers(0, 40, 5000).astype(float), np.zeros(7), np.array([1.0])):
        assert np.array_equal(stable_argsort(x), np.argsort(x, kind="stable"))
