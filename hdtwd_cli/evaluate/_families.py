r"""The families of ``classify``'s methods: how each family's distances are computed and what it reports.

Each entry of :data:`._methods.FAMILIES` names its :class:`Route` here (:attr:`._methods.Family.route`,
``"module:Class"``); :func:`._protocol.evaluate` asks the route of a method's family for the method's
distances on a split (:meth:`Route.distances`: test rows scored x training rows) and for its settings in
the report (:meth:`Route.settings`). A new family is one :class:`Route` and one registry entry.

What a split shares (:class:`Split`): the chain's first stage of its training rows
(:func:`hdtwd_cli.tree._learn.prepare`, computed once for every tree of the split), the unit feature
vectors, the reference (star) tree whose histograms exact OT compares, the rows exact OT scores and the
fitted methods' pairs. What every split shares (:class:`Study`): the data, the labels, the trees'
parameters, the grid of hdtwd's (eps, K), the budgets and the splits.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from itertools import product

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import DEFAULT_EPS, DEFAULT_K, DEFAULT_SCALES, OT_BUDGET
from hdtwd_cli.evaluate._baselines import baseline_distances
from hdtwd_cli.evaluate._competitors import competitor_trees, feature_vectors, reference_tree
from hdtwd_cli.evaluate._exact_ot import OverBudget, exact_ot, ground_of, histograms, scored_rows, supports
from hdtwd_cli.evaluate._flowtree import flowtree_distances
from hdtwd_cli.evaluate._joint import joint_hierarchy, joint_report
from hdtwd_cli.evaluate._methods import FAMILIES, METHODS, Method
from hdtwd_cli.evaluate._splits import knn_accuracy, stratified_splits
from hdtwd_cli.evaluate._weighted import FIT_PAIRS, FitPairs, fit_pairs, fitted_trees
from hdtwd_cli.tree._learn import Prepared, learn_trees, prepare
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._distance import query_distances
from hdtwd_cli.twd._histograms import tree_histograms

__all__ = ["Study", "Split", "Route", "route_of", "method_distances", "select_params", "hdtwd_accuracies"]

Notes = dict[str, list]


@dataclass(frozen=True)
class Study:
    """What every split of one evaluation shares.

    ``X``, ``names``: the samples' values and the features; ``y``: class indices; ``base``: the trees'
    parameters; ``embedding``: the features' given vectors (or ``None``); ``eps_grid`` x ``scales_grid``:
    hdtwd's (eps, K), chosen per split by inner cross-validation when there are several; ``ks``: the kNN's
    k; ``test_size`` and ``seed``: the splits'; ``budget``: exact OT's (:data:`hdtwd_cli._defaults.OT_BUDGET`);
    ``splits``: (training rows, test rows) of each split; ``progress``: called with 1 per step.
    """

    X: np.ndarray | sp.spmatrix
    names: list[str]
    y: np.ndarray
    base: TreeParams
    splits: Sequence[tuple[np.ndarray, np.ndarray]]
    eps_grid: Sequence[float] = (DEFAULT_EPS,)
    scales_grid: Sequence[int] = (DEFAULT_SCALES,)
    ks: Sequence[int] = DEFAULT_K
    embedding: tuple[np.ndarray, list[str]] | None = None
    test_size: float = 0.3
    seed: int = 0
    budget: int = OT_BUDGET
    progress: Callable[[int], None] | None = None

    @property
    def grid(self) -> bool:
        """Several (eps, K): each split chooses by :func:`select_params` on its training rows."""
        return len(self.eps_grid) * len(self.scales_grid) > 1

    @property
    def point(self) -> TreeParams:
        """The trees' stages of the joint family: ``base`` with hdtwd's (eps, K) when they are not a grid."""
        return self.base if self.grid else self.base.replace(eps=self.eps_grid[0], scales=self.scales_grid[0])


class Split:
    """What the methods of split ``index`` of ``study`` share, computed when first needed."""

    def __init__(self, study: Study, index: int) -> None:
        self.study, self.index = study, index
        self.X, self.names, self.base, self.embedding = study.X, study.names, study.base, study.embedding
        self.train, self.test = study.splits[index]
        self._supports: tuple[np.ndarray, np.ndarray] | None = None
        self._fit: FitPairs | OverBudget | None = None

    @cached_property
    def prepared(self) -> Prepared:
        return prepare(self.X[self.train], self.names, self.base, embedding=self.embedding)

    @cached_property
    def vectors(self) -> tuple[list[str], np.ndarray]:
        return feature_vectors(self.prepared)

    @cached_property
    def reference(self) -> Tree:
        return reference_tree(self.prepared, self.base)

    @property
    def denoised_rank(self) -> int | None:
        """The rank of the split's denoiser (0: off), or ``None`` when no method needed the chain's first stage."""
        if "prepared" not in self.__dict__:
            return None
        den = self.prepared.denoiser
        return 0 if den is None else den.rank

    def scored(self, method: str) -> np.ndarray:
        """Positions (in the test rows) exact OT and flowtree score: :func:`._exact_ot.scored_rows` of the
        histograms' supports, seed ``[seed, split, 26]``; :class:`OverBudget` names ``method``."""
        if self._supports is None:
            ref = self.reference
            self._supports = (
                supports(self.X[self.test], self.names, ref),
                supports(self.X[self.train], self.names, ref),
            )
        s_test, s_train = self._supports
        budget, seed = self.study.budget, [self.study.seed, self.index, 26]
        return scored_rows(s_test, s_train, budget=budget, seed=seed, method=method)

    def fit(self) -> FitPairs:
        """The fitted methods' pairs and their exact costs (:func:`._weighted.fit_pairs`), once per split."""
        if self._fit is None:
            try:
                self._fit = fit_pairs(
                    self.X[self.train],
                    self.names,
                    self.prepared,
                    self.base,
                    split=self.index,
                    budget=self.study.budget,
                    vectors=self.vectors,
                )
            except OverBudget as e:
                self._fit = e
        if isinstance(self._fit, OverBudget):
            raise self._fit
        return self._fit

    def tree_distances(self, trees: Sequence[Tree]) -> np.ndarray:
        """The mean TWD (test x train) over ``trees`` (one tree: its TWD)."""
        total = sum(_tree_query(t, self.X, self.names, self.train, self.test) for t in trees)
        return total / len(trees)  # type: ignore[return-value]


