r"""Compiled kernels (numba) of learning the tree: HD-LCA products, densities, feature statistics.

- the HD-LCA factor per scale, ``g[i, j] *= max((s_i + s_j) - 2 G_ij, 0) / 4 + h2`` (Prop. 1), on
  tiles of a BLAS Gram product, into condensed or square storage (:mod:`._hd_lca`);
- the square roots of the diffusion densities (:mod:`._diffusion`);
- the features' Gram matrix, column extremes and co-occurrence presence of a CSR matrix in
  blocked passes, without copies of the data (:mod:`._features`, :mod:`._diffusion`);
- the nearest k-means centres (landmarks, and the partitions of the approximate search).

Each kernel's sums have a fixed order: the same bits at any thread count. The NumPy twins of
:mod:`._small` give the same bits for small problems without numba's start-up.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime import twins
from hdtwd_cli._runtime.jit import njit, prange
from hdtwd_cli._runtime.sparse import require_canonical
from hdtwd_cli.tree import _small


@njit(parallel=True, cache=True, nogil=True)
def lca_factor_condensed(out, G, sq_rows, sq_cols, h2, i0, c0, m):  # pragma: no cover - compiled
    """``g[i, j] *= max(sq_rows[r] + sq_cols[c] - 2 G[r, c], 0) / 4 + h2`` on the condensed ``g = out``.

    One scale's factor of the HD-LCA product (:func:`_hd_lca.hd_lca_product`) for the rows ``i = i0 + r``
    of ``G`` against the columns ``j = c0 + c``: only the pairs ``j > i``, each at its condensed
    slot ``i m - i (i + 1) / 2 + (j - i - 1)``.
    """
    for r in prange(G.shape[0]):
        i = i0 + r
        start = i * m - (i * (i + 1)) // 2
        s = sq_rows[r]
        c = i + 1 - c0
        for t in range(m - 1 - i):
            d2 = s + sq_cols[c + t] - 2.0 * G[r, c + t]
            if d2 < 0.0:
                d2 = 0.0
            out[start + t] *= 0.25 * d2 + h2


@njit(cache=True, nogil=True)
def lca_product_tile(acc, Gs, sq_rows, sq_cols, h2, reset):  # pragma: no cover - compiled
    """``acc[r, c] *= f_0 * f_1 * ...`` (from 1 where ``reset``), one factor per Gram tile ``Gs[k]``:
    ``f_k = max(sq_rows[k, r] + sq_cols[k, c] - 2 Gs[k, r, c], 0) / 4 + h2[k]``.

    Every scale of a row of the tile in one pass, in order (the bits of multiplying the factors
    in one scale at a time), so ``acc`` is written once instead of read and written once per
    scale. One thread: the caller runs whole row blocks of tiles on every core
    (:func:`hdtwd_cli.tree._hd_lca._tiled_products`); a parallel region here would fight them.
    """
    K1, nr, nc = Gs.shape
    for r in range(nr):
        a = acc[r, :nc]
        if reset:
            a[:] = 1.0
        for k in range(K1):
            s = sq_rows[k, r]
            g = Gs[k, r]
            sc = sq_cols[k]
            hk = h2[k]
            for c in range(nc):
                d2 = s + sc[c] - 2.0 * g[c]
                if d2 < 0.0:
                    d2 = 0.0
                a[c] *= 0.25 * d2 + hk


@njit(cache=True, nogil=True)
def tile_to_condensed(acc, out, i0, j0, m):  # pragma: no cover - compiled
    """Copy the pairs ``j > i`` of the tile ``acc[r, c]`` (``i = i0 + r``, ``j = j0 + c``) to their condensed slots."""
    for r in range(acc.shape[0]):
        i = i0 + r
        cf = max(i + 1 - j0, 0)
        start = i * m - (i * (i + 1)) // 2 + (j0 + cf - i - 1)
        for c in range(cf, acc.shape[1]):
            out[start + c - cf] = acc[r, c]


@njit(cache=True, nogil=True)
def tile_to_square(acc, D, i0, j0):  # pragma: no cover - compiled
    """The pairs ``j > i`` of the tile ``acc[r, c]`` (``i = i0 + r``, ``j = j0 + c``) to ``D[i, j]`` and ``D[j, i]``.

    The rows of the tile go to rows of ``D`` (unit stride), then its columns to rows of ``D``
    (the mirror; ``acc``'s column read down its rows: one cache line per row serves eight columns).
    """
    nr, nc = acc.shape
    for r in range(nr):
        i = i0 + r
        cf = min(max(i + 1 - j0, 0), nc)
        src = acc[r, cf:]
        dst = D[i, j0 + cf : j0 + nc]
        for c in range(nc - cf):
            dst[c] = src[c]
    for c in range(nc):
        j = j0 + c
        rl = min(max(j - i0, 0), nr)  # rows i < j
        dst = D[j, i0 : i0 + rl]
        for r in range(rl):
            dst[r] = acc[r, c]


@njit(parallel=True, cache=True, nogil=True)
def _sqrt_densities(T, s, out, negp, B):  # pragma: no cover - compiled
    """``out[j, i] = sqrt(max(S[j, i] * s[i] / s[j], 0))`` rounded to ``out``'s type, from the upper
    triangle of the symmetric ``S`` (``T[j, i]``, ``i >= j``; the lower one is never read).

    The operations of :func:`_diffusion.diffusion_densities` (``phi *= s[None, :]``,
    ``phi /= s[:, None]``, clip) and of the square root, in the same order: the same bits as
    NumPy's passes on the mirrored matrix, without writing ``phi``. Tiles of ``B x B``: tile
    ``(J, I)``, ``I >= J``, gives ``out[j, i]`` (rows of ``T``, unit stride) and then ``out[i, j]``
    (from a transposed copy of the tile: unit stride again), so both loops are vector loops (the
    divisions and square roots are the cost: 8 lanes per instruction instead of 1). Block rows
    ``J`` and ``nb - 1 - J`` go to one thread (equal work). ``negp[J]``: the clipped negative mass
    met in block row ``J``'s tiles, per column of the entry (only its sum is used).
    """
    m = T.shape[0]
    nb = (m + B - 1) // B
    for p in prange((nb + 1) // 2):
        pp = np.int64(p)  # prange's index may be unsigned: keep the block arithmetic signed
        Tt = np.empty((B, B), dtype=np.float64)
        for q in range(2):
            bj = pp if q == 0 else nb - 1 - pp
            if q == 1 and bj == pp:
                continue
            neg = negp[bj]
            j0 = bj * B
            j1 = min(j0 + B, m)
            for bi in range(bj, nb):
                i0 = bi * B
                i1 = min(i0 + B, m)
                for j in range(j0, j1):  # out[j, i], i >= j (views from the loop's start: a
                    lo = max(i0, j)  # variable start stops LLVM from vectorising the loop)
                    sj = s[j]
                    tr = T[j, lo:i1]
                    orow = out[j, lo:i1]
                    si = s[lo:i1]
                    ng = neg[lo:i1]
                    for k in range(i1 - lo):
                        v = np.float64(tr[k]) * si[k]
                        v = v / sj
                        ng[k] += v if v < 0.0 else 0.0
                        orow[k] = np.sqrt(0.0 if v < 0.0 else v)
                for j in range(j0, j1):  # the tile transposed: Tt[i - i0, j - j0] = T[j, i]
                    for i in range(i0, i1):
                        Tt[i - i0, j - j0] = T[j, i]
                for i in range(i0, i1):  # out[i, j], j < i
                    hi = min(j1, i)
                    if hi <= j0:
                        continue
                    si = s[i]
                    tr = Tt[i - i0, : hi - j0]
                    orow = out[i, j0:hi]
                    sj = s[j0:hi]
                    ng = neg[j0:hi]
                    for k in range(hi - j0):
                        w = tr[k] * sj[k]
                        w = w / si
                        ng[k] += w if w < 0.0 else 0.0
                        orow[k] = np.sqrt(0.0 if w < 0.0 else w)


def lca_products_tile(
    acc: np.ndarray,
    Gs: np.ndarray,
    sq_rows: np.ndarray,
    sq_cols: np.ndarray,
    h2: np.ndarray,
    small: bool,
    reset: bool = True,
) -> None:
    """:func:`lca_product_tile`, or its NumPy twin (:func:`_small.lca_factor_tile` scale by scale, the
    same bits) when the whole product is ``small``."""
    if not small:
        lca_product_tile(acc, Gs, sq_rows, sq_cols, h2, reset)
        return
    if reset:
        acc.fill(1.0)
    for k in range(Gs.shape[0]):
        _small.lca_factor_tile(acc, Gs[k], sq_rows[k], sq_cols[k], float(h2[k]))


def tile_condensed(acc: np.ndarray, out: np.ndarray, i0: int, j0: int, m: int, small: bool) -> None:
    """:func:`tile_to_condensed`, or its NumPy twin when the whole product is ``small``; with a square
    ``out`` (``m x m``), :func:`tile_to_square` (its NumPy twin for ``small``)."""
    if out.ndim == 2:
        (tile_to_square.py_func if small else tile_to_square)(acc, out, i0, j0)
    else:
        (_small.tile_to_condensed if small else tile_to_condensed)(acc, out, i0, j0, m)


def small_product(pairs: int, n_scales: int) -> bool:
    """Whether an HD-LCA product of ``pairs`` pairs over ``n_scales`` scales takes the NumPy twins."""
    return pairs * n_scales <= twins.SMALL_WORK


def sqrt_densities(T: np.ndarray, s: np.ndarray, dtype, block: int = 64) -> tuple[np.ndarray, float]:
    """:func:`_sqrt_densities` of the upper triangle ``T`` into a new array of ``dtype``; and the
    clipped mass per row."""
    m = T.shape[0]
    out = np.empty(T.shape, dtype=dtype)
    negp = np.zeros(((m + block - 1) // block, m), dtype=np.float64)
    _sqrt_densities(T, s, out, negp, block)
    return out, max(0.0, -float(negp.sum()) / max(m, 1))


def lca_factor(
    out: np.ndarray,
    G: np.ndarray,
    sq_rows: np.ndarray,
    sq_cols: np.ndarray,
    h2: float,
    i0: int,
    c0: int,
    m: int,
    small: bool,
) -> None:
    """:func:`lca_factor_condensed`, or its NumPy twin (same bits) when the whole product is ``small``."""
    (_small.lca_factor_condensed if small else lca_factor_condensed)(out, G, sq_rows, sq_cols, h2, i0, c0, m)


#: Rows of ``X`` whose entries :func:`column_gram_csr` splits by output block at a time (fewer where
#: the split positions, 8 bytes per row and block, would pass :data:`GRAM_SPLIT_BYTES`: many features).
GRAM_CHUNK_ROWS = 1 << 14
GRAM_SPLIT_BYTES = 1 << 26


@njit(parallel=True, cache=True, nogil=True)
def _gram_csr(indptr, indices, data, m, rows_per_block, order, out, chunk):  # pragma: no cover - compiled
    """Upper triangle of ``out = X^T X`` for CSR ``X`` (sorted indices), one block of output rows per task.

    Each task owns ``rows_per_block`` rows ``a`` of ``out`` (a block small enough to stay in L2):
    ``out[a, b] += x_a x_b`` for ``b >= a``, over the rows of ``X`` in order, ``chunk`` rows at a
    time. A value is thus summed over the samples in their order, by one thread, whatever the
    thread count. Where each row's entries enter each block is found once per row (one merge of
    the row with the block edges), not by every task.
    """
    n = indptr.shape[0] - 1
    nb = order.shape[0]
    split = np.empty((min(chunk, max(n, 1)), nb + 1), dtype=np.int64)
    for c0 in range(0, n, chunk):
        c1 = min(n, c0 + chunk)
        for r in prange(c1 - c0):
            p = indptr[c0 + r]
            p1 = indptr[c0 + r + 1]
            for b in range(nb + 1):
                edge = min(b * rows_per_block, m)
                while p < p1 and indices[p] < edge:
                    p += 1
                split[r, b] = p
        for t in prange(nb):
            blk = order[t]
            for r in range(c1 - c0):
                p1 = indptr[c0 + r + 1]
                for p in range(split[r, blk], split[r, blk + 1]):
                    a = indices[p]
                    va = data[p]
                    for q in range(p, p1):
                        out[a, indices[q]] += va * data[q]


def column_gram_csr(X) -> np.ndarray:
    """Dense ``X^T X`` (m x m, float64) of a CSR matrix without the sparse product's m x m CSR result.

    About ``sum_i nnz_i^2 / 2`` multiply-adds, in parallel over blocks of output rows; each entry
    is summed over the rows of ``X`` in order (deterministic for any thread count; exact, hence
    equal to any other order, for integer counts divided by powers of two). scipy's sparse
    product builds the m x m result as CSR, in two passes on one thread.
    """
    X = require_canonical(X)
    m = X.shape[1]
    out = np.zeros((m, m))
    rows_per_block = max(1, (1 << 15) // max(1, m))  # 256 KiB of output rows per task
    nb = -(-m // rows_per_block)
    # blocks in the order 0, nb-1, 1, nb-2, ...: the triangle's long and short rows alternate, so
    # prange's static chunks get about the same work
    order = np.empty(nb, dtype=np.int64)
    order[0::2] = np.arange((nb + 1) // 2)
    order[1::2] = np.arange(nb - 1, (nb + 1) // 2 - 1, -1)[: nb // 2]
    chunk = max(1, min(GRAM_CHUNK_ROWS, GRAM_SPLIT_BYTES // (8 * (nb + 1))))
    _gram_csr(X.indptr, X.indices, X.data, m, rows_per_block, order, out, chunk)  # index arrays as they are
    out += np.triu(out, 1).T  # mirror (adds to exact zeros)
    return out


@njit(parallel=True, cache=True, nogil=True)
def centred_csr_matvec(indptr, indices, data, x, u, v, out):  # pragma: no cover - compiled
    """``out = A x - u (v . x)`` for CSR ``A`` (sorted indices): a product with centred values.

    ``v . x`` is summed in order on one thread, then each ``out[i]`` over row ``i``'s stored entries
    in order by one thread: the same bits at any thread count and on any CPU (no reassociation).
    """
    c = 0.0
    for j in range(v.shape[0]):
        c += v[j] * x[j]
    for i in prange(out.shape[0]):
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            s += data[p] * x[indices[p]]
        out[i] = s - u[i] * c


@njit(parallel=True, cache=True, nogil=True)
def _column_absmax(indices, data, out):  # pragma: no cover - compiled
    """``out[t, j] = max |data[p]|`` over the stored entries ``p`` of column ``j`` in part ``t`` of the entries."""
    parts, nnz = out.shape[0], data.size
    for t in prange(parts):
        for p in range(nnz * t // parts, nnz * (t + 1) // parts):
            v = abs(data[p])
            if v > out[t, indices[p]]:
                out[t, indices[p]] = v


def column_absmax_csr(X, parts: int | None = None) -> np.ndarray:
    """Largest ``|x|`` of each column of a sparse matrix (0 for a column without entries), float64.

    One pass over the stored values of the door's canonical CSR (:func:`require_canonical`), in
    parts whose maxima are then combined: a maximum is exact, so the same bits for any part count.
    scipy's ``abs(X).max(axis=0)`` copies ``|X|`` and converts it to CSC, many times slower on
    millions of rows.
    """
    X = require_canonical(X)
    m = X.shape[1]
    if parts is None:  # about 2^20 entries a part; at most 2^24 partial maxima
        parts = min(64, max(1, X.data.size >> 20), max(1, (1 << 24) // max(1, m)))
    out = np.zeros((parts, m), dtype=X.data.dtype)
    _column_absmax(X.indices, X.data, out)
    return out.max(axis=0).astype(np.float64)


@njit(parallel=True, cache=True, nogil=True)
def _column_presence(indptr, indices, data, new_column, out_indptr, out_indices, fill):  # pragma: no cover - compiled
    """Per row, the non-zero entries of ``X`` in the columns that ``new_column`` maps (>= 0), renumbered:
    counted into ``out_indptr[i + 1]``, or (``fill``) written from ``out_indptr[i]`` into ``out_indices``."""
    n = indptr.shape[0] - 1
    for i in prange(n):
        q = out_indptr[i] if fill else 0
        for p in range(indptr[i], indptr[i + 1]):
            j = new_column[indices[p]]
            if j >= 0 and data[p] != 0:
                if fill:
                    out_indices[q] = j
                q += 1
        if not fill:
            out_indptr[i + 1] = q


def column_presence_csr(X, cols: np.ndarray):
    """The 0/1 presence matrix of the columns ``cols`` (ascending) of a sparse matrix, as a float64 CSR matrix.

    ``B[i, t] = 1`` where ``X[i, cols[t]] != 0`` (``X`` canonical: :func:`require_canonical`). Two compiled
    passes (count, then fill), in parallel over the rows, over the stored entries, instead of scipy's column
    indexing (a serial copy) and ``eliminate_zeros``. Column order is kept, so the rows stay sorted.
    """
    X = require_canonical(X)
    new_column = np.full(X.shape[1], -1, dtype=np.int64)
    new_column[cols] = np.arange(cols.size)
    indptr = np.zeros(X.shape[0] + 1, dtype=np.int64)
    _column_presence(X.indptr, X.indices, X.data, new_column, indptr, np.empty(0, dtype=np.int32), False)
    np.cumsum(indptr, out=indptr)
    nnz = int(indptr[-1])
    index_type = np.int32 if max(nnz, cols.size) < 2**31 else np.int64
    indices = np.empty(nnz, dtype=index_type)
    _column_presence(X.indptr, X.indices, X.data, new_column, indptr, indices, True)
    return sp.csr_matrix((np.ones(nnz), indices, indptr.astype(index_type)), shape=(X.shape[0], cols.size))


@njit(parallel=True, cache=True, nogil=True)
def _nearest_centres(Z, C, near, dist):  # pragma: no cover - compiled
    """Each row's ``near.shape[1]`` nearest rows of ``C`` by (squared distance, index), in parallel over rows."""
    n, d = Z.shape
    count = near.shape[1]
    for i in prange(n):
        for t in range(count):
            near[i, t] = -1
            dist[i, t] = np.inf
        for p in range(C.shape[0]):
            s = 0.0
            for k in range(d):
                e = Z[i, k] - C[p, k]
                s += e * e
            if near[i, count - 1] >= 0 and s >= dist[i, count - 1]:
                continue  # ties keep the smaller index (p ascends)
            t = count - 1
            while t > 0 and (near[i, t - 1] < 0 or dist[i, t - 1] > s):
                near[i, t] = near[i, t - 1]
                dist[i, t] = dist[i, t - 1]
                t -= 1
            near[i, t] = p
            dist[i, t] = s


