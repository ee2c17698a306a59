"""The exact search pruned by lower bounds: the all-pairs search's neighbours, bit for bit.

Oracles: the blocked all-pairs search (every pair measured) on the same tree vectors; the bound
against every pair's exact TWD.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import hdtwd_cli as hd
from hdtwd_cli.knn import _bounded, _choose
from hdtwd_cli.knn._bounded import bounded_neighbors, margin, sketch_groups
from hdtwd_cli.twd._distance import nearest_neighbors
from hdtwd_cli.twd._kernels import l1_distances, norms


@pytest.fixture(autouse=True)
def _always_prune(monkeypatch):
    """These small sets' bounds keep more pairs than pay on a real search: prune anyway (the result is
    the same either way; :func:`test_loose_bounds_measure_every_pair` checks the other way)."""
    monkeypatch.setattr(_bounded, "PAYS_BELOW", 1.0)


def _vectors(dtype: str = "float64", denoise: int = 0):
    """Clustered counts with 30 copies of one row (ties at distance 0 across the k-th place)."""
    rng = np.random.default_rng(3)
    n, m = 700, 120
    centres = rng.gamma(0.4, size=(6, m))
    X = rng.poisson(centres[rng.integers(0, 6, n)] * 4).astype(float)
    X[:30] = X[30]
    X[X.sum(axis=1) == 0, 0] = 1.0
    names = [f"g{j}" for j in range(m)]
    params = hd.TreeParams(denoise=denoise)
    return hd.distance_vectors(sp.csr_matrix(X), feature_names=names, params=params, dtype=dtype).base


@pytest.mark.parametrize("k", [1, 6, 15])
def test_the_bounded_search_is_the_all_pairs_search(k):
    tv = _vectors()
    want = nearest_neighbors(tv, k)
    got = bounded_neighbors(tv, k)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])


def test_short_kept_lists_and_loose_bounds_read_every_bound_again():
    """Four groups and a kept list of k: most samples' lists end below their k-th distance."""
    tv = _vectors()
    notes: list[str] = []
    got = bounded_neighbors(tv, 5, groups=4, kept=5, note=notes.append)
    want = nearest_neighbors(tv, 5)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    reread = int(notes[0].split(" sample(s) reading")[0].rsplit(" ", 1)[1])
    assert reread > 0


def test_streamed_vectors_float32_and_denoised_rows_give_the_same_bits(monkeypatch):
    """Vectors computed by the re-ranking's cache (nothing held) and float32 vectors: the all-pairs result."""
    monkeypatch.setattr(_bounded, "HOLD_FRACTION", 0.0)
    for tv in (_vectors("float32"), _vectors(denoise=5)):
        want = nearest_neighbors(tv, 7)
        got = bounded_neighbors(tv, 7)
        assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])


def test_grouped_sums_bound_every_pair_from_below():
    tv = _vectors()
    Y = tv.rows()
    labels = sketch_groups(Y[::7], 16)
    G = sp.csr_matrix((np.ones(labels.size), (labels, np.arange(labels.size))))
    P = np.asarray((G @ Y.T).T)
    exact = l1_distances(Y)
    bound = l1_distances(P)
    s = norms(Y)
    assert (bound <= exact + margin(bound, s[:, None], float(s.max()))).all()
    assert (bound < exact).any() and np.median(bound / np.where(exact > 0, exact, 1)) > 0.2  # a bound, not zero


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_group_sums_are_the_sparse_products_bits(dtype):
    """The row-wise kernel adds each group's columns in the order the sparse product ``G @ Y.T`` does."""
    rng = np.random.default_rng(5)
    Y = (rng.gamma(0.3, size=(37, 501)) * rng.integers(0, 2, size=(37, 501))).astype(dtype)
    Y[3] = -0.0
    labels = rng.integers(0, 11, 501)
    labels[labels == 4] = 5  # a group with no column
    G = sp.csr_matrix((np.ones(labels.size), (labels, np.arange(labels.size))), shape=(11, 501))
    want = np.asarray((G @ Y.astype(np.float64).T).T)
    got = _bounded.group_sums(Y, labels, 11)
    assert got.dtype == np.float64 and got.tobytes() == np.ascontiguousarray(want).tobytes()
    assert (
        _bounded.group_sums(Y[:, ::-1], labels, 11).tobytes()
        == np.ascontiguousarray((G @ Y[:, ::-1].astype(np.float64).T).T).tobytes()
    )


def test_the_exact_method_prunes_above_its_threshold(monkeypatch):
    """The one entry (``search_neighbors``) sends the exact search to the bounded one above
    ``BOUNDED_ABOVE`` samples of ``BOUNDED_MIN_COLUMNS`` columns: the same graph as below them."""
    tv = _vectors()
    want = _choose.search_neighbors(tv, 9, "exact")
    called: list[int] = []
    real = _choose.bounded_neighbors
    monkeypatch.setattr(_choose, "bounded_neighbors", lambda *a, **kw: called.append(1) or real(*a, **kw))
    monkeypatch.setattr(_choose, "BOUNDED_ABOVE", 100)
    monkeypatch.setattr(_choose, "BOUNDED_MIN_COLUMNS", 10)
    got = _choose.search_neighbors(tv, 9, "exact")
    assert called and np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])


def test_loose_bounds_measure_every_pair(monkeypatch):
    """Where the sampled rows say the bounds would keep too many pairs, every pair is measured (and said)."""
    monkeypatch.setattr(_bounded, "PAYS_BELOW", 0.0)
    tv = _vectors()
    notes: list[str] = []
    got = bounded_neighbors(tv, 4, note=notes.append)
    want = nearest_neighbors(tv, 4)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    assert notes and notes[0].startswith("exact search of all pairs")
