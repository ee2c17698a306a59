"""The neighbour search's backends by name, and the one entry that runs the chosen one.

``exact`` is the blocked all-pairs search (:func:`hdtwd_cli.twd._distance.nearest_neighbors`), pruned by
lower bounds where that pays (:data:`BOUNDED_ABOVE`; :mod:`._bounded`: the same result, bit for bit);
``nndescent`` proposes candidates with hdtwd's NN-descent on byte-coded tree vectors, partitioned
when large, and re-ranks them by the exact TWD (:mod:`._search`); ``pynndescent`` takes the library's candidates
(:mod:`._pynndescent`); ``auto`` (the default) picks ``exact`` or ``nndescent`` by the number of
samples (:func:`choose_method`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from hdtwd_cli.errors import ParameterError
from hdtwd_cli.knn._bounded import bounded_neighbors
from hdtwd_cli.knn._search import CANDIDATE_FACTOR, approximate_neighbors, rerank
from hdtwd_cli.twd._distance import TreeVectors, nearest_neighbors

__all__ = [
    "AUTO_NNDESCENT_ABOVE",
    "BOUNDED_ABOVE",
    "BOUNDED_MIN_COLUMNS",
    "KNN_METHODS",
    "choose_method",
    "search_neighbors",
]

KnnMethod = Literal["exact", "nndescent", "pynndescent", "auto"]
#: The search backends: ``exact`` (all pairs, in blocks), ``nndescent`` (hdtwd's own NN-descent on
#: byte-coded tree vectors, partitioned when large), ``pynndescent`` (the library scanpy uses, whole
#: data in memory), and ``auto``. The approximate backends only propose candidates; the exact TWD
#: re-ranks them, so every distance is exact.
KNN_METHODS = ("exact", "nndescent", "pynndescent", "auto")
#: ``auto`` uses NN-descent above this many samples. The exact search costs n^2 d / 2 kernel
#: operations, growing as n^2; hdtwd's NN-descent grows as about n log n and, cached by numba,
#: starts without compiling (pynndescent compiles in every process). Below 20,000 samples the exact
#: search is about as fast and has no recall to lose (benchmarks/RESULTS.md, "Approximate neighbours").
AUTO_NNDESCENT_ABOVE = 20_000
#: The exact search tries pruning by lower bounds (:func:`~hdtwd_cli.knn._bounded.bounded_neighbors`, which
#: measures every pair itself where its bounds would keep too many) above this many samples and
#: :data:`BOUNDED_MIN_COLUMNS` tree-vector columns; otherwise every pair is measured (two row blocks
#: at most, or vectors so short that 256 grouped sums save little: docs/method.md section 9). Both give
#: the same bits.
BOUNDED_ABOVE = 4096
BOUNDED_MIN_COLUMNS = 8192


def choose_method(method: str, n: int) -> str:
    """The backend to run: ``method`` itself, or for ``auto`` ``exact`` or ``nndescent`` by the number of
    samples (:data:`AUTO_NNDESCENT_ABOVE`)."""
    if method not in KNN_METHODS:
        raise ParameterError(f"must be one of {', '.join(KNN_METHODS)}, not {method!r}", "knn_method")
    if method == "auto":
        method = "nndescent" if n > AUTO_NNDESCENT_ABOVE else "exact"
    return method


def search_neighbors(
    tv: TreeVectors,
    k: int,
    method: str = "exact",
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    client: Any = None,
    note: Callable[[str], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest other samples of each row by ``method`` (:func:`choose_method`), on ``client``'s
    workers if given (a ``dask.distributed.Client``; the same bits as here); ``note``: ``-v``'s
    messages (:func:`~hdtwd_cli.knn._search.approximate_neighbors`)."""
    chosen = choose_method(method, tv.n)
    if chosen != "exact" and not 1 <= k < tv.n:
        raise ParameterError(f"must be between 1 and n - 1 = {tv.n - 1}", "k")
    if chosen == "nndescent":
        return approximate_neighbors(tv, k, seed, progress, client, note)
    if chosen == "pynndescent":
        from hdtwd_cli.knn._pynndescent import pynndescent_candidates

        clock = time.perf_counter()
        candidates = pynndescent_candidates(tv, min(tv.n - 1, int(np.ceil(CANDIDATE_FACTOR * k))), seed)
        if note is not None:
            note(f"pynndescent candidates: {time.perf_counter() - clock:.1f} s")
        return rerank(tv, candidates, k, progress, client)
    if client is not None:
        from hdtwd_cli.knn._dask import nearest_neighbors_dask

        return nearest_neighbors_dask(client, tv, k, progress=progress)
    if tv.n > BOUNDED_ABOVE and tv.dim >= BOUNDED_MIN_COLUMNS:
        return bounded_neighbors(tv, k, progress, note)
    return nearest_neighbors(tv, k, 2048, progress)
