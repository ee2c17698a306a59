r"""Compiled NN-descent under L1 (Dong, Moses & Li 2011), deterministic at any thread count.

The candidate generator of the approximate neighbour search (:mod:`hdtwd_cli.knn._search`): each row of
a dense matrix gets ``c`` approximate nearest other rows under :math:`\|q_a - q_b\|_1`, where
:math:`q = \mathrm{rint}(y \cdot 65535 / \max y)` are the tree vectors on a common uint16 grid
(:func:`quantise`), each column then kept to its 8 leading bits (:class:`ByteCode`): one byte per
column, summed 32 at a time by ``vpsadbw`` (:func:`l1_bytes`). The byte code makes NN-descent
much faster than on the uint16 values themselves, for almost the same recall
(benchmarks/RESULTS.md, "Approximate neighbours"); the candidates are re-ranked by the exact TWD
afterwards (:mod:`hdtwd_cli.knn._search`). NN-descent keeps, for every row, a list of the ``c``
nearest rows found so far and improves all lists by the *local join*: two rows that appear in a
common row's list (as its neighbour or reverse neighbour) are compared, and each is offered to the
other's list ("a neighbour of a neighbour is likely a neighbour"). Only pairs with at least one
*new* member (one that entered a list since the last round) are compared, at most
``max_candidates`` new and old candidates per row (sampled by a seeded hash; :data:`JOIN_FACTOR`
x ``c`` by default: a row that is the neighbour of many, a hub, gets its reverse neighbours
compared in a few rounds rather than never), and the rounds stop when fewer than
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
    - distances are integer sums (:func:`l1_bytes`): exact, so any vectorisation on any CPU gives
      the same value (integer addition is associative; LLVM vectorises it without fast-math).

The result is the same bytes in one process at any thread count and in a Dask task (tested).
Unlike pynndescent's, whose distance is a first-class function argument that numba does not keep
in its on-disk cache (so it is compiled again in every process), these kernels are cached once per
machine like hdtwd's others.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hdtwd_cli._runtime.jit import intrinsic, njit, prange
from hdtwd_cli.twd._kernels import quantise

#: Random projection trees that start the lists. Better starting lists converge in fewer rounds: on
#: near-equidistant cells (10,000 per type, as a partition of 10^6 cells holds) 8 trees give both a
#: higher recall and a shorter search than fewer (benchmarks/RESULTS.md, "Approximate neighbours").
N_TREES = 8
#: Rows whose local joins are computed against the same snapshot of the lists, at most.
BLOCK = 4096
#: Bytes of pending offers of one block of joins (the block has fewer rows where they would pass it).
JOIN_BYTES = 1 << 28
#: New (and old) candidates joined per row and round, as a multiple of the list length ``c`` (at most
#: :data:`JOIN_CAP`, at least ``c``). Recall is bought here at least as cheaply as with longer lists:
#: on near-equidistant cells (10,000 multinomial draws per type, as a partition of 10^6 cells holds),
#: joining 3c per row aims at recall@14 of about 0.98 (candidates re-ranked exactly), where
#: pynndescent's rule, ``min(60, c)``, stays well below it and shorter lists lose recall
#: (benchmarks/RESULTS.md, "Approximate neighbours"). Rows with few
#: reverse neighbours have fewer candidates than the cap, so the cost grows far less than its square.
JOIN_FACTOR = 3
JOIN_CAP = 128
#: ... in the first round, where every entry is new and the lists are projection-tree leaves and
#: random rows: joining half as many per row in round 1 compares fewer pairs over all rounds for the
#: same recall (round 1 gains less, round 2 makes it up); fewer still costs another round
#: (benchmarks/RESULTS.md, "Approximate neighbours").
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


#: Columns summed in 32-bit lanes before the int64 total in :func:`_project`: no lane can wrap.
U32_SPAN = 65536
#: Byte columns summed per step of :func:`_sad_u8` (one 256-bit ``vpsadbw``); every group of the
#: byte code (:class:`ByteCode`) is padded to a multiple of it.
SAD_WIDTH = 32
#: Steps of :func:`_sad_u8` whose differences are added lane by lane before one horizontal sum.
SAD_STEPS = 8


#: The ``numba.core.cgutils`` helpers :func:`_sad_u8`'s IR is built with.
SAD_IR_NEEDS = ("get_or_insert_function", "alloca_once_value", "for_range")


@njit(cache=True, nogil=True)
def _sad_u8_loop(Q, a, b, k0, k1):  # pragma: no cover - compiled
    """:func:`_sad_u8` as a plain numba loop: the same integers, where numba's IR helpers change."""
    total = 0
    for k in range(k0, k1):
        total += abs(np.int64(Q[a, k]) - np.int64(Q[b, k]))
    return total


