r"""The :class:`Tree` type that every layer shares: a rooted tree whose leaves are the features.

Nodes are numbered leaves first, every parent after its children, the root last: so subtree sums
and depths are single passes in index order (no recursion: single-linkage trees are chains
thousands deep). Also the tree's small operations (root distances, subtree sums, leaves hung
from the root) and its files, through the I/O layer (:meth:`Tree.write`, :meth:`Tree.read`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hdtwd_cli.errors import InputError
from hdtwd_cli.io._records import TreeRecord, children_of
from hdtwd_cli.tree._denoise import Denoiser


@dataclass
class Tree:
    """A rooted tree whose leaves are the features.

    Nodes are numbered so that the leaves come first (``0 .. n_leaves-1``, in the order of
    ``leaf_names``) and every node's index is smaller than its parent's; the root is last.

    Attributes
    ----------
    parent : ndarray of int64, shape (n_nodes,)
        Parent of each node; ``-1`` for the root.
    length : ndarray of float64, shape (n_nodes,)
        Length of the edge to the parent (the paper's :math:`\\alpha_v`); 0 for the root.
    leaf_names : list of str
        Feature name of each leaf.
    merge_height : ndarray of float64, shape (n_nodes - n_leaves,), optional
        For decoded binary trees: the HD-LCA value ``a`` of the pair whose merge created each
        internal node (non-decreasing).
    feature_weights : ndarray of float64, shape (n_leaves,), optional
        Weight :math:`u_j > 0` of each leaf's feature: a sample's values are multiplied by it
        before they are normalised to a histogram (e.g. idf weights, docs/method.md section 7).
        ``None``: all ones.
    denoiser : Denoiser, optional
        The rank-r map applied to a sample's values before the weights (:mod:`hdtwd_cli.tree._denoise`,
        ``denoise=r``); ``None``: the values are used as they are.
    haar_keep : ndarray of bool, shape (n_leaves,), optional
        The Haar vectors of this tree (:func:`hdtwd_cli.tree._haar.haar_basis`) a sample's histogram
        is projected onto before the TWD (the joint hierarchies' filtering, docs/method.md section 13):
        the projection's negative entries are set to 0 and the row is normalised again.
        ``None``: no filtering.
    """

    parent: np.ndarray
    length: np.ndarray
    leaf_names: list[str]
    merge_height: np.ndarray | None = None
    metadata: dict = field(default_factory=dict)
    feature_weights: np.ndarray | None = None
    denoiser: Denoiser | None = None
    haar_keep: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.parent = np.asarray(self.parent, dtype=np.int64)
        self.length = np.asarray(self.length, dtype=np.float64)
        self.leaf_names = [str(s) for s in self.leaf_names]
        if self.feature_weights is not None:
            self.feature_weights = np.asarray(self.feature_weights, dtype=np.float64)
        if self.haar_keep is not None:
            self.haar_keep = np.asarray(self.haar_keep, dtype=bool)

    @property
    def n_nodes(self) -> int:
        return int(self.parent.shape[0])

    @property
    def n_leaves(self) -> int:
        return len(self.leaf_names)

    @property
    def root(self) -> int:
        return self.n_nodes - 1

    def validate(self) -> None:
        """Raise ``ValueError`` unless the arrays describe a tree in the documented numbering."""
        n, L = self.n_nodes, self.n_leaves
        if L < 1 or n < L:
            raise ValueError("a tree needs at least one leaf")
        if self.length.shape != (n,):
            raise ValueError("edge lengths and parents differ in length")
        p = self.parent
        if p[-1] != -1 or np.any(p[:-1] < 0):
            raise ValueError("the last node must be the only root")
        idx = np.arange(n - 1)
        out = np.flatnonzero(p[:-1] >= n)
        if out.size:
            raise ValueError(f"node {int(out[0])} has parent {int(p[out[0]])}, outside the {n} nodes")
        back = np.flatnonzero(p[:-1] <= idx)
        if back.size:
            i = int(back[0])
            raise ValueError(
                f"node {i} has parent {int(p[i])}, which does not come after it "
                "(a cycle, or nodes not numbered children first)"
            )
        if np.any(~np.isfinite(self.length)) or np.any(self.length < 0):
            raise ValueError("edge lengths must be finite and non-negative")
        has_child = np.zeros(n, dtype=bool)
        has_child[p[:-1]] = True
        if np.any(has_child[:L]) or (n > L and not np.all(has_child[L:])):
            raise ValueError("leaves must be exactly the nodes without children")
        if len(set(self.leaf_names)) != L:
            raise ValueError("leaf names are not unique")
        w = self.feature_weights
        if w is not None and (w.shape != (L,) or not np.all(np.isfinite(w)) or np.any(w <= 0)):
            raise ValueError("feature weights must be one finite positive value per leaf")
        d = self.denoiser
        if d is not None and (
            d.mean.shape != (L,)
            or d.axes.ndim != 2
            or d.axes.shape[0] != L
            or d.covered.shape != (L,)
            or not np.all(np.isfinite(d.axes))
            or not np.all(np.isfinite(d.mean))
        ):
            raise ValueError("the denoiser must have one finite mean and axis row per leaf")
        k = self.haar_keep
        if k is not None and (k.shape != (L,) or not k[0]):
            raise ValueError("the Haar filter must mark one vector per leaf and keep the constant one (the first)")

    def to_newick(self) -> str:
        """The tree as one line of Newick (names quoted where needed, branch lengths as floats).

        Newick carries the topology, the names and the branch lengths only: not the feature
        weights, the denoiser nor the Haar filter (write the HDF5 file to keep them).
        """
        from hdtwd_cli.io._newick import write_newick

        return write_newick(self)

    def write(self, path: str, meta: dict | None = None, leaf_mass: np.ndarray | None = None) -> None:
        """Write the tree atomically: HDF5 (``.h5``, ``.hdf5``; everything, with ``metadata`` as its
        parameters and ``meta`` as file attributes), Newick (``.nwk``, ``.newick``, ``.tree``, ``.tre``)
        or Nexus (``.nex``, ``.nexus``: every node annotated with the feature weights and, when given,
        ``leaf_mass``, the samples' mean histogram in leaf order, for FigTree and DendroPy).

        Examples
        --------
        >>> import numpy as np, os, tempfile, hdtwd_cli as hd
        >>> tree = hd.learn_tree(np.random.default_rng(0).poisson(2.0, size=(30, 6)))
        >>> d = tempfile.mkdtemp()
        >>> tree.write(os.path.join(d, "t.h5"))
        >>> hd.Tree.read(os.path.join(d, "t.h5")).parent.tolist() == tree.parent.tolist()
        True
        >>> tree.to_newick().rstrip().endswith(";")
        True
        """
        from hdtwd_cli.io import write_tree_file

        mass = size = None
        if leaf_mass is not None:
            mass, size = subtree_sums(self, np.column_stack([leaf_mass, np.ones(self.n_leaves)])).T
        write_tree_file(str(path), self, meta or {}, mass, size)

    @classmethod
    def read(cls, path: str) -> Tree:
        """Read an hdtwd tree file (``.h5``), a Newick or a Nexus file, validated.

        Raises :class:`~hdtwd_cli.errors.InputError` naming the file when it is not a tree in the
        documented numbering (:meth:`validate`).
        """
        from hdtwd_cli.io import read_tree_file

        return cls.from_record(read_tree_file(str(path)), str(path))

    @classmethod
    def from_record(cls, record: TreeRecord, path: str | None = None) -> Tree:
        """The tree of a :class:`~hdtwd_cli.io.TreeRecord` (what a file holds), validated; an invalid
        one is an :class:`~hdtwd_cli.errors.InputError` naming ``path`` and the format."""
        d = record.denoiser
        tree = cls(
            parent=record.parent,
            length=record.length,
            leaf_names=record.leaf_names,
            merge_height=record.merge_height,
            metadata=dict(record.metadata),
            feature_weights=record.feature_weights,
            denoiser=None
            if d is None
            else Denoiser(mean=d.mean, axes=d.axes, log_counts=d.log_counts, covered=d.covered),
            haar_keep=None if record.haar_keep is None else record.haar_keep.astype(bool),
        )
        try:
            tree.validate()
        except ValueError as e:
            raise InputError(f"invalid {record.format}: {e}", path) from None
        return tree

    def children(self) -> list[list[int]]:
        """Children of every node, in increasing index order."""
        return children_of(self.parent)

    def depth(self) -> np.ndarray:
        """Number of edges from each node to the root (iterative, no recursion)."""
        d = np.zeros(self.n_nodes, dtype=np.int64)
        p = self.parent
        for v in range(self.n_nodes - 2, -1, -1):
            d[v] = d[p[v]] + 1
        return d


def root_distances(tree: Tree) -> np.ndarray:
    """Path length from the root to every node (iterative: parents come after their children)."""
    d = np.zeros(tree.n_nodes, dtype=np.float64)
    p, w = tree.parent, tree.length
    for v in range(tree.n_nodes - 2, -1, -1):
        d[v] = d[p[v]] + w[v]
    return d


def subtree_sums(tree: Tree, leaf_values: np.ndarray) -> np.ndarray:
    """Sum of ``leaf_values`` (shape ``(n_leaves,)`` or ``(n_leaves, c)``) below every node, children
    first (iterative): a node's mass, or with ones its number of leaves."""
    v = np.asarray(leaf_values, dtype=np.float64)
    out = np.zeros((tree.n_nodes,) + v.shape[1:])
    out[: tree.n_leaves] = v
    p = tree.parent
    for c in range(tree.n_nodes - 1):
        out[p[c]] += out[c]
    return out


def mean_leaf_depth(tree: Tree) -> float:
    r"""Mean root-to-leaf path length :math:`\bar h = \frac1m \sum_j d_T(r, j)` (the tree's scale)."""
    return float(root_distances(tree)[: tree.n_leaves].mean())


def attach_at_root(tree: Tree, names: Sequence[str], length: float, weights: np.ndarray | None = None) -> Tree:
    r"""The tree with new leaves ``names`` hung directly from the root by edges of ``length``.

    This is the rule for features the tree was not learned from (no mass in the training rows,
    no feature-space vector, or absent from a stored tree): such a leaf is at distance
    ``length`` from the root and ``length + d_T(r, j)`` from every learned leaf ``j``, so mass on
    it is transported through the root, as far as the tree's scale says (docs/method.md section 7).
    The numbering stays documented: old leaves, new leaves, then the internal nodes (shifted);
    the root becomes multifurcating. ``weights`` are the new leaves' feature weights (needed
    when the tree has some).
    """
    u = len(names)
    if u == 0:
        return tree
    L, n = tree.n_leaves, tree.n_nodes
    old = tree.parent.copy()
    new_index = np.concatenate([np.arange(L), np.arange(L + u, n + u)])
    parent = np.empty(n + u, dtype=np.int64)
    parent[new_index[:-1]] = new_index[old[:-1]]
    parent[-1] = -1
    parent[L : L + u] = n + u - 1
    length_all = np.empty(n + u, dtype=np.float64)
    length_all[new_index] = tree.length
    length_all[L : L + u] = float(length)
    fw = None
    if tree.feature_weights is not None:
        if weights is None:
            raise ValueError("the tree has feature weights: give the new leaves' weights")
        fw = np.concatenate([tree.feature_weights, np.asarray(weights, dtype=np.float64)])
    out = Tree(
        parent=parent,
        length=length_all,
        leaf_names=list(tree.leaf_names) + [str(s) for s in names],
        merge_height=tree.merge_height,
        metadata=dict(tree.metadata),
        feature_weights=fw,
        denoiser=None if tree.denoiser is None else tree.denoiser.extended(u),
    )
    return out


def lengthen_leaves(tree: Tree, amount: float) -> Tree:
    r"""The tree with every leaf edge lengthened by ``amount`` (the leaf term, docs/method.md section 7).

    For histograms :math:`x, x'` this adds exactly ``amount`` :math:`\times \lVert x - x'\rVert_1` to
    their TWD, since the mass crossing leaf ``j``'s edge is :math:`|x_j - x'_j|`; the result is still a
    tree metric and a tree-Wasserstein distance.
    """
    if amount == 0:
        return tree
    if not amount > 0:
        raise ValueError("the leaf lengthening must be non-negative")
    length = tree.length.copy()
    length[: tree.n_leaves] += float(amount)
    return Tree(
        parent=tree.parent,
        length=length,
        leaf_names=tree.leaf_names,
        merge_height=tree.merge_height,
        metadata=dict(tree.metadata),
        feature_weights=tree.feature_weights,
        denoiser=tree.denoiser,
    )


def leaf_order(tree: Tree) -> np.ndarray:
    """The leaves in the order a drawing of the tree lists them (depth first, children in index order;
    an explicit stack, no recursion): position ``i`` holds the leaf drawn ``i``-th."""
    kids = children_of(tree.parent)
    out: list[int] = []
    stack = [tree.root]
    while stack:
        v = stack.pop()
        if v < tree.n_leaves:
            out.append(v)
        else:
            stack.extend(reversed(kids[v]))
    return np.array(out, dtype=np.int64)


def cut(tree: Tree, k: int) -> np.ndarray:
    """Cluster labels ``0..`` of the leaves when the tree is cut into (at least) ``k`` clusters.

    The internal nodes are removed from the root down in decreasing index (for a tree decoded by
    linkage: the last merges first) until at least ``k`` subtrees remain; each leaf is labelled by
    the subtree holding it, subtrees numbered in the order of their first leaf in :func:`leaf_order`.
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    L, n = tree.n_leaves, tree.n_nodes
    kids = children_of(tree.parent)
    removed = np.zeros(n, dtype=bool)
    pieces = 1
    for v in range(n - 1, L - 1, -1):  # internal nodes, the root first
        if pieces >= k:
            break
        removed[v] = True
        pieces += len(kids[v]) - 1
    top = np.arange(n)
    p = tree.parent
    for v in range(n - 2, -1, -1):  # each node's highest kept ancestor, parents first
        if not removed[p[v]]:
            top[v] = top[p[v]]
    labels = np.full(L, -1, dtype=np.int64)
    names: dict[int, int] = {}
    for leaf in leaf_order(tree).tolist():
        labels[leaf] = names.setdefault(int(top[leaf]), len(names))
    return labels
