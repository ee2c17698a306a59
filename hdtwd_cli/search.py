r"""Nearest-neighbour search under the TWD: exact, or approximate candidates re-ranked exactly.

The TWD between two samples is the L1 distance between their tree vectors
:math:`y_i = (\alpha_v \mu_i(\Gamma_v))_v` (docs/method.md section 4), so any L1 nearest-neighbour
index finds TWD neighbours. ``exact`` is the blocked all-pairs search
(:func:`hdtwd_cli.distance.nearest_neighbours`, O(n^2 d)); ``nndescent`` builds pynndescent's
NN-descent graph (the library scanpy and UMAP use) with the Manhattan metric on dense float32
vectors, takes each sample's :data:`CANDIDATE_FACTOR` x k approximate
neighbours as candidates and re-ranks them with the exact TWD (float64, bit for bit the exact
kernel's values). Only the neighbour SET may differ from the exact one; every stored distance
is an exact TWD. Deterministic for a fixed seed (pynndescent's ``random_state``; tested across
processes). All the tree-vector columns are searched: keeping only the 256 or 1,024 columns that
carry most of the TWD lost recall (Zeisel: 0.63 and 0.81 instead of 0.9999).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np

from ._kernels import l1_gather
from .distance import TreeVectors, nearest_neighbours, smallest_k
from .errors import ParameterError

__all__ = ["KNN_METHODS", "AUTO_NNDESCENT_ABOVE", "CANDIDATE_FACTOR", "choose_method", "approximate_neighbours",
           "neighbours", "rerank", "locality_order"]

KnnMethod = Literal["exact", "nndescent", "auto"]
KNN_METHODS = ("exact", "nndescent", "auto")
#: ``auto`` uses NN-descent above this many samples. The exact search costs n^2 d / 2 kernel
#: operations: 977 s for 100,000 samples x 2,000 features on 2 cores (benchmarks/RESULTS.md,
#: issue 5), so about 40 s at 20,000 and 90 s at 30,000, growing as n^2; NN-descent grows as about
#: n log n but pays about 35 s of pynndescent's numba compilation in every new process. Below
#: 30,000 samples the exact search is about as fast and has no recall to lose.
AUTO_NNDESCENT_ABOVE = 30_000
#: Candidates per sample from NN-descent, as a multiple of the neighbours wanted (then re-ranked).
#: NN-descent's work grows as the square of its list length: on 100,000 x 2,000 cells (k = 15)
#: 2k candidates took 160 s for recall@15 0.995, 1.5k 93 s for 0.980, 1.33k 64 s for 0.961.
CANDIDATE_FACTOR = 1.5
#: Bytes of float64 vectors gathered per re-ranking block.
_RERANK_BYTES = 1 << 28


def choose_method(method: str, n: int) -> str:
    """``exact`` or ``nndescent``: ``auto`` picks by the number of samples (:data:`AUTO_NNDESCENT_ABOVE`)."""
    if method not in KNN_METHODS:
        raise ParameterError(f"must be one of {', '.join(KNN_METHODS)}, not {method!r}", "knn_method")
    if method == "auto":
        method = "nndescent" if n > AUTO_NNDESCENT_ABOVE else "exact"
        if method == "nndescent" and not _have_pynndescent():
            import warnings

            from .errors import HdtwdWarning

            warnings.warn(f"{n} samples: the exact search is slow at this size and pynndescent is not installed "
                          "(pip install 'hdtwd[scale]')", HdtwdWarning, stacklevel=2)
            method = "exact"
    elif method == "nndescent" and not _have_pynndescent():
        raise ParameterError("nndescent needs pynndescent: pip install 'hdtwd[scale]'", "knn_method")
    return method


def _have_pynndescent() -> bool:
    import importlib.util

    return importlib.util.find_spec("pynndescent") is not None


def _search_vectors(tv: TreeVectors) -> np.ndarray:
    """Dense float32 tree vectors for the index, computed per row block.

    Dense even for sparse data: UMI-like counts give tree vectors with about a quarter of their
    entries non-zero, where pynndescent's sparse NN-descent was several times slower than the
    dense one (100,000 x 2,000 synthetic cells: > 5 min against 2 min). Memory: n x d x 4 bytes.
    """
    out = np.empty((tv.n, tv.dim), dtype=np.float32)
    step = max(1, _RERANK_BYTES // max(1, 8 * tv.dim))
    for i0 in range(0, tv.n, step):
        out[i0:i0 + step] = tv.rows(i0, i0 + step)
    return out


def locality_order(cand: np.ndarray) -> np.ndarray:
    """An order of the rows in which candidate lists are local: reverse Cuthill-McKee on the candidate graph.

    Rows next to each other in this order share most of their candidates, so a block of rows needs
    the vectors of few other rows (deterministic: RCM visits by degree, then index).
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    n, c = cand.shape
    G = sp.csr_matrix((np.ones(n * c, dtype=np.int8), cand.ravel(), np.arange(0, n * c + 1, c)), shape=(n, n))
    return np.asarray(reverse_cuthill_mckee((G + G.T).tocsr(), symmetric_mode=True), dtype=np.int64)


