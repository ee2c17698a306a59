"""Writing results by suffix, atomically, and reading trees from either format.

Distance matrices:

=========  =========================================================================
suffix     content
=========  =========================================================================
.npy       the q x n matrix (``numpy.load``)
.h5/.hdf5  ``/distances`` plus sample names and metadata (layout in :mod:`.hdf5`)
.csv/.tsv  a header of column sample names, then one row per sample: name, values
           written with 17 significant digits (round-trips float64 exactly)
=========  =========================================================================
"""

from __future__ import annotations

import csv
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._sparse import sp

from ..errors import HdtwdWarning, InputError, OutputError
from ..tree import Tree
from .atomic import atomic_path
from .hdf5 import read_tree, write_distances_h5, write_tree
from .newick import NewickError, read_newick, write_newick

__all__ = ["DISTANCE_SUFFIXES", "TREE_SUFFIXES", "write_distances", "write_newick_file", "read_tree_file"]

DISTANCE_SUFFIXES = (".npy", ".h5", ".hdf5", ".csv", ".tsv", ".zarr")
TREE_SUFFIXES = (".h5", ".hdf5", ".nwk", ".newick", ".tree", ".tre", ".nex", ".nexus")


def distance_suffix(path: str) -> str:
    """The output suffix, or an :class:`OutputError` naming the supported ones."""
    suffix = Path(path).suffix.lower()
    if suffix not in DISTANCE_SUFFIXES:
        raise OutputError(
            f"unknown output type {suffix or '(no suffix)'!r}; expected one of {', '.join(DISTANCE_SUFFIXES)}",
            path)
    return suffix


def stores_metadata(path: str, fmt: str | None = None, knn: bool = False) -> bool:
    """Whether the result written to ``path`` (format ``fmt``, or a ``knn`` graph) records metadata:
    ``.npy``, ``.csv`` and ``.tsv`` matrices do not (so nothing need be computed for them)."""
    if knn:
        return True
    suffix = (fmt or ("tsv" if path == "-" else Path(path).suffix.lower()[1:])).lstrip(".")
    return suffix not in ("npy", "csv", "tsv")


