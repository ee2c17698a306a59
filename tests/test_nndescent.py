"""hdtwd's compiled NN-descent (hdtwd_cli.knn._nndescent): recall against brute force, and its
determinism contract: the same lists for a seed whatever the thread count, order of rows of work or call."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from hdtwd_cli.knn import _nndescent as _nndescent
from hdtwd_cli.knn._nndescent import byte_code, encode, encode_floats
from hdtwd_cli.twd._kernels import quantise


def nn_descent(Y, c, *args, **kw):
    """NN-descent of byte rows and their code (``Y = (Q8, code)``)."""
    return _nndescent.nn_descent(Y[0], Y[1], c, *args, **kw)


def spread(n, d, seed, scale=None):
    """Non-negative float rows around 12 centres (the shape of tree vectors: sparse-ish, non-negative),
    columns of unequal scales (as a tree's nodes are)."""
    rng = np.random.default_rng(seed)
    centres = rng.gamma(0.3, 1.0, size=(12, d))
    X = centres[rng.integers(0, 12, size=n)] + rng.gamma(0.5, 0.2, size=(n, d))
    return (X * (rng.gamma(0.7, 1.0, size=d) if scale is None else scale)).astype(np.float32)


def clustered(n=1500, d=70, seed=0):
    """Byte rows and their code of :func:`spread` rows."""
    return encode_floats(spread(n, d, seed))


def weights(code):
    """2^s of each byte position."""
    w = np.zeros(code.width, np.int64)
    for a, b, s in code.groups:
        w[a:b] = 1 << s
    return w


def l1(A):
    """SciPy's L1 distances between the integer-valued rows of ``A``: exact integers (every partial sum below
    2^53), whatever the order of summation."""
    A = np.asarray(A, np.float64)
    return cdist(A, A, "cityblock")


def brute(Y, c):
    Q, code = Y
    D = l1(Q.astype(np.float64) * weights(code))  # byte value x 2^shift: integers, so the weighted L1 is exact
    np.fill_diagonal(D, np.inf)
    return np.argsort(D, axis=1, kind="stable")[:, :c], D


def test_recall_against_brute_force_and_list_invariants():
    Y = clustered()
    c = 15
    got = nn_descent(Y, c, seed=1)
    exact, D = brute(Y, c)
    recall = np.mean([len(set(a) & set(b)) / c for a, b in zip(got, exact)])
    assert recall >= 0.97, recall
    n = Y[0].shape[0]
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
    Q, code = clustered(700, 30, seed=7)
    perm = np.empty((3, 700), dtype=np.int64)
    start = np.zeros((3, 700), dtype=np.uint8)
    _nndescent._rp_trees((Q >> (8 - code.shifts)).astype(np.uint8), 11, 32, perm, start)
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


def _l1_bytes_of_pairs(Q, G, a, b):
    from hdtwd_cli._runtime import jit as _jit

    _jit.load()
    import numba

    @numba.njit
    def pairs(Q, G, a, b):
        out = np.empty(a.size, np.int64)
        for t in range(a.size):
            out[t] = _nndescent.l1_bytes(Q, G, a[t], b[t])
        return out

    return pairs(Q, G, a, b)


def test_l1_bytes_is_the_exact_weighted_sum_of_every_group():
    """sum_g 2^s_g sum_{k in g} |Q_ak - Q_bk| exactly: every column once (32 per vpsadbw step), groups
    at any offset, rows at any stride, extreme bytes, 70,000 columns (past any 16-bit lane)."""
    rng = np.random.default_rng(4)
    for widths in ([32], [32, 64, 96], [320, 32, 32, 128], [70016]):
        edges = np.concatenate([[0], np.cumsum(widths)])
        G = np.array([(edges[g], edges[g + 1], s) for g, s in enumerate(rng.integers(0, 9, len(widths)))], np.int64)
        Q = rng.integers(0, 256, size=(9, edges[-1])).astype(np.uint8)
        Q[0] = 255
        Q[1] = 0
        a = np.array([0, 1, 2, 3, 8, 5])
        b = np.array([1, 0, 7, 3, 2, 6])
        w = np.zeros(edges[-1], np.int64)
        for g0, g1, s in G:
            w[g0:g1] = 1 << s
        want = (np.abs(Q[a].astype(np.int64) - Q[b]) * w).sum(1)
        assert np.array_equal(_l1_bytes_of_pairs(Q, G, a, b), want), widths
        assert want[0] == 255 * int(w.sum()) and want[3] == 0
    G = np.array([[32, 64, 3]], np.int64)  # a group that does not start at 0: only its own columns count
    Q = np.zeros((2, 96), np.uint8)
    Q[0, :32] = Q[0, 64:] = 200
    Q[0, 40] = 9
    assert _l1_bytes_of_pairs(Q, G, np.array([0]), np.array([1]))[0] == 9 * 8


def test_byte_code_keeps_eight_bits_of_every_column():
    """Each column's least shift s with (high - low) >> s <= 255, columns grouped by shift (stable) and
    padded to 32; bytes (q - low) >> s, clamped; the byte L1 within sum 2^s of the uint16 L1."""
    rng = np.random.default_rng(12)
    Y = spread(300, 90, 12, scale=np.geomspace(1e-4, 1.0, 90))  # columns over four orders of magnitude
    Y[:, 5] = 0.25  # a constant column: shift 0, byte 0
    Q8, code = encode_floats(Y)
    Q = quantise(Y)
    lo, hi = Q.min(0).astype(np.int64), Q.max(0).astype(np.int64)
    real = code.columns >= 0
    assert sorted(code.columns[real]) == list(range(90))  # every column once
    s = code.shifts.astype(np.int64)
    span = hi[code.columns[real]] - lo[code.columns[real]]
    assert np.all((span >> s[real]) <= 255) and np.all((s[real] == 0) | ((span >> np.maximum(s[real] - 1, 0)) > 255))
    assert len(np.unique(s[real])) >= 4  # the columns' scales differ: several groups
    for g0, g1, sh in code.groups:
        assert (g1 - g0) % 32 == 0 and np.all(s[g0:g1][code.columns[g0:g1] >= 0] == sh)
        cols = code.columns[g0:g1]
        assert np.all(np.diff(cols[cols >= 0]) > 0)  # stable: column order within a group
    assert np.array_equal(code.groups[1:, 0], code.groups[:-1, 1]) and code.groups[-1, 1] == code.width
    want = (Q[:, code.columns[real]].astype(np.int64) - code.lows[real]) >> s[real]
    assert np.array_equal(Q8[:, real], want) and np.all(Q8[:, ~real] == 0)
    assert Q8[:, np.flatnonzero(code.columns == 5)].max() == 0
    w = weights(code)
    a, b = rng.integers(0, 300, 400), rng.integers(0, 300, 400)
    a, b = a[a != b], b[a != b]
    d8 = (np.abs(Q8[a].astype(np.int64) - Q8[b]) * w).sum(1)
    d16 = np.abs(Q[a].astype(np.int64) - Q[b]).sum(1)
    assert np.all(np.abs(d8 - d16) <= w[real].sum())
    assert np.median(np.abs(d8 - d16) / d16) < 0.02  # far tighter than the bound in practice
    # values outside the code's range are clamped to its bytes, not wrapped
    narrow = byte_code(lo + 300, lo + 310, code.top)
    out = encode(Q, narrow)
    keep = narrow.columns >= 0
    want = np.clip(Q[:, narrow.columns[keep]].astype(np.int64) - narrow.lows[keep], 0, 255)
    assert np.array_equal(out[:, keep], want) and want.max() == 255 and want.min() == 0
    assert np.array_equal(encode(np.zeros((2, 90), np.uint16), code), np.zeros((2, code.width), np.uint8))


def test_one_byte_per_column_on_the_common_scale_would_lose_the_small_columns():
    """The reason for per-column shifts: the 14 nearest by the uint16 L1 are kept far better by the
    byte code than by the top byte of the common grid (q >> 8), which zeroes the small columns."""
    Y = spread(1200, 80, 3, scale=np.geomspace(1e-3, 1.0, 80))
    Q = quantise(Y)
    D16 = l1(Q)
    np.fill_diagonal(D16, np.inf)
    exact = np.argsort(D16, axis=1, kind="stable")[:, :14]
    byte_rows = encode_floats(Y)
    top_byte = (Q >> 8).astype(np.float64)
    Dt = l1(top_byte)
    np.fill_diagonal(Dt, np.inf)
    _, Db = brute(byte_rows, 1)

    def keep(D):
        return np.mean([len(set(e) & set(np.argsort(D[i], kind="stable")[:21])) / 14 for i, e in enumerate(exact)])

    assert keep(Db) > 0.99 and 10 * (1 - keep(Db)) < 1 - keep(Dt), (keep(Db), keep(Dt))  # 0.9996 and 0.971


def test_projection_is_the_exact_integer_product_across_spans():
    """A split's side: <h_i, h_a - h_b> exactly for the top bytes h = b >> (8 - s) (the top byte of
    q - low), past the int32 range of one span."""
    rng = np.random.default_rng(6)
    for d in (3, 1000, 40000):
        Q = rng.integers(0, 256, size=(3, d)).astype(np.uint8)
        shifts = rng.integers(0, 9, size=d).astype(np.uint8)
        H = np.empty(Q.shape, np.uint8)
        _nndescent._top_bytes(Q, shifts, H)
        assert np.array_equal(H, Q >> (8 - shifts)), d
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
    that is both a new and an old candidate gives its pairs twice, as the positions do); a pair
    already in a list gives the distance listed there, which is the exact one."""
    Q, code = Y = clustered(300, 20, seed=9)
    rng = np.random.default_rng(3)
    n, m, c = Q.shape[0], 11, 6
    NI = np.full((n, m), -1, np.int64)
    OI = np.full((n, m), -1, np.int64)
    for i in range(n):  # candidate lists with gaps, as _candidates leaves them; repeats across NI and OI
        NI[i, rng.choice(m, 9, replace=False)] = rng.choice(n, 9, replace=False)
        OI[i, rng.choice(m, 5, replace=False)] = np.append(NI[i, NI[i] >= 0][:1], rng.choice(n, 4, replace=False))
    _, full = brute(Y, 1)
    I = np.empty((n, c), np.int64)
    for a in range(n):  # lists of c of each row's 3c nearest (some candidates' pairs among them), ascending
        near = np.argsort(full[a], kind="stable")[: 3 * c]
        I[a] = np.sort(rng.choice(near[near != a], c, replace=False))
        I[a] = I[a][np.lexsort((I[a], full[a, I[a]]))]
    D = full[np.arange(n)[:, None], I].astype(np.int64)
    per = m * (m - 1) // 2 + m * m
    UA, UB, UD = (np.empty((n, per), np.int64) for _ in range(3))
    counts = np.empty(n, np.int64)
    _nndescent._join(Q, code.groups, I, D, NI, OI, 0, n, UA, UB, UD, counts)
    listed = rejected = offered = 0
    for i in range(0, n, 7):
        new = [a for a in NI[i] if a >= 0]
        allc = new + [b for b in OI[i] if b >= 0]
        want = []
        for x, a in enumerate(new):
            for b in allc[x + 1 :]:
                d = int(full[a, b]) if a != b else -1
                if a != b and (d <= D[a, -1] or d <= D[b, -1]):
                    want.append((a, b, d))
                    listed += int(b in I[a] or a in I[b])
                rejected += int(a != b and d > max(D[a, -1], D[b, -1]))
        got = list(zip(UA[i, : counts[i]], UB[i, : counts[i]], UD[i, : counts[i]]))
        assert sorted(got) == sorted(want), i
        offered += len(want)
    assert offered > 100 and listed > 20 and rejected > 100, (offered, listed, rejected)


def test_quantise_keeps_the_order_of_distances():
    """One scale for all columns: the quantised L1 is the float L1 / scale within d / 2 steps."""
    rng = np.random.default_rng(5)
    Y = (rng.gamma(0.3, 1.0, size=(50, 300)) * (rng.random(300) < 0.3)).astype(np.float32)
    Q = quantise(Y)
    assert Q.dtype == np.uint16 and Q.max() == 65535
    scale = Y.max() / 65535
    D = np.abs(Y[:, None].astype(np.float64) - Y[None]).sum(-1)
    Dq = l1(Q) * scale
    assert np.all(np.abs(D - Dq) <= 300 * scale)
    assert np.array_equal(quantise(np.zeros((3, 4), np.float32)), np.zeros((3, 4), np.uint16))


def test_bad_list_length():
    with pytest.raises(ValueError, match="between 1 and"):
        nn_descent(encode_floats(np.ones((5, 3), np.float32)), 5)
    Q8, code = clustered(40, 10)
    with pytest.raises(ValueError, match="bytes"):
        _nndescent.nn_descent(Q8[:, :32], code, 5)
    ragged = code._replace(groups=np.array([[0, code.width - 8, 0], [code.width - 8, code.width, 1]]))
    with pytest.raises(ValueError, match="multiples of 32"):  # a tail past a 32-byte step would be skipped
        _nndescent.nn_descent(Q8, ragged, 5)


def test_the_approximate_search_needs_no_pynndescent():
    """hdtwd's NN-descent is cached by numba once per machine; pynndescent (25-39 s of
    compilation in every process) is neither imported nor needed."""
    import subprocess
    import sys

    code = (
        "import sys, anndata, hdtwd_cli as hd\n"
        "ad = anndata.read_h5ad(sys.argv[1])\n"
        "g = hd.distance_vectors(ad.X, feature_names=list(ad.var_names)).knn(15, 'nndescent')\n"
        "assert g.indices.shape == (ad.n_obs, 15)\n"
        "print('pynndescent' in sys.modules)\n"
    )
    from conftest import SAMPLE

    out = subprocess.run(
        [sys.executable, "-c", code, str(SAMPLE / "cells.h5ad")], capture_output=True, text=True, check=True
    )
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
    Y = encode_floats(np.maximum(centre + noise * rng.standard_normal((n, d)), 0).astype(np.float32))
    exact, _ = brute(Y, 8)
    narrow = nn_descent(Y, 8, seed=0, max_candidates=8)
    wide = nn_descent(Y, 8, seed=0)
    r_narrow = np.mean([len(set(a) & set(b)) / 8 for a, b in zip(narrow, exact)])
    r_wide = np.mean([len(set(a) & set(b)) / 8 for a, b in zip(wide, exact)])
    assert r_wide > r_narrow + 0.02, (r_narrow, r_wide)


def test_column_extremes_fold_blocks_exactly():
    """One compiled pass per block: the running column minima and maxima equal NumPy's over all blocks,
    for float32 and float64 blocks, any column count (chunks of 256) and negative values."""
    rng = np.random.default_rng(13)
    for d in (1, 255, 256, 700):
        lows, highs = np.full(d, np.inf), np.full(d, -np.inf)
        blocks = [
            rng.standard_normal((m, d)).astype(t) for m, t in ((5, np.float64), (1, np.float32), (40, np.float64))
        ]
        for Y in blocks:
            _nndescent.column_extremes(Y, lows, highs)
        whole = np.vstack([b.astype(np.float64) for b in blocks])
        assert np.array_equal(lows, whole.min(0)) and np.array_equal(highs, whole.max(0)), d
