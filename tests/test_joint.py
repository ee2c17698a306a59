"""Joint hierarchies (docs/method.md section 13): exact against an independent oracle, deterministic,
the same answer by every route, the stopping rule and the informed distance's parts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

import hdtwd_cli as hd
from hdtwd_cli.evaluate._synthetic import planted_counts
from hdtwd_cli.joint import _informed
from hdtwd_cli.joint._alternate import JointParams, alternate_hierarchies, cluster_change
from hdtwd_cli.tree._haar import haar_basis
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree, cut, leaf_order, root_distances
from hdtwd_cli.twd._histograms import align_to_tree, normalize_rows


@pytest.fixture(scope="module")
def planted() -> tuple[np.ndarray, np.ndarray, list[str]]:
    X, y, _ = planted_counts(n_samples=90, n_features=24, n_classes=3, seed=3, depth=400.0, noise=0.5)
    return np.asarray(X, dtype=np.float64), np.asarray(y), [f"g{j}" for j in range(X.shape[1])]


@pytest.fixture(scope="module")
def result(planted):
    X, _, names = planted
    return hd.learn_joint(X, names)


def _leaf_metric(tree: Tree) -> np.ndarray:
    """Path lengths between leaves, from each leaf's ancestors (an independent route to the tree metric)."""
    up = root_distances(tree)
    anc = []
    for leaf in range(tree.n_leaves):
        chain, v = [], leaf
        while v >= 0:
            chain.append(v)
            v = int(tree.parent[v])
        anc.append(chain)
    L = tree.n_leaves
    M = np.zeros((L, L))
    for i in range(L):
        seen = set(anc[i])
        for j in range(L):
            lca = next(v for v in anc[j] if v in seen)
            M[i, j] = up[i] + up[j] - 2 * up[lca]
    return M


def _exact_ot(a: np.ndarray, b: np.ndarray, C: np.ndarray) -> float:
    from scipy.optimize import linprog

    L = a.size
    A = np.zeros((2 * L, L * L))
    for i in range(L):
        A[i, i * L : (i + 1) * L] = 1.0
        A[L + i, i::L] = 1.0
    res = linprog(C.ravel(), A_eq=A[:-1], b_eq=np.concatenate([a, b])[:-1], bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun)


def test_the_distances_are_exact_ot_of_the_filtered_histograms_on_the_final_tree(planted, result):
    """The joint distance is the optimal transport cost between the filtered histograms with the final
    features' tree's path metric as ground cost (linprog), not only the package's own TWD formula."""
    X, _, names = planted
    T = result.features_tree
    assert T.haar_keep is not None and 1 < int(T.haar_keep.sum()) < T.n_leaves
    H = np.asarray(normalize_rows(align_to_tree(X, names, T)))
    assert np.all(H >= 0) and np.allclose(H.sum(axis=1), 1.0)
    C = _leaf_metric(T)
    for i, j in [(0, 1), (0, 45), (10, 80), (33, 89)]:
        assert result.distances[i, j] == pytest.approx(_exact_ot(H[i], H[j], C), rel=1e-7, abs=1e-10)


def test_the_filter_changes_the_histograms_and_algorithm_1_has_none(planted, result):
    X, _, names = planted
    T = result.features_tree
    bare = dataclasses.replace(T, haar_keep=None)
    assert not np.allclose(hd.distances(X, bare, feature_names=names), result.distances)
    alt = hd.learn_joint(X, names, joint=JointParams(algorithm="alternating"))
    assert alt.features_tree.haar_keep is None
    assert alt.features_tree.metadata["joint_algorithm"] == "alternating"


