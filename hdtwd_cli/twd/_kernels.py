r"""Compiled pairwise L1 kernel (numba): the hot loop of the distance step (docs/method.md section 4).

For NON-NEGATIVE rows (TWD vectors are subtree masses times edge lengths),

.. math:: D_{ij} = \sum_k |A_{ik} - B_{jk}| = S^A_i + S^B_j - 2 \sum_k \min(A_{ik}, B_{jk}),
          \qquad S_i = \sum_k A_{ik},

since :math:`|a - b| = a + b - 2\min(a, b)`. The overlap sum costs two vector operations per term
(``min``, ``add``) where ``|a - b|`` costs three (``sub``, ``and``, ``add``), a faster kernel with
the same tiles (docs/performance.md, "Dependencies"). And a term with a zero on either side is
an exact ``+0``, which the pruned kernel for sparse documents (:mod:`hdtwd_cli.twd._pruned`)
exploits: only nodes with mass in BOTH blocks of a pair of row blocks are visited. Every sum is
accumulated in float64 whatever the storage type (float32 values are widened exactly). Rounding:
the absolute error is about ``1e-16 (S_i + S_j)``, i.e. about 1e-15 of the distances' scale
against the difference form (tested), and an exact 0 for identical rows.

Tiling (a small GEMM-like scheme)
    The output is cut into tiles of ``_TI`` rows of ``A`` x ``_TJ`` rows of ``B``; the tiles are
    spread over threads (``prange`` with a chunk size of 1, so the uneven tiles of the symmetric
    case are balanced dynamically). Within a tile the columns are processed in passes of ``TK``:
    each pass first *packs* ``B[j0:j1, k0:k1]`` transposed (k-major, float64) into a small
    scratch ``Bp`` that stays in L2, then a micro-kernel walks ``A`` four rows at a time and ``k``
    four columns at a time: the 16 values ``A[i..i+3, k..k+3]`` sit in registers (broadcast) and
    the innermost loop runs over ``j`` with unit stride, so LLVM vectorises it across *pairs*
    (8 ``j`` per AVX-512 register, 4 per AVX2 register): each ``Bp`` load serves four rows and
    each load/store of an accumulator serves four columns. In the symmetric case only the pairs
    ``j > i`` are computed (the micro-kernel starts at ``j = i + 1``) and mirrored; the diagonal
    is an exact 0.

Determinism
    No vector lane ever holds two columns ``k`` of the same pair: the lanes are different pairs.
    The sum for one pair is therefore always the same sequence of float64 operations,
    ``m_c = (((0 + min(a_k, b_k)) + min(a_{k+1}, b_{k+1})) + ...)`` over each pass
    ``c = [k0, k0 + TK)`` (``k0`` a multiple of ``TK``) and ``M = ((0 + m_0) + m_1) + ...``
    (two-level summation, for accuracy), whatever the tile, thread, thread count, vector width or
    remainder loop that computes it; the norms ``S`` are summed in the same two-level order
    (:func:`row_norms`) and ``D = max((S_i + S_j) - 2 M, 0)``. Because float rounding is monotone
    and the three sums share their order, ``M <= min(S_i, S_j)`` also after rounding: ``D >= 0``,
    and ``D = 0`` exactly for identical rows. The kernels are compiled WITHOUT fast-math, so LLVM is not
    allowed to reassociate these sums (a re-association is what made the freshly compiled and
    the cache-loaded machine code of the old kernel disagree in the last bit): every correct
    compilation of this code - fresh, cache-loaded, any ISA - gives the same bits. Since
    ``min`` and ``+`` are commutative, ``D[i, j] == D[j, i]`` bit for bit, and a symmetric call, a
    cross call on a block of rows and a cross call on the whole matrix agree bit for bit too.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import DTypeLike

from hdtwd_cli._runtime import twins
from hdtwd_cli._runtime.jit import njit, prange
from hdtwd_cli._runtime.sparse import canonical_csr, require_canonical
from hdtwd_cli.twd import _small

_TI = 256  # rows of A per tile (packing of the B tile is amortised over these rows)
_TJ = 128  # rows of B per tile: length of the vectorised inner loop
TK = 256  # columns per pass: packed B tile 256 x 128 float64 = 256 KiB (L2)
GATHER_COLUMNS = 4 * TK  # columns per slab of the gathered distances (a multiple of TK)


@njit(cache=True, nogil=True)
def _pack(B, j0, nj, k0, nk, Bp):  # pragma: no cover - compiled
    """``Bp[k, j] = B[j0 + j, k0 + k]`` as float64 (four rows of B read side by side)."""
    j = 0
    while j + 4 <= nj:
        r0 = B[j0 + j, k0 : k0 + nk]
        r1 = B[j0 + j + 1, k0 : k0 + nk]
        r2 = B[j0 + j + 2, k0 : k0 + nk]
        r3 = B[j0 + j + 3, k0 : k0 + nk]
        for k in range(nk):
            Bp[k, j] = r0[k]
            Bp[k, j + 1] = r1[k]
            Bp[k, j + 2] = r2[k]
            Bp[k, j + 3] = r3[k]
        j += 4
    while j < nj:
        r0 = B[j0 + j, k0 : k0 + nk]
        for k in range(nk):
            Bp[k, j] = r0[k]
        j += 1


@njit(cache=True, nogil=True)
def _rows4(A, i, k0, nk, Bp, kb, acc, r, js, nj):  # pragma: no cover - compiled
    """``acc[r + q, j] += sum_k min(A[i + q, k0 + k], Bp[kb + k, j])`` for q < 4, js <= j < nj, k < nk.

    Per (q, j) the additions are done in increasing k, one at a time; the j loop is the vector
    loop. Row views starting at ``js`` keep the loop start at 0 (a variable start stops LLVM
    from vectorising it).
    """
    n = nj - js
    c0 = acc[r, js:nj]
    c1 = acc[r + 1, js:nj]
    c2 = acc[r + 2, js:nj]
    c3 = acc[r + 3, js:nj]
    k = 0
    while k + 4 <= nk:
        c = k0 + k
        a00 = np.float64(A[i, c])
        a01 = np.float64(A[i, c + 1])
        a02 = np.float64(A[i, c + 2])
        a03 = np.float64(A[i, c + 3])
        a10 = np.float64(A[i + 1, c])
        a11 = np.float64(A[i + 1, c + 1])
        a12 = np.float64(A[i + 1, c + 2])
        a13 = np.float64(A[i + 1, c + 3])
        a20 = np.float64(A[i + 2, c])
        a21 = np.float64(A[i + 2, c + 1])
        a22 = np.float64(A[i + 2, c + 2])
        a23 = np.float64(A[i + 2, c + 3])
        a30 = np.float64(A[i + 3, c])
        a31 = np.float64(A[i + 3, c + 1])
        a32 = np.float64(A[i + 3, c + 2])
        a33 = np.float64(A[i + 3, c + 3])
        p0 = Bp[kb + k, js:nj]
        p1 = Bp[kb + k + 1, js:nj]
        p2 = Bp[kb + k + 2, js:nj]
        p3 = Bp[kb + k + 3, js:nj]
        for j in range(n):
            b0 = p0[j]
            b1 = p1[j]
            b2 = p2[j]
            b3 = p3[j]
            s = c0[j]
            s += min(a00, b0)
            s += min(a01, b1)
            s += min(a02, b2)
            s += min(a03, b3)
            c0[j] = s
            s = c1[j]
            s += min(a10, b0)
            s += min(a11, b1)
            s += min(a12, b2)
            s += min(a13, b3)
            c1[j] = s
            s = c2[j]
            s += min(a20, b0)
            s += min(a21, b1)
            s += min(a22, b2)
            s += min(a23, b3)
            c2[j] = s
            s = c3[j]
            s += min(a30, b0)
            s += min(a31, b1)
            s += min(a32, b2)
            s += min(a33, b3)
            c3[j] = s
        k += 4
    while k < nk:
        c = k0 + k
        a0 = np.float64(A[i, c])
        a1 = np.float64(A[i + 1, c])
        a2 = np.float64(A[i + 2, c])
        a3 = np.float64(A[i + 3, c])
        p0 = Bp[kb + k, js:nj]
        for j in range(n):
            b = p0[j]
            c0[j] += min(a0, b)
            c1[j] += min(a1, b)
            c2[j] += min(a2, b)
            c3[j] += min(a3, b)
        k += 1


@njit(cache=True, nogil=True)
def _rows1(A, i, k0, nk, Bp, kb, acc, r, js, nj):  # pragma: no cover - compiled
    """One row of A (the last ``ni % 4`` rows of a tile); same order of operations per pair."""
    n = nj - js
    c0 = acc[r, js:nj]
    for k in range(nk):
        a = np.float64(A[i, k0 + k])
        p0 = Bp[kb + k, js:nj]
        for j in range(n):
            c0[j] += min(a, p0[j])


@njit(parallel=True, cache=True, nogil=True)
def row_norms(A, out):  # pragma: no cover - compiled
    """``out[i] = sum_k A[i, k]`` in the kernel's order: passes of ``TK`` columns summed one value at a
    time, then the passes added; a zero anywhere adds an exact ``+0`` (sparse panels give the same bits)."""
    n, d = A.shape
    for i in prange(n):
        tot = 0.0
        for k0 in range(0, d, TK):
            s = 0.0
            for k in range(k0, min(k0 + TK, d)):
                s += np.float64(A[i, k])
            tot += s
        out[i] = tot


@njit(cache=True, nogil=True)
def from_overlap(sa, sb, m):  # pragma: no cover - compiled
    """``|a - b|_1 = (|a|_1 + |b|_1) - 2 sum_k min(a_k, b_k)`` for non-negative ``a``, ``b``.

    Never negative: the three sums are taken in the same order and float rounding is monotone,
    so ``m <= min(sa, sb)`` holds for the rounded values too (``max`` guards it all the same).
    """
    return max((sa + sb) - 2.0 * m, 0.0)


@njit(cache=True, nogil=True)
def tile_pass(A, ia, k0, nk, Bp, kb, acc, ni, nj, jfirst):  # pragma: no cover - compiled
    """One pass of a tile: ``acc[r, j] = sum_k min(A[ia + r, k0 + k], Bp[kb + k, j])`` for the needed ``j``.

    Row ``r`` needs the columns ``j >= jfirst + r`` (clipped to ``[0, nj]``; a very negative
    ``jfirst``: all of them), four rows at a time through :func:`_rows4`.
    """
    acc[:, :] = 0.0
    r = 0
    while r < ni:
        js = min(max(jfirst + r, 0), nj)
        if r + 4 <= ni:
            _rows4(A, ia + r, k0, nk, Bp, kb, acc, r, js, nj)
            r += 4
        else:
            _rows1(A, ia + r, k0, nk, Bp, kb, acc, r, js, nj)
            r += 1


@njit(cache=True, nogil=True)
def store_tile(out, tot, sa, sb, i0, j0, ni, nj, symmetric):  # pragma: no cover - compiled
    """``out[i0 + r, j0 + j] = from_overlap(...)`` of a tile; symmetric: only ``j > i``, mirrored."""
    if symmetric:
        for r in range(ni):
            for j in range(min(max(i0 + r + 1 - j0, 0), nj), nj):  # j > i: each entry once
                v = from_overlap(sa[i0 + r], sb[j0 + j], tot[r, j])
                out[i0 + r, j0 + j] = v
                out[j0 + j, i0 + r] = v
    else:
        for r in range(ni):
            for j in range(nj):
                out[i0 + r, j0 + j] = from_overlap(sa[i0 + r], sb[j0 + j], tot[r, j])


@njit(parallel=True, cache=True, nogil=True)
def _l1_tiles(A, B, sa, sb, out, symmetric, tiles):  # pragma: no cover - compiled
    na, d = A.shape
    nb = B.shape[0]
    for t in prange(tiles.shape[0]):
        i0 = tiles[t, 0]
        j0 = tiles[t, 1]
        ni = min(i0 + _TI, na) - i0
        nj = min(j0 + _TJ, nb) - j0
        # first needed column of row r of the tile is i0 + r + joff (clipped to [0, nj])
        joff = 1 - j0 if symmetric else -(na + nb + 1)
        tot = np.zeros((_TI, _TJ), dtype=np.float64)
        acc = np.empty((_TI, _TJ), dtype=np.float64)
        Bp = np.empty((TK, _TJ), dtype=np.float64)
        for k0 in range(0, d, TK):
            nk = min(k0 + TK, d) - k0
            _pack(B, j0, nj, k0, nk, Bp)
            tile_pass(A, i0, k0, nk, Bp, 0, acc, ni, nj, i0 + joff)
            for r in range(ni):
                for j in range(nj):
                    tot[r, j] += acc[r, j]
        store_tile(out, tot, sa, sb, i0, j0, ni, nj, symmetric)
    if symmetric:
        for i in range(na):
            out[i, i] = 0.0


def _tile_origins(na: int, nb: int, symmetric: bool) -> np.ndarray:
    """``(i0, j0)`` of every tile to compute; symmetric: only tiles holding a pair with j > i."""
    ii, jj = np.meshgrid(np.arange(0, na, _TI), np.arange(0, nb, _TJ), indexing="ij")
    ii, jj = ii.ravel(), jj.ravel()  # type: ignore[assignment]
    if symmetric:
        keep = np.minimum(jj + _TJ, nb) > ii + 1
        ii, jj = ii[keep], jj[keep]
    return np.ascontiguousarray(np.stack([ii, jj], axis=1), dtype=np.int64)


def norms(A: np.ndarray) -> np.ndarray:
    """Row sums of a non-negative ``A`` in the kernel's order (:func:`row_norms`)."""
    if A.size <= twins.SMALL_WORK:
        return _small.norms(A, TK)
    out = np.empty(A.shape[0])
    if A.shape[0]:
        row_norms(np.ascontiguousarray(A), out)
    return out


