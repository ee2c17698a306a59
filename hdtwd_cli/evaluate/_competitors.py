r"""The trees of the paper's competitors (Table 1) and the star tree, built on the features' vectors.

Each function returns a :class:`~hdtwd_cli.Tree` whose leaves are the features, so that the
distance on it is an exact tree-Wasserstein distance computed by hdtwd's own kernels
(:func:`hdtwd_cli.twd._distance.query_distances`). ``classify --methods quadtree,mst`` builds them
from the split's :class:`~hdtwd_cli.tree._learn.Prepared` stage, the one hdtwd's tree of the same
training rows is learned from: the features' vectors it holds (:func:`feature_vectors`), and
:meth:`~hdtwd_cli.tree._learn.Prepared.finish` for the map from values to histograms (denoiser,
feature weights), so that only the tree differs from hdtwd's learned hierarchy (docs/method.md
section 12). Which tree a method builds, and from which seed, is its :class:`~._methods.Shape`
(:func:`shape_trees`, :data:`BUILDERS`).

- :func:`star_tree`: every leaf on one edge from the root (the L1 distance; ``star``).
- :func:`quadtree`: Indyk & Thaper (2003), randomly shifted nested hypercube grids.
- :func:`mst_tree`: the Euclidean minimum spanning tree of the feature vectors.
- :func:`cluster_tree`: Le et al.'s (2019) clustering-based tree, hierarchical k-means; the mean
  TWD over several such trees with random centres is their tree-sliced distance (``tswd-n``).
- ``ultrafit``: the ultrametric closest to the Euclidean distances (Chierchia & Perret 2019;
  :mod:`._ultrametric`).
- ``treerep``: TreeRep's tree of the Euclidean distances, with Steiner nodes (Sonthalia & Gilbert
  2020, the paper's TR-TWD; :mod:`._treerep`).
- ``hhc``: hyperbolic hierarchical clustering, the features embedded in the Poincare disk by a
  relaxed Dasgupta cost and decoded (Chami et al. 2020, the paper's HHC-TWD; :mod:`._hyperbolic_hc`).
- ``ghhc``: gradient-based hyperbolic hierarchical clustering, internal nodes learned in the Poincare
  ball by a triplet loss on a differentiable LCA (Monath et al. 2019, the paper's gHHC-TWD; :mod:`._ghhc`).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.blas import serial_blas
from hdtwd_cli.evaluate._methods import BUILDER_SOURCES, METHODS, Shape
from hdtwd_cli.tree._denoise import DenoisedRows
from hdtwd_cli.tree._learn import Prepared
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree

__all__ = [
    "quadtree",
    "mst_tree",
    "cluster_tree",
    "star_tree",
    "BUILDERS",
    "feature_vectors",
    "shape_trees",
    "competitor_trees",
    "reference_tree",
    "MAX_QUADTREE_DEPTH",
    "CLUSTER_BRANCHES",
    "CLUSTER_HEIGHT",
]
#: Grid levels below which features still sharing a cell become leaves of that cell.
MAX_QUADTREE_DEPTH = 40
#: Clusters per node and levels of the clustering-based trees (``cluster-tree``, ``tswd-n``).
CLUSTER_BRANCHES = 5
CLUSTER_HEIGHT = 6


def _numbered(
    m: int,
    leaf_parent: np.ndarray,
    leaf_length: np.ndarray,
    internal_parent: list[int],
    internal_length: list[float],
    names: Sequence[str],
    metadata: dict,
) -> Tree:
    """A :class:`Tree` from leaves (parents as creation indices of internal nodes) and internal nodes
    in creation order (root first, every node after its parent): internal node ``c`` becomes
    ``m + n_int - 1 - c``, so children come before parents and the root is last."""
    n_int = len(internal_parent)
    renum = m + n_int - 1 - np.arange(n_int)
    par = np.empty(m + n_int, dtype=np.int64)
    par[:m] = renum[leaf_parent]
    ip = np.asarray(internal_parent, dtype=np.int64)
    par[renum] = np.where(ip >= 0, renum[np.maximum(ip, 0)], -1)
    lens = np.empty(m + n_int)
    lens[:m] = leaf_length
    lens[renum] = internal_length
    tree = Tree(parent=par, length=lens, leaf_names=list(names), metadata=metadata)
    tree.validate()
    return tree


def quadtree(F: np.ndarray, names: Sequence[str], seed: int = 0, max_depth: int = MAX_QUADTREE_DEPTH) -> Tree:
    r"""Indyk & Thaper's randomly shifted quadtree (2003) on the feature vectors ``F`` (``m x d``).

    With :math:`\Delta` the side of the features' bounding cube and a shift
    :math:`s \sim U[0, \Delta)^d` drawn from ``numpy.random.default_rng(seed)``, the level-``l``
    cell of feature ``j`` is :math:`\lfloor (F_j - \min F + s)\, 2^l / (2\Delta) \rfloor` (level 0 is
    one cube of side :math:`2\Delta` holding every shifted point). A cell is split until it holds
    one feature (that cell is the feature's leaf); the edge from a level-``l`` cell to its parent
    has the cell's diameter :math:`\sqrt d\, 2\Delta / 2^l` as length (halving per level), so the
    tree's path metric dominates the Euclidean distance between the vectors. Chains of cells that
    do not split are one edge (the sum of their lengths). Features still sharing a cell after
    ``max_depth`` levels (identical vectors) are leaves of that cell, at the chain's length.

    Returns
    -------
    Tree
        Leaves in the order of ``names``; ``metadata`` records ``method``, ``seed``, ``levels``.
    """
    F = np.asarray(F, dtype=np.float64)
    m, d = F.shape
    if m < 1 or len(names) != m:
        raise ValueError("one vector per feature name is needed")
    if not np.all(np.isfinite(F)):
        raise ValueError("the feature vectors must be finite")
    lo = F.min(axis=0) if m else np.zeros(d)
    delta = float(np.max(F.max(axis=0) - lo)) if m else 0.0
    shifted = F - lo + np.random.default_rng(seed).uniform(0.0, delta, size=d) if delta > 0 else np.zeros_like(F)
    side0 = 2.0 * delta
    diam = np.sqrt(d) * side0
    parent = np.full(m, -1, dtype=np.int64)  # leaves: the creation index of their parent, filled below
    length = np.zeros(m)
    internal_parent: list[int] = [-1]  # internal nodes in creation order (root first)
    internal_length: list[float] = [0.0]
    active = np.arange(m)
    group_node = np.zeros(m, dtype=np.int64)  # internal node (creation index) of each active feature's group
    pending = np.zeros(m)  # length of the unsplit chain below that node
    level = 0
    while active.size and level < max_depth and diam > 0:
        level += 1
        w = diam / 2.0**level
        cells = np.floor(shifted[active] * (2.0**level / side0)).astype(np.int64)
        key = np.column_stack([group_node[active], cells])
        _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
        size = np.bincount(inverse)
        split = np.bincount(group_node[active[first]], minlength=len(internal_parent))[group_node[active]] > 1
        pend = pending[active] + w
        # groups that stay whole: the chain grows by this level's edge
        whole = ~split
        pending[active[whole]] = pend[whole]
        alone = split & (size[inverse] == 1)
        leaf = active[alone]
        parent[leaf] = group_node[leaf]
        length[leaf] = pend[alone]
        new_cell = split & (size[inverse] > 1)
        cell_ids = np.unique(inverse[new_cell])
        node_of = {}
        for c in cell_ids.tolist():  # one new internal node per multi-feature cell of a split group
            j = active[first[c]]
            node_of[c] = len(internal_parent)
            internal_parent.append(int(group_node[j]))
            internal_length.append(float(pend[first[c]]))
        moved = active[new_cell]
        group_node[moved] = [node_of[c] for c in inverse[new_cell].tolist()]
        pending[moved] = 0.0
        active = active[~alone]
    rest = active  # identical vectors, or max_depth reached: leaves of their group's node
    parent[rest] = group_node[rest]
    length[rest] = pending[rest]
    return _numbered(
        m,
        parent,
        length,
        internal_parent,
        internal_length,
        names,
        {"method": "quadtree", "seed": int(seed), "levels": level},
    )


def mst_tree(F: np.ndarray, names: Sequence[str]) -> Tree:
    r"""The Euclidean minimum spanning tree of the feature vectors ``F`` (``m x d``) as a tree of leaves.

    Every feature is a node of the MST (SciPy's ``minimum_spanning_tree`` on the dense Euclidean
    distances, ``O(m^2)`` memory), so each becomes an internal site with its leaf hung by a
    zero-length edge; sites are joined by the MST's edges, whose lengths are the Euclidean
    distances. The path metric between two leaves is then their distance along the MST. Rooted at
    the feature nearest the vectors' mean (the root does not change the distance).
    """
    from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

    F = np.asarray(F, dtype=np.float64)
    m = F.shape[0]
    if m < 1 or len(names) != m:
        raise ValueError("one vector per feature name is needed")
    sq = np.einsum("ij,ij->i", F, F)
    D = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * (F @ F.T), 0.0))
    np.fill_diagonal(D, 0.0)
    # zero distances (identical vectors) are absent edges for SciPy: lift them to the smallest positive
    # value, then set those edge lengths back to 0
    tiny = np.nextafter(0.0, 1.0)
    off = ~np.eye(m, dtype=bool)
    D[off & (D == 0)] = tiny
    T = minimum_spanning_tree(D).tocsr()
    T = T + T.T
    root = int(np.argmin(((F - F.mean(axis=0)) ** 2).sum(axis=1)))
    order, pred = breadth_first_order(T, root, directed=False, return_predecessors=True)
    if order.size != m:
        raise ValueError("the feature vectors do not form one connected set")
    # sites numbered children first: reverse BFS order
    site = np.empty(m, dtype=np.int64)
    site[order[::-1]] = m + np.arange(m)
    parent = np.empty(2 * m, dtype=np.int64)
    length = np.zeros(2 * m)
    parent[:m] = site  # leaf j hangs from its own site, edge 0
    child = np.flatnonzero(pred >= 0)
    parent[site[root]] = -1
    parent[site[child]] = site[pred[child]]
    w = D[child, pred[child]]  # the spanning tree's edges are entries of D
    length[site[child]] = np.where(w <= tiny, 0.0, w)  # identical vectors: the lifted edge is 0 again
    tree = Tree(parent=parent, length=length, leaf_names=list(names), metadata={"method": "mst", "root": names[root]})
    tree.validate()
    return tree


def cluster_tree(
    F: np.ndarray, names: Sequence[str], seed: int = 0, branches: int = CLUSTER_BRANCHES, height: int = CLUSTER_HEIGHT
) -> Tree:
    r"""Le et al.'s clustering-based tree (2019): hierarchical k-means of the feature vectors ``F`` (``m x d``).

    The root holds every feature at their mean; a node of more than one distinct vector above
    depth ``height`` is split by k-means (SciPy's ``kmeans2``, k-means++ centres drawn from
    ``numpy.random.default_rng([seed, node])``, 10 Lloyd iterations) into at most ``branches``
    clusters, each a child at its mean, on an edge of the Euclidean distance between the two means;
    the features of a node that is not split hang from it on edges of their distance to its mean.
    Deterministic for a seed; the mean TWD over trees of several seeds is the tree-sliced distance.
    """
    import warnings

    from scipy.cluster.vq import kmeans2

    F = np.asarray(F, dtype=np.float64)
    m = F.shape[0]
    if m < 1 or len(names) != m:
        raise ValueError("one vector per feature name is needed")
    leaf_parent = np.zeros(m, dtype=np.int64)
    leaf_length = np.zeros(m)
    internal_parent, internal_length, centres = [-1], [0.0], [F.mean(axis=0)]
    stack = [(0, np.arange(m), 0)]  # (node, its features, depth): no recursion
    while stack:
        node, members, depth = stack.pop()
        c = centres[node]
        pts = F[members]
        k = min(branches, members.size)
        label = None
        if depth < height and k > 1 and np.ptp(pts, axis=0).max() > 0:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # an empty cluster is simply not a child
                _, label = kmeans2(pts, k, iter=10, minit="++", seed=np.random.default_rng([seed, node]))
            if np.unique(label).size < 2:
                label = None
        if label is None:
            leaf_parent[members] = node
            leaf_length[members] = np.sqrt(((pts - c) ** 2).sum(axis=1))
            continue
        for g in np.unique(label).tolist():
            sub = members[label == g]
            mu = F[sub].mean(axis=0)
            child = len(internal_parent)
            internal_parent.append(node)
            internal_length.append(float(np.sqrt(((mu - c) ** 2).sum())))
            centres.append(mu)
            stack.append((child, sub, depth + 1))
    return _numbered(
        m,
        leaf_parent,
        leaf_length,
        internal_parent,
        internal_length,
        names,
        {"method": "cluster-tree", "seed": int(seed), "branches": branches, "height": height},
    )


def star_tree(names: Sequence[str]) -> Tree:
    r"""The star tree of the features: every leaf on an edge of length 1 from the root.

    Its TWD is :math:`\sum_j \lvert a_j - b_j \rvert`, the L1 distance between the histograms: the
    tree that holds no hierarchy, against which a learned tree's gain is measured (``classify``'s
    ``star``).
    """
    m = len(names)
    if m < 1:
        raise ValueError("a star tree needs at least one feature")
    parent = np.full(m + 1, m, dtype=np.int64)
    parent[m] = -1
    length = np.ones(m + 1)
    length[m] = 0.0
    tree = Tree(parent=parent, length=length, leaf_names=list(names), metadata={"method": "star"})
    tree.validate()
    return tree


def _builder(source: str) -> Callable[[np.ndarray, list[str], int], Tree]:
    """The builder ``"module:function"`` (:attr:`Shape.source <._methods.Shape>`) as ``(vectors, names, seed)
    -> Tree``: ``function(names)`` where its first parameter is the names (it reads no vectors), else
    ``function(vectors, names, seed)``, without ``seed`` where it takes none (it draws nothing)."""
    module, name = source.split(":")
    f = getattr(importlib.import_module(module), name)
    params = list(inspect.signature(f).parameters)
    if params[0] == "names":
        return lambda V, names, seed: f(names)
    if "seed" in params:
        return lambda V, names, seed: f(V, names, seed=seed)
    return lambda V, names, seed: f(V, names)


#: The tree builders of :attr:`Shape.builder <._methods.Shape>`: ``(unit vectors, names, seed) -> Tree``, one per
#: entry of :data:`._methods.BUILDER_SOURCES` (the registry names each builder once).
BUILDERS: dict[str, Callable[[np.ndarray, list[str], int], Tree]] = {
    key: _builder(source) for key, source in BUILDER_SOURCES.items()
}


def feature_vectors(prepared: Prepared) -> tuple[list[str], np.ndarray]:
    r"""The placed features of ``prepared`` and their vectors in its features' space, one unit-length ROW each.

    The vectors hdtwd's diffusion reads (:attr:`Prepared.space <hdtwd_cli.tree._learn.Prepared>`:
    the denoised rows' columns where the rule denoises, the data columns, the latent SVD space or
    the given embedding), read through :meth:`~hdtwd_cli.tree._learn.Prepared.handed_on` (``prepared``
    keeps them), scaled to unit length: hdtwd compares them by cosine distance, and the Euclidean
    distance between unit vectors is :math:`\sqrt{2 \cdot \text{cosine distance}}`.
    """
    M, held = prepared.handed_on()
    if isinstance(M, DenoisedRows):
        M = M.dense()
    V = np.asarray(M.toarray() if sp.issparse(M) else M, dtype=np.float64).T.copy()  # type: ignore[union-attr]
    norms = np.sqrt(np.einsum("ij,ij->i", V, V))
    V /= np.where(norms > 0, norms, 1.0)[:, None]
    return list(held.space.names), V


def shape_trees(shape: Shape, names: list[str], V: np.ndarray, *, seed: int = 0, split: int = 0) -> list[Tree]:
    """The (unfinished) trees of ``shape`` on the unit vectors ``V`` (one row per name of ``names``).

    Seeds (:attr:`Shape.seed <._methods.Shape>`): ``split`` ``seed + split``, ``fixed`` ``seed``,
    ``slices`` tree ``t`` from ``default_rng([seed, split, t])``. Built with BLAS on one thread
    (:func:`~hdtwd_cli._runtime.blas.serial_blas`: their products, e.g. the distances of ``mst`` and
    the ball distances of ``ghhc``, have the same bits at any thread count).
    """
    build = BUILDERS[shape.builder]
    if shape.seed == "slices":
        seeds = [int(np.random.default_rng([seed, split, t]).integers(2**31)) for t in range(shape.count)]
    else:
        seeds = [seed + split if shape.seed == "split" else seed] * shape.count
    with serial_blas():
        return [build(V, names, s) for s in seeds]


def competitor_trees(
    method: str,
    prepared: Prepared,
    params: TreeParams,
    *,
    split: int = 0,
    vectors: tuple[list[str], np.ndarray] | None = None,
) -> list[Tree]:
    r"""The finished tree(s) of ``method`` (a tree method of :data:`._methods.METHODS`) for the rows ``prepared`` holds.

    Built by :func:`shape_trees` on :func:`feature_vectors` (``vectors``: that result, when the caller
    has it), then finished by :meth:`Prepared.finish <hdtwd_cli.tree._learn.Prepared.finish>` with
    no leaf term: features without a vector hang from the root, and every tree carries the same
    feature weights AND the same denoiser as hdtwd's tree of these rows, so the TWD on each compares
    the same histograms as hdtwd's and only the tree differs. The TWD of a method with several trees
    (``tswd-n``) is the mean of the exact TWDs on its trees. Seeds: ``params.seed`` and ``split`` by
    the method's :class:`~._methods.Shape`.
    """
    spec = METHODS.get(method)
    if spec is None or spec.shape is None:
        trees = [name for name, m in METHODS.items() if m.shape is not None]
        raise ValueError(f"unknown tree method {method!r}; choose from {', '.join(trees)}")
    if spec.shape.builder == "star":
        return [reference_tree(prepared, params)]
    names, V = vectors if vectors is not None else feature_vectors(prepared)
    finish = params.replace(leaf_length=0.0)
    return [prepared.finish(t, finish) for t in shape_trees(spec.shape, names, V, seed=params.seed, split=split)]


def reference_tree(prepared: Prepared, params: TreeParams) -> Tree:
    """The star tree (:func:`star_tree`) of ``prepared``'s placed features, finished as every tree of these
    rows is: every column a leaf, the same map (denoiser, weights). ``classify``'s ``star``; its leaves'
    histograms (:func:`hdtwd_cli.twd._histograms.tree_histograms`) are the ones exact OT and the fitted trees
    compare."""
    return prepared.finish(star_tree(prepared.space.names), params.replace(leaf_length=0.0))