def _tree_query(
    tree: Tree, X: np.ndarray | sp.spmatrix, names: list[str], train: np.ndarray, test: np.ndarray
) -> np.ndarray:
    """The TWD on ``tree`` between the test rows and the training rows (test x train)."""
    on = [tree_histograms(X[rows], names, tree, normalised=False) for rows in (train, test)]
    return query_distances(tree, on[0], on[1])


def hdtwd_accuracies(
    X: np.ndarray | sp.spmatrix,
    names: list[str],
    y: np.ndarray,
    train: np.ndarray,
    test: np.ndarray,
    eps: float,
    scales: Sequence[int],
    base: TreeParams,
    ks: Sequence[int],
    embedding: tuple[np.ndarray, list[str]] | None = None,
    *,
    prepared: Prepared | None = None,
) -> dict[int, np.ndarray]:
    """Learn trees (one eigendecomposition for all K) on ``train``; kNN accuracies on ``test`` per K.

    Every column is a leaf of each tree (features without training mass hang from the root), so
    every test row keeps all its mass. ``prepared``: the first stage of the chain for the rows
    ``X[train]`` and ``base`` (:func:`hdtwd_cli.tree._learn.prepare`), shared with the other trees of
    the split; computed here otherwise.
    """
    params = base.replace(eps=eps, scales=max(scales))
    trees = learn_trees(X[train], names, params, list(scales), embedding=embedding, prepared=prepared)
    return {K: knn_accuracy(_tree_query(t, X, names, train, test), y[train], y[test], ks) for K, t in trees.items()}


def select_params(
    X: np.ndarray | sp.spmatrix,
    names: list[str],
    y: np.ndarray,
    train: np.ndarray,
    eps_grid: Sequence[float],
    scales_grid: Sequence[int],
    base: TreeParams,
    ks: Sequence[int],
    inner_splits: int = 3,
    test_size: float = 0.3,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    embedding: tuple[np.ndarray, list[str]] | None = None,
) -> tuple[float, int, dict]:
    """Choose (eps, K) by inner cross-validation on the TRAINING rows only.

    Each grid point is scored by its best-k mean accuracy over ``inner_splits`` inner splits of
    ``train``; ties go to the first point in grid order (eps outer, K inner).

    Returns
    -------
    eps, K, scores  (scores maps "eps,K" to the inner best-k mean accuracy)
    """
    inner = stratified_splits(y[train], inner_splits, test_size, seed)
    scores: dict[tuple[float, int], np.ndarray] = {}
    for eps in eps_grid:
        accs: dict[int, list[np.ndarray]] = {K: [] for K in scales_grid}
        for itr, ite in inner:
            res = hdtwd_accuracies(X, names, y, train[itr], train[ite], eps, scales_grid, base, ks, embedding)
            for K in scales_grid:
                accs[K].append(res[K])
            if progress is not None:
                progress(1)
        for K in scales_grid:
            scores[(eps, K)] = np.mean(accs[K], axis=0)
    best = max(product(eps_grid, scales_grid), key=lambda p: (scores[p].max(), -list(scores).index(p)))
    return best[0], best[1], {f"{e:g},{k}": float(v.max()) for (e, k), v in scores.items()}


