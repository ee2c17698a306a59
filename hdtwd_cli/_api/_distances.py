"""The public functions of the distance: ``distances``, ``distance_vectors``, ``tree_vectors``, ``knn_graph``."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._api._common import DType, Matrix, Unseen, as_reporter, checked_matrix, checked_names, data_errors
from hdtwd_cli._api._learn import tree_for
from hdtwd_cli._runtime.memory import allowance, available_memory, human_bytes
from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli._version import __version__
from hdtwd_cli.errors import (
    HdtwdWarning,
    ParameterError,
    ResourceError,
)
from hdtwd_cli.knn._choose import choose_method, search_neighbors
from hdtwd_cli.knn._graph import (
    knn_distance_matrix,
    umap_connectivities,
    with_self,
)
from hdtwd_cli.tree._params import TreeParams, apply_transform
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._distance import (
    TreeVectors,
    dense_output_bytes,
    tree_distance_blocks,
    tree_distances,
)
from hdtwd_cli.twd._histograms import check_histograms, mean_histogram, tree_histograms

if TYPE_CHECKING:  # pragma: no cover
    pass


#: ``neighbors`` stores the TWD vectors in ``obsm`` only up to this size by default (1 GB).
VECTORS_MAX_BYTES = 10**9
#: Share of the available memory a distance matrix held in memory may take.
OUTPUT_SHARE = 0.8


def mean_tree_histogram(tree: Tree, X: Matrix, feature_names: Sequence[str]) -> np.ndarray:
    """The samples' mean histogram on ``tree``'s leaves, the tree's transform and map applied (what a Nexus tree
    file annotates its leaves with; :func:`hdtwd_cli.twd._histograms.mean_histogram`)."""
    return mean_histogram(tree, apply_transform(X, str(tree.metadata.get("transform", "none"))), list(feature_names))


def check_k(n_neighbors: int, n: int) -> None:
    if not (int(n_neighbors) == n_neighbors and 2 <= n_neighbors <= n):
        raise ParameterError(
            f"must be an integer between 2 and the number of samples ({n}), counting the "
            f"sample itself as scanpy does; got {n_neighbors}",
            "n_neighbors",
        )


@dataclass
class KnnGraph:
    """Each sample's ``n_neighbors`` nearest samples under the TWD, itself first (scanpy's meaning).

    Attributes
    ----------
    indices : ndarray of int64, shape (n, n_neighbors)
        ``indices[i, 0] == i``; then the ``n_neighbors - 1`` nearest other samples, ordered by
        (distance, index).
    distances : ndarray of float64, shape (n, n_neighbors)
        The exact TWDs (``distances[:, 0] == 0``).
    params : dict
        What was computed (tree source and parameters, hdtwd version).
    """

    indices: np.ndarray
    distances: np.ndarray
    params: dict = field(default_factory=dict)

    @property
    def n_neighbors(self) -> int:
        return int(self.indices.shape[1])

    def distance_matrix(self) -> sp.csr_matrix:
        """``obsp["distances"]``: the ``n_neighbors - 1`` distances of each row (self left out)."""
        return knn_distance_matrix(self.indices, self.distances)

    def connectivities(self) -> sp.csr_matrix:
        """``obsp["connectivities"]``: UMAP's fuzzy simplicial set, float32 (:mod:`hdtwd_cli.knn._graph`)."""
        return umap_connectivities(self.indices, self.distances)


