"""kNN protocol (App. C): the classifier against scikit-learn, splits, no leakage, the CLI report."""

import json

import numpy as np
import pytest
from conftest import SAMPLE, run_hdtwd

from hdtwd_cli.evaluate._protocol import knn_predict, stratified_splits
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
    import hdtwd_cli.evaluate._protocol as ev

    seen = []
    real = ev.learn_trees

    def spy(X, names, params, scales, *args, **kw):
        seen.append(X.shape[0])
        return real(X, names, params, scales, *args, **kw)

    monkeypatch.setattr(ev, "learn_trees", spy)
    from hdtwd_cli.evaluate._synthetic import planted_counts

    X, labels, _ = planted_counts(100, 16, 3, seed=0)
    res = ev.evaluate(
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
    for name in ("hdtwd", "cosine", "euclidean", "l1"):
        assert name in table
    r = json.loads(out.read_text())
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
        "hdtwd,cosine",
        "--json",
        out,
    )
    r = json.loads(out.read_text())
    assert set(r["methods"]) == {"hdtwd", "cosine"}
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
