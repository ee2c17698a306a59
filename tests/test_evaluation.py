"""kNN protocol (App. C): the classifier against scikit-learn, splits, no leakage, the CLI report."""

import json

import numpy as np
import pytest
from conftest import SAMPLE, run_hdtwd

from hdtwd_cli.evaluate._splits import knn_predict, stratified_splits
from hdtwd_cli.tree._params import TreeParams


def test_knn_matches_scikit_learn_when_votes_do_not_tie():
    neighbors = pytest.importorskip("sklearn.neighbors")
    rng = np.random.default_rng(0)
    for trial in range(5):
        n_train, n_test, C = 80, 40, 2 + trial
        D = rng.random((n_test, n_train))
        y = rng.integers(0, C, n_train)
        y[:C] = np.arange(C)
        ks = [1, 3, 5, 7, 9]
        ours = knn_predict(D, y, ks)
        order = np.argsort(D, axis=1, kind="stable")
        for i, k in enumerate(ks):
            clf = neighbors.KNeighborsClassifier(n_neighbors=k, metric="precomputed").fit(
                np.zeros((n_train, n_train)), y
            )
            theirs = clf.predict(D)
            counts = np.array([np.bincount(y[order[r, :k]], minlength=C) for r in range(n_test)])
            top = np.sort(counts, axis=1)
            no_tie = top[:, -1] > top[:, -2]
            assert no_tie.sum() >= 5
            assert np.array_equal(ours[i][no_tie], theirs[no_tie])


def test_vote_ties_go_to_the_class_met_first():
    # neighbours in order: class 1, class 0, class 2, class 0, class 1 -> k=2: tie (1 vs 0) -> 1
    D = np.array([[0.1, 0.2, 0.3, 0.4, 0.5]])
    y = np.array([1, 0, 2, 0, 1])
    pred = knn_predict(D, y, [1, 2, 3, 4, 5])
    assert pred[:, 0].tolist() == [1, 1, 1, 0, 1]
    # equal distances: the lower training index is the nearer neighbour
    D = np.array([[0.5, 0.5, 0.5]])
    assert knn_predict(D, np.array([2, 0, 1]), [1])[0, 0] == 2


def test_stratified_splits_are_disjoint_proportional_and_seeded():
    y = np.repeat(["a", "b", "c"], [50, 30, 20])
    splits = stratified_splits(y, 5, 0.3, seed=0)
    assert len(splits) == 5
    for tr, te in splits:
        assert len(te) == 30 and len(np.intersect1d(tr, te)) == 0 and len(tr) + len(te) == 100
        assert sorted(np.unique(y[te], return_counts=True)[1].tolist()) == [6, 9, 15]
    again = stratified_splits(y, 5, 0.3, seed=0)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(splits, again))
    other = stratified_splits(y, 5, 0.3, seed=1)
    assert not np.array_equal(splits[0][1], other[0][1])
    assert not np.array_equal(splits[0][1], splits[1][1])


def test_singleton_class_falls_back_to_unstratified():
    y = np.array([0] * 10 + [1])
    for _tr, te in stratified_splits(y, 3, 0.3, 0):
        assert len(te) == 3


def test_tree_is_learned_from_training_rows_only(monkeypatch):
    import hdtwd_cli.evaluate._families as ev
    from hdtwd_cli.evaluate._protocol import evaluate

    seen = []
    real = ev.learn_trees

    def spy(X, names, params, scales, *args, **kw):
        seen.append(X.shape[0])
        return real(X, names, params, scales, *args, **kw)

    monkeypatch.setattr(ev, "learn_trees", spy)
    from hdtwd_cli.evaluate._synthetic import planted_counts

    X, labels, _ = planted_counts(100, 16, 3, seed=0)
    res = evaluate(
        X,
        [f"g{j}" for j in range(16)],
        labels,
        ["hdtwd"],
        [1.0],
        [3],
        TreeParams.from_preset("paper"),
        ks=[1, 3],
        n_splits=2,
        test_size=0.3,
        seed=0,
    )
    assert seen == [70, 70]
    # changing the TEST rows of split 0 must not change the tree: same training accuracies path
    assert res[0].acc.shape == (2, 2)