@intrinsic(fallback="_sad_u8_loop", needs=SAD_IR_NEEDS)
def _sad_u8(typingctx, Q, a, b, k0, k1):  # pragma: no cover - compiled
    r""":math:`\sum_{k_0 \le k < k_1} |Q_{ak} - Q_{bk}|` of a C-contiguous uint8 matrix, ``k1 - k0`` a
    multiple of :data:`SAD_WIDTH`, exactly (int64).

    Hand-written LLVM IR, target-independent: each step loads 32 bytes of both rows, widens them
    to int32 and takes ``llvm.abs`` of the difference; the differences of :data:`SAD_STEPS` steps are
    added lane by lane (at most ``8 x 255`` a lane) and ``llvm.vector.reduce.add`` sums the 32 lanes
    once per :data:`SAD_STEPS` steps (the steps left over, one by one). x86's backend turns that
    pattern into one ``vpsadbw`` per 32 columns (AVX2 and AVX-512; other targets get their own
    instructions for the same integers); one horizontal sum per step instead cost a quarter more time
    on rows read from the L2 cache (docs/performance.md, "Tricks"). numba's own loop over the same
    sum (:func:`_sad_u8_loop`) widens every byte to a 32-bit lane and never emits it, at about a
    third of the speed (docs/performance.md, "Tricks"). That loop takes this function's place where
    the installed numba lacks the ``cgutils`` helpers the IR is built with (:data:`SAD_IR_NEEDS`).
    """
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils

    if not (isinstance(Q, types.Array) and Q.dtype == types.uint8 and Q.ndim == 2 and Q.layout == "C"):
        return None
    if not all(isinstance(t, types.Integer) for t in (a, b, k0, k1)):
        return None
    sig = types.int64(Q, a, b, k0, k1)

    def codegen(context, builder, signature, args):
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        ia, ib, c0, c1 = (context.cast(builder, v, t, types.int64) for v, t in zip(args[1:], signature.args[1:]))
        stride = builder.extract_value(arr.strides, 0)
        base = builder.bitcast(arr.data, ir.IntType(8).as_pointer())
        pa = builder.gep(base, [builder.add(builder.mul(ia, stride), c0)])
        pb = builder.gep(base, [builder.add(builder.mul(ib, stride), c0)])
        i32, i64 = ir.IntType(32), ir.IntType(64)
        vb = ir.VectorType(ir.IntType(8), SAD_WIDTH)
        vi = ir.VectorType(i32, SAD_WIDTH)
        absf = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vi, [vi, ir.IntType(1)]), f"llvm.abs.v{SAD_WIDTH}i32"
        )
        red = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(i32, [vi]), f"llvm.vector.reduce.add.v{SAD_WIDTH}i32"
        )
        acc = cgutils.alloca_once_value(builder, ir.Constant(i64, 0))

        def absdiff(off):  # |a - b| of the 32 columns at ``off``, int32 lanes
            x = builder.load(builder.bitcast(builder.gep(pa, [off]), vb.as_pointer()), align=1)
            y = builder.load(builder.bitcast(builder.gep(pb, [off]), vb.as_pointer()), align=1)
            return builder.call(
                absf, [builder.sub(builder.zext(x, vi), builder.zext(y, vi)), ir.Constant(ir.IntType(1), 0)]
            )

        def add_lanes(v):
            builder.store(builder.add(builder.load(acc), builder.zext(builder.call(red, [v]), i64)), acc)

        steps = builder.sdiv(builder.sub(c1, c0), ir.Constant(i64, SAD_WIDTH))
        runs = builder.sdiv(steps, ir.Constant(i64, SAD_STEPS))
        with cgutils.for_range(builder, runs) as loop:
            off = builder.mul(loop.index, ir.Constant(i64, SAD_WIDTH * SAD_STEPS))
            lanes = absdiff(off)
            for u in range(1, SAD_STEPS):
                lanes = builder.add(lanes, absdiff(builder.add(off, ir.Constant(i64, SAD_WIDTH * u))))
            add_lanes(lanes)
        done = builder.mul(runs, ir.Constant(i64, SAD_STEPS))
        with cgutils.for_range(builder, builder.sub(steps, done)) as loop:
            add_lanes(absdiff(builder.mul(builder.add(done, loop.index), ir.Constant(i64, SAD_WIDTH))))
        return builder.load(acc)

    return sig, codegen


