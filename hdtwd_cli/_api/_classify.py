"""The paper's kNN-accuracy protocol as a public function: ``classify``, the methods it compares and their trees."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hdtwd_cli._api._common import (
    Matrix,
    checked_histograms,
    checked_matrix,
    checked_names,
    data_errors,
    embedding_pair,
)
from hdtwd_cli._defaults import DEFAULT_K, OT_BUDGET
from hdtwd_cli._version import __version__
from hdtwd_cli.errors import ParameterError
from hdtwd_cli.evaluate._competitors import competitor_trees as _competitor_trees
from hdtwd_cli.evaluate._exact_ot import require_pot
from hdtwd_cli.evaluate._methods import FAMILIES, METHODS
from hdtwd_cli.evaluate._protocol import evaluate, is_count_data, summarise
from hdtwd_cli.tree._features import NEVER_COOCCUR_LIMIT, never_cooccur_fraction
from hdtwd_cli.tree._learn import prepare
from hdtwd_cli.tree._params import TreeParams, apply_transform
from hdtwd_cli.tree._tree import Tree


def classify(
    X: Matrix,
    labels: Sequence[Any] | np.ndarray,
    feature_names: Sequence[str] | None = None,
    *,
    methods: Sequence[str] | None = None,
    k: Sequence[int] = DEFAULT_K,
    splits: int = 5,
    test_size: float = 0.3,
    eps: float | Sequence[float] | None = None,
    scales: int | Sequence[int] | None = None,
    params: TreeParams | None = None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None = None,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    ot_budget: int = OT_BUDGET,
) -> dict[str, Any]:
    """kNN accuracy of the TWD and of baselines on the same train/test splits (paper App. C).

    The tree of each split is learned from its training rows only. With several ``eps`` or
    ``scales`` values, each split chooses by inner cross-validation on its training rows.

    Parameters
    ----------
    labels : sequence, length n_samples
        Class of each sample.
    methods : sequence of str, optional
        Names of :data:`hdtwd_cli.evaluate._methods.METHODS`: ``hdtwd``; ``star`` (the TWD on the star
        tree: the same histograms without a hierarchy); the baselines (``cosine``, ``euclidean``,
        ``l1``, ``tfidf-l1``, ``tfidf-cosine``, ``pca``); the paper's competitor trees, the trees fitted
        to exact OT (need POT), ``flowtree`` and exact OT (``ot``, needs POT); docs/method.md section 12;
        the joint hierarchies (``joint``: Algorithm 2, ``joint-alt``: Algorithm 1, both learned on the
        training rows; ``joint-transductive``: on all rows; section 13). Every TWD method of a split
        compares the same histograms (the training rows' denoiser and weights), so only the tree differs.
        Default: :func:`chosen_methods`.
    k : sequence of int
        The k of the kNN classifier; the report gives each method's best.
    ot_budget : int
        Transport variables per split for ``ot`` and ``flowtree`` (their accuracy is measured on the
        test rows that fit, listed in their ``params``) and for the fitted trees' pairs
        (:func:`hdtwd_cli.evaluate._exact_ot.scored_rows`, :func:`hdtwd_cli.evaluate._weighted.fit_pairs`).

    Returns
    -------
    dict
        ``methods``: per method ``best_k``, ``mean``, ``std``, ``per_k``, ``per_split``, ``params``,
        ``status`` (``ok``; a method that could not run within ``ot_budget`` has only
        ``status: "skipped: <reason>"`` and ``params``, and the others still run); ``margins``
        (hdtwd's best-k mean minus star's and the best competitor tree's, when they ran:
        :func:`hdtwd_cli.evaluate._protocol.margins`); plus the protocol's settings.

    Examples
    --------
    >>> import numpy as np, hdtwd_cli as hd
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.poisson([5] * 6 + [1] * 6, size=(20, 12)), rng.poisson([1] * 6 + [5] * 6, size=(20, 12))])
    >>> report = hd.classify(X, [0] * 20 + [1] * 20, methods=["hdtwd", "l1"], k=[1, 3], splits=2)
    >>> sorted(report["methods"]), report["methods"]["hdtwd"]["mean"] > 90
    (['hdtwd', 'l1'], True)
    """
    base = params or TreeParams()
    Xm = checked_matrix(X)
    names = checked_names(feature_names, Xm.shape[1])
    y = np.asarray(labels)
    if y.shape != (Xm.shape[0],):
        raise ParameterError(f"has {y.size} labels for {Xm.shape[0]} samples", "labels")
    ks = sorted({int(v) for v in k})
    if not ks or ks[0] < 1:
        raise ParameterError("values must be >= 1", "k")
    if not 0 < test_size < 1:
        raise ParameterError("must be between 0 and 1", "test_size")
    if int(splits) != splits or splits < 1:
        raise ParameterError("must be a whole number >= 1", "splits")
    eps_grid = [base.eps] if eps is None else [float(v) for v in np.atleast_1d(eps)]
    scales_grid = [base.scales] if scales is None else [int(v) for v in np.atleast_1d(scales)]
    if min(eps_grid) <= 0:
        raise ParameterError("values must be > 0", "eps")
    if min(scales_grid) < 0:
        raise ParameterError("values must be >= 0", "scales")
    if eps is not None:
        base = base.replace(landmark_eps=None)  # the grid applies to the landmark path too
    chosen = chosen_methods(Xm, methods)
    if ot_budget < 1:
        raise ParameterError("must be a positive number of transport variables", "ot_budget")
    n_train = Xm.shape[0] - int(round(test_size * Xm.shape[0]))
    if ks[-1] > n_train:
        raise ParameterError(f"the largest {{arg}} ({ks[-1]}) exceeds the {n_train} training samples per split", "k")
    vectors = embedding_pair(feature_embedding)
    results = data_errors(
        lambda: evaluate(
            apply_transform(Xm, base.transform),
            names,
            y,
            chosen,
            eps_grid,
            scales_grid,
            base,
            ks,
            splits,
            test_size,
            seed,
            progress=progress,
            embedding=vectors,
            ot_budget=ot_budget,
        )
    )
    return summarise(
        results,
        {
            "n_samples": Xm.shape[0],
            "n_features": Xm.shape[1],
            "n_classes": int(len(np.unique(y))),
            "splits": splits,
            "test_size": test_size,
            "seed": seed,
            "k": ks,
            "hdtwd_version": __version__,
            "transform": base.transform,
        },
    )


def classify_methods(*, family: str | None = None) -> list[str]:
    """The methods :func:`classify` can compare, in the registry's order (that of ``hdtwd classify --methods``'
    help and docs/classify.md's table).

    Parameters
    ----------
    family : str, optional
        Only this family's methods: ``hdtwd``, ``star``, ``baseline`` (distances between the samples' values),
        ``tree`` (the paper's competitor trees, :func:`competitor_trees`), ``fitted`` (competitor trees
        with weights fitted to exact transport), ``flow``, ``ot``, ``joint`` or ``learner``.

    Examples
    --------
    >>> import hdtwd_cli as hd
    >>> hd.classify_methods(family="star")
    ['star']
    """
    if family is not None and family not in FAMILIES:
        raise ParameterError(
            f"must be a family of classify's methods ({', '.join(FAMILIES)}), not {family!r}", "family"
        )
    return [name for name, m in METHODS.items() if family is None or m.family == family]


def competitor_trees(
    X: Matrix,
    feature_names: Sequence[str] | None = None,
    *,
    method: str,
    params: TreeParams | None = None,
) -> list[Tree]:
    r"""The tree(s) of one of the paper's competitor tree methods over the features of ``X``: the trees
    :func:`classify` compares hdtwd's with (``classify_methods(family="tree")``; ``star``, the star tree).

    The same first stage as :func:`learn_tree` with ``params`` (the value scale, the denoising rule, the idf
    weights, the features' space); the method's builder on the placed features' unit vectors in that space;
    each tree finished as hdtwd's is (features without a vector hang from the root), without the leaf term,
    and carrying the same map (denoiser, weights): the TWD on it compares the same histograms as the TWD on
    ``learn_tree(X, feature_names, params=params)``, so only the tree differs. Seeded by ``params.seed``
    (as :func:`classify`'s first split).

    Returns
    -------
    list of Tree
        One tree, or a method's several (``tswd-n``: n trees, whose TWD :func:`classify` averages).
    """
    params = params or TreeParams()
    trees = [name for name, m in METHODS.items() if m.family in ("star", "tree")]  # as built: none fitted
    if method not in trees:
        raise ParameterError(f"must be a tree method ({', '.join(trees)}), not {method!r}", "method")
    Xm, names = checked_histograms(X, feature_names, params.transform)
    return data_errors(lambda: _competitor_trees(method, prepare(Xm, names, params), params))


def chosen_methods(X: Matrix, methods: Sequence[str] | None = None) -> list[str]:
    """The methods :func:`classify` compares: ``methods`` checked against the registry
    (:data:`hdtwd_cli.evaluate._methods.METHODS`), or the default for the data, in registry order: the
    methods whose ``default`` is ``always`` (hdtwd, star, cosine, euclidean, l1); ``counts`` (tf-idf L1
    and cosine) when every value is a whole number; ``cooccur`` (PCA, scanpy's representation) unless
    the features rarely share a sample (pairs weighted by mass), the property that picks the features' space
    (:func:`hdtwd_cli.tree._features.never_cooccur_fraction`): cells' UMI counts get PCA beside tf-idf,
    documents' word counts only tf-idf. A method that needs POT is refused here when POT is missing."""
    if methods:
        chosen = list(methods)
    else:
        counts = is_count_data(X)
        cooccur = not counts or never_cooccur_fraction(X) <= NEVER_COOCCUR_LIMIT
        wanted = {"always": True, "counts": counts, "cooccur": cooccur, "never": False}
        chosen = [name for name, m in METHODS.items() if wanted[m.default]]
    unknown = [m for m in chosen if m not in METHODS]
    if unknown:
        raise ParameterError(
            f"holds unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}",
            "methods",
        )
    needs_pot = [m for m in chosen if METHODS[m].needs_pot]
    if needs_pot:
        try:
            require_pot()
        except ImportError as e:
            raise ParameterError(f"holds {needs_pot[0]}: {e}", "methods") from None
    return chosen
