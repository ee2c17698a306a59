r"""The tree-Wasserstein distance (paper Eq. 5; spec section 4).

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

from typing import Literal

import numpy as np
import scipy.sparse as sp

from ._kernels import l1_distances
from .tree import Tree

__all__ = ["normalize_rows", "subtree_masses", "tree_embedding", "pairwise_l1", "tree_wasserstein"]

DType = Literal["float32", "float64"]


def normalize_rows(X: np.ndarray | sp.spmatrix) -> np.ndarray | sp.csr_matrix:
    r"""Histograms :math:`x_i = X_i / \lVert X_i \rVert_1` (sparse input stays sparse).

    Raises
    ------
    ValueError
        If a row sums to zero (it has no histogram); the message names its index.
    """
    with np.errstate(over="ignore"):  # an overflowing row sum is reported below
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=np.float64, copy=True)
            s = np.asarray(X.sum(axis=1)).ravel()
        else:
            X = np.array(X, dtype=np.float64, copy=True)
            s = X.sum(axis=1)
    if not np.all(np.isfinite(s)):
        i = int(np.flatnonzero(~np.isfinite(s))[0])
        raise ValueError(f"row {i} sums to infinity in float64 (values too large); rescale the data")
    bad = np.flatnonzero(~(s > 0))
    if bad.size:
        raise ValueError(
            f"row {int(bad[0])} sums to zero and has no histogram"
            + (f" ({bad.size} such rows)" if bad.size > 1 else "")
        )
    if sp.issparse(X):
        X.data /= np.repeat(s, np.diff(X.indptr))
        return X
    X /= s[:, None]
    return X


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
    M[:, :L] = x.toarray() if sp.issparse(x) else x
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


def pairwise_l1(Y: np.ndarray, Yq: np.ndarray | None = None, dtype: DType = "float64") -> np.ndarray:
    r"""L1 distances :math:`\lVert y_i - y_{i'}\rVert_1` between rows (all pairs, or ``Yq`` x ``Y``).

    A tiled, multi-threaded compiled kernel (:mod:`hdtwd_cli._kernels`); accumulates in float64
    whatever the storage type and returns ``dtype``. The symmetric result has an exact zero
    diagonal and ``D[i, j] == D[j, i]`` bit for bit.
    """
    if Yq is None:
        return l1_distances(Y, None, np.dtype(dtype))
    return l1_distances(Yq, Y, np.dtype(dtype))


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
    Y = tree_embedding(tree, normalize_rows(X), dtype)
    Yq = None if Xq is None else tree_embedding(tree, normalize_rows(Xq), dtype)
    return pairwise_l1(Y, Yq, dtype)