@njit(cache=True, nogil=True)
def l1_bytes(Q, G, a, b):  # pragma: no cover - compiled
    r"""The search distance of rows ``a`` and ``b`` of byte-coded vectors (:class:`ByteCode`), exactly:
    :math:`\sum_g 2^{s_g} \sum_{k \in g} |Q_{ak} - Q_{bk}|` over the groups ``G[g] = (start, end, s_g)``.

    An integer, so any vectorisation on any CPU gives the same value (:func:`_sad_u8`)."""
    total = 0
    for g in range(G.shape[0]):
        total += _sad_u8(Q, a, b, G[g, 0], G[g, 1]) << G[g, 2]
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
def _init_random(Q, G, I, D, B, F, seed):  # pragma: no cover - compiled
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
            _offer(I, D, B, F, i, l1_bytes(Q, G, i, j), j, 0)
            t += 1


@njit(parallel=True, cache=True, nogil=True)
def _top_bytes(Q, shift, out):  # pragma: no cover - compiled
    """``out = Q >> (8 - shift)``: the top byte of each column's uint16 value (less its column's
    smallest, :class:`ByteCode`), the rows the projection trees split."""
    for i in prange(Q.shape[0]):
        for k in range(Q.shape[1]):
            out[i, k] = np.uint8(Q[i, k] >> (8 - shift[k]))


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
    columns cannot overflow; int64 across spans (a vector holds twice as many 32-bit lanes as 64-bit ones)."""
    x = H[i]
    total = 0
    for k0 in range(0, x.size, U32_SPAN // 2):
        xs = x[k0 : k0 + U32_SPAN // 2]
        ws = w[k0 : k0 + U32_SPAN // 2]
        s = np.int32(0)
        for k in range(xs.size):
            s = np.int32(s + np.int32(np.int32(xs[k]) * np.int32(ws[k])))
        total += np.int64(s)
    return total


@njit(parallel=True, cache=True, nogil=True)
def _rp_trees(H, seed, leaf, perm, start):  # pragma: no cover - compiled
    """Random projection trees (one per row of ``perm``) of the top bytes ``H`` of the rows
    (:func:`_top_bytes`; streaming uint8 rather than uint16 rows halves the memory traffic and
    gives the same trees): each node's rows are split by the hyperplane
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
def _init_leaves(Q, G, I, D, B, F, perm, starts, ends):  # pragma: no cover - compiled
    """Offer every row its leaf-mates of one tree (leaves partition the rows: one thread per list)."""
    for L in prange(starts.size):
        for p in range(starts[L], ends[L]):
            i = perm[p]
            for r in range(starts[L], ends[L]):
                j = perm[r]
                if j != i:
                    _offer(I, D, B, F, i, l1_bytes(Q, G, i, j), j, 0)


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


@njit(cache=True, nogil=True)
def _listed(I, D, a, b):  # pragma: no cover - compiled
    """The distance of ``a`` and ``b`` where one is in the other's list, else -1."""
    for t in range(I.shape[1]):
        if I[a, t] == b:
            return D[a, t]
    for t in range(I.shape[1]):
        if I[b, t] == a:
            return D[b, t]
    return -1


@njit(parallel=True, cache=True, nogil=True)
def _join(Q, G, I, D, NI, OI, r0, r1, UA, UB, UD, counts):  # pragma: no cover - compiled
    """Local joins of rows ``r0 .. r1-1``: pairs of their candidates (one at least new) closer than a list's last.

    A pair already in one of the two lists has its distance there (:func:`_listed`): the same integer,
    without reading the rows (after the first round, about a third of the pairs joined)."""
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
                d = _listed(I, D, a, b)
                if d < 0:
                    d = l1_bytes(Q, G, a, b)
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


