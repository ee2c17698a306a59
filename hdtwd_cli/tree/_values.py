r"""The chain's first stage: the samples' values the features' tree is learned from (docs/method.md section 11).

Whether the rows are denoised (:mod:`._denoise`: each row replaced by its rank-``r`` reconstruction
from the leading principal axes of the value scale :math:`f`), and why: :func:`denoise_rank` holds
the rule of ``denoise="auto"``, :func:`denoised_rows` fits the map within the memory budget and
returns the rows that the features' space reads. Every route to a tree (``learn_tree``,
``embed`` / ``decode_tree``, ``classify``'s trees) goes through :func:`hdtwd_cli.tree._learn.prepare`,
which calls this module once.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.memory import allowance, human_bytes
from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli.errors import ResourceError
from hdtwd_cli.tree._budget import TREE_SHARE
from hdtwd_cli.tree._denoise import (
    DenoisedRows,
    Denoiser,
    auto_rank,
    fit_denoiser,
    is_count_data,
    is_log1p_counts,
)
from hdtwd_cli.tree._features import NEVER_COOCCUR_LIMIT, never_cooccur_fraction
from hdtwd_cli.tree._landmarks import effective_landmarks
from hdtwd_cli.tree._params import TreeParams


def denoise_rank(X: np.ndarray | sp.spmatrix, params: TreeParams) -> tuple[int, str]:
    """The rank the tree's denoising uses (0: off) and why: ``params.denoise``, or the rule of
    :func:`_denoise.auto_rank` for ``"auto"`` (counts whose features co-occur, in the rows ``X``)."""
    if params.denoise != "auto":
        r = int(params.denoise)
        return r, ("asked for" if r else "0 asked for")
    counts = is_count_data(X) or is_log1p_counts(X)
    never = never_cooccur_fraction(X, seed=params.seed) if counts else -1.0
    rank, why = auto_rank(X.shape[0], X.shape[1], counts, never, NEVER_COOCCUR_LIMIT)
    if rank and denoised_rows_made_dense(params, X.shape[1]):
        return 0, (
            f"{why}, but the {'latent space' if params.feature_space == 'svd' else 'landmark operator'} "
            f"({X.shape[1]} features) would need all {X.shape[0]} denoised rows in memory; "
            f"--denoise {rank} asks for it"
        )
    return rank, why


def denoised_rows_made_dense(params: TreeParams, m: int) -> bool:
    """Whether learning the tree reads the denoised rows as one dense ``n x m`` matrix (the landmark
    operator and the latent space do; the exact operator streams them)."""
    return bool(effective_landmarks(params.landmarks, m)) or params.feature_space == "svd"


def denoised_rows(
    X: np.ndarray | sp.spmatrix,
    params: TreeParams,
    *,
    streamed_gram: bool,
    reporter: Reporter | None = None,
    path: str | None = None,
    available: int | None = None,
) -> tuple[np.ndarray | sp.spmatrix | DenoisedRows, Denoiser | None, str]:
    """The rows the features' space reads, the denoiser fitted on them (``None``: off) and why.

    ``X`` is returned as it is when the rule (:func:`denoise_rank`) says off; otherwise the
    :class:`~hdtwd_cli.tree._denoise.DenoisedRows` of ``X`` under the rank-``r`` map fitted on ``X``
    (columns in ``X``'s order). ``streamed_gram``: the exact operator will read the denoised rows'
    Gram matrix, computed here in the same pass as the column statistics. With ``available``
    (bytes), the map's memory (the ``m x m`` scatter matrix, and the rows made dense where the
    landmarks or the latent space read them) is checked first.
    """
    rep = reporter or Reporter(quiet=True)
    rank, why = denoise_rank(X, params)
    if not rank:
        rep.info(f"denoising: off ({why})")
        return X, None, why
    n, m = X.shape
    dense = denoised_rows_made_dense(params, m)
    need = 16 * m * m + (24 * n * m if dense else 0)  # the scatter matrix; rows made dense
    if available is not None and need > TREE_SHARE * available:
        raise ResourceError(
            f"{{a}} {rank} needs about {human_bytes(need)} (the {m} x {m} scatter matrix"
            + (f", and the {n} x {m} rows made dense for landmarks or the latent space" if dense else "")
            + f"), more than hdtwd allows itself: {allowance(TREE_SHARE, available)}; learn the tree on a "
            "subsample of the cells and map the rest with {b}, or give {a} 0",
            path,
            a="denoise",
            b="tree",
        )
    with rep.stage(f"denoising (rank {rank} principal axes; {why})"):
        den = fit_denoiser(X, rank)
        rows = DenoisedRows(X, den)
        if streamed_gram and not dense:  # the exact operator reads the Gram matrix: one pass for all
            rows.summarise(gram=True)
    return rows, den, why
