r"""Trees whose edge weights are fitted to exact transport: WQTWD, WCTWD, their sliced variants, UltraTree.

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
  own fit (the sliced variants);
- ``ultratree`` (Chen, Tabaghi and Wang, AAAI 2024, "Learning ultrametric trees for optimal
  transport regression"): an ULTRAMETRIC tree fitted to the same regression, its merge heights
  rather than free edge weights (:func:`fit_ultrametric_heights`), from UltraFit's tree
  (:mod:`._ultrametric`).

The distances are then exact TWDs on the reweighted trees, computed by hdtwd's kernels like every
other tree of :mod:`._competitors`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import OT_BUDGET
from hdtwd_cli.evaluate._competitors import feature_vectors, reference_tree, shape_trees
from hdtwd_cli.evaluate._exact_ot import OverBudget, exact_ot_pairs, ground_of, histograms, supports
from hdtwd_cli.evaluate._methods import METHODS, of_family
from hdtwd_cli.tree._learn import Prepared
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._distance import subtree_masses
from hdtwd_cli.twd._histograms import tree_histograms

__all__ = [
    "FIT_PAIRS",
    "FIT_MIN_PAIRS",
    "HELD_OUT",
    "RIDGES",
    "SLICES",
    "ULTRATREE_ROUNDS",
    "fit_edge_weights",
    "fit_ultrametric_heights",
    "FitPairs",
    "fit_pairs",
    "fitted_trees",
    "sample_pairs",
]

#: Pairs of training rows whose exact transport costs the weights are fitted to (fewer where the
#: transport variables of the pairs would pass the budget).
FIT_PAIRS = 400
#: Fewest pairs a fit is made on: a method whose budget fits fewer is skipped (its row says why).
FIT_MIN_PAIRS = 20
#: Trees averaged by the sliced variants ``swqtwd`` and ``swctwd``.
SLICES = 5
#: Candidate weights :math:`\rho` of the pull towards the unfitted lengths (:func:`fit_edge_weights`); 0 is NNLS.
RIDGES = (0.0, 0.01, 0.1, 1.0, 10.0)
#: Share of the pairs held out to choose :math:`\rho`.
HELD_OUT = 0.25
#: Stopping rule of :func:`_ridge_nnls`'s Newton steps: the dual gradient below this share of :math:`\lVert y\rVert`,
#: or this many steps.
_DUAL_TOL = 1e-10
_DUAL_STEPS = 100
#: Most rounds of designated children in :func:`fit_ultrametric_heights`.
ULTRATREE_ROUNDS = 5


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
    r""":math:`\arg\min_{w \ge 0} \tfrac12\lVert F w - y\rVert^2 + \tfrac12\lambda \lVert w - \bar w\rVert^2`,
    :math:`\lambda = \rho s^2` with :math:`s^2 = \lVert F\rVert_F^2 / E` the mean squared column norm
    (``ridge`` :math:`= \rho`; NNLS at 0).

    Solved in the dual, whose dimension is the number of pairs ``P``, not the edges ``E``: for a
    multiplier :math:`z \in \mathbb{R}^P` of :math:`r = F w - y` the minimising weights are separable,
    :math:`w(z) = \max(0, \bar w - F^\top z / \lambda)`, and the concave dual
    :math:`g(z) = -\tfrac12\lVert z\rVert^2 - z^\top y
    + \min_{w \ge 0}[z^\top F w + \tfrac12\lambda\lVert w - \bar w\rVert^2]`
    has gradient :math:`F w(z) - y - z` and generalised Hessian :math:`-(I + F_S F_S^\top / \lambda)`
    on the edges :math:`S` with :math:`w_e(z) > 0`. Semismooth Newton steps with a backtracking line
    search on :math:`g` (a :math:`P \times P` Cholesky solve each) stop when the gradient is below
    :data:`_DUAL_TOL` of :math:`\lVert y\rVert`; the primal is :math:`w(z)`, exactly non-negative. Sparse
    products and one-threaded LAPACK: the same bits at any thread count.
    """
    from scipy.linalg import cho_factor, cho_solve
    from scipy.optimize import nnls

    from hdtwd_cli._runtime.blas import serial_blas

    if ridge == 0.0:
        return nnls(F, y, maxiter=50 * F.shape[1])[0]
    Fs = sp.csr_matrix(F)
    Ft = Fs.T.tocsr()
    lam = ridge * float(Fs.multiply(Fs).sum()) / F.shape[1]
    prior = np.asarray(prior, dtype=np.float64)

    def primal(z: np.ndarray) -> np.ndarray:
        return np.maximum(prior - (Ft @ z) / lam, 0.0)

    def dual(z: np.ndarray, w: np.ndarray) -> float:
        return float(-0.5 * z @ z - z @ y + (Fs @ w) @ z + 0.5 * lam * np.sum((w - prior) ** 2))

    z = np.zeros_like(y)
    w = primal(z)
    value = dual(z, w)
    tol = _DUAL_TOL * max(float(np.linalg.norm(y)), 1e-300)
    with serial_blas():
        for _ in range(_DUAL_STEPS):
            grad = Fs @ w - y - z
            if float(np.linalg.norm(grad)) <= tol:
                break
            S = w > 0
            FS = Fs[:, S]
            K = (FS @ FS.T).toarray() / lam
            K[np.diag_indices_from(K)] += 1.0
            step = cho_solve(cho_factor(K), grad)
            t = 1.0
            while True:  # ascent on the concave dual (Armijo)
                z_new = z + t * step
                w_new = primal(z_new)
                new = dual(z_new, w_new)
                if new >= value + 1e-4 * t * float(grad @ step) or t < 1e-10:
                    break
                t *= 0.5
            z, w, value = z_new, w_new, new
    return w


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
        length[edges[seen]], ridge = _pulled_fit(F[:, seen], y, length[edges[seen]], ridges)
    return dataclasses.replace(tree, length=length, metadata={**tree.metadata, "ridge": ridge})


def _pulled_fit(F: np.ndarray, y: np.ndarray, prior: np.ndarray, ridges: tuple[float, ...]) -> tuple[np.ndarray, float]:
    r""":func:`_ridge_nnls` with :math:`\rho` chosen from ``ridges`` by the squared error on the last
    :data:`HELD_OUT` of the pairs when fitted on the others; then fitted on all pairs."""
    ridge = ridges[0]
    fit = np.arange(y.size) < y.size - max(1, int(round(HELD_OUT * y.size)))
    if len(ridges) > 1 and fit.sum() >= 1:
        errors = [_held_out_error(F, y, prior, r, fit) for r in ridges]
        ridge = ridges[int(np.argmin(errors))]
    return _ridge_nnls(F, y, prior, ridge), ridge


def _heights(tree: Tree) -> np.ndarray:
    """Every node's height above its highest leaf below (the largest sum of lengths down to a leaf)."""
    H = np.zeros(tree.n_nodes)
    for v in range(tree.n_nodes - 1):  # children before parents
        p = tree.parent[v]
        H[p] = max(H[p], H[v] + tree.length[v])
    return H