def write_distances(
    path: str,
    D: np.ndarray,
    row_names: list[str],
    col_names: list[str],
    meta: Mapping[str, Any],
    fmt: str | None = None,
) -> None:
    """Write a distance matrix to ``path`` atomically, in the format its suffix (or ``fmt``) names.

    ``path == "-"`` writes to standard output (``fmt`` default ``tsv``); binary formats are
    refused when standard output is a terminal.
    """
    if path == "-":
        suffix = "." + (fmt or "tsv").lstrip(".")
        distance_suffix("stdout" + suffix)
        if suffix in (".npy", ".h5", ".hdf5") and sys.stdout.isatty():
            raise OutputError(f"refusing to write binary {suffix} data to a terminal; "
                              "redirect it or use {a} tsv", "<stdout>", a="output_format")
        with tempfile.TemporaryDirectory(prefix="hdtwd-out-") as d:
            tmp = os.path.join(d, "out" + suffix)
            write_distances(tmp, D, row_names, col_names, meta)
            with open(tmp, "rb") as fh:
                shutil.copyfileobj(fh, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        return
    suffix = "." + fmt.lstrip(".") if fmt else distance_suffix(path)
    with atomic_path(path) as tmp:
        if suffix == ".npy":
            np.save(tmp, D, allow_pickle=False)
        elif suffix in (".h5", ".hdf5"):
            write_distances_h5(tmp, D, row_names, col_names, meta)
        else:
            delim = "," if suffix == ".csv" else "\t"
            with open(tmp, "w", newline="", encoding="utf-8") as fh:
                w = csv.writer(fh, delimiter=delim, lineterminator="\n")
                w.writerow([""] + list(col_names))
                for name, row in zip(row_names, D):
                    w.writerow([name] + [format(float(v), ".17g") for v in row])


def write_distances_blocked(
    path: str,
    blocks: Iterable[tuple[int, np.ndarray]],
    shape: tuple[int, int],
    row_names: list[str],
    col_names: list[str],
    meta: Mapping[str, Any],
    dtype: str = "float64",
    progress: Callable[[int], None] | None = None,
) -> None:
    """Stream row blocks of a distance matrix into a chunked HDF5 dataset (memory: one block)."""
    import h5py

    from .hdf5 import DISTANCES_TYPE, _root, _strings

    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as f:
            _root(f, DISTANCES_TYPE, meta)
            ds = f.create_dataset("distances", shape=shape, dtype=dtype, track_times=False,
                                  chunks=(min(shape[0], max(1, 2**20 // max(shape[1], 1))), shape[1]))
            for i0, block in blocks:
                ds[i0:i0 + block.shape[0]] = block
                if progress is not None:
                    progress(block.shape[0])
            _strings(f, "row_names", row_names)
            _strings(f, "col_names", col_names)


KNN_SUFFIXES = (".npz", ".h5ad")


def write_knn(path: str, graph: Any, record: dict, *, key_added: str | None = None, adata: Any = None,
              vectors: Any = None) -> None:
    """Write a kNN graph (:class:`hdtwd_cli.api.KnnGraph`): ``.npz`` or ``.h5ad``.

    ``.npz``: the CSR distance matrix (``scipy.sparse.load_npz``), the ``n_neighbors - 1`` distances
    of each row. ``.h5ad``: ``adata`` (the input AnnData, or a new one) with the graph in
    ``sc.pp.neighbors``' layout (:func:`hdtwd_cli.api.write_graph`) and ``vectors`` as ``obsm["X_hdtwd"]``.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in KNN_SUFFIXES:
        raise OutputError(f"a kNN graph is written as .npz or .h5ad, not {suffix or '(no suffix)'!r}", path)
    with atomic_path(path) as tmp:
        if suffix == ".npz":
            sp.save_npz(tmp, graph.distance_matrix())
        else:
            from ..api import write_graph

            write_graph(adata, graph, key_added, vectors, record)
            adata.write_h5ad(tmp)


def new_adata(X: Any, sample_names: list[str], feature_names: list[str]) -> Any:
    """An AnnData of ``X`` with the names (for an ``.h5ad`` output of a non-AnnData input)."""
    import anndata
    import pandas as pd

    return anndata.AnnData(X=X, obs=pd.DataFrame(index=sample_names), var=pd.DataFrame(index=feature_names))


def _is_zarr(path: str) -> bool:
    return path != "-" and Path(path.rstrip("/")).suffix.lower() == ".zarr"


def check_result_options(path: str, knn: int | None, knn_method: str, scheduler: str | None) -> None:
    """Refuse, before any work, the combinations :func:`write_result` cannot honour."""
    from ..errors import ParameterError

    if knn is None and knn_method != "exact":
        raise ParameterError("applies to the kNN graph ({b})", "knn_method", b="n_neighbors")
    if scheduler and not (_is_zarr(path) or knn is not None):
        raise ParameterError("runs the kNN search ({a}) or writes all pairs into a Zarr store (-o FILE.zarr); "
                             "in-memory outputs are single-process", "scheduler", a="n_neighbors")


def write_result(path: str, dv: Any, row_names: list[str], col_names: list[str], meta: dict, *,
                 fmt: str | None = None, knn: int | None = None, key_added: str | None = None, adata: Any = None,
                 store_vectors: bool | None = None, reporter: Any = None, knn_method: str = "exact", seed: int = 0,
                 client: Any = None) -> str:
    """Write what ``-o`` asks of a :class:`hdtwd_cli.api.DistanceVectors`; returns a one-line summary.

    ``knn``: the kNN graph (``.npz`` / ``.h5ad``; searched by ``knn_method``, on the cluster of
    ``client`` when given); a ``.zarr`` store: the matrix in row blocks (written by the cluster's
    workers with ``client``); an ``.h5`` file: the matrix streamed in row blocks; anything else:
    the whole matrix in memory (refused up front when it would not fit).
    """
    zarr_out = _is_zarr(path)
    if knn is not None:
        graph = dv.knn(knn, knn_method, seed, client)
        vectors = None if Path(path).suffix.lower() != ".h5ad" else dv.vectors_for_obsm(store_vectors)
        write_knn(path, graph, dict(graph.params, **meta), key_added=key_added, adata=adata, vectors=vectors)
        return f"wrote {path}: {knn} neighbours per sample (the sample itself included)"
    rows, cols = dv.shape
    if zarr_out:
        from ..cluster import write_zarr

        with reporter.stage(f"tree-Wasserstein distances ({rows} x {cols}, Zarr)", rows) as adv:
            write_zarr(path, dv, row_names, col_names, meta, client, adv)
        return f"wrote {path} ({rows} x {cols} {dv.dtype}, Zarr)"
    if path != "-" and fmt is None and Path(path).suffix.lower() in (".h5", ".hdf5"):
        block = dv.block_rows()
        with reporter.stage(f"tree-Wasserstein distances ({rows} x {cols}, blocked)", rows) as adv:
            write_distances_blocked(path, dv.blocks(block), (rows, cols), row_names, col_names, meta, dv.dtype, adv)
        return f"wrote {path} ({rows} x {cols} {dv.dtype}, in blocks of {block} rows)"
    if (path != "-" and rows * cols and hasattr(os, "posix_fallocate")
            and ("." + fmt.lstrip(".") if fmt else distance_suffix(path)) == ".npy"):
        write_npy_in_place(path, (rows, cols), dv.dtype, lambda out: dv.matrix(out=out))
    else:
        write_distances(path, dv.matrix(), row_names, col_names, meta, fmt)
    return f"wrote {path} ({rows} x {cols} {dv.dtype})"


#: ``madvise(MADV_POPULATE_WRITE)`` (Linux 5.14+; not in Python 3.11's ``mmap`` module).
_MADV_POPULATE_WRITE = 23


def _populate(address: int, nbytes: int) -> Any:
    """Fault in the fresh mapping ``[address, address + nbytes)`` for writing, in a background thread.

    Else the compute threads take one page fault per 4 kB page as they write (145,000 for CBMC's
    594 MB result: 0.45-0.7 s of system time; one ``madvise(MADV_POPULATE_WRITE)`` call does the
    same in 0.15-0.4 s, benchmarks/RESULTS.md, issue 14). The call runs beside the work, with the
    GIL released (ctypes): a page the work reaches first is faulted in as before, one populated
    first is written without a fault; the bytes are the same either way. Returns the thread to
    join, or ``None`` where it is skipped: results over a quarter of the available memory (the
    pages would be written back and evicted before use), platforms without the call (an error of
    the call itself is ignored: the work faults the pages in).
    """
    from .._memory import available_memory

    if not sys.platform.startswith("linux") or nbytes > available_memory() // 4:
        return None
    try:
        import ctypes
        import mmap
        import threading

        madvise = ctypes.CDLL(None, use_errno=True).madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError):  # pragma: no cover - no libc symbol
        return None
    start = address - address % mmap.PAGESIZE  # madvise wants a page boundary: the mapping starts on one

    def call() -> None:  # the return code (0, or -1 where the kernel refused) is kept for the tests
        thread.result = madvise(start, nbytes + address - start, _MADV_POPULATE_WRITE)  # type: ignore[attr-defined]

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


def write_npy_in_place(path: str, shape: tuple[int, int], dtype: Any, fill: Callable[[np.ndarray], Any]) -> None:
    """Write a ``.npy`` file atomically by computing straight into it: ``fill(out)`` gets a memory map.

    The same bytes as ``np.save`` of the computed array, without the copy: for CBMC's 8,617 x
    8,617 result that copy was 0.7 s of a 5 s run (benchmarks/RESULTS.md, issue 14). The file's
    blocks are reserved first (``posix_fallocate``): a full disk is an error before any work,
    never a SIGBUS while the mapped pages are written. The pages are faulted in beside the work
    (:func:`_populate`).
    """
    dt = np.dtype(dtype)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.lib.format.write_array_header_1_0(
                fh, {"descr": np.lib.format.dtype_to_descr(dt), "fortran_order": False, "shape": tuple(shape)})
            offset = fh.tell()
            os.posix_fallocate(fh.fileno(), 0, offset + dt.itemsize * shape[0] * shape[1])
        out = np.memmap(tmp, dtype=dt, mode="r+", offset=offset, shape=tuple(shape))
        populating = _populate(out.ctypes.data, out.nbytes) if out.size else None
        try:
            fill(out)
        finally:
            if populating is not None:
                populating.join()
            del out  # unmapped; no msync: the kernel writes the pages back, as after np.save's write()


def write_tree_file(path: str, tree: Tree, meta: dict, leaf_mass: np.ndarray | None = None) -> None:
    """Write ``tree`` by suffix: HDF5 (``tree.metadata`` as its parameters, ``meta`` as file attributes),
    Nexus annotated with the feature weights and ``leaf_mass`` (:mod:`io.nexus`), or Newick."""
    from .nexus import NEXUS_SUFFIXES, write_nexus

    suffix = Path(path).suffix.lower()
    if suffix in (".h5", ".hdf5"):
        with atomic_path(path) as tmp:
            write_tree(tmp, tree, tree.metadata, meta)
    elif suffix in NEXUS_SUFFIXES:
        if tree.denoiser is not None:
            warnings.warn(f"{path}: the Nexus file carries no denoiser; write the .h5 tree to reproduce these "
                          "distances", HdtwdWarning, stacklevel=2)
        text = write_nexus(tree, leaf_mass)
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
    elif suffix in TREE_SUFFIXES:
        write_newick_file(path, tree)
    else:
        raise OutputError(f"unknown tree file type {suffix or '(no suffix)'!r}; expected one of "
                          f"{', '.join(TREE_SUFFIXES)}", path)


def write_newick_file(path: str, tree: Tree) -> None:
    """Write ``tree`` as Newick to ``path`` atomically.

    Newick holds the topology, names and branch lengths only: a tree with feature weights is
    written without them (and without a denoiser), with a warning (the ``.h5`` tree keeps them).
    """
    lost = [what for what, have in (("feature weights (idf)", tree.feature_weights is not None),
                                    ("denoiser", tree.denoiser is not None)) if have]
    if lost:
        warnings.warn(f"{path}: the Newick file carries no {' nor '.join(lost)}; write the .h5 tree "
                      "to reproduce these distances", HdtwdWarning, stacklevel=2)
    text = write_newick(tree)
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)


def read_tree_file(path: str) -> Tree:
    """Read a tree from an hdtwd tree file (.h5), a Newick file (.nwk, .newick, .tree, .tre) or Nexus (.nex, .nexus)."""
    if not os.path.exists(path):
        raise InputError("no such file", path)
    if os.path.isdir(path):
        raise InputError("is a directory, not a tree file", path)
    suffix = Path(path).suffix.lower()
    if suffix in (".h5", ".hdf5"):
        return read_tree(path)
    if suffix in (".nwk", ".newick", ".tree", ".tre", ".nex", ".nexus"):
        from .nexus import NEXUS_SUFFIXES, read_nexus

        nexus = suffix in NEXUS_SUFFIXES
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except UnicodeDecodeError:
            raise InputError(f"not a text ({'Nexus' if nexus else 'Newick'}) file", path) from None
        try:
            return read_nexus(text) if nexus else read_newick(text)
        except NewickError as e:
            raise InputError(f"invalid {'Nexus' if nexus else 'Newick'}: {e}", path) from None
    raise InputError(f"unknown tree file type {suffix or '(no suffix)'!r}; expected one of "
                     f"{', '.join(TREE_SUFFIXES)}", path)