def rerank(tv: TreeVectors, candidates: np.ndarray, k: int,
           progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` nearest among its ``candidates`` (n x c, other samples), by exact TWD.

    Rows are taken in :func:`locality_order`, in blocks whose own vectors and their candidates'
    vectors fit a fixed budget (:data:`_RERANK_BYTES`): neighbouring rows share candidates, so each
    vector is computed about twice instead of ``c`` times (100,000 x 2,000 cells: 40 s before).
    Distances come from :func:`_kernels.l1_gather`, bit for bit the exact kernel's.
    """
    n, c = candidates.shape
    out_d = np.empty((n, k))
    out_i = np.empty((n, k), dtype=np.int64)
    order = locality_order(candidates)
    cap = max(2, _RERANK_BYTES // max(1, 8 * tv.dim))  # vectors held at once
    step = max(1, cap // 4)
    i0 = 0
    while i0 < n:
        rows = order[i0:i0 + step]
        while True:
            cand = candidates[rows]
            uniq, local = np.unique(cand, return_inverse=True)
            if rows.size == 1 or rows.size + uniq.size <= cap:
                break
            rows = rows[: rows.size // 2]
        A = tv.of_rows(rows)
        B = tv.of_rows(uniq)
        D = np.empty(cand.shape)
        l1_gather(A, B, np.ascontiguousarray(local.reshape(cand.shape), dtype=np.int64), D)
        out_d[rows], out_i[rows] = smallest_k(D, cand, k)
        i0 += rows.size
        if progress is not None:
            progress(rows.size)
    order = np.lexsort((out_i, out_d), axis=1)
    return np.take_along_axis(out_i, order, axis=1), np.take_along_axis(out_d, order, axis=1)


def approximate_neighbours(tv: TreeVectors, k: int, seed: int = 0,
                           progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's ``k`` nearest other samples: NN-descent candidates, exact TWD re-ranking.

    Returns
    -------
    indices : ndarray of int64, shape (n, k)
    distances : ndarray of float64, shape (n, k)
        Exact TWDs, ordered by (distance, index).
    """
    from pynndescent import NNDescent

    n = tv.n
    if not 1 <= k < n:
        raise ParameterError(f"must be between 1 and n - 1 = {n - 1}", "k")
    c = min(n - 1, int(np.ceil(CANDIDATE_FACTOR * k)))
    Y = _search_vectors(tv)
    index = NNDescent(Y, metric="manhattan", n_neighbors=c + 1, random_state=int(seed), n_jobs=-1,
                      low_memory=True, verbose=False)
    cand, _ = index.neighbor_graph
    del index, Y
    cand = _drop_self(np.asarray(cand, dtype=np.int64), c)
    return rerank(tv, cand, k, progress)


def _drop_self(cand: np.ndarray, c: int) -> np.ndarray:
    """The first ``c`` candidates of each row other than the row itself (missing ones: -1 filled in)."""
    n = cand.shape[0]
    rows = np.arange(n)[:, None]
    bad = (cand == rows) | (cand < 0)
    order = np.argsort(bad, axis=1, kind="stable")  # valid candidates first, in their order
    out = np.take_along_axis(cand, order, axis=1)[:, :c]
    short = np.take_along_axis(bad, order, axis=1)[:, :c]
    if short.any():  # too few distinct candidates: fill with other rows (never the row itself)
        r, t = np.nonzero(short)
        out[r, t] = (r + 1 + t) % n
    return out


def neighbours(tv: TreeVectors, k: int, method: str = "exact", seed: int = 0,
               progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest other samples of each row by ``method`` (:func:`choose_method`)."""
    if choose_method(method, tv.n) == "nndescent":
        return approximate_neighbours(tv, k, seed, progress)
    return nearest_neighbours(tv, k, 2048, progress)
