r"""All-pairs L1 distances between SPARSE tree vectors, pruned per pair of row blocks (numba).

Documents' tree vectors are a few per cent non-zero (every word drags its ancestors: about 2.6 %
of the nodes on a 24,000-word corpus), yet the dense tiled kernel (:func:`_kernels.l1_distances`)
spends its time on columns that are zero in both rows. Row-wise sparse kernels lose to it (they
gather per pair); this one keeps the dense micro-kernel and prunes per PAIR OF ROW BLOCKS:

1. the rows are cut into blocks of ``R`` rows; each block keeps a *panel*: its support (the kept
   columns with a non-zero value in some row of the block, increasing), the values of its rows
   on that support (the same additions as :func:`_kernels.tree_vectors_csr`) and each row's sum
   in the kernel's order;
2. for a pair of blocks ``(I, J)`` the two supports are intersected, both panels are packed onto
   the intersection and the dense micro-kernel (:func:`_kernels._rows4`) sums
   :math:`\sum_k \min(a_k, b_k)` over it only; :math:`D = S_a + S_b - 2 \sum_k \min(a_k, b_k)`.

Bit-identical to :func:`_kernels.l1_distances` on the dense vectors
    The dense kernel sums the overlap of a pair as :math:`M = ((0 + m_0) + m_1) + \dots` with
    :math:`m_c = (0 + \min(a_k, b_k)) + \dots` over the columns ``k`` of pass ``c`` (``TK``
    columns, increasing). A column outside the intersection is zero in one of the two rows, so
    its term is :math:`\min(a, 0) = +0`, and adding ``+0`` to a non-negative sum is exact; here
    the shared columns are grouped by the same passes and summed in the same order, the empty
    passes add ``+0`` too, and the row sums skip only zeros. Every value is therefore the same
    float64, whatever the blocks, threads or vector width (tested against the dense kernel).

Cost: per pair of blocks ``R^2 |I n J|`` terms plus packing ``2 R |I n J|`` and the merge of the
two supports; worth it when the intersection is well below the dense width (:func:`pruned_fraction`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.jit import njit, prange
from hdtwd_cli.twd._kernels import TK, store_tile, tile_pass

__all__ = ["Panels", "row_panels", "pruned_fraction", "l1_distances_pruned", "BLOCK_ROWS"]

#: Rows per block: a pair of blocks is a 32 x 32 tile of the result (its accumulators stay in L1).
BLOCK_ROWS = 32


@njit(cache=True, nogil=True)
def _block_nodes(indptr, indices, parent, r0, r1, mark, nodes):  # pragma: no cover - compiled
    """The nodes with an entry of rows ``r0 .. r1-1`` below them (the leaves of the entries and their
    ancestors), into ``nodes`` in increasing order; returns their number. ``mark`` is all False on
    entry and on return."""
    cnt = 0
    for p in range(indptr[r0], indptr[r1]):
        v = indices[p]
        while v >= 0 and not mark[v]:  # up to the root, or to a node already met (its ancestors are too)
            mark[v] = True
            nodes[cnt] = v
            cnt += 1
            v = parent[v]
    nodes[:cnt].sort()
    for u in range(cnt):
        mark[nodes[u]] = False
    return cnt


@njit(cache=True, nogil=True)
def _block_values(indptr, indices, data, parent, r0, r1, nodes, cnt, pos, Yc):  # pragma: no cover - compiled
    """``Yc[u, r]`` = mass of row ``r0 + r`` below node ``nodes[u]`` (the additions of ``tree_vectors_csr``).

    Only the block's nodes (:func:`_block_nodes`; ``pos[v]``: the position of node ``v`` among them,
    set here): every other node holds zero mass in every row of the block. Node-major: the subtree
    sums run over all the block's rows at once (unit stride), and the support scan reads a node's
    values side by side. For each row the additions are those of ``tree_vectors_csr`` in the same
    order (the entries of the row, then the nodes by increasing id) less the additions of ``+0``
    from nodes without mass, which change nothing: the values are the same bits.
    """
    nr = r1 - r0
    for u in range(cnt):
        pos[nodes[u]] = u
        Yc[u, :nr] = 0.0
    for r in range(nr):
        for p in range(indptr[r0 + r], indptr[r0 + r + 1]):
            Yc[pos[indices[p]], r] += data[p]
    for u in range(cnt):
        c = nodes[u]
        pc = parent[c]
        if pc < 0:
            continue
        src = Yc[u, :nr]
        dst = Yc[pos[pc], :nr]
        for r in range(nr):
            dst[r] += src[r]


@njit(parallel=True, cache=True, nogil=True)
def _panels(indptr, indices, data, parent, cols, scale, R, fill, sizes, supp_ptr, supp, pan_ptr, pan, norms):
    """``fill = False``: ``sizes[b]`` = support size of block ``b``; ``fill = True``: write supports and panels.

    A kept column is in the support when its value ``y[v] * scale[v]`` is non-zero in some row;
    the panel holds those values column by column (``size x rows``), rounded to the panel's dtype.
    """  # pragma: no cover - compiled
    n = indptr.shape[0] - 1
    n_nodes = parent.shape[0]
    nb = sizes.shape[0]
    for b in prange(nb):
        r0 = b * R
        r1 = min(r0 + R, n)
        nr = r1 - r0
        mark = np.zeros(n_nodes, dtype=np.bool_)
        nodes = np.empty(n_nodes, dtype=np.int64)
        pos = np.empty(n_nodes, dtype=np.int64)
        cnt = _block_nodes(indptr, indices, parent, r0, r1, mark, nodes)
        Yc = np.empty((cnt, R))
        _block_values(indptr, indices, data, parent, r0, r1, nodes, cnt, pos, Yc)
        t = 0
        for u in range(cnt):
            v = nodes[u]
            k = cols[v]
            if k < 0:
                continue
            yv = Yc[u]
            sv = scale[v]
            nz = False
            for r in range(nr):
                if yv[r] * sv != 0.0:
                    nz = True
                    break
            if not nz:
                continue
            if fill:
                supp[supp_ptr[b] + t] = k
                base = pan_ptr[b] + t * nr
                for r in range(nr):  # column-major: a column's values side by side
                    pan[base + r] = yv[r] * sv
            t += 1
        if not fill:
            sizes[b] = t
            continue
        base = pan_ptr[b]
        for r in range(nr):  # the kernel's two-level order over the row's columns (zeros add +0)
            tot = 0.0
            acc = 0.0
            cur = -1
            for u in range(t):
                c = supp[supp_ptr[b] + u] // TK
                if c != cur:
                    tot += acc
                    acc = 0.0
                    cur = c
                acc += np.float64(pan[base + u * nr + r])
            norms[r0 + r] = tot + acc


class Panels:
    """Row blocks of sparse tree vectors: per block its support and its values on it (see module doc)."""

    def __init__(
        self,
        n: int,
        dim: int,
        R: int,
        sizes: np.ndarray,
        supp_ptr: np.ndarray,
        supp: np.ndarray,
        pan_ptr: np.ndarray,
        pan: np.ndarray,
        norms: np.ndarray,
    ) -> None:
        self.n, self.dim, self.R = n, dim, R
        self.sizes, self.supp_ptr, self.supp, self.pan_ptr, self.pan = sizes, supp_ptr, supp, pan_ptr, pan
        self.norms = norms  # row sums in the kernel's order (:func:`_kernels.row_norms`)

    @property
    def nbytes(self) -> int:
        return int(self.supp.nbytes + self.pan.nbytes)


def row_panels(
    x, parent: np.ndarray, cols: np.ndarray, scale: np.ndarray, dim: int, dtype=np.float64, R: int = BLOCK_ROWS
) -> Panels:
    """:class:`Panels` of the tree vectors of the CSR rows ``x`` (kept columns ``cols``, ``-1``: dropped)."""
    x = sp.csr_matrix(x, dtype=np.float64)
    n = x.shape[0]
    nb = -(-n // R)
    ip, ix = x.indptr.astype(np.int64), x.indices.astype(np.int64)
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    cols = np.ascontiguousarray(cols, dtype=np.int64)
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    sizes = np.zeros(nb, dtype=np.int64)
    e_i, e_p = np.empty(0, dtype=np.int64), np.empty(0, dtype=dtype)
    e_n = np.empty(0)
    _panels(ip, ix, x.data, parent, cols, scale, R, False, sizes, e_i, e_i, e_i, e_p, e_n)
    rows = np.minimum(R, n - np.arange(nb) * R)
    supp_ptr = np.zeros(nb + 1, dtype=np.int64)
    np.cumsum(sizes, out=supp_ptr[1:])
    pan_ptr = np.zeros(nb + 1, dtype=np.int64)
    np.cumsum(sizes * rows, out=pan_ptr[1:])
    supp = np.empty(int(supp_ptr[-1]), dtype=np.int64)
    pan = np.empty(int(pan_ptr[-1]), dtype=dtype)
    norms = np.zeros(n)
    _panels(ip, ix, x.data, parent, cols, scale, R, True, sizes, supp_ptr, supp, pan_ptr, pan, norms)
    return Panels(n, dim, R, sizes, supp_ptr, supp, pan_ptr, pan, norms)


def pruned_fraction(a: Panels, b: Panels | None = None, samples: int = 256, seed: int = 0) -> float:
    """Mean ``|I n J| / dim`` over (up to ``samples``) random pairs of blocks: the pruned kernel's share of the work."""
    b = a if b is None else b
    if a.dim == 0 or not a.sizes.size or not b.sizes.size:
        return 0.0
    rng = np.random.default_rng(seed)
    ii = rng.integers(0, a.sizes.size, samples)
    jj = rng.integers(0, b.sizes.size, samples)
    u = [
        _shared(a.supp[a.supp_ptr[i] : a.supp_ptr[i + 1]], b.supp[b.supp_ptr[j] : b.supp_ptr[j + 1]])
        for i, j in zip(ii, jj)
    ]
    return float(np.mean(u)) / a.dim


