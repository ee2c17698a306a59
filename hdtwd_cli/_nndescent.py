r"""Compiled NN-descent under L1 (Dong, Moses & Li 2011), deterministic at any thread count.

The candidate generator of the approximate neighbour search (:mod:`hdtwd_cli.search`): each row of
a dense matrix gets ``c`` approximate nearest other rows under :math:`\|q_a - q_b\|_1`, where
:math:`q = \mathrm{rint}(y \cdot 65535 / \max y)` are the tree vectors quantised to uint16
(:func:`quantise`): exact integer sums, half the bytes of float32. NN-descent keeps, for every row, a list of the ``c`` nearest rows found so
far and improves all lists by the *local join*: two rows that appear in a common row's list (as its
neighbour or reverse neighbour) are compared, and each is offered to the other's list ("a
neighbour of a neighbour is likely a neighbour"). Only pairs with at least one *new* member (one
that entered a list since the last round) are compared, at most ``max_candidates`` new and old
candidates per row (sampled by a seeded hash; :data:`JOIN_FACTOR` x ``c`` by default: a row that is
the neighbour of many, a hub, gets its reverse neighbours compared in a few rounds rather than
never), and the rounds stop when fewer than
``delta * n * c`` list entries changed in one.

Determinism, whatever the thread count or CPU
    - every random choice is a hash (splitmix64) of ``(seed, round, row, row)``, not a stream;
    - a list keeps the ``c`` smallest offers by (distance, index), duplicates dropped, so its
      content after a batch of offers does not depend on their order;
    - the rows' joins run in fixed blocks of at most :data:`BLOCK` rows (fewer where their offers
      would pass :data:`JOIN_BYTES`; a function of ``max_candidates`` alone) against the lists as they were at
      the block's start; the offers are then applied by threads that each own the lists of the
      rows ``≡ s (mod shards)``: no two threads write one list, and the order of offers within
      a list does not matter (above);
    - the convergence count is the number of list entries that were not there at the round's
      start (order-independent too);
    - distances are integer sums (:func:`l1_u16`): exact, so any vectorisation on any CPU gives
      the same value (integer addition is associative; LLVM vectorises it without fast-math).

The result is the same bytes in one process with 1 or 16 threads and in a Dask task (issue 28).
Unlike pynndescent's, whose distance is a first-class function argument that numba does not keep
in its on-disk cache (25-39 s of compilation in every process), these kernels are cached once per
machine like hdtwd's others.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit, prange

__all__ = ["nn_descent", "quantise", "l1_u16", "BLOCK", "N_TREES", "JOIN_FACTOR", "join_width", "first_width"]

#: Largest quantised value: the search vectors are ``rint(y * SCALE_MAX / max(y))`` as uint16.
SCALE_MAX = 65535
#: Random projection trees that start the lists. On 100,000 UMI-like cells of 10 types (10,000 cells
#: per type, as a partition of 10^6 cells holds; 21 candidates) 8 trees took recall@14 from 0.770
#: to 0.805 and the search from 51.5 to 44.6 s (fewer rounds to converge; benchmarks/RESULTS.md, issue 28).
N_TREES = 8
#: Rows whose local joins are computed against the same snapshot of the lists, at most.
BLOCK = 4096
#: Bytes of pending offers of one block of joins (the block has fewer rows where they would pass it).
JOIN_BYTES = 1 << 28
#: New (and old) candidates joined per row and round, as a multiple of the list length ``c`` (at most
#: :data:`JOIN_CAP`, at least ``c``). Recall is bought here more cheaply than with longer lists: on
#: 100,002 UMI-like cells of 10 types (10,000 near-equidistant multinomial draws each, a partition
#: of 10^6 cells), recall@14 of 1,000 sampled rows (candidates re-ranked exactly) was 0.921 with
#: 32 candidates joined per row (pynndescent's rule, ``min(60, c)``), 0.963 with 64 and 0.977 with
#: 96, at 69 / 108 / 117 s, against 0.978 for 40-long lists joined 64 at a time (118 s); 24 / 28-long
#: lists joined 96 at a time: 0.953 / 0.968 (benchmarks/RESULTS.md, issue 28). Rows with few
#: reverse neighbours have fewer candidates than the cap, so the cost grows far less than its square.
JOIN_FACTOR = 3
JOIN_CAP = 128
#: ... in the first round, where every entry is new and the lists are projection-tree leaves and
#: random rows: on the 100,002 cells above (lists of 32) joining 48 rather than 96 per row in round 1
#: took the pairs compared in all rounds from 4,458 to 4,236 per row (-5 %), recall@14 0.9761 ->
#: 0.9775 (round 1 gains less, round 2 makes it up); 32 in round 1: 4,266 pairs, 0.9771, one more round
#: (benchmarks/RESULTS.md, issue 28).
FIRST_JOIN_FACTOR = 1.5

_U = np.uint64


@njit(cache=True, nogil=True)
def _mix(x):  # pragma: no cover - compiled
    """splitmix64's finaliser: a well-mixed uint64 of a uint64."""
    x = (x ^ (x >> _U(30))) * _U(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U(27))) * _U(0x94D049BB133111EB)
    return x ^ (x >> _U(31))


