r"""The Haar basis of a tree's leaves, and the filtering of histograms in it.

A hierarchical tree over the features carries an orthonormal basis of :math:`\mathbb R^L` (one
coordinate per leaf) whose vectors are localised on the tree's nodes: the Haar basis of Gavish,
Nadler & Coifman (ICML 2010). A signal that is smooth with respect to the tree (nearly constant on
its subtrees) has few large coefficients in it, so keeping the largest ones and synthesising back
filters a histogram in the tree's own geometry (Lin, Coifman, Mishne & Talmon, NeurIPS 2025,
Algorithm 2).

The basis. Every internal node with children :math:`c_1 < c_2 < \dots < c_k` (by node index) is
binarised deterministically into :math:`k-1` splits; split :math:`s` (:math:`s = 1, \dots, k-1`)
compares the leaves :math:`A` under :math:`c_1, \dots, c_s` with the leaves :math:`B` under
:math:`c_{s+1}`. With :math:`a = |A|` and :math:`b = |B|` its vector is

.. math::

    \psi = \sqrt{\frac{b}{a(a+b)}}\,\mathbb 1_A - \sqrt{\frac{a}{b(a+b)}}\,\mathbb 1_B ,

which has unit norm and sums to zero. With the constant vector :math:`\mathbb 1 / \sqrt L` these
are :math:`L` orthonormal vectors (a tree with :math:`L` leaves has :math:`L-1` splits; a node with
a single child has none). The basis is ordered: the constant first, then the splits by
(node index, :math:`s`).

The transforms never form the :math:`L \times L` matrix. Nodes are numbered children before
parents, so the analysis is one pass in increasing node index (subtree sums, the split
coefficients read off the partial sums of a node's children), and the synthesis one pass in
decreasing node index (each node's value passed down to its children). Both are
:math:`O(n \cdot n_{\mathrm{nodes}})` for :math:`n` rows, with no recursion: single-linkage trees
are chains thousands deep.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse

from hdtwd_cli.tree._tree import Tree

# rows per block of the transforms: at most this many float64 entries in the (rows, n_nodes) work array
_BLOCK_ENTRIES = 1 << 24


@dataclass(frozen=True, eq=False)
class HaarBasis:
    r"""The Haar basis of a tree's leaves (see :func:`haar_basis`).

    Column ``0`` of the coefficients is the constant vector :math:`\mathbb 1/\sqrt L`; column
    ``q = 1 .. L-1`` is split ``q - 1``, the splits ordered by (node index, :math:`s`).

    Attributes
    ----------
    n_leaves : int
        :math:`L`, the number of leaves (and of basis vectors).
    parent : ndarray of int64, shape (n_nodes,)
        The tree's parent array (``-1`` for the root).
    split_of : ndarray of int64, shape (n_nodes,)
        For a node that is the child :math:`c_{s+1}` of its parent (not the first child): the
        coefficient column of the split whose side :math:`B` it is; ``-1`` otherwise.
    node : ndarray of int64, shape (n_leaves - 1,)
        The node each split belongs to.
    child : ndarray of int64, shape (n_leaves - 1,)
        The child :math:`c_{s+1}` whose leaves are the split's side :math:`B`; side :math:`A` is the
        leaves under the node's children of smaller index.
    a, b : ndarray of int64, shape (n_leaves - 1,)
        The sizes :math:`|A|` and :math:`|B|` of each split's sides.
    coef_a, coef_b : ndarray of float64, shape (n_leaves - 1,)
        :math:`\sqrt{b/(a(a+b))}` and :math:`\sqrt{a/(b(a+b))}`: the magnitudes of each split's
        vector on :math:`A` and on :math:`B`.
    size : ndarray of int64, shape (n_nodes,)
        Number of leaves under every node.
    """

    n_leaves: int
    parent: np.ndarray
    split_of: np.ndarray
    node: np.ndarray
    child: np.ndarray
    a: np.ndarray
    b: np.ndarray
    coef_a: np.ndarray
    coef_b: np.ndarray
    size: np.ndarray

    @property
    def n_nodes(self) -> int:
        return int(self.parent.shape[0])

    def _rows(self, X: np.ndarray, what: str) -> tuple[np.ndarray, bool]:
        Y = np.asarray(X, dtype=np.float64)
        one = Y.ndim == 1
        if one:
            Y = Y[None, :]
        if Y.ndim != 2 or Y.shape[1] != self.n_leaves:
            raise ValueError(f"{what} must have shape (n, {self.n_leaves}) or ({self.n_leaves},); got {np.shape(X)}")
        return Y, one

    def _blocks(self, n: int) -> Iterator[tuple[int, int]]:
        """Row ranges whose work array (rows x nodes) stays within ``_BLOCK_ENTRIES`` (rows are independent)."""
        step = max(1, _BLOCK_ENTRIES // self.n_nodes)
        for lo in range(0, n, step):
            yield lo, min(n, lo + step)

    def _walk(self) -> tuple[list[int], list[int], list[float], list[float]]:
        """What both passes read per node as Python lists: parents, split of each node (side B), the
        splits' coefficients on side A and B (index 0: none)."""
        return (
            self.parent.tolist(),
            self.split_of.tolist(),
            [0.0, *self.coef_a.tolist()],
            [0.0, *self.coef_b.tolist()],
        )

    def analysis(self, X: np.ndarray) -> np.ndarray:
        r"""The coefficients of the rows of ``X`` in the basis: :math:`A = X B`.

        One pass over the nodes in increasing index keeps each node's subtree sum
        :math:`S_v = \sum_{j \in v} x_j`; when child :math:`c_{s+1}` is added to its parent, the
        parent holds :math:`S_A = \sum_{i \le s} S_{c_i}`, and the split's coefficient is

        .. math::

            \alpha = \sqrt{\frac{b}{a(a+b)}}\, S_A - \sqrt{\frac{a}{b(a+b)}}\, S_{c_{s+1}} ;

        the constant's is :math:`S_{\mathrm{root}} / \sqrt L`. :math:`O(n \cdot n_{\mathrm{nodes}})`.

        Parameters
        ----------
        X : ndarray, shape (n, n_leaves) or (n_leaves,)
            Values on the leaves, in leaf order.

        Returns
        -------
        ndarray of float64, same shape as ``X``
            The coefficients, column ``0`` the constant's.
        """
        Y, one = self._rows(X, "X")
        L, m = self.n_leaves, self.n_nodes
        parent, split_of, ca, cb = self._walk()
        out = np.empty(Y.shape, dtype=np.float64)
        for lo, hi in self._blocks(Y.shape[0]):
            S = np.zeros((hi - lo, m), dtype=np.float64, order="F")
            S[:, :L] = Y[lo:hi]
            coef = np.empty((hi - lo, L), dtype=np.float64, order="F")
            for c in range(m - 1):
                p, q = parent[c], split_of[c]
                sc, sp = S[:, c], S[:, p]
                if q > 0:
                    coef[:, q] = ca[q] * sp - cb[q] * sc
                sp += sc
            coef[:, 0] = S[:, m - 1] / math.sqrt(L)
            out[lo:hi] = coef
        return out[0] if one else out

    def synthesis(self, A: np.ndarray) -> np.ndarray:
        r"""The values on the leaves of coefficient rows ``A``: :math:`X = A B^\top`.

        One pass over the nodes in decreasing index: the root holds :math:`\alpha_0/\sqrt L`, and
        the children :math:`c_k, c_{k-1}, \dots, c_1` of a node :math:`v` receive, in turn, its value
        plus the terms of its splits that involve them, child :math:`c_i` getting

        .. math::

            x_{c_i} = x_v - \sqrt{\frac{a_{i-1}}{b_{i-1}(a_{i-1}+b_{i-1})}}\,\alpha_{i-1}
                      + \sum_{s \ge i} \sqrt{\frac{b_s}{a_s(a_s+b_s)}}\,\alpha_s

        (the first term for :math:`i \ge 2` only); each leaf ends with the constant term plus
        its ancestors' splits' terms. :math:`O(n \cdot n_{\mathrm{nodes}})`.

        Parameters
        ----------
        A : ndarray, shape (n, n_leaves) or (n_leaves,)
            Coefficients, column ``0`` the constant's.

        Returns
        -------
        ndarray of float64, same shape as ``A``
            The values on the leaves, in leaf order.
        """
        C, one = self._rows(A, "A")
        L, m = self.n_leaves, self.n_nodes
        parent, split_of, ca, cb = self._walk()
        out = np.empty(C.shape, dtype=np.float64)
        for lo, hi in self._blocks(C.shape[0]):
            coef = np.asfortranarray(C[lo:hi])
            W = np.empty((hi - lo, m), dtype=np.float64, order="F")
            W[:, m - 1] = coef[:, 0] / math.sqrt(L)
            for c in range(m - 2, -1, -1):
                p, q = parent[c], split_of[c]
                wp = W[:, p]
                if q > 0:
                    alpha = coef[:, q]
                    W[:, c] = wp - cb[q] * alpha
                    wp += ca[q] * alpha
                else:
                    W[:, c] = wp
            out[lo:hi] = W[:, :L]
        return out[0] if one else out

    def matrix(self) -> scipy.sparse.csc_matrix:
        r"""The explicit :math:`L \times L` basis :math:`B`, one vector per column.

        Built from the splits' leaf sets (the leaves laid out so that every subtree is a
        contiguous run), independently of :meth:`analysis` and :meth:`synthesis`. It has
        :math:`\sum_s (a_s + b_s)` non-zeros (quadratic in :math:`L` for chains): for tests and small
        trees.
        """
        L, m = self.n_leaves, self.n_nodes
        parent = self.parent.tolist()
        size = self.size.tolist()
        # start[v]: where the run of v's leaves begins; a node's children laid out in index order
        start = [0] * m
        end = [0] * m
        end[m - 1] = L
        for c in range(m - 2, -1, -1):
            p = parent[c]
            start[c] = end[p] - size[c]
            end[p] = start[c]
            end[c] = start[c] + size[c]
        start_arr = np.asarray(start, dtype=np.int64)
        perm = np.empty(L, dtype=np.int64)
        perm[start_arr[:L]] = np.arange(L)
        cs = start_arr[self.child]
        lo = cs - self.a
        n_per = self.a + self.b
        cols = np.repeat(np.arange(1, L, dtype=np.int64), n_per)
        offset = np.arange(int(n_per.sum()), dtype=np.int64) - np.repeat(np.cumsum(n_per) - n_per, n_per)
        pos = np.repeat(lo, n_per) + offset
        vals = np.where(
            offset < np.repeat(self.a, n_per), np.repeat(self.coef_a, n_per), -np.repeat(self.coef_b, n_per)
        )
        rows = np.concatenate([np.arange(L, dtype=np.int64), perm[pos]])
        cols = np.concatenate([np.zeros(L, dtype=np.int64), cols])
        vals = np.concatenate([np.full(L, 1.0 / math.sqrt(L)), vals])
        return scipy.sparse.csc_matrix((vals, (rows, cols)), shape=(L, L))


