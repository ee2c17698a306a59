"""Unseen features, feature weights, the leaf term, latent / given feature spaces, baselines."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import exact_ot, path_metric, run_hdtwd

from hdtwd_cli.evaluate._protocol import baseline_distances, evaluate, pca_representation
from hdtwd_cli.evaluate._synthetic import planted_counts
from hdtwd_cli.io._matrix import check_values
from hdtwd_cli.io._vectors import read_feature_embedding
from hdtwd_cli.tree._features import idf_weights, latent_feature_space
from hdtwd_cli.tree._learn import extend_tree, learn_tree
from hdtwd_cli.tree._params import TreeParams, resolve_params
from hdtwd_cli.tree._tree import attach_at_root, lengthen_leaves, mean_leaf_depth
from hdtwd_cli.twd._distance import tree_wasserstein
from hdtwd_cli.twd._histograms import align_to_tree, normalize_rows


def tiny_corpus(seed: int = 0, n: int = 60):
    """Two topics over 30 shared words, plus one word per document that no other document uses,
    and four documents made ONLY of such private words (all their mass is unseen wherever they
    land in a test set)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    shared = np.zeros((n, 30))
    for i in range(n):
        topic = slice(0, 15) if y[i] == 0 else slice(15, 30)
        shared[i, topic] = rng.poisson(2.0, 15)
        shared[i, rng.integers(0, 30, 3)] += 1
    private = np.zeros((n, n))
    private[np.arange(n), np.arange(n)] = 1 + rng.integers(0, 3, n)
    X = np.hstack([shared, private])
    X[:4, :30] = 0  # documents 0..3 hold only their private word
    names = [f"w{j}" for j in range(30)] + [f"only{i}" for i in range(n)]
    return X, names, y


def test_classify_with_test_rows_made_of_unseen_words_completes(tmp_path):
    X, names, y = tiny_corpus()
    res = evaluate(
        X,
        names,
        y,
        ["hdtwd", "l1", "tfidf-l1"],
        [1.0],
        [3],
        resolve_params("default")[0],
        ks=[1, 3],
        n_splits=3,
        test_size=0.3,
        seed=0,
    )
    acc = {r.name: r.acc for r in res}
    assert acc["hdtwd"].shape == (3, 2) and np.all(np.isfinite(acc["hdtwd"]))
    assert acc["hdtwd"].mean() > 80  # the shared words still separate the two topics
    # the same through the command line (csv with a header of words, labels file)
    csv = tmp_path / "docs.csv"
    csv.write_text(",".join(names) + "\n" + "\n".join(",".join(str(int(v)) for v in row) for row in X) + "\n")
    lab = tmp_path / "labels.txt"
    lab.write_text("\n".join(f"topic{v}" for v in y) + "\n")
    out = tmp_path / "r.json"
    run_hdtwd("classify", csv, "--labels", lab, "--splits", "2", "--k", "1,3", "--json", out, "-q")
    rep = json.loads(out.read_text())
    # the defaults for counts whose features co-occur by mass (the private words hold little of it): pca too
    assert set(rep["methods"]) == {"hdtwd", "star", "cosine", "euclidean", "l1", "tfidf-l1", "tfidf-cosine", "pca"}


def test_every_column_is_a_leaf_and_unplaced_features_hang_from_the_root():
    X, names, y = tiny_corpus()
    train = np.arange(20, 60)  # documents 0..19 (and their private words) are unseen
    tree = learn_tree(X[train], names, resolve_params("default")[0])
    assert sorted(tree.leaf_names) == sorted(names)
    root = tree.root
    h = tree.metadata["mean_leaf_depth"]
    lam = tree.metadata["leaf_length"]
    for j in range(20):
        leaf = tree.leaf_names.index(f"only{j}")
        assert tree.parent[leaf] == root
        assert tree.length[leaf] == pytest.approx(h * (1 + lam))
    tree.validate()


def _tree_ot_check(tree, X, rows=(0, 1, 2, 3)):
    """TWD on ``tree`` equals exact OT under its path metric, for the aligned weighted histograms."""
    H = normalize_rows(align_to_tree(X, tree.leaf_names, tree))
    D = tree_wasserstein(tree, H)
    C = path_metric(tree.parent, tree.length, tree.n_leaves)
    for i in rows:
        for j in rows:
            if i < j:
                assert D[i, j] == pytest.approx(exact_ot(H[i], H[j], C), rel=1e-8, abs=1e-12)


