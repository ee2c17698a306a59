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
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

import numpy as np
import scipy.sparse as sp

from hdtwd_cli.errors import InputError, ParameterError
from hdtwd_cli.tree._denoise import DenoisedRows, HeldRows
from hdtwd_cli.tree._haar import haar_basis, haar_filter
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._kernels import (
    l1_distances,
    l1_distances_sparse,
    quantised_tree_vectors_csr,
    row_sums,
    small_tree_work,
    tree_vectors,
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
    "normalize_rows",
    "check_histograms",
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


def normalize_rows(X: np.ndarray | sp.spmatrix | DenoisedRows) -> np.ndarray | sp.csr_matrix:
    r"""Histograms :math:`x_i = X_i / \lVert X_i \rVert_1` (sparse input stays sparse; denoised rows: dense).

    Raises
    ------
    ValueError
        If a row sums to zero (it has no histogram); the message names its index.
    """
    if isinstance(X, DenoisedRows):
        check_histograms(X)
        X = X.rows()
    with np.errstate(over="ignore"):  # an overflowing row sum is reported below
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=np.float64, copy=True)
            X.sum_duplicates()
        else:
            X = np.array(X, dtype=np.float64, copy=True)
        s = row_sums(X)  # the same bits for dense and sparse storage of the same values
    _check_sums(s)
    if sp.issparse(X):
        X.data /= np.repeat(s, np.diff(X.indptr))  # type: ignore[misc,union-attr]
        return X
    X /= s[:, None]
    return X


def _check_sums(s: np.ndarray) -> None:
    if not np.all(np.isfinite(s)):
        i = int(np.flatnonzero(~np.isfinite(s))[0])
        raise ValueError(f"row {i} sums to infinity in float64 (values too large); rescale the data")
    bad = np.flatnonzero(~(s > 0))
    if bad.size:
        raise ValueError(
            f"row {int(bad[0])} sums to zero and has no histogram"
            + (f" ({bad.size} such rows)" if bad.size > 1 else "")
        )


def mean_histogram(tree: Tree, X: np.ndarray | sp.spmatrix, feature_names: Sequence[str] | None = None) -> np.ndarray:
    r"""The samples' mean histogram over the tree's leaves, :math:`\frac1n \sum_i x_i` (weights applied).

    Columns are matched to the leaves by name (``feature_names``; default: the leaves' own
    names), the tree's feature weights (and denoiser) applied as for the TWD; features of ``X``
    that are not leaves are dropped. Entry ``j`` is the share of the mass the TWD moves that sits
    on leaf ``j`` (the masses sum to 1).
    """
    from hdtwd_cli.twd._distance import align_to_tree

    names = list(feature_names) if feature_names is not None else list(tree.leaf_names)
    H = normalize_rows(align_to_tree(X, names, tree, drop_unknown=True))
    return np.asarray(H.mean(axis=0), dtype=np.float64).ravel()


def check_histograms(X: np.ndarray | sp.spmatrix | DenoisedRows) -> None:
    """Raise the error of :func:`normalize_rows` without copying ``X``: run it before any costly stage.

    Denoised rows are checked on the values they come from: a sample without values has no
    histogram (its reconstruction would be the fitted rows' mean, not data).
    """
    if isinstance(X, DenoisedRows):
        X = X.values
    with np.errstate(over="ignore"):
        _check_sums(row_sums(X))


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


