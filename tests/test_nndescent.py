"""hdtwd's compiled NN-descent (hdtwd_cli._nndescent): recall against brute force, and its
determinism contract: the same lists for a seed whatever the thread count, order of rows of work or call."""

import numpy as np
import pytest

from hdtwd_cli import _nndescent
from hdtwd_cli._nndescent import nn_descent, quantise


def clustered(n=1500, d=70, seed=0):
    """Quantised non-negative rows around 12 centres (the shape of tree vectors: sparse-ish, non-negative)."""
    rng = np.random.default_rng(seed)
    centres = rng.gamma(0.3, 1.0, size=(12, d))
    X = centres[rng.integers(0, 12, size=n)] + rng.gamma(0.5, 0.2, size=(n, d))
    return quantise(X.astype(np.float32))


def brute(Y, c):
    Y64 = Y.astype(np.float64)  # integer values: exact sums
    D = np.empty((Y.shape[0], Y.shape[0]))
    for i0 in range(0, Y.shape[0], 16):  # 16 rows at a time: bounded memory
        D[i0:i0 + 16] = np.abs(Y64[i0:i0 + 16, None, :] - Y64[None, :, :]).sum(-1)
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
    assert np.all(np.diff(d, axis=1) >= 0)  # ascending (exact integer distances)


def test_random_lists_alone_are_poor_so_the_rounds_do_the_work():
    """With no round (n_iters=0) the lists are the random start: recall near c / n; the contract above fails."""
    Y = clustered()
    exact, _ = brute(Y, 15)
    start = nn_descent(Y, 15, seed=1, n_iters=0, n_trees=0)
    assert np.mean([len(set(a) & set(b)) / 15 for a, b in zip(start, exact)]) < 0.3
    forest = nn_descent(Y, 15, seed=1, n_iters=0, n_trees=8)  # leaves of random projection trees: a better start
    assert np.mean([len(set(a) & set(b)) / 15 for a, b in zip(forest, exact)]) > 0.5


def test_projection_trees_partition_the_rows_into_small_leaves():
    Y = clustered(700, 30, seed=7)
    perm = np.empty((3, 700), dtype=np.int64)
    start = np.zeros((3, 700), dtype=np.uint8)
    _nndescent._rp_trees((Y >> 8).astype(np.uint8), 11, 32, perm, start)
    for t in range(3):
        assert np.array_equal(np.sort(perm[t]), np.arange(700))  # every row in exactly one leaf
        s = np.flatnonzero(start[t])
        assert s[0] == 0 and np.diff(np.append(s, 700)).max() <= 32
    assert not np.array_equal(perm[0], perm[1])  # trees differ (hashed choices per tree)
    # equal rows cannot be split by a hyperplane: the node is halved, the leaves still bounded
    same = np.zeros((100, 5), np.uint8)
    perm, start = np.empty((1, 100), np.int64), np.zeros((1, 100), np.uint8)
    _nndescent._rp_trees(same, 0, 10, perm, start)
    assert np.diff(np.append(np.flatnonzero(start[0]), 100)).max() <= 10


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


def test_l1_is_the_exact_integer_sum_across_chunks(monkeypatch):
    """The uint16 L1 sums every column once, exactly: uint32 lanes per span of U32_SPAN columns, int64 across."""
    rng = np.random.default_rng(4)
    span = _nndescent.U32_SPAN
    for d in (1, 7, 64, 1000, span - 1, span, span + 7):
        Q = rng.integers(0, 65536, size=(2, d)).astype(np.uint16)
        assert _nndescent.l1_u16(Q, 0, 1) == int(np.abs(Q[0].astype(np.int64) - Q[1]).sum()), d
    for d in (40000, 70000):  # 65,535 x 70,000 > 2^32: one uint32 sum over all columns would wrap
        Q = np.zeros((2, d), np.uint16)
        Q[0] = 65535
        assert _nndescent.l1_u16(Q, 0, 1) == 65535 * d


def test_projection_is_the_exact_integer_product_across_spans():
    """A split's side: <h_i, h_a - h_b> exactly for the top bytes h = q >> 8, past the int32 range of one span."""
    rng = np.random.default_rng(6)
    for d in (3, 1000, 40000):
        Q = rng.integers(0, 65536, size=(3, d)).astype(np.uint16)
        H = np.empty(Q.shape, np.uint8)
        _nndescent._top_bytes(Q, H)
        assert np.array_equal(H, Q >> 8), d
        H64 = H.astype(np.int64)
        w = np.empty(d, np.int16)
        _nndescent._hyperplane(H, 1, 2, w)
        assert np.array_equal(w, H64[1] - H64[2]) and _nndescent._project(H, 0, w) == int(H64[0] @ (H64[1] - H64[2])), d
    H = np.zeros((3, 40000), np.uint8)
    H[0] = H[1] = 255  # 255 * 255 * 40,000 > 2^31
    w = np.empty(40000, np.int16)
    _nndescent._hyperplane(H, 1, 2, w)
    assert _nndescent._project(H, 0, w) == 255 * 255 * 40000


