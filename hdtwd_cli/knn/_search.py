r"""Nearest-neighbour search under the TWD: exact, or approximate candidates re-ranked exactly.

The TWD between two samples is the L1 distance between their tree vectors
:math:`y_i = (\alpha_v \mu_i(\Gamma_v))_v` (docs/method.md section 4), so any L1 nearest-neighbour
index finds TWD neighbours. ``exact`` is the blocked all-pairs search
(:func:`hdtwd_cli.twd._distance.nearest_neighbors`, O(n^2 d)); ``nndescent`` runs hdtwd's own
NN-descent (:mod:`hdtwd_cli.knn._nndescent`, random projection trees then local joins) on the tree
vectors quantised to bytes (a common uint16 grid, each column kept to 8 bits of its own range:
:class:`hdtwd_cli.knn._nndescent.ByteCode`), takes each sample's
:data:`CANDIDATE_FACTOR` x k approximate neighbours as candidates and re-ranks them with the exact
TWD (float64, bit for bit the exact kernel's values). Only the neighbour SET may differ from the
exact one; every stored distance is an exact TWD. The candidates are the same for a seed at any
thread count and on a Dask cluster (hashed random choices, integer distances, lists that keep the
smallest offers whatever their order; tested), and on AVX2 and AVX-512 (integer sums, no rounding),
so the graph is too; only :func:`partitions` uses BLAS (its k-means), whose rounding another CPU
kind may change for a sample on a border. Above
:data:`SEARCH_BYTES` of search vectors the samples are searched in overlapping k-means partitions
(:func:`partitions`), each one task (here, one after another; with a client, on its workers).
The columns NN-descent compares: all of them for raw samples (a column subset of full-rank counts
loses much of the recall), the :data:`SEARCH_COLUMNS` of widest range where the samples are denoised
(:func:`searched_columns`): their histograms lie near a subspace of the denoiser's rank, so a tenth of
40,000 columns ranks the candidates as well as all of them, at a tenth of the bytes read per pair
(the re-ranking uses every column).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.memory import available_memory
from hdtwd_cli.errors import HdtwdWarning, ParameterError
from hdtwd_cli.knn._nndescent import ByteCode, column_extremes, encode, range_code
from hdtwd_cli.tree._denoise import DenoisedRows
from hdtwd_cli.tree._kernels import nearest_centres
from hdtwd_cli.twd._distance import (
    TreeVectors,
    merge_candidates,
    smallest_k,
)
from hdtwd_cli.twd._kernels import l1_distances, l1_gather

__all__ = [
    "CANDIDATE_FACTOR",
    "SEARCH_COLUMNS",
    "approximate_neighbors",
    "rerank",
    "locality_order",
]

#: Candidates per sample from NN-descent, as a multiple of the neighbours wanted (then re-ranked).
#: Recall is bought where many samples are nearly equidistant (a cell type of 10,000 multinomial
#: draws): for k = 14, 32 candidates per sample, joined 3 x 32 per row
#: (:data:`hdtwd_cli.knn._nndescent.JOIN_FACTOR`), aim at recall@14 of about 0.98 on such cells; fewer
#: candidates or joins are faster but lose much of it (benchmarks/RESULTS.md, "Approximate neighbours").
CANDIDATE_FACTOR = 2.25
#: Samples searched at once, as bytes of their uint16 grid vectors (n x d x 2; NN-descent holds their
#: byte rows, half of that); above it the samples are searched in overlapping partitions
#: (:func:`partitions`), each one task: 134,000 samples of 2,000 genes (3,998 tree nodes) per partition.
SEARCH_BYTES = 1 << 30
#: Partitions each sample is placed in (its nearest k-means clusters) when the search is partitioned, at most.
PARTITION_OVERLAP = 2
#: A sample joins its 2nd (3rd...) nearest cluster only if that centre is at most this many times
#: as far as its nearest one (a border sample); ``inf``: always. 1.3 keeps nearly as many exact
#: neighbours in a partition shared with their row as placing every sample in 2, for far fewer
#: placements; a tighter border loses neighbours (benchmarks/RESULTS.md, "Approximate neighbours").
PARTITION_BORDER = 1.3
#: Mean k-means cluster size as a fraction of a partition's most rows (clusters above it are cut in
#: overlapping pieces): room for clusters of unequal size. Against 0.25, 0.5 halves the clusters,
#: places each sample in fewer partitions and keeps more of the exact neighbours in a partition
#: shared with their row (benchmarks/RESULTS.md, "Approximate neighbours").
PARTITION_FILL = 0.5
#: Tree-vector columns NN-descent compares when the samples are denoised (their widest, by range): on
#: denoised all-genes cells (40,000 columns) the candidates of 4,096 columns re-ranked exactly keep every
#: exact neighbour, at a tenth of the bytes read per pair (benchmarks/RESULTS.md, "Approximate neighbours").
#: A multiple of :data:`hdtwd_cli.knn._nndescent.SAD_WIDTH`.
SEARCH_COLUMNS = 4096
_PROJECTION_DIM = 32
_KMEANS_ITERATIONS = 10
#: Samples whose exact neighbours check a partitioned or column-subset search (``-v`` reports its recall on
#: them). Found during the pass that finds the byte code, so at the cost of the kernel alone.
RECALL_SAMPLE = 50
#: Below this recall on the sampled samples a partitioned search warns: its partitions do not
#: follow the samples' neighbourhoods. k-means partitions of word-count documents can keep half of
#: the exact neighbours out of reach (benchmarks/RESULTS.md, "Approximate neighbours").
RECALL_WARN = 0.9
#: Rows per re-ranking task (:func:`rerank`).
RERANK_TASK_ROWS = 1 << 16
#: Bytes of float64 vectors gathered per re-ranking block.
_RERANK_BYTES = 1 << 28
#: A partition's denoised rows are kept for its search (read for the byte vectors and again, about
#: twice, by the re-ranking) when they take at most this fraction of the available memory
#: (:meth:`~hdtwd_cli.twd._distance.TreeVectors.holding`; the same results either way).
HOLD_FRACTION = 0.25


def _rows_per_block(tv: TreeVectors) -> int:
    """Rows of float64 tree vectors that fit :data:`_RERANK_BYTES`."""
    return max(1, _RERANK_BYTES // max(1, 8 * tv.dim))


def vector_blocks(tv: TreeVectors, out: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """``(i0, Y)``: all samples' float64 tree vectors, block after block of :func:`_rows_per_block` rows
    (:meth:`TreeVectors.blocks`: each valid until the next; ``out``: all of them written into it)."""
    return tv.blocks(_RERANK_BYTES, out)


class ColumnRange:
    """Each tree-vector column's smallest and largest value over the blocks it is shown (:meth:`add`):
    the range of the search's :class:`~hdtwd_cli.knn._nndescent.ByteCode` (:meth:`code`)."""

    def __init__(self, dim: int) -> None:
        self.lows = np.full(dim, np.inf)
        self.highs = np.full(dim, -np.inf)

    def add(self, Y: np.ndarray) -> None:
        """Fold in a block of tree vectors."""
        if Y.shape[0]:
            column_extremes(np.ascontiguousarray(Y), self.lows, self.highs)

    def code(self, keep: int | None = None) -> ByteCode:
        """The byte code of these columns (:func:`hdtwd_cli.knn._nndescent.range_code`; ``keep``: of the
        ``keep`` widest only)."""
        seen = np.isfinite(self.lows)
        return range_code(np.where(seen, self.lows, 0.0), np.where(seen, self.highs, 0.0), keep)


