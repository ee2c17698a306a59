r"""kNN evaluation protocol (paper App. C; docs/method.md section 5).

Repeated random train/test splits (70/30 by default, stratified when every class has at least two
members); the feature tree is learned from the TRAINING rows only and the test rows are mapped
onto it; a k-nearest-neighbour classifier on precomputed distances is scored for every k; the
report gives, per method, the k with the best mean accuracy over splits and that mean +- std.

The splits and the kNN rule are :mod:`._splits`'; what each method computes on a split and what
the report says of it is its family's route (:mod:`._families`, named by the registry,
:mod:`._methods`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import DEFAULT_K, OT_BUDGET
from hdtwd_cli.evaluate._baselines import PCA_COMPONENTS, baseline_distances, pca_representation
from hdtwd_cli.evaluate._exact_ot import OverBudget
from hdtwd_cli.evaluate._families import Notes, Split, Study, route_of
from hdtwd_cli.evaluate._methods import COMPETITOR_FAMILIES, METHODS
from hdtwd_cli.evaluate._splits import knn_accuracy, stratified_splits
from hdtwd_cli.tree._denoise import is_count_data
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.twd._histograms import check_histograms

__all__ = [
    "DEFAULT_K",
    "PCA_COMPONENTS",
    "baseline_distances",
    "pca_representation",
    "is_count_data",
    "MethodResult",
    "margins",
    "summarise",
    "evaluate",
    "report_params",
]


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
    ``ot`` and ``flowtree`` score the test rows of :meth:`._families.Split.scored` (``ot_budget``) with all the
    training rows as neighbours.
    The ``joint`` family learns the joint hierarchies of the training rows (of every row: the transductive
    method) with the split's first stage and hdtwd's (eps, K), the TreeParams' own under a grid
    (:mod:`._joint`), and compares the histograms on the final features' tree (its map, its Haar filter).

    With one (eps, K) the tree of each split uses it; with several, each split chooses by
    :func:`._families.select_params` on its training rows (each inner split prepares its own rows).
    ``embedding`` = (vectors, names): the features' given ambient vectors.

    A method that cannot run within its budget (:class:`._exact_ot.OverBudget`: too few test rows
    for ``ot`` and ``flowtree``, too few pairs for the fitted trees) is returned with ``status``
    ``skipped: <reason>``; the others run.
    """
    # the methods are checked at the door (hd.classify: chosen_methods, names and POT)
    _, y = np.unique(np.asarray(labels), return_inverse=True)
    splits = stratified_splits(y, n_splits, test_size, seed)
    check_histograms(X)  # every row needs a histogram: fail here, before any tree is learned
    study = Study(
        X,
        names,
        y,
        base,
        splits,
        eps_grid=tuple(eps_grid),
        scales_grid=tuple(scales_grid),
        ks=tuple(ks),
        embedding=embedding,
        test_size=test_size,
        seed=seed,
        budget=ot_budget,
        progress=progress,
    )
    acc = {m: np.zeros((n_splits, len(ks))) for m in methods}
    notes: dict[str, Notes] = {m: {} for m in methods}
    skipped: dict[str, str] = {}
    ranks: list[int] = []
    budgeted = [m for m in methods if route_of(METHODS[m].family).budgeted]
    same: dict[str, np.ndarray] = {}  # the methods that score every test row, on the budgeted rows
    for s, (train, _) in enumerate(splits):
        run = Split(study, s)
        pos = _budgeted_rows(run, budgeted)
        for name in methods:
            if name not in skipped:
                spec = METHODS[name]
                try:
                    D, rows = route_of(spec.family).distances(spec, run, notes[name])
                    acc[name][s] = knn_accuracy(D, y[train], y[rows], ks)
                    if pos is not None and rows is run.test:  # exact OT's rows, from the same distances
                        on = same.setdefault(name, np.zeros((n_splits, len(ks))))
                        on[s] = knn_accuracy(D[pos], y[train], y[run.test[pos]], ks)
                except OverBudget as e:
                    skipped[name] = f"skipped: {e}"
            if progress is not None:
                progress(1)
        if run.denoised_rank is not None:
            ranks.append(run.denoised_rank)
    results = [
        MethodResult(name, list(ks), acc[name], report_params(name, study, notes[name], ranks), skipped.get(name, "ok"))
        for name in methods
    ]
    for r in results:
        if r.name in budgeted and r.status == "ok":
            r.params["same_rows"] = {
                m: {k: v for k, v in MethodResult(m, list(ks), a).summary().items() if k in ("best_k", "mean", "std")}
                for m, a in same.items()
                if m not in skipped
            }
    return results


def _budgeted_rows(run: Split, budgeted: Sequence[str]) -> np.ndarray | None:
    """Positions in the split's test rows that exact OT and flowtree score (:meth:`._families.Split.scored`,
    the same for both), where one of them runs and fits its budget; else ``None``."""
    if not budgeted:
        return None
    try:
        return run.scored(budgeted[0])
    except OverBudget:
        return None


def report_params(name: str, study: Study, notes: Notes, ranks: list[int]) -> dict[str, object]:
    """The report's ``params`` of ``name``: what it compares (:attr:`._methods.Method.input`), then, where its
    family reads the split's prepared stage, that map (``ranks``: each split's denoiser's rank), then its
    family's settings and what each split recorded (``notes``; :meth:`._families.Route.settings`)."""
    spec = METHODS[name]
    route = route_of(spec.family)
    out: dict[str, object] = {"on": spec.input}
    if route.prepared:
        out.update(
            {
                "feature_space": "embedding" if study.embedding is not None else study.base.feature_space,
                "weighting": study.base.weighting,
                "denoise": study.base.denoise,
                "denoised_rank": ranks,  # per split: the rank of the histograms' denoiser (0: off)
            }
        )
    out.update(route.settings(spec, study, notes))
    return out