@njit(cache=True, nogil=True)
def _key(seed, step, a, b):  # pragma: no cover - compiled
    """A hash of ``(seed, step, a, b)``."""
    h = _mix(_U(seed) + _U(0x9E3779B97F4A7C15) * _U(step + 1))
    h = _mix(h ^ _U(a))
    return _mix(h ^ (_U(b) * _U(0xD1B54A32D192ED03)))


#: Columns summed in uint32 lanes before the int64 total: ``U32_SPAN * 65535 < 2**32``, so no lane
#: can wrap and the sum is exact.
U32_SPAN = 65536


@njit(cache=True, nogil=True)
def l1_u16(Q, a, b):  # pragma: no cover - compiled
    r""":math:`\sum_k |Q_{ak} - Q_{bk}|` of uint16 rows, exactly.

    Summed in uint32 over spans of :data:`U32_SPAN` columns (no lane can wrap), then in int64. The
    explicit ``uint32`` truncation keeps LLVM's vector lanes 32-bit (numba promotes integer sums to
    int64, and 64-bit lanes cost a widening per 8 columns): 170 vs 299 ns for 3,998 columns in cache
    on AVX-512 (benchmarks/RESULTS.md, issue 28), the same integer either way.
    """
    x = Q[a]
    y = Q[b]
    total = 0
    for k0 in range(0, x.size, U32_SPAN):
        xs = x[k0:k0 + U32_SPAN]  # slices, not index bounds: LLVM vectorises only this form (22x)
        ys = y[k0:k0 + U32_SPAN]
        s = np.uint32(0)
        for k in range(xs.size):
            s = np.uint32(s + np.uint32(abs(np.int32(xs[k]) - np.int32(ys[k]))))
        total += np.int64(s)
    return total


@njit(cache=True, nogil=True)
def _offer(I, D, B, F, i, d, j, step):  # pragma: no cover - compiled
    """Offer ``j`` at distance ``d`` to row ``i``'s list (ascending by (distance, index)); 1 if taken.

    A taken entry is marked new (``F = 1``) and born in round ``step`` (``B``)."""
    c = I.shape[1]
    last = c - 1
    if d > D[i, last] or (d == D[i, last] and j >= I[i, last]):
        return 0
    for t in range(c):
        if I[i, t] == j:
            return 0
    p = last
    while p > 0 and (D[i, p - 1] > d or (D[i, p - 1] == d and I[i, p - 1] > j)):
        I[i, p] = I[i, p - 1]
        D[i, p] = D[i, p - 1]
        B[i, p] = B[i, p - 1]
        F[i, p] = F[i, p - 1]
        p -= 1
    I[i, p] = j
    D[i, p] = d
    B[i, p] = step
    F[i, p] = 1
    return 1


@njit(parallel=True, cache=True, nogil=True)
def _init_random(Q, I, D, B, F, seed):  # pragma: no cover - compiled
    """Lists not yet full get random other rows (hashes of (seed, row, draw))."""
    n, c = I.shape
    for i in prange(n):
        if I[i, c - 1] >= 0:
            continue
        t = 0
        while t < 4 * c:
            j = np.int64(_key(seed, 0, i, t) % _U(n - 1))
            if j >= i:
                j += 1
            _offer(I, D, B, F, i, l1_u16(Q, i, j), j, 0)
            t += 1


@njit(parallel=True, cache=True, nogil=True)
def _top_bytes(Q, out):  # pragma: no cover - compiled
    """``out = Q >> 8`` as uint8: the rows the projection trees split (half the bytes to stream)."""
    for i in prange(Q.shape[0]):
        for k in range(Q.shape[1]):
            out[i, k] = np.uint8(Q[i, k] >> 8)