def searched_columns(tv: TreeVectors) -> int:
    """The tree-vector columns NN-descent compares: :data:`SEARCH_COLUMNS` (the widest) where the samples
    are denoised rows and have more columns, else all of them (``tv.dim``)."""
    return min(tv.dim, SEARCH_COLUMNS) if isinstance(tv.x, DenoisedRows) else tv.dim


def search_code(tv: TreeVectors, visit: Callable[[int, np.ndarray], None] | None = None) -> ByteCode:
    """The :class:`~hdtwd_cli.knn._nndescent.ByteCode` of all samples' tree vectors on their
    :func:`searched_columns` (a pass of its own; :class:`ColumnRange`); ``visit(i0, Y)``, if given, sees
    each block of tree vectors."""
    bounds = ColumnRange(tv.dim)
    for i0, Y in vector_blocks(tv):
        bounds.add(Y)
        if visit is not None:
            visit(i0, Y)
    return bounds.code(searched_columns(tv))


def byte_vectors(tv: TreeVectors, rows: np.ndarray, code: ByteCode) -> np.ndarray:
    """The search rows of ``rows``: their uint16 grid vectors (:meth:`TreeVectors.quantised`, scale ``code.top``)
    in ``code``'s bytes (:func:`hdtwd_cli.knn._nndescent.encode`), row block by row block. Memory:
    |rows| x ``code.width`` bytes."""
    out = np.empty((rows.size, code.width), dtype=np.uint8)
    step = _rows_per_block(tv)
    buffers = tv.buffers(min(step, rows.size), vectors=not sp.issparse(tv.x))  # the fused kernel needs none
    for i0 in range(0, rows.size, step):
        out[i0 : i0 + step] = encode(tv.quantised(rows[i0 : i0 + step], code.top, buffers), code)
    return out


