r"""The features' tree learned end to end: features' space -> diffusion -> embedding -> HD-LCA tree.

:func:`learn_trees` composes the stages of the paper's Sec. 3 (docs/method.md sections 1-3, 6-7):
the features' ambient space and weights (:mod:`._features`), the diffusion operator (Eq. 1;
:mod:`._diffusion`, or landmarks, :mod:`._landmarks`), the multi-scale hyperbolic embedding
(:mod:`._hyperbolic`) and the HD-LCA binary tree (Alg. 1; :mod:`._hd_lca`), then the departures
of section 7 (features that cannot be placed hang from the root, the leaf term). It also holds the
memory estimates that refuse a run before a stage that would not fit. Pure functions over arrays:
no file I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.blas import serial_blas
from hdtwd_cli._runtime.memory import allowance, human_bytes
from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli.errors import InputError, ResourceError
from hdtwd_cli.tree._denoise import DenoisedRows, auto_rank, fit_denoiser, is_count_data, is_log1p_counts
from hdtwd_cli.tree._diffusion import DiffusionOperator, diffusion_operator
from hdtwd_cli.tree._features import (
    FEATURE_SPACES,
    NEVER_COOCCUR_LIMIT,
    WEIGHTINGS,
    document_frequency,
    idf_weights,
    latent_feature_space,
    never_cooccur_fraction,
)
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
)
from hdtwd_cli.tree._linkage import square_bytes, square_fits
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree, attach_at_root, lengthen_leaves, mean_leaf_depth

#: Share of the available memory that learning the tree may take (the rest stays free for the
#: interpreter, the libraries' buffers and estimates that run short).
TREE_SHARE = 0.85


def tree_memory_bytes(
    n: int,
    m: int,
    nnz: int | None,
    params: TreeParams,
    store_embedding: bool | None = None,
    available: int | None = None,
) -> dict[str, int]:
    """Estimated peak bytes of each heavy stage of learning a tree over ``m`` features.

    ``nnz`` is the number of stored entries of a sparse ``X`` (``None``: dense). The estimate
    covers the arrays the stages allocate, not the input itself (already in memory).
    ``store_embedding`` (default: unless the edge weights are ``lca``): the float64 embedding is
    kept (``hdtwd embed``, ``midpoint`` weights); otherwise the tree comes straight from the
    operator (:func:`_hd_lca.hd_lca_products`). ``available``: complete linkage's square matrix is
    counted where it will be used (at most half of ``available``; otherwise the chain runs on the
    condensed values in place, with the same merges, and needs nothing more).
    Exact path: the ``m x m`` distance, kernel and eigenvector matrices (4 of them); then either
    ``psi`` of ``(K+1) m^2`` values, or per scale the eigenvectors, ``W``, the densities and their
    float32 square root next to the condensed product; then 3 condensed ``m^2/2`` vectors (values,
    order, ranks), and for complete linkage its square ``m x m`` matrix where it fits.
    Landmark path (``m'`` landmarks): the ``m x m'`` distances/affinities (4 of them) and the
    n x m' landmark vectors, then ``psi`` of ``(K+1) m m'`` values (float32 for the tree, or
    float64 stored and its float32 copy) next to the condensed HD-LCA product (SciPy's copy of it
    for average and weighted linkage), or, for complete linkage with ``lca`` weights, the square
    matrix alone (the product is written into it).
    """
    K1 = params.scales + 1
    pairs = m * (m - 1) // 2
    nl = effective_landmarks(params.landmarks, m)
    store = params.edge_weights != "lca" if store_embedding is None else store_embedding
    fits = available is None or square_fits(m, available)
    square = square_bytes(m) if params.linkage == "complete" and fits else 0  # complete linkage's m x m matrix
    if nl == 0:
        if store:
            return {
                "diffusion": 8 * 4 * m * m,
                "embedding": 8 * (K1 + 2) * m * m,
                "tree": 8 * (K1 * m * m + 3 * pairs) + square,
            }
        return {"diffusion": 8 * 4 * m * m, "embedding": 28 * m * m + 8 * pairs, "tree": 24 * pairs + square}
    sparse_side = 8 * n * nl if nnz is None else 12 * min(nnz, n * nl)
    # the condensed product, and SciPy's copy of it for average and weighted linkage (complete linkage
    # works on it in place where no square matrix); none at all where the product is written straight
    # into the square matrix (lca weights, one K: hd_lca_products(square=True))
    copies = 0 if square and not store else 1 if params.linkage in ("single", "complete") else 2
    psi = (12 if store else 4) * K1 * m * nl
    return {
        "diffusion": 8 * 4 * m * nl + sparse_side,
        "embedding": psi + 8 * 2 * m * nl + 8 * pairs,
        "tree": psi + 8 * copies * pairs + square + (1 << 23),
    }


def check_tree_memory(
    n: int,
    m: int,
    nnz: int | None,
    params: TreeParams,
    available: int,
    path: str | None = None,
    stages: tuple[str, ...] = ("diffusion", "embedding", "tree"),
    store_embedding: bool | None = None,
) -> int:
    """Refuse (:class:`errors.ResourceError`) before a stage would not fit in ``available`` bytes.

    The message names what would fit: landmarks instead of the exact operator, fewer landmarks,
    or single linkage (which needs no copy of the condensed HD-LCA values). Returns the estimate.
    """

    def peak(p: TreeParams) -> int:
        est = tree_memory_bytes(n, m, nnz, p, store_embedding, available)
        return max(est[s] for s in stages)

    need = peak(params)
    if need <= TREE_SHARE * available:
        return need

    def fits(p: TreeParams) -> bool:
        return peak(p) <= TREE_SHARE * available

    nl = effective_landmarks(params.landmarks, m)
    tries: list[dict[str, Any]] = []
    for n_l in (500, 200, 100):
        if n_l < (nl or m):
            tries.append({"landmarks": n_l})
    tries = ([{"linkage": "single"}] if params.linkage != "single" else []) + tries
    if params.linkage != "single":
        tries += [dict(t, linkage="single") for t in tries if "landmarks" in t]
    way = next((t for t in tries if fits(params.replace(**t))), None)
    names = {f"h{i}": k for i, k in enumerate(way or {})}
    hint = (
        "use " + " ".join(f"{{h{i}}} {v}" for i, v in enumerate((way or {}).values()))
        if way is not None
        else "keep fewer features (e.g. drop rare ones) or use a bigger machine"
    )
    raise ResourceError(
        f"{'learning the tree' if 'tree' in stages else 'the embedding'} over {m} features needs about "
        f"{human_bytes(need)}, more than hdtwd allows itself: {allowance(TREE_SHARE, available)}; {hint}",
        path,
        **names,
    )


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
                X.dense() if isinstance(X, DenoisedRows) else X,
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
    rep.info(
        f"eps = {op.eps:.6g} (c = {params.kernel_eps(bool(nl)):g} x median {op.sigma:.6g}); "
        f"clipped spectral mass {op.clipped_spectral_mass:.3g}"
    )
    return op


def place(space: FeatureSpace, op: DiffusionOperator | LandmarkOperator, reporter: Reporter | None = None) -> None:
    """Move the features the operator could not place (:attr:`LandmarkOperator.unplaced`) to
    ``space.unplaced``, in place: they hang from the root like every unplaced feature."""
    lost = getattr(op, "unplaced", None)
    if lost is None or not len(lost):
        return
    drop = set(int(j) for j in lost)
    moved = [n for j, n in enumerate(space.names) if j in drop]
    space.names = [n for j, n in enumerate(space.names) if j not in drop]
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


@dataclass
class FeatureSpace:
    """The features' ambient vectors that the diffusion reads, and the features it cannot place.

    Attributes
    ----------
    matrix : ndarray or sparse matrix, shape (d, m_placed)
        One column per placed feature (data columns, latent vectors or given embedding vectors).
    names : list of str
        The placed features, in column order.
    unplaced : list of str
        Features without a vector: non-zero in fewer than ``min_df`` (at least 1) of the rows the
        tree is learned from (``data``, ``svd``), or absent from the given embedding. They hang
        from the root (:func:`finish_tree`).
    weights : dict of str to float, or None
        Feature weight of every input feature (``weighting="idf"``), else ``None``.
    source : str
        ``data``, ``svd`` or ``embedding`` (what was used; ``auto`` resolves to one of the first two).
    never_cooccur : float
        Estimated fraction of feature pairs that share no row (``auto`` only, else ``-1``).
    shared : float
        Fraction of the data's energy that the tree's input keeps: what ``feature_dims`` latent
        dimensions capture (``svd``, and the data's latent space for a given embedding), 1 for
        the data columns; see :func:`auto_leaf_length`.
    """

    matrix: np.ndarray | sp.spmatrix | None  # None once learn_trees has handed it to the operator
    names: list[str]
    unplaced: list[str]
    weights: dict[str, float] | None
    source: str
    shared: float = 1.0
    never_cooccur: float = -1.0


@serial_blas()  # the tree's stages: the same bits at any BLAS thread count (_blas)
def feature_space(
    X: np.ndarray | sp.spmatrix,
    feature_names: list[str],
    params: TreeParams,
    embedding: tuple[np.ndarray, list[str]] | None = None,
) -> FeatureSpace:
    r"""The features' ambient space for the initial distance (docs/method.md section 7).

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, m)
        The rows the tree is learned from (already transformed).
    embedding : (vectors, names), optional
        Given feature vectors, one ROW per name (``--feature-embedding``); overrides
        ``params.feature_space``. Features are matched by name; every data feature with a
        non-zero vector is placed, whether or not it has mass in ``X``.

    Notes
    -----
    ``svd`` needs more samples and more features (with mass) than ``feature_dims``: a rank-r
    truncation of a smaller matrix reduces nothing, so the data columns are used instead and
    ``source`` says ``data``.
    """
    if params.leaf_length is not None and not params.leaf_length >= 0:
        raise ValueError("leaf_length must be non-negative (or None for the automatic choice)")
    if params.weighting not in WEIGHTINGS:
        raise ValueError(f"unknown weighting {params.weighting!r}; choose from {', '.join(WEIGHTINGS)}")
    if params.feature_space not in FEATURE_SPACES:
        raise ValueError(f"unknown feature_space {params.feature_space!r}; choose from {', '.join(FEATURE_SPACES)}")
    weights = None
    df = document_frequency(X)  # once: idf, the kept columns and the co-occurrence test read it
    if params.weighting == "idf":
        weights = dict(zip(feature_names, idf_weights(X, df).tolist()))
    names = np.asarray(feature_names, dtype=object)
    latent: np.ndarray | None = None
    shared = 1.0
    ok = df >= max(1, int(params.min_df))
    if params.max_features and int(ok.sum()) > params.max_features:
        order = np.lexsort((np.arange(df.size), -df))  # most frequent first, ties by index
        ok = np.zeros_like(ok)
        ok[order[: params.max_features]] = True
        ok &= df >= max(1, int(params.min_df))
    cols = np.flatnonzero(ok)
    keep_all = cols.size == X.shape[1]
    Xk: np.ndarray | sp.spmatrix | DenoisedRows
    if keep_all:
        Xk = X  # every column kept (the usual case): no copy
    else:
        Xk = X.select(cols) if isinstance(X, DenoisedRows) else X[:, cols]
    big = min(X.shape[0], cols.size) > params.feature_dims
    wanted, never = params.feature_space, -1.0
    if wanted == "auto" and embedding is None:
        if isinstance(Xk, DenoisedRows):  # reconstructions from shared axes: graded column distances
            wanted = "data"
        else:
            never = never_cooccur_fraction(Xk, seed=params.seed, df=df[cols])
            wanted = "svd" if never > NEVER_COOCCUR_LIMIT else "data"
    if big and (wanted == "svd" or (embedding is not None and params.leaf_length is None)):
        Xd = Xk.dense() if isinstance(Xk, DenoisedRows) else Xk
        latent = latent_feature_space(Xd, params.feature_dims, params.seed)
        shared = latent_energy(latent, Xd)  # kept below only where the tree's input is truncated
    if embedding is not None:
        vectors, vnames = embedding
        index = {str(v): i for i, v in enumerate(vnames)}
        rows = np.array([index.get(str(f), -1) for f in feature_names], dtype=np.int64)
        ok = rows >= 0
        ok[ok] = np.any(np.asarray(vectors)[rows[ok]] != 0, axis=1)
        matrix: np.ndarray | sp.spmatrix = np.ascontiguousarray(np.asarray(vectors, dtype=np.float64)[rows[ok]].T)
        source = "embedding"
    else:
        source = "svd" if wanted == "svd" and big else "data"
        if source == "svd" and latent is not None:
            matrix = latent
            nz = np.any(matrix != 0, axis=0)
            if not nz.all():
                ok[cols[~nz]] = False
                matrix = np.ascontiguousarray(matrix[:, nz])
        else:
            matrix = sp.csr_matrix(Xk) if sp.issparse(Xk) else Xk
            shared = 1.0  # the diffusion reads the whole columns: nothing is left to a leaf term
    return FeatureSpace(matrix, names[ok].tolist(), names[~ok].tolist(), weights, source, shared, never)


def latent_energy(latent: np.ndarray, X: np.ndarray | sp.spmatrix) -> float:
    r"""Fraction :math:`\varepsilon = \sum_{i \le r} s_i^2 / \lVert M\rVert_F^2` of the energy of the unit rows ``M``
    (:func:`_features.latent_feature_space`) that its ``r`` latent dimensions capture."""
    nonzero_rows = int(np.count_nonzero(np.asarray(abs(X).sum(axis=1)).ravel()))
    return float(min(1.0, float(np.sum(latent * latent)) / max(nonzero_rows, 1)))


def auto_leaf_length(shared: float) -> float:
    r"""The automatic leaf term :math:`\lambda = (1 - \varepsilon) / \varepsilon` (docs/method.md section 7).

    :math:`\varepsilon` is the fraction of the data's energy that the tree's input keeps
    (:attr:`FeatureSpace.shared`): with the latent space, what its ``feature_dims`` dimensions
    capture, the part of the samples that the features SHARE and the tree can represent; the
    rest is feature-specific, and the leaf term gives it the weight :math:`1 - \varepsilon`
    against the tree's :math:`\varepsilon`. Documents (a few dozen words of tens of thousands)
    keep most of their energy outside any low-rank space (CLASSIC: :math:`\varepsilon = 0.19`,
    lambda = 4.1; BBCSPORT 0.39, 1.5). A tree learned from the data columns themselves (cells)
    sees all of it: :math:`\varepsilon = 1`, lambda = 0.
    """
    return (1.0 - shared) / max(shared, 1e-3)


def finish_tree(tree: Tree, space: FeatureSpace, params: TreeParams) -> Tree:
    r"""Hang the unplaced features from the root, lengthen the leaves, attach the feature weights.

    With :math:`\bar h` the mean root-to-leaf depth of the decoded tree: every unplaced feature
    becomes a leaf on an edge of length :math:`\bar h` from the root, then every leaf edge is
    lengthened by :math:`\lambda \bar h` (``params.leaf_length``), adding
    :math:`\lambda \bar h \lVert x - x'\rVert_1` to every TWD (docs/method.md section 7).
    """
    h = mean_leaf_depth(tree)
    w = space.weights
    lam = auto_leaf_length(space.shared) if params.leaf_length is None else float(params.leaf_length)
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


def denoise_rank(X: np.ndarray | sp.spmatrix, params: TreeParams) -> tuple[int, str]:
    """The rank the tree's denoising uses (0: off) and why: ``params.denoise``, or the rule of
    :func:`_denoise.auto_rank` for ``"auto"`` (counts whose features co-occur, in the rows ``X``)."""
    if params.denoise != "auto":
        r = int(params.denoise)
        return r, ("asked for" if r else "0 asked for")
    counts = is_count_data(X) or is_log1p_counts(X)
    never = never_cooccur_fraction(X, seed=params.seed) if counts else -1.0
    rank, why = auto_rank(X.shape[0], X.shape[1], counts, never, NEVER_COOCCUR_LIMIT)
    if rank and _denoised_rows_made_dense(params, X.shape[1]):
        return 0, (
            f"{why}, but the {'latent space' if params.feature_space == 'svd' else 'landmark operator'} "
            f"({X.shape[1]} features) would need all {X.shape[0]} denoised rows in memory; "
            f"--denoise {rank} asks for it"
        )
    return rank, why


def _denoised_rows_made_dense(params: TreeParams, m: int) -> bool:
    """Whether learning the tree reads the denoised rows as one dense ``n x m`` matrix (the landmark
    operator and the latent space do; the exact operator streams them)."""
    return bool(effective_landmarks(params.landmarks, m)) or params.feature_space == "svd"


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
) -> dict[int, Tree]:
    """Trees for several K from one eigendecomposition (the scales 0..K are shared).

    On one BLAS thread (:func:`hdtwd_cli._runtime.blas.serial_blas`): the same bits at any thread count."""
    rep = reporter or Reporter(quiet=True)
    den, raw = None, X
    rank, why = denoise_rank(X, params)
    if rank:  # the tree is learned from the denoised rows (docs/method.md section 11)
        m = X.shape[1]
        dense = _denoised_rows_made_dense(params, m)
        need = 16 * m * m + (24 * X.shape[0] * m if dense else 0)  # the scatter matrix; rows made dense
        if available is not None and need > TREE_SHARE * available:
            raise ResourceError(
                f"{{a}} {rank} needs about {human_bytes(need)} (the {m} x {m} scatter matrix"
                + (f", and the {X.shape[0]} x {m} rows made dense for landmarks or the latent space" if dense else "")
                + f"), more than hdtwd allows itself: {allowance(TREE_SHARE, available)}; learn the tree on a "
                "subsample of the cells and map the rest with {b}, or give {a} 0",
                path,
                a="denoise",
                b="tree",
            )
        with rep.stage(f"denoising (rank {rank} principal axes; {why})"):
            den = fit_denoiser(X, rank)
            X = DenoisedRows(X, den)
            if not dense and embedding is None:  # the exact operator reads the Gram matrix: one pass for all
                X.summarise(gram=True)
    else:
        rep.info(f"denoising: off ({why})")
    with rep.stage("feature space" + (" (latent SVD)" if params.feature_space == "svd" and embedding is None else "")):
        space = feature_space(X, feature_names, params, embedding)
    if den is not None and space.weights is not None:  # idf from the samples' own (sparse) values
        space.weights = dict(zip(feature_names, idf_weights(raw).tolist()))
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
    F, space.matrix = space.matrix, None  # held here only: freed once the operator is built
    if available is not None:
        need = check_tree_memory(F.shape[0], F.shape[1], F.nnz if sp.issparse(F) else None, params, available, path)  # type: ignore[union-attr]
        rep.note(f"learning the tree needs about {need / 1e9:.2f} GB (estimate; {available / 1e9:.1f} GB available)")
    out = {}
    if params.edge_weights == "lca":  # the default: the tree needs the HD-LCA values only
        op = feature_operator(F, params, rep)
        del F
        place(space, op, rep)
        exact, m, K1 = not isinstance(op, LandmarkOperator), op.n_features, max(scales) + 1
        meta = {K: _tree_metadata(op, params.replace(scales=K), len(space.unplaced)) for K in scales}
        with rep.stage(f"HD-LCA values ({m} x {m}, {K1} scales, row blocks)", K1 * (m - 1)) as rows:
            # one complete-linkage tree through landmarks: the product straight into the square
            # matrix the chain works on (no condensed copy; 8 m^2 bytes instead of 12 m^2)
            square = not exact and params.linkage == "complete" and len(set(scales)) == 1 and square_linkage_fits(m)
            products, neg = hd_lca_products(op, scales, progress=rows, square=square)
        del op
        rep.info(f"negative density mass per scale: {np.array2string(neg, precision=3)}")
        for K in sorted(set(scales), reverse=True):  # the largest K's product is the running one: last
            with rep.stage(f"{params.linkage} linkage ({m} features)"):
                tree = lca_tree(products.pop(K), scale_heights(K), space.names, params.linkage, tie_ranks=exact)
            tree.metadata.update(meta[K])
            out[K] = finish_tree(tree, space, params)
        out = {K: out[K] for K in scales}
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
            out[K] = finish_tree(tree, space, params)
    if den is not None:  # the map, in each tree's leaf order, is applied to every sample the tree compares
        column = {n: j for j, n in enumerate(feature_names)}
        for tree in out.values():
            tree.denoiser = den.reordered(np.array([column[n] for n in tree.leaf_names], dtype=np.int64))
            tree.metadata.update({"denoise": den.rank, "denoise_log_counts": den.log_counts})
    for tree in out.values():  # what was chosen and why (the parameter may say "auto")
        tree.metadata.update({"denoise": den.rank if den is not None else 0, "denoise_rule": why})
    md = out[max(scales)].metadata
    never = f"; {space.never_cooccur:.0%} of feature pairs never co-occur" if space.never_cooccur >= 0 else ""
    rep.info(
        f"features' space: {space.source} ({len(space.names)} placed, {len(space.unplaced)} at the root{never}); "
        f"leaf term lambda = {md['leaf_length']:.3g} ({md['leaf_length_rule']}, latent energy share "
        f"{space.shared:.3g})"
    )
    return out


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
