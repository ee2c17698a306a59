r"""The chain's first stage: the samples' values the features' tree is learned from (docs/method.md section 11).

Whether the rows are denoised (:mod:`._denoise`: each row replaced by its rank-``r`` reconstruction
from the leading principal axes of the value scale :math:`f`), and why: :func:`denoise_rank` holds
the rule of ``denoise="auto"`` (by the form of the values, :func:`hdtwd_cli.tree._forms.value_form`),
:func:`denoised_rows` fits the map within the memory budget and returns the rows that the
features' space reads. Every route to a tree (``learn_tree``, ``embed`` / ``decode_tree``,
``classify``'s trees) goes through :func:`hdtwd_cli.tree._learn.prepare`, which calls this module once.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.memory import allowance, available_memory, human_bytes
from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli.errors import ResourceError
from hdtwd_cli.tree._budget import TREE_SHARE
from hdtwd_cli.tree._denoise import (
    DenoisedRows,
    Denoiser,
    fit_denoiser,
    fit_is_implicit,
    fit_memory_bytes,
    row_nonzeros,
)
from hdtwd_cli.tree._features import NEVER_COOCCUR_LIMIT, never_cooccur_fraction
from hdtwd_cli.tree._forms import ValueForm, value_form
from hdtwd_cli.tree._landmarks import effective_landmarks
from hdtwd_cli.tree._params import TreeParams

#: The landmark operator reads the denoised rows several times (column norms, landmark columns,
#: products): they are computed once and held when they take at most this share of the available
#: memory, and computed again block by block otherwise. The same bits either way: holding changes
#: the time, never the tree.
HOLD_FRACTION = 0.25

#: The rank of ``denoise="auto"`` for each form of the values (:func:`~hdtwd_cli.tree._forms.value_form`),
#: chosen by the evidence of docs/method.md section 11 (0: off).
AUTO_RANKS: dict[ValueForm, int] = {"counts": 50, "log1p_counts": 50, "lognorm": 50, "lognorm_subset": 20, "other": 0}
#: Values with fewer zeros than this share of their entries are dense (bulk-like counts): under ``denoise="auto"``
#: the tree is still learned from their denoised rows, but the samples are compared by their own values
#: (:func:`histogram_map`; docs/method.md section 11). Every single-cell set we have holds 40-72 % zeros in every
#: form; counts planted at bulk depth 16-21 %.
DENSE_ZERO_SHARE = 0.3
#: What each form is, for the rule's reason.
FORM_NAMES: dict[ValueForm, str] = {
    "counts": "raw counts",
    "log1p_counts": "log1p of counts",
    "lognorm": "log-normalised values (scanpy's normalize_total + log1p)",
    "lognorm_subset": "log-normalised values of a gene subset (the rows' totals differ)",
    "other": "values that are neither counts nor log-normalised",
}


def auto_rank(n: int, m: int, form: ValueForm, never_cooccur: float, limit: float) -> tuple[int, str]:
    r"""The rank of ``denoise="auto"`` and why: :data:`AUTO_RANKS` of the values' ``form`` where the features
    co-occur and both the samples and the features number at least twice the rank; else 0.

    The ranks are the evidence's (docs/method.md section 11: hdtwd's kNN accuracy off and on, every
    cell set we have in every form): rank 50, scanpy's number of principal components, for raw
    counts, their ``log1p`` and log-normalised values over all genes (every set gained, by 0.2 to
    19.4 points); rank 20 for log-normalised values of a gene subset (the 2,000 highly variable
    genes: the rank of the largest mean gain, +0.9 points over five sets, where rank 50 gained +0.5
    and lost on two). Denoising averages the sampling noise of the cells' values across the genes
    that vary together. Features that rarely share a sample (words: ``never_cooccur`` above
    ``limit``, the threshold that also picks the features' space,
    :data:`_features.NEVER_COOCCUR_LIMIT`) have no shared axes to average along; a rank-``r``
    projection of fewer than ``2 r`` features or samples keeps most of the data as it is; values
    of no known form (scaled, centred, tf-idf, ...) are left as they are.
    """
    rank, what = AUTO_RANKS[form], FORM_NAMES[form]
    if not rank:
        return 0, what
    if never_cooccur > limit:
        return 0, f"{what}, but {never_cooccur:.0%} of feature pairs (by mass) never co-occur"
    if min(n, m) < 2 * rank:
        return 0, f"{what}, but fewer than {2 * rank} samples or features"
    return rank, f"{what} whose features co-occur ({max(never_cooccur, 0.0):.0%} of pairs by mass never do)"


def denoise_rank(X: np.ndarray | sp.spmatrix, params: TreeParams, *, df: np.ndarray | None = None) -> tuple[int, str]:
    """The rank the tree's denoising uses (0: off) and why: ``params.denoise``, or the rule of
    :func:`auto_rank` for ``"auto"`` (by the values' form and whether the features co-occur,
    in the rows ``X``). A rule on the values and their shape only: the same input gets the same
    answer on every machine, whatever its memory. ``df``: the columns' document frequencies of ``X``
    when the caller has them."""
    if params.denoise != "auto":
        r = int(params.denoise)
        return r, ("asked for" if r else "0 asked for")
    form = value_form(X)
    never = never_cooccur_fraction(X, seed=params.seed, df=df) if form != "other" else -1.0
    return auto_rank(X.shape[0], X.shape[1], form, never, NEVER_COOCCUR_LIMIT)


def zero_share(X: np.ndarray | sp.spmatrix) -> float:
    """The share of ``X``'s entries that are zero (stored zeros of a sparse matrix count as zeros)."""
    nonzero = np.count_nonzero(X.data) if sp.issparse(X) else np.count_nonzero(X)
    return 1.0 - nonzero / max(X.shape[0] * X.shape[1], 1)