def locality_order(cand: np.ndarray) -> np.ndarray:
    """An order of the rows in which candidate lists are local: reverse Cuthill-McKee on the candidate graph.

    Rows next to each other in this order share most of their candidates, so a block of rows needs
    the vectors of few other rows (deterministic: RCM visits by degree, then index).
    """
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    n, c = cand.shape
    ok = cand >= 0
    G = sp.csr_matrix(
        (np.ones(int(ok.sum()), dtype=np.int8), cand[ok], np.concatenate([[0], np.cumsum(ok.sum(1))])), shape=(n, n)
    )
    return np.asarray(reverse_cuthill_mckee((G + G.T).tocsr(), symmetric_mode=True), dtype=np.int64)


def rerank(
    tv: TreeVectors, candidates: np.ndarray, k: int, progress: Callable[[int], None] | None = None, client: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` nearest among its ``candidates`` (n x c, other samples; ``-1``: none), by exact TWD.

    Rows are taken in :func:`locality_order`, in tasks of :data:`RERANK_TASK_ROWS` rows
    (:func:`rerank_rows`; on ``client``'s workers if given). A row's result depends only on its own
    candidates, so neither the tasks nor where they run change a bit.
    """
    remote = None
    if client is not None:
        from hdtwd_cli.knn._dask import Shipped

        remote = Shipped(client, tv)
    return _rerank(tv, candidates, k, progress, remote)


def _rerank(
    tv: TreeVectors,
    candidates: np.ndarray,
    k: int,
    progress: Callable[[int], None] | None,
    remote: Any,
    steps: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rerank` with the cluster's data already shipped (``remote``: a
    :class:`~hdtwd_cli.knn._dask.Shipped`, or None); ``progress`` gets ``steps`` (default n) in all.
    """
    n = candidates.shape[0]
    order = locality_order(candidates)
    chunks = [order[i0 : i0 + RERANK_TASK_ROWS] for i0 in range(0, n, RERANK_TASK_ROWS)]
    parts = _map(
        remote,
        rerank_rows,
        tv,
        [(rows, candidates[rows], k) for rows in chunks],
        "rerank",
        progress,
        split_steps(n if steps is None else steps, [rows.size for rows in chunks]),
    )
    out_i = np.empty((n, k), dtype=np.int64)
    out_d = np.empty((n, k))
    for rows, (idx, dist) in zip(chunks, parts):
        out_i[rows], out_d[rows] = idx, dist
    return out_i, out_d


def rerank_rows(tv: TreeVectors, rows: np.ndarray, candidates: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest of each of ``rows`` among its ``candidates`` row, by exact TWD, ordered by (distance, index).

    In blocks whose own vectors and their candidates' vectors fit a fixed budget (:data:`_RERANK_BYTES`):
    neighbouring rows (in :func:`locality_order`) share candidates, so each vector is computed about
    twice instead of ``c`` times. Distances come from
    :func:`hdtwd_cli.twd._kernels.l1_gather`, bit for bit the exact kernel's.

    The vectors live in a cache of :func:`_rows_per_block` rows (:data:`_RERANK_BYTES`; at least one
    row and its candidates) that outlives the blocks: a block computes only the vectors of its rows
    and candidates that are not there, evicting those the longest unused. Consecutive blocks share
    most of their candidates, so most vectors are computed once per task; a vector's bits depend on
    its row alone, so the cache changes the time, never a distance.
    """
    from hdtwd_cli.twd._kernels import norms

    m = rows.size
    out_d = np.empty((m, k))
    out_i = np.empty((m, k), dtype=np.int64)
    cap = max(2, _rows_per_block(tv), candidates.shape[1] + 1)  # vectors held at once
    step = max(1, cap // 4)
    cache = np.empty((cap, tv.dim), dtype=np.dtype(tv.dtype))
    fresh, values = tv.buffers(cap)  # one block's computed vectors and their values: reused
    assert fresh is not None
    own_vectors = np.empty((min(step, m), tv.dim), dtype=np.dtype(tv.dtype))
    cache_norms = np.zeros(cap)
    owner = np.full(cap, -1, dtype=np.int64)  # the sample in each slot
    used = np.full(cap, -1, dtype=np.int64)  # the block that last read each slot
    slot_of = np.full(tv.n, -1, dtype=np.int64)  # each sample's slot, -1: not cached
    block = 0
    i0 = 0
    while i0 < m:
        r = np.arange(i0, min(i0 + step, m))
        while True:
            cand = candidates[r]
            need = np.unique(np.concatenate([rows[r], cand[cand >= 0]]))
            if r.size == 1 or need.size <= cap:
                break
            r = r[: r.size // 2]
        have = slot_of[need]
        used[have[have >= 0]] = block
        missing = need[have < 0]
        if missing.size:
            free = np.argsort(used, kind="stable")[: missing.size]  # not read by this block
            gone = owner[free]
            slot_of[gone[gone >= 0]] = -1
            Y = tv.of_rows(
                missing, out=fresh[: missing.size], values=None if values is None else values[: missing.size]
            )
            cache[free] = Y
            cache_norms[free] = norms(Y)
            owner[free] = missing
            used[free] = block
            slot_of[missing] = free
        own = slot_of[rows[r]]
        A = np.take(cache, own, axis=0, out=own_vectors[: own.size], mode="clip")
        at = np.where(cand >= 0, slot_of[np.maximum(cand, 0)], 0)
        D = np.empty(cand.shape)
        l1_gather(A, cache, at, D, cache_norms[own], cache_norms)
        D[cand < 0] = np.inf
        out_d[r], out_i[r] = smallest_k(D, cand, k)
        i0 += r.size
        block += 1
    order = np.lexsort((out_i, out_d), axis=1)
    return np.take_along_axis(out_i, order, axis=1), np.take_along_axis(out_d, order, axis=1)


def approximate_neighbors(
    tv: TreeVectors,
    k: int,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    client: Any = None,
    note: Callable[[str], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's ``k`` nearest other samples: NN-descent candidates, exact TWD re-ranking.

    The samples are searched whole when their uint16 grid vectors fit :data:`SEARCH_BYTES`, else
    in the overlapping :func:`partitions`; each partition's NN-descent and exact re-ranking
    (:func:`partition_neighbors`) is one task, run here one after another or,
    with ``client`` (a ``dask.distributed.Client``), on the cluster's workers
    (:class:`hdtwd_cli.knn._dask.Shipped`); the partitions' lists are then merged
    (:func:`merge_neighbors`). ``progress`` receives ``n`` in all, as the partitions finish (in
    proportion to their rows); ``note``
    (``-v``'s messages) gets the partitions and each phase's wall time, and a partitioned or column-subset
    (:func:`searched_columns`) search's recall on :data:`RECALL_SAMPLE` sampled samples
    (:class:`SampledExact`; an :class:`~hdtwd_cli.errors.HdtwdWarning` below :data:`RECALL_WARN`). The tasks'
    results do not depend on where or in what order they run (hdtwd's NN-descent gives the same lists at
    any thread count), so the cluster's answer is the single process's, bit for bit.

    Returns
    -------
    indices : ndarray of int64, shape (n, k)
    distances : ndarray of float64, shape (n, k)
        Exact TWDs, ordered by (distance, index).
    """
    n = tv.n
    if not 1 <= k < n:
        raise ParameterError(f"must be between 1 and n - 1 = {n - 1}", "k")
    from hdtwd_cli.knn._nndescent import first_width, join_width

    say = note if note is not None else (lambda message: None)
    clock = time.perf_counter()
    c = min(n - 1, int(np.ceil(CANDIDATE_FACTOR * k)))
    width = searched_columns(tv)
    check = None
    if n * width * 2 <= SEARCH_BYTES:  # one group: its rows held before the pass that finds the code
        tv = tv.holding(np.arange(n), int(available_memory() * HOLD_FRACTION))
        if width < tv.dim:  # a column subset: its recall checked in the same pass
            check = SampledExact(tv, k, seed)
        code = search_code(tv, visit=None if check is None else check.add)
        groups = [np.arange(n)]
    else:  # one pass over the tree vectors: the projection, the recall's exact rows and the columns' ranges
        check = SampledExact(tv, k, seed)
        bounds = ColumnRange(tv.dim)

        def visit(i0: int, Y: np.ndarray) -> None:
            check.add(i0, Y)
            bounds.add(Y)

        groups = partitions(tv, max(c + 2, SEARCH_BYTES // (2 * width)), seed, visit=visit, min_size=c + 1)
        code = bounds.code(width)
    placed = sum(g.size for g in groups)
    say(
        f"NN-descent in {len(groups)} partition(s) of {min(g.size for g in groups)}-{max(g.size for g in groups)} "
        f"samples ({placed / n:.2f} per sample) on {width} of {tv.dim} tree-vector columns"
        f"{' (the widest: denoised samples)' if width < tv.dim else ''}, lists of {c}, {first_width(c)} then "
        f"{join_width(c)} joined per row: {time.perf_counter() - clock:.1f} s to partition"
    )
    remote = None
    if client is not None:
        from hdtwd_cli.knn._dask import Shipped

        remote = Shipped(client, tv)
    clock = time.perf_counter()
    shares = split_steps(n, [g.size for g in groups])
    if remote is not None:
        found = remote.map(partition_neighbors, [(g, c, k, seed, code) for g in groups], "nndescent", progress, shares)
    else:  # here: each partition reports its two halves
        found = [partition_neighbors(tv, g, c, k, seed, code, progress, share) for g, share in zip(groups, shares)]
    say(f"NN-descent and exact re-ranking of {placed * c} candidates: {time.perf_counter() - clock:.1f} s")
    clock = time.perf_counter()
    out = merge_neighbors(tv, groups, found, k, c)
    if len(groups) > 1:
        say(f"merging the partitions' neighbours: {time.perf_counter() - clock:.1f} s")
    if check is not None:
        share = check.recall(out[1])
        how = "partitioned" if len(groups) > 1 else f"{width}-column"
        say(
            f"recall@{k} of the {how} search on {check.rows.size} sampled samples (against their exact "
            f"neighbours): {share:.3f}"
        )
        if share < RECALL_WARN:
            why = (
                "its k-means partitions do not follow these samples' neighbourhoods"
                if len(groups) > 1
                else f"the {width} widest tree-vector columns do not rank these samples' neighbours"
            )
            warnings.warn(
                HdtwdWarning(
                    f"the {how} approximate search found {share:.0%} of the exact {k} nearest neighbours of "
                    f"{check.rows.size} sampled samples: {why} (--knn-method exact is complete)"
                ),
                stacklevel=2,
            )
    return out


def split_steps(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (integers that add up to ``total``)."""
    edges = np.floor(np.cumsum(weights, dtype=np.float64) * total / max(1, sum(weights))).astype(np.int64)
    return np.diff(np.concatenate([[0], edges])).tolist()


def _map(
    remote: Any,
    fn: Callable,
    tv: TreeVectors,
    args: list[tuple],
    name: str,
    progress: Callable[[int], None] | None = None,
    sizes: list[int] | None = None,
) -> list:
    """``[fn(tv, *a) for a in args]``, here or as tasks on a cluster (``remote``: a
    :class:`hdtwd_cli.knn._dask.Shipped`); the same results in the same order."""
    if remote is not None:
        return remote.map(fn, args, name, progress, sizes)
    out = []
    for i, a in enumerate(args):
        out.append(fn(tv, *a))
        if progress is not None and sizes is not None:
            progress(sizes[i])
    return out


def partition_neighbors(
    tv: TreeVectors,
    rows: np.ndarray,
    c: int,
    k: int,
    seed: int,
    code: ByteCode,
    progress: Callable[[int], None] | None = None,
    share: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``rows``' ``min(k, w)`` nearest among its ``w = min(c, |rows| - 1)`` NN-descent candidates
    in ``rows``, by exact TWD, as indices of all samples and distances, ordered by (distance, index).

    NN-descent (:func:`hdtwd_cli.knn._nndescent.nn_descent`) runs on the rows' byte vectors
    (:func:`byte_vectors`, ``code`` of all samples); the re-ranking (:func:`rerank_rows`) takes the rows in
    the :func:`locality_order` of the partition's own candidate graph, so a block of rows needs the
    vectors of few others (a re-ranking of all samples' merged candidates after the partitions
    would gather scattered vectors, several times the cost per candidate). Memory: ``|rows|`` x
    ``code.width`` bytes and the re-ranking's blocks (:data:`_RERANK_BYTES`). ``progress`` gets half of ``share`` after
    the NN-descent and the rest after the re-ranking.
    """
    from hdtwd_cli.knn._nndescent import nn_descent

    w = min(c, rows.size - 1)
    tv = tv.holding(rows, int(available_memory() * HOLD_FRACTION))
    local = nn_descent(byte_vectors(tv, rows, code), code, w, seed)
    if progress is not None:
        progress(share // 2)
    order = locality_order(local)
    idx, dist = rerank_rows(tv, rows[order], rows[local[order]], min(k, w))
    if progress is not None:
        progress(share - share // 2)
    out_i = np.empty_like(idx)
    out_d = np.empty_like(dist)
    out_i[order], out_d[order] = idx, dist
    return out_i, out_d


def merge_neighbors(
    tv: TreeVectors, groups: list[np.ndarray], found: list[tuple[np.ndarray, np.ndarray]], k: int, c: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every sample's ``k`` nearest among its partitions' neighbours (:func:`partition_neighbors`).

    The ``k`` smallest by (distance, index) of the union of the partitions' lists are those of the
    union of all their candidates: the distances are the exact kernel's, the same for a pair in any
    partition. A sample whose partitions hold fewer than ``c`` other samples in all, or whose lists
    hold fewer than ``k`` distinct neighbours, is re-ranked among them and other samples in index order
    (:func:`rerank`; tiny partitions only).
    """
    n = tv.n
    width = np.zeros(n, dtype=np.int64)
    held = np.zeros(n, dtype=np.int64)
    for g, (fi, _) in zip(groups, found):
        width[g] += fi.shape[1]
        held[g] += g.size - 1
    I = np.full((n, max(k, int(width.max()))), -1, dtype=np.int64)
    D = np.full(I.shape, np.inf)
    fill = np.zeros(n, dtype=np.int64)
    for g, (fi, fd) in zip(groups, found):
        cols = fill[g][:, None] + np.arange(fi.shape[1])[None, :]
        I[g[:, None], cols] = fi
        D[g[:, None], cols] = fd
        fill[g] += fi.shape[1]
    order = np.lexsort((D, I), axis=1)  # by index, then distance: a neighbour found twice is adjacent
    I = np.take_along_axis(I, order, axis=1)
    D = np.take_along_axis(D, order, axis=1)
    dup = np.zeros(I.shape, dtype=bool)
    dup[:, 1:] = (I[:, 1:] == I[:, :-1]) & (I[:, 1:] >= 0)
    I[dup] = -1
    D[dup | (I < 0)] = np.inf
    out_d, out_i = smallest_k(D, I, k)
    order = np.lexsort((out_i, out_d), axis=1)
    out_i = np.take_along_axis(out_i, order, axis=1)
    out_d = np.take_along_axis(out_d, order, axis=1)
    short = np.flatnonzero((held < c) | (out_i < 0).any(axis=1))
    if short.size:
        cand = np.full((short.size, max(c, I.shape[1])), -1, dtype=np.int64)
        for t, r in enumerate(short):  # rare: tiny partitions; add other samples in index order
            have = np.unique(I[r][I[r] >= 0])
            extra = np.setdiff1d(np.arange(min(n, cand.shape[1] + have.size + 1)), np.append(have, r))
            row = np.concatenate([have, extra])[: cand.shape[1]]
            cand[t, : row.size] = row
        out_i[short], out_d[short] = rerank_rows(tv, short, cand, k)
    return out_i, out_d


class SampledExact:
    """The exact ``k`` nearest other samples of ``size`` sampled samples, gathered block by block.

    :meth:`add` takes consecutive blocks of all samples' tree vectors (as :func:`partitions`' pass
    computes them, or :meth:`scan` on its own); :meth:`recall` then measures a search against them.
    The samples are ``rows``, or ``size`` drawn with ``numpy.random.default_rng(seed)``.
    """

    def __init__(
        self, tv: TreeVectors, k: int, seed: int = 0, size: int = RECALL_SAMPLE, rows: np.ndarray | None = None
    ) -> None:
        if rows is None:
            rows = np.sort(np.random.default_rng(seed).choice(tv.n, min(size, tv.n), replace=False))
        self.rows = np.asarray(rows, dtype=np.int64)
        self.vectors = tv.of_rows(self.rows)
        self.distances = np.full((self.rows.size, k), np.inf)
        self.indices = np.full((self.rows.size, k), -1, dtype=np.int64)

    def add(self, i0: int, Y: np.ndarray) -> None:
        """Fold in the samples ``i0 .. i0 + len(Y)`` (their tree vectors ``Y``)."""
        D = l1_distances(self.vectors, Y).astype(np.float64, copy=False)
        D[self.rows[:, None] == np.arange(i0, i0 + Y.shape[0])[None, :]] = np.inf  # not one's own neighbour
        merge_candidates(self.distances, self.indices, np.arange(self.rows.size), D, i0)

    def scan(self, tv: TreeVectors) -> SampledExact:
        """:meth:`add` every block of ``tv`` (a pass of its own); returns ``self``."""
        for i0, Y in vector_blocks(tv):
            self.add(i0, Y)
        return self

    def recall(self, distances: np.ndarray) -> float:
        """Share of the sampled samples' ``k`` found neighbours (their exact TWDs, all samples'
        ``distances``) that are at most as far as their exact ``k``-th nearest: recall@k, ties
        counted as found."""
        kth = self.distances.max(axis=1, keepdims=True)  # the k-th nearest (the k are in no order)
        return float(np.mean(distances[self.rows] <= kth * (1.0 + 1e-12)))


def cluster_sums(Z: np.ndarray, labels: np.ndarray, count: int) -> np.ndarray:
    """``S[p] = sum of the rows Z[i] with labels[i] == p``, added in row order (float64).

    ``np.bincount`` with weights, one column at a time: the same additions in the same order as
    ``np.add.at(S, labels, Z)``, hence the same bits, in a fraction of its time (``np.add.at`` is
    unbuffered, one element at a time); k-means' update step in :func:`partitions`.
    """
    return np.stack([np.bincount(labels, weights=Z[:, j], minlength=count) for j in range(Z.shape[1])], axis=1)


def partitions(
    tv: TreeVectors,
    max_rows: int,
    seed: int = 0,
    overlap: int | None = None,
    border: float | None = None,
    fill: float | None = None,
    visit: Callable[[int, np.ndarray], None] | None = None,
    min_size: int = 2,
) -> list[np.ndarray]:
    """Overlapping groups of at most ``max_rows`` samples in which to search for neighbours.

    k-means (Lloyd, :data:`_KMEANS_ITERATIONS` rounds, seeded) on a Gaussian random projection of the
    tree vectors to :data:`_PROJECTION_DIM` dimensions, every sample placed in its ``overlap``
    nearest clusters (so that neighbours across a cluster border share one); a cluster larger than
    ``max_rows`` is cut into pieces of ``max_rows`` along its first projected coordinate, consecutive
    pieces overlapping by a quarter (the last one by more). ``n / (fill max_rows)`` clusters (:data:`PARTITION_FILL`).
    ``visit(i0, Y)``, if given, sees each block of tree vectors as the projection computes it.
    Clusters that are the nearest of fewer than ``min_size`` samples are dissolved into the others
    (their samples go to their nearest remaining centres), so that no sample is left in a cluster
    of its own: k-means centres end on outliers, and a sample alone in its partition would have
    no candidates but arbitrary samples (:func:`merge_neighbors`' fallback).
    """
    n = tv.n
    overlap = PARTITION_OVERLAP if overlap is None else overlap
    border = PARTITION_BORDER if border is None else border
    fill = PARTITION_FILL if fill is None else fill
    rng = np.random.default_rng(seed)
    omega = rng.standard_normal((tv.dim, _PROJECTION_DIM))
    Z = np.empty((n, _PROJECTION_DIM))
    for i0, Y in vector_blocks(tv):
        Z[i0 : i0 + Y.shape[0]] = Y @ omega
        if visit is not None:
            visit(i0, Y)
    n_parts = max(overlap + 1, int(np.ceil(n / (fill * max_rows))))
    centres = Z[np.sort(rng.choice(n, size=n_parts, replace=False))]
    for _ in range(_KMEANS_ITERATIONS + 1):
        near, ranked = nearest_centres(Z, centres, overlap)  # squared distances
        counts = np.bincount(near[:, 0], minlength=n_parts)
        sums = cluster_sums(Z, near[:, 0], n_parts)
        moved = counts > 0
        last = centres.copy()  # the centres ``near`` was found with
        centres[moved] = sums[moved] / counts[moved, None]
    small = counts < min_size
    if small.any() and not small.all():  # only the nearest of few: its samples go to their next centres
        near, ranked = nearest_centres(Z, last[~small], overlap)
        n_parts = int((~small).sum())
    placed = np.ones(near.shape, dtype=bool)
    if np.isfinite(border):
        placed = ranked <= (border * border) * ranked[:, :1]
        placed[:, 0] = True
    groups = []
    for p in range(n_parts):
        members = np.flatnonzero(((near == p) & placed).any(axis=1))
        if members.size <= max_rows:
            if members.size > 1:
                groups.append(members)
            continue
        members = members[np.argsort(Z[members, 0], kind="stable")]
        stride = max(1, (3 * max_rows) // 4)  # pieces of max_rows, the last one ending at the end
        for s0 in [*range(0, members.size - max_rows, stride), members.size - max_rows]:
            groups.append(np.sort(members[s0 : s0 + max_rows]))
    return groups
