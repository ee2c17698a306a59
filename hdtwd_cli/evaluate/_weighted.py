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

over the edges that separate some pair. Their paper adds an L1 penalty :math:`\lambda \lVert w \rVert_1`
chosen by validation. Here the penalty is a pull towards the tree's own (scaled) lengths,
:math:`\rho s^2 \lVert w - c\ell \rVert^2`, with :math:`\rho` chosen on held-out pairs
(:func:`fit_edge_weights`; docs/method.md section 12): with far more edges than pairs, the
unpenalised or L1 fit keeps at most one non-zero weight per pair and loses the shape's lengths
everywhere else (BBCSPORT's fitted quadtree: 400 weights of ~14,000 edges).

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

__all__ = [
    "FITTED_METHODS",
    "FIT_PAIRS",
    "HELD_OUT",
    "RIDGES",
    "SLICES",
    "fit_edge_weights",
    "fitted_trees",
    "sample_pairs",
]

#: Pairs of training rows whose exact transport costs the weights are fitted to (fewer where the
#: transport variables of the pairs would pass the budget).
FIT_PAIRS = 400
#: Trees averaged by the sliced variants ``swqtwd`` and ``swctwd``.
SLICES = 5
#: Candidate weights :math:`\rho` of the pull towards the unfitted lengths (:func:`fit_edge_weights`); 0 is NNLS.
RIDGES = (0.0, 0.01, 0.1, 1.0, 10.0)
#: Share of the pairs held out to choose :math:`\rho`.
HELD_OUT = 0.25


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


def _held_out_error(F: np.ndarray, y: np.ndarray, prior: np.ndarray, ridge: float, fit: np.ndarray) -> float:
    """Squared error on the held-out pairs ``~fit`` of the weights fitted on ``fit`` with ``ridge``."""
    w = _ridge_nnls(F[fit], y[fit], prior, ridge)
    r = F[~fit] @ w - y[~fit]
    return float(r @ r)


def _ridge_nnls(F: np.ndarray, y: np.ndarray, prior: np.ndarray, ridge: float) -> np.ndarray:
    r""":math:`\arg\min_{w \ge 0} \lVert F w - y\rVert^2 + \rho\, s^2 \lVert w - \bar w\rVert^2` with
    :math:`s^2 = \lVert F\rVert_F^2 / E`, the mean squared column norm (``ridge`` :math:`= \rho`; NNLS at 0).

    The stacked system :math:`[F; \sqrt{\rho} s I] w \approx [y; \sqrt{\rho} s \bar w]` is solved by
    ``scipy.optimize.lsq_linear`` (trust-region reflective, LSMR on the sparse stack).
    """
    from scipy.optimize import lsq_linear, nnls

    if ridge == 0.0:
        return nnls(F, y, maxiter=50 * F.shape[1])[0]
    E = F.shape[1]
    s = np.sqrt(ridge * float(np.einsum("ij,ij->", F, F)) / E)
    M = sp.vstack([sp.csr_matrix(F), sp.identity(E, format="csr") * s], format="csr")
    rhs = np.concatenate([y, s * prior])
    return lsq_linear(M, rhs, bounds=(0.0, np.inf), method="trf", lsq_solver="lsmr", tol=1e-10).x


def fit_edge_weights(
    tree: Tree,
    A: np.ndarray | sp.spmatrix,
    B: np.ndarray | sp.spmatrix,
    costs: np.ndarray,
    *,
    ridges: tuple[float, ...] = RIDGES,
) -> Tree:
    r"""``tree`` with the edge lengths :math:`w \ge 0` that best reproduce ``costs``, pulled towards its own shape.

    .. math::

        \min_{w \ge 0} \sum_p \big(W_p - \mathrm{TW}_w(a_p, b_p)\big)^2
        + \rho\, s^2 \lVert w - c\, \ell \rVert^2 ,

    with :math:`\ell` the unfitted lengths, :math:`c = \langle \mathrm{TW}_\ell, W\rangle /
    \lVert \mathrm{TW}_\ell\rVert^2` their least-squares scale and :math:`s^2` the mean squared
    column norm of the system (so :math:`\rho` is unit-free). :math:`\rho` is chosen from ``ridges``
    by the squared error on the last :data:`HELD_OUT` of the pairs when fitted on the others, then
    the fit is made on all pairs. :math:`\rho = 0` is the plain NNLS fit, which keeps at most as
    many non-zero weights as pairs (with far more edges than pairs it zeroes most of them and
    overfits); an edge that separates no pair keeps :math:`c \ell_e` whatever :math:`\rho`.

    Parameters
    ----------
    tree : Tree
    A, B : ndarray or sparse matrix, shape (P, n_leaves)
        The pairs' histograms, columns in the order of ``tree.leaf_names``.
    costs : ndarray, shape (P,)
        The exact transport cost of each pair.
    ridges : tuple of float
        The candidate :math:`\rho`.

    Returns
    -------
    Tree
        The same shape with the fitted lengths (the root keeps 0); ``metadata["ridge"]`` the
        :math:`\rho` chosen.
    """
    y = np.asarray(costs, dtype=np.float64)
    edges = np.flatnonzero(tree.parent >= 0)
    F = np.abs(subtree_masses(tree, A)[:, edges] - subtree_masses(tree, B)[:, edges])
    seen = F.any(axis=0)
    base = F @ tree.length[edges]
    scale = max(float(base @ y / (base @ base)) if base @ base > 0 else 1.0, 0.0)
    length = np.zeros(tree.n_nodes)
    length[edges] = scale * tree.length[edges]  # edges no pair separates: the best common scale
    ridge = ridges[0]
    if seen.any():
        Fs, prior = F[:, seen], length[edges[seen]]
        fit = np.arange(y.size) < y.size - max(1, int(round(HELD_OUT * y.size)))
        if len(ridges) > 1 and fit.sum() >= 1:
            errors = [_held_out_error(Fs, y, prior, r, fit) for r in ridges]
            ridge = ridges[int(np.argmin(errors))]
        length[edges[seen]] = _ridge_nnls(Fs, y, prior, ridge)
    return dataclasses.replace(tree, length=length, metadata={**tree.metadata, "ridge": ridge})


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