def nearest_centres(Z: np.ndarray, centres: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    r"""The ``count`` nearest centres of each row: :math:`\lVert z_i - c_p\rVert_2^2` summed over the
    columns in order (the same bits on any CPU and thread count), ascending by (distance, index).

    k-means' assignment step (:func:`hdtwd_cli.knn._search.partitions`) without an n x p matrix: one
    pass, where NumPy's ``|z|^2 - 2 z.c + |c|^2`` and a stable argsort would form and sort that
    matrix (and give bits that depend on BLAS).

    Returns
    -------
    near : ndarray of int64, shape (n, min(count, p))
    dist : ndarray of float64, same shape: the squared distances.
    """
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    centres = np.ascontiguousarray(centres, dtype=np.float64)
    count = min(count, centres.shape[0])
    near = np.empty((Z.shape[0], count), dtype=np.int64)
    dist = np.empty((Z.shape[0], count), dtype=np.float64)
    if count > 0:
        _nearest_centres(Z, centres, near, dist)
    return near, dist


@njit(cache=True, nogil=True)
def _mean_coordinates(mu, V):  # pragma: no cover - compiled
    """``mu V``: each ``sum_j mu[j] V[j, k]`` over ``j`` in order."""
    r = V.shape[1]
    out = np.zeros(r)
    for j in range(mu.shape[0]):
        mj = mu[j]
        for k in range(r):
            out[k] += mj * V[j, k]
    return out


#: Rows and columns of one tile of :func:`reconstruct_tiles`: the tile's 512 columns of ``Vt`` (``r x 512``
#: float64, 200 KB at rank 50) stay in the L2 cache while its 16 rows are written, so ``Vt`` is read from
#: memory once per 16 rows instead of once per row (docs/performance.md, "Tricks").
TILE_ROWS = 16
TILE_COLS = 512


@njit(parallel=True, cache=True, nogil=True)
def reconstruct_tiles(Z, mu, Vt, out, tile_rows, tile_cols):  # pragma: no cover - compiled
    """``out[i, j] = mu[j] + sum_k Z[i, k] Vt[k, j]``, the products added over ``k`` in order onto
    ``mu[j]``: every element the same operations in the same order whatever the tiling, so the bits of
    one row at a time. In tiles of ``tile_rows x tile_cols`` (one per thread at a time), which keep the
    tile's columns of ``Vt`` in cache across its rows; each row's tile is summed in a buffer of its own
    (written to ``out`` at the end), which LLVM vectorises where it left the sums into ``out`` scalar
    (docs/performance.md, "Tricks")."""
    n, m = out.shape
    r = Z.shape[1]
    gi = (n + tile_rows - 1) // tile_rows
    gj = (m + tile_cols - 1) // tile_cols
    for t in prange(gi * gj):
        i0 = (t // gj) * tile_rows
        j0 = (t % gj) * tile_cols
        i1 = min(n, i0 + tile_rows)
        j1 = min(m, j0 + tile_cols)
        w = j1 - j0
        acc = np.empty(w)  # the row's tile, summed in a buffer of its own: LLVM vectorises its loop
        for i in range(i0, i1):
            for j in range(w):
                acc[j] = mu[j0 + j]
            for k in range(r):
                zk = Z[i, k]
                vk = Vt[k, j0:j1]
                for j in range(w):
                    acc[j] += zk * vk[j]
            for j in range(w):
                out[i, j0 + j] = acc[j]


@njit(parallel=True, cache=True, nogil=True)
def reconstruct_rows(F, mu, V, Vt, out):  # pragma: no cover - compiled
    """``out[i] = mu + (F[i] V - mu V) V^T`` for every row, each row's bits its own (:mod:`._denoise`).

    The coordinates ``z_k = sum_j F_ij V_jk - sum_j mu_j V_jk``: the first sum over the row's
    non-zero values in column order (a zero adds nothing: skipping it keeps the bits), the second
    once per call, in order; the reconstruction ``mu_j + sum_k z_k Vt_kj`` over ``k`` in order
    (:func:`reconstruct_tiles`). A row's bits never depend on the other rows of its block (a BLAS
    product's would, through its blocking), so a sample's denoised values are the same in any block,
    on one process or on a Dask worker. Reading only the non-zeros makes the coordinates ``nnz x r``
    rather than ``m x r`` multiply-adds (cells over all their genes: a twentieth).
    """
    n, m = F.shape
    r = V.shape[1]
    muV = _mean_coordinates(mu, V)
    Z = np.empty((n, r))
    for i in prange(n):
        z = np.zeros(r)
        for j in range(m):
            f = F[i, j]
            if f != 0.0:
                for k in range(r):
                    z[k] += f * V[j, k]
        for k in range(r):
            Z[i, k] = z[k] - muV[k]
    reconstruct_tiles(Z, mu, Vt, out, TILE_ROWS, TILE_COLS)


@njit(parallel=True, cache=True, nogil=True)
def reconstruct_rows_csr(indptr, indices, data, mu, V, Vt, out):  # pragma: no cover - compiled
    """:func:`reconstruct_rows` of a CSR block (sorted indices, no duplicates) without its dense copy.

    The stored values in column order, a stored zero skipped: the same products and sums in the
    same order as the dense kernel on ``toarray()``, hence the same bits, without the ``n x m``
    dense values.
    """
    n = out.shape[0]
    r = V.shape[1]
    muV = _mean_coordinates(mu, V)
    Z = np.empty((n, r))
    for i in prange(n):
        z = np.zeros(r)
        for p in range(indptr[i], indptr[i + 1]):
            f = data[p]
            if f != 0.0:
                j = indices[p]
                for k in range(r):
                    z[k] += f * V[j, k]
        for k in range(r):
            Z[i, k] = z[k] - muV[k]
    reconstruct_tiles(Z, mu, Vt, out, TILE_ROWS, TILE_COLS)
