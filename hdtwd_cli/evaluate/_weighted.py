r"""Trees whose edge weights are fitted to exact transport (Yamada et al. 2022): WQTWD, WCTWD, sliced variants.

A tree-Wasserstein distance is linear in the tree's edge weights :math:`w`:

.. math::

    \mathrm{TW}_w(a, b) = \sum_e w_e \, \lvert a(\Gamma_e) - b(\Gamma_e) \rvert,

with :math:`a(\Gamma_e)` the mass of histogram :math:`a` on the leaves below edge :math:`e`. Yamada,
Takezawa, Sato and Yamada (TMLR 2022, "Approximating 1-Wasserstein distance with trees") keep a
tree's shape and fit :math:`w` so that :math:`\mathrm{TW}_w` reproduces the exact transport cost
:math:`W(a_p, b_p)` (:func:`hdtwd_cli.evaluate._exact_ot.exact_ot`, the Euclidean ground cost of the
unit feature vectors) on sampled pairs of training histograms:

.. math::

    \min_{w \ge 0} \sum_p \Big( W(a_p, b_p) - \sum_e w_e \lvert a_p(\Gamma_e) - b_p(\Gamma_e) \rvert \Big)^2

by non-negative least squares (``scipy.optimize.nnls``) over the edges that separate some pair.
Their paper adds an L1 penalty :math:`\lambda \lVert w \rVert_1` chosen by validation; here
:math:`\lambda = 0` (NNLS's solution is already sparse), and the edges no pair separates keep
their scaled lengths (:func:`fit_edge_weights`; docs/method.md section 12).

- ``wqtwd``: the quadtree (:func:`._competitors.quadtree`) with fitted weights;
- ``wctwd``: the clustering-based tree (:func:`._competitors.cluster_tree`) with fitted weights;
- ``swqtwd`` / ``swctwd``: the mean over :data:`SLICES` such trees, each with its own seed and its
  own fit (the sliced variants).

The distances are then exact TWDs on the reweighted trees, computed by hdtwd's kernels like every
other tree of :mod:`._competitors`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import FITTED_METHODS, OT_BUDGET
from hdtwd_cli.evaluate._competitors import feature_vectors, trees_in
from hdtwd_cli.evaluate._exact_ot import exact_ot_pairs, ground_of, ot_histograms
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._distance import align_to_tree, normalize_rows, subtree_masses

__all__ = ["FITTED_METHODS", "FIT_PAIRS", "SLICES", "fit_edge_weights", "fitted_trees", "sample_pairs"]

#: Pairs of training rows whose exact transport costs the weights are fitted to (fewer where the
#: transport variables of the pairs would pass the budget).
FIT_PAIRS = 400
#: Trees averaged by the sliced variants ``swqtwd`` and ``swctwd``.
SLICES = 5


def sample_pairs(support: np.ndarray, pairs: int, budget: int, seed: list[int]) -> np.ndarray:
    r"""``(P, 2)`` distinct row pairs drawn from ``default_rng(seed)``: the longest prefix of the
    draw whose transport variables :math:`\sum_p s_{i_p} s_{j_p}` stay within ``budget``
    (``s``: the rows' support sizes)."""
    n = support.size
    if n < 2:
        raise ValueError("fitting edge weights needs at least 2 training rows")
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, size=pairs)
    j = (i + rng.integers(1, n, size=pairs)) % n  # never i itself
    cost = np.cumsum(support[i].astype(np.int64) * support[j].astype(np.int64))
    keep = max(1, int(np.searchsorted(cost, budget, side="right")))
    return np.stack([i, j], axis=1)[:keep]


def fit_edge_weights(tree: Tree, A: np.ndarray | sp.spmatrix, B: np.ndarray | sp.spmatrix, costs: np.ndarray) -> Tree:
    r"""``tree`` with the edge lengths :math:`w \ge 0` that best reproduce ``costs`` (least squares).

    Parameters
    ----------
    tree : Tree
    A, B : ndarray or sparse matrix, shape (P, n_leaves)
        The pairs' histograms, columns in the order of ``tree.leaf_names``.
    costs : ndarray, shape (P,)
        The exact transport cost of each pair.

    Returns
    -------
    Tree
        The same shape, ``length`` replaced by the NNLS solution (the root keeps 0). An edge that
        separates no pair (its column of the system is zero: NNLS would leave it at 0, so a test
        pair's mass on it would move for free) keeps its length times the least-squares scale of
        the whole unfitted tree, :math:`c = \langle \mathrm{TW}, W\rangle / \lVert \mathrm{TW}\rVert^2`.
    """
    from scipy.optimize import nnls

    y = np.asarray(costs, dtype=np.float64)
    edges = np.flatnonzero(tree.parent >= 0)
    F = np.abs(subtree_masses(tree, A)[:, edges] - subtree_masses(tree, B)[:, edges])
    seen = F.any(axis=0)
    base = F @ tree.length[edges]
    scale = float(base @ y / (base @ base)) if base @ base > 0 else 1.0
    length = np.zeros(tree.n_nodes)
    length[edges] = max(scale, 0.0) * tree.length[edges]  # edges no pair separates: the best common scale
    if seen.any():
        length[edges[seen]], _ = nnls(F[:, seen], y, maxiter=50 * int(seen.sum()))
    return dataclasses.replace(tree, length=length)


def fitted_trees(
    method: str,
    X: np.ndarray | sp.spmatrix,
    names: list[str],
    params: TreeParams,
    embedding: tuple[np.ndarray, list[str]] | None = None,
    split: int = 0,
    pairs: int = FIT_PAIRS,
    budget: int = OT_BUDGET,
) -> tuple[list[Tree], int]:
    r"""The ``method`` tree(s) (:data:`FITTED_METHODS`) of the rows ``X`` and the pairs the fit used.

    The trees are built as :func:`._competitors.competitor_trees` builds the quadtree and the
    clustering-based tree (unit feature vectors of hdtwd's features' space; features without a
    vector from the root; idf weights attached), then every tree's weights are fitted to the exact
    transport costs of the same pairs (:func:`sample_pairs`, seed ``[params.seed, split]``). Tree
    seeds: ``params.seed + split`` (``wqtwd``, as ``quadtree``), ``params.seed`` (``wctwd``, as
    ``cluster-tree``), ``[params.seed, split, t]`` for slice ``t`` (the sliced variants, as
    ``tswd-n``).
    """
    if method not in FITTED_METHODS:
        raise ValueError(f"unknown fitted tree method {method!r}; choose from {', '.join(FITTED_METHODS)}")
    space, V = feature_vectors(X, names, params, embedding)
    shape = {"wqtwd": "quadtree", "wctwd": "cluster-tree", "swqtwd": f"quadtrees-{SLICES}", "swctwd": f"tswd-{SLICES}"}
    trees = trees_in(shape[method], space, V, params, split)
    ground, w = ground_of(space, V, names)
    H = ot_histograms(X, w)
    pairs_used = sample_pairs(np.diff(H.indptr), pairs, budget, [params.seed, split])
    costs = exact_ot_pairs(H[pairs_used[:, 0]], H[pairs_used[:, 1]], ground)
    fitted = []
    for t in trees:
        A = normalize_rows(align_to_tree(X[pairs_used[:, 0]], names, t))
        B = normalize_rows(align_to_tree(X[pairs_used[:, 1]], names, t))
        fitted.append(fit_edge_weights(t, A, B, costs))
    return fitted, int(pairs_used.shape[0])
