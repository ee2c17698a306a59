r"""The exact nearest neighbours under the TWD, pruned by lower bounds from grouped sums of the tree vectors.

The TWD is the L1 distance between tree vectors :math:`y_i` (docs/method.md section 4). Cut the
``d`` columns into ``s`` groups :math:`g_1 .. g_s` and sum each group: :math:`p_i = (\sum_{e \in g}
y_{ie})_g`. By the triangle inequality, group by group,

.. math:: \lVert p_i - p_j\rVert_1 = \sum_g \Bigl|\sum_{e \in g} (y_{ie} - y_{je})\Bigr|
          \le \sum_g \sum_{e \in g} |y_{ie} - y_{je}| = \mathrm{TWD}(i, j),

a lower bound from ``s`` columns instead of ``d`` (filter and refine: Faloutsos et al. 1994, GEMINI).
It is tight where a group's columns move together between samples, so the groups are the clusters
of the columns' profiles over a fixed sample of rows (spherical k-means, :func:`sketch_groups`): on
10,000 generated cells over 53,000 tree nodes, 256 groups leave about 30 candidates per sample whose
bound does not exceed its k-th neighbour's distance (k = 14).

The search (:func:`bounded_neighbors`) for every sample ``i``:

1. its :data:`KEPT_FACTOR` x k smallest bounds (the blocked search of the ``p``, ordered by (bound, index));
2. the exact TWD to the first :data:`FIRST_FACTOR` x k of them: their k-th smallest, :math:`U_i`, is at
   least the k-th nearest neighbour's distance :math:`d_k(i)`;
3. the exact TWD to every other kept sample whose bound is at most :math:`U_i` (plus a rounding
   margin, :func:`margin`); where a kept list might end below :math:`U_i`, all samples' bounds are read
   again for that row;
4. the k smallest of all exact distances by (distance, index).

Every sample ``j`` with :math:`\mathrm{TWD}(i, j) \le d_k(i)` has a bound at most :math:`U_i`, so it is
among the measured ones: the neighbour SET is that of the all-pairs search, and every distance comes
from the exact kernel (:func:`~hdtwd_cli.twd._kernels.l1_gather`, bit for bit
:func:`~hdtwd_cli.twd._kernels.l1_distances`'), so the result is the all-pairs search's, bit for bit
(tested). The groups change the time only: a column's group never changes a bound's validity.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from hdtwd_cli._runtime.jit import njit, prange
from hdtwd_cli._runtime.memory import available_memory
from hdtwd_cli.knn._search import (
    HOLD_FRACTION,
    RERANK_TASK_ROWS,
    locality_order,
    rerank_rows,
    split_steps,
    vector_blocks,
)
from hdtwd_cli.twd._distance import TreeVectors, nearest_neighbors, smallest_k
from hdtwd_cli.twd._kernels import l1_distances, l1_gather, norms

__all__ = ["PAYS_BELOW", "SKETCH_GROUPS", "bounded_neighbors", "group_sums", "margin", "pruning_share", "sketch_groups"]

#: Groups of columns summed into the bounds' vectors (``s``).
SKETCH_GROUPS = 256
#: Rows whose vectors give the columns' profiles for the grouping (evenly spaced samples).
SKETCH_ROWS = 512
#: Spherical k-means iterations of the grouping.
SKETCH_ITERATIONS = 8
#: Smallest bounds kept per sample, as a multiple of ``k``.
KEPT_FACTOR = 16
#: Kept samples whose exact distance gives the upper bound :math:`U_i`, as a multiple of ``k``.
FIRST_FACTOR = 2
#: The pruning runs where :func:`pruning_share` is at most this (else every pair is measured): a
#: gathered exact distance costs several tiled ones, so the pruning pays only where it leaves few.
PAYS_BELOW = 0.02
#: Relative rounding margin of a bound against an exact distance (both are float64 sums of at most
#: ``d`` non-negative terms of the rows' norms: their rounding is below ``d`` x 2^-53 of the norms).
MARGIN = 1e-9
#: Rows whose bounds to every sample are read again at once.
_SHORT_ROWS = 256
#: Rows whose candidates' distances are gathered at once from held vectors (their own vectors copied).
_GATHER_ROWS = 256


def sketch_groups(Y: np.ndarray, groups: int, iterations: int = SKETCH_ITERATIONS) -> np.ndarray:
    """Each column's group: spherical k-means of the columns' centred profiles over the rows of ``Y``.

    Started from the ``groups`` columns of largest spread (ties by index); a column that never
    varies joins group 0. The groups decide how tight the bounds are, never whether they hold.
    """
    C = np.array(Y, dtype=np.float64).T  # d x rows
    C -= C.mean(axis=1, keepdims=True)
    size = np.linalg.norm(C, axis=1)
    live = size > 0
    C[live] /= size[live, None]
    g = int(min(groups, max(1, int(live.sum()))))
    centres = C[np.argsort(-size, kind="stable")[:g]]
    labels = np.zeros(C.shape[0], dtype=np.int64)
    similarity = np.empty((C.shape[0], g))  # one buffer for every round
    for _ in range(iterations):
        labels = np.argmax(np.matmul(C, centres.T, out=similarity), axis=1)
        sums = group_sums(C.T, labels, g).T
        length = np.linalg.norm(sums, axis=1)
        full = length > 0
        centres[full] = sums[full] / length[full, None]
    labels[~live] = 0
    return labels


def pruning_share(Ys: np.ndarray, labels: np.ndarray, groups: int) -> float:
    """The share of pairs whose bound would be measured, estimated on the sampled rows ``Ys``.

    Each sampled row's nearest other sampled row (exact TWD) stands in for its k-th nearest sample
    (512 of 10,000 samples: about the 20th); the share is the mean fraction of the other sampled
    rows whose bound is at most that distance. Each such pair costs a gathered exact distance,
    several times a pair of the all-pairs search's tiled kernel.
    """
    if Ys.shape[0] < 3:
        return 1.0
    exact = l1_distances(Ys)
    bound = l1_distances(group_sums(Ys, labels, groups))
    np.fill_diagonal(exact, np.inf)
    np.fill_diagonal(bound, np.inf)
    nearest = exact.min(axis=1)
    return float(np.mean((bound <= nearest[:, None]).sum(axis=1) / (Ys.shape[0] - 1)))


def margin(bound: np.ndarray, row_norms: np.ndarray, largest_norm: float) -> np.ndarray:
    """The bound's rounding allowance against an exact distance: :data:`MARGIN` x (bound + the norms)."""
    return MARGIN * (bound + row_norms + largest_norm)