class Route:
    """How a family's methods are scored on a split and what the report says of them.

    ``prepared``: the family reads the split's first stage of the chain (its denoiser and weights), so
    the report gives that map (the features' space, the weighting, the denoising and each split's rank).
    ``budgeted``: the family scores only the test rows that fit exact OT's budget (:meth:`Split.scored`),
    so the protocol scores every other method on those rows too (the report's ``same_rows``).
    """

    prepared: bool = True
    budgeted: bool = False

    def distances(self, spec: Method, run: Split, notes: Notes) -> tuple[np.ndarray, np.ndarray]:
        """Distances (scored test rows x training rows) of ``spec`` on ``run`` and the test rows scored;
        ``notes`` collects what :meth:`settings` reports per split. Raises :class:`OverBudget` for a method
        that does not fit its budget."""
        raise NotImplementedError

    def settings(self, spec: Method, study: Study, notes: Notes) -> dict[str, object]:
        """The report's ``params`` of ``spec`` beyond what it compares and the split's map."""
        return {}


class Learned(Route):
    """``hdtwd``: the TWD on the tree learned from the training rows, (eps, K) chosen per split on a grid."""

    def distances(self, spec: Method, run: Split, notes: Notes) -> tuple[np.ndarray, np.ndarray]:
        st = run.study
        eps, K = st.eps_grid[0], st.scales_grid[0]
        scores: dict[str, float] = {}
        if st.grid:
            eps, K, scores = select_params(
                st.X,
                st.names,
                st.y,
                run.train,
                st.eps_grid,
                st.scales_grid,
                st.base,
                st.ks,
                test_size=st.test_size,
                seed=st.seed + 1000 + run.index,
                progress=st.progress,
                embedding=st.embedding,
            )
        params = st.base.replace(eps=eps, scales=K)
        trees = learn_trees(run.X[run.train], run.names, params, [K], embedding=st.embedding, prepared=run.prepared)
        notes.setdefault("choices", []).append(
            {"split": run.index, "eps": eps, "scales": K, **({"inner_scores": scores} if st.grid else {})}
        )
        return run.tree_distances([trees[K]]), run.test

    def settings(self, spec: Method, study: Study, notes: Notes) -> dict[str, object]:
        base, grid = study.base, study.grid
        return {
            "eps": list(study.eps_grid) if grid else study.eps_grid[0],
            "scales": list(study.scales_grid) if grid else study.scales_grid[0],
            "metric": base.metric,
            "linkage": base.linkage,
            "edge_weights": base.edge_weights,
            "bandwidth": base.bandwidth,
            "leaf_length": base.leaf_length,
            "selection": "inner 3-split CV on training rows" if grid else "fixed",
            "choices": notes.get("choices", []),
        }


class Baseline(Route):
    """The baselines: distances between the samples' values as they are (:mod:`._baselines`)."""

    prepared = False

    def distances(self, spec: Method, run: Split, notes: Notes) -> tuple[np.ndarray, np.ndarray]:
        return baseline_distances(spec.name, run.X[run.test], run.X[run.train]), run.test


class OtherLearner(Route):
    """``learner``: hdtwd's other learner, from the split's same prepared stage (the same histograms)."""

    def distances(self, spec: Method, run: Split, notes: Notes) -> tuple[np.ndarray, np.ndarray]:
        params = run.base.replace(learner=spec.learner)
        X, train = run.X, run.train
        tree = learn_trees(X[train], run.names, params, [params.scales], prepared=run.prepared)[params.scales]
        return run.tree_distances([tree]), run.test

    def settings(self, spec: Method, study: Study, notes: Notes) -> dict[str, object]:
        return {"learner": spec.learner, "leaf_length": study.base.leaf_length}


class Star(Route):
    """``star``: the star tree of the same features (the same histograms without a hierarchy)."""

    def distances(self, spec: Method, run: Split, notes: Notes) -> tuple[np.ndarray, np.ndarray]:
        trees = competitor_trees(spec.name, run.prepared, run.base, split=run.index, vectors=None)
        return run.tree_distances(trees), run.test


class Competitor(Route):
    """``tree``: the competitors' trees of the split's unit feature vectors (:mod:`._competitors`)."""

    def distances(self, spec: Method, run: Split, notes: Notes) -> tuple[np.ndarray, np.ndarray]:
        trees = competitor_trees(spec.name, run.prepared, run.base, split=run.index, vectors=run.vectors)
        return run.tree_distances(trees), run.test

    def settings(self, spec: Method, study: Study, notes: Notes) -> dict[str, object]:
        return {"seed": study.base.seed}


