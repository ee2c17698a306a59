"""hdtwd's compiled NN-descent (hdtwd_cli._nndescent): recall against brute force, and its
determinism contract: the same lists for a seed whatever the thread count, order of rows of work or call."""

import numpy as np
import pytest

from hdtwd_cli import _nndescent
from hdtwd_cli._nndescent import LANES, nn_descent


def clustered(n=1500, d=70, seed=0):
    """Non-negative rows around 12 centres (the shape of tree vectors: sparse-ish, non-negative)."""
    rng = np.random.default_rng(seed)
    centres = rng.gamma(0.3, 1.0, size=(12, d))
    X = centres[rng.integers(0, 12, size=n)] + rng.gamma(0.5, 0.2, size=(n, d))
    return X.astype(np.float32)


def brute(Y, c):
    Y64 = Y.astype(np.float64)
    D = np.abs(Y64[:, None, :] - Y64[None, :, :]).sum(-1)
    np.fill_diagonal(D, np.inf)
    return np.argsort(D, axis=1, kind="stable")[:, :c], D


def test_recall_against_brute_force_and_list_invariants():
    Y = clustered()
    c = 15
    got = nn_descent(Y, c, seed=1)
    exact, D = brute(Y, c)
    recall = np.mean([len(set(a) & set(b)) / c for a, b in zip(got, exact)])
    assert recall >= 0.97, recall
    n = Y.shape[0]
    assert got.shape == (n, c) and got.min() >= 0 and got.max() < n
    assert not np.any(got == np.arange(n)[:, None])  # never the row itself
    assert all(len(set(r)) == c for r in got)  # no neighbour twice
    d = np.take_along_axis(D, got, axis=1)
    assert np.all(np.diff(d, axis=1) >= -1e-4 * d[:, 1:])  # ascending (float32 distances)


def test_random_lists_alone_are_poor_so_the_rounds_do_the_work():
    """With no round (n_iters=0) the lists are the random start: recall near c / n; the contract above fails."""
    Y = clustered()
    exact, _ = brute(Y, 15)
    start = nn_descent(Y, 15, seed=1, n_iters=0)
    assert np.mean([len(set(a) & set(b)) / 15 for a, b in zip(start, exact)]) < 0.3


def test_same_lists_at_any_thread_count_and_for_every_call():
    numba = pytest.importorskip("numba")
    Y = clustered(900, 40, seed=2)
    ref = nn_descent(Y, 10, seed=5)
    old = numba.get_num_threads()
    try:
        for t in sorted({1, 2, max(1, old)}):
            numba.set_num_threads(t)
            assert np.array_equal(nn_descent(Y, 10, seed=5), ref), t
    finally:
        numba.set_num_threads(old)
    assert not np.array_equal(nn_descent(Y, 10, seed=6), ref)  # the seed is used


def test_blocks_smaller_than_the_rows_give_a_valid_search(monkeypatch):
    """Joins run in blocks of BLOCK rows against a snapshot of the lists: with many blocks the recall holds."""
    monkeypatch.setattr(_nndescent, "BLOCK", 64)
    Y = clustered(800, 30, seed=3)
    exact, _ = brute(Y, 10)
    got = nn_descent(Y, 10, seed=0)
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got, exact)]) >= 0.97


def test_l1_lanes_sum_every_column():
    """The lane-wise float32 L1 adds every column once (widths around multiples of LANES)."""
    rng = np.random.default_rng(4)
    acc = np.empty(LANES, dtype=np.float32)
    for d in (1, LANES - 1, LANES, LANES + 1, 3 * LANES + 7):
        Y = rng.random((2, d)).astype(np.float32)
        want = np.abs(Y[0].astype(np.float64) - Y[1]).sum()
        assert abs(_nndescent.l1_f32(Y, 0, 1, acc) - want) <= 1e-5 * want, d


def test_bad_list_length():
    with pytest.raises(ValueError, match="between 1 and"):
        nn_descent(np.zeros((5, 3), np.float32), 5)