def test_classify_cli_json_schema(tmp_path):
    out = tmp_path / "r.json"
    proc = run_hdtwd(
        "classify", SAMPLE / "cells.h5ad", "--labels", "obs:cell_type", "--splits", "3", "--k", "1,3,5", "--json", out
    )
    table = proc.stdout.decode()
    for name in ("hdtwd", "star", "cosine", "euclidean", "l1"):
        assert name in table
    r = json.loads(out.read_text())
    assert list(r["methods"])[:2] == ["hdtwd", "star"]  # star by default: the learned tree's gain is shown
    gain = r["margins"]["over_star"]
    assert gain == pytest.approx(r["methods"]["hdtwd"]["mean"] - r["methods"]["star"]["mean"], abs=1e-12)
    assert f"hdtwd - star: {gain:+.1f} points" in " ".join(table.split())
    assert {"n_samples", "n_features", "n_classes", "splits", "test_size", "seed", "k", "methods"} <= set(r)
    assert r["n_samples"] == 300 and r["n_classes"] == 4 and r["k"] == [1, 3, 5] and r["splits"] == 3
    for _name, m in r["methods"].items():
        assert set(m) >= {"best_k", "mean", "std", "per_k", "params"}
        assert m["best_k"] in (1, 3, 5) and 0 <= m["mean"] <= 100
        assert m["mean"] == max(m["per_k"].values())
    assert r["methods"]["hdtwd"]["params"]["eps"] == 1.0


def test_classify_grid_records_choices_and_labels_file(tmp_path):
    out = tmp_path / "r.json"
    run_hdtwd(
        "classify",
        SAMPLE / "cells.h5ad",
        "--labels",
        SAMPLE / "cells_labels.txt",
        "--splits",
        "2",
        "--k",
        "1,3",
        "--eps",
        "0.5,2",
        "--scales",
        "2,4",
        "--methods",
        "hdtwd,star,cosine",
        "--json",
        out,
    )
    r = json.loads(out.read_text())
    assert set(r["methods"]) == {"hdtwd", "star", "cosine"} and "over_star" in r["margins"]
    choices = r["methods"]["hdtwd"]["params"]["choices"]
    assert len(choices) == 2
    for c in choices:
        assert c["eps"] in (0.5, 2.0) and c["scales"] in (2, 4) and len(c["inner_scores"]) == 4