def fit_ultrametric_heights(
    tree: Tree,
    A: np.ndarray | sp.spmatrix,
    B: np.ndarray | sp.spmatrix,
    costs: np.ndarray,
    *,
    ridges: tuple[float, ...] = RIDGES,
    rounds: int = ULTRATREE_ROUNDS,
) -> Tree:
    r"""``tree``'s topology with the merge heights :math:`H` that best reproduce ``costs``, as an ultrametric.

    With every leaf at height 0 and each edge the difference of its ends' heights, the TWD is
    linear in the internal nodes' heights,

    .. math::

        \mathrm{TW}_H(a, b) = \sum_c H_c \Big(\sum_{k \in \mathrm{ch}(c)} \lvert \Delta_k \rvert
        - \lvert \Delta_c \rvert\Big), \qquad \Delta_v = a(\Gamma_v) - b(\Gamma_v),

    and the tree is an ultrametric exactly when no node is below a child. Each round designates
    the highest child :math:`k(c)` of every node and writes :math:`H_c = \delta_c + H_{k(c)}` with
    :math:`\delta \ge 0`: the constraints towards the designated children are then the bounds
    :math:`\delta \ge 0`, and :math:`\delta` is fitted as the edge weights are
    (:func:`fit_edge_weights`: least squares to ``costs`` pulled towards the current heights at their
    least-squares scale, the pull chosen on held-out pairs). A node that ends below another child
    changes its designation and the next round fits again (at most ``rounds``); each round's heights
    are made an ultrametric by raising any node still below a child to it, and the round of least
    squared error on the pairs is kept (the start, UltraFit's heights at their best scale, included).
    With fewer pairs than merges :math:`\rho = 0` is left out of the candidates: the system has
    entries of both signs, so the unpulled fit has unbounded directions.

    Returns
    -------
    Tree
        The same topology; ``metadata`` records the ``rounds`` taken, the ``round`` kept (0: the
        start), its ``ridge`` and the squared error on the pairs before (the input heights at their
        best scale) and after.
    """
    y = np.asarray(costs, dtype=np.float64)
    parent, L, N = tree.parent, tree.n_leaves, tree.n_nodes
    D = np.abs(subtree_masses(tree, A) - subtree_masses(tree, B))
    G = -D
    for v in range(N - 1):
        G[:, parent[v]] += D[:, v]
    G = np.ascontiguousarray(G[:, L:])  # TW = G @ H[L:]
    H = _heights(tree)
    base = G @ H[L:]
    scale = max(float(base @ y / (base @ base)) if base @ base > 0 else 1.0, 0.0)
    H *= scale
    loss_first = float(np.sum((G @ H[L:] - y) ** 2))
    best: tuple[float, np.ndarray, int, float | None] = (loss_first, H.copy(), 0, None)  # the start: no fit
    if G.shape[0] < G.shape[1]:
        # G has entries of both signs: with fewer pairs than merges the unpulled fit has unbounded
        # directions (heights of 1e15 that cancel on the pairs), so rho = 0 is not a candidate
        ridges = tuple(r for r in ridges if r > 0) or (1.0,)
    taken = 0
    for taken in range(1, rounds + 1):
        top = np.full(N, -1, dtype=np.int64)  # the designated (highest, then lowest-numbered) child
        for v in range(N - 1):
            p = parent[v]
            if top[p] < 0 or H[v] > H[top[p]]:
                top[p] = v
        designated = np.zeros(N, dtype=bool)
        designated[top[top >= 0]] = True
        # H = T delta, T[c, c'] = 1 when c' is on c's chain of designated children: the columns of G T
        # sum G over each node's designated ancestors, top down (parents after children)
        GT = G.copy()
        for v in range(N - 2, L - 1, -1):
            if designated[v]:
                GT[:, v - L] += GT[:, parent[v] - L]
        delta = np.maximum(H[L:] - H[top[L:]], 0.0)  # the current heights' increments: the prior
        seen = GT.any(axis=0)  # an increment no pair's cost depends on keeps its prior
        ridge: float | None = None
        if seen.any():
            delta[seen], ridge = _pulled_fit(GT[:, seen], y, delta[seen], ridges)
        H[:L] = 0.0
        for c in range(L, N):  # children first
            H[c] = delta[c - L] + H[top[c]]
        low = bool((H[parent[: N - 1]] < H[: N - 1]).any())
        feasible = H.copy()
        for v in range(N - 1):  # any node still below a child is raised to it
            feasible[parent[v]] = max(feasible[parent[v]], feasible[v])
        loss = float(np.sum((G @ feasible[L:] - y) ** 2))
        if loss < best[0]:
            best = (loss, feasible, taken, ridge)
        if not low:
            break
    loss, H, chosen, ridge = best
    length = np.zeros(N)
    length[: N - 1] = H[parent[: N - 1]] - H[: N - 1]
    meta = {**tree.metadata, "method": "ultratree", "rounds": taken, "round": chosen, "ridge": ridge}
    return dataclasses.replace(tree, length=length, metadata={**meta, "loss_first": loss_first, "loss": loss})