class ByteCode(NamedTuple):
    r"""How uint16 search vectors (:func:`quantise`) become the bytes NN-descent compares.

    Column ``j`` of range :math:`[l_j, h_j]` (over all samples) keeps its 8 leading bits,
    :math:`b_j = \lfloor (q_j - l_j) / 2^{s_j} \rfloor` with the least :math:`s_j` for which
    :math:`(h_j - l_j) / 2^{s_j} < 256`, and the distance is
    :math:`\sum_j 2^{s_j} |b_{aj} - b_{bj}|` (:func:`l1_bytes`), the uint16 L1 to within
    :math:`2^{s_j}` per column: every column keeps 8 bits of its own range (one byte on the common
    scale would leave the small columns, a sixth of the 14 nearest, at zero). The columns are grouped by
    :math:`s_j` (stable), each group padded with zero bytes to a multiple of :data:`SAD_WIDTH`. A code
    may hold only some of the columns (:func:`byte_code`'s ``keep``): the distance is then that sum over
    the coded columns.
    """

    #: Column of the uint16 vectors at each byte position (``-1``: padding).
    columns: np.ndarray
    #: Its smallest value :math:`l_j` (uint16) and its shift :math:`s_j` (uint8), per byte position.
    lows: np.ndarray
    shifts: np.ndarray
    #: ``(start, end, shift)`` of each group of byte positions (int64, ``end - start`` a multiple of 32).
    groups: np.ndarray
    #: The largest tree-vector entry: the scale of the uint16 grid (:func:`quantise`).
    top: float

    @property
    def width(self) -> int:
        """Bytes per row."""
        return int(self.columns.size)