def _shared(p: np.ndarray, q: np.ndarray) -> int:
    """``|p n q|`` of two sorted supports without repeats: each of ``p`` looked up in ``q`` (binary search;
    ``np.intersect1d`` would sort and deduplicate both again)."""
    if not p.size or not q.size:
        return 0
    at = np.minimum(np.searchsorted(q, p), q.size - 1)
    return int(np.count_nonzero(q[at] == p))


@njit(cache=True, nogil=True)
def _pair(
    bi,
    bj,
    R,
    na,
    a_sptr,
    a_supp,
    a_pptr,
    a_pan,
    a_norm,
    nb,
    b_sptr,
    b_supp,
    b_pptr,
    b_pan,
    b_norm,
    symmetric,
    kept,
    Apw,
    Bpw,
    tot,
    acc,
    out,
):  # pragma: no cover - compiled
    """One pair of blocks: intersect the supports, pack both panels onto it, run the micro-kernel."""
    i0 = bi * R
    j0 = bj * R
    ni = min(i0 + R, na) - i0
    nj = min(j0 + R, nb) - j0
    sa0 = a_sptr[bi]
    sa = a_sptr[bi + 1] - sa0
    sb0 = b_sptr[bj]
    sb = b_sptr[bj + 1] - sb0
    pa = a_pptr[bi]
    pb = b_pptr[bj]
    w = min(sa, sb)
    ApT = Apw[: w * ni].reshape((w, ni))  # k-major: the micro-kernel reads A[i..i+3, k] side by side
    Bp = Bpw[: w * nj].reshape((w, nj))
    p = 0
    q = 0
    nk = 0
    while p < sa and q < sb:
        ca = a_supp[sa0 + p]
        cb = b_supp[sb0 + q]
        if ca < cb:
            p += 1
        elif cb < ca:
            q += 1
        else:
            kept[nk] = ca
            for r in range(ni):
                ApT[nk, r] = a_pan[pa + p * ni + r]
            for c in range(nj):
                Bp[nk, c] = b_pan[pb + q * nj + c]
            nk += 1
            p += 1
            q += 1
    Ap = ApT.T
    joff = 1 - j0 if symmetric else -(na + nb + 1)
    tot[:, :] = 0.0
    q0 = 0
    while q0 < nk:  # the shared columns, grouped by the dense kernel's passes of TK columns
        pss = kept[q0] // TK
        q1 = q0 + 1
        while q1 < nk and kept[q1] // TK == pss:
            q1 += 1
        tile_pass(Ap, 0, q0, q1 - q0, Bp, q0, acc, ni, nj, i0 + joff)
        for r in range(ni):
            for c in range(nj):
                tot[r, c] += acc[r, c]
        q0 = q1
    store_tile(out, tot, a_norm, b_norm, i0, j0, ni, nj, symmetric)