def haar_basis(tree: Tree) -> HaarBasis:
    r"""The Haar basis of ``tree``'s leaves (Gavish, Nadler & Coifman, 2010).

    Each internal node with children :math:`c_1 < \dots < c_k` gives :math:`k-1` splits, split
    :math:`s` comparing :math:`A` = the leaves under :math:`c_1, \dots, c_s` with :math:`B` = the
    leaves under :math:`c_{s+1}`; its vector is :math:`\sqrt{b/(a(a+b))}` on :math:`A` and
    :math:`-\sqrt{a/(b(a+b))}` on :math:`B` (:math:`a = |A|`, :math:`b = |B|`). With
    :math:`\mathbb 1/\sqrt L` first and the splits by (node index, :math:`s`), these are the
    :math:`L` orthonormal columns of the basis.

    Parameters
    ----------
    tree : Tree
        A tree in the documented numbering (raises ``ValueError`` otherwise).

    Returns
    -------
    HaarBasis
    """
    tree.validate()
    L, m = tree.n_leaves, tree.n_nodes
    parent = tree.parent.copy()
    size = np.zeros(m, dtype=np.int64)
    size[:L] = 1
    pl = parent.tolist()
    for c in range(m - 1):
        size[pl[c]] += size[c]
    # the non-root nodes grouped by parent, in increasing index within a group
    order = np.argsort(parent[:-1], kind="stable")
    grouped_parent = parent[order]
    first = np.ones(order.shape[0], dtype=bool)
    first[1:] = grouped_parent[1:] != grouped_parent[:-1]
    sizes = size[order]
    cum = np.cumsum(sizes)
    before = cum - sizes  # leaves under the nodes before each in the grouped order
    group_base = np.maximum.accumulate(np.where(first, before, 0))
    split = ~first
    child = order[split].astype(np.int64)
    node = grouped_parent[split].astype(np.int64)
    a = (before - group_base)[split].astype(np.int64)
    b = sizes[split].astype(np.int64)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    split_of = np.full(m, -1, dtype=np.int64)
    split_of[child] = np.arange(1, child.shape[0] + 1, dtype=np.int64)
    for arr in (parent, split_of, node, child, a, b, size):
        arr.flags.writeable = False
    coef_a = np.sqrt(bf / (af * (af + bf)))
    coef_b = np.sqrt(af / (bf * (af + bf)))
    coef_a.flags.writeable = False
    coef_b.flags.writeable = False
    return HaarBasis(
        n_leaves=L,
        parent=parent,
        split_of=split_of,
        node=node,
        child=child,
        a=a,
        b=b,
        coef_a=coef_a,
        coef_b=coef_b,
        size=size,
    )