def test_joins_offer_every_pair_with_a_new_member_once():
    """_join's offers are exactly the pairs of each row's candidates with the
    first new, at their exact distance, where the distance would enter one of the two lists (a row
    that is both a new and an old candidate gives its pairs twice, as the positions do)."""
    Y = clustered(300, 20, seed=9)
    rng = np.random.default_rng(3)
    n, m, c = Y.shape[0], 11, 6
    NI = np.full((n, m), -1, np.int64)
    OI = np.full((n, m), -1, np.int64)
    for i in range(n):  # candidate lists with gaps, as _candidates leaves them; repeats across NI and OI
        NI[i, rng.choice(m, 9, replace=False)] = rng.choice(n, 9, replace=False)
        OI[i, rng.choice(m, 5, replace=False)] = np.append(NI[i, NI[i] >= 0][:1], rng.choice(n, 4, replace=False))
    D = np.sort(rng.integers(20000, 90000, size=(n, c)), axis=1).astype(np.int64)
    per = m * (m - 1) // 2 + m * m
    UA, UB, UD = (np.empty((n, per), np.int64) for _ in range(3))
    counts = np.empty(n, np.int64)
    _nndescent._join(Y, D, NI, OI, 0, n, UA, UB, UD, counts)
    Y64 = Y.astype(np.int64)
    for i in range(0, n, 7):
        new = [a for a in NI[i] if a >= 0]
        allc = new + [b for b in OI[i] if b >= 0]
        want = []
        for x, a in enumerate(new):
            for b in allc[x + 1:]:
                d = int(np.abs(Y64[a] - Y64[b]).sum())
                if a != b and (d <= D[a, -1] or d <= D[b, -1]):
                    want.append((a, b, d))
        got = list(zip(UA[i, :counts[i]], UB[i, :counts[i]], UD[i, :counts[i]]))
        assert sorted(got) == sorted(want) and len(want) > 20, i


def test_quantise_keeps_the_order_of_distances():
    """One scale for all columns: the quantised L1 is the float L1 / scale within d / 2 steps."""
    rng = np.random.default_rng(5)
    Y = (rng.gamma(0.3, 1.0, size=(50, 300)) * (rng.random(300) < 0.3)).astype(np.float32)
    Q = quantise(Y)
    assert Q.dtype == np.uint16 and Q.max() == 65535
    scale = Y.max() / 65535
    D = np.abs(Y[:, None].astype(np.float64) - Y[None]).sum(-1)
    Dq = np.abs(Q[:, None].astype(np.float64) - Q[None]).sum(-1) * scale
    assert np.all(np.abs(D - Dq) <= 300 * scale)
    assert np.array_equal(quantise(np.zeros((3, 4), np.float32)), np.zeros((3, 4), np.uint16))


def test_bad_list_length():
    with pytest.raises(ValueError, match="between 1 and"):
        nn_descent(np.zeros((5, 3), np.uint16), 5)


def test_the_approximate_search_needs_no_pynndescent():
    """Issue 28: hdtwd's NN-descent is cached by numba once per machine; pynndescent (25-39 s of
    compilation in every process) is neither imported nor needed."""
    import subprocess
    import sys

    code = ("import sys, anndata, hdtwd_cli as hd\n"
            "ad = anndata.read_h5ad(sys.argv[1])\n"
            "g = hd.distance_vectors(ad.X, feature_names=list(ad.var_names)).knn(15, 'nndescent')\n"
            "assert g.indices.shape == (ad.n_obs, 15)\n"
            "print('pynndescent' in sys.modules)\n")
    from conftest import SAMPLE

    out = subprocess.run([sys.executable, "-c", code, str(SAMPLE / "cells.h5ad")], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_join_width_and_memory_bounded_blocks(monkeypatch):
    """3c candidates joined per row (at most JOIN_CAP, at least c); a JOIN_BYTES budget of one row's
    offers makes blocks of one row: a valid search still, and deterministic."""
    assert _nndescent.join_width(10) == 30 and _nndescent.join_width(100) == 128
    assert _nndescent.join_width(200) == 200
    Y = clustered(600, 30, seed=8)
    exact, _ = brute(Y, 10)
    monkeypatch.setattr(_nndescent, "JOIN_BYTES", 1)
    got = nn_descent(Y, 10, seed=2)
    assert np.array_equal(got, nn_descent(Y, 10, seed=2))
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got, exact)]) >= 0.97


def test_wider_joins_find_more_of_the_neighbours_of_hubs():
    """Near-equidistant rows with hubs (low-noise rows near every other): joining only c candidates
    per row misses neighbours that 3c finds (the reason for JOIN_FACTOR)."""
    rng = np.random.default_rng(9)
    n, d = 3000, 200
    centre = rng.gamma(2.0, 1.0, size=d)
    noise = rng.uniform(0.2, 1.0, size=n)[:, None]  # per-row noise: low-noise rows are hubs
    Y = quantise(np.maximum(centre + noise * rng.standard_normal((n, d)), 0).astype(np.float32))
    exact, _ = brute(Y, 8)
    narrow = nn_descent(Y, 8, seed=0, max_candidates=8)
    wide = nn_descent(Y, 8, seed=0)
    r_narrow = np.mean([len(set(a) & set(b)) / 8 for a, b in zip(narrow, exact)])
    r_wide = np.mean([len(set(a) & set(b)) / 8 for a, b in zip(wide, exact)])
    assert r_wide > r_narrow + 0.02, (r_narrow, r_wide)
