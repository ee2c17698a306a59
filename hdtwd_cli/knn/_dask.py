"""The exact work on a Dask cluster: the kNN search and the all-pairs matrix as tasks.

Given a ``dask.distributed.Client`` (``--scheduler ADDRESS`` or ``DASK_SCHEDULER_ADDRESS``), the
samples' normalised histograms and the tree are shipped to every worker ONCE
(one task holds them and every worker copies them once); each task takes one block of rows, computes the tree
vectors it needs on the worker and

- kNN: compares its rows with every column block and keeps their ``k`` nearest by
  (distance, index) (:func:`hdtwd_cli.twd._distance.smallest_k`); the client concatenates the blocks;
- all pairs: writes its rows of the matrix straight into a chunked Zarr store (one chunk row per
  task, so tasks never write the same chunk).

Every distance is computed by the same kernel with the same order of additions as on one
machine, and the neighbour sets are defined by (distance, index) alone, so the results are the
same bits as the single-process path. A task whose worker dies is run again by Dask (writes are
idempotent); the store is built under a temporary name and renamed only when every block is
written and its ``complete`` attribute set, so a failed run leaves no store at the output path.
dask, distributed and zarr are imported only here, only when a cluster or a Zarr output is used.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.memory import release_kept_memory
from hdtwd_cli.errors import ClusterError, InputError, OutputError
from hdtwd_cli.twd._distance import TreeVectors, smallest_k
from hdtwd_cli.twd._kernels import l1_distances

__all__ = ["connect", "nearest_neighbors_dask", "write_zarr", "ZARR_SUFFIX", "Shipped"]

ZARR_SUFFIX = ".zarr"
#: Rows per task.
TASK_ROWS = 2048


def connect(address: str | None) -> Any:
    """A ``dask.distributed.Client`` for ``address`` (or ``DASK_SCHEDULER_ADDRESS``); ``None`` if neither.

    A scheduler that does not answer is retried for as long as Dask's own setting says,
    ``distributed.comm.timeouts.connect`` (30 s unless set, e.g. by ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT``),
    as for any Dask client: a scheduler started beside the command has that long to come up.
    """
    address = address or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    if address is None:
        return None
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - an optional dependency
        raise InputError("a Dask scheduler needs the 'distributed' package: pip install 'hdtwd[scale]'") from None
    try:
        return Client(address)
    except (OSError, TimeoutError) as e:
        raise InputError(f"cannot reach the Dask scheduler at {address} ({type(e).__name__}: {e})") from None


def _knn_pair_task(
    tv: TreeVectors, i0: int, i1: int, j0: int, j1: int, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One block pair (rows ``i0 .. i1-1`` x ``j0 .. j1-1``, ``j0 >= i0``), each distance computed once.

    Returns the ``k`` nearest (by (distance, index)) of the I rows among the J rows and of the J
    rows among the I rows: ``(I indices, I distances, J indices, J distances)``; the diagonal
    block excludes each sample itself. The kernel gives ``D[i, j] == D[j, i]`` bit for bit, so the
    transposed block is what a task for rows J would have computed.
    """
    YI = tv.rows(i0, i1)
    diagonal = i0 == j0
    D = l1_distances(YI, YI if diagonal else tv.rows(j0, j1)).astype(np.float64, copy=False)
    if diagonal:
        np.fill_diagonal(D, np.inf)  # not one's own neighbour
    kk = min(k, D.shape[1])
    di, ii = smallest_k(D, np.broadcast_to(np.arange(j0, j1), D.shape), kk)
    if diagonal:
        return ii, di, ii[:0], di[:0]
    kj = min(k, D.shape[0])
    dj, ij = smallest_k(np.ascontiguousarray(D.T), np.broadcast_to(np.arange(i0, i1), D.T.shape), kj)
    return ii, di, ij, dj


def _finished(futures: list) -> Iterator[tuple[Any, Any]]:
    """``(future, result)`` as tasks finish; a task that failed for good cancels the rest (ClusterError)."""
    from distributed import as_completed

    for fut in as_completed(futures):
        try:
            result = fut.result()  # raises the task's exception (KilledWorker after the retries)
        except Exception as e:
            for f in futures:
                f.cancel()
            raise ClusterError(
                f"the cluster did not finish task {fut.key} ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else 'no detail'}); nothing was written"
            ) from e
        yield fut, result


