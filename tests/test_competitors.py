"""The paper's competitors of ``classify --methods`` (Quadtree, MST, cluster trees, exact OT).

Each tree is a valid tree over all features whose TWD equals exact OT on its path metric; the
Quadtree is deterministic per seed and its path metric dominates the Euclidean ground cost (so
exact OT with that cost never exceeds its TWD); the MST's path metric is the distance along it.
``ot`` (:mod:`exact_ot`) equals an independent linear program (SciPy's HiGHS) and POT on a dense
cost, never exceeds the Quadtree's TWD, and is scored on the budgeted test rows it reports.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import assert_twd_is_exact_ot, exact_ot, path_metric, run_hdtwd

from hdtwd_cli._api import chosen_methods
from hdtwd_cli.errors import ParameterError
from hdtwd_cli.evaluate._competitors import cluster_tree, competitor_trees, mst_tree, quadtree
from hdtwd_cli.evaluate._exact_ot import OT_MIN_TEST_ROWS, OverBudget, budget_rows, ot_histograms, scored_rows
from hdtwd_cli.evaluate._exact_ot import exact_ot as ot_distances
from hdtwd_cli.evaluate._splits import stratified_splits
from hdtwd_cli.tree._learn import prepare
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.twd._distance import tree_wasserstein
from hdtwd_cli.twd._histograms import align_to_tree, normalize_rows


def _vectors(seed: int, m: int = 14, d: int = 3) -> np.ndarray:
    F = np.random.default_rng(seed).normal(size=(m, d))
    F[5] = F[4]  # identical vectors: never separated by the grid, zero-length edges in the MST
    return F


def _trees(method: str, X: np.ndarray, names: list[str], params: TreeParams | None = None, split: int = 0):
    """:func:`competitor_trees` of the rows ``X`` (their own :func:`prepare`)."""
    params = params or TreeParams()
    return competitor_trees(method, prepare(X, names, params), params, split=split)


def _euclid(F: np.ndarray) -> np.ndarray:
    return np.sqrt(((F[:, None, :] - F[None, :, :]) ** 2).sum(axis=-1))


@pytest.mark.parametrize("build", ["quadtree-0", "quadtree-3", "mst", "cluster-0", "cluster-5"])
def test_each_tree_is_valid_and_its_twd_is_exact_ot(build):
    F = _vectors(1)
    names = [f"g{j}" for j in range(F.shape[0])]
    tree = (
        mst_tree(F, names)
        if build == "mst"
        else cluster_tree(F, names, seed=int(build[-1]), branches=3, height=3)
        if build.startswith("cluster")
        else quadtree(F, names, seed=int(build[-1]))
    )
    tree.validate()
    assert tree.leaf_names == names
    C = path_metric(tree.parent, tree.length, tree.n_leaves)
    H, D = assert_twd_is_exact_ot(tree)
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
    metrics = {
        path_metric(t.parent, t.length, 30).round(12).tobytes() for t in (quadtree(F, names, seed=s) for s in range(4))
    }
    assert len(metrics) > 1


def test_cluster_trees_are_deterministic_per_seed_and_tswd_trees_differ():
    F = _vectors(6, m=40, d=5)
    names = [f"g{j}" for j in range(40)]
    a, b = cluster_tree(F, names, seed=3), cluster_tree(F, names, seed=3)
    assert a.parent.tobytes() == b.parent.tobytes() and a.length.tobytes() == b.length.tobytes()
    X = np.abs(np.random.default_rng(7).normal(size=(50, 40)))
    one = _trees("cluster-tree", X, names, split=0)[0]
    again = _trees("cluster-tree", X, names, split=3)[0]
    assert one.parent.tobytes() == again.parent.tobytes()  # no randomness across splits
    sliced = _trees("tswd-5", X, names, split=0)
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
        trees = _trees(method, X[1:], names, split=1)
        assert len(trees) == (5 if method == "tswd-5" else 1)
        tree = trees[-1]
        assert sorted(tree.leaf_names) == sorted(names)
        assert tree.parent[tree.leaf_names.index("g11")] == tree.root  # unplaced: hung from the root
        assert tree.feature_weights is not None
        H = normalize_rows(align_to_tree(X, names, tree))
        C = path_metric(tree.parent, tree.length, tree.n_leaves)
        D = tree_wasserstein(tree, H)
        assert D[0, 1] == pytest.approx(exact_ot(H[0], H[1], C), rel=1e-8, abs=1e-12)


def _two_classes_arrays(per_class: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts of two classes (the first richer in 8 of 16 features)."""
    rng = np.random.default_rng(5)
    X = rng.poisson(1.0, size=(2 * per_class, 16)).astype(float)
    y = np.repeat([0, 1], per_class)
    X[y == 0, :8] += rng.poisson(3.0, size=(per_class, 8))
    return X, y