class Fitted(Competitor):
    """``fitted``: the competitors' trees, their weights fitted to exact OT on training pairs (:mod:`._weighted`)."""

    def distances(self, spec: Method, run: Split, notes: Notes) -> tuple[np.ndarray, np.ndarray]:
        X, train = run.X, run.train
        trees, used = fitted_trees(
            spec.name, X[train], run.names, run.prepared, run.base, split=run.index, fit=run.fit(), vectors=run.vectors
        )
        notes.setdefault("pairs", []).append(used)
        notes.setdefault("rho", []).append([t.metadata["ridge"] for t in trees])
        return run.tree_distances(trees), run.test

    def settings(self, spec: Method, study: Study, notes: Notes) -> dict[str, object]:
        what = "merge heights" if spec.fit == "heights" else "edge weights"
        return {
            **super().settings(spec, study, notes),
            "fit": f"least squares of the {what} to exact OT (POT) on up to {FIT_PAIRS} training pairs per split, "
            ">= 0, pulled towards the unfitted tree's scaled lengths by rho (chosen on held-out pairs)",
            "pairs": notes.get("pairs", []),
            "rho": notes.get("rho", []),
            "slices": spec.shape.count if spec.shape is not None else 1,
        }


class Joint(Route):
    """``joint``: the final features' tree of the joint hierarchies of the split, its map and Haar filter."""

    def distances(self, spec: Method, run: Split, notes: Notes) -> tuple[np.ndarray, np.ndarray]:
        st = run.study
        J = joint_hierarchy(
            spec.name, run.X, run.names, run.train, run.test, st.point, prepared=run.prepared, embedding=run.embedding
        )
        den = J.features_tree.denoiser
        notes.setdefault("rounds", []).append(len(J.rounds))
        notes.setdefault("converged", []).append(bool(J.converged))
        notes.setdefault("denoised_rank", []).append(0 if den is None else den.rank)
        return run.tree_distances([J.features_tree]), run.test

    def settings(self, spec: Method, study: Study, notes: Notes) -> dict[str, object]:
        return joint_report(spec.name, study.point, notes)


def _budget(study: Study, notes: Notes) -> dict[str, object]:
    """What exact OT's budget left: the test rows each split scored of how many."""
    return {
        "budget": int(study.budget),
        "test_rows": notes.get("test_rows", []),
        "test_rows_of": [int(t.size) for _, t in study.splits],
    }


class Flow(Competitor):
    """``flow``: the quadtree's flow on exact OT's test rows, costed in its ground space."""

    budgeted = True

    def distances(self, spec: Method, run: Split, notes: Notes) -> tuple[np.ndarray, np.ndarray]:
        rows = run.test[run.scored(spec.name)]
        notes.setdefault("test_rows", []).append(int(rows.size))
        placed, V = run.vectors
        (tree,) = competitor_trees(spec.name, run.prepared, run.base, split=run.index, vectors=run.vectors)
        leaf_vectors = ground_of(placed, V, tree.leaf_names)
        H = [histograms(run.X[r], run.names, tree) for r in (rows, run.train)]
        return flowtree_distances(H[0], H[1], tree.parent, leaf_vectors), rows

    def settings(self, spec: Method, study: Study, notes: Notes) -> dict[str, object]:
        return {**super().settings(spec, study, notes), **_budget(study, notes)}


class ExactOT(Route):
    """``ot``: exact OT on the budgeted test rows, in the ground space of the training rows' unit vectors."""

    budgeted = True

    def distances(self, spec: Method, run: Split, notes: Notes) -> tuple[np.ndarray, np.ndarray]:
        rows = run.test[run.scored(spec.name)]
        notes.setdefault("test_rows", []).append(int(rows.size))
        placed, V = run.vectors
        ref = run.reference
        H = [histograms(run.X[r], run.names, ref) for r in (rows, run.train)]
        return exact_ot(H[0], H[1], ground_of(placed, V, ref.leaf_names)), rows

    def settings(self, spec: Method, study: Study, notes: Notes) -> dict[str, object]:
        return _budget(study, notes)


@cache
def route_of(family: str) -> Route:
    """The :class:`Route` the registry names for ``family`` (:attr:`._methods.Family.route`)."""
    module, name = FAMILIES[family].route.split(":")
    route = getattr(importlib.import_module(module), name)()
    if not isinstance(route, Route):
        raise TypeError(f"the family {family!r}'s route {FAMILIES[family].route} is not a Route")
    return route


def method_distances(name: str, run: Split, notes: Notes) -> tuple[np.ndarray, np.ndarray]:
    """Distances (scored test rows x training rows) of the method ``name`` on ``run``, by its family's route."""
    spec = METHODS[name]
    return route_of(spec.family).distances(spec, run, notes)