def _progress_of(futures: list, sizes: dict, progress: Callable[[int], None] | None) -> None:
    for fut, _ in _finished(futures):
        if progress is not None:
            progress(sizes[fut.key])


def _hold(data: Any) -> Any:
    return data


def _ship(client: Any, data: Any, name: str) -> Any:
    """``data`` as a future the tasks depend on: sent once to the scheduler inside a task, copied to
    each worker that needs it; unlike scattered data, the scheduler recomputes it if its holder dies.
    The client first gives back the freed memory it kept (:func:`~hdtwd_cli._runtime.memory.release_kept_memory`):
    the workers may share its machine."""
    import warnings

    release_kept_memory()
    with warnings.catch_warnings():  # "Sending large graph": once, on purpose (see above)
        warnings.filterwarnings("ignore", message=".*[Ll]arge graph.*")
        return client.submit(_hold, data, key=f"hdtwd-{name}-{uuid.uuid4().hex[:8]}", pure=False)


def _payload(client: Any, tv: TreeVectors) -> Any:
    return _ship(client, tv, "data")


def _run(fn: Callable, tv: TreeVectors, *args: Any) -> Any:
    return fn(tv, *args)


class Shipped:
    """A client and tree vectors sent to its workers once, for any number of :meth:`map` calls.

    The approximate search (:func:`hdtwd_cli.knn._search.approximate_neighbors`) maps its partitions'
    NN-descent and exact re-ranking with it: one task per item, retried on another worker if
    its worker dies, the results returned in the items' order (so the order in which tasks finish
    changes nothing).
    """

    def __init__(self, client: Any, tv: TreeVectors) -> None:
        self.client = client
        self.payload = _payload(client, tv)

    def map(
        self,
        fn: Callable,
        args: list[tuple],
        name: str,
        progress: Callable[[int], None] | None = None,
        sizes: list[int] | None = None,
    ) -> list:
        """``[fn(tv, *a) for a in args]``, each a task on the cluster."""
        import warnings

        token = uuid.uuid4().hex[:8]
        with warnings.catch_warnings():  # items carry their rows: a few MB of graph, on purpose
            warnings.filterwarnings("ignore", message=".*[Ll]arge graph.*")
            futures = [
                self.client.submit(_run, fn, self.payload, *a, key=f"hdtwd-{name}-{token}-{i}", retries=2)
                for i, a in enumerate(args)
            ]
        where = {f.key: i for i, f in enumerate(futures)}
        out: list = [None] * len(futures)
        for fut, result in _finished(futures):
            i = where[fut.key]
            out[i] = result
            if progress is not None and sizes is not None:
                progress(sizes[i])
        return out


