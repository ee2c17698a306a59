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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import product

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import BASELINES, DEFAULT_K, FITTED_METHODS, FLOW_METHODS, OT_METHODS, TREE_METHODS
from hdtwd_cli.evaluate._competitors import competitor_trees, feature_vectors, trees_in
from hdtwd_cli.evaluate._exact_ot import (
    OT_BUDGET,
    OT_MIN_TEST_ROWS,
    budget_rows,
    exact_ot,
    ground_of,
    ground_vectors,
    ot_histograms,
    require_pot,
)
from hdtwd_cli.evaluate._flowtree import flowtree_distances
from hdtwd_cli.evaluate._weighted import FIT_PAIRS, SLICES, FitPairs, fit_pairs, fitted_trees
from hdtwd_cli.tree._denoise import is_count_data, log_cp10k, principal_axes
from hdtwd_cli.tree._features import idf_weights, weight_features
from hdtwd_cli.tree._learn import learn_trees
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.twd._distance import (
    SPARSE_KERNEL_DENSITY,
    align_to_tree,
    check_histograms,
    normalize_rows,
    query_distances,
)
from hdtwd_cli.twd._kernels import l1_distances, l1_distances_sparse

__all__ = [
    "DEFAULT_K",
    "stratified_splits",
    "knn_predict",
    "knn_accuracy",
    "baseline_distances",
    "pca_representation",
    "is_count_data",
    "BASELINES",
    "MethodResult",
    "summarise",
    "select_params",
    "ot_test_rows",
    "evaluate",
]

BASELINE_INPUT = {
    "cosine": "row-normalised histograms",
    "euclidean": "row-normalised histograms",
    "l1": "row-normalised histograms",
    "tfidf-l1": "tf-idf (idf from the training rows), rows L1-normalised",
    "tfidf-cosine": "tf-idf (idf from the training rows), rows L1-normalised",
    "pca": "50 principal components fitted on the training rows (log1p counts-per-10k for counts)",
}
#: What each competitor's tree is built from (:mod:`._competitors`).
TREE_INPUT = {
    "quadtree": "Indyk & Thaper's randomly shifted quadtree of the unit feature vectors (cell diameters as edges)",
    "mst": "Euclidean minimum spanning tree of the unit feature vectors",
    "cluster-tree": "hierarchical k-means tree (Le et al. 2019) of the unit feature vectors, one fixed seed",
    "tswd-1": "tree-sliced: mean TWD over 1 random hierarchical k-means tree",
    "tswd-5": "tree-sliced: mean TWD over 5 random hierarchical k-means trees",
    "tswd-10": "tree-sliced: mean TWD over 10 random hierarchical k-means trees",
    "ultrafit": "the ultrametric closest to the unit feature vectors' Euclidean distances (Chierchia & Perret 2019)",
    "treerep": "TreeRep's tree (Steiner nodes) of the unit feature vectors' distances (Sonthalia & Gilbert 2020)",
    "hhc": "hyperbolic hierarchical clustering of the unit feature vectors' cosine similarities (Chami et al. 2020)",
    "ghhc": "gradient-based hyperbolic hierarchical clustering of the unit feature vectors (Monath et al. 2019)",
    "wqtwd": "the quadtree, edge weights fitted to exact OT (Yamada et al. 2022)",
    "wctwd": "the hierarchical k-means tree, edge weights fitted to exact OT (Yamada et al. 2022)",
    "swqtwd": "sliced: mean TWD over 5 quadtrees, each with weights fitted to exact OT",
    "swctwd": "sliced: mean TWD over 5 hierarchical k-means trees, each with weights fitted to exact OT",
    "ultratree": "UltraFit's tree, its merge heights fitted to exact OT as an ultrametric (Chen et al. 2024)",
}
#: Principal components of the ``pca`` baseline (scanpy's default ``n_comps``).
PCA_COMPONENTS = 50


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
    if not 0 < test_size < 1:
        raise ValueError("test_size must be between 0 and 1")
    n_test = int(round(test_size * n))
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


def _dense(X: np.ndarray | sp.spmatrix) -> np.ndarray:
    return X.toarray() if sp.issparse(X) else np.asarray(X)  # type: ignore[union-attr]