def test_every_route_gives_the_same_bytes(planted, result, tmp_path):
    """learn_joint's distances: the TWD of the Haar-filtered histograms computed by hand (an independent
    route), and the same bytes from the tree written and read back."""
    X, _, names = planted
    T = result.features_tree
    bare = dataclasses.replace(T, haar_keep=None)
    H = np.asarray(normalize_rows(align_to_tree(X, names, bare)))
    B = haar_basis(T).matrix().toarray()[:, T.haar_keep]
    F = np.maximum(H @ B @ B.T, 0.0)
    F /= F.sum(axis=1, keepdims=True)
    Y = np.zeros((F.shape[0], T.parent.shape[0]))  # subtree masses scaled by the edge lengths, leaf by leaf up
    for leaf in range(T.n_leaves):
        v = leaf
        while T.parent[v] >= 0:
            Y[:, v] += F[:, leaf] * T.length[v]
            v = int(T.parent[v])
    by_hand = np.abs(Y[:, None, :] - Y[None, :, :]).sum(axis=2)
    np.testing.assert_allclose(result.distances, by_hand, rtol=1e-9, atol=1e-12)
    T.write(str(tmp_path / "t.h5"))
    back = Tree.read(str(tmp_path / "t.h5"))
    assert np.array_equal(back.haar_keep, T.haar_keep)
    assert hd.distances(X, back, feature_names=names).tobytes() == result.distances.tobytes()


def test_the_same_bytes_for_float32_sparse_and_any_thread_count(planted, result):
    import numba
    from threadpoolctl import threadpool_limits

    X, _, names = planted
    before = numba.get_num_threads()
    try:
        for data, threads in ((X.astype(np.float32), 2), (sp.csr_matrix(X), 1), (X, 1)):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            with threadpool_limits(limits=threads, user_api="blas"):
                got = hd.learn_joint(data, names)
            assert got.distances.tobytes() == result.distances.tobytes()
            assert got.samples_tree.parent.tobytes() == result.samples_tree.parent.tobytes()
    finally:
        numba.set_num_threads(before)


def test_the_samples_tree_recovers_the_planted_classes(planted, result):
    """Cut at the class count, the samples' tree gives the planted classes (adjusted Rand index)."""
    from scipy.special import comb

    _, y, _ = planted
    labels = result.sample_clusters(3)
    assert np.unique(labels).size >= 3

    def ari(a: np.ndarray, b: np.ndarray) -> float:
        _, ia = np.unique(a, return_inverse=True)
        _, ib = np.unique(b, return_inverse=True)
        table = np.zeros((ia.max() + 1, ib.max() + 1))
        np.add.at(table, (ia, ib), 1)
        s = comb(table, 2).sum()
        ra, rb, tot = comb(table.sum(1), 2).sum(), comb(table.sum(0), 2).sum(), comb(a.size, 2)
        exp = ra * rb / tot
        return float((s - exp) / (0.5 * (ra + rb) - exp))

    assert ari(labels, y) > 0.8
    order = result.sample_order()
    assert sorted(order.tolist()) == list(range(y.size))


def test_the_rounds_stop_by_the_rule_or_the_cap(planted):
    X, _, names = planted
    p = TreeParams()
    loose = alternate_hierarchies(
        X, names, [f"s{i}" for i in range(X.shape[0])], p, JointParams(tol=0.99, max_rounds=5)
    )
    assert loose.converged and len(loose.rounds) == 2  # round 1 has no previous distances: moved = 1
    capped = alternate_hierarchies(
        X, names, [f"s{i}" for i in range(X.shape[0])], p, JointParams(tol=0.0, max_rounds=2)
    )
    assert len(capped.rounds) <= 2
    assert capped.converged == (capped.rounds[-1].moved == 0.0)
    assert capped.rounds[0].moved == 1.0 and all(0.0 <= r.change <= 1.0 for r in capped.rounds)
    assert capped.features_tree.metadata["joint_rounds"] == len(capped.rounds)


def test_cluster_change_counts_new_clusters():
    # ((a,b),c) and ((a,c),b): of the new tree's clusters {a,c} is new, the root's is not
    t1 = Tree(parent=np.array([3, 3, 4, 4, -1]), length=np.ones(5), leaf_names=["a", "b", "c"])
    t2 = Tree(parent=np.array([3, 4, 3, 4, -1]), length=np.ones(5), leaf_names=["a", "b", "c"])
    assert cluster_change(t1, t1) == 0.0
    assert cluster_change(t1, t2) == 0.5