def nearest_neighbors_dask(
    client: Any, tv: TreeVectors, k: int, block: int = TASK_ROWS, progress: Callable[[int], None] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`hdtwd_cli.twd._distance.nearest_neighbors` as one task per pair of row blocks, same bits.

    Tasks for the block pairs ``J >= I`` compute every distance once (as the single-process
    symmetric search does); the client folds each finished task's ``k`` best into the running ``k``
    best of its rows. Keeping the ``k`` smallest by (distance, index) is a function of the
    candidates alone, so the order in which tasks finish does not change a bit.
    """
    n = tv.n
    payload = _payload(client, tv)
    token = uuid.uuid4().hex[:8]
    starts = list(range(0, n, block))
    futures, spans = [], {}
    for a, i0 in enumerate(starts):
        for j0 in starts[a:]:
            i1, j1 = min(i0 + block, n), min(j0 + block, n)
            f = client.submit(_knn_pair_task, payload, i0, i1, j0, j1, k, key=f"hdtwd-knn-{token}-{i0}-{j0}", retries=2)
            futures.append(f)
            spans[f.key] = (i0, i1, j0, j1)
    best_d = np.full((n, k), np.inf)
    best_i = np.full((n, k), -1, dtype=np.int64)
    total = sum((i1 - i0) * (j1 - j0) for i0, i1, j0, j1 in spans.values())
    done = reported = 0
    for fut, (ii, di, ij, dj) in _finished(futures):
        i0, i1, j0, j1 = spans[fut.key]
        for r0, r1, idx, dist in ((i0, i1, ii, di), (j0, j1, ij, dj)):
            if idx.size:
                cd = np.concatenate([best_d[r0:r1], dist], axis=1)
                ci = np.concatenate([best_i[r0:r1], idx], axis=1)
                best_d[r0:r1], best_i[r0:r1] = smallest_k(cd, ci, k)
        done += (i1 - i0) * (j1 - j0)
        if progress is not None:
            rows = done * n // total
            progress(rows - reported)
            reported = rows
    order = np.lexsort((best_i, best_d), axis=1)
    return np.take_along_axis(best_i, order, axis=1), np.take_along_axis(best_d, order, axis=1)


def _zarr_task(tv: TreeVectors, store: str, i0: int, i1: int, block: int, queries: Any) -> int:
    """Rows ``i0 .. i1-1`` of the (cross) distance matrix into the Zarr store; the chunk row is this task's.

    ``queries``: the raw query rows of a cross-distance matrix (:meth:`TreeVectors.of` normalises them)."""
    import zarr

    n = tv.n
    YI = tv.rows(i0, i1) if queries is None else tv.of(queries[i0:i1])
    out = np.empty((i1 - i0, n), dtype=np.dtype(tv.dtype))
    for j0 in range(0, n, block):
        j1 = min(j0 + block, n)
        out[:, j0:j1] = l1_distances(YI, tv.rows(j0, j1), np.dtype(tv.dtype))
    if queries is None:  # exact zeros on the diagonal, as the single-process path
        r = np.arange(i0, i1)
        out[r - i0, r] = 0.0
    zarr.open_array(store, path="distances", mode="r+")[i0:i1] = out
    return i1 - i0


def write_zarr(
    path: str,
    dv: Any,
    row_names: list[str],
    col_names: list[str],
    meta: dict,
    client: Any = None,
    progress: Callable[[int], None] | None = None,
    block: int | None = None,
) -> None:
    """Write the (cross) distance matrix of ``dv`` (:class:`hdtwd_cli._api.DistanceVectors`) as a Zarr store.

    Layout: group with ``distances`` (rows x cols, chunks of whole row blocks), ``row_names``,
    ``col_names`` and the attributes ``meta`` plus ``complete = True`` (set last). Readable with
    ``zarr.open_group(path)``, ``dask.array.from_zarr(path, component="distances")`` or xarray.
    With ``client`` the row blocks are tasks on the cluster, written by the workers.
    """
    import zarr

    rows, cols = dv.shape
    block = block or min(TASK_ROWS, max(1, (64 << 20) // max(1, cols * 8)))
    parent = os.path.dirname(os.path.abspath(path)) or "."
    tmp = os.path.join(parent, f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        g = zarr.open_group(tmp, mode="w")
        g.create_array("distances", shape=(rows, cols), chunks=(block, cols), dtype=dv.dtype, fill_value=np.nan)
        for name, values in (("row_names", row_names), ("col_names", col_names)):
            g.create_array(name, shape=(len(values),), dtype=str)[:] = np.asarray(values, dtype=str)
        g.attrs.update({k: (v.item() if hasattr(v, "item") else v) for k, v in meta.items()})
        g.attrs["complete"] = False
        starts = [(i0, min(i0 + block, rows)) for i0 in range(0, rows, block)]
        queries = None if dv.queries is None else (sp.csr_matrix(dv.queries) if sp.issparse(dv.queries) else dv.queries)
        if client is None:
            for i0, i1 in starts:
                n = _zarr_task(dv.base, tmp, i0, i1, block, queries)
                if progress is not None:
                    progress(n)
        else:
            payload = _payload(client, dv.base)
            q = None if queries is None else _ship(client, queries, "queries")
            token = uuid.uuid4().hex[:8]
            futures = [
                client.submit(_zarr_task, payload, tmp, i0, i1, block, q, key=f"hdtwd-zarr-{token}-{i0}", retries=2)
                for i0, i1 in starts
            ]
            _progress_of(futures, {f.key: i1 - i0 for f, (i0, i1) in zip(futures, starts)}, progress)
        g.attrs["complete"] = True
        _replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _replace_dir(tmp: str, path: str) -> None:
    """Move the finished store ``tmp`` to ``path``, replacing an earlier store there."""
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, "zarr.json")) and not os.path.exists(os.path.join(path, ".zgroup")):
            raise OutputError("is a directory that is not a Zarr store; refusing to replace it", path)
        old = f"{path}.old-{uuid.uuid4().hex[:8]}"
        os.rename(path, old)
        os.rename(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, path)