@njit(parallel=True, cache=True, nogil=True)
def _group_sums_kernel(Y, labels, out):  # pragma: no cover - compiled
    for r in prange(Y.shape[0]):
        acc = np.zeros(out.shape[1])
        for j in range(Y.shape[1]):
            acc[labels[j]] += Y[r, j]
        out[r] = acc


def group_sums(Y: np.ndarray, labels: np.ndarray, groups: int) -> np.ndarray:
    r"""``P[i, g]`` = :math:`\sum_{j: labels_j = g} Y_{ij}` (float64, ``n x groups``), each group's columns added in
    increasing order from 0: the bits of the sparse product ``(G @ Y.T).T`` with ``G[g, j] = [labels_j = g]``,
    row by row in place, without the transposed copy of ``Y`` that product makes."""
    out = np.empty((Y.shape[0], groups))
    if Y.shape[0]:
        _group_sums_kernel(np.ascontiguousarray(Y), np.asarray(labels, dtype=np.int64), out)
    return out


class _Vectors:
    """The tree vectors the search measures: all of them held (``Y``) where they fit, else computed by
    :func:`rerank_rows` from ``tv`` (its cache; the denoised rows held where they fit)."""

    def __init__(self, tv: TreeVectors, budget: int) -> None:
        self.tv = tv
        self.Y: np.ndarray | None = None
        if tv.n * tv.dim * np.dtype(tv.dtype).itemsize <= budget:
            self.Y = np.empty((tv.n, tv.dim), dtype=np.dtype(tv.dtype))
        else:
            self.tv = tv.holding(np.arange(tv.n), budget)
        self.norms = np.empty(tv.n)

    def measure(
        self, rows: np.ndarray, cand: np.ndarray, k: int, progress: Callable[[int], None] | None, steps: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each of ``rows``' ``k`` nearest among its ``cand`` (``-1``: none) by exact TWD, ordered by
        (distance, index); :func:`rerank_rows` in tasks of :data:`RERANK_TASK_ROWS` rows, or on the held vectors."""
        out_i = np.empty((rows.size, k), dtype=np.int64)
        out_d = np.empty((rows.size, k))
        chunk = RERANK_TASK_ROWS if self.Y is None else _GATHER_ROWS
        starts = range(0, rows.size, chunk)
        own = None if self.Y is None else np.empty((min(chunk, rows.size), self.Y.shape[1]), dtype=self.Y.dtype)
        for share, i0 in zip(split_steps(steps, [min(chunk, rows.size - i) for i in starts]), starts):
            r, c = rows[i0 : i0 + chunk], cand[i0 : i0 + chunk]
            if self.Y is None:
                out_i[i0 : i0 + r.size], out_d[i0 : i0 + r.size] = rerank_rows(self.tv, r, c, k)
            else:
                D = np.empty(c.shape)
                A = np.take(self.Y, r, axis=0, out=own[: r.size], mode="clip")  # type: ignore[index]  # one buffer
                l1_gather(A, self.Y, np.maximum(c, 0), D, self.norms[r], self.norms)
                D[c < 0] = np.inf
                d, i = smallest_k(D, c, k)
                order = np.lexsort((i, d), axis=1)
                out_i[i0 : i0 + r.size] = np.take_along_axis(i, order, axis=1)
                out_d[i0 : i0 + r.size] = np.take_along_axis(d, order, axis=1)
            if progress is not None:
                progress(share)
        return out_i, out_d


def _merge(
    best_i: np.ndarray, best_d: np.ndarray, more_i: np.ndarray, more_d: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` smallest by (distance, index) of two disjoint lists per row (``-1`` / inf: none)."""
    d, i = smallest_k(np.concatenate([best_d, more_d], axis=1), np.concatenate([best_i, more_i], axis=1), k)
    order = np.lexsort((i, d), axis=1)
    return np.take_along_axis(i, order, axis=1), np.take_along_axis(d, order, axis=1)


def bounded_neighbors(
    tv: TreeVectors,
    k: int,
    progress: Callable[[int], None] | None = None,
    note: Callable[[str], None] | None = None,
    groups: int = SKETCH_GROUPS,
    kept: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's ``k`` nearest other samples under the TWD, exactly: the all-pairs search's result, bit for bit.

    See the module docstring. Memory beyond the data: the ``n x s`` bound vectors, ``n x KEPT_FACTOR k``
    kept bounds and the re-ranking's blocks; all tree vectors are held where they take at most
    :data:`~hdtwd_cli.knn._search.HOLD_FRACTION` of the available memory, else the denoised rows where
    those do (the same bits either way). Where :func:`pruning_share` exceeds :data:`PAYS_BELOW`, the
    all-pairs search runs instead.
    ``progress`` gets ``n`` steps in all; ``note``: ``-v``'s message (the candidates measured).
    ``kept`` overrides the kept bounds per sample (tests: a short list makes rows read all bounds again).

    Returns
    -------
    indices : ndarray of int64, shape (n, k)
    distances : ndarray of float64, shape (n, k)
        Ordered by (distance, index).
    """
    n = tv.n
    c = min(n - 1, KEPT_FACTOR * k if kept is None else int(kept))
    first = min(c, FIRST_FACTOR * k)
    if c < k or first < k:
        raise ValueError("the kept bounds must cover k")
    sketch_steps, bound_steps, measure_steps = split_steps(n, [1, 1, 2])
    times = [time.perf_counter()]
    sample = np.unique(np.linspace(0, n - 1, min(n, SKETCH_ROWS)).astype(np.int64))
    Ys = tv.of_rows(sample)
    labels = sketch_groups(Ys, groups)
    s = int(labels.max()) + 1
    share = pruning_share(Ys, labels, s)
    if share > PAYS_BELOW:
        if note is not None:
            note(
                f"exact search of all pairs: the {s} grouped sums' bounds would keep {share:.1%} of the "
                f"pairs (the lower-bound pruning pays below {PAYS_BELOW:.0%})"
            )
        return nearest_neighbors(tv, k, 2048, progress)
    vectors = _Vectors(tv, int(available_memory() * HOLD_FRACTION))
    tv = vectors.tv
    P = np.empty((n, s))
    for i0, Y in vector_blocks(tv, vectors.Y):  # held: written straight into place
        i1 = i0 + Y.shape[0]
        P[i0:i1] = group_sums(Y, labels, s)
        vectors.norms[i0:i1] = norms(Y)
        if progress is not None:
            progress(sketch_steps * i1 // n - sketch_steps * i0 // n)
    times.append(time.perf_counter())
    kept_i, kept_b = nearest_neighbors(P, c)
    times.append(time.perf_counter())
    if progress is not None:
        progress(bound_steps)
    largest = float(vectors.norms.max())
    order = locality_order(kept_i[:, :first])
    best_i, best_d = vectors.measure(order, kept_i[order, :first], k, progress, measure_steps // 2)
    upper = np.empty(n)
    upper[order] = best_d[:, k - 1] + margin(best_d[:, k - 1], vectors.norms[order], largest)
    found_i = np.empty((n, k), dtype=np.int64)
    found_d = np.empty((n, k))
    found_i[order], found_d[order] = best_i, best_d
    measured = n * first
    more = kept_b[:, first:] <= upper[:, None]
    rows = order[more[order].any(axis=1)]
    if rows.size:
        extra = np.where(more[rows], kept_i[rows, first:], -1)
        width = max(k, int(more[rows].sum(axis=1).max()))
        extra = -np.sort(-extra, axis=1)[:, :width]  # the candidates first, -1 after
        if extra.shape[1] < k:
            extra = np.pad(extra, ((0, 0), (0, k - extra.shape[1])), constant_values=-1)
        measured += int((extra >= 0).sum())
        more_i, more_d = vectors.measure(rows, extra, k, None, 0)
        more_d[more_i < 0] = np.inf
        found_i[rows], found_d[rows] = _merge(found_i[rows], found_d[rows], more_i, more_d, k)
    if progress is not None:
        progress(measure_steps - measure_steps // 2)
    # a kept list that ends at or below U_i may miss samples: read all of that row's bounds again
    short = np.flatnonzero(kept_b[:, c - 1] <= upper) if c < n - 1 else np.empty(0, dtype=np.int64)
    for r0 in range(0, short.size, _SHORT_ROWS):
        rows = short[r0 : r0 + _SHORT_ROWS]
        bound = l1_distances(P[rows], P)
        bound[np.arange(rows.size), rows] = np.inf
        np.put_along_axis(bound, kept_i[rows], np.inf, axis=1)  # measured already (every kept bound <= U_i)
        hit = bound <= upper[rows, None]
        width = max(k, int(hit.sum(axis=1).max()))
        cand = np.full((rows.size, width), -1, dtype=np.int64)
        at, col = np.nonzero(hit)
        cand[at, np.arange(at.size) - np.concatenate([[0], np.cumsum(hit.sum(axis=1))[:-1]])[at]] = col
        measured += col.size
        more_i, more_d = vectors.measure(rows, cand, k, None, 0)
        more_d[more_i < 0] = np.inf
        found_i[rows], found_d[rows] = _merge(found_i[rows], found_d[rows], more_i, more_d, k)
    if note is not None:
        times.append(time.perf_counter())
        note(
            f"exact search pruned by lower bounds ({s} grouped sums of {tv.dim} tree-vector columns: "
            f"{times[1] - times[0]:.1f} s; the {c} smallest bounds per sample: {times[2] - times[1]:.1f} s): "
            f"{measured / n:.1f} exact distances per sample, {short.size} sample(s) reading every bound again: "
            f"{times[3] - times[2]:.1f} s"
        )
    return found_i, found_d