def tree_distance_blocks(
    tv: TreeVectors,
    Xq: np.ndarray | sp.spmatrix | None = None,
    block: int = 1024,
    dtype: DType = "float64",
    kernel: Kernel = "auto",
) -> Iterator[tuple[int, np.ndarray]]:
    """:func:`tree_distances` by row blocks ``(start, D[start:start + block])`` (:func:`distance_blocks`)."""
    if _kernel(tv, kernel) == "dense":
        yield from distance_blocks(tv.rows(), None if Xq is None else tv.of(Xq), block, dtype)
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
    tree: Tree, x: np.ndarray | sp.csr_matrix, cols: np.ndarray, d: int, dtype: DType, rows: np.ndarray | None = None
) -> np.ndarray:
    out = np.empty((x.shape[0] if rows is None else rows.shape[0], d), dtype=np.dtype(dtype))
    if x.shape[1] != tree.n_leaves:
        raise ValueError("columns do not match the tree's leaves")
    tree_vectors(x, tree.parent, cols, tree.length, out, rows)
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

    def of_rows(self, idx: np.ndarray) -> np.ndarray:
        """``y`` of the rows ``idx`` (any order, repeats allowed)."""
        idx = np.asarray(idx, dtype=np.int64)
        if isinstance(self.x, DenoisedRows):
            return _fill_vectors(self.tree, normalize_rows(self.x.rows(idx)), self.cols, self.dim, self.dtype)
        return _fill_vectors(self.tree, self.x, self.cols, self.dim, self.dtype, idx)

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

    def quantised(self, idx: np.ndarray, top: float) -> np.ndarray:
        """``_nndescent.quantise(self.of_rows(idx), top)``: uint16 search vectors, bit for bit, computed
        without the float64 rows where ``X`` is sparse (a fused kernel)."""
        from hdtwd_cli.twd._kernels import SCALE_MAX, quantise

        idx = np.asarray(idx, dtype=np.int64)
        if not sp.issparse(self.x) or top <= 0.0 or small_tree_work(idx.size, self.tree.parent):
            return quantise(self.of_rows(idx), top)
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


def haar_filtered(tree: Tree, H: np.ndarray | sp.spmatrix) -> np.ndarray:
    r"""Histograms filtered in the tree's Haar basis: :math:`\tilde x = \max(B_K B_K^\top x, 0)`, normalised.

    :math:`B_K` holds the Haar vectors of ``tree`` that :attr:`Tree.haar_keep` marks
    (:func:`hdtwd_cli.tree._haar.haar_basis`; docs/method.md section 13). Every Haar vector but the
    kept constant one sums to 0, so the projection keeps the row's mass 1 and has a positive entry:
    the clipped row is a histogram again. Dense output (the projection spreads mass over the leaves).
    """
    if tree.haar_keep is None:
        raise ValueError("the tree carries no Haar filter")
    dense = sp.csr_matrix(H).toarray() if sp.issparse(H) else np.asarray(H, dtype=np.float64)
    F = haar_filter(haar_basis(tree), dense, tree.haar_keep)
    np.maximum(F, 0.0, out=F)
    F /= F.sum(axis=1)[:, None]
    return F


def _default_names(names: list[str]) -> bool:
    """The names are ``f0, f1, ...``: what the API and unnamed files give when no names are known."""
    return all(n == f"f{j}" for j, n in enumerate(names))