@dataclasses.dataclass(frozen=True)
class FitPairs:
    """The sampled pairs of training rows (``(P, 2)`` indices) and their exact transport costs."""

    pairs: np.ndarray
    costs: np.ndarray


def fit_pairs(
    X: np.ndarray | sp.spmatrix,
    names: list[str],
    prepared: Prepared,
    params: TreeParams,
    *,
    split: int = 0,
    pairs: int = FIT_PAIRS,
    budget: int = OT_BUDGET,
    vectors: tuple[list[str], np.ndarray] | None = None,
) -> FitPairs:
    r"""The pairs every fitted method of a split regresses on, and their exact costs.

    :func:`sample_pairs` of the rows ``X`` (those ``prepared`` was made from; seed
    ``[params.seed, split]``) by the supports of their histograms, and :math:`W(a_p, b_p)` between
    those histograms (:func:`._exact_ot.histograms` of :func:`._competitors.reference_tree`: the
    same map, denoiser and weights, as every tree of the split) in the Euclidean ground space of the
    unit feature vectors (:func:`._exact_ot.ground_of`; ``vectors``: :func:`._competitors.feature_vectors`
    of ``prepared``, when the caller has them). They depend on the training rows and the seed only,
    not on the method: computed once per split, they serve every fitted method (the exact programs
    are the expensive part).

    Raises
    ------
    OverBudget
        Before any program is solved, when fewer than :data:`FIT_MIN_PAIRS` pairs fit ``budget``.
    """
    reference = reference_tree(prepared, params)
    placed, V = vectors if vectors is not None else feature_vectors(prepared)
    s = supports(X, names, reference)
    drawn = sample_pairs(s, pairs, np.iinfo(np.int64).max, [params.seed, split])  # every draw; cut below
    cost = np.cumsum(s[drawn[:, 0]] * s[drawn[:, 1]])
    fits = int(np.searchsorted(cost, budget, side="right"))
    need = min(FIT_MIN_PAIRS, pairs)
    if fits < need:
        more = int(cost[need - 1])
        raise OverBudget(
            f"a budget of {budget:,} transport variables per split fits only {fits} of the {pairs} training "
            f"pairs the weights are fitted to ({need} needed); --ot-budget {more} fits them "
            f"(about {max(1, round(more * 1e-7))} CPU-seconds per split)"
        )
    used = drawn[:fits]
    rows = np.unique(used)
    at = np.searchsorted(rows, used)
    H = histograms(X[rows], names, reference)
    ground = ground_of(placed, V, reference.leaf_names)
    return FitPairs(used, exact_ot_pairs(H[at[:, 0]], H[at[:, 1]], ground))


