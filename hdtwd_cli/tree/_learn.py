r"""The features' tree learned end to end: features' space -> diffusion -> embedding -> HD-LCA tree.

:func:`learn_trees` composes the stages of the paper's Sec. 3 (docs/method.md sections 1-3, 6-7):
the features' ambient space and weights (:mod:`._space`), the diffusion operator (Eq. 1;
:mod:`._diffusion`, or landmarks, :mod:`._landmarks`), the multi-scale hyperbolic embedding
(:mod:`._hyperbolic`) and the HD-LCA binary tree (Alg. 1; :mod:`._hd_lca`), then the departures
of section 7 (features that cannot be placed hang from the root, the leaf term). It is the one
place the chain is composed: :func:`prepare` (value scale and denoising, :mod:`._values`; the
features' space) -> :func:`learn_trees` (operator, embedding or HD-LCA values, tree) ->
:meth:`Prepared.finish`; ``embed`` / ``decode_tree`` run :func:`embed_prepared` and
:func:`decode_from_embedding` with the same :class:`Prepared`. Memory estimates: :mod:`._budget`.
Pure functions over arrays: no file I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.blas import serial_blas
from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli.errors import InputError
from hdtwd_cli.tree._average import average_linkage_from_distances, average_linkage_tree
from hdtwd_cli.tree._budget import check_tree_memory
from hdtwd_cli.tree._denoise import Denoiser
from hdtwd_cli.tree._diffusion import DiffusionOperator, diffusion_operator, operator_from_distances
from hdtwd_cli.tree._features import document_frequency, idf_weights
from hdtwd_cli.tree._hd_lca import (
    decode_tree,
    hd_lca_product,
    hd_lca_products,
    lca_tree,
    square_linkage_fits,
)
from hdtwd_cli.tree._hyperbolic import (
    HyperbolicEmbedding,
    hyperbolic_embedding,
    scale_heights,
)
from hdtwd_cli.tree._landmarks import (
    KMEANS_ITERATIONS,
    MIN_AFFINITY,
    LandmarkOperator,
    effective_landmarks,
    landmark_operator,
    landmark_operator_from_distances,
)
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._space import FeatureSpace, auto_leaf_length, feature_space
from hdtwd_cli.tree._tree import Tree, attach_at_root, lengthen_leaves, mean_leaf_depth
from hdtwd_cli.tree._values import denoised_rows, histogram_map


def feature_operator(
    X: np.ndarray | sp.spmatrix,
    params: TreeParams,
    reporter: Reporter | None = None,
) -> DiffusionOperator | LandmarkOperator:
    """The feature diffusion operator of ``X``'s columns, in spectral form (Eq. 1).

    With ``params.landmarks`` (or automatically above ``AUTO_LANDMARKS_ABOVE`` features) the
    landmark operator (:mod:`._landmarks`), else the exact one (:func:`_diffusion.diffusion_operator`).
    """
    rep = reporter or Reporter(quiet=True)
    m = X.shape[1]
    if m < 2:
        raise ValueError("at least two non-zero features are needed to learn a tree")
    nl = effective_landmarks(params.landmarks, m)
    op: DiffusionOperator | LandmarkOperator
    if nl:
        with rep.stage(
            f"landmark diffusion ({m} features, {nl} {params.landmark_method} landmarks)", KMEANS_ITERATIONS + 2
        ) as adv:
            op = landmark_operator(
                X,
                nl,
                eps=params.kernel_eps(True),
                metric=params.metric,  # type: ignore[arg-type]
                bandwidth=params.bandwidth,  # type: ignore[arg-type]
                knn=params.knn,
                method=params.landmark_method,  # type: ignore[arg-type]
                seed=params.seed,
                progress=adv,
            )
    else:
        with rep.stage(f"diffusion operator ({m} features)", None):
            op = diffusion_operator(
                X,
                eps=params.eps,
                metric=params.metric,  # type: ignore[arg-type]
                bandwidth=params.bandwidth,  # type: ignore[arg-type]
                knn=params.knn,
            )
    c = params.kernel_eps(bool(nl))
    if params.bandwidth == "knn":
        kernel = (
            f"{params.metric} distances, self-tuning kernel exp(-d^2 / (c s_j s_j')), c = {c:g}, s_j = distance to "
            f"the k-th nearest {'landmark' if nl else 'feature'}, k = {params.knn} (c x median s_j^2 = {op.eps:.6g}; "
            f"median distance {op.sigma:.6g})"
        )
    else:
        kernel = (
            f"{params.metric} distances, kernel exp(-d^2 / eps), eps = {op.eps:.6g} = c {c:g} x median distance "
            f"{op.sigma:.6g}"
        )
    rep.info(f"{kernel}; clipped spectral mass {op.clipped_spectral_mass:.3g}")
    return op


def _placed(names: list[str], op: DiffusionOperator | LandmarkOperator) -> tuple[list[str], list[str]]:
    """``names`` split into the items the operator placed and those it could not
    (:attr:`LandmarkOperator.unplaced`: affinity to every landmark underflows), each in order."""
    lost = getattr(op, "unplaced", None)
    if lost is None or not len(lost):
        return list(names), []
    drop = set(int(j) for j in lost)
    return [n for j, n in enumerate(names) if j not in drop], [n for j, n in enumerate(names) if j in drop]


def place(space: FeatureSpace, op: DiffusionOperator | LandmarkOperator, reporter: Reporter | None = None) -> None:
    """Move the features the operator could not place (:attr:`LandmarkOperator.unplaced`) to
    ``space.unplaced``, in place: they hang from the root like every unplaced feature."""
    space.names, moved = _placed(space.names, op)
    if not moved:
        return
    space.unplaced = space.unplaced + moved
    (reporter or Reporter(quiet=True)).note(
        f"{len(moved)} feature(s) far from every landmark (affinity below {MIN_AFFINITY:g}) hang from the root "
        f"(e.g. {', '.join(moved[:3])})"
    )


@serial_blas()  # the tree's stages: the same bits at any BLAS thread count (_blas)
def embed(
    X: np.ndarray | sp.spmatrix,
    params: TreeParams,
    reporter: Reporter | None = None,
) -> tuple[DiffusionOperator | LandmarkOperator, HyperbolicEmbedding]:
    """Diffusion operator (:func:`feature_operator`) and multi-scale hyperbolic embedding of ``X``'s columns.

    With landmarks ``psi`` has one column per landmark.
    """
    rep = reporter or Reporter(quiet=True)
    op = feature_operator(X, params, rep)
    with rep.stage("hyperbolic embedding (scales)", params.scales + 1) as adv:
        emb = hyperbolic_embedding(op, params.scales, progress=adv)
    rep.info(f"negative density mass per scale: {np.array2string(emb.negative_mass, precision=3)}")
    return op, emb


def _tree_metadata(op: DiffusionOperator | LandmarkOperator, params: TreeParams, unplaced: int) -> dict[str, Any]:
    md = params.as_dict()
    md.update(
        {
            "eps_used": op.eps,
            "sigma": op.sigma,
            "unplaced_features": unplaced,
            "n_landmarks": op.n_landmarks if isinstance(op, LandmarkOperator) else 0,
        }
    )
    return md


def finish_tree(tree: Tree, space: FeatureSpace, params: TreeParams) -> Tree:
    r"""Hang the unplaced features from the root, lengthen the leaves, attach the feature weights.

    With :math:`\bar h` the mean root-to-leaf depth of the decoded tree: every unplaced feature
    becomes a leaf on an edge of length :math:`\bar h` from the root, then every leaf edge is
    lengthened by :math:`\lambda \bar h` (``params.leaf_length``), adding
    :math:`\lambda \bar h \lVert x - x'\rVert_1` to every TWD (docs/method.md section 7).
    """
    h = mean_leaf_depth(tree)
    w = space.weights
    lam = auto_leaf_length(space.shared, params.learner) if params.leaf_length is None else float(params.leaf_length)
    tree = attach_at_root(tree, space.unplaced, h, None if w is None else np.array([w[n] for n in space.unplaced]))
    tree = lengthen_leaves(tree, lam * h)
    if w is not None:
        tree.feature_weights = np.array([w[n] for n in tree.leaf_names], dtype=np.float64)
    tree.metadata.update(
        {
            "mean_leaf_depth": h,
            "feature_source": space.source,
            "leaf_length": lam,
            "leaf_length_rule": "auto" if params.leaf_length is None else "fixed",
            "latent_energy": space.shared,
            "never_cooccur": space.never_cooccur,
        }
    )
    return tree


def extend_tree(tree: Tree, names: list[str]) -> Tree:
    r"""Hang the features of ``names`` that are not leaves of ``tree`` from its root (``--unseen root``).

    The same rule as :func:`finish_tree` for unplaced features, applied to a stored tree: edge
    length :math:`\bar h + \lambda\bar h` with :math:`\bar h` the tree's recorded mean leaf depth
    (recomputed from the tree when it was not recorded) and :math:`\lambda` its ``leaf_length``;
    a weighted tree gives the new features its largest weight (that of its rarest feature).
    """
    known = set(tree.leaf_names)
    new = [n for n in dict.fromkeys(names) if n not in known]
    if not new:
        return tree
    lam = float(tree.metadata.get("leaf_length", 0.0) or 0.0)
    h = float(tree.metadata.get("mean_leaf_depth", 0.0) or 0.0)
    if not h > 0:
        h = mean_leaf_depth(tree) / (1.0 + lam) if lam > 0 else mean_leaf_depth(tree)
    w = None if tree.feature_weights is None else np.full(len(new), float(tree.feature_weights.max()))
    out = attach_at_root(tree, new, h * (1.0 + lam), w)
    out.metadata["unseen_at_root"] = len(new)
    return out


@dataclass
class Prepared:
    """The chain's first stage: the features' space of the rows a tree is learned from, and the map
    from a sample's values to its histogram (denoiser, feature weights) that every tree of these
    rows applies.

    Attributes
    ----------
    space : FeatureSpace
        The features' vectors (:attr:`FeatureSpace.matrix`), placed and unplaced features, weights.
    columns : list of str
        The input's features in column order: the rows of :attr:`denoiser`.
    denoiser : Denoiser or None
        The map every sample goes through before it becomes a histogram, one entry per column
        (:func:`_values.histogram_map`): the rank-``r`` map fitted on the rows the tree was learned from
        (:mod:`._values`), or ``None``: off, or dense values compared by their own values.
    rule : str
        Why denoising is on or off (recorded in every tree's metadata as ``denoise_rule``).
    """

    space: FeatureSpace
    columns: list[str]
    denoiser: Denoiser | None
    rule: str

    def finish(self, tree: Tree, params: TreeParams) -> Tree:
        """The finished tree (:func:`finish_tree`) with the map in its leaf order and what was chosen, and why."""
        tree = finish_tree(tree, self.space, params)
        if self.denoiser is not None:  # the map, in the tree's leaf order, applies to every sample it compares
            tree.denoiser = self.denoiser_for(tree.leaf_names)
            tree.metadata["denoise_log_counts"] = self.denoiser.log_counts
        tree.metadata.update({"denoise": 0 if self.denoiser is None else self.denoiser.rank, "denoise_rule": self.rule})
        return tree

    def denoiser_for(self, names: list[str]) -> Denoiser | None:
        """The map with one entry per feature of ``names`` (a tree's leaves, a file's features), in that order."""
        if self.denoiser is None:
            return None
        column = {n: j for j, n in enumerate(self.columns)}
        return self.denoiser.reordered(np.array([column[n] for n in names], dtype=np.int64))

    def handed_on(self) -> tuple[np.ndarray | sp.spmatrix, Prepared]:
        """The features' vectors, and a copy of this stage whose space holds none (the operator has
        them): the stages after it move features between placed and unplaced in the copy only, so one
        :class:`Prepared` can serve several trees of the same rows."""
        if self.space.matrix is None:
            raise ValueError("the features' vectors of this stage were handed on already")
        space = dataclasses.replace(self.space, matrix=None, names=list(self.space.names))
        space.unplaced = list(self.space.unplaced)
        return self.space.matrix, dataclasses.replace(self, space=space)


def prepare(
    X: np.ndarray | sp.spmatrix,
    feature_names: list[str],
    params: TreeParams,
    *,
    embedding: tuple[np.ndarray, list[str]] | None = None,
    reporter: Reporter | None = None,
    path: str | None = None,
    available: int | None = None,
) -> Prepared:
    """The value scale and denoising (:func:`_values.denoised_rows`), then the features' space of those rows
    (:func:`feature_space`; idf weights from the samples' own values): the first stage of every tree.

    Raises :class:`~hdtwd_cli.errors.InputError` when fewer than two features can be placed.
    """
    rep = reporter or Reporter(quiet=True)
    streamed = embedding is None and not effective_landmarks(params.landmarks, X.shape[1])
    df = document_frequency(X)  # once: the denoising rule, the idf weights and (not denoised) the space read it
    rows, den, why = denoised_rows(
        X,
        params,
        streamed_gram=streamed,
        embedding=embedding is not None,
        reporter=rep,
        path=path,
        available=available,
        df=df,
    )
    with rep.stage("feature space" + (" (latent SVD)" if params.feature_space == "svd" and embedding is None else "")):
        space = feature_space(rows, feature_names, params, embedding, df=None if den is not None else df)
    if den is not None and space.weights is not None:  # idf from the samples' own (sparse) values
        space.weights = dict(zip(feature_names, idf_weights(X, df).tolist()))
    if len(space.names) < 2:
        raise InputError(
            "fewer than two features can be placed (non-zero columns, or vectors in the "
            "feature embedding): no tree to learn",
            path,
        )
    if space.unplaced:
        rep.note(
            f"{len(space.unplaced)} feature(s) without a vector hang from the root "
            f"(e.g. {', '.join(space.unplaced[:3])})"
        )
    hist, why = histogram_map(X, den, params, why)  # the tree's rows above; the samples' map from here on
    if hist is not den:
        rep.info(f"histograms: {why}")
    return Prepared(space, list(feature_names), hist, why)


def learn_tree(
    X: np.ndarray | sp.spmatrix,
    feature_names: list[str],
    params: TreeParams,
    reporter: Reporter | None = None,
    path: str | None = None,
    available: int | None = None,
    embedding: tuple[np.ndarray, list[str]] | None = None,
) -> Tree:
    """The whole tree-learning chain: feature space, embed, decode (Alg. 1), finish.

    Every column of ``X`` becomes a leaf: features the feature space cannot place (no mass in
    ``X``, no vector in ``embedding``) hang from the root (:func:`finish_tree`).
    With ``available`` (bytes), the memory estimate is checked first (:func:`check_tree_memory`).
    """
    return learn_trees(X, feature_names, params, [params.scales], reporter, path, available, embedding)[params.scales]


@serial_blas()  # its stages are, and so is what joins them
def learn_trees(
    X: np.ndarray | sp.spmatrix,
    feature_names: list[str],
    params: TreeParams,
    scales: list[int] | tuple[int, ...],
    reporter: Reporter | None = None,
    path: str | None = None,
    available: int | None = None,
    embedding: tuple[np.ndarray, list[str]] | None = None,
    prepared: Prepared | None = None,
) -> dict[int, Tree]:
    """Trees for several K from one eigendecomposition (the scales 0..K are shared).

    The one composition of the chain: :func:`prepare` (or ``prepared``, its result for these rows
    and ``params``, shared with other trees of the same rows), the operator, the HD-LCA tree of
    each K and :meth:`Prepared.finish`. ``embed`` / ``decode_tree`` run the same stages in two
    calls (:func:`embed_prepared`, :func:`decode_from_embedding` and :meth:`Prepared.finish`).
    On one BLAS thread (:func:`hdtwd_cli._runtime.blas.serial_blas`): the same bits at any thread count."""
    rep = reporter or Reporter(quiet=True)
    if prepared is None:
        prepared = prepare(X, feature_names, params, embedding=embedding, reporter=rep, path=path, available=available)
    F, prepared = prepared.handed_on()
    space = prepared.space
    if available is not None:
        need = check_tree_memory(F.shape[0], F.shape[1], F.nnz if sp.issparse(F) else None, params, available, path)  # type: ignore[union-attr]
        rep.note(f"learning the tree needs about {need / 1e9:.2f} GB (estimate; {available / 1e9:.1f} GB available)")
    out = {}
    if params.learner == "average":  # average linkage on the features' correlations (section 14): one tree for every K
        m = F.shape[1]
        with rep.stage(f"average linkage on correlations ({m} features)"):
            tree = average_linkage_tree(F, space.names)
        del F
        md = params.as_dict()
        md.update({"unplaced_features": len(space.unplaced), "n_landmarks": 0})
        for K in scales:
            one = dataclasses.replace(tree, metadata={**tree.metadata, **md, "scales": K})
            out[K] = prepared.finish(one, params)
    elif params.edge_weights == "lca":  # the diffusion's HD-LCA values only
        op = feature_operator(F, params, rep)
        del F
        place(space, op, rep)
        meta = {K: _tree_metadata(op, params.replace(scales=K), len(space.unplaced)) for K in scales}
        trees = hd_lca_trees(op, space.names, params, scales, rep)
        del op
        for K in scales:
            trees[K].metadata.update(meta[K])
            out[K] = prepared.finish(trees[K], params)
    else:
        op, emb = embed(F, params.replace(scales=max(scales)), rep)
        del F
        place(space, op, rep)
        for K in scales:
            sub = (
                emb
                if K == emb.n_scales - 1
                else HyperbolicEmbedding(
                    psi=emb.psi[: K + 1], heights=emb.heights[: K + 1], negative_mass=emb.negative_mass[: K + 1]
                )
            )
            tree = decode_from_embedding(
                sub,
                space.names,
                rep,
                params.linkage,
                params.edge_weights,
                tie_ranks=not isinstance(op, LandmarkOperator),
            )
            tree.metadata.update(_tree_metadata(op, params.replace(scales=K), len(space.unplaced)))
            out[K] = prepared.finish(tree, params)
    md = out[max(scales)].metadata
    never = f"; {space.never_cooccur:.0%} of feature pairs (by mass) never co-occur" if space.never_cooccur >= 0 else ""
    rep.info(
        f"features' space: {space.source} ({len(space.names)} placed, {len(space.unplaced)} at the root{never}); "
        f"leaf term lambda = {md['leaf_length']:.3g} ({md['leaf_length_rule']}, latent energy share "
        f"{space.shared:.3g})"
    )
    return out


def embed_prepared(
    prepared: Prepared,
    params: TreeParams,
    reporter: Reporter | None = None,
    path: str | None = None,
    available: int | None = None,
) -> tuple[Prepared, DiffusionOperator | LandmarkOperator, HyperbolicEmbedding]:
    """The stages of :func:`learn_trees` before the tree, kept (``hdtwd embed``): the operator and the
    multi-scale embedding of ``prepared``'s features, and ``prepared`` with the features the operator
    could not place moved to the root (:func:`place`). With ``available`` (bytes), the memory of the
    operator and the stored embedding is checked first."""
    rep = reporter or Reporter(quiet=True)
    F, prepared = prepared.handed_on()
    if available is not None:
        need = check_tree_memory(
            F.shape[0],
            F.shape[1],
            F.nnz if sp.issparse(F) else None,  # type: ignore[union-attr]
            params,
            available,
            path,
            ("diffusion", "embedding"),
            store_embedding=True,
        )
        rep.note(f"the embedding needs about {need / 1e9:.2f} GB (estimate; {available / 1e9:.1f} GB available)")
    op, emb = embed(F, params, rep)
    del F
    place(prepared.space, op, rep)
    return prepared, op, emb


@serial_blas()  # the tree's stages: the same bits at any BLAS thread count (_blas)
def decode_from_embedding(
    emb: HyperbolicEmbedding,
    names: list[str],
    reporter: Reporter | None = None,
    linkage: str = "single",
    edge_weights: str = "midpoint",
    tie_ranks: bool = True,
) -> Tree:
    """Alg. 1 with progress bars: HD-LCA (per row block on the large-m path), merge order, edge weights."""
    rep = reporter or Reporter(quiet=True)
    m = emb.n_features
    if tie_ranks:
        with rep.stage(f"HD-LCA tree ({m} features)", emb.n_scales + 2) as adv:
            return decode_tree(emb, names, progress=adv, linkage_rule=linkage, edge_weights=edge_weights)
    with rep.stage(f"HD-LCA values ({m} x {m}, row blocks)", emb.n_scales * (m - 1)) as rows:
        held = [hd_lca_product(emb, progress=rows)]
    with rep.stage(f"{linkage} linkage and edge weights", emb.n_scales + 1) as adv:
        return decode_tree(
            emb,
            names,
            progress=adv,
            linkage_rule=linkage,
            edge_weights=edge_weights,
            tie_ranks=False,
            lca_values=held.pop(),
        )


@serial_blas()  # the tree's stages: the same bits at any BLAS thread count (_blas)
def tree_from_distances(
    D: np.ndarray,
    names: list[str],
    params: TreeParams,
    *,
    landmarks: np.ndarray | None = None,
    reporter: Reporter | None = None,
) -> Tree:
    r"""The binary tree :math:`T(M)` of items given by their pairwise distances: the chain of
    :func:`learn_trees` after the features' space (diffusion, Eq. 1; HD-LCA values; linkage, Alg. 1).

    Parameters
    ----------
    D : ndarray
        ``m x m`` symmetric distances with a zero diagonal (the exact operator,
        :func:`_diffusion.operator_from_distances`), or ``m x m'`` distances from every item to the
        ``m'`` items ``landmarks`` (:func:`_landmarks.landmark_operator_from_distances`). Overwritten.
    names : list of str
        One leaf name per item (row of ``D``), in row order: leaf ``i`` is item ``i``.
    params : TreeParams
        ``learner``; for the diffusion ``eps``, ``bandwidth``, ``knn``, ``scales``, ``linkage`` are read (the
        average learner: UPGMA on ``D``, all pairs only).

    Returns
    -------
    Tree
        Edge lengths from the HD-LCA heights (``edge_weights="lca"``), no weights, no denoiser.
        Items whose affinity to every landmark underflows hang from the root (length: the tree's
        mean leaf depth).
    """
    rep = reporter or Reporter(quiet=True)
    if params.learner == "average":  # UPGMA on the given distances (docs/method.md section 14): all pairs
        if landmarks is not None:
            raise ValueError("the average learner reads all pairs of distances, not distances to landmarks")
        return average_linkage_from_distances(D, list(names))
    op: DiffusionOperator | LandmarkOperator
    if landmarks is None:
        op = operator_from_distances(D, params.eps, bandwidth=params.bandwidth, knn=params.knn)  # type: ignore[arg-type]
    else:
        op = landmark_operator_from_distances(
            D,
            landmarks,
            params.kernel_eps(True),
            params.bandwidth,  # type: ignore[arg-type]
            params.knn,
        )
    del D
    placed, lost = _placed(list(names), op)
    tree = hd_lca_trees(op, placed, params, [params.scales], rep)[params.scales]
    del op
    return attach_at_root(tree, lost, mean_leaf_depth(tree)) if lost else tree


def hd_lca_trees(
    op: DiffusionOperator | LandmarkOperator,
    names: list[str],
    params: TreeParams,
    scales: list[int] | tuple[int, ...],
    reporter: Reporter | None = None,
) -> dict[int, Tree]:
    r"""The binary tree of the operator's placed items for each ``K`` of ``scales`` (Alg. 1): the HD-LCA
    values of scales 0..K (one pass for every K, :func:`hd_lca_products`), then ``params.linkage`` on them,
    with the heights of :func:`scale_heights`. ``names``: one per placed item, in the operator's order.
    The one composition of this stage: :func:`learn_trees` (the features) and :func:`tree_from_distances`
    (items given by distances) call it."""
    rep = reporter or Reporter(quiet=True)
    exact, m, K1 = not isinstance(op, LandmarkOperator), op.n_features, max(scales) + 1
    with rep.stage(f"HD-LCA values ({m} x {m}, {K1} scales, row blocks)", K1 * (m - 1)) as rows:
        # one complete-linkage tree through landmarks: the product straight into the square
        # matrix the chain works on (no condensed copy; 8 m^2 bytes instead of 12 m^2)
        square = not exact and params.linkage == "complete" and len(set(scales)) == 1 and square_linkage_fits(m)
        products, neg = hd_lca_products(op, scales, progress=rows, square=square)
    rep.info(f"negative density mass per scale: {np.array2string(neg, precision=3)}")
    out = {}
    for K in sorted(set(scales), reverse=True):  # the largest K's product is the running one: last
        with rep.stage(f"{params.linkage} linkage ({m} features)"):
            out[K] = lca_tree(products.pop(K), scale_heights(K), names, params.linkage, tie_ranks=exact)
    return {K: out[K] for K in scales}
