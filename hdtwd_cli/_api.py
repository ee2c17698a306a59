r"""The public Python API: the method end to end on arrays and AnnData, shaped like scanpy.

Everything the ``hdtwd`` command does is one call here; the command line only reads files,
calls these functions and writes their results.

========================  ===================================================================
function                  what it gives
========================  ===================================================================
:func:`learn_tree`        the feature tree (diffusion -> hyperbolic embedding -> HD-LCA tree)
:func:`tree_vectors`      the L1 embedding of the samples: TWD = L1 distance between rows
:func:`distances`         the pairwise (or cross) TWD matrix
:func:`distance_vectors`  the same, as a reusable object (dense, blocked or kNN output)
:func:`knn_graph`         each sample's nearest neighbours under the TWD (scanpy's meaning)
:func:`neighbors`         writes the kNN graph into an AnnData exactly as ``sc.pp.neighbors``
:func:`classify`          the paper's kNN-accuracy protocol against baselines (a report dict)
:func:`embed`             the stages before the tree (``hdtwd embed``)
:func:`decode_tree`       the tree from a stored embedding (``hdtwd decode-tree``)
========================  ===================================================================

The TWD between histograms :math:`\mu, \nu` on the leaves of a tree with edge lengths
:math:`\alpha_v` is (paper Eq. 5; docs/method.md section 4)

.. math:: \mathrm{TWD}(\mu, \nu) = \sum_v \alpha_v \, |\mu(\Gamma_v) - \nu(\Gamma_v)|,

where :math:`\Gamma_v` is the set of leaves below node :math:`v`: the L1 distance between the
vectors :math:`y = (\alpha_v \mu(\Gamma_v))_v`, which :func:`tree_vectors` returns.

Errors are :class:`~hdtwd_cli.errors.HdtwdError` (a ``ValueError``) naming the argument or
the input; warnings are :class:`~hdtwd_cli.errors.HdtwdWarning`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import FITTED_METHODS, FLOW_METHODS, OT_BUDGET, OT_METHODS
from hdtwd_cli._runtime.memory import allowance, available_memory, human_bytes
from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli._version import __version__
from hdtwd_cli.errors import (
    HdtwdError,
    HdtwdWarning,
    InputError,
    ParameterError,
    ResourceError,
)
from hdtwd_cli.evaluate._exact_ot import require_pot
from hdtwd_cli.evaluate._protocol import (
    BASELINES,
    DEFAULT_K,
    TREE_METHODS,
    evaluate,
    is_count_data,
    summarise,
)
from hdtwd_cli.knn._graph import (
    knn_distance_matrix,
    scanpy_keys,
    scanpy_neighbors_uns,
    umap_connectivities,
    with_self,
)
from hdtwd_cli.knn._search import choose_method, search_neighbors
from hdtwd_cli.tree._features import NEVER_COOCCUR_LIMIT, never_cooccur_fraction
from hdtwd_cli.tree._hyperbolic import HyperbolicEmbedding
from hdtwd_cli.tree._learn import (
    FeatureSpace,
    check_tree_memory,
    decode_from_embedding,
    extend_tree,
    feature_space,
    finish_tree,
    learn_trees,
    place,
)
from hdtwd_cli.tree._learn import embed as _embed_stages
from hdtwd_cli.tree._params import TreeParams, apply_transform
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._distance import (
    TreeVectors,
    align_to_tree,
    check_histograms,
    dense_output_bytes,
    tree_distance_blocks,
    tree_distances,
)

if TYPE_CHECKING:  # pragma: no cover
    import anndata

__all__ = [
    "learn_tree",
    "tree_vectors",
    "distances",
    "distance_vectors",
    "DistanceVectors",
    "knn_graph",
    "KnnGraph",
    "neighbors",
    "classify",
    "classify_methods",
    "embed",
    "FeatureEmbedding",
    "decode_tree",
    "VECTORS_MAX_BYTES",
]

DType = Literal["float64", "float32"]
Unseen = Literal["error", "root"]
Matrix = Any  # ndarray, scipy sparse matrix or anything np.asarray accepts

#: ``neighbors`` stores the TWD vectors in ``obsm`` only up to this size by default (1 GB).
VECTORS_MAX_BYTES = 10**9
#: Share of the available memory a distance matrix held in memory may take.
OUTPUT_SHARE = 0.8


def _reporter(progress: Reporter | bool | None) -> Reporter:
    if isinstance(progress, Reporter):
        return progress
    return Reporter(quiet=not progress)


def _matrix(X: Matrix, argument: str = "X") -> np.ndarray | sp.csr_matrix:
    """``X`` as float64 (CSR when sparse), checked: 2-D, non-empty, finite, non-negative."""
    from hdtwd_cli.io._matrix import check_values

    return check_values(X, argument)


def _names(names: Sequence[str] | None, m: int, argument: str = "feature_names") -> list[str]:
    if names is None:
        return [f"f{j}" for j in range(m)]
    out = [str(s) for s in names]
    if len(out) != m:
        raise ParameterError(f"has {len(out)} names for {m} columns", argument)
    if len(set(out)) != m:
        raise ParameterError("holds duplicate names", argument)
    return out


def _data_errors(fn: Callable[[], Any]) -> Any:
    """Run a numerical stage; a plain ValueError from it is a problem of the input data."""
    try:
        return fn()
    except HdtwdError:
        raise
    except ValueError as e:
        raise InputError(str(e)) from None


def learn_tree(
    X: Matrix,
    feature_names: Sequence[str] | None = None,
    *,
    params: TreeParams | None = None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None = None,
    check_memory: bool = True,
    progress: Reporter | bool | None = None,
) -> Tree:
    r"""Learn the hierarchy of the FEATURES (columns) of ``X``: a binary tree with one leaf per column.

    Diffusion operator on the features (paper Eq. 1), multi-scale hyperbolic embedding
    (Sec. 3.2), HD-LCA binary tree (Alg. 1), then the departures of docs/method.md section 7
    (features' space, idf weights, leaf term; features that cannot be placed hang from the root).

    Parameters
    ----------
    X : array-like or sparse matrix, shape (n_samples, n_features)
        Non-negative values, one row per sample.
    feature_names : sequence of str, optional
        Leaf names (default ``f0, f1, ...``).
    params : TreeParams, optional
        Configuration (default ``TreeParams()``, the library default; ``TreeParams.from_preset("paper")``
        reproduces the paper). ``params.transform`` is applied to ``X`` first.
    feature_embedding : (vectors, names), optional
        The features' own vectors (one row per name, e.g. word vectors), matched by name.
    check_memory : bool
        Refuse (:class:`~hdtwd_cli.errors.ResourceError`) before a stage that would not fit in
        the available memory.
    progress : bool or Reporter, optional
        Progress bars on stderr (terminals only).

    Returns
    -------
    Tree
        ``tree.metadata`` records every parameter used.

    Examples
    --------
    >>> import numpy as np, hdtwd_cli as hd
    >>> X = np.random.default_rng(0).poisson(2.0, size=(60, 12))
    >>> tree = hd.learn_tree(X, [f"g{j}" for j in range(12)])
    >>> tree.n_leaves, tree.n_nodes
    (12, 23)
    """
    params = params or TreeParams()
    Xm = apply_transform(_matrix(X), params.transform)
    return _learn(Xm, _names(feature_names, Xm.shape[1]), params, feature_embedding, check_memory, progress)


def _learn(
    Xt: np.ndarray | sp.csr_matrix,
    names: list[str],
    params: TreeParams,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None,
    check_memory: bool,
    progress: Reporter | bool | None,
) -> Tree:
    """:func:`learn_tree` on data already checked and transformed by ``params.transform``."""
    _data_errors(lambda: check_histograms(Xt))
    vectors = None if feature_embedding is None else (np.asarray(feature_embedding[0]), list(feature_embedding[1]))
    have = available_memory() if check_memory else None
    return _data_errors(
        lambda: learn_trees(Xt, names, params, [params.scales], _reporter(progress), None, have, vectors)[params.scales]
    )


def _tree_for(
    X: np.ndarray | sp.csr_matrix,
    names: list[str],
    tree: Tree | None,
    params: TreeParams | None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None,
    unseen: str,
    transform: str | None,
    more_names: Sequence[str],
    progress: Reporter | bool | None,
) -> tuple[Tree, str, dict[str, Any], np.ndarray | sp.csr_matrix]:
    """The tree to use (learned from ``X`` or the given one), its data transform, a record, and
    ``X`` transformed (once)."""
    if unseen not in ("error", "root"):
        raise ParameterError(f"must be 'error' or 'root', not {unseen!r}", "unseen")
    if tree is None:
        if unseen != "error":
            raise ParameterError("applies to a stored tree only ({b})", "unseen", b="tree")
        params = params or TreeParams()
        if transform is not None:
            params = params.replace(transform=transform)
        Xt = apply_transform(X, params.transform)
        T = _learn(Xt, names, params, feature_embedding, True, progress)
        return T, params.transform, {"tree_source": "learned", "params": dict(T.metadata)}, Xt
    if params is not None or feature_embedding is not None:
        raise ParameterError(
            "{arg} only applies when the tree is learned (tree=None)",
            "params" if params is not None else "feature_embedding",
        )
    stored = str(tree.metadata.get("transform", "none"))
    if transform is not None and transform != stored:
        raise ParameterError(f"is {transform!r} but the tree was learned with {stored!r}", "transform")
    if unseen == "root":
        tree = extend_tree(tree, list(names) + list(more_names))
    return tree, stored, {"tree_source": "given", "transform": stored, "unseen": unseen}, apply_transform(X, stored)


def _check_k(n_neighbors: int, n: int) -> None:
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

    def knn(self, n_neighbors: int, method: str = "exact", seed: int = 0, client: Any = None) -> KnnGraph:
        """The kNN graph without an n x n matrix (vectors computed per row block: memory O(n k)).

        ``method``: ``exact``, ``nndescent`` (hdtwd's NN-descent: approximate candidates, exact
        distances), ``pynndescent`` (pynndescent's candidates, the same exact re-ranking) or ``auto``
        (:mod:`hdtwd_cli.knn._search`); ``client``: a ``dask.distributed.Client`` that runs either search
        as tasks (:mod:`hdtwd_cli.knn._dask`), with the same bits.
        """
        if self.queries is not None:
            raise ParameterError("a kNN graph is of one set of samples: give no {arg}", "reference")
        _check_k(n_neighbors, self.base.n)
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
    rep = _reporter(progress)
    Xm = _matrix(X)
    names = _names(feature_names, Xm.shape[1])
    if n_neighbors is not None:
        if reference is not None:
            raise ParameterError("and {b} exclude each other", "n_neighbors", b="reference")
        _check_k(n_neighbors, Xm.shape[0])
    R = rnames = None
    if reference is not None:
        if tree is None:
            raise ParameterError("maps both sets onto one given tree: give {b} too", "reference", b="tree")
        R = _matrix(reference, "reference")
        rnames = _names(reference_feature_names, R.shape[1], "reference_feature_names")
    T, tf, record, Xt = _tree_for(Xm, names, tree, params, feature_embedding, unseen, transform, rnames or (), rep)
    Xt = align_to_tree(Xt, names, T)
    record = {"hdtwd_version": __version__, **record, "dtype": dtype}
    if R is None:
        base = _data_errors(lambda: TreeVectors(T, Xt, dtype))
        return DistanceVectors(T, base, None, dtype, record, rep)
    Rt = align_to_tree(apply_transform(R, tf), rnames, T)  # type: ignore[arg-type]
    base = _data_errors(lambda: TreeVectors(T, Rt, dtype, extra=Xt))
    _data_errors(lambda: check_histograms(Xt))
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
    method: str = "exact",
    seed: int = 0,
    client: Any = None,
    progress: Reporter | bool | None = None,
) -> KnnGraph:
    """Each sample's nearest neighbours under the TWD (no n x n matrix is formed).

    ``n_neighbors`` counts the sample itself, as scanpy's does: ``n_neighbors - 1`` other samples.
    ``method``: ``exact``, ``nndescent`` (NN-descent candidates re-ranked by the exact TWD: the
    distances are exact, the neighbour set approximate), ``pynndescent`` (pynndescent's candidates,
    the same re-ranking; needs the package and the tree vectors in memory) or ``auto`` (NN-descent above
    :data:`hdtwd_cli.knn._search.AUTO_NNDESCENT_ABOVE` samples); ``seed`` makes NN-descent
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


def _adata_matrix(adata: anndata.AnnData, layer: str | None, use_raw: bool | None) -> tuple[Any, list[str], str]:
    """The matrix ``neighbors`` reads: ``layers[layer]``, ``raw.X`` or ``X`` (see :func:`neighbors`)."""
    if layer is not None and use_raw:
        raise ParameterError("{arg} and {b} exclude each other", "layer", b="use_raw")
    if layer is not None:
        if layer not in adata.layers:
            raise ParameterError(f"{layer!r} is not in adata.layers ({', '.join(adata.layers) or 'none'})", "layer")
        return adata.layers[layer], [str(v) for v in adata.var_names], f"layers[{layer!r}]"
    if use_raw is None:
        X = adata.X
        negative = X is not None and (X.min() < 0 if not sp.issparse(X) else (X.data < 0).any())
        use_raw = bool(negative and adata.raw is not None)
    if use_raw:
        if adata.raw is None:
            raise ParameterError("is set but adata has no .raw", "use_raw")
        return adata.raw.X, [str(v) for v in adata.raw.var_names], "raw.X"
    return adata.X, [str(v) for v in adata.var_names], "X"


def neighbors(
    adata: anndata.AnnData,
    n_neighbors: int = 15,
    *,
    tree: Tree | None = None,
    params: TreeParams | None = None,
    layer: str | None = None,
    use_raw: bool | None = None,
    key_added: str | None = None,
    copy: bool = False,
    store_vectors: bool | None = None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None = None,
    unseen: Unseen = "error",
    method: str = "exact",
    seed: int = 0,
    client: Any = None,
    progress: Reporter | bool | None = None,
) -> anndata.AnnData | None:
    """The TWD kNN graph of the cells, written into ``adata`` exactly as ``sc.pp.neighbors`` writes its graph.

    Afterwards ``sc.tl.umap``, ``sc.tl.leiden``, ``sc.tl.paga``, ``sc.tl.diffmap`` ... run on the
    TWD graph unchanged (with ``neighbors_key=key_added`` when a key is given).

    Parameters
    ----------
    adata : AnnData
        Cells x genes; the values must be non-negative (counts or normalised counts).
    n_neighbors : int
        Size of each cell's neighbourhood, the cell itself included (scanpy's meaning).
    tree : Tree, optional
        A tree learned before (e.g. on a reference atlas); default: learn one from this data.
    params : TreeParams, optional
        Configuration of the learned tree.
    layer : str, optional
        Read ``adata.layers[layer]``.
    use_raw : bool, optional
        Read ``adata.raw.X``. ``None``: ``raw`` when ``X`` holds negative values (scaled data) and
        ``adata.raw`` exists, else ``X``.
    key_added : str, optional
        ``None``: ``obsp["distances"]``, ``obsp["connectivities"]``, ``uns["neighbors"]``; else
        ``obsp[key_added + "_distances"]``, ``obsp[key_added + "_connectivities"]``, ``uns[key_added]``.
    copy : bool
        Return a modified copy instead of writing into ``adata``.
    method, seed, client
        The neighbour search (:func:`knn_graph`).
    store_vectors : bool, optional
        Store the TWD vectors (:func:`tree_vectors`) as ``obsm["X_hdtwd"]`` and record
        ``use_rep="X_hdtwd"``, ``metric="manhattan"`` so that scanpy's tools that recompute distances
        get the TWD. ``None``: store them when they take at most :data:`VECTORS_MAX_BYTES`.

    Returns
    -------
    AnnData or None
        The copy with ``copy=True``, else ``None``. Written fields:

        - ``obsp["distances"]``: CSR float64, the ``n_neighbors - 1`` exact TWDs of each row;
        - ``obsp["connectivities"]``: CSR float32, UMAP's fuzzy simplicial set;
        - ``uns["neighbors"]``: ``connectivities_key``, ``distances_key``, ``params`` (``n_neighbors``,
          ``method="umap"``, ``random_state``, ``metric="manhattan"``, ``use_rep``, and ``hdtwd``: a
          JSON record of the tree and the input);
        - ``obsm["X_hdtwd"]``: the TWD vectors (see ``store_vectors``).

    Examples
    --------
    >>> import anndata, numpy as np, hdtwd_cli as hd
    >>> adata = anndata.AnnData(np.random.default_rng(0).poisson(1.0, size=(50, 20)).astype(np.float32))
    >>> hd.neighbors(adata, n_neighbors=10)
    >>> int(adata.obsp["distances"].getnnz(axis=1).max()), adata.uns["neighbors"]["params"]["metric"]
    (9, 'manhattan')
    """
    ad = adata.copy() if copy else adata
    X, names, source = _adata_matrix(ad, layer, use_raw)
    if X is None:
        raise ParameterError("adata has no X", "adata")
    dv = distance_vectors(
        X,
        tree,
        feature_names=names,
        params=params,
        feature_embedding=feature_embedding,
        unseen=unseen,
        n_neighbors=n_neighbors,
        progress=progress,
    )
    graph = dv.knn(n_neighbors, method, seed, client)
    write_graph(ad, graph, key_added, dv.vectors_for_obsm(store_vectors), dict(graph.params, input=source))
    return ad if copy else None


def write_graph(
    adata: anndata.AnnData, graph: KnnGraph, key_added: str | None, vectors: np.ndarray | None, record: dict[str, Any]
) -> None:
    """Put ``graph`` into ``adata`` in ``sc.pp.neighbors``' layout (see :func:`neighbors`)."""
    key, dkey, ckey = scanpy_keys(key_added)
    if vectors is not None:
        adata.obsm["X_hdtwd"] = vectors
    adata.obsp[dkey] = graph.distance_matrix()
    adata.obsp[ckey] = graph.connectivities()
    adata.uns[key] = scanpy_neighbors_uns(
        key_added,
        graph.n_neighbors,
        int(record.get("seed", 0)),
        use_rep="X_hdtwd" if vectors is not None else None,
        extra={"hdtwd": json.dumps(record, default=str, sort_keys=True)},
    )


def classify(
    X: Matrix,
    labels: Sequence[Any] | np.ndarray,
    feature_names: Sequence[str] | None = None,
    *,
    methods: Sequence[str] | None = None,
    k: Sequence[int] = DEFAULT_K,
    splits: int = 5,
    test_size: float = 0.3,
    eps: float | Sequence[float] | None = None,
    scales: int | Sequence[int] | None = None,
    params: TreeParams | None = None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None = None,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    ot_budget: int = OT_BUDGET,
) -> dict[str, Any]:
    """kNN accuracy of the TWD and of baselines on the same train/test splits (paper App. C).

    The tree of each split is learned from its training rows only. With several ``eps`` or
    ``scales`` values, each split chooses by inner cross-validation on its training rows.

    Parameters
    ----------
    labels : sequence, length n_samples
        Class of each sample.
    methods : sequence of str, optional
        ``hdtwd`` and/or baselines (``cosine``, ``euclidean``, ``l1``, ``tfidf-l1``, ``tfidf-cosine``,
        ``pca``), the paper's competitor trees (``quadtree``, ``mst``, ``cluster-tree``, ``tswd-1``,
        ``tswd-5``, ``tswd-10``, ``ultrafit``, ``treerep``, ``hhc``, ``ghhc``:
        :mod:`hdtwd_cli.evaluate._competitors`), the trees fitted to exact OT on sampled training pairs
        (``wqtwd``, ``wctwd``, ``swqtwd``, ``swctwd``, ``ultratree``: :mod:`hdtwd_cli.evaluate._weighted`,
        needs POT), ``flowtree`` (on exact OT's test rows) and exact OT (``ot``:
        :mod:`hdtwd_cli.evaluate._exact_ot`, needs POT); docs/method.md section 12.
        Default: hdtwd, cosine, euclidean, l1, then tf-idf for counts or PCA otherwise.
    k : sequence of int
        The k of the kNN classifier; the report gives each method's best.
    ot_budget : int
        Transport variables per split for ``ot`` (:func:`hdtwd_cli.evaluate._protocol.ot_test_rows`):
        its accuracy is measured on the test rows that fit, listed in its ``params``.

    Returns
    -------
    dict
        ``methods``: per method ``best_k``, ``mean``, ``std``, ``per_k``, ``per_split``, ``params``;
        plus the protocol's settings.

    Examples
    --------
    >>> import numpy as np, hdtwd_cli as hd
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.poisson([5] * 6 + [1] * 6, size=(20, 12)), rng.poisson([1] * 6 + [5] * 6, size=(20, 12))])
    >>> report = hd.classify(X, [0] * 20 + [1] * 20, methods=["hdtwd", "l1"], k=[1, 3], splits=2)
    >>> sorted(report["methods"]), report["methods"]["hdtwd"]["mean"] > 90
    (['hdtwd', 'l1'], True)
    """
    base = params or TreeParams()
    Xm = _matrix(X)
    names = _names(feature_names, Xm.shape[1])
    y = np.asarray(labels)
    if y.shape != (Xm.shape[0],):
        raise ParameterError(f"has {y.size} labels for {Xm.shape[0]} samples", "labels")
    ks = sorted({int(v) for v in k})
    if not ks or ks[0] < 1:
        raise ParameterError("values must be >= 1", "k")
    if not 0 < test_size < 1:
        raise ParameterError("must be between 0 and 1", "test_size")
    eps_grid = [base.eps] if eps is None else [float(v) for v in np.atleast_1d(eps)]
    scales_grid = [base.scales] if scales is None else [int(v) for v in np.atleast_1d(scales)]
    if min(eps_grid) <= 0:
        raise ParameterError("values must be > 0", "eps")
    if min(scales_grid) < 0:
        raise ParameterError("values must be >= 0", "scales")
    if eps is not None:
        base = base.replace(landmark_eps=None)  # the grid applies to the landmark path too
    chosen = classify_methods(Xm, methods)
    if ot_budget < 1:
        raise ParameterError("must be a positive number of transport variables", "ot_budget")
    n_train = Xm.shape[0] - int(round(test_size * Xm.shape[0]))
    if ks[-1] > n_train:
        raise ParameterError(f"the largest {{arg}} ({ks[-1]}) exceeds the {n_train} training samples per split", "k")
    vectors = None if feature_embedding is None else (np.asarray(feature_embedding[0]), list(feature_embedding[1]))
    results = _data_errors(
        lambda: evaluate(
            apply_transform(Xm, base.transform),
            names,
            y,
            chosen,
            eps_grid,
            scales_grid,
            base,
            ks,
            splits,
            test_size,
            seed,
            progress=progress,
            embedding=vectors,
            ot_budget=ot_budget,
        )
    )
    return summarise(
        results,
        {
            "n_samples": Xm.shape[0],
            "n_features": Xm.shape[1],
            "n_classes": int(len(np.unique(y))),
            "splits": splits,
            "test_size": test_size,
            "seed": seed,
            "k": ks,
            "hdtwd_version": __version__,
            "transform": base.transform,
        },
    )


def classify_methods(X: Matrix, methods: Sequence[str] | None = None) -> list[str]:
    """The methods :func:`classify` compares: ``methods`` checked, or the default for the data:
    hdtwd, cosine, euclidean, l1; then tf-idf L1 and cosine for counts; and PCA (scanpy's
    representation) unless most pairs of features never share a sample, the property that picks
    the features' space (:func:`hdtwd_cli.tree._features.never_cooccur_fraction`): cells' UMI counts get PCA
    beside tf-idf, documents' word counts only tf-idf."""
    counts = is_count_data(X)
    cooccur = not counts or never_cooccur_fraction(X) <= NEVER_COOCCUR_LIMIT
    chosen = (
        list(methods)
        if methods
        else ["hdtwd", "cosine", "euclidean", "l1"]
        + (["tfidf-l1", "tfidf-cosine"] if counts else [])
        + (["pca"] if cooccur else [])
    )
    known = BASELINES + TREE_METHODS + FITTED_METHODS + FLOW_METHODS + OT_METHODS
    unknown = [m for m in chosen if m not in ("hdtwd",) + known]
    if unknown:
        raise ParameterError(
            f"holds unknown method(s) {', '.join(unknown)}; choose from hdtwd, {', '.join(known)}",
            "methods",
        )
    needs_pot = [m for m in chosen if m in FITTED_METHODS + OT_METHODS]
    if needs_pot:
        try:
            require_pot()
        except ImportError as e:
            raise ParameterError(f"holds {needs_pot[0]}: {e}", "methods") from None
    return chosen


@dataclass
class FeatureEmbedding:
    """The stages before the tree (``hdtwd embed``): the features' space, operator and embedding."""

    embedding: HyperbolicEmbedding
    operator: Any
    space: FeatureSpace
    params: TreeParams

    def write(self, path: str, meta: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> None:
        """Write the HDF5 embedding file (layout: :mod:`hdtwd_cli.io._hdf5`) atomically.

        ``meta``: file attributes (the input's record); ``extra``: more entries of ``/params``.
        """
        from hdtwd_cli.io import atomic_path

        with atomic_path(path) as tmp:
            self._write(tmp, meta, extra)

    def _write(self, target: Any, meta: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> None:
        from hdtwd_cli.io import write_embedding

        s = self.space
        weights = None if s.weights is None else [s.weights[n] for n in s.names + s.unplaced]
        record = {**self.params.as_dict(), "feature_source": s.source, "latent_energy": s.shared, **(extra or {})}
        write_embedding(
            target,
            self.embedding,
            self.operator,
            s.names,
            s.unplaced,
            record,
            {"hdtwd_version": __version__, **(meta or {})},
            weights,
        )

    def stored(self) -> Any:
        """What :func:`hdtwd_cli.io.read_embedding` would read back from :meth:`write`'s file (an
        in-memory round trip of the same layout, so :func:`decode_tree` gives the same tree either way)."""
        import io as _io

        from hdtwd_cli.io import read_embedding

        buf = _io.BytesIO()
        self._write(buf)
        buf.seek(0)
        return read_embedding(buf)  # type: ignore[arg-type]


def embed(
    X: Matrix,
    feature_names: Sequence[str] | None = None,
    *,
    params: TreeParams | None = None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None = None,
    check_memory: bool = True,
    progress: Reporter | bool | None = None,
) -> FeatureEmbedding:
    """Diffusion operator and multi-scale hyperbolic embedding of the features (paper Sec. 3.2).

    :func:`decode_tree` turns the result (or the file :meth:`FeatureEmbedding.write` makes)
    into the tree; :func:`learn_tree` does both at once.
    """
    params = params or TreeParams()
    rep = _reporter(progress)
    Xm = apply_transform(_matrix(X), params.transform)
    names = _names(feature_names, Xm.shape[1])
    vectors = None if feature_embedding is None else (np.asarray(feature_embedding[0]), list(feature_embedding[1]))
    space = _data_errors(lambda: feature_space(Xm, names, params, vectors))
    if len(space.names) < 2:
        raise InputError(
            "fewer than two features can be placed (non-zero columns, or vectors in the feature "
            "embedding): nothing to embed"
        )
    F = space.matrix
    if check_memory:
        have = available_memory()
        need = check_tree_memory(
            F.shape[0],
            F.shape[1],
            F.nnz if sp.issparse(F) else None,
            params,
            have,
            None,
            ("diffusion", "embedding"),
            store_embedding=True,
        )
        rep.note(f"the embedding needs about {need / 1e9:.2f} GB (estimate; {have / 1e9:.1f} GB available)")
    op, emb = _data_errors(lambda: _embed_stages(F, params, rep))
    place(space, op, rep)
    return FeatureEmbedding(emb, op, space, params)


def decode_tree(
    stored: Any,
    *,
    linkage: str | None = None,
    edge_weights: str | None = None,
    check_memory: bool = True,
    progress: Reporter | bool | None = None,
) -> Tree:
    """The HD-LCA binary tree (Alg. 1) of an embedding: :func:`embed`'s result or a stored one
    (:func:`hdtwd_cli.io.read_embedding`).

    ``linkage`` and ``edge_weights`` default to the embedding's preset; unplaced features hang
    from the root and the leaf term is applied as :func:`learn_tree` does.
    """
    from hdtwd_cli._defaults import PRESETS

    if isinstance(stored, FeatureEmbedding):
        stored = stored.stored()
    rep = _reporter(progress)
    cfg = PRESETS.get(str(stored.params.get("preset", "default")), PRESETS["default"])
    rule = linkage or str(stored.params.get("linkage", cfg["linkage"]))  # the embedding's configuration
    weights = edge_weights or str(stored.params.get("edge_weights", cfg["edge_weights"]))
    n_landmarks = int(stored.diffusion.get("n_landmarks", 0))
    emb = HyperbolicEmbedding(psi=stored.psi, heights=stored.heights, negative_mass=stored.negative_mass)
    tp = TreeParams(scales=emb.n_scales - 1, linkage=rule, edge_weights=weights, landmarks=n_landmarks)
    if check_memory:
        have = available_memory()
        need = check_tree_memory(0, len(stored.feature_names), None, tp, have, None, ("tree",), store_embedding=True)
        rep.note(f"decoding the tree needs about {need / 1e9:.2f} GB (estimate; {have / 1e9:.1f} GB available)")
    tree = decode_from_embedding(emb, stored.feature_names, rep, rule, weights, tie_ranks=n_landmarks == 0)
    dropped = list(stored.diffusion.get("dropped", []))
    fw = stored.diffusion.get("feature_weights")
    space = FeatureSpace(
        None,
        stored.feature_names,
        dropped,
        None if fw is None else dict(zip(stored.feature_names + dropped, np.asarray(fw).tolist())),
        str(stored.params.get("feature_source", "data")),
        float(stored.params.get("latent_energy", 1.0)),
    )
    lam = stored.params.get("leaf_length")  # absent: the automatic rule, from the stored energy
    tree = finish_tree(tree, space, TreeParams(leaf_length=None if lam is None else float(lam)))
    meta = {**stored.params, **tree.metadata}
    meta.update(
        {
            "linkage": rule,
            "edge_weights": weights,
            "eps_used": stored.diffusion.get("eps"),
            "sigma": stored.diffusion.get("sigma"),
            "unplaced_features": len(dropped),
            "mean_leaf_depth": tree.metadata["mean_leaf_depth"],
        }
    )
    tree.metadata.update(meta)
    return tree
