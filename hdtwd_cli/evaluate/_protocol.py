r"""kNN evaluation protocol (paper App. C; docs/method.md section 5).

Repeated random train/test splits (70/30 by default, stratified when every class has at least two
members); the feature tree is learned from the TRAINING rows only and the test rows are mapped
onto it; a k-nearest-neighbour classifier on precomputed distances is scored for every k; the
report gives, per method, the k with the best mean accuracy over splits and that mean +- std.

kNN rule (deterministic)
    Neighbours are ordered by (distance, training-row index). The predicted class has the most
    votes among the k nearest; a tie between classes goes to the tied class whose nearest member
    comes first in that order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import product

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import DEFAULT_K, OT_BUDGET
from hdtwd_cli.evaluate._baselines import PCA_COMPONENTS, baseline_distances, pca_representation
from hdtwd_cli.evaluate._competitors import competitor_trees, feature_vectors, reference_tree
from hdtwd_cli.evaluate._exact_ot import (
    OverBudget,
    exact_ot,
    ground_of,
    histograms,
    scored_rows,
    supports,
)
from hdtwd_cli.evaluate._flowtree import flowtree_distances
from hdtwd_cli.evaluate._joint import joint_hierarchy, joint_report
from hdtwd_cli.evaluate._methods import COMPETITOR_FAMILIES, METHODS
from hdtwd_cli.evaluate._weighted import FIT_PAIRS, FitPairs, fit_pairs, fitted_trees
from hdtwd_cli.tree._denoise import is_count_data
from hdtwd_cli.tree._learn import Prepared, learn_trees, prepare
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._distance import query_distances
from hdtwd_cli.twd._histograms import check_histograms, tree_histograms

__all__ = [
    "DEFAULT_K",
    "PCA_COMPONENTS",
    "stratified_splits",
    "knn_predict",
    "knn_accuracy",
    "baseline_distances",
    "pca_representation",
    "is_count_data",
    "MethodResult",
    "margins",
    "summarise",
    "select_params",
    "evaluate",
]


def stratified_splits(
    labels: np.ndarray, n_splits: int = 5, test_size: float = 0.3, seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random train/test index splits, stratified when every class has at least two members.

    Per class the test count is ``test_size * count`` rounded by largest remainders so that the
    total is ``round(test_size * n)``, and every class keeps at least one training member.
    Split ``s`` draws from ``numpy.random.default_rng([seed, s])``.

    Returns
    -------
    list of (train_idx, test_idx), each sorted
    """
    y = np.asarray(labels)
    n = y.shape[0]
    n_test = int(round(test_size * n))  # test_size is checked at the door (hd.classify: 0 < test_size < 1)
    if n_test < 1 or n_test >= n:
        raise ValueError(f"a test fraction of {test_size} leaves no train or no test rows of {n}")
    classes, y_idx, counts = np.unique(y, return_inverse=True, return_counts=True)
    stratify = bool(np.all(counts >= 2))
    out = []
    for s in range(n_splits):
        rng = np.random.default_rng([seed, s])
        if not stratify:
            perm = rng.permutation(n)
            out.append((np.sort(perm[n_test:]), np.sort(perm[:n_test])))
            continue
        exact = counts * (n_test / n)
        take = np.minimum(np.floor(exact).astype(np.int64), counts - 1)
        rest = n_test - int(take.sum())
        frac = exact - take
        for c in np.lexsort((np.arange(len(classes)), -frac)):
            if rest <= 0:
                break
            if take[c] < counts[c] - 1:
                take[c] += 1
                rest -= 1
        test = []
        for c in range(len(classes)):
            members = np.flatnonzero(y_idx == c)
            test.append(rng.permutation(members)[: take[c]])
        test_idx = np.sort(np.concatenate(test))
        mask = np.ones(n, dtype=bool)
        mask[test_idx] = False
        out.append((np.flatnonzero(mask), test_idx))
    return out