def check_non_negative(A: np.ndarray) -> None:
    if A.size and np.min(A) < 0:
        raise ValueError("the L1 kernel needs non-negative rows (TWD vectors are)")


def l1_distances(
    A: np.ndarray, B: np.ndarray | None = None, dtype: DTypeLike = np.float64, out: np.ndarray | None = None
) -> np.ndarray:
    r"""All L1 distances between the NON-NEGATIVE rows of ``A`` (and ``B``); float64 accumulation.

    .. math:: \lVert a - b\rVert_1 = \lVert a\rVert_1 + \lVert b\rVert_1 - 2 \sum_k \min(a_k, b_k)
              \qquad (a, b \ge 0),

    the overlap sum tiled as described in the module docstring (``min`` and ``add``: two vector
    operations per term where ``|a - b|`` takes three), the norms summed in the same order.

    Parameters
    ----------
    A : ndarray, shape (na, d)
    B : ndarray, shape (nb, d), optional
        When omitted, the symmetric ``na x na`` matrix with an exact zero diagonal.
    dtype : dtype of the result
    out : ndarray, optional
        Where to write the ``na x nb`` result (e.g. a memory-mapped output file).
    """
    A = np.ascontiguousarray(A)
    sym = B is None
    Bm = A if sym else np.ascontiguousarray(B, dtype=A.dtype)
    check_non_negative(A)
    if not sym:
        check_non_negative(Bm)
    if A.shape[0] * Bm.shape[0] * A.shape[1] <= twins.SMALL_WORK:  # same bits, no numba start-up
        D = _small.l1_distances(A, None if sym else Bm, np.dtype(dtype), TK)
        if out is None:
            return D
        out[...] = D
        return out
    if out is None:
        out = np.empty((A.shape[0], Bm.shape[0]), dtype=np.dtype(dtype))
    if A.shape[0] and Bm.shape[0]:
        sa = norms(A)
        sb = sa if sym else norms(Bm)
        tiles = _tile_origins(A.shape[0], Bm.shape[0], sym)
        import numba

        with numba.parallel_chunksize(1):  # dynamic schedule: tiles differ in cost
            _l1_tiles(A, Bm, sa, sb, out, sym, tiles)
    return out