@njit(parallel=True, cache=True, nogil=True)
def _pruned_pairs(
    chunks,
    pairs,
    width,
    R,
    na,
    a_sptr,
    a_supp,
    a_pptr,
    a_pan,
    a_norm,
    nb,
    b_sptr,
    b_supp,
    b_pptr,
    b_pan,
    b_norm,
    symmetric,
    out,
):  # pragma: no cover - compiled
    """The pairs of blocks ``pairs[chunks[c]:chunks[c + 1]]`` of each chunk ``c``, one task per chunk.

    Scratch is allocated once per chunk (``width``: the largest support); a fresh
    allocation per pair of blocks would be megabytes of new pages each time.
    """
    for ch in prange(chunks.shape[0] - 1):
        kept = np.empty(width, dtype=np.int64)
        Apw = np.empty(R * width)
        Bpw = np.empty(width * R)
        tot = np.empty((R, R))
        acc = np.empty((R, R))
        for t in range(chunks[ch], chunks[ch + 1]):
            _pair(
                pairs[t, 0],
                pairs[t, 1],
                R,
                na,
                a_sptr,
                a_supp,
                a_pptr,
                a_pan,
                a_norm,
                nb,
                b_sptr,
                b_supp,
                b_pptr,
                b_pan,
                b_norm,
                symmetric,
                kept,
                Apw,
                Bpw,
                tot,
                acc,
                out,
            )
    if symmetric:
        for i in range(na):
            out[i, i] = 0.0


