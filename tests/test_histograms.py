"""Histograms on a tree (``twd/_histograms``): the one composition every route calls, checked against the
map computed by hand (names to leaves, denoiser, weights, normalisation, the Haar filter)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

import hdtwd_cli as hd
from hdtwd_cli.evaluate._synthetic import planted_counts
from hdtwd_cli.tree._denoise import denoise
from hdtwd_cli.tree._haar import haar_basis, kept_coefficients
from hdtwd_cli.twd._distance import tree_wasserstein
from hdtwd_cli.twd._histograms import haar_selection, tree_histograms


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, list[str]]:
    X, _, _ = planted_counts(n_samples=120, n_features=40, n_classes=3, seed=5)
    return np.asarray(X, dtype=np.float64), [f"g{j}" for j in range(X.shape[1])]


@pytest.mark.parametrize("denoised", [False, True])
def test_the_histograms_are_the_map_computed_by_hand(data, denoised):
    X, names = data
    tree = hd.learn_tree(X, names, params=hd.TreeParams(denoise=10 if denoised else 0))
    assert (tree.denoiser is not None) == denoised and tree.feature_weights is not None
    order = np.array([names.index(n) for n in tree.leaf_names])
    A = X[:, order]
    if denoised:
        A = denoise(A, tree.denoiser)
    A = A * tree.feature_weights[None, :]
    expected = A / A.sum(axis=1, keepdims=True)
    H = np.asarray(tree_histograms(X, names, tree))
    np.testing.assert_allclose(H, expected, rtol=1e-12, atol=1e-15)
    assert np.all(H >= 0) and np.allclose(H.sum(axis=1), 1.0)
    # the columns are matched by name: shuffled columns give the same bytes, sparse input the same values
    perm = np.random.default_rng(0).permutation(len(names))
    shuffled = tree_histograms(X[:, perm], [names[j] for j in perm], tree)
    assert np.asarray(shuffled).tobytes() == H.tobytes()
    S = tree_histograms(sp.csr_matrix(X), names, tree)
    np.testing.assert_array_equal(S.toarray() if sp.issparse(S) else S, H)


def test_unnormalised_values_give_the_same_distances_as_the_histograms(data):
    X, names = data
    tree = hd.learn_tree(X, names)
    raw = tree_histograms(X, names, tree, normalised=False)
    D = hd.distances(X, tree, feature_names=names)
    np.testing.assert_allclose(tree_wasserstein(tree, np.asarray(tree_histograms(X, names, tree))), D, atol=1e-12)
    rows = raw.rows() if hasattr(raw, "rows") else np.asarray(raw)
    assert not np.allclose(rows.sum(axis=1), 1.0)  # really before the normalisation


def test_haar_filter_and_its_selection(data):
    X, names = data
    tree = hd.learn_tree(X, names, params=hd.TreeParams(denoise=0))
    H = np.asarray(tree_histograms(X, names, tree))
    basis = haar_basis(tree)
    filtered, keep = haar_selection(tree, H, 0.5)
    np.testing.assert_array_equal(keep, kept_coefficients(basis.analysis(H), 0.5))
    assert 0 < keep.sum() < keep.size
    # by hand: project onto the kept vectors (columns of the basis matrix), clip, normalise
    B = basis.matrix().toarray()[:, keep]
    P = np.maximum(H @ B @ B.T, 0.0)
    np.testing.assert_allclose(filtered, P / P.sum(axis=1, keepdims=True), atol=1e-12)
    # the tree carrying the filter gives the filtered histograms; haar=False the unfiltered ones
    T = dataclasses.replace(tree, haar_keep=keep)
    assert np.asarray(tree_histograms(X, names, T)).tobytes() == filtered.tobytes()
    assert np.asarray(tree_histograms(X, names, T, haar=False)).tobytes() == H.tobytes()
    # every vector kept: the projection is the identity
    everything, all_kept = haar_selection(tree, H, 1.0)
    assert all_kept.all()
    np.testing.assert_allclose(everything, H, atol=1e-12)


def test_unknown_features_with_mass_are_refused_or_dropped(data):
    X, names = data
    tree = hd.learn_tree(X, names)
    extra = np.hstack([X, np.ones((X.shape[0], 1))])
    with pytest.raises(hd.HdtwdError, match="not leaves"):
        tree_histograms(extra, [*names, "new"], tree)
    dropped = tree_histograms(extra, [*names, "new"], tree, drop_unknown=True)
    assert np.asarray(dropped).tobytes() == np.asarray(tree_histograms(X, names, tree)).tobytes()