@dataclass
class DistanceVectors:
    """The samples mapped onto one tree, ready for any form of the distance matrix.

    ``base`` holds the column samples (the reference set, or the data itself); ``queries`` the
    row samples of a cross-distance matrix (``None``: the symmetric matrix of ``base``).
    """

    tree: Tree
    base: TreeVectors
    queries: np.ndarray | sp.csr_matrix | None
    dtype: DType = "float64"
    record: dict = field(default_factory=dict)
    progress: Reporter = field(default_factory=Reporter)

    @property
    def shape(self) -> tuple[int, int]:
        n = self.base.n
        return (n if self.queries is None else int(self.queries.shape[0]), n)

    def matrix(self, check_memory: bool = True, out: np.ndarray | None = None) -> np.ndarray:
        """The whole (cross) distance matrix in memory (refused up front when it would not fit).

        ``out``: an array of :attr:`shape` and :attr:`dtype` to write it into (the CLI passes a
        memory map of its ``.npy`` output file: no copy of the result is ever written).
        """
        rows, cols = self.shape
        if check_memory:
            need, have = dense_output_bytes(rows, cols, self.base.dim, self.dtype), available_memory()
            if need > OUTPUT_SHARE * have:
                raise ResourceError(
                    f"the {rows} x {cols} distance matrix needs about {human_bytes(need)}, more than hdtwd allows "
                    f"itself: {allowance(OUTPUT_SHARE, have)}; write it in blocks (DistanceVectors.blocks; "
                    "CLI: -o FILE.h5) or keep only each sample's nearest neighbours (knn_graph; CLI: --knn K)"
                )
        with self.progress.stage(f"tree-Wasserstein distances ({rows} x {cols})"):
            return tree_distances(self.base, self.queries, self.dtype, out=out)

    def block_rows(self) -> int:
        """Rows per block of :meth:`blocks`: 256 MB of results."""
        return max(1, min(self.shape[0], (256 << 20) // max(1, self.shape[1] * 8)))

    def blocks(self, block: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """Row blocks ``(start, D[start:start + block])``: memory of one block beyond the vectors."""
        return tree_distance_blocks(self.base, self.queries, block or self.block_rows(), self.dtype)

    def to_zarr(
        self,
        path: str,
        row_names: Sequence[str] | None = None,
        col_names: Sequence[str] | None = None,
        meta: dict | None = None,
        client: Any = None,
    ) -> None:
        """Write the (cross) distance matrix as a chunked Zarr store, by the workers of ``client``
        (a ``dask.distributed.Client``) when given; the same bits either way (:mod:`hdtwd_cli.knn._dask`)."""
        from hdtwd_cli.knn._dask import write_zarr

        rows, cols = self.shape
        write_zarr(
            path,
            self,
            [f"s{i}" for i in range(rows)] if row_names is None else list(row_names),
            [f"s{i}" for i in range(cols)] if col_names is None else list(col_names),
            meta or {},
            client,
        )

    def vectors_for_obsm(self, store: bool | None = None) -> np.ndarray | None:
        """The TWD vectors to store as ``obsm["X_hdtwd"]``: always (``True``), never (``False``), or
        when they take at most :data:`VECTORS_MAX_BYTES` (``None``; a warning says when they do not)."""
        size = self.base.n * self.base.dim * 8
        if store is None:
            store = size <= VECTORS_MAX_BYTES
            if not store:
                warnings.warn(
                    f"the TWD vectors ({human_bytes(size)}) are not stored in obsm['X_hdtwd'] (above "
                    f"{human_bytes(VECTORS_MAX_BYTES)}); store_vectors=True (CLI: --store-vectors) stores them",
                    HdtwdWarning,
                    stacklevel=3,
                )
        return self.base.rows() if store else None

    def knn(self, n_neighbors: int, method: str = "auto", seed: int = 0, client: Any = None) -> KnnGraph:
        """The kNN graph without an n x n matrix (vectors computed per row block: memory O(n k)).

        ``method``: ``exact``, ``nndescent`` (hdtwd's NN-descent: approximate candidates, exact
        distances), ``pynndescent`` (pynndescent's candidates, the same exact re-ranking) or ``auto``
        (:mod:`hdtwd_cli.knn._search`); ``client``: a ``dask.distributed.Client`` that runs either search
        as tasks (:mod:`hdtwd_cli.knn._dask`), with the same bits.
        """
        if self.queries is not None:
            raise ParameterError("a kNN graph is of one set of samples: give no {arg}", "reference")
        check_k(n_neighbors, self.base.n)
        chosen = choose_method(method, self.base.n)
        with self.progress.stage(
            f"{n_neighbors} nearest neighbours of {self.base.n} samples ({chosen})", self.base.n
        ) as adv:
            idx, dist = search_neighbors(self.base, n_neighbors - 1, chosen, seed, adv, client, self.progress.info)
        idx, dist = with_self(idx, dist)
        return KnnGraph(idx, dist, dict(self.record, n_neighbors=int(n_neighbors), knn_method=chosen, seed=int(seed)))


def distance_vectors(
    X: Matrix,
    tree: Tree | None = None,
    reference: Matrix | None = None,
    *,
    feature_names: Sequence[str] | None = None,
    reference_feature_names: Sequence[str] | None = None,
    params: TreeParams | None = None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None = None,
    transform: str | None = None,
    unseen: Unseen = "error",
    n_neighbors: int | None = None,
    dtype: DType = "float64",
    progress: Reporter | bool | None = None,
) -> DistanceVectors:
    """Map the samples onto a tree (learned from ``X`` when ``tree`` is None) for :func:`distances` and kin.

    Parameters are those of :func:`distances`; ``n_neighbors`` is only checked here (against
    the number of samples, before a tree is learned) for a later :meth:`DistanceVectors.knn`.
    """
    if dtype not in ("float64", "float32"):
        raise ParameterError(f"must be 'float64' or 'float32', not {dtype!r}", "dtype")
    rep = as_reporter(progress)
    Xm = checked_matrix(X)
    names = checked_names(feature_names, Xm.shape[1])
    if n_neighbors is not None:
        if reference is not None:
            raise ParameterError("and {b} exclude each other", "n_neighbors", b="reference")
        check_k(n_neighbors, Xm.shape[0])
    R = rnames = None
    if reference is not None:
        if tree is None:
            raise ParameterError("maps both sets onto one given tree: give {b} too", "reference", b="tree")
        R = checked_matrix(reference, "reference")
        rnames = checked_names(reference_feature_names, R.shape[1], "reference_feature_names")
    T, tf, record, Xt = tree_for(Xm, names, tree, params, feature_embedding, unseen, transform, rnames or (), rep)
    Xt = tree_histograms(Xt, names, T, normalised=False)
    record = {"hdtwd_version": __version__, **record, "dtype": dtype}
    if R is None:
        base = data_errors(lambda: TreeVectors(T, Xt, dtype))
        return DistanceVectors(T, base, None, dtype, record, rep)
    Rt = tree_histograms(apply_transform(R, tf), rnames, T, normalised=False)  # type: ignore[arg-type]
    base = data_errors(lambda: TreeVectors(T, Rt, dtype, extra=Xt))
    data_errors(lambda: check_histograms(Xt))
    return DistanceVectors(T, base, Xt, dtype, record, rep)


def distances(
    X: Matrix,
    tree: Tree | None = None,
    reference: Matrix | None = None,
    *,
    feature_names: Sequence[str] | None = None,
    reference_feature_names: Sequence[str] | None = None,
    params: TreeParams | None = None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None = None,
    transform: str | None = None,
    unseen: Unseen = "error",
    dtype: DType = "float64",
    progress: Reporter | bool | None = None,
) -> np.ndarray:
    r"""Pairwise tree-Wasserstein distances between the samples (rows) of ``X``.

    .. math:: D_{ij} = \sum_v \alpha_v |\mu_i(\Gamma_v) - \mu_j(\Gamma_v)| \quad \text{(paper Eq. 5)}

    with :math:`\mu_i` row ``i`` normalised to a histogram over the tree's leaves.

    Parameters
    ----------
    X : array-like or sparse matrix, shape (n_samples, n_features)
        Non-negative values; every row needs some mass.
    tree : Tree, optional
        Use this tree (``Tree.read(path)``) instead of learning one from ``X``.
    reference : array-like, optional
        Cross distances: rows of ``X`` against the rows of ``reference`` (needs ``tree``).
    feature_names, reference_feature_names : sequence of str, optional
        Column names, matched to the tree's leaves by name (default ``f0, f1, ...``).
    params : TreeParams, optional
        Configuration of the learned tree (``tree=None`` only).
    feature_embedding : (vectors, names), optional
        The features' own vectors for the learned tree.
    transform : str, optional
        ``none``, ``log1p`` or ``sqrt`` applied to the data first; with ``tree``, must be the tree's.
    unseen : {"error", "root"}
        With ``tree``: data features with mass that are not leaves are an error, or hang from
        the root.
    dtype : {"float64", "float32"}
        Storage type of the result.

    Returns
    -------
    ndarray, shape (n_samples, n_samples) or (n_samples, n_reference)

    Examples
    --------
    >>> import numpy as np, hdtwd_cli as hd
    >>> X = np.random.default_rng(0).poisson(2.0, size=(40, 10))
    >>> D = hd.distances(X)
    >>> D.shape, bool(np.allclose(D, D.T)), float(D.trace())
    ((40, 40), True, 0.0)
    """
    return distance_vectors(
        X,
        tree,
        reference,
        feature_names=feature_names,
        reference_feature_names=reference_feature_names,
        params=params,
        feature_embedding=feature_embedding,
        transform=transform,
        unseen=unseen,
        dtype=dtype,
        progress=progress,
    ).matrix()


def tree_vectors(
    tree: Tree,
    X: Matrix,
    feature_names: Sequence[str] | None = None,
    *,
    unseen: Unseen = "error",
    dtype: DType = "float64",
) -> np.ndarray:
    r"""The L1 embedding of the samples on ``tree``: :math:`y_i = (\alpha_v \mu_i(\Gamma_v))_v`.

    The TWD between two samples is exactly the L1 distance between their rows (paper Eq. 5),
    so any L1 / Manhattan tool (scanpy's ``metric="manhattan"``, pynndescent, FAISS) works on
    the TWD. Only nodes with a positive edge length and mass below them in some row are kept.
    ``X`` is transformed as the tree was learned and weighted by its feature weights.

    Examples
    --------
    >>> import numpy as np, hdtwd_cli as hd
    >>> X = np.random.default_rng(1).poisson(2.0, size=(30, 8))
    >>> tree = hd.learn_tree(X)
    >>> Y = hd.tree_vectors(tree, X)
    >>> D = hd.distances(X, tree)
    >>> bool(np.allclose(np.abs(Y[:, None] - Y[None]).sum(-1), D))
    True
    """
    return distance_vectors(X, tree, feature_names=feature_names, unseen=unseen, dtype=dtype).base.rows()


def knn_graph(
    X: Matrix,
    n_neighbors: int = 15,
    *,
    tree: Tree | None = None,
    feature_names: Sequence[str] | None = None,
    params: TreeParams | None = None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None = None,
    unseen: Unseen = "error",
    method: str = "auto",
    seed: int = 0,
    client: Any = None,
    progress: Reporter | bool | None = None,
) -> KnnGraph:
    """Each sample's nearest neighbours under the TWD (no n x n matrix is formed).

    ``n_neighbors`` counts the sample itself, as scanpy's does: ``n_neighbors - 1`` other samples.
    ``method``: ``exact``, ``nndescent`` (NN-descent candidates re-ranked by the exact TWD: the
    distances are exact, the neighbour set approximate), ``pynndescent`` (pynndescent's candidates,
    the same re-ranking; needs the package and the tree vectors in memory) or ``auto`` (the default: NN-descent above
    :data:`hdtwd_cli.knn._choose.AUTO_NNDESCENT_ABOVE` samples, the exact search below); ``seed`` makes NN-descent
    deterministic; ``client`` (a ``dask.distributed.Client``) runs the exact search on a cluster.
    """
    return distance_vectors(
        X,
        tree,
        feature_names=feature_names,
        params=params,
        feature_embedding=feature_embedding,
        unseen=unseen,
        n_neighbors=n_neighbors,
        progress=progress,
    ).knn(n_neighbors, method, seed, client)