def l1_distances_pruned(
    A: Panels, B: Panels | None = None, dtype=np.float64, out: np.ndarray | None = None
) -> np.ndarray:
    """All L1 distances between the rows of ``A`` (and ``B``), bit for bit :func:`_kernels.l1_distances`.

    Parameters
    ----------
    A, B : Panels
        From :func:`row_panels` with the same kept columns; ``B`` omitted: the symmetric
        ``na x na`` matrix with an exact zero diagonal.
    dtype : dtype of the result
    out : ndarray, optional
        Where to write the ``na x nb`` result.
    """
    sym = B is None
    Bm: Panels = A if B is None else B
    if not sym and (A.dim != Bm.dim or A.R != Bm.R):
        raise ValueError("the two panel sets differ in width or block rows")
    if out is None:
        out = np.empty((A.n, Bm.n), dtype=np.dtype(dtype))
    na_b, nb_b = A.sizes.size, Bm.sizes.size
    ii, jj = np.meshgrid(np.arange(na_b), np.arange(nb_b), indexing="ij")
    keep = (jj >= ii) if sym else np.ones_like(ii, dtype=bool)
    pairs = np.ascontiguousarray(np.stack([ii[keep], jj[keep]], axis=1), dtype=np.int64)
    if pairs.shape[0]:
        import numba

        n_chunks = min(pairs.shape[0], 16 * numba.get_num_threads())
        chunks = np.linspace(0, pairs.shape[0], n_chunks + 1).astype(np.int64)
        width = int(min(A.sizes.max(initial=0), Bm.sizes.max(initial=0)))
        with numba.parallel_chunksize(1):  # dynamic schedule: chunks differ in cost
            _pruned_pairs(
                chunks,
                pairs,
                width,
                A.R,
                A.n,
                A.supp_ptr,
                A.supp,
                A.pan_ptr,
                A.pan,
                A.norms,
                Bm.n,
                Bm.supp_ptr,
                Bm.supp,
                Bm.pan_ptr,
                Bm.pan,
                Bm.norms,
                sym,
                out,
            )
    elif sym:
        out[np.arange(A.n), np.arange(A.n)] = 0.0
    return out