@njit(parallel=True, cache=True, nogil=True)
def _gather(A, B, sa, sb, cand, out):  # pragma: no cover - compiled
    """``out[i, t] = L1(A[i], B[cand[i, t]])`` in the tiled kernel's order (the same bits): ``sum_k min(a_k, b_k)``
    over each pass of ``TK`` columns, the passes' sums added in order from 0.

    The columns are read in slabs of :data:`GATHER_COLUMNS` (whole passes of ``TK``), every pair's
    passes of a slab before the next slab: the slab of the rows and of their candidates stays in
    cache while all pairs read it, instead of each pair reading both whole rows from memory. A
    pair's pass sums are added to its running total in pass order.
    Eight candidates at a time, each its own chain of additions (one pair at a time waited on the
    latency of every addition: 2.2x slower).
    """
    n, c = cand.shape
    d = A.shape[1]
    c8 = c - c % 8
    tot = np.zeros((n, c))
    for s0 in range(0, d, GATHER_COLUMNS):
        s1 = min(s0 + GATHER_COLUMNS, d)
        for i in prange(n):
            a = A[i]
            for t0 in range(0, c8, 8):
                b0 = B[cand[i, t0]]
                b1 = B[cand[i, t0 + 1]]
                b2 = B[cand[i, t0 + 2]]
                b3 = B[cand[i, t0 + 3]]
                b4 = B[cand[i, t0 + 4]]
                b5 = B[cand[i, t0 + 5]]
                b6 = B[cand[i, t0 + 6]]
                b7 = B[cand[i, t0 + 7]]
                for k0 in range(s0, s1, TK):
                    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = 0.0
                    for k in range(k0, min(k0 + TK, s1)):
                        x = np.float64(a[k])
                        m0 += min(x, np.float64(b0[k]))
                        m1 += min(x, np.float64(b1[k]))
                        m2 += min(x, np.float64(b2[k]))
                        m3 += min(x, np.float64(b3[k]))
                        m4 += min(x, np.float64(b4[k]))
                        m5 += min(x, np.float64(b5[k]))
                        m6 += min(x, np.float64(b6[k]))
                        m7 += min(x, np.float64(b7[k]))
                    tot[i, t0] += m0
                    tot[i, t0 + 1] += m1
                    tot[i, t0 + 2] += m2
                    tot[i, t0 + 3] += m3
                    tot[i, t0 + 4] += m4
                    tot[i, t0 + 5] += m5
                    tot[i, t0 + 6] += m6
                    tot[i, t0 + 7] += m7
            for t in range(c8, c):
                b = B[cand[i, t]]
                for k0 in range(s0, s1, TK):
                    acc = 0.0
                    for k in range(k0, min(k0 + TK, s1)):
                        acc += min(np.float64(a[k]), np.float64(b[k]))
                    tot[i, t] += acc
    for i in prange(n):
        for t in range(c):
            out[i, t] = from_overlap(sa[i], sb[cand[i, t]], tot[i, t])


