"""``classify``'s joint family: the joint hierarchies (Lin et al. 2025) in the paper's kNN protocol.

Small planted counts (90 samples x 40 features, 3 classes, 2 splits): every joint method runs and
reports its rounds; the inductive route's test distances are those of the final features' tree
learned from the training rows, recomputed here independently; the test rows shape no tree; the
default methods and the command line's help.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import hdtwd_cli as hd
import hdtwd_cli.evaluate._protocol as protocol
from hdtwd_cli._api._classify import chosen_methods
from hdtwd_cli.evaluate._joint import joint_hierarchy
from hdtwd_cli.evaluate._methods import METHODS, of_family
from hdtwd_cli.evaluate._splits import stratified_splits
from hdtwd_cli.evaluate._synthetic import planted_counts
from hdtwd_cli.joint._alternate import JointParams, alternate_hierarchies
from hdtwd_cli.tree._learn import prepare
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.twd._distance import query_distances
from hdtwd_cli.twd._histograms import align_to_tree

JOINT = ["joint", "joint-alt", "joint-transductive"]
KS = [1, 3, 5]


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, list[str]]:
    X, y, _ = planted_counts(90, 40, 3, seed=1, depth=200.0, noise=1.5)
    return X, y, [f"g{j}" for j in range(X.shape[1])]


def _tree_bits(tree) -> tuple:
    keep = None if tree.haar_keep is None else np.asarray(tree.haar_keep).tobytes()
    weights = None if tree.feature_weights is None else np.asarray(tree.feature_weights).tobytes()
    return tuple(tree.leaf_names), tree.parent.tobytes(), tree.length.tobytes(), keep, weights


def test_classify_runs_and_reports_every_joint_method(data):
    X, y, names = data
    report = hd.classify(X, y, names, methods=[*JOINT, "hdtwd"], k=KS, splits=2)
    json.dumps(report)  # the report stays JSON
    assert list(report["methods"]) == [*JOINT, "hdtwd"]
    assert of_family("joint") == tuple(JOINT)
    for name in JOINT:
        r = report["methods"][name]
        assert r["status"] == "ok" and 0 <= r["mean"] <= 100 and len(r["per_split"]) == 2, name
        p = r["params"]
        assert p["on"] == METHODS[name].input
        assert len(p["rounds"]) == 2 and all(1 <= n <= p["joint_max_rounds"] for n in p["rounds"]), p
        assert len(p["converged"]) == 2 and all(isinstance(c, bool) for c in p["converged"]), p
        assert p["joint_algorithm"] == ("alternating" if name == "joint-alt" else "filtered")
        assert p["eps"] == TreeParams().eps and p["scales"] == TreeParams().scales
        assert p["learned_from"].startswith("all rows" if name == "joint-transductive" else "training rows")
        assert len(p["denoised_rank"]) == 2
    assert report["methods"]["hdtwd"]["status"] == "ok"


def test_inductive_distances_are_those_of_the_final_features_tree(data, monkeypatch):
    """The kNN's (test x train) distances of joint and joint-alt, bit for bit: an independent recomputation
    of each split (the same seeded splits, learn_joint on the training rows, the TWD on its final tree)."""
    X, y, names = data
    seen: list[np.ndarray] = []
    score = protocol.knn_accuracy

    def recording(D, *args, **kwargs):
        seen.append(np.array(D, copy=True))
        return score(D, *args, **kwargs)

    monkeypatch.setattr(protocol, "knn_accuracy", recording)
    hd.classify(X, y, names, methods=["joint", "joint-alt"], k=KS, splits=2)
    assert len(seen) == 4  # per split: joint, then joint-alt
    params = TreeParams()
    for s, (train, test) in enumerate(stratified_splits(y, 2, 0.3, seed=0)):
        for j, joint in enumerate([JointParams(), JointParams(algorithm="alternating")]):
            J = alternate_hierarchies(X[train], names, [f"s{i}" for i in train], params, joint)
            T = J.features_tree
            assert (T.haar_keep is not None) == (joint.algorithm == "filtered")
            D = query_distances(T, align_to_tree(X[train], names, T), align_to_tree(X[test], names, T))
            assert D.shape == (test.size, train.size)
            assert seen[2 * s + j].tobytes() == np.asarray(D).tobytes(), (s, joint.algorithm)


def test_test_rows_shape_no_inductive_tree(data):
    """Other values in the test rows: joint's features' tree (its map, its Haar filter) and the training
    rows' histograms stay the same bits; the transductive tree, learned from them too, changes."""
    X, y, names = data
    params = TreeParams()
    train, test = stratified_splits(y, 2, 0.3, seed=0)[0]
    X2 = X.copy()
    X2[test] = np.random.default_rng(5).poisson(3.0, size=(test.size, X.shape[1])) + 1.0
    trees = {}
    for label, M in (("X", X), ("X2", X2)):
        for name in ("joint", "joint-transductive"):
            J = joint_hierarchy(name, M, names, train, test, params, prepared=prepare(M[train], names, params))
            trees[label, name] = J.features_tree
    a, b = trees["X", "joint"], trees["X2", "joint"]
    assert a.haar_keep is not None and _tree_bits(a) == _tree_bits(b)
    Ha = np.asarray(align_to_tree(X[train], names, a))
    Hb = np.asarray(align_to_tree(X2[train], names, b))
    assert Ha.tobytes() == Hb.tobytes()
    assert _tree_bits(trees["X", "joint-transductive"]) != _tree_bits(trees["X2", "joint-transductive"])


def test_joint_is_not_run_by_default(data):
    X, _, _ = data
    assert all(METHODS[m].default == "never" for m in JOINT)
    expected = ["hdtwd", "star", "cosine", "euclidean", "l1", "tfidf-l1", "tfidf-cosine", "pca"]
    assert chosen_methods(X) == expected
    assert chosen_methods(np.random.default_rng(0).random((20, 6))) == [
        "hdtwd",
        "star",
        "cosine",
        "euclidean",
        "l1",
        "pca",
    ]


def test_cli_help_lists_the_joint_methods():
    from typer.testing import CliRunner

    from hdtwd_cli.cli._app import app

    res = CliRunner().invoke(app, ["classify", "--help"], env={"COLUMNS": "1000"})  # each help on one line
    assert res.exit_code == 0, res.output
    flat = re.sub(r"[\s│]", "", res.output)
    assert ",ot,joint,joint-alt,joint-transductive,average(" in flat
    assert "joint...joint-transductive:theTWDonthefeatures'treeofjointhierarchies" in flat