def kept_coefficients(A: np.ndarray, share: float) -> np.ndarray:
    r"""Which Haar coefficients to keep: the fewest largest that carry ``share`` of the mass.

    Column ``0`` (the constant) is always kept. The other columns are scored by
    :math:`s_q = \sum_i |A_{iq}|` and taken from the highest score down (ties by the lower column)
    until their cumulative score reaches :math:`\mathrm{share} \cdot \sum_{q \ge 1} s_q`.
    ``share = 1`` keeps every column, ``share = 0`` only the constant; a column of score 0 is never
    needed to reach a share below 1.

    Parameters
    ----------
    A : ndarray, shape (n, L) or (L,)
        Coefficients (:meth:`HaarBasis.analysis`).
    share : float
        In :math:`[0, 1]`.

    Returns
    -------
    ndarray of bool, shape (L,)
    """
    C = np.asarray(A, dtype=np.float64)
    if C.ndim == 1:
        C = C[None, :]
    if C.ndim != 2 or C.shape[1] < 1:
        raise ValueError(f"the coefficients must have shape (n, L) or (L,); got {np.shape(A)}")
    share = float(share)
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be in [0, 1]; got {share}")
    L = C.shape[1]
    keep = np.zeros(L, dtype=bool)
    keep[0] = True
    if share == 1.0:
        keep[:] = True
        return keep
    scores = np.abs(C[:, 1:]).sum(axis=0)
    if not np.all(np.isfinite(scores)):
        raise ValueError("the coefficients must be finite")
    if share == 0.0 or L == 1:
        return keep
    ranked = np.argsort(-scores, kind="stable")
    cum = np.cumsum(scores[ranked])
    total = float(cum[-1])
    if total <= 0.0:
        return keep
    k = int(np.searchsorted(cum, share * total, side="left")) + 1
    keep[1 + ranked[: min(k, ranked.shape[0])]] = True
    return keep


def haar_filter(basis: HaarBasis, X: np.ndarray, keep: np.ndarray) -> np.ndarray:
    r"""The rows of ``X`` projected onto the kept Haar vectors: ``synthesis(analysis(X) * keep)``.

    Parameters
    ----------
    basis : HaarBasis
    X : ndarray, shape (n, L) or (L,)
        Values on the leaves, in leaf order.
    keep : ndarray of bool, shape (L,)
        The coefficients to keep (e.g. :func:`kept_coefficients`).

    Returns
    -------
    ndarray of float64, same shape as ``X``
    """
    k = np.asarray(keep, dtype=bool)
    if k.shape != (basis.n_leaves,):
        raise ValueError(f"keep must have shape ({basis.n_leaves},); got {np.shape(keep)}")
    coef = basis.analysis(X)
    return basis.synthesis(np.where(k, coef, 0.0))
