"""Landmark diffusion and the large-m HD-LCA path (docs/method.md section 6)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import spearmanr

from hdtwd_cli._defaults import LINKAGES
from hdtwd_cli.errors import ResourceError
from hdtwd_cli.evaluate._synthetic import planted_counts
from hdtwd_cli.tree._budget import check_tree_memory
from hdtwd_cli.tree._hd_lca import decode_tree, hd_lca, hd_lca_dense, hd_lca_product
from hdtwd_cli.tree._hyperbolic import hyperbolic_embedding
from hdtwd_cli.tree._landmarks import (
    AUTO_LANDMARKS_ABOVE,
    MIN_AFFINITY,
    effective_landmarks,
    landmark_affinity,
    landmark_densities,
    landmark_distances,
    landmark_factors,
    landmark_operator,
    select_landmarks,
)
from hdtwd_cli.tree._learn import learn_tree
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.twd._distance import tree_wasserstein


def _counts(n=150, m=40, seed=0, sparse=False):
    rng = np.random.default_rng(seed)
    X = rng.poisson(rng.gamma(0.5, 2.0, size=(1, m)), size=(n, m)).astype(np.float64)
    X[0] += 1  # no empty column
    return sp.csr_matrix(X) if sparse else X


def _alpha1_operator(A):
    """Row-stochastic alpha = 1 operator of a symmetric kernel, formed explicitly."""
    d = A.sum(axis=1)
    Ah = A / d[:, None] / d[None, :]
    return Ah / Ah.sum(axis=1)[:, None]


@pytest.mark.parametrize("metric", ["cosine", "correlation", "euclidean"])
@pytest.mark.parametrize("bandwidth", ["median", "knn"])
@pytest.mark.parametrize("sparse", [False, True])
def test_all_landmarks_give_the_alpha1_operator_of_w_wt(metric, bandwidth, sparse):
    X = _counts(sparse=sparse)
    m = X.shape[1]
    L, idx = select_landmarks(X, m, "random", seed=1, metric=metric)
    assert np.array_equal(idx, np.arange(m))
    W, _, _ = landmark_affinity(landmark_distances(X, L, metric, idx), 1.0, bandwidth)
    R, S = landmark_factors(W)
    np.testing.assert_allclose(R.sum(axis=1), 1.0, rtol=0, atol=1e-13)
    np.testing.assert_allclose(S.sum(axis=1), 1.0, rtol=0, atol=1e-13)
    np.testing.assert_allclose(R @ S, _alpha1_operator(W @ W.T), rtol=1e-11, atol=1e-15)
    # the spectral form used by the pipeline: rho^1 = R (S R), sigma_1 = 1
    op = landmark_operator(X, m, eps=1.0, metric=metric, bandwidth=bandwidth, seed=1)
    assert abs(op.raw_eigenvalues[0] - 1.0) < 1e-12
    rho, neg = landmark_densities(op, 1.0)
    np.testing.assert_allclose(rho, R @ (S @ R), rtol=1e-9, atol=1e-14)


def test_distances_to_every_landmark_equal_the_exact_feature_distances():
    from hdtwd_cli.tree._diffusion import feature_distances

    X = _counts(m=30)
    L, idx = select_landmarks(X, 30, "random")
    for metric in ("cosine", "correlation", "euclidean"):
        L, idx = select_landmarks(X, 30, "random", metric=metric)
        D = landmark_distances(X, L, metric, idx)
        np.testing.assert_allclose(D, feature_distances(X, metric), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("method", ["random", "kmeans"])
def test_landmark_densities_rows_sum_to_one(method):
    X = _counts(n=200, m=120, seed=3)
    op = landmark_operator(X, 25, method=method, seed=2)
    assert op.left.shape == (120, 25) and op.eigenvalues[0] == pytest.approx(1.0, abs=1e-12)
    for t in (1.0, 0.5, 2.0**-7):
        raw = (op.left * op.eigenvalues[None, :] ** t) @ op.right
        np.testing.assert_allclose(raw.sum(axis=1), 1.0, rtol=0, atol=1e-10)
        rho, neg = landmark_densities(op, t)
        assert rho.min() >= 0 and neg >= 0
        np.testing.assert_allclose(rho.sum(axis=1), 1.0 + (rho - raw).sum(axis=1), atol=1e-12)


def test_kmeans_and_random_landmarks_are_seeded_and_differ():
    X = _counts(n=200, m=120, seed=3)
    a = landmark_operator(X, 20, method="kmeans", seed=5)
    b = landmark_operator(X, 20, method="kmeans", seed=5)
    c = landmark_operator(X, 20, method="random", seed=5)
    d = landmark_operator(X, 20, method="random", seed=6)
    assert np.array_equal(a.left, b.left)
    assert not np.allclose(a.left, c.left)
    assert not np.array_equal(c.landmarks, d.landmarks)


def test_sparse_input_is_never_densified():
    rng = np.random.default_rng(0)
    n, m = 3000, 20000  # dense float64 would be 480 MB
    X = sp.random(n, m, density=2e-3, random_state=rng, format="csr", dtype=np.float64)
    X = X + sp.csr_matrix((np.ones(m), (rng.integers(0, n, m), np.arange(m))), shape=(n, m))
    tracemalloc.start()
    try:
        op = landmark_operator(X, 40, seed=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert op.left.shape == (m, 40)
    assert peak < 120e6, peak


def test_features_below_the_affinity_floor_are_unplaced_and_too_few_placed_is_a_clear_error():
    X = _counts(n=100, m=50, seed=1)
    from hdtwd_cli.cli._options import flag

    # a tiny kernel: every feature but the (random) landmarks themselves is out of reach
    op = landmark_operator(X, 5, eps=1e-6, metric="euclidean")
    assert not np.isin(op.landmarks, op.unplaced).any()  # a landmark's affinity to itself is 1
    assert op.unplaced.size >= 40 and op.n_features == 50 - op.unplaced.size
    assert op.min_affinity > MIN_AFFINITY
    rho, _ = landmark_densities(op, 1.0)
    np.testing.assert_allclose(rho.sum(axis=1), 1.0, atol=1e-12)
    # k-means centroids are no features: nothing placed at all
    with pytest.raises(ValueError, match="raise eps or use more landmarks") as e:
        landmark_operator(X, 5, eps=1e-6, metric="euclidean", method="kmeans")
    assert "raise --eps or use more --landmarks" in e.value.worded(flag)  # as the command line says it


def _landmark_embedding(m=90, n_landmarks=30, seed=0):
    X = _counts(n=200, m=m, seed=seed)
    op = landmark_operator(X, n_landmarks, seed=seed)
    return hyperbolic_embedding(op, 5)


@pytest.mark.parametrize("block", [1, 7, 64, 1000])
def test_blocked_hd_lca_equals_dense(block):
    emb = _landmark_embedding()
    ref = hd_lca_dense(emb)
    np.testing.assert_allclose(hd_lca(emb, block=block, dtype=np.float64), ref, rtol=1e-13, atol=1e-13)
    g = hd_lca_product(emb, block=block, dtype=np.float64)
    np.testing.assert_allclose(np.log(g) * 0.5 / emb.n_scales, ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(hd_lca(emb, block=block), ref, rtol=1e-6, atol=1e-7)  # float32 Gram


@pytest.mark.parametrize("rule", LINKAGES)
def test_linkage_on_g_and_on_log_a_gives_the_same_tree(rule):
    emb = _landmark_embedding(m=120, n_landmarks=40, seed=4)
    names = [f"f{j}" for j in range(emb.n_features)]
    for weights in ("lca", "midpoint"):
        t_log = decode_tree(emb, names, linkage_rule=rule, edge_weights=weights, tie_ranks=True)
        t_g = decode_tree(emb, names, linkage_rule=rule, edge_weights=weights, tie_ranks=False)
        assert np.array_equal(t_log.parent, t_g.parent)
        np.testing.assert_allclose(t_g.length, t_log.length, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(t_g.merge_height, t_log.merge_height, rtol=1e-10)


def test_landmark_tree_agrees_with_the_exact_one_on_a_planted_hierarchy():
    X, _, _ = planted_counts(n_samples=300, n_features=150, n_classes=6, seed=2)
    names = [f"g{j}" for j in range(X.shape[1])]
    keep = X.sum(axis=0) > 0
    X = X[:, keep]
    names = [nm for nm, k in zip(names, keep) if k]
    exact = learn_tree(
        X, names, TreeParams.from_preset("paper", landmarks=0, linkage="complete", bandwidth="knn", edge_weights="lca")
    )
    lm = learn_tree(
        X, names, TreeParams.from_preset("paper", landmarks=75, linkage="complete", bandwidth="knn", edge_weights="lca")
    )
    assert lm.metadata["n_landmarks"] == 75 and exact.metadata["n_landmarks"] == 0
    iu = np.triu_indices(X.shape[0], 1)
    De = tree_wasserstein(exact, X)[iu]
    Dl = tree_wasserstein(lm, X)[iu]
    assert spearmanr(De, Dl)[0] > 0.85


def test_automatic_switch_and_bounds():
    assert effective_landmarks(None, AUTO_LANDMARKS_ABOVE) == 0
    assert effective_landmarks(None, AUTO_LANDMARKS_ABOVE + 1) > 0
    assert effective_landmarks(0, 10**6) == 0
    assert effective_landmarks(50, 20) == 20
    with pytest.raises(ValueError):
        effective_landmarks(1, 100)


def test_memory_refusal_names_an_option_that_fits():
    p = TreeParams.from_preset("paper", landmarks=0, linkage="complete")
    from hdtwd_cli.cli._options import flag

    with pytest.raises(ResourceError, match="use landmarks 500") as e:
        check_tree_memory(1000, 20000, None, p, available=int(8e9))
    assert "use --landmarks 500" in e.value.worded(flag)
    # complete linkage's square matrix is counted where it fits in half the available memory
    with pytest.raises(ResourceError, match="linkage single"):
        check_tree_memory(
            1000, 20000, None, TreeParams.from_preset("paper", landmarks=500, linkage="complete"), available=int(6.4e9)
        )
    with pytest.raises(ResourceError, match="linkage single"):
        check_tree_memory(
            1000, 42000, None, TreeParams.from_preset("paper", landmarks=500, linkage="average"), available=int(12e9)
        )
    # where it does not, the chain works on the condensed values in place: no more than single linkage
    need = {
        rule: check_tree_memory(
            1000, 42000, None, TreeParams.from_preset("paper", landmarks=500, linkage=rule), available=int(12e9)
        )
        for rule in ("single", "complete")
    }
    assert need["single"] == need["complete"] > 7e9


def test_embedding_file_round_trip_with_landmarks(tmp_path):
    from hdtwd_cli.io import read_embedding, write_embedding
    from hdtwd_cli.tree._learn import embed

    X = _counts(n=120, m=60, seed=7)
    op, emb = embed(X, TreeParams.from_preset("paper", landmarks=20, scales=3))
    names = [f"f{j}" for j in range(60)]
    path = tmp_path / "e.h5"
    write_embedding(str(path), emb, op, names, [], {"landmarks": 20}, {})
    st = read_embedding(str(path))
    assert st.psi.shape == (4, 60, 20)
    assert int(st.diffusion["n_landmarks"]) == 20
    assert np.array_equal(st.psi, emb.psi) and np.array_equal(st.heights, emb.heights)


def test_planted_corpus_generator():
    from hdtwd_cli.evaluate._synthetic import planted_corpus

    X, topic, leaf = planted_corpus(400, 2000, seed=3)
    X2, topic2, _ = planted_corpus(400, 2000, seed=3)
    assert X.shape == (400, 2000) and sp.issparse(X)
    assert (X != X2).nnz == 0 and np.array_equal(topic, topic2)
    assert np.all(np.asarray(X.sum(axis=0)).ravel() > 0)  # every word occurs
    assert np.all(np.diff(leaf) >= 0) and leaf.max() == 127  # contiguous leaf topics
    # planted hierarchy: a document's tokens fall in its own leaf topic far above chance (1/128)
    own = np.asarray([X[i, leaf == topic[i]].sum() for i in range(400)]) / np.asarray(X.sum(axis=1)).ravel()
    assert own.mean() > 0.1


def test_cli_embed_decode_equals_distance_with_landmarks(tmp_path):
    from conftest import SAMPLE, run_hdtwd

    from hdtwd_cli.tree._tree import Tree

    data = SAMPLE / "corpus.npz"
    run_hdtwd("embed", data, "-o", tmp_path / "e.h5", "--landmarks", "30", "-q")
    run_hdtwd("decode-tree", tmp_path / "e.h5", "-o", tmp_path / "t1.h5", "-q")
    # one chain: the same denoised landmark tree (the rule denoises these counts on the landmark path too)
    run_hdtwd("distance", data, "-o", tmp_path / "D.npy", "--landmarks", "30", "--save-tree", tmp_path / "t2.h5", "-q")
    t1, t2 = Tree.read(str(tmp_path / "t1.h5")), Tree.read(str(tmp_path / "t2.h5"))
    assert np.array_equal(t1.parent, t2.parent) and np.array_equal(t1.length, t2.length)
    assert int(t2.metadata["n_landmarks"]) == 30 and int(t2.metadata["denoise"]) == int(t1.metadata["denoise"]) == 50
    assert t1.denoiser is not None and t1.denoiser.axes.tobytes() == t2.denoiser.axes.tobytes()


def test_landmark_path_kernel_scale_default_and_override():
    from hdtwd_cli.tree._params import resolve_params

    p, _ = resolve_params("default")
    assert p.kernel_eps(True) == 0.1 and p.kernel_eps(False) == 1.0
    q, _ = resolve_params("default", eps=2.0)
    assert q.kernel_eps(True) == 2.0 and q.kernel_eps(False) == 2.0
    r, _ = resolve_params("paper")
    assert r.kernel_eps(True) == r.kernel_eps(False) == 1.0


def test_defaults_never_fail_on_words_far_from_every_landmark(tmp_path):
    """A corpus whose rare words have no affinity to any landmark (the self-tuning kernel on cosine
    distances underflows for them) ran into an error; now they hang from the root, ``-v`` says how many,
    and the TWD on that tree is still exact OT on its path metric. (The defaults' global kernel scale
    places every word of this corpus.)"""
    from conftest import exact_ot, run_hdtwd

    from hdtwd_cli.evaluate._synthetic import planted_corpus
    from hdtwd_cli.tree._tree import Tree

    X, _, _ = planted_corpus(n_docs=600, n_words=6000, level_weights=(0.2, 0.2, 0.2, 0.4), seed=1)
    assert X.shape[1] > AUTO_LANDMARKS_ABOVE  # the defaults take the landmark path
    data = tmp_path / "corpus.npz"
    sp.save_npz(data, X)
    kernel = ("--metric", "cosine", "--bandwidth", "knn")
    proc = run_hdtwd("distance", data, *kernel, "-o", tmp_path / "D.npy", "--save-tree", tmp_path / "t.h5", "-v")
    err = proc.stderr.decode()
    import re

    found = re.search(r"(\d+) feature\(s\) far from every landmark", err)
    assert found, err
    k = int(found.group(1))
    tree = Tree.read(str(tmp_path / "t.h5"))
    assert k >= 1 and tree.metadata["unplaced_features"] >= k
    root = tree.n_nodes - 1
    at_root = np.flatnonzero(tree.parent[: tree.n_leaves] == root)
    assert at_root.size >= k
    D = np.load(tmp_path / "D.npy")
    assert np.isfinite(D).all() and D.shape == (600, 600)
    # exact OT on the tree's path metric, for pairs of documents that hold a root-hung word
    from scipy.sparse.csgraph import shortest_path

    child = np.flatnonzero(tree.parent >= 0)
    G = sp.coo_matrix((tree.length[child] + 1e-300, (child, tree.parent[child])), shape=(tree.n_nodes,) * 2).tocsr()
    names = [f"f{j}" for j in range(X.shape[1])]
    col = {n: j for j, n in enumerate(names)}
    leaf_of_col = np.empty(X.shape[1], dtype=np.int64)
    for leaf, n in enumerate(tree.leaf_names):
        leaf_of_col[col[n]] = leaf
    rows = np.unique(X[:, [col[tree.leaf_names[v]] for v in at_root[:k]]].nonzero()[0])[:2]
    others = [r for r in (0, 1, 2) if r not in rows][:2]
    for i, j in [(rows[0], others[0]), (rows[-1], others[1])]:
        a, b = X[i].toarray().ravel(), X[j].toarray().ravel()
        support = np.flatnonzero((a > 0) | (b > 0))
        leaves = leaf_of_col[support]
        w = tree.feature_weights[leaves] if tree.feature_weights is not None else 1.0
        ha, hb = a[support] * w, b[support] * w
        P = shortest_path(G, directed=False, indices=leaves)[:, leaves]  # Dijkstra: independent of hdtwd
        ot = exact_ot(ha / ha.sum(), hb / hb.sum(), P)
        assert abs(D[i, j] - ot) <= 1e-9 * max(1.0, ot), (i, j, D[i, j], ot)


def test_embed_then_decode_hangs_the_unreached_features_from_the_root_as_learn_tree_does():
    """The features no landmark reaches are unplaced on the embed / decode-tree path too."""
    import hdtwd_cli as hd
    from hdtwd_cli.evaluate._synthetic import planted_corpus

    X, _, _ = planted_corpus(n_docs=300, n_words=3000, level_weights=(0.2, 0.2, 0.2, 0.4), seed=1)
    params = hd.TreeParams(landmarks=100, landmark_eps=0.02)
    learned = hd.learn_tree(X, params=params)
    emb = hd.embed(X, params=params)
    lost = emb.operator.unplaced
    assert lost.size > 0 and emb.embedding.psi.shape[1] == X.shape[1] - lost.size
    decoded = hd.decode_tree(emb)
    assert decoded.metadata["unplaced_features"] == learned.metadata["unplaced_features"] >= lost.size
    assert np.array_equal(decoded.parent, learned.parent) and np.allclose(decoded.length, learned.length, rtol=1e-12)
    root = learned.n_nodes - 1
    leaf = {n: i for i, n in enumerate(learned.leaf_names)}
    assert all(learned.parent[leaf[f"f{j}"]] == root for j in lost)


@pytest.mark.parametrize("metric", ["cosine", "correlation", "euclidean"])
def test_streamed_columns_read_the_rows_once_less_for_the_same_bits(metric, monkeypatch):
    """The scaled columns' squared norms come from the statistics' pass (a power-of-two scale scales them
    exactly) and the random landmarks' products from the pass that takes them: the bits of summing the
    scaled blocks' squares and of a separate product pass, in one block or several."""
    from hdtwd_cli.tree import _denoise, _landmarks
    from hdtwd_cli.tree._denoise import DenoisedRows, fit_denoiser

    rng = np.random.default_rng(2)
    X = rng.poisson(rng.gamma(1.0, 1.0, (1, 90)) * rng.uniform(0.5, 3, (300, 1))).astype(np.float64)
    for block in (4096, 64):
        monkeypatch.setattr(_denoise, "BLOCK_ROWS", block)
        monkeypatch.setattr(_landmarks, "BLOCK_ROWS", block)
        rows = DenoisedRows(X, fit_denoiser(X, 10), weights=rng.uniform(0.5, 2.0, 90))
        Xs = _landmarks.StreamedColumns(rows, metric)
        sq = np.zeros(90)
        mul, Xs.mul = Xs.mul, None  # the unit-column scale is applied after the squares are known
        first = None
        for _, B in Xs.blocks():
            sq += np.einsum("ij,ij->j", B, B)
            first = B if first is None else first
            assert np.shares_memory(B, first)  # one buffer serves every block
        Xs.mul = mul
        if metric == "cosine":
            assert mul is not None and mul.tobytes() == (1.0 / np.sqrt(sq)).tobytes()
            sq = np.ones_like(sq)
        elif metric == "correlation":  # unit centred columns: |x|^2 - s^2 / n from the same squares
            s = rows.column_sums() / Xs.div
            assert mul is not None and Xs.sums is not None
            assert mul.tobytes() == (1.0 / np.sqrt(sq - s * (s / 300))).tobytes()
            assert Xs.sums.tobytes() == (s * mul).tobytes()
            sq = np.ones_like(sq)
        assert Xs.sq.tobytes() == sq.tobytes()
        reads: list[int] = []
        real = DenoisedRows.rows

        def counted(self, idx=None, out=None, reads=reads, real=real):
            reads.append(1)
            return real(self, idx, out)

        monkeypatch.setattr(DenoisedRows, "rows", counted)
        idx = np.array([3, 17, 40, 88])
        L = Xs.take(idx, with_products=True)
        passes = len(reads)
        G = Xs.t_dot(L)
        assert len(reads) == passes  # kept from the take's pass
        assert G.tobytes() == Xs.t_dot(np.array(L, order="F")).tobytes()  # a pass of its own
        monkeypatch.undo()
