r"""HD-LCA and hyperbolic binary tree decoding (paper Sec. 3.3-3.4, Props. 1 & 3, Alg. 1; docs/method.md section 3).

Per scale the hyperbolic LCA of two leaves is their geodesic midpoint, whose height is
(Prop. 1)

.. math:: \mathrm{proj}_k(j,j') = \sqrt{\lVert\psi_j^k - \psi_{j'}^k\rVert^2/4 + 2^{k-4}},

and the HD-LCA value is their geometric mean over scales (Prop. 3)

.. math:: a(j,j') = \Big(\prod_{k=0}^{K} \mathrm{proj}_k(j,j')\Big)^{1/(K+1)}.

Alg. 1 merges pairs in INCREASING ``a`` (most similar first) as single linkage does: Kruskal's
algorithm on the complete graph weighted by ``a``, i.e. a minimum spanning tree. Ties are broken
by ``(a, min(j,j'), max(j,j'))``. Internal nodes are embedded at the geodesic midpoint of their
two children at every scale, and each child's edge weight is
:math:`\sum_k d_{\mathbb H}(z^k_{child}, z^k_{parent}) = \tfrac12 d_{\mathcal M}(z_A, z_B)`.
"""

from __future__ import annotations

import math
import queue
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from numpy.typing import DTypeLike

from hdtwd_cli._defaults import EDGE_WEIGHTS, LINKAGES
from hdtwd_cli._runtime.blas import gram_upper, on_every_core
from hdtwd_cli.tree._hyperbolic import (
    DensityOperator,
    HyperbolicEmbedding,
    hyperbolic_embedding,
    scale_heights,
)
from hdtwd_cli.tree._kernels import (
    lca_factor,
    lca_products_tile,
    small_product,
    tile_condensed,
)
from hdtwd_cli.tree._linkage import (
    complete_linkage,
    square_fits,
    untied_complete_linkage,
)
from hdtwd_cli.tree._tree import Tree

#: Precision of the Gram matrices :math:`\Psi_k\Psi_k^\top` of the tree's HD-LCA values
#: (:func:`hd_lca_products`): ``psi`` is computed in float64 and rounded once. With
#: :data:`hdtwd_cli.tree._diffusion.POWER_DTYPE` (the float32 ``S^t``) the stated tolerance is ``log a``
#: within 2e-5 of the all-float64 computation; on pbmc68k, Zeisel and CBMC the trees are the same
#: as with float64 (docs/method.md section 3; tests/test_diffusion.py and tests/test_tree.py
#: compare the precisions).
PRODUCT_DTYPE = np.float32

_TILE_ROWS = 512  # rows of a tile of the stored-embedding product: 512 x 2,048 (A and B packed by BLAS
# once per 1 M pairs: half the packing of 256 rows, the same bits; 64 rows changes them)
_TILE_COLS = 2048


def lca_log(g: np.ndarray, n_scales: int) -> np.ndarray:
    r""":math:`\log a = \log g / (2(K+1))`, IN PLACE on the condensed product ``g``; returns ``g``."""
    for c in _chunks(g):
        np.log(c, out=c)
        c *= 0.5 / n_scales
    return g


def _chunks(g: np.ndarray, step: int = 1 << 24) -> Iterator[np.ndarray]:
    """Views of ``g`` of ``step`` values: in-place passes over a condensed vector stay in cache-sized pieces."""
    for c0 in range(0, g.shape[0], step):
        yield g[c0 : c0 + step]


def hd_lca(emb: HyperbolicEmbedding, block: int | None = None, dtype: DTypeLike = PRODUCT_DTYPE) -> np.ndarray:
    r"""Condensed HD-LCA values :math:`\log a(j,j')` for all pairs ``j < j'`` (Prop. 3).

    .. math:: \log a(j,j') = \frac{1}{K+1}\sum_{k=0}^{K} \tfrac12
              \log\big(\lVert\psi_j^k-\psi_{j'}^k\rVert^2/4 + 2^{k-4}\big)
              = \frac{\log g(j,j')}{2(K+1)}

    with ``g`` the blocked product of :func:`hd_lca_product`; the logarithm is taken in place.

    Returns
    -------
    ndarray, shape (m*(m-1)/2,)
        In the order of :func:`scipy.spatial.distance.squareform` (row-major upper triangle).
    """
    return lca_log(hd_lca_product(emb, block, dtype=dtype), emb.n_scales)