def knn_predict(D: np.ndarray, y_train: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """kNN predictions for every k from a (test x train) distance matrix.

    Parameters
    ----------
    D : ndarray, shape (n_test, n_train)
    y_train : ndarray of int, shape (n_train,)
        Class indices ``0..C-1``.
    ks : sequence of int

    Returns
    -------
    ndarray of int, shape (len(ks), n_test)
    """
    ks = [int(k) for k in ks]
    kmax = max(ks)
    n_test, n_train = D.shape
    if kmax > n_train:
        raise ValueError(f"k = {kmax} exceeds the {n_train} training samples")
    C = int(y_train.max()) + 1
    order = np.argsort(D, axis=1, kind="stable")[:, :kmax]
    nb = y_train[order]  # (n_test, kmax) neighbour classes, nearest first
    onehot = np.zeros((n_test, kmax, C), dtype=np.int32)
    np.put_along_axis(onehot, nb[:, :, None], 1, axis=2)
    votes = np.cumsum(onehot, axis=1)  # votes[:, k-1, c] = members of c among the k nearest
    first = np.full((n_test, C), kmax, dtype=np.int64)
    pos = np.broadcast_to(np.arange(kmax), nb.shape)
    np.minimum.at(first, (np.repeat(np.arange(n_test), kmax), nb.ravel()), pos.ravel())
    out = np.empty((len(ks), n_test), dtype=np.int64)
    for i, k in enumerate(ks):
        key = votes[:, k - 1, :].astype(np.int64) * (kmax + 1) + (kmax - first)
        out[i] = np.argmax(key, axis=1)
    return out


def knn_accuracy(D: np.ndarray, y_train: np.ndarray, y_test: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """Accuracy in percent for every k (labels of any type)."""
    _, codes = np.unique(np.concatenate([np.asarray(y_train), np.asarray(y_test)]), return_inverse=True)
    tr, te = codes[: len(y_train)], codes[len(y_train) :]
    pred = knn_predict(D, tr, ks)
    return 100.0 * (pred == te[None, :]).mean(axis=1)


@dataclass
class MethodResult:
    """Accuracies of one method: ``acc[s, i]`` = split ``s``, ``ks[i]``, in percent.

    ``status``: ``ok``, or ``skipped: <reason>`` for a method that could not run within its budget
    (its ``acc`` then means nothing and the report gives no accuracy).
    """

    name: str
    ks: list[int]
    acc: np.ndarray
    params: dict = field(default_factory=dict)
    status: str = "ok"

    def summary(self) -> dict:
        if self.status != "ok":
            return {"status": self.status, "params": self.params}
        means = self.acc.mean(axis=0)
        best = int(np.argmax(means))
        std = float(self.acc[:, best].std(ddof=1)) if self.acc.shape[0] > 1 else 0.0
        return {
            "best_k": self.ks[best],
            "mean": float(means[best]),
            "std": std,
            "per_k": {str(k): float(v) for k, v in zip(self.ks, means)},
            "per_k_std": {
                str(k): float(v)
                for k, v in zip(
                    self.ks, self.acc.std(axis=0, ddof=1) if self.acc.shape[0] > 1 else np.zeros(len(self.ks))
                )
            },
            "per_split": [float(v) for v in self.acc[:, best]],
            "params": self.params,
            "status": self.status,
        }


def margins(methods: Mapping[str, Mapping]) -> dict[str, float | str]:
    r"""What the learned tree adds: hdtwd's best-k mean minus those of ``star`` and of the best competitor tree.

    ``methods``: the report's per-method summaries (:meth:`MethodResult.summary`). ``over_star`` is
    :math:`\bar a_{\mathrm{hdtwd}} - \bar a_{\mathrm{star}}` in percentage points, each at its own best
    k: the gain of the learned hierarchy over no hierarchy on the SAME histograms (every TWD method
    of a split compares them). ``over_best_competitor_tree`` is the same against the best-scoring
    method of the ``tree`` and ``fitted`` families (``best_competitor_tree`` names it; the first in
    the report's order among equal means). A key is absent when a method it needs did not run (or was
    skipped); the dict is empty without hdtwd.
    """
    ok = {n: r for n, r in methods.items() if r.get("status", "ok") == "ok"}
    if "hdtwd" not in ok:
        return {}
    hd = float(ok["hdtwd"]["mean"])
    out: dict[str, float | str] = {}
    if "star" in ok:
        out["over_star"] = hd - float(ok["star"]["mean"])
    trees = [n for n in ok if n in METHODS and METHODS[n].family in COMPETITOR_FAMILIES]
    if trees:
        best = max(trees, key=lambda n: float(ok[n]["mean"]))  # the first of equal means
        out["best_competitor_tree"] = best
        out["over_best_competitor_tree"] = hd - float(ok[best]["mean"])
    return out


def summarise(results: Sequence[MethodResult], meta: dict) -> dict:
    """The JSON report: ``meta``, ``methods`` (see :meth:`MethodResult.summary`) and, when hdtwd ran beside
    ``star`` or a competitor tree, ``margins`` (:func:`margins`)."""
    out = dict(meta)
    out["methods"] = {r.name: r.summary() for r in results}
    gain = margins(out["methods"])
    if gain:
        out["margins"] = gain
    return out


def _hdtwd_accuracies(
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
    """Learn trees (one eigendecomposition for all K) on ``train``; kNN accuracies on ``test``.

    Every column is a leaf of each tree (features without training mass hang from the root), so
    every test row keeps all its mass. ``prepared``: the first stage of the chain for the rows
    ``X[train]`` and ``base`` (:func:`hdtwd_cli.tree._learn.prepare`), shared with the other trees of
    the split; computed here otherwise.
    """
    params = base.replace(eps=eps, scales=max(scales))
    trees = learn_trees(X[train], names, params, list(scales), embedding=embedding, prepared=prepared)
    out = {}
    for K, tree in trees.items():
        D = _tree_query(tree, X, names, train, test)
        out[K] = knn_accuracy(D, y[train], y[test], ks)
    return out


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
            res = _hdtwd_accuracies(X, names, y, train[itr], train[ite], eps, scales_grid, base, ks, embedding)
            for K in scales_grid:
                accs[K].append(res[K])
            if progress is not None:
                progress(1)
        for K in scales_grid:
            scores[(eps, K)] = np.mean(accs[K], axis=0)
    best = max(product(eps_grid, scales_grid), key=lambda p: (scores[p].max(), -list(scores).index(p)))
    return best[0], best[1], {f"{e:g},{k}": float(v.max()) for (e, k), v in scores.items()}


class _Split:
    """What the methods of one split share, computed when first needed: the chain's first stage of the
    training rows (one :func:`~hdtwd_cli.tree._learn.prepare` for every tree of the split), its unit
    feature vectors, the reference (star) tree whose histograms exact OT compares, the rows exact OT
    scores, the fitted methods' pairs. ``params``: the trees' stages of the joint family (``base`` with
    hdtwd's (eps, K) when they are not a grid)."""

    def __init__(
        self,
        X: np.ndarray | sp.spmatrix,
        names: list[str],
        base: TreeParams,
        embedding: tuple[np.ndarray, list[str]] | None,
        index: int,
        train: np.ndarray,
        test: np.ndarray,
        budget: int,
        seed: int,
        params: TreeParams | None = None,
    ) -> None:
        self.X, self.names, self.base, self.embedding = X, names, base, embedding
        self.index, self.train, self.test, self.budget, self.seed = index, train, test, budget, seed
        self.params = params or base  # the trees' stages of the joint family: hdtwd's without a grid
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
        """Positions (in the test rows) exact OT and flowtree score: :func:`_exact_ot.scored_rows` of the
        histograms' supports, seed ``[seed, split, 26]``; :class:`OverBudget` names ``method``."""
        if self._supports is None:
            ref = self.reference
            self._supports = (
                supports(self.X[self.test], self.names, ref),
                supports(self.X[self.train], self.names, ref),
            )
        s_test, s_train = self._supports
        return scored_rows(s_test, s_train, budget=self.budget, seed=[self.seed, self.index, 26], method=method)

    def fit(self) -> FitPairs:
        """The fitted methods' pairs and their exact costs (:func:`_weighted.fit_pairs`), once per split."""
        if self._fit is None:
            try:
                self._fit = fit_pairs(
                    self.X[self.train],
                    self.names,
                    self.prepared,
                    self.base,
                    split=self.index,
                    budget=self.budget,
                    vectors=self.vectors,
                )
            except OverBudget as e:
                self._fit = e
        if isinstance(self._fit, OverBudget):
            raise self._fit
        return self._fit


def _tree_query(
    tree: Tree, X: np.ndarray | sp.spmatrix, names: list[str], train: np.ndarray, test: np.ndarray
) -> np.ndarray:
    """The TWD on ``tree`` between the test rows and the training rows (test x train)."""
    on = [tree_histograms(X[rows], names, tree, normalised=False) for rows in (train, test)]
    return query_distances(tree, on[0], on[1])


def _tree_distances(trees: list[Tree], run: _Split, test: np.ndarray) -> np.ndarray:
    """The mean TWD (test x train) over ``trees`` (one tree: its TWD)."""
    X, names, train = run.X, run.names, run.train
    total = sum(_tree_query(t, X, names, train, test) for t in trees)
    return total / len(trees)  # type: ignore[return-value]


def _scored(name: str, run: _Split, notes: dict[str, list]) -> tuple[np.ndarray, np.ndarray]:
    """Distances (scored test rows x training rows) of the method ``name`` (not hdtwd) and the test rows scored.

    The route is the method's family (:data:`._methods.FAMILIES`); ``notes`` collects what the report's
    ``params`` give per split. Raises :class:`OverBudget` for a method that does not fit its budget.
    """
    spec = METHODS[name]
    X, names, train, test, s = run.X, run.names, run.train, run.test, run.index
    if spec.family == "baseline":
        return baseline_distances(name, X[test], X[train]), test
    if spec.family == "learner":  # hdtwd's other learner, from the same prepared stage: the same histograms
        params = run.base.replace(learner=spec.learner)
        tree = learn_trees(X[train], names, params, [params.scales], prepared=run.prepared)[params.scales]
        return _tree_distances([tree], run, test), test
    if spec.family in ("star", "tree"):  # a tree of the same features, the same histograms
        star = spec.shape is not None and spec.shape.builder == "star"
        trees = competitor_trees(name, run.prepared, run.base, split=s, vectors=None if star else run.vectors)
        return _tree_distances(trees, run, test), test
    if spec.family == "fitted":
        trees, used = fitted_trees(
            name, X[train], names, run.prepared, run.base, split=s, fit=run.fit(), vectors=run.vectors
        )
        notes.setdefault("pairs", []).append(used)
        notes.setdefault("rho", []).append([t.metadata["ridge"] for t in trees])
        return _tree_distances(trees, run, test), test
    if spec.family == "joint":  # the final features' tree of the joint hierarchies, its map and Haar filter
        J = joint_hierarchy(name, X, names, train, test, run.params, prepared=run.prepared, embedding=run.embedding)
        den = J.features_tree.denoiser
        notes.setdefault("rounds", []).append(len(J.rounds))
        notes.setdefault("converged", []).append(bool(J.converged))
        notes.setdefault("denoised_rank", []).append(0 if den is None else den.rank)
        return _tree_distances([J.features_tree], run, test), test
    rows = test[run.scored(name)]
    notes.setdefault("test_rows", []).append(int(rows.size))
    placed, V = run.vectors
    if spec.family == "flow":  # the quadtree's flow on exact OT's test rows, costed in its ground space
        (tree,) = competitor_trees(name, run.prepared, run.base, split=s, vectors=run.vectors)
        leaf_vectors = ground_of(placed, V, tree.leaf_names)
        H = [histograms(X[r], names, tree) for r in (rows, train)]
        return flowtree_distances(H[0], H[1], tree.parent, leaf_vectors), rows
    if spec.family == "ot":  # exact OT on the budgeted test rows, ground space of the training rows
        ref = run.reference
        return exact_ot(
            histograms(X[rows], names, ref), histograms(X[train], names, ref), ground_of(placed, V, ref.leaf_names)
        ), rows
    raise ValueError(f"unknown method {name!r}")


def evaluate(
    X: np.ndarray | sp.spmatrix,
    names: list[str],
    labels: np.ndarray,
    methods: Sequence[str],
    eps_grid: Sequence[float],
    scales_grid: Sequence[int],
    base: TreeParams,
    ks: Sequence[int] = DEFAULT_K,
    n_splits: int = 5,
    test_size: float = 0.3,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    embedding: tuple[np.ndarray, list[str]] | None = None,
    ot_budget: int = OT_BUDGET,
) -> list[MethodResult]:
    """Run the protocol for ``methods`` (names of :data:`._methods.METHODS`) on the same splits.

    Per split, the training rows go through the chain's first stage ONCE
    (:func:`hdtwd_cli.tree._learn.prepare`: value scale, denoising where the rule denoises, the
    features' space and weights), and every TWD method of the split reads it: hdtwd's tree
    (:func:`hdtwd_cli.tree._learn.learn_trees` with ``prepared``), ``star`` and the competitors' trees
    (:func:`._competitors.competitor_trees`, :func:`._weighted.fitted_trees`: built from the same
    features' vectors and finished with the same denoiser and weights), ``flowtree`` and ``ot``
    (the same histograms, :func:`._exact_ot.histograms`). So only the tree (or the ground cost)
    differs between them. The baselines compare the values as they are (:mod:`._baselines`).
    ``ot`` and ``flowtree`` score the test rows of :meth:`_Split.scored` (``ot_budget``) with all the
    training rows as neighbours.
    The ``joint`` family learns the joint hierarchies of the training rows (of every row: the transductive
    method) with the split's first stage and hdtwd's (eps, K), the TreeParams' own under a grid
    (:mod:`._joint`), and compares the histograms on the final features' tree (its map, its Haar filter).

    With one (eps, K) the tree of each split uses it; with several, each split chooses by
    :func:`select_params` on its training rows (each inner split prepares its own rows).
    ``embedding`` = (vectors, names): the features' given ambient vectors.

    A method that cannot run within its budget (:class:`._exact_ot.OverBudget`: too few test rows
    for ``ot`` and ``flowtree``, too few pairs for the fitted trees) is returned with ``status``
    ``skipped: <reason>``; the others run.
    """
    # the methods are checked at the door (hd.classify: classify_methods, names and POT)
    _, y = np.unique(np.asarray(labels), return_inverse=True)
    splits = stratified_splits(y, n_splits, test_size, seed)
    check_histograms(X)  # every row needs a histogram: fail here, before any tree is learned
    acc = {m: np.zeros((n_splits, len(ks))) for m in methods}
    notes: dict[str, dict[str, list]] = {m: {} for m in methods}
    skipped: dict[str, str] = {}
    ranks: list[int] = []
    grid = len(eps_grid) * len(scales_grid) > 1
    point = base if grid else base.replace(eps=eps_grid[0], scales=scales_grid[0])
    for s, (train, test) in enumerate(splits):
        run = _Split(X, names, base, embedding, s, train, test, ot_budget, seed, point)
        for name in methods:
            if name == "hdtwd":
                eps, K = eps_grid[0], scales_grid[0]
                scores: dict[str, float] = {}
                if grid:
                    eps, K, scores = select_params(
                        X,
                        names,
                        y,
                        train,
                        eps_grid,
                        scales_grid,
                        base,
                        ks,
                        test_size=test_size,
                        seed=seed + 1000 + s,
                        progress=progress,
                        embedding=embedding,
                    )
                acc[name][s] = _hdtwd_accuracies(
                    X, names, y, train, test, eps, [K], base, ks, embedding, prepared=run.prepared
                )[K]
                choice = {"split": s, "eps": eps, "scales": K, **({"inner_scores": scores} if grid else {})}
                notes[name].setdefault("choices", []).append(choice)
            elif name not in skipped:
                try:
                    D, rows = _scored(name, run, notes[name])
                    acc[name][s] = knn_accuracy(D, y[train], y[rows], ks)
                except OverBudget as e:
                    skipped[name] = f"skipped: {e}"
            if progress is not None:
                progress(1)
        if run.denoised_rank is not None:
            ranks.append(run.denoised_rank)
    return [
        MethodResult(
            name,
            list(ks),
            acc[name],
            _params(name, base, embedding, notes[name], ranks, eps_grid, scales_grid, ot_budget, splits),
            skipped.get(name, "ok"),
        )
        for name in methods
    ]


def _params(
    name: str,
    base: TreeParams,
    embedding: tuple[np.ndarray, list[str]] | None,
    notes: dict[str, list],
    ranks: list[int],
    eps_grid: Sequence[float],
    scales_grid: Sequence[int],
    budget: int,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
) -> dict[str, object]:
    """The report's ``params`` of ``name``: what it compares (:attr:`._methods.Method.input`), then its
    family's settings and what each split recorded (``notes``)."""
    spec = METHODS[name]
    out: dict[str, object] = {"on": spec.input}
    if spec.family == "baseline":
        return out
    out.update(
        {
            "feature_space": "embedding" if embedding is not None else base.feature_space,
            "weighting": base.weighting,
            "denoise": base.denoise,
            "denoised_rank": ranks,  # per split: the rank of the histograms' denoiser (0: off)
        }
    )
    if spec.family == "hdtwd":
        grid = len(eps_grid) * len(scales_grid) > 1
        out.update(
            {
                "eps": list(eps_grid) if grid else eps_grid[0],
                "scales": list(scales_grid) if grid else scales_grid[0],
                "metric": base.metric,
                "linkage": base.linkage,
                "edge_weights": base.edge_weights,
                "bandwidth": base.bandwidth,
                "leaf_length": base.leaf_length,
                "selection": "inner 3-split CV on training rows" if grid else "fixed",
                "choices": notes.get("choices", []),
            }
        )
    elif spec.family in ("tree", "fitted", "flow"):
        out["seed"] = base.seed
    elif spec.family == "learner":
        out.update({"learner": spec.learner, "leaf_length": base.leaf_length})
    elif spec.family == "joint":
        grid = len(eps_grid) * len(scales_grid) > 1
        point = base if grid else base.replace(eps=eps_grid[0], scales=scales_grid[0])
        out.update(joint_report(name, point, notes))
    if spec.family == "fitted":
        what = "merge heights" if spec.fit == "heights" else "edge weights"
        out.update(
            {
                "fit": f"least squares of the {what} to exact OT (POT) on up to {FIT_PAIRS} training pairs per split, "
                ">= 0, pulled towards the unfitted tree's scaled lengths by rho (chosen on held-out pairs)",
                "pairs": notes.get("pairs", []),
                "rho": notes.get("rho", []),
                "slices": spec.shape.count if spec.shape is not None else 1,
            }
        )
    if spec.family in ("flow", "ot"):
        out.update(
            {
                "budget": int(budget),
                "test_rows": notes.get("test_rows", []),
                "test_rows_of": [int(t.size) for _, t in splits],
            }
        )
    return out