def _two_classes(tmp_path, per_class: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_two_classes_arrays`, saved as x.npy and y.txt."""
    X, y = _two_classes_arrays(per_class)
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "y.txt").write_text("\n".join(map(str, y)) + "\n")
    return X, y


def test_classify_runs_the_competitors_on_the_same_splits(tmp_path, short_hyperbolic_training):
    """The command line's classify, in this process (typer's CliRunner) so that HypHC trains on 20,000 triplets
    (conftest.short_hyperbolic_training)."""
    from typer.testing import CliRunner

    from hdtwd_cli.cli._app import app

    X, _ = _two_classes(tmp_path, 30)
    argv = ["classify", str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.txt"), "--splits", "2", "-q"]
    methods = "hdtwd,quadtree,mst,cluster-tree,tswd-5,treerep,hhc"
    res = CliRunner().invoke(app, [*argv, "--methods", methods, "--json", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "r.json").read_text())
    assert list(rep["methods"]) == ["hdtwd", "quadtree", "mst", "cluster-tree", "tswd-5", "treerep", "hhc"]
    for m in ("quadtree", "mst", "cluster-tree", "tswd-5", "treerep", "hhc"):
        assert len(rep["methods"][m]["per_split"]) == 2 and rep["methods"][m]["mean"] > 60
    with pytest.raises(ParameterError, match="no-such-tree"):
        chosen_methods(X, ["hdtwd", "no-such-tree"])


def _histograms(seed: int, n: int, m: int, density: float = 0.5):
    rng = np.random.default_rng(seed)
    H = rng.random((n, m)) * (rng.random((n, m)) < density)
    H[:, 0] += 0.1  # every row has mass
    return ot_histograms(H)


def test_exact_ot_equals_an_independent_linear_program_and_pot():
    ot = pytest.importorskip("ot")
    F = _vectors(4, m=12, d=3)
    A, B = _histograms(1, 4, 12), _histograms(2, 3, 12)
    D = ot_distances(A, B, F)
    E = _euclid(F)
    a, b = A.toarray(), B.toarray()
    for i in range(4):
        for j in range(3):
            assert D[i, j] == pytest.approx(exact_ot(a[i], b[j], E), rel=1e-8, abs=1e-12)  # SciPy HiGHS
            assert D[i, j] == pytest.approx(ot.emd2(a[i], b[j], E), rel=1e-10, abs=1e-14)  # dense POT, all features
    assert np.all(D > 0)
    assert ot_distances(A, A, F).diagonal() == pytest.approx(0, abs=1e-12)


def test_exact_ot_never_exceeds_the_twd_of_a_dominating_quadtree():
    pytest.importorskip("ot")
    F = _vectors(6, m=25, d=4)
    names = [f"g{j}" for j in range(25)]
    H = _histograms(3, 8, 25, density=0.4)
    D = ot_distances(H, H, F)
    for seed in range(3):
        tree = quadtree(F, names, seed=seed)
        T = tree_wasserstein(tree, H.toarray())
        assert np.all(D <= T * (1 + 1e-9) + 1e-12)
        assert np.any(D < 0.9 * T)  # the bound is not met with equality: the test can tell them apart


def test_exact_ot_pairs_from_the_union_costs_are_the_bits_of_per_pair_costs(monkeypatch):
    """Overlapping supports take their ground costs from one ``cdist`` of the union of supports;
    the values are those of each pair's own ``cdist`` bit for bit, and a linear program agrees."""
    pytest.importorskip("ot")
    from scipy.optimize import linprog
    from scipy.spatial.distance import cdist

    from hdtwd_cli.evaluate import _exact_ot

    rng = np.random.default_rng(21)
    V = rng.normal(size=(40, 30))
    M = rng.random((60, 40)) * (rng.random((60, 40)) < 0.7)
    H = sp.csr_matrix(M / M.sum(axis=1, keepdims=True))
    A, B = H[:30], H[30:]
    assert np.sum(np.diff(A.indptr) * np.diff(B.indptr)) > 40**2  # the union's matrix is the cheaper way
    union = _exact_ot.exact_ot_pairs(A, B, V)
    monkeypatch.setattr(_exact_ot, "UNION_COSTS", 0)
    assert union.tobytes() == _exact_ot.exact_ot_pairs(A, B, V).tobytes()
    a, b = A[0].toarray().ravel(), B[0].toarray().ravel()
    C = cdist(V, V)
    eq = np.vstack([np.kron(np.eye(40), np.ones(40)), np.kron(np.ones(40), np.eye(40))])
    lp = linprog(C.ravel(), A_eq=eq, b_eq=np.concatenate([a, b]), bounds=(0, None), method="highs")
    assert union[0] == pytest.approx(lp.fun, rel=1e-9)


def test_exact_ot_does_not_depend_on_threads_or_dtype():
    pytest.importorskip("ot")
    F = _vectors(7, m=30, d=5)
    A, B = _histograms(4, 6, 30), _histograms(5, 7, 30)
    one = ot_distances(A, B, F, threads=1)
    assert np.array_equal(one, ot_distances(A, B, F, threads=2))
    A32 = ot_histograms(A.toarray().astype(np.float32))
    assert np.allclose(ot_distances(A32, B, F), one, rtol=1e-6)


def test_budget_rows_is_a_seeded_prefix_that_fits():
    s_test = np.arange(1, 41)
    s_train = np.full(10, 3)  # 30 support entries in the training rows
    rows = budget_rows(s_test, s_train, budget=3000, seed=[0, 1, 26])
    assert np.array_equal(rows, budget_rows(s_test, s_train, budget=3000, seed=[0, 1, 26]))
    assert not np.array_equal(rows, budget_rows(s_test, s_train, budget=3000, seed=[0, 2, 26]))
    assert s_test[rows].sum() * 30 <= 3000
    order = np.random.default_rng([0, 1, 26]).permutation(40)
    assert set(rows) == set(order[: rows.size]) and s_test[order[: rows.size + 1]].sum() * 30 > 3000
    assert budget_rows(s_test, s_train, budget=10**9).size == 40
    assert budget_rows(s_test, s_train, budget=1).size == 0


def test_ot_refuses_before_solving_when_too_few_rows_fit():
    s_test, s_train = np.full(30, 30), np.full(70, 30)
    assert scored_rows(s_test, s_train, budget=10**9).size == 30
    with pytest.raises(
        OverBudget, match=f"fits only [0-9]+ test rows \\({OT_MIN_TEST_ROWS} needed\\); --ot-budget 1260000 fits"
    ):
        scored_rows(s_test, s_train, budget=10**5)
    # the budget the message names is enough
    assert scored_rows(s_test, s_train, budget=1260000).size == OT_MIN_TEST_ROWS
    with pytest.raises(OverBudget, match="^flowtree \\(scored on exact OT's test rows\\)"):
        scored_rows(s_test, s_train, budget=10**5, method="flowtree")


def test_classify_ot_reports_its_rows_and_is_deterministic(tmp_path):
    pytest.importorskip("ot")
    X, y = _two_classes(tmp_path, 40)
    nnz = np.count_nonzero(X, axis=1)
    splits = stratified_splits(y, 2, 0.3, 0)  # classify's splits (seed 0): a budget for 21 to 23 of 24 test rows
    budget = max(int(np.sort(nnz[te])[::-1][:21].sum() * nnz[tr].sum()) for tr, te in splits)
    assert budget < min(int(nnz[te].sum() * nnz[tr].sum()) for tr, te in splits)
    args = [
        "classify",
        tmp_path / "x.npy",
        "--labels",
        tmp_path / "y.txt",
        "--methods",
        "hdtwd,ot",
        "--splits",
        "2",
        "--ot-budget",
        str(budget),
        "-q",
    ]
    first = run_hdtwd(*args, "--json", tmp_path / "a.json")
    run_hdtwd(*args, "--json", tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    ot = json.loads((tmp_path / "a.json").read_text())["methods"]["ot"]
    paired = ot["params"]["same_rows"]["hdtwd"]  # the caption says what hdtwd scores on ot's rows
    assert f"where hdtwd scores {paired['mean']:.1f} ± {paired['std']:.1f}" in " ".join(first.stdout.decode().split())
    assert ot["params"]["test_rows_of"] == [24, 24]
    assert OT_MIN_TEST_ROWS <= min(ot["params"]["test_rows"]) < 24  # the budget bound: a subset was scored
    assert ot["mean"] > 70
    # a budget that fits too few rows: ot's own row says so, hdtwd still runs, exit 0
    low = run_hdtwd(*args[:-3], "--ot-budget", "1000", "--json", tmp_path / "low.json")
    table = low.stdout.decode()
    assert low.returncode == 0 and "Traceback" not in low.stderr.decode()
    row = next(line for line in table.splitlines() if line.lstrip("│ ").startswith("ot "))
    assert "skipped: exact OT ('ot')" in row and "fits only 0 test rows" in row
    rep = json.loads((tmp_path / "low.json").read_text())["methods"]
    assert rep["ot"]["status"].startswith("skipped: exact OT ('ot'): a budget of 1,000 transport variables")
    assert "--ot-budget" in rep["ot"]["status"] and "mean" not in rep["ot"]
    assert rep["hdtwd"]["status"] == "ok" and rep["hdtwd"]["mean"] > 70


def test_every_other_method_is_scored_on_exact_ots_rows_too(tmp_path):
    """The paired comparison: ot scores a budgeted subset of each split's test rows; the report gives every
    method that scores all rows on that subset (``same_rows``), here checked against L1 computed by SciPy on
    the positions the protocol's split scores, and against the methods' own scores when every row fits."""
    pytest.importorskip("ot")
    from scipy.spatial.distance import cdist

    import hdtwd_cli as hd
    from hdtwd_cli.evaluate._families import Split, Study
    from hdtwd_cli.evaluate._splits import knn_accuracy

    X, y = _two_classes_arrays(40)
    nnz = np.count_nonzero(X, axis=1)
    splits = stratified_splits(y, 2, 0.3, 0)
    budget = max(int(np.sort(nnz[te])[::-1][:21].sum() * nnz[tr].sum()) for tr, te in splits)
    ks = [1, 3, 5]
    rep = hd.classify(X, y, methods=["hdtwd", "l1", "ot"], splits=2, k=ks, ot_budget=budget)["methods"]
    same = rep["ot"]["params"]["same_rows"]
    assert sorted(same) == ["hdtwd", "l1"]
    study = Study(X, [f"f{j}" for j in range(16)], y, TreeParams(), splits, budget=budget)
    P = X / X.sum(axis=1, keepdims=True)
    acc = []
    for s, (tr, te) in enumerate(splits):
        pos = Split(study, s).scored("ot")
        assert pos.size < te.size  # a subset
        acc.append(knn_accuracy(cdist(P[te[pos]], P[tr], "cityblock"), y[tr], y[te[pos]], ks))
    means = np.mean(acc, axis=0)
    assert same["l1"]["mean"] == pytest.approx(means.max(), abs=1e-9) and same["l1"]["best_k"] == ks[means.argmax()]
    everything = hd.classify(X, y, methods=["hdtwd", "l1", "ot"], splits=2, k=ks, ot_budget=10**9)["methods"]
    for m in ("hdtwd", "l1"):
        own = everything[m]
        assert everything["ot"]["params"]["same_rows"][m] == {k: own[k] for k in ("best_k", "mean", "std")}


def test_ot_without_pot_is_one_clear_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ot", None)  # import ot raises ImportError
    with pytest.raises(ParameterError, match="pip install 'hdtwd\\[ot\\]'"):
        chosen_methods(np.ones((4, 3)), ["hdtwd", "ot"])


def test_fitted_weights_reproduce_a_planted_tree_metric_on_new_pairs():
    """Costs that ARE a TWD on the tree (lengths drawn at random): the NNLS fit reproduces them on
    the fitting pairs and on pairs it never saw (the fitted TWD is the planted one)."""
    import dataclasses

    from hdtwd_cli.evaluate._weighted import fit_edge_weights

    F = _vectors(3, m=12)
    names = [f"g{j}" for j in range(F.shape[0])]
    shape = quadtree(F, names, seed=1)
    rng = np.random.default_rng(4)
    planted = dataclasses.replace(shape, length=np.where(shape.parent >= 0, rng.random(shape.n_nodes) + 0.1, 0.0))
    H = rng.random((300, len(names))) * (rng.random((300, len(names))) < 0.6)
    H[:, 0] += 0.05
    H /= H.sum(axis=1, keepdims=True)
    A, B = H[:120], H[120:240]
    costs = np.array([tree_wasserstein(planted, np.stack([a, b]))[0, 1] for a, b in zip(A, B)])
    fitted = fit_edge_weights(shape, A, B, costs)
    fitted.validate()
    assert np.all(fitted.length >= 0) and fitted.length[fitted.parent < 0].sum() == 0
    np.testing.assert_allclose(
        tree_wasserstein(fitted, H[240:]), tree_wasserstein(planted, H[240:]), rtol=1e-7, atol=1e-9
    )


def test_with_fewer_pairs_than_edges_the_pull_to_the_shape_beats_plain_nnls_on_new_pairs():
    """Costs from the shape's lengths perturbed by 30 %: with 40 pairs for ~100 edges NNLS zeroes most
    edges; the held-out choice takes a pull towards the shape (rho > 0) and predicts new pairs better."""
    import dataclasses

    from hdtwd_cli.evaluate._weighted import fit_edge_weights

    F = np.random.default_rng(8).normal(size=(60, 4))
    names = [f"g{j}" for j in range(60)]
    shape = quadtree(F, names, seed=2)
    rng = np.random.default_rng(9)
    noise = 1.0 + 0.3 * rng.uniform(-1, 1, shape.n_nodes)
    planted = dataclasses.replace(shape, length=shape.length * noise)
    H = rng.random((240, 60)) * (rng.random((240, 60)) < 0.3)
    H[:, 0] += 0.01
    H /= H.sum(axis=1, keepdims=True)
    A, B = H[:40], H[40:80]
    costs = np.array([tree_wasserstein(planted, np.stack([a, b]))[0, 1] for a, b in zip(A, B)])
    pulled = fit_edge_weights(shape, A, B, costs)
    plain = fit_edge_weights(shape, A, B, costs, ridges=(0.0,))
    assert (shape.parent >= 0).sum() > 2 * len(costs) and pulled.metadata["ridge"] > 0
    assert np.count_nonzero(plain.length) <= len(costs) < np.count_nonzero(pulled.length)
    truth = tree_wasserstein(planted, H[80:])

    def error(tree):
        return float(np.sum((tree_wasserstein(tree, H[80:]) - truth) ** 2))

    assert error(pulled) < 0.5 * error(plain)


def test_fitted_trees_fit_exact_ot_better_than_any_scaling_of_their_shape_and_are_deterministic():
    pytest.importorskip("ot")
    from hdtwd_cli.evaluate._competitors import feature_vectors, reference_tree
    from hdtwd_cli.evaluate._exact_ot import exact_ot_pairs, ground_of, histograms
    from hdtwd_cli.evaluate._weighted import SLICES, fitted_trees, sample_pairs

    rng = np.random.default_rng(6)
    X = rng.poisson(1.0, size=(60, 16)).astype(float)
    X[:30, :8] += rng.poisson(3.0, size=(30, 8))
    names = [f"g{j}" for j in range(16)]
    params = TreeParams()
    prepared = prepare(X, names, params)
    for method in ("wqtwd", "wctwd", "swqtwd", "swctwd"):
        trees, used = fitted_trees(method, X, names, prepared, params, split=1, pairs=150)
        again, _ = fitted_trees(method, X, names, prepared, params, split=1, pairs=150)
        assert len(trees) == (SLICES if method.startswith("s") else 1) and used == 150
        for t, u in zip(trees, again):
            t.validate()
            assert t.length.tobytes() == u.length.tobytes()
    # the fit's objective against the unfitted shape at its best scale, on the fitting pairs
    placed, U = feature_vectors(prepared)
    ref = reference_tree(prepared, params)
    H = histograms(X, names, ref)
    pairs = sample_pairs(np.diff(H.indptr), 150, 10**9, [params.seed, 1])
    W = exact_ot_pairs(H[pairs[:, 0]], H[pairs[:, 1]], ground_of(placed, U, ref.leaf_names))
    (fitted,), _ = fitted_trees("wqtwd", X, names, prepared, params, split=1, pairs=150)
    (shape,) = competitor_trees("quadtree", prepared, params, split=1)

    def twd(tree):
        Hp = normalize_rows(align_to_tree(X, names, tree))
        return np.array([tree_wasserstein(tree, Hp[[i, j]])[0, 1] for i, j in pairs])

    base = twd(shape)
    best_scale = float(base @ W / (base @ base))
    assert np.sum((twd(fitted) - W) ** 2) < np.sum((best_scale * base - W) ** 2)


def test_classify_runs_the_fitted_trees_and_reports_their_pairs(tmp_path):
    pytest.importorskip("ot")
    _two_classes(tmp_path, 30)
    args = ["classify", tmp_path / "x.npy", "--labels", tmp_path / "y.txt", "--methods", "wqtwd,swctwd"]
    run_hdtwd(*args, "--splits", "2", "-q", "--json", tmp_path / "a.json")
    run_hdtwd(*args, "--splits", "2", "-q", "--json", tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    rep = json.loads((tmp_path / "a.json").read_text())["methods"]
    for m in ("wqtwd", "swctwd"):
        assert rep[m]["mean"] > 60 and len(rep[m]["params"]["pairs"]) == 2 and min(rep[m]["params"]["pairs"]) > 0


def test_competitor_trees_are_the_same_bits_at_any_blas_thread_count():
    """The trees are built with BLAS on one thread, whatever the caller allows."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(4)
    X = rng.poisson(1.0, size=(50, 24)).astype(float)
    X[:25, :12] += rng.poisson(3.0, size=(25, 12))
    names = [f"g{j}" for j in range(24)]
    for method in ("mst", "cluster-tree", "ultrafit", "ghhc"):
        with threadpool_limits(limits=1, user_api="blas"):
            (one,) = _trees(method, X, names, split=2)
        with threadpool_limits(limits=2, user_api="blas"):
            (two,) = _trees(method, X, names, split=2)
        assert one.parent.tobytes() == two.parent.tobytes() and one.length.tobytes() == two.length.tobytes()


def test_fitted_methods_of_a_split_share_one_set_of_exact_programs(monkeypatch):
    """The pairs and their exact costs depend on the split's rows and seed, not on the method: the
    protocol solves them once per split for every fitted method, and the trees are the bits a
    method computing its own pairs gets."""
    pytest.importorskip("ot")
    from hdtwd_cli.evaluate import _protocol, _weighted

    rng = np.random.default_rng(12)
    X = rng.poisson(1.0, size=(40, 12)).astype(float)
    X[:20, :6] += rng.poisson(3.0, size=(20, 6))
    y = np.repeat([0, 1], 20)
    names = [f"g{j}" for j in range(12)]
    params = TreeParams()
    prepared = prepare(X, names, params)
    own, _ = _weighted.fitted_trees("wctwd", X, names, prepared, params, split=1, pairs=60)
    shared = _weighted.fit_pairs(X, names, prepared, params, split=1, pairs=60)
    given, used = _weighted.fitted_trees("wctwd", X, names, prepared, params, split=1, fit=shared)
    assert used == 60 and own[0].length.tobytes() == given[0].length.tobytes()

    calls = []
    real = _weighted.exact_ot_pairs
    monkeypatch.setattr(_weighted, "exact_ot_pairs", lambda *a, **k: calls.append(1) or real(*a, **k))
    res = _protocol.evaluate(
        X, names, y, ["wqtwd", "wctwd", "ultratree"], [params.eps], [params.scales], params, n_splits=2
    )
    assert len(calls) == 2 and all(r.acc.shape[0] == 2 for r in res)


def test_gmd_is_ot_with_gene_vectors_given_by_feature_embedding(tmp_path):
    """The paper's GMD row: ``classify --methods ot --feature-embedding GENE_VECTORS``. The ground
    cost is the Euclidean distance of the file's unit vectors (a linear program on it agrees), and
    the report says the ground space came from the embedding."""
    pytest.importorskip("ot")
    from hdtwd_cli.evaluate._competitors import feature_vectors

    X, y = _two_classes(tmp_path, 25)
    names = [f"GENE{j}" for j in range(X.shape[1])]
    rng = np.random.default_rng(9)
    vectors = rng.normal(size=(len(names), 5))
    (tmp_path / "gene2vec.txt").write_text(
        "".join(f"{n} " + " ".join(f"{v:.17g}" for v in row) + "\n" for n, row in zip(names, vectors))
    )
    csv = tmp_path / "x.csv"
    csv.write_text(",".join(names) + "\n" + "\n".join(",".join(str(int(v)) for v in r) for r in X) + "\n")
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    placed, V = feature_vectors(prepare(X, names, TreeParams(), embedding=(vectors, names)))
    assert placed == names
    np.testing.assert_allclose(V, unit, rtol=1e-12)
    w = np.log((1 + X.shape[0]) / (1 + np.count_nonzero(X, axis=0))) + 1  # the smoothed idf: the tree's weights
    H = ot_histograms(X[:3], w).toarray()
    C = _euclid(unit)
    D = ot_distances(ot_histograms(X[:3], w), ot_histograms(X[3:6], w), V)
    for i in range(3):
        for j in range(3):
            assert D[i, j] == pytest.approx(exact_ot(H[i], ot_histograms(X[3:6], w).toarray()[j], C), rel=1e-7)
    args = ["classify", csv, "--labels", tmp_path / "y.txt", "--methods", "ot", "--splits", "2", "-q"]
    run_hdtwd(*args, "--feature-embedding", tmp_path / "gene2vec.txt", "--json", tmp_path / "gmd.json")
    rep = json.loads((tmp_path / "gmd.json").read_text())["methods"]["ot"]
    assert rep["params"]["feature_space"] == "embedding" and rep["mean"] > 50


def test_flowtree_lies_between_exact_ot_and_the_quadtree_twd_and_moves_one_unit_exactly():
    """Flowtree's flow is a transport plan (so never below exact OT on the Euclidean cost) that is
    optimal on the quadtree, whose path metric dominates the Euclidean one (so never above the
    quadtree's TWD); mass moving between two leaves costs exactly its Euclidean length."""
    import scipy.sparse as sp

    from hdtwd_cli.evaluate._flowtree import flowtree_distances

    F = _vectors(7, m=12)
    names = [f"g{j}" for j in range(F.shape[0])]
    tree = quadtree(F, names, seed=2)
    rng = np.random.default_rng(8)
    H = rng.random((6, 12)) * (rng.random((6, 12)) < 0.6)
    H[:, 3] += 0.05
    H /= H.sum(axis=1, keepdims=True)
    D = flowtree_distances(sp.csr_matrix(H), sp.csr_matrix(H), tree.parent, F)
    T = tree_wasserstein(tree, H)
    E = _euclid(F)
    for i in range(6):
        assert D[i, i] == 0.0
        for j in range(6):
            if i != j:
                assert exact_ot(H[i], H[j], E) * (1 - 1e-9) <= D[i, j] <= T[i, j] * (1 + 1e-9)
    a, b = np.zeros((1, 12)), np.zeros((1, 12))
    a[0, [0, 7]], b[0, [0, 9]] = (0.75, 0.25), (0.75, 0.25)
    assert flowtree_distances(sp.csr_matrix(a), sp.csr_matrix(b), tree.parent, F)[0, 0] == pytest.approx(0.25 * E[7, 9])


def test_classify_runs_flowtree_on_the_rows_of_ot():
    X, y = _two_classes_arrays(30)
    from hdtwd_cli.evaluate._protocol import evaluate

    res = evaluate(X, [f"g{j}" for j in range(X.shape[1])], y, ["flowtree"], [1.0], [7], TreeParams(), n_splits=2)
    (r,) = res
    assert r.params["test_rows"] == r.params["test_rows_of"] == [18, 18] and r.acc.max() > 60


def test_ultrafit_tree_is_an_ultrametric_closer_than_single_linkage_and_deterministic():
    from scipy.cluster.hierarchy import cophenet, linkage
    from scipy.spatial.distance import pdist, squareform

    from hdtwd_cli.evaluate._ultrametric import ultrafit_tree

    F = _vectors(11, m=40, d=4)
    names = [f"g{j}" for j in range(F.shape[0])]
    tree = ultrafit_tree(F, names)
    tree.validate()
    U = path_metric(tree.parent, tree.length, tree.n_leaves)
    # the strong triangle inequality u(i, j) <= max(u(i, k), u(k, j)) for every triple
    assert np.all(U[:, :, None] <= np.maximum(U[:, None, :].transpose(0, 2, 1), U[None, :, :]) + 1e-12)
    d = pdist(F)
    loss = float(np.sum((squareform(U, checks=False) - d) ** 2))
    assert loss == pytest.approx(tree.metadata["loss"], rel=1e-9)
    assert loss < float(np.sum((cophenet(linkage(d, "single")) - d) ** 2))
    assert ultrafit_tree(F, names).length.tobytes() == tree.length.tobytes()
    H = np.random.default_rng(2).random((4, 40))
    H /= H.sum(axis=1, keepdims=True)
    D = tree_wasserstein(tree, H)
    assert D[0, 1] == pytest.approx(exact_ot(H[0], H[1], U), rel=1e-8, abs=1e-12)


def test_the_registry_describes_and_builds_every_method():
    """One registry: every method has a family the protocol scores, a description for the report, a
    shape whose builder exists where it builds trees; POT is asked for by the methods that solve
    exact programs; ``--methods``' help and validation list exactly the registry's names."""
    from hdtwd_cli.evaluate._competitors import BUILDERS
    from hdtwd_cli.evaluate._methods import FAMILIES, METHODS, methods_help

    for name, m in METHODS.items():
        assert m.name == name and m.family in FAMILIES and len(m.input) > 20, name
        assert (m.shape is not None) == (m.family in ("star", "tree", "fitted", "flow")), name
        assert m.shape is None or m.shape.builder in BUILDERS, name
        assert m.needs_pot == (m.family in ("fitted", "ot")), name
        assert m.default in ("always", "counts", "cooccur", "never"), name
    assert set(FAMILIES) == {m.family for m in METHODS.values()}
    listed = methods_help().split("subset of ", 1)[1].split(" ", 1)[0].split(",")
    assert listed == list(METHODS)
    with pytest.raises(ParameterError, match="choose from hdtwd, star, cosine"):
        chosen_methods(np.ones((4, 3)), ["nope"])


def test_every_family_is_a_route_and_a_new_family_is_one_entry_and_one_route(monkeypatch):
    """A family is an object of the registry: its route computes a method's distances and says what the
    report gives. A family added as one :class:`Family` entry (and one method of it) naming one new
    :class:`Route` runs through ``hd.classify`` with nothing else touched: its distances reach the kNN
    (here the L1 distance between the split's rows: the ``l1`` baseline's accuracies, bit for bit), its
    settings reach the report, and the report's ``params`` start with what it compares."""
    import sys
    import types

    import hdtwd_cli as hd
    from hdtwd_cli.evaluate import _families, _methods

    for name, family in _methods.FAMILIES.items():
        assert family.name == name and family.help and family.doc
        assert isinstance(_families.route_of(name), _families.Route), name

    class Toy(_families.Route):
        prepared = False

        def distances(self, spec, run, notes):
            notes.setdefault("rows", []).append(int(run.test.size))
            A, B = run.X[run.test], run.X[run.train]
            A, B = A / A.sum(axis=1, keepdims=True), B / B.sum(axis=1, keepdims=True)
            return np.abs(A[:, None, :] - B[None, :, :]).sum(axis=2), run.test

        def settings(self, spec, study, notes):
            return {"rows": notes.get("rows", [])}

    module = types.ModuleType("toy_family")
    module.Toy = Toy  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toy_family", module)
    monkeypatch.setitem(_methods.FAMILIES, "toy", _methods.Family("toy", "a toy", "a toy's doc", "toy_family:Toy"))
    monkeypatch.setitem(_methods.METHODS, "toy-l1", _methods.Method("toy-l1", "toy", "the rows, L1-normalised"))
    _families.route_of.cache_clear()
    try:
        rng = np.random.default_rng(3)
        X = rng.poisson(2.0, size=(30, 8)).astype(float) + 1.0
        y = np.repeat([0, 1, 2], 10)
        report = hd.classify(X, y, methods=["toy-l1", "l1"], k=[1, 3], splits=2)
        toy, l1 = report["methods"]["toy-l1"], report["methods"]["l1"]
        assert toy["per_k"] == pytest.approx(l1["per_k"], abs=1e-12) and toy["status"] == "ok"
        assert toy["params"] == {"on": "the rows, L1-normalised", "rows": [9, 9]}
        assert "toy-l1" in _methods.methods_table() and "a toy's doc" in _methods.methods_table()
    finally:
        _families.route_of.cache_clear()


def _is_ultrametric(tree) -> bool:
    C = path_metric(tree.parent, tree.length, tree.n_leaves)
    m = C.shape[0]
    worst = max(C[i, j] - max(C[i, k], C[k, j]) for i in range(m) for j in range(m) for k in range(m))
    return worst <= 1e-9 * C.max()


def test_ultratree_heights_reproduce_a_planted_ultrametric_on_new_pairs():
    """Costs that ARE a TWD on an ultrametric with UltraFit's topology and other heights: the fitted
    heights give that TWD on pairs never seen, and the tree stays an ultrametric."""
    import dataclasses

    from hdtwd_cli.evaluate._ultrametric import ultrafit_tree
    from hdtwd_cli.evaluate._weighted import fit_ultrametric_heights

    F = _vectors(5, m=12)
    names = [f"g{j}" for j in range(12)]
    shape = ultrafit_tree(F, names)
    rng = np.random.default_rng(7)
    H = np.zeros(shape.n_nodes)
    for c in range(12, shape.n_nodes):  # children first: each merge above its children by a random step
        kids = np.flatnonzero(shape.parent == c)
        H[c] = H[kids].max() + rng.uniform(0.05, 1.0)
    length = np.where(shape.parent >= 0, H[np.maximum(shape.parent, 0)] - H, 0.0)
    planted = dataclasses.replace(shape, length=length)
    Hs = rng.random((300, 12)) * (rng.random((300, 12)) < 0.6)
    Hs[:, 0] += 0.05
    Hs /= Hs.sum(axis=1, keepdims=True)
    A, B = Hs[:120], Hs[120:240]
    costs = np.array([tree_wasserstein(planted, np.stack([a, b]))[0, 1] for a, b in zip(A, B)])
    fitted = fit_ultrametric_heights(shape, A, B, costs)
    fitted.validate()
    assert _is_ultrametric(fitted) and fitted.metadata["loss"] < 1e-12 * costs @ costs
    np.testing.assert_allclose(tree_wasserstein(fitted, Hs[240:]), tree_wasserstein(planted, Hs[240:]), rtol=1e-6)


def test_ultratree_fits_exact_ot_better_than_ultrafit_and_is_deterministic():
    pytest.importorskip("ot")
    from hdtwd_cli.evaluate._weighted import fitted_trees

    rng = np.random.default_rng(6)
    X = rng.poisson(1.0, size=(60, 16)).astype(float)
    X[:30, :8] += rng.poisson(3.0, size=(30, 8))
    names = [f"g{j}" for j in range(16)]
    prepared = prepare(X, names, TreeParams())
    (tree,), used = fitted_trees("ultratree", X, names, prepared, TreeParams(), split=1, pairs=150)
    (again,), _ = fitted_trees("ultratree", X, names, prepared, TreeParams(), split=1, pairs=150)
    tree.validate()
    assert used == 150 and tree.length.tobytes() == again.length.tobytes()
    assert _is_ultrametric(tree)
    assert tree.metadata["loss"] < tree.metadata["loss_first"]  # UltraFit's heights at their best scale


@pytest.mark.parametrize("ridge", [0.01, 1.0, 10.0])
def test_the_pulled_fit_solves_its_least_squares_problem(ridge):
    """The dual Newton solve against SciPy's bounded least squares on the stacked system (an oracle)."""
    from scipy.optimize import lsq_linear

    from hdtwd_cli.evaluate._weighted import _ridge_nnls

    rng = np.random.default_rng(int(ridge * 100))
    F = rng.random((30, 80)) * (rng.random((30, 80)) < 0.3)
    prior = rng.random(80)
    y = F @ (prior * rng.uniform(-0.5, 2.0, 80)) + 0.1 * rng.normal(size=30)
    w = _ridge_nnls(F, y, prior, ridge)
    s = np.sqrt(ridge * np.sum(F * F) / 80)
    M = np.vstack([F, s * np.eye(80)])
    ref = lsq_linear(M, np.concatenate([y, s * prior]), bounds=(0, np.inf), method="bvls", tol=1e-14).x
    assert np.all(w >= 0) and (w == 0).any()  # some bounds are active
    np.testing.assert_allclose(w, ref, rtol=1e-7, atol=1e-9)


def test_ultratree_with_fewer_pairs_than_merges_stays_bounded_and_never_worse_than_its_start():
    """Heights enter the TWD with both signs: unpulled, 8 pairs for 29 merges have unbounded fits."""
    from hdtwd_cli.evaluate._ultrametric import ultrafit_tree
    from hdtwd_cli.evaluate._weighted import fit_ultrametric_heights

    F = _vectors(11, m=30)
    shape = ultrafit_tree(F, [f"g{j}" for j in range(30)])
    rng = np.random.default_rng(12)
    H = rng.random((16, 30)) * (rng.random((16, 30)) < 0.5)
    H[:, 0] += 0.05
    H /= H.sum(axis=1, keepdims=True)
    costs = rng.uniform(0.5, 1.5, 8)  # not a TWD on any tree: the fit is a compromise
    fitted = fit_ultrametric_heights(shape, H[:8], H[8:], costs)
    assert _is_ultrametric(fitted) and fitted.metadata["ridge"] != 0.0
    assert fitted.metadata["loss"] <= fitted.metadata["loss_first"]
    assert fitted.length.max() < 10 * costs.max()
    unpulled = fit_ultrametric_heights(shape, H[:8], H[8:], costs, ridges=(0.0,))  # the guard keeps 0 out
    assert unpulled.length.max() < 10 * costs.max()
    assert unpulled.metadata["round"] >= 1  # a pulled fit kept (rho = 0 blows up and falls back to the start)