def fitted_trees(
    method: str,
    X: np.ndarray | sp.spmatrix,
    names: list[str],
    prepared: Prepared,
    params: TreeParams,
    *,
    split: int = 0,
    pairs: int = FIT_PAIRS,
    budget: int = OT_BUDGET,
    fit: FitPairs | None = None,
    vectors: tuple[list[str], np.ndarray] | None = None,
) -> tuple[list[Tree], int]:
    r"""The ``method`` tree(s) (a ``fitted`` method of :data:`._methods.METHODS`) of the rows ``X`` and the pairs used.

    ``X``: the rows ``prepared`` was made from. The shapes are built as
    :func:`._competitors.competitor_trees` builds the trees of the same :class:`~._methods.Shape`
    (unit feature vectors of ``prepared``; features without a vector from the root; the same map,
    denoiser and weights, as hdtwd's tree), then every tree's weights are fitted to the exact
    transport costs of the same pairs (:func:`fit_pairs`, seed ``[params.seed, split]``; pass
    ``fit``, computed once for these rows, to share them between methods): edge weights
    (:func:`fit_edge_weights`) or an ultrametric's heights (:func:`fit_ultrametric_heights`). The
    fit's histograms are those of the pairs' rows on each tree (the same map).
    """
    spec = METHODS.get(method)
    if spec is None or spec.family != "fitted" or spec.shape is None:
        raise ValueError(f"unknown fitted tree method {method!r}; choose from {', '.join(of_family('fitted'))}")
    vectors = vectors if vectors is not None else feature_vectors(prepared)
    if fit is None:
        fit = fit_pairs(X, names, prepared, params, split=split, pairs=pairs, budget=budget, vectors=vectors)
    placed, V = vectors
    finish = params.replace(leaf_length=0.0)
    trees = [prepared.finish(t, finish) for t in shape_trees(spec.shape, placed, V, seed=params.seed, split=split)]
    i, j = fit.pairs[:, 0], fit.pairs[:, 1]
    fitted = []
    for t in trees:
        A, B = tree_histograms(X[i], names, t), tree_histograms(X[j], names, t)
        fitted.append((fit_ultrametric_heights if spec.fit == "heights" else fit_edge_weights)(t, A, B, fit.costs))
    return fitted, int(fit.pairs.shape[0])