def test_attached_and_lengthened_tree_is_still_an_exact_tree_wasserstein_distance():
    X, labels, _ = planted_counts(40, 10, 2, seed=1)
    names = [f"g{j}" for j in range(10)]
    base = learn_tree(
        X, names, TreeParams.from_preset("paper", linkage="complete", edge_weights="lca", bandwidth="knn")
    )
    tree = lengthen_leaves(attach_at_root(base, ["new1", "new2"], 0.7), 0.3)
    Xn = np.hstack([X, np.random.default_rng(0).poisson(1.0, (40, 2))]).astype(float)
    _tree_ot_check(tree, Xn)


def test_leaf_lengthening_adds_exactly_lambda_times_l1():
    X, _, _ = planted_counts(30, 12, 3, seed=2)
    names = [f"g{j}" for j in range(12)]
    tree = learn_tree(X, names, TreeParams.from_preset("paper", linkage="complete", edge_weights="lca"))
    H = normalize_rows(X)
    D0 = tree_wasserstein(tree, H)
    D1 = tree_wasserstein(lengthen_leaves(tree, 0.25), H)
    L1 = np.abs(H[:, None, :] - H[None, :, :]).sum(-1)
    np.testing.assert_allclose(D1, D0 + 0.25 * L1, rtol=1e-12, atol=1e-12)


def test_idf_weights_match_scikit_learn_and_are_applied_by_the_tree():
    from sklearn.feature_extraction.text import TfidfTransformer

    X, names, y = tiny_corpus()
    u = idf_weights(sp.csr_matrix(X))
    ref = TfidfTransformer(smooth_idf=True, norm=None).fit(X).idf_
    np.testing.assert_allclose(u, ref, rtol=1e-14)
    np.testing.assert_array_equal(u, idf_weights(X))
    tree = learn_tree(X, names, resolve_params("default", weighting="idf")[0])
    w = dict(zip(tree.leaf_names, tree.feature_weights))
    np.testing.assert_allclose([w[n] for n in names], u, rtol=1e-14)
    _tree_ot_check(tree, X, rows=(4, 5, 6, 7))


def test_tfidf_baselines_match_scikit_learn():
    from sklearn.feature_extraction.text import TfidfTransformer
    from sklearn.metrics import pairwise_distances

    X, _, _ = tiny_corpus(seed=3)
    tr, te = np.arange(15, 60), np.arange(15)
    t = TfidfTransformer(smooth_idf=True, norm="l1").fit(X[tr])
    A, B = t.transform(X[te]).toarray(), t.transform(X[tr]).toarray()
    np.testing.assert_allclose(
        baseline_distances("tfidf-l1", X[te], X[tr]),
        pairwise_distances(A, B, metric="manhattan"),
        rtol=1e-12,
        atol=1e-14,
    )
    np.testing.assert_allclose(
        baseline_distances("tfidf-cosine", sp.csr_matrix(X[te]), sp.csr_matrix(X[tr])),
        pairwise_distances(A, B, metric="cosine"),
        rtol=1e-10,
        atol=1e-12,
    )