def l1_gather(
    A: np.ndarray,
    B: np.ndarray,
    cand: np.ndarray,
    out: np.ndarray,
    norms_a: np.ndarray | None = None,
    norms_b: np.ndarray | None = None,
) -> None:
    """``out[i, t] = L1(A[i], B[cand[i, t]])``, each sum in the tiled kernel's order (passes of ``TK``
    columns summed sequentially, then added up), so the values are bit for bit :func:`l1_distances`'.

    ``norms_a`` / ``norms_b``: the rows' :func:`norms`, when the caller keeps them (a row's norm
    depends on that row alone); computed here otherwise."""
    _gather(A, B, norms(A) if norms_a is None else norms_a, norms(B) if norms_b is None else norms_b, cand, out)


@njit(parallel=True, cache=True, nogil=True)
def tree_vectors_dense(X, rows, parent, cols, scale, out):  # pragma: no cover - compiled
    """``out[r, cols[v]] = scale[v] * (mass of row rows[r] below node v)`` for every node with ``cols[v] >= 0``.

    Per row: the leaves' values, then each node's mass added to its parent in increasing node
    order (children precede parents), the same additions in the same order as
    ``twd._distance.subtree_masses``; rows in parallel, picked by index (no copy of ``X``), written
    straight into C-order output.
    """
    L = X.shape[1]
    n_nodes = parent.shape[0]
    for r in prange(rows.shape[0]):
        i = rows[r]
        y = np.zeros(n_nodes)
        for j in range(L):
            y[j] = X[i, j]
        for c in range(n_nodes - 1):
            y[parent[c]] += y[c]
        for v in range(n_nodes):
            k = cols[v]
            if k >= 0:
                out[r, k] = y[v] * scale[v]