def pca_representation(
    X_test: np.ndarray | sp.spmatrix, X_train: np.ndarray | sp.spmatrix, n_components: int = PCA_COMPONENTS
) -> tuple[np.ndarray, np.ndarray]:
    r"""Scanpy's default representation: principal components fitted on the TRAINING rows.

    Counts (every value whole) become :math:`\log(1 + 10^4 X_{ij} / \sum_j X_{ij})` first; values
    already on another scale are used as they are. The training rows are centred by their mean
    and the leading ``n_components`` principal axes :math:`V` come from
    :func:`hdtwd_cli.tree._denoise.principal_axes`; both sets of rows are projected, :math:`Z = (X - \mu) V`.
    Returns ``(Z_test, Z_train)``.
    """
    if is_count_data(X_train) and is_count_data(X_test):
        X_train, X_test = (log_cp10k(A) for A in (X_train, X_test))
    A = _dense(X_train).astype(np.float64)
    B = _dense(X_test).astype(np.float64)
    mu = A.mean(axis=0)
    A -= mu
    B -= mu
    V, _ = principal_axes(A, int(min(n_components, min(A.shape) - 1)))
    return B @ V, A @ V


def _gram_and_norms(
    A: np.ndarray | sp.spmatrix, B: np.ndarray | sp.spmatrix
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A B^T`` (dense) and the rows' Euclidean norms, by sparse products when the rows are sparse."""

    def norms(M: np.ndarray | sp.spmatrix) -> np.ndarray:
        sq = M.multiply(M).sum(axis=1) if sp.issparse(M) else np.einsum("ij,ij->i", M, M)  # type: ignore[union-attr]
        return np.sqrt(np.asarray(sq).ravel())

    return _dense(A @ B.T), norms(A), norms(B)


def _euclidean(A: np.ndarray | sp.spmatrix, B: np.ndarray | sp.spmatrix) -> np.ndarray:
    G, na, nb = _gram_and_norms(A, B)
    return np.sqrt(np.maximum(na[:, None] ** 2 + nb[None, :] ** 2 - 2 * G, 0))


def baseline_distances(name: str, X_test: np.ndarray | sp.spmatrix, X_train: np.ndarray | sp.spmatrix) -> np.ndarray:
    r"""Distances (test x train) of a baseline method, from the raw values of the two sets of rows.

    ``cosine``, ``euclidean``, ``l1``: on the row-normalised histograms. ``tfidf-l1``,
    ``tfidf-cosine``: on the rows of :math:`X \odot u` with the smoothed idf ``u`` of the TRAINING
    rows (:func:`hdtwd_cli.tree._features.idf_weights`, scikit-learn's ``TfidfTransformer(smooth_idf=True)``),
    L1-normalised. ``pca``: Euclidean distances in the principal components of
    :func:`pca_representation`.
    """
    if name == "pca":
        return _euclidean(*pca_representation(X_test, X_train))
    if name.startswith("tfidf-"):
        u = idf_weights(X_train)
        X_test, X_train = weight_features(X_test, u), weight_features(X_train, u)
        name = name[len("tfidf-") :]
    A, B = normalize_rows(X_test), normalize_rows(X_train)
    sparse = sp.issparse(A) and sp.issparse(B) and B.nnz < SPARSE_KERNEL_DENSITY * B.shape[0] * B.shape[1]  # type: ignore[union-attr]
    if not sparse:
        A, B = _dense(A), _dense(B)
    if name == "l1":
        return l1_distances_sparse(A, B) if sparse else l1_distances(A, B)
    if name == "euclidean":
        return _euclidean(A, B)
    if name == "cosine":
        G, na, nb = _gram_and_norms(A, B)
        return 1.0 - G / np.outer(na, nb)
    raise ValueError(f"unknown baseline {name!r}")


@dataclass
class MethodResult:
    """Accuracies of one method: ``acc[s, i]`` = split ``s``, ``ks[i]``, in percent."""

    name: str
    ks: list[int]
    acc: np.ndarray
    params: dict = field(default_factory=dict)

    def summary(self) -> dict:
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
        }


def summarise(results: Sequence[MethodResult], meta: dict) -> dict:
    """The JSON report: ``meta`` plus ``methods`` (see :meth:`MethodResult.summary`)."""
    out = dict(meta)
    out["methods"] = {r.name: r.summary() for r in results}
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
) -> dict[int, np.ndarray]:
    """Learn trees (one eigendecomposition for all K) on ``train``; kNN accuracies on ``test``.

    Every column is a leaf of each tree (features without training mass hang from the root), so
    every test row keeps all its mass.
    """
    params = base.replace(eps=eps, scales=max(scales))
    trees = learn_trees(X[train], names, params, list(scales), embedding=embedding)
    out = {}
    for K, tree in trees.items():
        Xtr = align_to_tree(X[train], names, tree)
        Xte = align_to_tree(X[test], names, tree)
        D = query_distances(tree, Xtr, Xte)
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