def hd_lca_dense(emb: HyperbolicEmbedding) -> np.ndarray:
    r"""Condensed :math:`\log a(j,j')` computed directly (SciPy ``pdist`` per scale); reference for tests."""
    from scipy.spatial.distance import pdist

    acc = np.zeros(emb.n_features * (emb.n_features - 1) // 2)
    for k in range(emb.n_scales):
        acc += np.log(pdist(emb.psi[k], "sqeuclidean") / 4.0 + emb.heights[k] ** 2)
    return acc * (0.5 / emb.n_scales)


def lca_block_rows(m: int, budget_bytes: int = 1 << 27) -> int:
    """Rows per block of the streamed product: one ``rows x m`` float64 buffer within ``budget_bytes``.

    All ``m`` rows (one symmetric product) when the ``m x m`` Gram matrix fits in twice the budget.
    """
    if 8 * m * m <= 2 * budget_bytes:
        return max(m, 1)
    return int(max(16, min(2048, budget_bytes // (8 * max(m, 1)))))


def _norms(psi: np.ndarray) -> np.ndarray:
    r""":math:`\lVert\psi_j\rVert^2` per row, accumulated in float64."""
    return np.einsum("ij,ij->i", psi, psi, dtype=np.float64)


def _multiply_scale(
    g: np.ndarray, psi: np.ndarray, h2: float, block: int, small: bool, progress: Callable[[int], None] | None
) -> None:
    r"""``g *=`` one scale's factor :math:`\lVert\psi_j-\psi_{j'}\rVert^2/4 + h^2` over the upper triangle.

    Per row block ``I``: one BLAS product :math:`\Psi[I]\,\Psi[i_0+1:]^\top` and one compiled pass
    (:func:`_kernels.lca_factor`) that multiplies the factor into the block's condensed rows.
    With one block of all rows the product is the Gram matrix :math:`\Psi\Psi^\top`, a symmetric
    rank-k update in BLAS (half the flops of a general product).
    """
    m = psi.shape[0]
    sq = _norms(psi)
    if block >= m:
        G = gram_upper(psi)
        lca_factor(g, G, sq, sq, h2, 0, 0, m, small)
        del G
        if progress is not None:
            progress(m - 1)
        return
    for i0 in range(0, m - 1, block):
        i1 = min(i0 + block, m - 1)
        G = psi[i0:i1] @ psi[i0 + 1 :].T
        lca_factor(g, G, sq[i0:i1], sq[i0 + 1 :], h2, i0, i0 + 1, m, small)
        del G
        if progress is not None:
            progress(i1 - i0)


def _tiled_products(
    emb: HyperbolicEmbedding,
    scales: Sequence[int],
    rows: int,
    progress: Callable[[int], None] | None,
    square: bool = False,
) -> dict[int, np.ndarray]:
    r"""Condensed products for each ``K`` in ``scales`` from the stored ``psi``, tile by tile.

    Per tile of ``rows x _TILE_COLS`` pairs: the Gram tiles :math:`\Psi_k[I]\Psi_k[J]^\top` of
    every scale (one BLAS product each, into a reused buffer), then one compiled pass per wanted
    ``K`` multiplies the factors of the scales since the previous one into an accumulator that
    stays in cache (:func:`_kernels.lca_products_tile`) and the tile is copied out. Every pair
    sees ``1 * f_0 * f_1 * ...`` in this order, as in :func:`_multiply_scale`. ``square``: the
    outputs are the symmetric ``m x m`` matrices instead (the same values at ``[i, j]`` and
    ``[j, i]``, diagonal not written), which complete linkage works on in place
    (:func:`hd_lca_product_merge_order`).

    The row blocks of ``rows`` rows run on every core (:func:`hdtwd_cli._runtime.blas.on_every_core`),
    each with single-threaded BLAS calls and its own buffers; a tile's values depend on its operands
    alone and the blocks write disjoint pairs, so the result has the same bits at any thread count.
    """
    m = emb.n_features
    want = sorted({int(K) for K in scales})
    K1 = want[-1] + 1
    sqs = np.stack([_norms(emb.psi[k]) for k in range(K1)])
    hh = np.array([float(h) ** 2 for h in emb.heights[:K1]])  # as the streamed schedule squares them
    shape = (m, m) if square else (m * (m - 1) // 2,)
    out = {K: np.empty(shape, dtype=np.float64) for K in want}
    small = small_product(m * (m - 1) // 2, K1)
    spare: queue.SimpleQueue[tuple[np.ndarray, np.ndarray]] = queue.SimpleQueue()  # one set per thread at work

    def row_block(i0: int) -> None:
        i1 = min(i0 + rows, m - 1)
        try:
            acc, buf = spare.get_nowait()
        except queue.Empty:
            acc = np.empty((rows, _TILE_COLS), dtype=np.float64)
            buf = np.empty((K1, rows, _TILE_COLS), dtype=emb.psi.dtype)
        for j0 in range(i0 + 1, m, _TILE_COLS):
            j1 = min(j0 + _TILE_COLS, m)
            nr, nc = i1 - i0, j1 - j0
            Gs = buf if (nr, nc) == (rows, _TILE_COLS) else np.empty((K1, nr, nc), dtype=emb.psi.dtype)
            for k in range(K1):
                np.matmul(emb.psi[k][i0:i1], emb.psi[k][j0:j1].T, out=Gs[k])
            a = acc[:nr, :nc]
            k0 = 0
            for K in want:
                lca_products_tile(
                    a,
                    Gs[k0 : K + 1],
                    sqs[k0 : K + 1, i0:i1],
                    sqs[k0 : K + 1, j0:j1],
                    hh[k0 : K + 1],
                    small,
                    reset=k0 == 0,
                )
                tile_condensed(a, out[K], i0, j0, m, small)
                k0 = K + 1
        spare.put((acc, buf))

    def finished(i0: int) -> None:
        if progress is not None:
            progress(emb.n_scales * (min(i0 + rows, m - 1) - i0))

    starts = list(range(0, m - 1, rows))
    if small:  # the NumPy twins: no threads for a small product
        for i0 in starts:
            row_block(i0)
            finished(i0)
    else:
        on_every_core(row_block, starts, finished)
    return out


def _tiled(m: int, width: int, n_scales: int, dtype: DTypeLike) -> bool:
    """The schedule of the product: tiled over a stored embedding when it is no larger than the output."""
    return n_scales * width * np.dtype(dtype).itemsize <= 4 * (m - 1)


def _products(
    m: int,
    width: int,
    scales: Sequence[int],
    stored: Callable[[], HyperbolicEmbedding],
    scale: Callable[[int], tuple[np.ndarray, float]],
    block: int | None,
    progress: Callable[[int], None] | None,
    dtype: DTypeLike,
    square: bool = False,
) -> tuple[dict[int, np.ndarray], np.ndarray]:
    """The two schedules of :func:`hd_lca_products`; ``stored()`` gives the embedding in ``dtype``,
    ``scale(k)`` one scale's ``psi`` in ``dtype`` and its clipped mass."""
    Kmax = max(scales)
    if _tiled(m, width, Kmax + 1, dtype):
        emb = stored()
        return _tiled_products(
            emb, scales, _TILE_ROWS if block is None else max(1, int(block)), progress, square
        ), emb.negative_mass[: Kmax + 1]
    block = lca_block_rows(m) if block is None else max(1, int(block))
    small = small_product(m * (m - 1) // 2, Kmax + 1)
    heights = scale_heights(Kmax)
    neg = np.empty(Kmax + 1, dtype=np.float64)
    g = np.ones(m * (m - 1) // 2, dtype=np.float64)
    out: dict[int, np.ndarray] = {}
    for k in range(Kmax + 1):
        psi, neg[k] = scale(k)
        _multiply_scale(g, psi, float(heights[k]) ** 2, block, small, progress)
        del psi
        if k in scales:
            out[k] = g if k == Kmax else g.copy()
    return out, neg


def hd_lca_product(
    emb: HyperbolicEmbedding,
    block: int | None = None,
    progress: Callable[[int], None] | None = None,
    dtype: DTypeLike = PRODUCT_DTYPE,
) -> np.ndarray:
    r"""Condensed :math:`g(j,j') = \prod_{k=0}^{K} \big(\lVert\psi_j^k-\psi_{j'}^k\rVert^2/4 + 2^{k-4}\big)`.

    :math:`g = a^{2(K+1)}` is a monotone function of the HD-LCA value (Prop. 3), so single and
    complete linkage on ``g`` give the same merges as on :math:`a` and
    :math:`\log a = \log g / (2(K+1))` (docs/method.md section 6). The schedule and the
    precision are those of :func:`hd_lca_products` (``psi`` rounded to ``dtype`` for the BLAS
    products), so a stored embedding gives the same bits as the operator it came from.

    Parameters
    ----------
    block : int, optional
        Rows per tile or per block.
    progress : callable, optional
        Called with the number of rows finished times the scales they covered
        (``(K + 1)(m - 1)`` in all).
    dtype : float32 or float64
        Precision of the BLAS products (:data:`PRODUCT_DTYPE`).

    Returns
    -------
    ndarray, shape (m*(m-1)/2,)
        In the order of :func:`scipy.spatial.distance.squareform`.
    """
    K = emb.n_scales - 1

    def stored() -> HyperbolicEmbedding:
        return HyperbolicEmbedding(
            psi=emb.psi.astype(dtype, copy=False), heights=emb.heights, negative_mass=emb.negative_mass
        )

    def scale(k: int) -> tuple[np.ndarray, float]:
        return emb.psi[k].astype(dtype, copy=False), float(emb.negative_mass[k])

    return _products(emb.n_features, emb.psi.shape[2], [K], stored, scale, block, progress, dtype)[0][K]


def hd_lca_products(
    op: DensityOperator,
    scales: Sequence[int],
    block: int | None = None,
    progress: Callable[[int], None] | None = None,
    dtype: DTypeLike = PRODUCT_DTYPE,
    square: bool = False,
) -> tuple[dict[int, np.ndarray], np.ndarray]:
    r""":func:`hd_lca_product` for each ``K`` in ``scales``, straight from the operator.

    Two schedules, the same values (every pair sees ``1 * f_0 * f_1 * ...``):

    - the embedding (:math:`(K+1)\,m\,m'` values of ``dtype``) is no larger than the condensed
      output (landmarks: :math:`(K+1)m' < m` in float32): it is stored and the product is tiled
      (:func:`_tiled_products`), whose accumulators stay in cache;
    - otherwise (the exact operator, :math:`m' = m`) the scales are streamed: scale ``k`` is
      embedded (``op.sqrt_densities``: :math:`\psi^k = \sqrt{P^{2^{-k}}}` in float64 rounded to
      ``dtype``, as :func:`_hyperbolic.hyperbolic_embedding`), multiplied into the running
      condensed product (:func:`_multiply_scale`) and dropped: one scale's ``psi`` at a time.

    ``dtype`` is the precision of the BLAS products (:data:`PRODUCT_DTYPE`). ``square``: where the
    schedule is tiled, each ``g`` is the symmetric ``m x m`` matrix instead of the condensed vector
    (complete linkage runs on it in place: no condensed copy, ``8 m^2`` bytes in all instead of
    ``12 m^2``; at 20,000 features 3.2 GB instead of 4.8 GB); the streamed schedule ignores it.

    Returns
    -------
    products : dict
        ``K -> g`` (condensed, as :func:`hd_lca_product`; or square, see ``square``).
    negative_mass : ndarray, shape (max(scales) + 1,)
        As :attr:`_hyperbolic.HyperbolicEmbedding.negative_mass`.
    """
    return _products(
        op.n_features,
        op.density_width,
        scales,
        lambda: hyperbolic_embedding(op, max(scales), dtype=dtype),
        lambda k: op.sqrt_densities(2.0**-k, dtype),
        block,
        progress,
        dtype,
        square,
    )


def square_linkage_fits(m: int) -> bool:
    """Whether complete linkage runs on a square matrix (:func:`_linkage.complete_linkage`): where the
    ``m x m`` matrix takes at most half of the available memory; else the same chain runs on the
    condensed vector in place. Only the speed and the memory depend on it, never the merges.
    """
    from hdtwd_cli._runtime.memory import available_memory

    return square_fits(m, available_memory())


def hd_lca_product_merge_order(
    g: np.ndarray, m: int, n_scales: int, linkage_rule: str = "single"
) -> tuple[np.ndarray, np.ndarray]:
    r"""Merges from the condensed HD-LCA product ``g`` (:func:`hd_lca_product`); large-m path.

    ``single`` (SciPy's MST, no copy of ``g``) and ``complete`` (the compiled nearest-neighbour
    chain of :mod:`hdtwd_cli.tree._linkage`: on a square copy, 16 bytes per pair, where it takes at
    most half of the available memory, else on ``g`` itself in place) take ``g`` as it is: they
    depend only on the order of the values, so the merges are those of :math:`a`, exactly.
    ``average`` and ``weighted`` need :math:`a` itself: ``g`` is overwritten IN PLACE by
    :math:`a = g^{1/(2(K+1))}` first, exactly as well. Unlike :func:`hd_lca_merge_order`, exact
    ties are broken by the algorithm's scan order (no ``(a, min, max)`` rank transform, which costs
    16 more bytes per pair): one fixed rule per linkage, whatever the available memory, since
    every route of complete linkage (a square copy, a square ``g`` from
    ``hd_lca_products(square=True)`` worked on in place, the condensed ``g`` in place) runs the same
    chain with the same comparisons (:mod:`hdtwd_cli.tree._linkage`, "Ties").

    Returns
    -------
    children, merge_log_a : as :func:`hd_lca_merge_order`.
    """
    if m < 2:
        raise ValueError("at least two features are needed to build a tree")
    if linkage_rule not in LINKAGES:
        raise ValueError(f"unknown linkage {linkage_rule!r}; choose from {', '.join(LINKAGES)}")
    power = 0.5 / n_scales
    if g.ndim == 2:  # the square product (hd_lca_products(square=True)): complete linkage in place
        if linkage_rule != "complete":
            raise ValueError("the square product is for complete linkage")
        children, heights = complete_linkage(g, m)
        return children, np.log(heights) * power
    if linkage_rule == "complete":
        children, heights = complete_linkage(g, m, in_place=not square_linkage_fits(m))
        return children, np.log(heights) * power
    from scipy.cluster.hierarchy import (
        linkage,  # here: reading a tree does not pay for scipy.cluster
    )

    if linkage_rule == "single":
        Z = linkage(g, method=linkage_rule)
        merge_log_a = np.log(Z[:, 2]) * power
    else:
        for c in _chunks(g):
            np.power(c, power, out=c)
        Z = linkage(g, method=linkage_rule)
        merge_log_a = np.log(Z[:, 2])
    children = np.sort(Z[:, :2].astype(np.int64), axis=1)
    return children, merge_log_a


def stable_argsort(x: np.ndarray) -> np.ndarray:
    """``np.argsort(x, kind="stable")`` (equal values in index order), from NumPy's faster default sort.

    The default (SIMD) sort is much faster than the stable one on millions of values;
    runs of equal values, rare in practice, are then put in index order by a lexsort of the tied
    entries only. The result is the unique order by ``(x, index)``, so it is identical to the
    stable sort's.
    """
    order = np.argsort(x)
    sv = x[order]
    tied = np.flatnonzero(sv[1:] == sv[:-1])
    del sv
    if tied.size:
        pos = np.union1d(tied, tied + 1)
        idx = order[pos]
        order[pos] = idx[np.lexsort((idx, x[idx]))]
    return order


def hd_lca_merge_order(log_a: np.ndarray, m: int, linkage_rule: str = "single") -> tuple[np.ndarray, np.ndarray]:
    r"""Agglomerative merges on the HD-LCA values, most similar (smallest ``a``) first.

    ``single`` is Alg. 1 (Kruskal in increasing ``a``), with ties broken by
    ``(a, min(j,j'), max(j,j'))``: the pairs are ranked by a stable sort of the condensed vector
    (whose order is already ``(min, max)`` lexicographic), and single linkage on the distinct
    ranks is the unique minimum spanning tree of that order (SciPy's O(m^2) MST algorithm).
    ``complete`` depends only on the order of ``a`` too and uses the same ranks (distinct, so the
    tree is unique; computed by :mod:`hdtwd_cli.tree._linkage`, on a square copy where it fits, else
    in place on the ranks: the same tree). Where the square fits the chain first runs on ``log a``
    itself: when no tie decided any of its steps (as on real data without duplicated features) its
    tree is the one of the ranks, bit for bit (:func:`_linkage.untied_complete_linkage`), and the
    sort, most of the work otherwise, is skipped. ``average`` and ``weighted`` (UPGMA / WPGMA)
    average the values of ``a`` between clusters (SciPy's nearest-neighbour chain, the only route;
    deterministic for a given input).

    The merge value recorded for each internal node is :math:`\log a` of the linkage's
    cluster distance (for ``single``, the pair that caused the merge).

    Returns
    -------
    children : ndarray of int64, shape (m-1, 2)
        Merged clusters (leaves ``< m``, the i-th merge creates node ``m + i``), smaller id first.
    merge_log_a : ndarray, shape (m-1,)
        :math:`\\log a` of the pair that caused each merge (non-decreasing).
    """
    if m < 2:
        raise ValueError("at least two features are needed to build a tree")
    if linkage_rule not in LINKAGES:
        raise ValueError(f"unknown linkage {linkage_rule!r}; choose from {', '.join(LINKAGES)}")

    square = linkage_rule == "complete" and square_linkage_fits(m)
    if square:
        untied = untied_complete_linkage(log_a, m)
        if untied is not None:
            return untied
    if linkage_rule in ("single", "complete"):
        order = stable_argsort(log_a)
        ranks = np.empty(order.shape[0], dtype=np.float64)
        ranks[order] = np.arange(order.shape[0], dtype=np.float64)
        if linkage_rule == "complete":  # distinct ranks: the unique tree, either way
            children, r = complete_linkage(ranks, m, in_place=not square)
            del ranks
            return children, log_a[order[r.astype(np.int64)]]
        from scipy.cluster.hierarchy import (
            linkage,  # here: the compiled chain needs no scipy.cluster
        )

        Z = linkage(ranks, method=linkage_rule)
        del ranks
        merge_log_a = log_a[order[Z[:, 2].astype(np.int64)]]
    else:
        from scipy.cluster.hierarchy import linkage

        Z = linkage(np.exp(log_a), method=linkage_rule)
        merge_log_a = np.log(Z[:, 2])
    children = np.sort(Z[:, :2].astype(np.int64), axis=1)
    return children, merge_log_a


def hd_binary_tree(
    emb: HyperbolicEmbedding,
    children: np.ndarray,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    r"""Edge weights of the binary tree given by ``children`` (Alg. 1, "geodesic edge weight").

    At every scale each internal node is placed at the hyperbolic geodesic midpoint of its two
    children (:func:`_hyperbolic.geodesic_midpoint`), so both children get
    :math:`d_{\mathbb H}(z_A^k, z_B^k)/2`; summed over scales the weight of each child edge is
    :math:`\tfrac12 d_{\mathcal M}(z_A, z_B)`.

    Returns
    -------
    ndarray, shape (2m-1,)
        Edge length of every node to its parent (0 for the root).
    """
    m = emb.n_features
    n_nodes = 2 * m - 1
    w = np.zeros(n_nodes, dtype=np.float64)
    ch = children.tolist()
    for k in range(emb.n_scales):
        pts = emb.psi[k].copy()
        hts = [float(emb.heights[k])] * m
        slot = list(range(m)) + [0] * (m - 1)
        for i, (a, b) in enumerate(ch):
            sa, sb = slot[a], slot[b]
            ha, hb = hts[sa], hts[sb]
            diff = pts[sa] - pts[sb]
            sq = float(diff @ diff) + (ha - hb) ** 2
            d = 2.0 * math.asinh(math.sqrt(sq) / (2.0 * math.sqrt(ha * hb)))
            w[a] += 0.5 * d
            w[b] += 0.5 * d
            wa, wb = 1.0 / ha, 1.0 / hb
            pts[sa] *= wa / (wa + wb)
            pts[sa] += pts[sb] * (wb / (wa + wb))
            hts[sa] = 2.0 * math.cosh(0.5 * d) / (wa + wb)
            slot[m + i] = sa
        if progress is not None:
            progress(1)
    return w


def lca_height_weights(heights: np.ndarray, children: np.ndarray, merge_log_a: np.ndarray) -> np.ndarray:
    r"""Edge weights from the heights of the HD-LCA points (the ``lca`` rule).

    Every node sits at its HD-LCA point :math:`\bar h = [0, \dots, 0, a]` (Def. 4): a leaf at
    :math:`a(j,j) = (\prod_k 2^{k/2-2})^{1/(K+1)}`, an internal node at the HD-LCA value of its merge.
    Both lie on the vertical geodesic of the half-space, where the hyperbolic distance is
    :math:`|\log a_{parent} - \log a_{child}|`; that is the edge weight. The tree metric is then the
    ultrametric (cophenetic) one of the linkage heights in log scale, and Prop. 4's reading of the
    HD-LCA depth as tree depth holds exactly. ``heights`` are the scales' :math:`h_k`.
    """
    m = children.shape[0] + 1
    height = np.empty(2 * m - 1, dtype=np.float64)
    height[:m] = float(np.mean(np.log(heights)))
    height[m:] = np.maximum.accumulate(np.maximum(merge_log_a, height[0]))
    parent = linkage_parents(children)
    w = np.zeros(2 * m - 1, dtype=np.float64)
    w[:-1] = height[parent[:-1]] - height[:-1]
    return np.maximum(w, 0.0)


def decode_tree(
    emb: HyperbolicEmbedding,
    leaf_names: Sequence[str],
    progress: Callable[[int], None] | None = None,
    linkage_rule: str = "single",
    edge_weights: str = "midpoint",
    tie_ranks: bool = True,
    lca_values: np.ndarray | None = None,
) -> Tree:
    r"""Decode the HD binary tree from a multi-scale hyperbolic embedding (Alg. 1).

    Parameters
    ----------
    emb : HyperbolicEmbedding
    leaf_names : sequence of str
        One unique name per feature.
    progress : callable, optional
        Called with ``1`` after the HD-LCA, the merge order and each scale of edge weights.
    linkage_rule : {"single", "average", "complete", "weighted"}
        Agglomeration rule on the HD-LCA values; ``single`` is the paper's Alg. 1.
    edge_weights : {"midpoint", "lca"}
        ``midpoint``: docs/method.md section 3 (internal nodes at geodesic midpoints, weight
        :math:`\tfrac12 d_{\mathcal M}` of the children); ``lca``: hyperbolic distance between
        the HD-LCA points of child and parent (:func:`lca_height_weights`).
    tie_ranks : bool
        ``True``: :func:`hd_lca` and :func:`hd_lca_merge_order` (ties by ``(a, min, max)``,
        24 bytes per pair; ``progress`` gets one step for it). ``False``: the large-m path, :func:`hd_lca_product` and
        :func:`hd_lca_product_merge_order` (8 bytes per pair, 16 for non-single linkages).
    lca_values : ndarray, optional
        The precomputed :func:`hd_lca_product` (it is overwritten).

    Returns
    -------
    Tree
        Rooted binary tree with ``m`` leaves and ``m - 1`` internal nodes.
    """
    m = emb.n_features
    if len(leaf_names) != m:
        raise ValueError("one leaf name per feature is needed")
    if edge_weights not in EDGE_WEIGHTS:
        raise ValueError(f"unknown edge weights {edge_weights!r}; choose from {', '.join(EDGE_WEIGHTS)}")
    if lca_values is None:
        lca_values = hd_lca_product(emb)
        if progress is not None:
            progress(1)
    children, merge_log_a = lca_merges(lca_values, m, emb.n_scales, linkage_rule, tie_ranks)
    lca_values = None  # the caller hands over its only reference: freed after the linkage
    if progress is not None:
        progress(1)
    if edge_weights == "midpoint":
        length = hd_binary_tree(emb, children, progress)
    else:
        length = lca_height_weights(emb.heights, children, merge_log_a)
    return _binary_tree(children, length, leaf_names, merge_log_a)


def lca_merges(
    g: np.ndarray, m: int, n_scales: int, linkage_rule: str = "single", tie_ranks: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    r"""Merges from the condensed HD-LCA product ``g`` (which is overwritten).

    ``tie_ranks``: :func:`hd_lca_merge_order` on :math:`\log a` (ties by ``(a, min, max)``, 24 bytes
    per pair); otherwise :func:`hd_lca_product_merge_order` (the large-m path, 8 bytes per pair,
    16 for non-single linkages).
    """
    if tie_ranks:
        return hd_lca_merge_order(lca_log(g, n_scales), m, linkage_rule)
    return hd_lca_product_merge_order(g, m, n_scales, linkage_rule)


def lca_tree(
    g: np.ndarray, heights: np.ndarray, leaf_names: Sequence[str], linkage_rule: str = "single", tie_ranks: bool = True
) -> Tree:
    """Alg. 1 with the ``lca`` edge weights, from the condensed product ``g`` alone (overwritten).

    The tree :func:`decode_tree` gives with ``edge_weights="lca"``, for the products of
    :func:`hd_lca_products` (which never store the embedding).
    """
    m = len(leaf_names)
    if g.shape[0] != (m if g.ndim == 2 else m * (m - 1) // 2):
        raise ValueError("one leaf name per feature is needed")
    children, merge_log_a = lca_merges(g, m, heights.shape[0], linkage_rule, tie_ranks)
    del g
    return _binary_tree(children, lca_height_weights(heights, children, merge_log_a), leaf_names, merge_log_a)


def linkage_parents(children: np.ndarray) -> np.ndarray:
    """Parent of every node of the linkage ``children`` (merge ``s`` creates node ``m + s``); -1 for the root."""
    m = children.shape[0] + 1
    parent = np.full(2 * m - 1, -1, dtype=np.int64)
    parent[children[:, 0]] = np.arange(m, 2 * m - 1)
    parent[children[:, 1]] = np.arange(m, 2 * m - 1)
    return parent


def _binary_tree(children: np.ndarray, length: np.ndarray, leaf_names: Sequence[str], merge_log_a: np.ndarray) -> Tree:
    parent = linkage_parents(children)
    return Tree(parent=parent, length=length, leaf_names=list(leaf_names), merge_height=np.exp(merge_log_a))