@pytest.mark.parametrize(
    "labels, needle",
    [
        ("{sample}/cells_labels.txt", "300 labels for 100 samples"),
        ("obs:cell_type", "obs columns can only be read from .h5ad"),
        ("{tmp}/missing.txt", "no such labels file"),
    ],
)
def test_classify_bad_labels(tmp_path, labels, needle):
    proc = run_hdtwd(
        "classify", SAMPLE / "produce.csv", "--labels", labels.format(sample=SAMPLE, tmp=tmp_path), check=False
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2 and needle in err and "Traceback" not in err


def test_classify_unknown_obs_column():
    proc = run_hdtwd("classify", SAMPLE / "cells.h5ad", "--labels", "obs:nope", check=False)
    assert proc.returncode == 2 and "no column 'nope'" in proc.stderr.decode()


def _counts(seed: int = 5, n: int = 60, m: int = 16) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Counts of two classes (the first richer in half the features)."""
    rng = np.random.default_rng(seed)
    X = rng.poisson(1.0, size=(n, m)).astype(float)
    y = np.repeat([0, 1], n // 2)
    X[y == 0, : m // 2] += rng.poisson(3.0, size=(n // 2, m // 2))
    return X, y, [f"g{j}" for j in range(m)]


def _oracle_histograms(X_train: np.ndarray, X: np.ndarray, rank: int) -> np.ndarray:
    """The split's histograms computed from their definition, independently of the package: the rank-``r``
    reconstruction of ``log1p(1e4 x / sum x)`` from the training rows' principal axes (LAPACK on the centred
    scatter matrix), clipped at 0, times the smoothed idf of the training counts, rows normalised."""

    def f(A):
        return np.log1p(1e4 * A / A.sum(axis=1, keepdims=True))

    F = f(X_train)
    mu = F.mean(axis=0)
    _, U = np.linalg.eigh((F - mu).T @ (F - mu))
    V = U[:, ::-1][:, :rank]
    R = np.maximum(mu + (f(X) - mu) @ V @ V.T, 0.0)
    u = np.log((1 + X_train.shape[0]) / (1 + np.count_nonzero(X_train, axis=0))) + 1
    H = R * u
    return H / H.sum(axis=1, keepdims=True)


def test_star_is_weighted_l1_between_the_denoised_idf_histograms():
    """``star``: the TWD on the star tree with hdtwd's map is the L1 distance between the denoised,
    idf-weighted histograms (edges of length 1), against an independent computation of those
    histograms; its kNN accuracies are those of that L1 matrix."""
    from hdtwd_cli.evaluate._competitors import competitor_trees
    from hdtwd_cli.evaluate._protocol import evaluate
    from hdtwd_cli.evaluate._splits import knn_accuracy
    from hdtwd_cli.tree._learn import prepare
    from hdtwd_cli.twd._distance import query_distances
    from hdtwd_cli.twd._histograms import align_to_tree

    X, y, names = _counts(n=80, m=20)
    params = TreeParams().replace(denoise=4)
    res = evaluate(X, names, y, ["star"], [1.0], [7], params, ks=[1, 3, 5], n_splits=2)[0]
    assert res.status == "ok" and res.params["denoised_rank"] == [4, 4]
    for s, (tr, te) in enumerate(stratified_splits(y, 2, 0.3, 0)):
        H_tr, H_te = _oracle_histograms(X[tr], X[tr], 4), _oracle_histograms(X[tr], X[te], 4)
        L1 = np.abs(H_te[:, None, :] - H_tr[None, :, :]).sum(axis=2)
        (star,) = competitor_trees("star", prepare(X[tr], names, params), params, split=s)
        assert np.all(star.length[star.parent >= 0] == 1.0) and star.denoiser is not None
        D = query_distances(star, align_to_tree(X[tr], names, star), align_to_tree(X[te], names, star))
        np.testing.assert_allclose(D, L1, rtol=1e-9, atol=1e-12)
        assert np.array_equal(res.acc[s], knn_accuracy(L1, y[tr], y[te], [1, 3, 5]))


def test_without_denoising_star_is_the_tfidf_l1_baseline():
    """Denoising off: the star tree's histograms are the idf-weighted rows, so its TWD is ``tfidf-l1``'s distance."""
    from hdtwd_cli.evaluate._baselines import baseline_distances
    from hdtwd_cli.evaluate._competitors import competitor_trees
    from hdtwd_cli.tree._learn import prepare
    from hdtwd_cli.twd._distance import query_distances
    from hdtwd_cli.twd._histograms import align_to_tree

    X, y, names = _counts()
    params = TreeParams().replace(denoise=0)
    tr, te = np.arange(20, 60), np.arange(20)
    (star,) = competitor_trees("star", prepare(X[tr], names, params), params)
    assert star.denoiser is None
    D = query_distances(star, align_to_tree(X[tr], names, star), align_to_tree(X[te], names, star))
    np.testing.assert_allclose(D, baseline_distances("tfidf-l1", X[te], X[tr]), rtol=1e-12, atol=1e-14)


def test_every_tree_of_a_split_compares_the_same_denoised_histograms(monkeypatch):
    """One ``prepare`` per split, read by every tree: hdtwd's, star's and each competitor's trees (fitted
    ones too) carry the same feature weights and the same denoiser, leaf by leaf, so only the tree differs."""
    pytest.importorskip("ot")
    import hdtwd_cli.evaluate._families as ev
    from hdtwd_cli.evaluate._protocol import evaluate

    calls, seen = [], []
    real_prepare, real_query = ev.prepare, ev.query_distances
    monkeypatch.setattr(ev, "prepare", lambda *a, **k: calls.append(a[0].shape[0]) or real_prepare(*a, **k))

    def spy(tree, A, B):
        order = np.argsort(tree.leaf_names)
        den = tree.denoiser
        seen.append(
            (tree.feature_weights[order], den.mean[order], np.abs(den.axes[order] @ den.axes[order].T).round(12))
        )
        return real_query(tree, A, B)

    monkeypatch.setattr(ev, "query_distances", spy)
    X, y, names = _counts(n=60, m=16)
    methods = ["hdtwd", "star", "quadtree", "tswd-5", "wqtwd"]
    res = evaluate(X, names, y, methods, [1.0], [7], TreeParams().replace(denoise=3), ks=[1, 3], n_splits=2)
    assert calls == [42, 42] and all(r.status == "ok" for r in res)
    per_split = len(seen) // 2
    assert per_split == 1 + 1 + 1 + 5 + 1
    for part in (seen[:per_split], seen[per_split:]):
        for other in part[1:]:
            for a, b in zip(part[0], other):
                assert np.array_equal(a, b)
    assert not np.array_equal(seen[0][1], seen[per_split][1])  # each split's own training rows


def test_exact_ot_compares_the_denoised_histograms_in_the_denoised_features_space():
    """``ot`` under denoising: a linear program (SciPy's HiGHS) between the independently computed denoised,
    idf-weighted histograms, on the Euclidean distances of the denoised training rows' unit columns."""
    pytest.importorskip("ot")
    from conftest import exact_ot

    from hdtwd_cli.evaluate._families import Split, Study, method_distances

    X, y, names = _counts(seed=8, n=40, m=10)
    params = TreeParams().replace(denoise=3)
    tr, te = stratified_splits(y, 1, 0.3, 0)[0]
    run = Split(Study(X, names, y, params, [(tr, te)]), 0)
    notes: dict = {}
    D, rows = method_distances("ot", run, notes)
    assert np.array_equal(rows, te) and notes["test_rows"] == [te.size]

    def f(A):
        return np.log1p(1e4 * A / A.sum(axis=1, keepdims=True))

    G = f(X[tr])
    mu = G.mean(axis=0)
    _, U = np.linalg.eigh((G - mu).T @ (G - mu))
    V = U[:, ::-1][:, :3]
    F = np.maximum(mu + (G - mu) @ V @ V.T, 0.0).T  # the features' vectors: columns of the denoised training rows
    F /= np.linalg.norm(F, axis=1, keepdims=True)
    C = np.sqrt(np.maximum(((F[:, None, :] - F[None, :, :]) ** 2).sum(axis=2), 0.0))
    H_te, H_tr = _oracle_histograms(X[tr], X[te], 3), _oracle_histograms(X[tr], X[tr], 3)
    for i, j in [(0, 0), (3, 7), (5, 20)]:
        assert D[i, j] == pytest.approx(exact_ot(H_te[i], H_tr[j], C), rel=1e-7, abs=1e-10)


def test_pca_of_values_that_are_not_counts_is_scanpys_scale_then_50_components():
    """Log-normalised values: ``sc.pp.scale(max_value=10)`` then ``sc.pp.pca(n_comps=50)``, fitted on the
    training rows, gives the same scaled values and the same principal-component distances (the test
    rows projected with the training rows' scale and axes)."""
    sc = pytest.importorskip("scanpy")
    import anndata

    from hdtwd_cli.evaluate._baselines import pca_representation, scaled_features

    rng = np.random.default_rng(3)
    n, m = 200, 90
    Z = rng.normal(size=(n, 6)) @ rng.normal(size=(6, m)) * 0.8 + rng.normal(size=(n, m)) * 0.3
    X = np.log1p(np.exp(Z) * 0.37)  # log-normalised-like positive values, never whole
    X[:, 4] = 0.0  # a feature with no variance
    X[:, 9] = 0.1
    X[7, 9] = 5.0  # one training outlier: its z-score passes 10 and is clipped
    X[160, 9] = 9.0  # and one test outlier
    tr, te = np.arange(150), np.arange(150, 200)
    ad = anndata.AnnData(X[tr].copy())
    sc.pp.scale(ad, max_value=10)
    B, A = scaled_features(X[te], X[tr])
    assert A.max() == 10.0 and B.max() == 10.0 and not A[:, 4].any() and not B[:, 4].any()
    np.testing.assert_allclose(A, ad.X, rtol=1e-9, atol=1e-9)
    sc.pp.pca(ad, n_comps=50)
    Zte, Ztr = pca_representation(X[te], X[tr])
    assert Ztr.shape == (150, 50)

    def dist(P, Q):
        return np.sqrt(np.maximum(((P[:, None, :] - Q[None, :, :]) ** 2).sum(axis=2), 0.0))

    np.testing.assert_allclose(dist(Ztr, Ztr), dist(ad.obsm["X_pca"], ad.obsm["X_pca"]), rtol=1e-6, atol=1e-6)
    # scanpy's scale of the test rows with the training rows' statistics, centred and projected as its PCA does
    S_te = np.clip((X[te] - ad.var["mean"].to_numpy()) / ad.var["std"].to_numpy(), -10, 10)
    P_te = (S_te - ad.X.mean(axis=0)) @ ad.varm["PCs"]
    np.testing.assert_allclose(dist(Zte, Ztr), dist(P_te, ad.obsm["X_pca"]), rtol=1e-6, atol=1e-6)


def test_margins_are_hdtwds_lead_over_star_and_the_best_competitor_tree():
    from hdtwd_cli.evaluate._protocol import MethodResult, summarise

    def result(name, mean, status="ok"):
        return MethodResult(name, [1, 3], np.array([[mean - 1, mean], [mean - 1, mean]]), {}, status)

    rows = [
        result("hdtwd", 80.0),
        result("star", 77.5),
        result("l1", 95.0),  # a baseline: no margin against it
        result("quadtree", 70.0),
        result("wqtwd", 79.0),
        result("ot", 99.0),  # not a tree
        result("mst", 0.0, "skipped: over budget"),
    ]
    rep = summarise(rows, {})
    assert rep["margins"] == {"over_star": 2.5, "best_competitor_tree": "wqtwd", "over_best_competitor_tree": 1.0}
    assert rep["methods"]["mst"] == {"status": "skipped: over budget", "params": {}}
    assert "margins" not in summarise([result("hdtwd", 80.0), result("l1", 60.0)], {})
    assert summarise([result("star", 1.0), result("quadtree", 2.0)], {}).get("margins") is None


def test_methods_over_their_budget_are_skipped_in_their_own_rows_and_the_others_run():
    pytest.importorskip("ot")
    import hdtwd_cli as hd

    X, y, names = _counts()
    rep = hd.classify(X, y, names, methods=["hdtwd", "ot", "flowtree", "wqtwd", "quadtree"], splits=2, ot_budget=1000)
    m = rep["methods"]
    assert m["hdtwd"]["status"] == "ok" and m["quadtree"]["status"] == "ok" and m["hdtwd"]["mean"] > 60
    assert m["ot"]["status"].startswith("skipped: exact OT ('ot'): a budget of 1,000")
    assert m["flowtree"]["status"].startswith("skipped: flowtree (scored on exact OT's test rows)")
    assert m["wqtwd"]["status"].startswith("skipped: a budget of 1,000 transport variables per split fits only")
    for name in ("ot", "flowtree", "wqtwd"):
        assert "mean" not in m[name] and "--ot-budget" in m[name]["status"] and "\n" not in m[name]["status"]
    assert rep["margins"]["best_competitor_tree"] == "quadtree"  # the skipped fitted tree is no candidate
    fig = hd.pl.classify_report(rep)  # the picture draws the methods that ran
    assert [t.get_text().split(" (")[0] for t in fig.axes[0].get_legend().get_texts()] == ["hdtwd", "quadtree"]
