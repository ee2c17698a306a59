r"""Approximate neighbours of denoised samples: candidates from their principal coordinates, exact re-ranking.

A denoised sample is :math:`\hat x = \max(0, \mu + z V^\top)` (docs/method.md section 11): its ``r``
principal coordinates :math:`z` (50 numbers) carry what its tree vector (one number per tree node:
tens of thousands over all genes) is computed from. So the search proposes each sample's
:data:`COORDINATE_CANDIDATE_FACTOR` x k nearest under L1 on the byte-coded coordinates
(hdtwd's NN-descent, :func:`hdtwd_cli.knn._nndescent.nn_descent`, all samples at once: 50 bytes a
sample, no partitions) and re-ranks them with the exact TWD (:func:`hdtwd_cli.knn._search.rerank`,
bit for bit the exact kernel's distances, on a cluster's workers when given one). The tree vectors
are never held for all samples, nor byte-coded: the search's memory is ``n x r`` coordinates and the
candidates' lists, whatever the number of genes. Up to :data:`COORDINATE_MAX_SAMPLES` samples: the
coordinates rank the TWD's neighbours less well where many cells are nearly equidistant.

Only the neighbour SET may differ from the exact search's: its recall on :data:`~hdtwd_cli.knn._search.RECALL_SAMPLE`
sampled samples is measured on every search (``-v`` prints it; below
:data:`~hdtwd_cli.knn._search.RECALL_WARN` a warning). The coordinates are sums in a fixed order
per row (:meth:`~hdtwd_cli.tree._denoise.DenoisedRows.coordinates`) and NN-descent's choices are
hashed and its distances integers, so the candidates, hence the graph, are the same at any thread
count, in one process or on a Dask cluster.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from hdtwd_cli._runtime.memory import available_memory
from hdtwd_cli.errors import HdtwdWarning
from hdtwd_cli.knn._nndescent import encode_floats, first_width, join_width, nn_descent
from hdtwd_cli.knn._search import HOLD_FRACTION, RECALL_WARN, SampledExact, rerank_shipped
from hdtwd_cli.tree._denoise import DenoisedRows
from hdtwd_cli.twd._distance import TreeVectors

__all__ = ["COORDINATE_CANDIDATE_FACTOR", "COORDINATE_MAX_SAMPLES", "coordinate_neighbors", "has_coordinates"]

#: Candidates per sample from the coordinates' NN-descent, as a multiple of the neighbours wanted
#: (then re-ranked by the exact TWD). The coordinates are a coarser proxy of the TWD than the tree
#: vectors the byte-coded search reads, so more candidates buy the same recall: on cells over all
#: their genes recall@14 is about 0.92 with 32 candidates and 0.99 with 64
#: (benchmarks/RESULTS.md, "Approximate neighbours of denoised cells").
COORDINATE_CANDIDATE_FACTOR = 4.5


#: The coordinates' search runs up to this many samples. The coordinates are a proxy of the TWD whose
#: ranking errs among many near-equidistant cells: on cells of 100 types over 20,000 genes the exact 14
#: nearest were among the 63 nearest in coordinates for 0.995 of them at 10,000 cells but 0.82 at
#: 100,000 (256 candidates would be needed for 0.98; benchmarks/RESULTS.md, "Approximate neighbours of
#: denoised cells"). Above it the byte-coded tree vectors are searched, as for any samples.
COORDINATE_MAX_SAMPLES = 20_000


def has_coordinates(tv: TreeVectors) -> bool:
    """Whether ``tv``'s samples are denoised rows with principal coordinates to search on, few enough
    (:data:`COORDINATE_MAX_SAMPLES`) for the coordinates' ranking to hold the exact neighbours."""
    return isinstance(tv.x, DenoisedRows) and tv.x.denoiser.rank > 0 and tv.n <= COORDINATE_MAX_SAMPLES


def coordinate_neighbors(
    tv: TreeVectors,
    k: int,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    client: Any = None,
    note: Callable[[str], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's ``k`` nearest other samples: candidates from the principal coordinates, exact re-ranking.

    ``tv`` holds denoised rows (:func:`has_coordinates`); ``1 <= k < n`` is the caller's check.
    Without a cluster the denoised rows are held in memory when they take at most
    :data:`~hdtwd_cli.knn._search.HOLD_FRACTION` of it (the same bits either way; a cluster's
    workers compute the rows they need). ``progress`` receives ``n`` in all (a tenth for the
    candidates, the rest as the re-ranking's tasks finish); ``note`` (``-v``'s messages) gets each
    phase's wall time and the recall on sampled samples, whose exact neighbours are found in the
    re-ranking's pass.

    Returns
    -------
    indices : ndarray of int64, shape (n, k)
    distances : ndarray of float64, shape (n, k)
        Exact TWDs, ordered by (distance, index).
    """
    rows = tv.x
    assert isinstance(rows, DenoisedRows)
    say = note if note is not None else (lambda message: None)
    n = tv.n
    c = min(n - 1, int(np.ceil(COORDINATE_CANDIDATE_FACTOR * k)))
    clock = time.perf_counter()
    Z = rows.coordinates()
    Z -= Z.min(axis=0) if n else 0.0  # the byte code reads non-negative columns; L1 is shift-invariant
    Q, code = encode_floats(Z)
    candidates = nn_descent(Q, code, c, seed)
    first = n // 10
    if progress is not None:
        progress(first)
    say(
        f"NN-descent on {Z.shape[1]} principal coordinates, lists of {c}, {first_width(c)} then {join_width(c)} "
        f"joined per row: {time.perf_counter() - clock:.1f} s"
    )
    clock = time.perf_counter()
    held = tv if client is not None else tv.holding(np.arange(n), int(available_memory() * HOLD_FRACTION))
    if held is not tv:  # here only: a cluster's workers compute the rows they re-rank
        say(f"denoised rows held in memory for the re-ranking: {time.perf_counter() - clock:.1f} s")
        tv = held
    clock = time.perf_counter()
    remote = None
    if client is not None:
        from hdtwd_cli.knn._dask import Shipped

        remote = Shipped(client, tv)
    check = SampledExact(tv, k, seed)
    out = rerank_shipped(tv, candidates, k, progress, remote, steps=n - first, probe=check)
    share = check.recall(out[1])
    say(
        f"exact re-ranking of {n * c} candidates: {time.perf_counter() - clock:.1f} s; recall@{k} on "
        f"{check.rows.size} sampled samples (against their exact neighbours, found in the same pass): {share:.3f}"
    )
    if share < RECALL_WARN:
        warnings.warn(
            HdtwdWarning(
                f"the approximate search found {share:.0%} of the exact {k} nearest neighbours of "
                f"{check.rows.size} sampled samples (--knn-method exact is complete)"
            ),
            stacklevel=2,
        )
    return out