@njit(cache=True, nogil=True)
def _hyperplane(H, a, b, w):  # pragma: no cover - compiled
    """``w = h_a - h_b``: the normal of a split, on the top bytes ``H = Q >> 8`` (:func:`_top_bytes`)."""
    x = H[a]
    y = H[b]
    for k in range(w.size):
        w[k] = np.int16(np.int16(x[k]) - np.int16(y[k]))


@njit(cache=True, nogil=True)
def _project(H, i, w):  # pragma: no cover - compiled
    """``<h_i, w>`` for a split's normal ``w`` (:func:`_hyperplane`): a split's side.

    Products are at most ``255 * 255`` in magnitude, so int32 sums over spans of ``U32_SPAN // 2``
    columns cannot overflow; int64 across spans (32-bit lanes, as in :func:`l1_u16`)."""
    x = H[i]
    total = 0
    for k0 in range(0, x.size, U32_SPAN // 2):
        xs = x[k0:k0 + U32_SPAN // 2]
        ws = w[k0:k0 + U32_SPAN // 2]
        s = np.int32(0)
        for k in range(xs.size):
            s = np.int32(s + np.int32(np.int32(xs[k]) * np.int32(ws[k])))
        total += np.int64(s)
    return total


@njit(parallel=True, cache=True, nogil=True)
def _rp_trees(H, seed, leaf, perm, start):  # pragma: no cover - compiled
    """Random projection trees (one per row of ``perm``) of the top bytes ``H`` of the rows
    (:func:`_top_bytes`; streaming uint8 rather than uint16 rows took 8 trees of 100,002 rows from
    4.6-6.2 to 3.2-4.2 s natively and from 6.1-6.8 to 4.2-5.0 s on the AVX2 kernels, the same trees,
    benchmarks/RESULTS.md, issue 28): each node's rows are split by the hyperplane
    half-way between two of them chosen by hash, until at most ``leaf`` remain; ``perm[t]`` lists the
    rows leaf after leaf, ``start[t, p] = 1`` where a leaf begins. A split that leaves one side empty
    (equal rows) halves the node instead."""
    T, n = perm.shape
    for t in prange(T):
        order = perm[t]
        for p in range(n):
            order[p] = p
        side = np.empty(n, dtype=np.int64)
        w = np.empty(H.shape[1], dtype=np.int16)
        buf = np.empty(n, dtype=np.int64)
        stack = np.empty(2 * n + 2, dtype=np.int64)
        top = 0
        stack[0] = 0
        stack[1] = n
        top = 2
        while top > 0:
            hi = stack[top - 1]
            lo = stack[top - 2]
            top -= 2
            size = hi - lo
            if size <= leaf:
                start[t, lo] = 1
                continue
            h = _key(seed, t + 1, lo, hi)
            ia = np.int64(h % _U(size))
            ib = np.int64(_mix(h) % _U(size - 1))
            if ib >= ia:
                ib += 1
            a = order[lo + ia]
            b = order[lo + ib]
            _hyperplane(H, a, b, w)
            mid = _project(H, a, w) + _project(H, b, w)
            left = 0
            for p in range(lo, hi):
                side[p] = 1 if 2 * _project(H, order[p], w) > mid else 0
                left += side[p]
            if left == 0 or left == size:
                m = lo + size // 2
            else:
                q = lo
                for p in range(lo, hi):
                    if side[p] == 1:
                        buf[q] = order[p]
                        q += 1
                for p in range(lo, hi):
                    if side[p] == 0:
                        buf[q] = order[p]
                        q += 1
                for p in range(lo, hi):
                    order[p] = buf[p]
                m = lo + left
            stack[top] = lo
            stack[top + 1] = m
            stack[top + 2] = m
            stack[top + 3] = hi
            top += 4


@njit(parallel=True, cache=True, nogil=True)
def _init_leaves(Q, I, D, B, F, perm, starts, ends):  # pragma: no cover - compiled
    """Offer every row its leaf-mates of one tree (leaves partition the rows: one thread per list)."""
    for L in prange(starts.size):
        for p in range(starts[L], ends[L]):
            i = perm[p]
            for r in range(starts[L], ends[L]):
                j = perm[r]
                if j != i:
                    _offer(I, D, B, F, i, l1_u16(Q, i, j), j, 0)


@njit(cache=True, nogil=True)
def _cand_offer(CI, CP, i, p, j):  # pragma: no cover - compiled
    """Keep the candidates of row ``i`` with the smallest (priority, index), at most ``CI.shape[1]``."""
    m = CI.shape[1]
    worst = 0
    for t in range(m):
        if CI[i, t] == j:
            return
        if CI[i, t] < 0:
            CI[i, t] = j
            CP[i, t] = p
            return
        if CP[i, t] > CP[i, worst] or (CP[i, t] == CP[i, worst] and CI[i, t] > CI[i, worst]):
            worst = t
    if p < CP[i, worst] or (p == CP[i, worst] and j < CI[i, worst]):
        CI[i, worst] = j
        CP[i, worst] = p


@njit(parallel=True, cache=True, nogil=True)
def _candidates(I, F, seed, step, NI, NP, OI, OP, shards):  # pragma: no cover - compiled
    """New and old candidates of every row: its list's entries and the rows whose lists hold it.

    An entry is new (``F``) until it has been joined as a new candidate once. Each row keeps
    the candidates with the smallest hash of (seed, round, pair); thread ``s`` fills the rows
    ``≡ s (mod shards)``, reading every list.
    """
    n, c = I.shape
    for s in prange(shards):
        for i in range(n):
            for t in range(c):
                j = I[i, t]
                if j < 0:
                    continue
                p = _key(seed, step, min(i, j), max(i, j))
                new = F[i, t] == 1
                if i % shards == s:
                    if new:
                        _cand_offer(NI, NP, i, p, j)
                    else:
                        _cand_offer(OI, OP, i, p, j)
                if j % shards == s:
                    if new:
                        _cand_offer(NI, NP, j, p, i)
                    else:
                        _cand_offer(OI, OP, j, p, i)


@njit(parallel=True, cache=True, nogil=True)
def _mark_old(I, F, NI):  # pragma: no cover - compiled
    """Entries sampled as new candidates of their row are old from now on."""
    n, c = I.shape
    m = NI.shape[1]
    for i in prange(n):
        for t in range(c):
            if F[i, t] == 1:
                for x in range(m):
                    if NI[i, x] == I[i, t]:
                        F[i, t] = 0
                        break


@njit(parallel=True, cache=True, nogil=True)
def _join(Q, D, NI, OI, r0, r1, UA, UB, UD, counts):  # pragma: no cover - compiled
    """Local joins of rows ``r0 .. r1-1``: pairs of their candidates (one at least new) closer than a list's last."""
    m = NI.shape[1]
    last = D.shape[1] - 1
    per = UA.shape[1]
    for r in prange(r1 - r0):
        i = r0 + r
        u = 0
        for x in range(m):
            a = NI[i, x]
            if a < 0:
                continue
            for y in range(x + 1, m + m):
                b = NI[i, y] if y < m else OI[i, y - m]
                if b < 0 or b == a:
                    continue
                d = l1_u16(Q, a, b)
                if (d <= D[a, last] or d <= D[b, last]) and u < per:
                    UA[r, u] = a
                    UB[r, u] = b
                    UD[r, u] = d
                    u += 1
        counts[r] = u


@njit(parallel=True, cache=True, nogil=True)
def _apply(I, D, B, F, UA, UB, UD, counts, step, shards):  # pragma: no cover - compiled
    """Apply a block's offers; thread ``s`` owns the lists of rows ``≡ s (mod shards)``."""
    for s in prange(shards):
        for r in range(counts.size):
            for u in range(counts[r]):
                a = UA[r, u]
                b = UB[r, u]
                if a % shards == s:
                    _offer(I, D, B, F, a, UD[r, u], b, step)
                if b % shards == s:
                    _offer(I, D, B, F, b, UD[r, u], a, step)


def quantise(Y: np.ndarray, top: float | None = None) -> np.ndarray:
    """``rint(Y * SCALE_MAX / top)`` as uint16 (``top`` default ``max(Y)``): non-negative vectors for :func:`nn_descent`.

    One scale for all columns, so the integer L1 is the float L1 divided by the scale, up to the
    rounding of each entry (at most half a step, 1 / 131,070 of the largest entry). On 100,000 UMI-like
    cells (2,000 genes) the 21 nearest by this distance held every one of the 14 exact nearest of
    1,000 sampled rows; 8 bits lost a sixth of them (benchmarks/RESULTS.md, issue 28). Element-wise
    and so the same bits on any CPU; half the bytes of float32, which halves the memory traffic of
    the joins, the search's bottleneck.
    """
    Y = np.asarray(Y, dtype=np.float32)
    if top is None:
        top = float(Y.max()) if Y.size else 0.0
    if top <= 0.0:
        return np.zeros(Y.shape, dtype=np.uint16)
    out = np.empty(Y.shape, dtype=np.uint16)
    f = np.float32(SCALE_MAX / top)
    step = max(1, (1 << 24) // max(1, Y.shape[1]))
    for i0 in range(0, Y.shape[0], step):
        out[i0:i0 + step] = np.minimum(np.rint(Y[i0:i0 + step] * f), SCALE_MAX)
    return out


def join_width(c: int) -> int:
    """Candidates joined per row and round for lists of ``c``: ``JOIN_FACTOR c``, at most
    :data:`JOIN_CAP` (at least ``c``)."""
    return max(c, min(JOIN_FACTOR * c, JOIN_CAP))


def first_width(c: int) -> int:
    """Candidates joined per row in the first round: ``ceil(FIRST_JOIN_FACTOR c)`` (at least ``c``, at most
    :func:`join_width`)."""
    return max(c, min(int(np.ceil(FIRST_JOIN_FACTOR * c)), join_width(c)))


def nn_descent(Q: np.ndarray, c: int, seed: int = 0, *, n_iters: int | None = None,
               max_candidates: int | None = None, delta: float = 0.001, n_trees: int = N_TREES) -> np.ndarray:
    """Approximate ``c`` nearest other rows of each row of ``Q`` under L1 (NN-descent).

    Parameters
    ----------
    Q : ndarray of uint16, shape (n, d)
        Quantised rows (:func:`quantise`); distances are exact integer L1 sums.
    c : int
        List length, ``1 <= c < n``.
    seed : int
        Seed of every random choice (the initial lists and the candidate samples).
    n_iters : int, optional
        Most rounds; default ``max(5, round(log2 n))`` (pynndescent's default).
    max_candidates : int, optional
        New (and old) candidates joined per row and round; default :func:`join_width` of ``c``
        (:func:`first_width` in the first round).
    delta : float
        Stop when fewer than ``delta * n * c`` entries changed in a round.
    n_trees : int
        Random projection trees whose leaves (of ``max(c + 1, 32)`` rows) start the lists, as
        pynndescent's forest does; then random rows fill them.

    Returns
    -------
    ndarray of int64, shape (n, c)
        Row ``i``'s list, ascending by (distance, index); never ``i`` itself.
    """
    import numba

    Q = np.ascontiguousarray(Q, dtype=np.uint16)
    n = Q.shape[0]
    if not 1 <= c < n:
        raise ValueError(f"c must be between 1 and n - 1 = {n - 1}, not {c}")
    n_iters = max(5, int(round(np.log2(n)))) if n_iters is None else n_iters
    m = join_width(c) if max_candidates is None else max_candidates
    I = np.full((n, c), -1, dtype=np.int64)
    D = np.full((n, c), np.iinfo(np.int64).max, dtype=np.int64)
    B = np.zeros((n, c), dtype=np.int32)
    F = np.zeros((n, c), dtype=np.int8)
    if n_trees > 0:
        perm = np.empty((n_trees, n), dtype=np.int64)
        start = np.zeros((n_trees, n), dtype=np.uint8)
        H = np.empty(Q.shape, dtype=np.uint8)
        _top_bytes(Q, H)
        _rp_trees(H, seed, max(c + 1, 32), perm, start)
        del H
        for t in range(n_trees):
            s = np.flatnonzero(start[t])
            _init_leaves(Q, I, D, B, F, perm[t], s, np.append(s[1:], n))
    _init_random(Q, I, D, B, F, seed)
    shards = max(1, numba.get_num_threads())
    per = m * (m - 1) // 2 + m * m
    block = max(1, min(BLOCK, n, JOIN_BYTES // (24 * per)))
    UA = np.empty((block, per), dtype=np.int64)
    UB = np.empty((block, per), dtype=np.int64)
    UD = np.empty((block, per), dtype=np.int64)
    counts = np.empty(block, dtype=np.int64)
    buffers = [np.empty(n * m, dtype=t) for t in (np.int64, np.int64, np.uint64, np.uint64)]
    first = min(m, first_width(c)) if max_candidates is None else m
    for step in range(1, n_iters + 1):
        width = first if step == 1 else m  # C-contiguous views of the same buffers: one compiled signature
        NI, OI, NP, OP = (b[: n * width].reshape(n, width) for b in buffers)
        NI.fill(-1)
        OI.fill(-1)
        _candidates(I, F, seed, step, NI, NP, OI, OP, shards)
        _mark_old(I, F, NI)
        for r0 in range(0, n, block):
            r1 = min(r0 + block, n)
            _join(Q, D, NI, OI, r0, r1, UA, UB, UD, counts[: r1 - r0])
            _apply(I, D, B, F, UA, UB, UD, counts[: r1 - r0], step, shards)
        if int((B == step).sum()) <= delta * n * c:
            break
    return I