@njit(cache=True, nogil=True)
def _csr_row_masses(indptr, indices, data, i, parent, y):  # pragma: no cover - compiled
    """``y`` = the masses below every node of CSR row ``i`` (the additions of :func:`tree_vectors_dense`)."""
    y[:] = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        y[indices[p]] += data[p]
    for c in range(parent.shape[0] - 1):
        y[parent[c]] += y[c]


@njit(parallel=True, cache=True, nogil=True)
def tree_vectors_csr(indptr, indices, data, rows, parent, cols, scale, out):  # pragma: no cover - compiled
    """:func:`tree_vectors_dense` for the CSR rows ``rows`` (any order, repeats allowed) into ``out[r]``.

    Duplicate entries are summed, as ``toarray`` does. Rows are picked by index here rather than
    by scipy's fancy indexing, which copied every picked row first (6x the cost at 10^5 rows).
    """
    n_nodes = parent.shape[0]
    for r in prange(rows.shape[0]):
        y = np.empty(n_nodes)
        _csr_row_masses(indptr, indices, data, rows[r], parent, y)
        for v in range(n_nodes):
            k = cols[v]
            if k >= 0:
                out[r, k] = y[v] * scale[v]


@njit(parallel=True, cache=True, nogil=True)
def quantised_tree_vectors_csr(
    indptr, indices, data, rows, parent, cols, scale, factor, top_q, out
):  # pragma: no cover - compiled
    """``min(rint(float32(y) * factor), top_q)`` as uint16 of the tree vectors ``y`` of CSR ``rows``.

    Bit for bit ``quantise(fill_tree_vectors(...), top)`` with ``factor = float32(top_q / top)``
    (the float32 product, rounded half to even), without the float64 and float32 matrices.
    """
    n_nodes = parent.shape[0]
    for r in prange(rows.shape[0]):
        y = np.empty(n_nodes)
        _csr_row_masses(indptr, indices, data, rows[r], parent, y)
        for v in range(n_nodes):
            k = cols[v]
            if k >= 0:
                q = np.rint(np.float32(y[v] * scale[v]) * factor)
                out[r, k] = np.uint16(q if q < top_q else top_q)


