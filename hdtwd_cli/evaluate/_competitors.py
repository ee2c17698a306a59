r"""The trees of the paper's competitors (Table 1), built on the features' vectors.

Each function returns a :class:`~hdtwd_cli.Tree` whose leaves are the features, so that the
distance on it is an exact tree-Wasserstein distance computed by hdtwd's own kernels
(:func:`hdtwd_cli.twd._distance.query_distances`); only the tree differs from hdtwd's learned hierarchy.
``classify --methods quadtree,mst`` builds them from the TRAINING rows' feature vectors in the
features' space hdtwd uses for the data (docs/method.md section 12).

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

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import TREE_METHODS
from hdtwd_cli._runtime.blas import serial_blas
from hdtwd_cli.evaluate._ghhc import ghhc_tree
from hdtwd_cli.evaluate._hyperbolic_hc import hhc_tree
from hdtwd_cli.evaluate._treerep import treerep_tree
from hdtwd_cli.evaluate._ultrametric import ultrafit_tree
from hdtwd_cli.tree._learn import FeatureSpace, feature_space, finish_tree
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree

__all__ = [
    "quadtree",
    "mst_tree",
    "cluster_tree",
    "competitor_trees",
    "trees_in",
    "feature_vectors",
    "TREE_METHODS",
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
    w = np.asarray(T[child, pred[child]]).ravel()
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


def feature_vectors(
    X: np.ndarray | sp.spmatrix,
    names: list[str],
    params: TreeParams,
    embedding: tuple[np.ndarray, list[str]] | None = None,
) -> tuple[FeatureSpace, np.ndarray]:
    """hdtwd's features' space of the rows ``X`` and its vectors, one unit-length ROW per placed feature."""
    space = feature_space(X, names, params, embedding)
    M = space.matrix
    V = np.asarray(M.toarray() if sp.issparse(M) else M, dtype=np.float64).T.copy()  # type: ignore[union-attr]
    norms = np.sqrt(np.einsum("ij,ij->i", V, V))
    V /= np.where(norms > 0, norms, 1.0)[:, None]
    space.matrix = None
    return space, V


def competitor_trees(
    method: str,
    X: np.ndarray | sp.spmatrix,
    names: list[str],
    params: TreeParams,
    embedding: tuple[np.ndarray, list[str]] | None = None,
    split: int = 0,
) -> list[Tree]:
    r"""The ``method`` tree(s) (:data:`TREE_METHODS`) of the features of the rows ``X``, in hdtwd's features' space.

    The feature vectors are those hdtwd's diffusion would read for ``params``
    (:func:`hdtwd_cli.tree._learn.feature_space`: the data columns, the latent space or the given embedding),
    scaled to unit length (hdtwd compares them by cosine distance; the Euclidean distance between
    unit vectors is :math:`\sqrt{2 \cdot \text{cosine distance}}`). Features without a vector
    hang from the root and the idf weights are attached as for hdtwd's tree
    (:func:`hdtwd_cli.tree._learn.finish_tree`, no leaf term), so only the tree differs from hdtwd's.

    Seeds: ``quadtree``, ``treerep``, ``hhc`` and ``ghhc`` ``params.seed + split``; ``cluster-tree``
    ``params.seed`` (one fixed tree); ``tswd-n`` the ``n`` trees of seeds ``[params.seed, split, t]``.
    The distance of ``tswd-n`` is the mean of the TWDs on its trees (an exact TWD on each).
    """
    if method not in TREE_METHODS:
        raise ValueError(f"unknown tree method {method!r}; choose from {', '.join(TREE_METHODS)}")
    space, V = feature_vectors(X, names, params, embedding)
    return trees_in(method, space, V, params, split)


def trees_in(method: str, space: FeatureSpace, V: np.ndarray, params: TreeParams, split: int = 0) -> list[Tree]:
    """:func:`competitor_trees` from the features' space and unit vectors of :func:`feature_vectors`.

    ``method``: one of :data:`TREE_METHODS`, or ``quadtrees-n`` (``n`` quadtrees of seeds
    ``[params.seed, split, t]``, as the trees of ``tswd-n``: the shapes of the sliced fitted quadtrees).
    The trees are built with BLAS on one thread (:func:`~hdtwd_cli._runtime.blas.serial_blas`: their
    products, e.g. the distances of ``mst`` and the ball distances of ``ghhc``, have the same bits at
    any thread count).
    """
    with serial_blas():
        return _trees_in(method, space, V, params, split)


def _trees_in(method: str, space: FeatureSpace, V: np.ndarray, params: TreeParams, split: int) -> list[Tree]:
    if method == "quadtree":
        trees = [quadtree(V, space.names, params.seed + split)]
    elif method == "mst":
        trees = [mst_tree(V, space.names)]
    elif method == "cluster-tree":
        trees = [cluster_tree(V, space.names, params.seed)]
    elif method == "ultrafit":
        trees = [ultrafit_tree(V, space.names)]
    elif method == "treerep":
        trees = [treerep_tree(V, space.names, params.seed + split)]
    elif method == "hhc":
        trees = [hhc_tree(V, space.names, params.seed + split)]
    elif method == "ghhc":
        trees = [ghhc_tree(V, space.names, params.seed + split)]
    else:  # tswd-n, quadtrees-n
        kind, n = method.rsplit("-", 1)
        build = quadtree if kind == "quadtrees" else cluster_tree
        trees = [
            build(V, space.names, int(np.random.default_rng([params.seed, split, t]).integers(2**31)))
            for t in range(int(n))
        ]
    return [finish_tree(t, space, params.replace(leaf_length=0.0)) for t in trees]