def test_leaf_order_and_cut_without_recursion():
    L = 3000  # a chain: internal node L + i joins leaf i + 1 to node L + i - 1
    parent = np.empty(2 * L - 1, dtype=np.int64)
    parent[0] = L
    parent[1:L] = np.arange(L, 2 * L - 1)
    parent[L : 2 * L - 2] = np.arange(L + 1, 2 * L - 1)
    parent[-1] = -1
    T = Tree(parent=parent, length=np.ones(2 * L - 1), leaf_names=[f"x{i}" for i in range(L)])
    assert sorted(leaf_order(T).tolist()) == list(range(L))
    labels = cut(T, 3)
    assert np.unique(labels).size == 3
    assert labels[L - 1] != labels[L - 2] != labels[0]  # the last two merges undone: two single leaves split off


def test_snowflake_is_the_integral_and_grows_like_a_square_root():
    from scipy.integrate import quad

    theta = _informed.SNOWFLAKE_THETA
    for d in (1e-10, 1e-4, 0.3, 2.0):
        expect = quad(lambda xi: 1.0 / (2.0 * (np.sqrt(xi) + theta)), 0.0, d, limit=200, points=[theta**2])[0]
        assert _informed.snowflake(np.array(d)) == pytest.approx(expect, rel=1e-6)
    assert _informed.snowflake(np.array(0.0)) == 0.0
    big = _informed.snowflake(np.array([1.0, 4.0]))
    assert big[1] / big[0] == pytest.approx(2.0, rel=1e-4)


def test_the_regulariser_enters_the_trees_distances(planted, result):
    X, _, names = planted
    T = result.features_tree
    H = np.asarray(normalize_rows(align_to_tree(X, names, T)))
    plain = _informed.informed_distances(H, T, 0.0)
    informed = _informed.informed_distances(H, T, 0.5)
    Z = _informed.snowflake(np.sqrt(((H[:, None, :] - H[None, :, :]) ** 2).sum(-1)))
    scale = 0.5 * np.median(plain) / np.median(Z)
    assert np.allclose(informed, plain + scale * Z, rtol=1e-9, atol=1e-12)


def test_many_items_take_the_landmark_route(planted, monkeypatch):
    """Above the exact operator's size the items' tree is built from the distances to drawn landmarks."""
    X, _, names = planted
    seen = []
    real = _informed.tree_from_distances

    def spy(D, names_, params, *, landmarks=None, reporter=None):
        seen.append(None if landmarks is None else D.shape)
        return real(D, names_, params, landmarks=landmarks, reporter=reporter)

    monkeypatch.setattr(_informed, "effective_landmarks", lambda requested, m: 20)
    monkeypatch.setattr(_informed, "tree_from_distances", spy)
    got = hd.learn_joint(X, names, joint=JointParams(max_rounds=1))
    assert (X.shape[0], 20) in seen and (X.shape[1], 20) in seen
    assert got.samples_tree.n_leaves == X.shape[0] and got.features_tree.n_leaves == X.shape[1]


def test_a_damaged_filter_is_refused(result, tmp_path):
    T = dataclasses.replace(result.features_tree, haar_keep=np.zeros(result.features_tree.n_leaves, dtype=bool))
    with pytest.raises(ValueError, match="constant"):
        T.validate()


def test_joint_parameters_are_checked():
    for bad in ({"share": 1.5}, {"gamma": -1.0}, {"max_rounds": 0}, {"algorithm": "other"}, {"tol": 1.0}):
        with pytest.raises(hd.ParameterError):
            JointParams(**bad)


def test_round_0_is_the_defaults_and_the_joint_tree_keeps_their_map(planted, result):
    """The joint features' tree compares the defaults' histograms: the same idf weights and the same
    denoiser as learn_tree's tree, feature by feature, whatever the leaf order."""
    X, _, names = planted
    T0 = hd.learn_tree(X, names)
    T = result.features_tree
    w0 = dict(zip(T0.leaf_names, T0.feature_weights))
    assert all(w0[n] == w for n, w in zip(T.leaf_names, T.feature_weights))
    assert (T0.denoiser is None) == (T.denoiser is None)
    if T0.denoiser is not None:
        at = {n: i for i, n in enumerate(T0.leaf_names)}
        order = np.array([at[n] for n in T.leaf_names])
        assert np.array_equal(T.denoiser.mean, T0.denoiser.mean[order])
        assert np.array_equal(T.denoiser.axes, T0.denoiser.axes[order])
    assert T.metadata["denoise_rule"] == T0.metadata["denoise_rule"]
