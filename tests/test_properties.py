"""Property tests (hypothesis): TWD is a metric, equals exact OT, and ignores what it should ignore."""

import numpy as np
import pytest
from conftest import exact_ot, path_metric
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from hdtwd_cli.evaluate._synthetic import random_binary_tree
from hdtwd_cli.tree._learn import learn_tree
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._distance import tree_wasserstein
from hdtwd_cli.twd._histograms import align_to_tree, normalize_rows

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def count_matrices(draw, min_features=3, max_features=8):
    m = draw(st.integers(min_features, max_features))
    n = draw(st.integers(3, 9))
    X = draw(arrays(np.int64, (n, m), elements=st.integers(0, 6))).astype(float)
    X[:, X.sum(axis=0) == 0] = 1.0  # every feature present
    X[X.sum(axis=1) == 0, 0] = 1.0  # every sample non-empty
    return X


@st.composite
def trees(draw, m):
    parent = random_binary_tree(m, draw(st.integers(0, 10_000)))
    length = np.r_[draw(arrays(np.float64, 2 * m - 2, elements=st.floats(0.0, 5.0))), 0.0]
    return Tree(parent=parent, length=length, leaf_names=[f"f{j}" for j in range(m)])


@SETTINGS
@given(data=st.data())
def test_twd_is_a_metric_and_equals_exact_ot(data):
    X = data.draw(count_matrices())
    tree = data.draw(trees(X.shape[1]))
    D = tree_wasserstein(tree, X)
    assert np.all(np.diag(D) == 0) and np.array_equal(D, D.T) and np.all(D >= 0)
    # triangle inequality on every triple
    assert np.all(D[:, None, :] <= D[:, :, None] + D[None, :, :] + 1e-12)
    C = path_metric(tree.parent, tree.length, tree.n_leaves)
    H = normalize_rows(X)
    i, j = data.draw(st.integers(0, X.shape[0] - 1)), data.draw(st.integers(0, X.shape[0] - 1))
    ot = exact_ot(H[i], H[j], C)
    # the LP oracle is exact to its optimality tolerance, 1e-10 of the largest cost (conftest.exact_ot);
    # path_metric keeps zero-length edges with a 1e-300 offset each (1e-290: far above their sum)
    assert abs(D[i, j] - ot) <= 1e-8 * ot + 1e-9 * C.max() + 1e-290


@SETTINGS
@given(data=st.data())
def test_twd_ignores_row_scale_and_column_order(data):
    X = data.draw(count_matrices())
    tree = data.draw(trees(X.shape[1]))
    names = list(tree.leaf_names)
    D = tree_wasserstein(tree, X)
    scale = data.draw(arrays(np.float64, X.shape[0], elements=st.floats(1e-3, 1e3)))
    assert np.allclose(tree_wasserstein(tree, X * scale[:, None]), D, rtol=1e-12, atol=1e-12)
    perm = data.draw(st.permutations(range(X.shape[1])))
    Xp = X[:, perm]
    aligned = align_to_tree(Xp, [names[j] for j in perm], tree)
    assert np.array_equal(tree_wasserstein(tree, aligned), D)


@pytest.mark.parametrize("seed", range(4))
def test_learned_tree_and_distances_ignore_sample_order_and_column_order(seed):
    rng = np.random.default_rng(seed)
    X = rng.poisson(2.0, size=(30, 10)).astype(float) + (rng.random((30, 10)) < 0.1)
    X[X.sum(axis=1) == 0, 0] = 1
    names = [f"g{j}" for j in range(10)]
    tree = learn_tree(X, names, TreeParams.from_preset("paper"))
    D = tree_wasserstein(tree, X)
    # samples in another order: integer counts keep every Gram entry exact, so the tree is identical
    order = rng.permutation(30)
    tree_o = learn_tree(X[order], names, TreeParams.from_preset("paper"))
    assert np.array_equal(tree_o.parent, tree.parent)
    assert np.allclose(tree_o.length, tree.length, rtol=1e-12)
    assert np.allclose(tree_wasserstein(tree_o, X[order]), D[np.ix_(order, order)], rtol=1e-12)
    # features in another order (names travel with them): same distances
    perm = rng.permutation(10)
    tree_p = learn_tree(X[:, perm], [names[j] for j in perm], TreeParams.from_preset("paper"))
    Dp = tree_wasserstein(tree_p, align_to_tree(X, names, tree_p))
    assert np.allclose(Dp, D, rtol=1e-9)