def align_to_tree(
    X: np.ndarray | sp.spmatrix,
    feature_names: list[str],
    tree: Tree,
    path: str | None = None,
    drop_unknown: bool = False,
) -> np.ndarray | sp.csr_matrix | DenoisedRows:
    """Reorder the columns of ``X`` to the tree's leaves, matching by feature NAME.

    When the tree carries a denoiser (:attr:`Tree.denoiser`), the result is the rows' denoised
    values, computed on demand by row block (:class:`hdtwd_cli.tree._denoise.DenoisedRows`: what
    :class:`TreeVectors` and :func:`normalize_rows` take). When it carries feature weights
    (:attr:`Tree.feature_weights`), each column is multiplied by its leaf's weight, so the rows
    become the weighted values whose histograms the TWD compares.

    The result may be ``X`` itself (dense, already in leaf order, no weights): callers copy before
    writing (:func:`normalize_rows` does).

    Leaves absent from the data get zero mass. Data features absent from the tree are an
    error when they carry mass (the message names a few); all-zero ones are ignored. With
    ``drop_unknown`` their mass is dropped instead (evaluation: a feature that is all zero in
    the training rows has no leaf, whatever the test rows hold).
    """
    if tree.haar_keep is not None:  # the histograms, projected onto the kept Haar vectors
        unfiltered = align_to_tree(X, feature_names, dataclasses.replace(tree, haar_keep=None), path, drop_unknown)
        return haar_filtered(tree, normalize_rows(unfiltered))
    if tree.denoiser is not None:  # values -> denoised values -> weights, row blocks on demand
        bare = dataclasses.replace(tree, feature_weights=None, denoiser=None)
        values = align_to_tree(X, feature_names, bare, path, drop_unknown)
        return DenoisedRows(values, tree.denoiser, tree.feature_weights)
    index = {name: i for i, name in enumerate(tree.leaf_names)}
    dest = np.array([index.get(name, -1) for name in feature_names], dtype=np.int64)
    missing = np.flatnonzero(dest < 0)
    if missing.size and not drop_unknown:
        if sp.issparse(X):
            mass = np.asarray(abs(X[:, missing]).sum(axis=0)).ravel()
        else:
            mass = np.abs(X[:, missing]).sum(axis=0)
        bad = missing[mass > 0]
        if bad.size and (
            bad.size == len(feature_names) or (_default_names(feature_names) and not _default_names(tree.leaf_names))
        ):
            # nothing matches, or the data has the default names f0, f1, ... and the tree real ones:
            # the names were not given (hd.distances(X, tree=T) for a tree learned with gene names)
            ours = ", ".join(repr(n) for n in feature_names[:3]).replace("{", "{{").replace("}", "}}")
            leaves = ", ".join(repr(n) for n in tree.leaf_names[:3]).replace("{", "{{").replace("}", "}}")
            raise InputError(
                f"the data's feature names ({ours}, ...) are not the tree's leaf names ({leaves}, ...): "
                f"{bad.size} of {len(feature_names)} feature(s) with mass match no leaf; give {{a}} as the tree was "
                "learned with (or {b} root to hang unknown features from the root)",
                path,
                a="feature_names",
                b="unseen",
            )
        if bad.size:
            shown = ", ".join(repr(feature_names[j]) for j in bad[:5]).replace("{", "{{").replace("}", "}}")
            raise InputError(
                f"{bad.size} feature(s) with mass are not leaves of the tree: {shown}"
                + (" ..." if bad.size > 5 else "")
                + " ({a} root hangs them from the tree's root)",
                path,
                a="unseen",
            )
    n, L = X.shape[0], tree.n_leaves
    if len(set(dest[dest >= 0].tolist())) != int((dest >= 0).sum()):
        raise InputError("two data features map to the same tree leaf", path)
    w = tree.feature_weights
    if sp.issparse(X):
        C = sp.coo_matrix(X)
        new_col = dest[C.col]
        ok = new_col >= 0
        out = sp.csr_matrix((C.data[ok], (C.row[ok], new_col[ok])), shape=(n, L))
        out.sum_duplicates()
        out.sort_indices()
        if w is not None:
            out.data *= w[out.indices]
        return out
    if w is None and X.shape[1] == L and np.array_equal(dest, np.arange(L)):
        return np.asarray(X, dtype=np.float64)  # already in leaf order (e.g. the tree was learned from X): no copy
    # a gather along the rows (one pass, each output row written in order) rather than a scatter
    # into columns, whose writes are strided
    known = np.flatnonzero(dest >= 0)
    src = np.zeros(L, dtype=np.int64)  # the data column of each leaf (0 for absent leaves, zeroed below)
    src[dest[known]] = known
    Xd = np.asarray(X, dtype=np.float64)
    out = np.take(Xd, src, axis=1) if Xd.shape[1] else np.zeros((n, L))
    absent = np.ones(L, dtype=bool)
    absent[dest[known]] = False
    if absent.any():
        out[:, absent] = 0.0  # leaves absent from the data get zero mass
    if w is not None:
        out *= w[None, :]
    return out