@pytest.mark.parametrize("counts", [True, False])
def test_pca_baseline_matches_scikit_learn(counts):
    from sklearn.decomposition import PCA
    from sklearn.metrics import pairwise_distances

    rng = np.random.default_rng(4)
    X = rng.poisson(3.0, (120, 70)).astype(float)
    if not counts:
        X = np.log1p(X * 0.37)
    tr, te = np.arange(30, 120), np.arange(30)
    Zte, Ztr = pca_representation(X[te], X[tr], n_components=10)
    if counts:
        L = np.log1p(X / X.sum(1, keepdims=True) * 1e4)
    else:  # scanpy's sc.pp.scale(max_value=10) with the training rows' mean and std (ddof=1)
        mu, sd = X[tr].mean(axis=0), X[tr].std(axis=0, ddof=1)
        L = np.clip((X - mu) / sd, -10, 10)
    p = PCA(n_components=10, svd_solver="full").fit(L[tr])
    np.testing.assert_allclose(np.abs(Ztr), np.abs(p.transform(L[tr])), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(
        pairwise_distances(Zte, Ztr), pairwise_distances(p.transform(L[te]), p.transform(L[tr])), rtol=1e-7, atol=1e-9
    )
    # the baseline itself: 50 components (70 features here)
    p50 = PCA(50, svd_solver="full").fit(L[tr])
    np.testing.assert_allclose(
        baseline_distances("pca", X[te], X[tr]),
        pairwise_distances(p50.transform(L[te]), p50.transform(L[tr])),
        rtol=1e-7,
        atol=1e-9,
    )
    # more features than training rows: the Gram route gives the same distances
    few = np.arange(30, 50)  # 20 training rows, 70 features
    Zte2, Ztr2 = pca_representation(X[te], X[few], n_components=5)
    if not counts:  # scaled by those rows' own statistics
        L = np.clip((X - X[few].mean(axis=0)) / X[few].std(axis=0, ddof=1), -10, 10)
    p5 = PCA(n_components=5, svd_solver="full").fit(L[few])
    np.testing.assert_allclose(
        pairwise_distances(Zte2, Ztr2),
        pairwise_distances(p5.transform(L[te]), p5.transform(L[few])),
        rtol=1e-6,
        atol=1e-8,
    )


def test_latent_feature_space_is_the_truncated_svd_and_deterministic():
    X, _, _ = planted_counts(200, 150, 4, seed=5)
    F = latent_feature_space(X, dims=8, seed=0)
    assert F.shape == (8, 150)
    u = idf_weights(X)
    M = X * u
    M /= np.linalg.norm(M, axis=1, keepdims=True)
    s = np.linalg.svd(M, compute_uv=False)
    # randomized SVD (4 power iterations): the leading values to 1e-6, the flat tail to 1e-3
    np.testing.assert_allclose(np.linalg.norm(F, axis=1)[:4], s[:4], rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(F, axis=1), s[:8], rtol=1e-3)
    # same bits for the same seed, for dense and sparse storage of the same values
    assert np.array_equal(F, latent_feature_space(sp.csr_matrix(X), dims=8, seed=0))
    assert np.array_equal(F, latent_feature_space(X, dims=8, seed=0))


def test_svd_feature_space_falls_back_to_the_data_when_too_small():
    X, _, _ = planted_counts(40, 12, 3, seed=6)
    names = [f"g{j}" for j in range(12)]
    tree = learn_tree(X, names, resolve_params("default", feature_space="svd", feature_dims=100)[0])
    assert tree.metadata["feature_source"] == "data"
    tree = learn_tree(X, names, resolve_params("default", feature_space="svd", feature_dims=5)[0])
    assert tree.metadata["feature_source"] == "svd"


def test_auto_feature_space_takes_the_latent_space_when_features_rarely_co_occur():
    from hdtwd_cli.evaluate._synthetic import planted_corpus
    from hdtwd_cli.tree._features import NEVER_COOCCUR_LIMIT, never_cooccur_fraction

    docs, _, _ = planted_corpus(300, 2000, branching=(4, 4), mean_length=30.0, level_weights=(0.6, 0.2, 0.2), seed=0)
    cells, _, _ = planted_counts(300, 200, 4, seed=0)
    # by hand, pair by pair: the pairs that never meet, each weighted by the two columns' shares of the mass
    A = docs.toarray()[:, :300]
    A = A[:, A.sum(0) > 0]
    B = (A != 0).astype(int)
    w = A.sum(0) / A.sum()
    never = num = 0.0
    for j in range(A.shape[1]):
        for k in range(A.shape[1]):
            if j != k:
                num += w[j] * w[k]
                never += w[j] * w[k] * (not np.any(B[:, j] & B[:, k]))
    exact = never / num
    assert never_cooccur_fraction(docs[:, :300]) == pytest.approx(exact, rel=1e-12)  # all 300 columns: exact
    assert never_cooccur_fraction(docs[:, :300].toarray()) == pytest.approx(exact, rel=1e-12)
    # the same bits whatever the storage the door is given: dense, CSR, CSC, float32 (the tree's metadata records it)
    forms = (docs, docs.toarray(), sp.csc_matrix(docs), docs.astype(np.float32))
    shares = {never_cooccur_fraction(check_values(v, "X")) for v in forms}
    assert len(shares) == 1
    params = resolve_params("default", feature_dims=20)[0]
    assert params.feature_space == "auto"
    t_docs = learn_tree(docs, [f"w{j}" for j in range(2000)], params)
    t_cells = learn_tree(cells, [f"g{j}" for j in range(200)], params)
    assert t_docs.metadata["never_cooccur"] > NEVER_COOCCUR_LIMIT and t_docs.metadata["feature_source"] == "svd"
    assert t_cells.metadata["never_cooccur"] < NEVER_COOCCUR_LIMIT and t_cells.metadata["feature_source"] == "data"


def test_rarely_detected_genes_do_not_make_cells_look_like_words():
    """An all-genes UMI matrix: most genes in a handful of cells, so most PAIRS of genes never meet (as in
    words), but those genes hold little of the counts: the rule reads cells, denoises and keeps the data space."""
    from hdtwd_cli.tree._features import NEVER_COOCCUR_LIMIT, never_cooccur_fraction
    from hdtwd_cli.tree._values import denoise_rank

    rng = np.random.default_rng(0)
    n, m = 400, 3000
    base = np.exp(rng.normal(0.0, 2.6, m))
    programs = base[None, :] * np.exp(rng.normal(0.0, 0.8, (4, m)))
    programs /= programs.sum(axis=1, keepdims=True)
    X = check_values(sp.csr_matrix(rng.poisson(programs[rng.integers(4, size=n)] * 2500.0).astype(np.float32)), "X")
    df = np.bincount(X.indices, minlength=m)
    assert np.mean(df < 0.01 * n) > 0.3  # a long tail of rarely detected genes
    B = (X[:, df > 0] != 0).astype(np.float64)
    G = (B.T @ B).toarray()
    unweighted = 1 - (np.count_nonzero(G) - G.shape[0]) / (G.shape[0] * (G.shape[0] - 1))
    assert unweighted > 0.3  # counted pair by pair, many pairs never meet
    assert never_cooccur_fraction(X) < NEVER_COOCCUR_LIMIT / 10
    rank, why = denoise_rank(X, TreeParams())
    assert rank == 50 and "raw counts whose features co-occur" in why


def _write_embeddings(tmp_path, vectors, names):
    txt = tmp_path / "vec.txt"
    txt.write_text(
        f"{len(names)} {vectors.shape[1]}\n"
        + "".join(n + " " + " ".join(repr(float(v)) for v in row) + "\n" for n, row in zip(names, vectors))
    )
    gz = tmp_path / "vec.vec.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write("".join(n + " " + " ".join(repr(float(v)) for v in row) + "\n" for n, row in zip(names, vectors)))
    npz = tmp_path / "vec.npz"
    np.savez(npz, vectors=vectors, names=np.array(names))
    npy = tmp_path / "arr.npy"
    np.save(npy, vectors)
    (tmp_path / "arr.txt").write_text("\n".join(names) + "\n")
    import anndata

    h5ad = tmp_path / "vec.h5ad"
    anndata.AnnData(X=vectors, obs={"_": np.zeros(len(names))}).write_h5ad(h5ad)
    a = anndata.read_h5ad(h5ad)
    a.obs_names = names
    a.write_h5ad(h5ad)
    return [txt, gz, npz, npy, h5ad]


def test_feature_embedding_files_are_read_alike_and_drive_the_tree(tmp_path):
    X, _, _ = planted_counts(80, 16, 4, seed=7)
    names = [f"g{j}" for j in range(16)]
    rng = np.random.default_rng(0)
    # vectors that encode the planted groups of features; g15 has no vector
    group = np.arange(16) % 4
    vectors = np.eye(4)[group[:15]] * 3 + rng.normal(0, 0.1, (15, 4))
    paths = _write_embeddings(tmp_path, vectors, names[:15])
    read = [read_feature_embedding(str(p)) for p in paths]
    for v, n in read:
        assert n == names[:15]
        np.testing.assert_allclose(v, vectors, rtol=1e-15)
    params = resolve_params("default")[0]
    tree = learn_tree(X, names, params, embedding=read[0])
    assert tree.metadata["feature_source"] == "embedding"
    assert tree.parent[tree.leaf_names.index("g15")] == tree.root  # no vector: hung from the root
    # the CLI gives the same distances from every file format
    csv = tmp_path / "x.csv"
    csv.write_text(",".join(names) + "\n" + "\n".join(",".join(str(int(v)) for v in r) for r in X) + "\n")
    outs = []
    for i, p in enumerate(paths):
        run_hdtwd("distance", csv, "--feature-embedding", p, "-o", tmp_path / f"D{i}.npy", "-q")
        outs.append(np.load(tmp_path / f"D{i}.npy"))
    for D in outs[1:]:
        np.testing.assert_array_equal(D, outs[0])
    run_hdtwd("distance", csv, "-o", tmp_path / "Ddata.npy", "-q")
    assert not np.allclose(np.load(tmp_path / "Ddata.npy"), outs[0])


@pytest.mark.parametrize(
    "text,needle",
    [
        ("a 1 2\nb 1\n", "line 2: 1 values where line 1 has 2"),
        ("a 1 x\n", "line 1: not a name followed by numbers"),
        ("a 1 2\na 3 4\n", "feature 'a' has two vectors"),
        ("a 1 nan\n", "NaN or infinite"),
    ],
)
def test_bad_feature_embedding_is_one_line_error(tmp_path, text, needle):
    X, _, _ = planted_counts(20, 6, 2, seed=8)
    csv = tmp_path / "x.csv"
    csv.write_text("\n".join(",".join(str(int(v)) for v in r) for r in X) + "\n")
    bad = tmp_path / "bad.txt"
    bad.write_text(text)
    proc = run_hdtwd("distance", csv, "--feature-embedding", bad, "-o", tmp_path / "D.npy", check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "D.npy").exists()


def test_distance_tree_with_unseen_features_errors_or_hangs_them_from_the_root(tmp_path):
    X, _, _ = planted_counts(30, 10, 2, seed=9)
    names = [f"g{j}" for j in range(10)]
    csv = tmp_path / "x.csv"
    csv.write_text(",".join(names) + "\n" + "\n".join(",".join(str(int(v)) for v in r) for r in X) + "\n")
    run_hdtwd("distance", csv, "--save-tree", tmp_path / "T.h5", "-o", tmp_path / "D.npy", "-q")
    Xn = np.hstack([X, np.ones((30, 2))])
    csv2 = tmp_path / "y.csv"
    csv2.write_text(
        ",".join(names + ["new1", "new2"]) + "\n" + "\n".join(",".join(str(int(v)) for v in r) for r in Xn) + "\n"
    )
    proc = run_hdtwd("distance", csv2, "--tree", tmp_path / "T.h5", "-o", tmp_path / "D2.npy", check=False)
    assert proc.returncode == 2 and "--unseen root" in proc.stderr.decode()
    run_hdtwd("distance", csv2, "--tree", tmp_path / "T.h5", "--unseen", "root", "-o", tmp_path / "D2.npy", "-q")
    from hdtwd_cli.tree._tree import Tree

    T = extend_tree(Tree.read(str(tmp_path / "T.h5")), names + ["new1", "new2"])
    h, lam = T.metadata["mean_leaf_depth"], T.metadata["leaf_length"]
    assert T.length[T.leaf_names.index("new1")] == pytest.approx(h * (1 + lam))
    assert T.feature_weights[T.leaf_names.index("new1")] == T.feature_weights.max()
    D2 = np.load(tmp_path / "D2.npy")
    np.testing.assert_allclose(D2, tree_wasserstein(T, align_to_tree(Xn, names + ["new1", "new2"], T)), rtol=1e-12)
    _tree_ot_check(T, Xn)
    assert mean_leaf_depth(T) > 0
    # queries on the old features against a reference set with the new ones: the same distances
    run_hdtwd(
        "distance",
        csv,
        "--tree",
        tmp_path / "T.h5",
        "--reference",
        csv2,
        "--unseen",
        "root",
        "-o",
        tmp_path / "C.npy",
        "-q",
    )
    np.testing.assert_allclose(
        np.load(tmp_path / "C.npy"),
        tree_wasserstein(T, align_to_tree(Xn, names + ["new1", "new2"], T), Xq=align_to_tree(X, names, T)),
        rtol=1e-12,
    )


def test_automatic_leaf_length_is_the_unexplained_to_shared_energy_ratio():
    from hdtwd_cli._defaults import AVERAGE_LEAF_LENGTH, DIFFUSION_LEAF_LENGTH
    from hdtwd_cli.tree._space import auto_leaf_length, feature_space

    X, _, _ = planted_counts(200, 150, 4, seed=10)
    names = [f"g{j}" for j in range(150)]
    params = resolve_params("default", feature_dims=8, feature_space="svd", denoise=0)[0]
    assert params.leaf_length is None  # the default is the automatic rule
    space = feature_space(X, names, params)
    M = X * idf_weights(X)
    M /= np.linalg.norm(M, axis=1, keepdims=True)
    s = np.linalg.svd(M, compute_uv=False)
    exact = float((s[:8] ** 2).sum() / M.shape[0])
    assert space.shared == pytest.approx(exact, rel=1e-4)
    tree = learn_tree(X, names, params)
    lam = (1 - exact) / exact + DIFFUSION_LEAF_LENGTH  # the diffusion learner's own term on top
    assert tree.metadata["leaf_length"] == pytest.approx(lam, rel=1e-3)
    assert auto_leaf_length(1.0) == DIFFUSION_LEAF_LENGTH == 1.0
    assert auto_leaf_length(1.0, "average") == AVERAGE_LEAF_LENGTH
    # a fixed value overrides the rule; small data (nothing to truncate) keep everything: only the learner's term
    assert learn_tree(X, names, params.replace(leaf_length=0.5)).metadata["leaf_length"] == 0.5
    small = learn_tree(X[:20, :12], names[:12], resolve_params("default", feature_space="svd")[0])
    assert small.metadata["leaf_length"] == DIFFUSION_LEAF_LENGTH and small.metadata["feature_source"] == "data"
    # a tree learned from the whole data columns leaves the leaf term only the learner's own
    cells = learn_tree(X, names, resolve_params("default", feature_dims=8, feature_space="data")[0])
    assert cells.metadata["leaf_length"] == DIFFUSION_LEAF_LENGTH and cells.metadata["latent_energy"] == 1.0


def test_overlap_kernel_equals_the_dense_kernel_on_documents(monkeypatch):
    import hdtwd_cli.evaluate._baselines as ev
    import hdtwd_cli.twd._distance as dist
    from hdtwd_cli.twd._distance import query_distances
    from hdtwd_cli.twd._kernels import l1_distances, l1_distances_sparse

    monkeypatch.setattr(dist, "SPARSE_KERNEL_DENSITY", 1.01)  # the overlap kernel even on this small corpus
    monkeypatch.setattr(ev, "SPARSE_KERNEL_DENSITY", 1.01)
    calls = []
    real = dist.l1_distances_sparse
    monkeypatch.setattr(dist, "l1_distances_sparse", lambda *a: calls.append(1) or real(*a))

    X, names, y = tiny_corpus(seed=11, n=80)
    Xs = sp.csr_matrix(X)
    A, B = normalize_rows(Xs[:30]), normalize_rows(Xs[30:])
    np.testing.assert_allclose(l1_distances_sparse(A, B), l1_distances(A.toarray(), B.toarray()), rtol=0, atol=1e-14)
    tree = learn_tree(X[30:], names, resolve_params("default")[0])
    Xtr, Xte = align_to_tree(Xs[30:], names, tree), align_to_tree(Xs[:30], names, tree)
    D = query_distances(tree, Xtr, Xte)
    np.testing.assert_allclose(D, tree_wasserstein(tree, Xtr.toarray(), Xq=Xte.toarray()), rtol=0, atol=1e-13)
    assert np.array_equal(D, query_distances(tree, Xtr, Xte))  # deterministic
    assert calls
    for b in ("l1", "cosine", "euclidean", "tfidf-l1"):
        np.testing.assert_allclose(
            baseline_distances(b, Xs[:30], Xs[30:]), baseline_distances(b, X[:30], X[30:]), rtol=0, atol=1e-12
        )


def test_max_features_places_the_most_frequent_and_hangs_the_rest_from_the_root():
    from hdtwd_cli.tree._features import document_frequency

    X, names, _ = tiny_corpus(seed=12)
    params = resolve_params("default", max_features=12, min_df=1)[0]
    tree = learn_tree(X, names, params)
    df = document_frequency(X)
    top = set(np.array(names)[np.lexsort((np.arange(len(names)), -df))[:12]])
    at_root = {n for i, n in enumerate(tree.leaf_names) if tree.parent[i] == tree.root}
    placed = set(tree.leaf_names) - at_root
    assert placed == top and len(tree.leaf_names) == len(names)
    assert tree.metadata["unplaced_features"] == len(names) - 12


def test_a_row_without_mass_is_refused_before_any_tree_is_learned(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import hdtwd_cli._api._learn as api
    import hdtwd_cli.cli._app as cli
    import hdtwd_cli.evaluate._families as ev

    def never(*a, **k):
        raise AssertionError("a tree was learned before the empty row was found")

    monkeypatch.setattr(api, "learn_trees", never)
    monkeypatch.setattr(ev, "learn_trees", never)
    csv = tmp_path / "x.csv"
    csv.write_text("a,b,c\n1,2,3\n0,0,0\n4,5,6\n2,2,2\n")
    res = CliRunner().invoke(cli.app, ["distance", str(csv), "-o", str(tmp_path / "D.npy")])
    assert res.exit_code == 2 and "row 1 sums to zero" in res.output
    X, names, y = tiny_corpus()
    X[5] = 0
    with pytest.raises(ValueError, match="row 5 sums to zero"):
        evaluate(X, names, y, ["hdtwd"], [1.0], [3], resolve_params("default")[0], ks=[1], n_splits=2)


def test_alignment_to_the_leaves_by_name_dense_and_sparse_alike():
    """Columns land on their leaves by name; leaves without a column get zero mass; all-zero
    unknown features are ignored; feature weights scale the columns (dense == sparse)."""
    from hdtwd_cli.tree._tree import Tree

    rng = np.random.default_rng(3)
    # 5 leaves: c, a, e, b, d; one internal node over (c, a), the root over the rest
    tree = Tree(
        parent=np.array([5, 5, 6, 6, 6, 6, -1]),
        length=np.array([1.0, 2, 3, 4, 5, 1, 0]),
        leaf_names=["c", "a", "e", "b", "d"],
        feature_weights=np.array([1.0, 2, 3, 4, 5]),
    )
    names = ["a", "b", "zz", "c", "d"]  # 'e' is absent; 'zz' is not a leaf and all zero
    X = rng.random((6, 5))
    X[:, 2] = 0.0
    want = np.zeros((6, 5))
    for j, name in enumerate(names):
        if name in tree.leaf_names:
            leaf = tree.leaf_names.index(name)
            want[:, leaf] = X[:, j] * tree.feature_weights[leaf]
    dense = align_to_tree(X, names, tree)
    np.testing.assert_array_equal(dense, want)
    np.testing.assert_array_equal(align_to_tree(sp.csr_matrix(X), names, tree).toarray(), want)
    X[0, 2] = 1.0  # now 'zz' carries mass: an error naming it
    from hdtwd_cli.errors import InputError

    with pytest.raises(InputError, match="zz"):
        align_to_tree(X, names, tree)


@pytest.mark.parametrize("chunk", [7, 1 << 22])
def test_document_frequency_counts_nonzero_entries_whatever_the_storage(monkeypatch, chunk):
    """Sparse with and without explicitly stored zeros (both code paths), in one chunk of stored
    entries or many, dense: the same counts."""
    from hdtwd_cli.tree import _features as features
    from hdtwd_cli.tree._features import document_frequency

    monkeypatch.setattr(features, "_DF_CHUNK", chunk)

    rng = np.random.default_rng(3)
    dense = rng.poisson(0.3, size=(60, 9)).astype(np.float64)
    want = np.count_nonzero(dense, axis=0)
    assert np.array_equal(document_frequency(dense), want) and want.min() < want.max()
    S = sp.csr_matrix(dense)
    assert np.count_nonzero(S.data) == S.nnz and np.array_equal(document_frequency(S), want)
    S.data[::3] = 0.0  # stored zeros: not counted
    assert np.count_nonzero(S.data) < S.nnz
    assert np.array_equal(document_frequency(S), np.count_nonzero(S.toarray(), axis=0))