def histogram_map(
    X: np.ndarray | sp.spmatrix, denoiser: Denoiser | None, params: TreeParams, why: str
) -> tuple[Denoiser | None, str]:
    """The map every sample goes through before it becomes a histogram, and the rule's reason.

    The denoiser the tree was learned with, except under ``denoise="auto"`` on dense values (fewer than
    :data:`DENSE_ZERO_SHARE` of ``X``'s entries zero: bulk-like counts), where the samples are compared by their
    own values on the tree learned from their denoised rows. Why (docs/method.md section 11): the denoised rows
    make the better tree of such data (planted bulk-depth counts: rooted triplets 0.86 / 1.00 against 0.62 / 0.81
    from the raw counts) and their own values the better histograms (kNN +5 to +15 points); on cells (40-72 %
    zeros) the denoised histograms are the better ones (the RNA mixture: 94.7 against 90.2).
    """
    if denoiser is None or params.denoise != "auto":
        return denoiser, why
    share = zero_share(X)
    if share >= DENSE_ZERO_SHARE:
        return denoiser, why
    return None, f"{why}; dense ({share:.0%} of the values zero): the samples' own values as histograms"


def denoised_rows_made_dense(params: TreeParams, *, embedding: bool = False) -> bool:
    """Whether learning the tree reads the denoised rows as one dense ``n x m`` matrix: the latent space
    does, and so does a given feature embedding's share of the data's energy (:func:`_space.feature_space`);
    the exact operator and the landmark operator read them by row blocks."""
    return params.feature_space == "svd" or (embedding and params.leaf_length is None)


def denoised_rows(
    X: np.ndarray | sp.spmatrix,
    params: TreeParams,
    *,
    streamed_gram: bool,
    embedding: bool = False,
    reporter: Reporter | None = None,
    path: str | None = None,
    available: int | None = None,
    df: np.ndarray | None = None,
) -> tuple[np.ndarray | sp.spmatrix | DenoisedRows, Denoiser | None, str]:
    """The rows the features' space reads, the denoiser fitted on them (``None``: off) and why.

    ``X`` is returned as it is when the rule (:func:`denoise_rank`) says off; otherwise the
    :class:`~hdtwd_cli.tree._denoise.DenoisedRows` of ``X`` under the rank-``r`` map fitted on ``X``
    (columns in ``X``'s order). ``streamed_gram``: the exact operator will read the denoised rows'
    Gram matrix, computed here in the same pass as the column statistics. With ``available``
    (bytes), the map's memory (:func:`~hdtwd_cli.tree._denoise.fit_memory_bytes`, and the rows made
    dense where the latent space or a feature embedding reads them: ``embedding``) is checked first
    and a map that does not fit is refused (:class:`~hdtwd_cli.errors.ResourceError`), for ``"auto"``
    too: the rule never turns itself off for want of memory, so a tree never depends on the machine.
    Where the landmark operator will read the rows (more than ``AUTO_LANDMARKS_ABOVE`` features), they
    are held in memory when they take at most :data:`HOLD_FRACTION` of it (the same bits either way).
    ``df``: the columns' document frequencies of ``X`` when the caller has them (the rule reads them).
    """
    rep = reporter or Reporter(quiet=True)
    rank, why = denoise_rank(X, params, df=df)
    if not rank:
        rep.info(f"denoising: off ({why})")
        return X, None, why
    n, m = X.shape
    dense = denoised_rows_made_dense(params, embedding=embedding)
    nonzeros = row_nonzeros(X)
    need = fit_memory_bytes(n, m, nonzeros, rank) + (24 * n * m if dense else 0)
    if available is not None and need > TREE_SHARE * available:
        if fit_is_implicit(n, m, nonzeros, rank):
            what = f"two sparse copies of the {n} x {m} values' {int(nonzeros.sum())} non-zeros"
        elif n <= m:
            what = f"the {n} x {m} centred values and their {n} x {n} Gram matrix"
        else:
            what = f"the {m} x {m} scatter matrix"

        raise ResourceError(
            f"denoising at rank {rank} ({why}) needs about {human_bytes(need)} ({what}"
            + (f", and the {n} x {m} rows made dense for the latent space or the feature embedding" if dense else "")
            + f"), more than hdtwd allows itself: {allowance(TREE_SHARE, available)}; learn the tree on a "
            "subsample of the cells and map the rest with {b}, or give {a} 0",
            path,
            a="denoise",
            b="tree",
        )
    rep.info(f"denoising: rank {rank} ({why})")
    with rep.stage(f"denoising (rank {rank} principal axes; {why})"):
        den = fit_denoiser(X, rank, nonzeros=nonzeros)
        rows = DenoisedRows(X, den)
        if streamed_gram and not dense:  # the exact operator reads the Gram matrix: one pass for all
            rows.summarise(gram=True)
        elif effective_landmarks(params.landmarks, m) and not dense:
            have = available_memory() if available is None else available
            if 8 * n * m <= HOLD_FRACTION * have:  # read several times by the landmark operator
                rows = rows.held(np.arange(n))
    return rows, den, why