def byte_code(lows: np.ndarray, highs: np.ndarray, top: float, keep: int | None = None) -> ByteCode:
    """The :class:`ByteCode` of uint16 columns whose values lie in ``[lows, highs]`` (on the grid of ``top``);
    ``keep``: of the ``keep`` columns of widest range :math:`h_j - l_j` only (:func:`widest_columns`)."""
    lows = np.asarray(lows, dtype=np.int64)
    span = np.maximum(np.asarray(highs, dtype=np.int64) - lows, 0)
    chosen = np.zeros(span.size, dtype=bool)
    chosen[widest_columns(span, span.size if keep is None else keep)] = True
    shift = np.zeros(span.size, dtype=np.int64)
    while True:
        wide = (span >> shift) > 255
        if not wide.any():
            break
        shift[wide] += 1
    parts: list[np.ndarray] = []
    groups, start = [], 0
    for s in np.unique(shift[chosen]):
        cols = np.flatnonzero((shift == s) & chosen)
        width = -(-cols.size // SAD_WIDTH) * SAD_WIDTH
        parts += [cols, np.full(width - cols.size, -1)]
        groups.append((start, start + width, int(s)))
        start += width
    columns = np.concatenate(parts).astype(np.int64) if parts else np.empty(0, dtype=np.int64)
    real = columns >= 0
    out_lows = np.zeros(columns.size, dtype=np.uint16)
    out_lows[real] = lows[columns[real]]
    out_shifts = np.zeros(columns.size, dtype=np.uint8)
    out_shifts[real] = shift[columns[real]]
    return ByteCode(columns, out_lows, out_shifts, np.array(groups, dtype=np.int64).reshape(-1, 3), float(top))


def widest_columns(span: np.ndarray, keep: int) -> np.ndarray:
    """The ``keep`` columns of largest ``span`` (integers; ties: the lower index), in increasing order."""
    return np.sort(np.argsort(-np.asarray(span, dtype=np.int64), kind="stable")[:keep])


@njit(parallel=True, cache=True, nogil=True)
def column_extremes(Y, lows, highs):  # pragma: no cover - compiled
    """``lows = minimum(lows, Y.min(0))``, ``highs = maximum(highs, Y.max(0))`` in one pass, in parallel
    over chunks of 256 columns (exact: any order gives the same extremes). NumPy's two reductions
    would read each block twice, on one thread; this reads it once, in parallel."""
    d = Y.shape[1]
    for c in prange((d + 255) // 256):
        k0 = c * 256
        k1 = min(d, k0 + 256)
        for i in range(Y.shape[0]):
            for k in range(k0, k1):
                v = Y[i, k]
                if v < lows[k]:
                    lows[k] = v
                if v > highs[k]:
                    highs[k] = v


@njit(parallel=True, cache=True, nogil=True)
def _encode(Q, columns, lows, shifts, out):  # pragma: no cover - compiled
    """``out[:, p] = min(255, max(0, Q[:, columns[p]] - lows[p]) >> shifts[p])`` (0 for padding)."""
    for i in prange(Q.shape[0]):
        for p in range(columns.size):
            j = columns[p]
            if j < 0:
                out[i, p] = 0
                continue
            v = np.int64(Q[i, j]) - np.int64(lows[p])
            out[i, p] = np.uint8(min(255, max(0, v) >> shifts[p]))


def encode(Q: np.ndarray, code: ByteCode) -> np.ndarray:
    """Byte rows of uint16 search vectors ``Q`` (:class:`ByteCode`): uint8, ``code.width`` per row.
    Element-wise, the same bits on any CPU; values outside the code's range are clamped."""
    Q = np.ascontiguousarray(Q, dtype=np.uint16)
    out = np.empty((Q.shape[0], code.width), dtype=np.uint8)
    if Q.shape[0]:
        _encode(Q, code.columns, code.lows, code.shifts, out)
    return out


def range_code(lows: np.ndarray, highs: np.ndarray, keep: int | None = None) -> ByteCode:
    """The :class:`ByteCode` of float columns whose values lie in ``[lows, highs]``: their uint16 grid is
    that of the largest value (:func:`quantise`), and rounding is monotone, so the grid values of the
    extremes are the extremes of the grid values. ``keep``: as :func:`byte_code`'s."""
    lows = np.asarray(lows, dtype=np.float64)[None, :]
    highs = np.asarray(highs, dtype=np.float64)[None, :]
    top = max(float(highs.max()) if highs.size else 0.0, 0.0)
    return byte_code(quantise(lows, top)[0], quantise(highs, top)[0], top, keep)


def encode_floats(Y: np.ndarray) -> tuple[np.ndarray, ByteCode]:
    """The byte rows of float vectors ``Y`` and their code, the range taken from ``Y`` itself
    (:func:`range_code`, :func:`encode`)."""
    Y = np.asarray(Y, dtype=np.float32)
    empty = np.zeros(Y.shape[1])
    code = range_code(Y.min(0), Y.max(0)) if Y.shape[0] else range_code(empty, empty)
    return encode(quantise(Y, code.top), code), code


def join_width(c: int) -> int:
    """Candidates joined per row and round for lists of ``c``: ``JOIN_FACTOR c``, at most
    :data:`JOIN_CAP` (at least ``c``)."""
    return max(c, min(JOIN_FACTOR * c, JOIN_CAP))


def first_width(c: int) -> int:
    """Candidates joined per row in the first round: ``ceil(FIRST_JOIN_FACTOR c)`` (at least ``c``, at most
    :func:`join_width`)."""
    return max(c, min(int(np.ceil(FIRST_JOIN_FACTOR * c)), join_width(c)))


def nn_descent(
    Q: np.ndarray,
    code: ByteCode,
    c: int,
    seed: int = 0,
    *,
    n_iters: int | None = None,
    max_candidates: int | None = None,
    delta: float = 0.001,
    n_trees: int = N_TREES,
) -> np.ndarray:
    """Approximate ``c`` nearest other rows of each row of ``Q`` under L1 (NN-descent).

    Parameters
    ----------
    Q : ndarray of uint8, shape (n, code.width)
        Byte rows (:func:`encode`); distances are integer sums (:func:`l1_bytes`).
    code : ByteCode
        Their code (its groups and shifts).
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

    Q = np.ascontiguousarray(Q, dtype=np.uint8)
    n = Q.shape[0]
    if Q.shape[1] != code.width:
        raise ValueError(f"rows of {Q.shape[1]} bytes, but the code has {code.width}")
    G = np.ascontiguousarray(code.groups, dtype=np.int64)
    if G.size and (
        np.any((G[:, 1] - G[:, 0]) % SAD_WIDTH)
        or G[0, 0] != 0
        or G[-1, 1] != code.width
        or np.any(G[1:, 0] != G[:-1, 1])
    ):
        raise ValueError(f"the code's groups must tile its {code.width} bytes in multiples of {SAD_WIDTH}")
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
        _top_bytes(Q, code.shifts, H)
        _rp_trees(H, seed, max(c + 1, 32), perm, start)
        del H
        for t in range(n_trees):
            s = np.flatnonzero(start[t])
            _init_leaves(Q, G, I, D, B, F, perm[t], s, np.append(s[1:], n))
    _init_random(Q, G, I, D, B, F, seed)
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
            _join(Q, G, I, D, NI, OI, r0, r1, UA, UB, UD, counts[: r1 - r0])
            _apply(I, D, B, F, UA, UB, UD, counts[: r1 - r0], step, shards)
        if int((B == step).sum()) <= delta * n * c:
            break
    return I