def fill_tree_vectors(
    x, parent: np.ndarray, cols: np.ndarray, scale: np.ndarray, out: np.ndarray, rows: np.ndarray | None = None
) -> None:
    """``out[r, cols[v]] = scale[v] * (mass of row rows[r] of x below node v)`` for dense or CSR ``x``
    (``rows`` default: all, in order).

    :func:`tree_vectors_dense` / :func:`tree_vectors_csr`, or their NumPy twin for small problems
    (same bits, :mod:`hdtwd_cli.twd._small`).
    """
    picked = np.arange(x.shape[0], dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    if small_tree_work(picked.shape[0], parent):
        xs = x[picked]
        _small.fill_tree_vectors(xs.toarray() if sp.issparse(xs) else np.asarray(xs), parent, cols, scale, out)
    elif sp.issparse(x):
        tree_vectors_csr(x.indptr, x.indices, x.data, picked, parent, cols, scale, out)
    else:
        tree_vectors_dense(np.ascontiguousarray(x), picked, parent, cols, scale, out)


def small_tree_work(n_rows: int, parent: np.ndarray) -> bool:
    """Whether tree vectors of ``n_rows`` rows take the NumPy twin (no numba start-up) rather than a kernel."""
    return n_rows * parent.shape[0] <= twins.SMALL_WORK and parent.shape[0] <= twins.SMALL_NODES


@njit(parallel=True, cache=True, nogil=True)
def _min_overlap(a_indptr, a_indices, a_data, b_indptr, b_rows, b_data, nb, out):  # pragma: no cover - compiled
    """``out[i, j] = sum_v min(A[i, v], B[j, v])`` over the shared support (A in CSR, B in CSC form).

    Per row i of A the non-zeros are visited in increasing column order and, for each, the rows
    of B holding that column in increasing row order: a fixed order of additions per entry.
    """
    na = a_indptr.shape[0] - 1
    for i in prange(na):
        acc = np.zeros(nb)
        for p in range(a_indptr[i], a_indptr[i + 1]):
            v = a_indices[p]
            a = a_data[p]
            for q in range(b_indptr[v], b_indptr[v + 1]):
                b = b_data[q]
                acc[b_rows[q]] += a if a < b else b
        for j in range(nb):
            out[i, j] = acc[j]


def l1_distances_sparse(A, B) -> np.ndarray:
    r"""L1 distances between the rows of two NON-NEGATIVE sparse matrices, in time of their overlap.

    .. math:: \lVert a - b\rVert_1 = \lVert a\rVert_1 + \lVert b\rVert_1 - 2 \sum_v \min(a_v, b_v),

    with the sum over the columns where both are non-zero: the work is
    :math:`\sum_v \mathrm{nnz}_A(v)\,\mathrm{nnz}_B(v)` instead of ``na x nb x d``, a large saving for
    documents (a few dozen words of tens of thousands, or their sparse tree vectors). Deterministic
    (a fixed order of additions); equal to :func:`l1_distances` up to rounding (absolute error
    about ``1e-16 (|a|_1 + |b|_1)``), not bit for bit; negative rounding residues are set to 0.
    """
    A = canonical_csr(A)
    Bc = canonical_csr(B).tocsc()  # a new matrix, sorted
    if A.shape[1] != Bc.shape[1]:
        raise ValueError("the two sets of rows have different widths")
    out = np.empty((A.shape[0], Bc.shape[0]), dtype=np.float64)
    _min_overlap(
        A.indptr.astype(np.int64),
        A.indices.astype(np.int64),
        A.data,
        Bc.indptr.astype(np.int64),
        Bc.indices.astype(np.int64),
        Bc.data,
        Bc.shape[0],
        out,
    )
    sa = np.asarray(A.sum(axis=1)).ravel()
    sb = np.asarray(Bc.sum(axis=1)).ravel()
    out *= -2.0
    out += sa[:, None]
    out += sb[None, :]
    np.maximum(out, 0.0, out=out)
    return out


@njit(parallel=True, cache=True, nogil=True)
def _tree_vectors_sparse(
    indptr, indices, data, parent, cols, back, scale, out_indptr, out_indices, out_data, fill
):  # pragma: no cover - compiled
    """Sparse rows of ``y_i = w * R x_i``: each leaf's value added along its path to the root.

    ``fill = False``: store each row's number of kept non-zero nodes in ``out_indptr[i + 1]``;
    ``fill = True``: write them, sorted by column, from ``out_indptr[i]``. ``back`` maps a kept
    column to its node.
    """
    n = indptr.shape[0] - 1
    n_nodes = parent.shape[0]
    root = n_nodes - 1
    for i in prange(n):
        y = np.zeros(n_nodes)
        seen = np.zeros(n_nodes, dtype=np.bool_)
        stack = [np.int64(0) for _ in range(0)]
        for p in range(indptr[i], indptr[i + 1]):
            v = indices[p]
            x = data[p]
            while v != root:
                y[v] += x
                if not seen[v]:
                    seen[v] = True
                    if cols[v] >= 0:
                        stack.append(cols[v])
                v = parent[v]
        if not fill:
            out_indptr[i + 1] = len(stack)
            continue
        touched = np.empty(len(stack), dtype=np.int64)
        for t in range(len(stack)):
            touched[t] = stack[t]
        touched.sort()
        o = out_indptr[i]
        for t in range(touched.shape[0]):
            c = touched[t]
            out_indices[o + t] = c
            out_data[o + t] = y[back[c]] * scale[back[c]]


def tree_vectors_sparse(x, parent: np.ndarray, cols: np.ndarray, scale: np.ndarray, dim: int):
    """CSR matrix of the tree vectors of the CSR rows ``x`` on the kept columns ``cols`` (``-1``: dropped)."""
    x = sp.csr_matrix(x, dtype=np.float64)
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    cols = np.ascontiguousarray(cols, dtype=np.int64)
    back = np.zeros(max(dim, 1), dtype=np.int64)
    back[cols[cols >= 0]] = np.flatnonzero(cols >= 0)
    ip, ix = x.indptr.astype(np.int64), x.indices.astype(np.int64)
    indptr = np.zeros(x.shape[0] + 1, dtype=np.int64)
    empty_i, empty_d = np.empty(0, dtype=np.int64), np.empty(0)
    _tree_vectors_sparse(ip, ix, x.data, parent, cols, back, scale, indptr, empty_i, empty_d, False)
    np.cumsum(indptr, out=indptr)
    indices = np.empty(int(indptr[-1]), dtype=np.int64)
    data = np.empty(int(indptr[-1]), dtype=np.float64)
    _tree_vectors_sparse(ip, ix, x.data, parent, cols, back, scale, indptr, indices, data, True)
    return sp.csr_matrix((data, indices, indptr), shape=(x.shape[0], dim))


@njit(cache=True, nogil=True)
def _row_sums_dense(X, out):  # pragma: no cover - compiled
    for i in range(X.shape[0]):
        s = 0.0
        for j in range(X.shape[1]):
            s += X[i, j]
        out[i] = s


@njit(cache=True, nogil=True)
def _row_sums_csr(indptr, data, out):  # pragma: no cover - compiled
    for i in range(indptr.shape[0] - 1):
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            s += data[p]
        out[i] = s


def row_sums(X) -> np.ndarray:
    """Row sums added one value at a time in column order, whatever the storage.

    A dense row and the same row in CSR (sorted, duplicates summed) give the same bits: the
    sparse sum skips only zeros, and adding +0.0 to a sum of non-negative values is exact.
    NumPy's pairwise ``sum`` would not (its order depends on the storage).
    """
    out = np.empty(X.shape[0], dtype=np.float64)
    if sp.issparse(X):
        X = require_canonical(X)
        _row_sums_csr(X.indptr.astype(np.int64), X.data, out)
    elif X.size <= twins.SMALL_WORK:
        return _small.row_sums_dense(X)
    else:
        _row_sums_dense(np.ascontiguousarray(X, dtype=np.float64), out)
    return out


#: Largest quantised value: the search vectors are ``rint(y * SCALE_MAX / max(y))`` as uint16.
SCALE_MAX = 65535


def quantise(Y: np.ndarray, top: float | None = None) -> np.ndarray:
    """``rint(Y * SCALE_MAX / top)`` as uint16 (``top`` default ``max(Y)``): the common integer grid
    of the search vectors, before their byte code (:func:`hdtwd_cli.knn._nndescent.byte_code`,
    :func:`hdtwd_cli.knn._nndescent.encode`).

    One scale for all columns, so the integer L1 is the float L1 divided by the scale, up to the
    rounding of each entry (at most half a step, 1 / 131,070 of the largest entry). Element-wise and
    so the same bits on any CPU.
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
        out[i0 : i0 + step] = np.minimum(np.rint(Y[i0 : i0 + step] * f), SCALE_MAX)
    return out
