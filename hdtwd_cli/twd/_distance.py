r"""The tree-Wasserstein distance (paper Eq. 5; docs/method.md section 4).

Samples are histograms :math:`x_i = X_i / \lVert X_i\rVert_1` over the leaves (features) of a
rooted tree with edge lengths :math:`w_v` (the paper's :math:`\alpha_v`). With ``R`` the 0/1
ancestor matrix (``R[v, j] = 1`` iff ``v`` is ``j`` or an ancestor of ``j``, root excluded),

.. math:: \mathrm{TW}(x_i, x_{i'}) = \sum_v w_v \,\big|\big(R(x_i - x_{i'})\big)_v\big|
          = \lVert y_i - y_{i'}\rVert_1, \qquad y_i = w \odot R x_i .

So the TWD is an L1 distance between the n vectors :math:`y_i` of subtree masses scaled by the
edge lengths. It equals the exact optimal-transport cost with the tree's path metric as ground
cost (Evans & Matsen 2012) and unnormalised weighted UniFrac on relative abundances.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Literal

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.memory import available_memory
from hdtwd_cli.errors import ParameterError
from hdtwd_cli.tree._denoise import DenoisedRows, HeldRows
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._histograms import check_histograms, normalize_rows
from hdtwd_cli.twd._kernels import (
    fill_tree_vectors,
    l1_distances,
    l1_distances_sparse,
    quantised_tree_vectors_csr,
    small_tree_work,
    tree_vectors_sparse,
)
from hdtwd_cli.twd._pruned import (
    BLOCK_ROWS,
    Panels,
    l1_distances_pruned,
    pruned_fraction,
    row_panels,
)

__all__ = [
    "subtree_masses",
    "tree_embedding",
    "TreeVectors",
    "tree_wasserstein",
    "distance_blocks",
    "nearest_neighbors",
    "dense_output_bytes",
    "SPARSE_KERNEL_DENSITY",
    "query_distances",
    "tree_distances",
    "tree_distance_blocks",
    "pruned_share",
    "PRUNE_BELOW",
]

#: Below this fraction of non-zero entries, :func:`query_distances` uses the overlap kernel.
SPARSE_KERNEL_DENSITY = 0.1

DType = Literal["float32", "float64"]

#: :func:`tree_distances` prunes per pair of row blocks when the nodes with mass in BOTH blocks of a
#: pair are, on average, below this fraction of the nodes. The pruned kernel's work is the shared
#: nodes, the dense one's all nodes; the merge of two supports and the packing add work that grows
#: with the supports, so the threshold keeps a margin below 1.
PRUNE_BELOW = 0.5


def subtree_masses(tree: Tree, x: np.ndarray | sp.spmatrix) -> np.ndarray:
    r"""Mass below every node, :math:`(R x_i)_v`, for all samples at once.

    One vectorised column addition per node, children before parents (the tree's numbering
    guarantees it): O(n * n_nodes) work, no recursion, no pair loop.

    Parameters
    ----------
    tree : Tree
    x : ndarray or sparse matrix, shape (n, n_leaves)
        Columns in the order of ``tree.leaf_names``.

    Returns
    -------
    ndarray, shape (n, n_nodes), Fortran order
    """
    n, L = x.shape
    if L != tree.n_leaves:
        raise ValueError("columns do not match the tree's leaves")
    M = np.zeros((n, tree.n_nodes), dtype=np.float64, order="F")
    M[:, :L] = x.toarray() if sp.issparse(x) else x  # type: ignore[union-attr]
    parent = tree.parent
    for c in range(tree.n_nodes - 1):
        M[:, parent[c]] += M[:, c]
    return M


def tree_embedding(tree: Tree, x: np.ndarray | sp.spmatrix, dtype: DType = "float64") -> np.ndarray:
    r"""The vectors :math:`y_i = w \odot R x_i` whose L1 distances are the TWD.

    Nodes with zero edge length (and the root) contribute nothing and are dropped.

    Returns
    -------
    ndarray, shape (n, number of nodes with positive edge length)
    """
    M = subtree_masses(tree, x)
    keep = np.flatnonzero(tree.length > 0)
    Y = M[:, keep] * tree.length[keep][None, :]
    return np.ascontiguousarray(Y, dtype=np.dtype(dtype))


def tree_wasserstein(
    tree: Tree,
    X: np.ndarray | sp.spmatrix,
    Xq: np.ndarray | sp.spmatrix | None = None,
    dtype: DType = "float64",
) -> np.ndarray:
    r"""Pairwise tree-Wasserstein distances between the rows of ``X`` (Eq. 5).

    Parameters
    ----------
    tree : Tree
    X : ndarray or sparse matrix, shape (n, n_leaves)
        Non-negative weights, columns in leaf order; each row is normalised to a histogram.
    Xq : ndarray or sparse matrix, shape (q, n_leaves), optional
        Query samples: return the ``q x n`` cross distances instead.
    dtype : {"float64", "float32"}
        Storage type of ``y`` and of the result; sums are accumulated in float64.

    Returns
    -------
    ndarray, shape (n, n) or (q, n)
    """
    return tree_distances(TreeVectors(tree, X, dtype, extra=Xq), Xq, dtype)


def _panels(tv: TreeVectors, x: sp.csr_matrix) -> Panels:
    return row_panels(x, tv.tree.parent, tv.cols, tv.tree.length, tv.dim, np.dtype(tv.dtype))


def pruned_share(tv: TreeVectors, samples: int = 16, seed: int = 0) -> float:
    """Estimated share of the nodes the pruned kernel visits per pair of row blocks (1 for dense data).

    From the panels of up to ``samples`` random blocks of :data:`_pruned.BLOCK_ROWS` rows (cheap:
    the whole set's panels are built only when the pruned kernel is chosen).
    """
    if not sp.issparse(tv.x) or tv.dim == 0 or tv.n < 2 * BLOCK_ROWS:
        return 1.0
    nb = tv.n // BLOCK_ROWS
    pick = np.sort(np.random.default_rng(seed).choice(nb, size=min(samples, nb), replace=False))
    rows = (pick[:, None] * BLOCK_ROWS + np.arange(BLOCK_ROWS)[None, :]).ravel()
    return pruned_fraction(_panels(tv, tv.x[rows]))  # type: ignore[index]


Kernel = Literal["auto", "dense", "pruned"]


def _kernel(tv: TreeVectors, kernel: Kernel) -> str:
    if kernel == "auto":
        return "pruned" if pruned_share(tv) < PRUNE_BELOW else "dense"
    if kernel == "pruned" and not sp.issparse(tv.x):
        raise ValueError("the pruned kernel needs sparse data")
    return kernel


def tree_distances(
    tv: TreeVectors,
    Xq: np.ndarray | sp.spmatrix | None = None,
    dtype: DType = "float64",
    kernel: Kernel = "auto",
    out: np.ndarray | None = None,
) -> np.ndarray:
    r"""TWD matrix of the rows of ``tv`` (all pairs), or of the rows ``Xq`` against them.

    Two kernels give the same bits (:mod:`hdtwd_cli.twd._pruned`): the dense tiled kernel on the
    vectors :math:`y_i` (:func:`~hdtwd_cli.twd._kernels.l1_distances`), and, for sparse data whose vectors are sparse
    (documents), the kernel that visits, per pair of 32-row blocks, only the nodes with mass in
    both blocks. ``auto`` takes the pruned one when :func:`pruned_share` is below
    :data:`PRUNE_BELOW`; it never changes a value, only the time. ``out``: where to write the
    result (e.g. a memory-mapped output file).
    """
    if _kernel(tv, kernel) == "dense":
        if Xq is None:
            return l1_distances(tv.rows(), None, np.dtype(dtype), out)
        return l1_distances(tv.of(Xq), tv.rows(), np.dtype(dtype), out)
    every = _panels(tv, tv.x)
    if Xq is None:
        return l1_distances_pruned(every, None, dtype, out)
    return l1_distances_pruned(_panels(tv, sp.csr_matrix(normalize_rows(Xq))), every, dtype, out)


#: Cross distances hold the reference's tree vectors when they take at most this fraction of the
#: available memory (:func:`tree_distance_blocks`); else they are computed block by block.
REFERENCE_FRACTION = 0.25
#: Bytes of reference tree vectors computed at once when they are not held.
REFERENCE_BLOCK_BYTES = 1 << 28


def tree_distance_blocks(
    tv: TreeVectors,
    Xq: np.ndarray | sp.spmatrix | None = None,
    block: int = 1024,
    dtype: DType = "float64",
    kernel: Kernel = "auto",
) -> Iterator[tuple[int, np.ndarray]]:
    """:func:`tree_distances` by row blocks ``(start, D[start:start + block])`` (:func:`distance_blocks`).

    Cross distances whose reference vectors (``n x dim`` float64) would take more than
    :data:`REFERENCE_FRACTION` of the available memory are computed against the reference's vectors
    block by block, computed again for each block of queries (the same bits: a pair's sum does not
    depend on the blocks it is computed in).
    """
    if _kernel(tv, kernel) == "dense":
        if Xq is None or tv.n * tv.dim * 8 <= REFERENCE_FRACTION * available_memory():
            yield from distance_blocks(tv.rows(), None if Xq is None else tv.of(Xq), block, dtype)
            return
        Yq = tv.of(Xq)
        for i0 in range(0, Yq.shape[0], block):
            A = Yq[i0 : i0 + block]
            D = np.empty((A.shape[0], tv.n), dtype=np.dtype(dtype))
            for j0, Y in tv.blocks(REFERENCE_BLOCK_BYTES):
                D[:, j0 : j0 + Y.shape[0]] = l1_distances(A, Y, np.dtype(dtype))
            yield i0, D
        return
    every = _panels(tv, tv.x)
    xq = tv.x if Xq is None else sp.csr_matrix(normalize_rows(Xq))
    for i0 in range(0, xq.shape[0], block):
        yield i0, l1_distances_pruned(_panels(tv, xq[i0 : i0 + block]), every, dtype)  # type: ignore[index]  # diagonal: sums of +0


def _leaf_support(x: np.ndarray | sp.spmatrix | DenoisedRows) -> np.ndarray:
    """Leaves (columns) with a non-zero value in some row (denoised rows: that may have one)."""
    if isinstance(x, DenoisedRows):
        return x.support()
    if sp.issparse(x):
        x = sp.csr_matrix(x)
        sup = np.zeros(x.shape[1], dtype=bool)
        sup[x.indices[x.data != 0]] = True
        return sup
    return np.any(x != 0, axis=0)


def _fill_vectors(
    tree: Tree,
    x: np.ndarray | sp.csr_matrix,
    cols: np.ndarray,
    d: int,
    dtype: DType,
    rows: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    if out is None:
        out = np.empty((x.shape[0] if rows is None else rows.shape[0], d), dtype=np.dtype(dtype))
    if x.shape[1] != tree.n_leaves:
        raise ValueError("columns do not match the tree's leaves")
    fill_tree_vectors(x, tree.parent, cols, tree.length, out, rows)
    return out


class TreeVectors:
    r"""The vectors :math:`y_i = w \odot R x_i` of the rows of ``X``, computed on demand by row range.

    The kept columns (nodes with a positive edge length and mass below them in some row of
    ``X`` or of ``extra``) are fixed at construction, so row ranges computed at different times
    share them. Holding only the normalised ``X`` (sparse stays sparse), it lets the kNN search
    run over n samples without the n x d matrix of all vectors.
    """

    def __init__(
        self,
        tree: Tree,
        X: np.ndarray | sp.spmatrix,
        dtype: DType = "float64",
        extra: np.ndarray | sp.spmatrix | None = None,
    ) -> None:
        self.tree = tree
        self.dtype = dtype
        self.x: np.ndarray | sp.csr_matrix | DenoisedRows
        if isinstance(X, DenoisedRows):  # normalised by row block when asked for
            check_histograms(X)
            self.x = X
        else:
            self.x = normalize_rows(X)
            if sp.issparse(self.x):
                self.x = sp.csr_matrix(self.x)
            else:  # the kernels pick rows of a C-order X in place
                self.x = np.ascontiguousarray(self.x)
        mass = _leaf_support(self.x)
        if extra is not None:  # row scaling does not change the support
            mass = mass | _leaf_support(extra)
        has = np.zeros(tree.n_nodes, dtype=bool)
        has[: tree.n_leaves] = mass
        parent = tree.parent
        for c in range(tree.n_nodes - 1):  # mass below a node: some leaf below it has mass
            if has[c]:
                has[parent[c]] = True
        keep = has & (tree.length > 0)
        self.cols = np.full(tree.n_nodes, -1, dtype=np.int64)
        self.cols[keep] = np.arange(int(keep.sum()))
        self.dim = int(keep.sum())

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    def rows(self, i0: int = 0, i1: int | None = None) -> np.ndarray:
        """``y`` of rows ``i0 .. i1-1`` as a C-order ``(i1 - i0) x dim`` array."""
        return self.of_rows(np.arange(*slice(i0, i1).indices(self.n), dtype=np.int64))

    def blocks(self, budget: int, out: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """``(i0, Y)``: all rows' vectors in order, block after block of as many rows as fit ``budget`` bytes
        of float64 (at least one).

        Each block is valid until the next is asked for: one buffer of vectors (and, for denoised rows, one
        of their values) serves every block, so a pass over the rows touches the memory of one block rather
        than fresh memory for each. ``out``: an ``n x dim`` C-order array of this dtype that every block is
        written into instead (``Y`` its rows ``i0 ..``: all vectors, kept after the pass). The same bits
        either way.
        """
        step = max(1, min(self.n, budget // max(1, 8 * self.dim)))
        buf, values = self.buffers(step, vectors=out is None)
        for i0 in range(0, self.n, step):
            i1 = min(self.n, i0 + step)
            Y = out[i0:i1] if out is not None else buf[: i1 - i0]  # type: ignore[index]
            yield i0, self.of_rows(np.arange(i0, i1), out=Y, values=None if values is None else values[: i1 - i0])

    def buffers(self, rows: int, *, vectors: bool = True) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Buffers for :meth:`of_rows` of up to ``rows`` rows at a time: their vectors (``rows x dim``, this
        dtype; ``None`` without ``vectors``) and, for denoised rows, their values (``rows x m`` float64; else
        ``None``). A caller that computes block after block passes slices of these instead of touching fresh
        memory for each block."""
        Y = np.empty((rows, self.dim), dtype=np.dtype(self.dtype)) if vectors else None
        values = np.empty((rows, self.x.shape[1])) if isinstance(self.x, DenoisedRows) else None
        return Y, values

    def of_rows(self, idx: np.ndarray, out: np.ndarray | None = None, values: np.ndarray | None = None) -> np.ndarray:
        """``y`` of the rows ``idx`` (any order, repeats allowed): a new array, or written into ``out`` (C order,
        ``len(idx) x dim``, this dtype) and returned. ``values``: for denoised rows, a C-order float64
        ``len(idx) x m`` buffer their values are computed in (overwritten; else a new one)."""
        idx = np.asarray(idx, dtype=np.int64)
        if isinstance(self.x, DenoisedRows):
            rows = normalize_rows(self.x.rows(idx, out=values), copy=False)  # rows just computed: divided in place
            return _fill_vectors(self.tree, rows, self.cols, self.dim, self.dtype, out=out)
        return _fill_vectors(self.tree, self.x, self.cols, self.dim, self.dtype, idx, out)

    def holding(self, rows: np.ndarray, budget: int) -> TreeVectors:
        """These vectors with the denoised rows of ``rows`` computed once and kept (:meth:`DenoisedRows.held`)
        where they take at most ``budget`` bytes; otherwise (or for rows that are not denoised) ``self``.

        The vectors are the same bits either way: holding saves recomputing rows that a partition's
        search reads several times.
        """
        if not isinstance(self.x, DenoisedRows) or np.asarray(rows).size * self.x.shape[1] * 8 > budget:
            return self
        if isinstance(self.x, HeldRows) and self.x.holds(rows):
            return self
        out = copy.copy(self)
        out.x = self.x.held(rows)
        return out

    def quantised(
        self, idx: np.ndarray, top: float, buffers: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
    ) -> np.ndarray:
        """``_nndescent.quantise(self.of_rows(idx), top)``: uint16 search vectors, bit for bit, computed
        without the float64 rows where ``X`` is sparse (a fused kernel). ``buffers``: :meth:`buffers` of at
        least ``len(idx)`` rows for those float64 rows."""
        from hdtwd_cli.twd._kernels import SCALE_MAX, quantise

        idx = np.asarray(idx, dtype=np.int64)
        if not sp.issparse(self.x) or top <= 0.0 or small_tree_work(idx.size, self.tree.parent):
            Y, values = (None if b is None else b[: idx.size] for b in buffers)
            return quantise(self.of_rows(idx, out=Y, values=values), top)
        out = np.empty((idx.size, self.dim), dtype=np.uint16)
        quantised_tree_vectors_csr(
            self.x.indptr,  # type: ignore[union-attr]
            self.x.indices,  # type: ignore[union-attr]
            self.x.data,  # type: ignore[union-attr]
            idx,
            self.tree.parent,
            self.cols,
            self.tree.length,
            np.float32(SCALE_MAX / top),
            np.float32(SCALE_MAX),
            out,
        )
        return out

    def of(self, Xq: np.ndarray | sp.spmatrix | DenoisedRows) -> np.ndarray:
        """``y`` of other samples ``Xq`` on the same columns (pass them as ``extra`` so none is dropped)."""
        xq = normalize_rows(Xq)
        return _fill_vectors(self.tree, sp.csr_matrix(xq) if sp.issparse(xq) else xq, self.cols, self.dim, self.dtype)


def query_distances(tree: Tree, X: np.ndarray | sp.spmatrix, Xq: np.ndarray | sp.spmatrix) -> np.ndarray:
    r"""TWD between the query rows ``Xq`` and the rows ``X`` (``q x n``), the fastest exact way for the data.

    Dense data: :func:`tree_wasserstein` (the bit-exact tiled kernel). Sparse data whose tree
    vectors are sparse too (fewer than :data:`SPARSE_KERNEL_DENSITY` non-zeros; documents: about
    3 %): sparse vectors (:func:`_kernels.tree_vectors_sparse`) and the overlap kernel
    :func:`_kernels.l1_distances_sparse`, whose work is the number of shared non-zero nodes,
    not ``q x n x d``. The two agree to rounding (about 1e-16 of the distances' scale); the kNN
    evaluation uses this function, the ``distance`` command keeps the bit-exact kernel.
    """
    if not (sp.issparse(X) and sp.issparse(Xq)):
        return tree_wasserstein(tree, X, Xq=Xq)
    tv = TreeVectors(tree, X, extra=Xq)
    Y = tree_vectors_sparse(tv.x, tree.parent, tv.cols, tree.length, tv.dim)
    if Y.nnz >= SPARSE_KERNEL_DENSITY * Y.shape[0] * max(tv.dim, 1):
        return l1_distances(tv.of(Xq), tv.rows())  # what tree_wasserstein computes, from the same tv
    Yq = tree_vectors_sparse(sp.csr_matrix(normalize_rows(Xq)), tree.parent, tv.cols, tree.length, tv.dim)
    return l1_distances_sparse(Yq, Y)


def distance_blocks(
    Y: np.ndarray, Yq: np.ndarray | None = None, block: int = 1024, dtype: DType = "float64"
) -> Iterator[tuple[int, np.ndarray]]:
    """Row blocks ``(start, D[start:start+block])`` of the (cross) distance matrix, one at a time.

    Memory beyond ``Y`` is ``block x n`` values, whatever ``n``.
    """
    rows = Y if Yq is None else Yq
    for i0 in range(0, rows.shape[0], block):
        D = l1_distances(rows[i0 : i0 + block], Y, np.dtype(dtype))
        if Yq is None:  # exact zeros on the diagonal, as in the symmetric kernel
            idx = np.arange(i0, min(i0 + block, rows.shape[0]))
            D[idx - i0, idx] = 0.0
        yield i0, D


def smallest_k(d: np.ndarray, i: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the ``k`` entries smallest in the order (distance, index), whatever their order in the row.

    ``argpartition`` on the distances, then rows with a tie across the k-th place (duplicates) are
    settled by index with a full sort of those rows only: the kept SET is a function of the
    candidates alone, so blocked, approximate and distributed searches agree on it.
    """
    part = np.argpartition(d, k - 1, axis=1)[:, :k]
    kth = np.take_along_axis(d, part, axis=1).max(axis=1)
    tied = np.flatnonzero((d <= kth[:, None]).sum(axis=1) > k)
    if tied.size:
        order = np.lexsort((i[tied], d[tied]), axis=1)[:, :k]
        part[tied] = order
    return np.take_along_axis(d, part, axis=1), np.take_along_axis(i, part, axis=1)


def merge_candidates(best_d: np.ndarray, best_i: np.ndarray, rows: np.ndarray, D: np.ndarray, col0: int) -> None:
    """Fold block ``D`` (columns ``col0 ..``) into the running k best of ``rows``, in place.

    Only rows with an entry at or below their current k-th best are touched; among them the k
    smallest of (current best, block) by (distance, index) are kept (:func:`smallest_k`).
    """
    k = best_d.shape[1]
    worst = best_d[rows].max(axis=1)
    need = np.flatnonzero(D.min(axis=1) <= worst)
    if need.size == 0:
        return
    r = rows[need]
    cd = np.concatenate([best_d[r], D[need]], axis=1)
    ci = np.concatenate(
        [best_i[r], np.broadcast_to(np.arange(col0, col0 + D.shape[1]), (need.size, D.shape[1]))], axis=1
    )
    best_d[r], best_i[r] = smallest_k(cd, ci, k)


def nearest_neighbors(
    Y: np.ndarray | TreeVectors, k: int, block: int = 2048, progress: Callable[[int], None] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's ``k`` nearest other samples under the TWD, without an n x n matrix.

    Symmetric blocked search: for every pair of row blocks ``I <= J`` one kernel call gives
    ``D[I, J]``, which updates the candidates of the rows of ``I`` and (transposed) of ``J``,
    so every distance is computed once. With a :class:`TreeVectors` source the vectors of a
    block are computed when needed, so memory is O(n k + block x d) beyond the data, whatever
    ``n``. Neighbours are returned ordered by (distance, index); the sample itself is excluded.

    Returns
    -------
    indices : ndarray of int64, shape (n, k)
    distances : ndarray of float64, shape (n, k)
    """
    n = Y.n if isinstance(Y, TreeVectors) else Y.shape[0]
    if not 1 <= k < n:
        raise ParameterError(f"must be between 1 and n - 1 = {n - 1}", "k")

    def rows(i0: int, i1: int) -> np.ndarray:
        return Y.rows(i0, i1) if isinstance(Y, TreeVectors) else Y[i0:i1]

    best_d = np.full((n, k), np.inf)
    best_i = np.full((n, k), -1, dtype=np.int64)
    starts = list(range(0, n, block))
    for a, i0 in enumerate(starts):
        i1 = min(i0 + block, n)
        YI = rows(i0, i1)
        ri = np.arange(i0, i1)
        for j0 in starts[a:]:
            j1 = min(j0 + block, n)
            if j0 == i0:
                D = l1_distances(YI).astype(np.float64, copy=False)
                np.fill_diagonal(D, np.inf)  # not one's own neighbour
                merge_candidates(best_d, best_i, ri, D, i0)
            else:
                D = l1_distances(YI, rows(j0, j1)).astype(np.float64, copy=False)
                merge_candidates(best_d, best_i, ri, D, j0)
                merge_candidates(best_d, best_i, np.arange(j0, j1), np.ascontiguousarray(D.T), i0)
        if progress is not None:
            progress(i1 - i0)
    order = np.lexsort((best_i, best_d), axis=1)
    return np.take_along_axis(best_i, order, axis=1), np.take_along_axis(best_d, order, axis=1)


def dense_output_bytes(n_rows: int, n_cols: int, dim: int, dtype: DType = "float64") -> int:
    """Bytes the in-memory path needs: the result, the vectors and the subtree masses."""
    item = np.dtype(dtype).itemsize
    return n_rows * n_cols * item + (n_rows + n_cols) * dim * (item + 8)