def ot_test_rows(
    X: np.ndarray | sp.spmatrix,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    budget: int = OT_BUDGET,
    seed: int = 0,
    needs_pot: bool = True,
) -> list[np.ndarray]:
    """Positions (in each split's test rows) of the rows exact OT is computed for (:func:`_exact_ot.budget_rows`,
    seed ``[seed, split, 26]``).

    Raises
    ------
    ValueError
        Before any program is solved, when a split gets fewer than :data:`_exact_ot.OT_MIN_TEST_ROWS`
        rows (or fewer than all its test rows, when it has fewer); the message gives the budget needed.
    """
    if needs_pot:  # exact OT; Flowtree scores the same rows without it
        require_pot()
    nnz = np.diff(sp.csr_matrix(X).indptr) if sp.issparse(X) else np.count_nonzero(X, axis=1)
    rows = [budget_rows(nnz[test], nnz[train], budget, [seed, s, 26]) for s, (train, test) in enumerate(splits)]
    need = [min(OT_MIN_TEST_ROWS, t.size) for _, t in splits]
    if any(r.size < k for r, k in zip(rows, need)):
        worst = max(
            int(np.sort(nnz[test])[::-1][:k].sum()) * int(nnz[train].sum()) for (train, test), k in zip(splits, need)
        )
        secs = worst * 1e-7
        when = f"{secs:.0f} CPU-seconds" if secs < 120 else f"{secs / 60:.0f} CPU-minutes"
        raise ValueError(
            f"exact OT ('ot'): a budget of {budget:,} transport variables per split fits only "
            f"{min(r.size for r in rows)} test rows ({min(need)} needed); --ot-budget {worst} fits "
            f"them (about {when} per split)"
        )
    return rows


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
    """Run the protocol for ``methods`` (``hdtwd``, :data:`BASELINES`, the competitors, ``ot``) on the same splits.

    A competitor's tree(s) (:data:`TREE_METHODS`: :func:`_competitors.competitor_trees`;
    :data:`FITTED_METHODS`: :func:`_weighted.fitted_trees`) are built from each split's
    training rows in hdtwd's features' space, seeded per split as documented there. ``ot``
    (:mod:`._exact_ot`) scores the test rows of :func:`ot_test_rows` only (``ot_budget``), with all
    the training rows as neighbours.

    With one (eps, K) the tree of each split uses it; with several, each split chooses by
    :func:`select_params` on its training rows. ``embedding`` = (vectors, names): the features'
    given ambient vectors (:func:`hdtwd_cli.tree._learn.feature_space`).
    """
    _, y = np.unique(np.asarray(labels), return_inverse=True)
    splits = stratified_splits(y, n_splits, test_size, seed)
    check_histograms(X)  # every row needs a histogram: fail here, before any tree is learned
    acc = {m: np.zeros((n_splits, len(ks))) for m in methods}
    choices: list[dict] = []
    grid = len(eps_grid) * len(scales_grid) > 1
    budgeted = set(methods) & set(OT_METHODS + FLOW_METHODS)
    ot_rows = ot_test_rows(X, splits, ot_budget, seed, needs_pot="ot" in methods) if budgeted else []
    pairs_used: dict[str, list[int]] = {}
    fit_ridges: dict[str, list[list[float]]] = {}
    for s, (train, test) in enumerate(splits):
        shared: FitPairs | None = None  # the fitted methods' pairs and exact costs, once per split
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
                acc[name][s] = _hdtwd_accuracies(X, names, y, train, test, eps, [K], base, ks, embedding)[K]
                choices.append({"split": s, "eps": eps, "scales": K, **({"inner_scores": scores} if grid else {})})
            elif name in TREE_METHODS + FITTED_METHODS:  # a competitor's tree of the training rows' features
                if name in TREE_METHODS:
                    trees = competitor_trees(name, X[train], names, base, embedding, split=s)
                else:
                    if shared is None:
                        shared = fit_pairs(X[train], names, base, embedding, split=s, budget=ot_budget)
                    trees, used = fitted_trees(name, X[train], names, base, embedding, split=s, fit=shared)
                    pairs_used.setdefault(name, []).append(used)
                    fit_ridges.setdefault(name, []).append([t.metadata["ridge"] for t in trees])
                D = sum(
                    query_distances(t, align_to_tree(X[train], names, t), align_to_tree(X[test], names, t))
                    for t in trees
                ) / len(trees)
                acc[name][s] = knn_accuracy(D, y[train], y[test], ks)  # type: ignore[arg-type]
            elif name in FLOW_METHODS:  # the quadtree's flow on exact OT's test rows, costed in its ground space
                space, unit = feature_vectors(X[train], names, base, embedding)
                (tree,) = trees_in("quadtree", space, unit, base, split=s)
                V, _ = ground_of(space, unit, names)
                index = {n: i for i, n in enumerate(names)}
                leaves = np.array([index.get(n, -1) for n in tree.leaf_names])
                leaf_vectors = np.where((leaves >= 0)[:, None], V[np.maximum(leaves, 0)], 0.0)
                rows = test[ot_rows[s]]
                hist = [
                    sp.csr_matrix(normalize_rows(align_to_tree(X[r], names, tree, drop_unknown=True)))
                    for r in (rows, train)
                ]
                D = flowtree_distances(hist[0], hist[1], tree.parent, leaf_vectors)
                acc[name][s] = knn_accuracy(D, y[train], y[rows], ks)
            elif name in OT_METHODS:  # exact OT on the budgeted test rows, ground space of the training rows
                V, w = ground_vectors(X[train], names, base, embedding)
                rows = test[ot_rows[s]]
                D = exact_ot(ot_histograms(X[rows], w), ot_histograms(X[train], w), V)
                acc[name][s] = knn_accuracy(D, y[train], y[rows], ks)
            else:
                D = baseline_distances(name, X[test], X[train])
                acc[name][s] = knn_accuracy(D, y[train], y[test], ks)
            if progress is not None:
                progress(1)
    out = []
    for name in methods:
        params: dict[str, object]
        if name == "hdtwd":
            params = {
                "eps": list(eps_grid) if grid else eps_grid[0],
                "scales": list(scales_grid) if grid else scales_grid[0],
                "metric": base.metric,
                "linkage": base.linkage,
                "edge_weights": base.edge_weights,
                "bandwidth": base.bandwidth,
                "feature_space": "embedding" if embedding is not None else base.feature_space,
                "weighting": base.weighting,
                "leaf_length": base.leaf_length,
                "selection": "inner 3-split CV on training rows" if grid else "fixed",
                "choices": choices,
            }
        elif name in FITTED_METHODS:
            params = {
                "tree": TREE_INPUT[name],
                "fit": f"least squares of the {'merge heights' if name == 'ultratree' else 'edge weights'} to exact "
                f"OT (POT) on up to {FIT_PAIRS} training pairs per split, >= 0, pulled towards the unfitted tree's "
                "scaled lengths by rho (chosen on held-out pairs)",
                "pairs": pairs_used.get(name, []),
                "rho": fit_ridges.get(name, []),
                "slices": SLICES if name.startswith("s") else 1,
                "feature_space": "embedding" if embedding is not None else base.feature_space,
                "weighting": base.weighting,
                "seed": base.seed,
            }
        elif name in TREE_METHODS:
            params = {
                "tree": TREE_INPUT[name],
                "feature_space": "embedding" if embedding is not None else base.feature_space,
                "weighting": base.weighting,
                "seed": base.seed,
            }
        elif name in FLOW_METHODS:
            params = {
                "tree": TREE_INPUT["quadtree"] + " (seed + split, as quadtree)",
                "flow": "tree-optimal, greedy bottom-up (leaves in index order); costed by the Euclidean "
                "distance between the unit feature vectors (none: the origin)",
                "feature_space": "embedding" if embedding is not None else base.feature_space,
                "weighting": base.weighting,
                "budget": int(ot_budget),
                "test_rows": [int(r.size) for r in ot_rows],
                "test_rows_of": [int(t.size) for _, t in splits],
            }
        elif name in OT_METHODS:
            params = {
                "ground_cost": "Euclidean distance between the unit feature vectors (none: the origin)",
                "solver": "POT ot.emd2, exact network simplex",
                "feature_space": "embedding" if embedding is not None else base.feature_space,
                "weighting": base.weighting,
                "budget": int(ot_budget),
                "test_rows": [int(r.size) for r in ot_rows],
                "test_rows_of": [int(t.size) for _, t in splits],
            }
        else:
            params = {"on": BASELINE_INPUT[name]}
        out.append(MethodResult(name, list(ks), acc[name], params))
    return out
