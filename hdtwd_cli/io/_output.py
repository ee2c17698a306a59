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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hdtwd_cli.errors import HdtwdWarning, InputError, OutputError
from hdtwd_cli.io._atomic import atomic_path
from hdtwd_cli.io._hdf5 import read_tree, write_distances_h5, write_tree
from hdtwd_cli.io._newick import NewickError, read_newick, write_newick
from hdtwd_cli.io._records import TreeLike, TreeRecord

__all__ = ["DISTANCE_SUFFIXES", "TREE_SUFFIXES", "write_distances", "write_newick_file", "read_tree_file"]

DISTANCE_SUFFIXES = (".npy", ".h5", ".hdf5", ".csv", ".tsv", ".zarr")
TREE_SUFFIXES = (".h5", ".hdf5", ".nwk", ".newick", ".tree", ".tre", ".nex", ".nexus")


def distance_suffix(path: str) -> str:
    """The output suffix, or an :class:`OutputError` naming the supported ones."""
    suffix = Path(path).suffix.lower()
    if suffix not in DISTANCE_SUFFIXES:
        raise OutputError(
            f"unknown output type {suffix or '(no suffix)'!r}; expected one of {', '.join(DISTANCE_SUFFIXES)}", path
        )
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
            raise OutputError(
                f"refusing to write binary {suffix} data to a terminal; redirect it or use {{a}} tsv",
                "<stdout>",
                a="output_format",
            )
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


def write_npy_in_place(path: str, shape: tuple[int, int], dtype: Any, fill: Callable[[np.ndarray], Any]) -> None:
    """Write a ``.npy`` file atomically by computing straight into it: ``fill(out)`` gets a memory map.

    The same bytes as ``np.save`` of the computed array, without the copy of the whole result
    into the file (the result may be tens of gigabytes). The file's
    blocks are reserved first (``posix_fallocate``): a full disk is an error before any work,
    never a SIGBUS while the mapped pages are written.
    """
    dt = np.dtype(dtype)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.lib.format.write_array_header_1_0(
                fh, {"descr": np.lib.format.dtype_to_descr(dt), "fortran_order": False, "shape": tuple(shape)}
            )
            offset = fh.tell()
            os.posix_fallocate(fh.fileno(), 0, offset + dt.itemsize * shape[0] * shape[1])
        out = np.memmap(tmp, dtype=dt, mode="r+", offset=offset, shape=tuple(shape))
        try:
            fill(out)
        finally:
            del out  # unmapped; no msync: the kernel writes the pages back, as after np.save's write()


def write_tree_file(
    path: str, tree: TreeLike, meta: dict, mass: np.ndarray | None = None, size: np.ndarray | None = None
) -> None:
    """Write ``tree`` by suffix: HDF5 (``tree.metadata`` as its parameters, ``meta`` as file attributes),
    Nexus annotated with the feature weights and each node's ``mass`` and ``size`` (:mod:`._nexus`), or Newick."""
    from hdtwd_cli.io._nexus import NEXUS_SUFFIXES, write_nexus

    suffix = Path(path).suffix.lower()
    if suffix in (".h5", ".hdf5"):
        with atomic_path(path) as tmp:
            write_tree(tmp, tree, tree.metadata, meta)
    elif suffix in NEXUS_SUFFIXES:
        with atomic_path(path) as tmp:  # a target that cannot be written is refused before the warning
            if tree.denoiser is not None:
                warnings.warn(
                    f"{path}: the Nexus file carries no denoiser; write the .h5 tree to reproduce these distances",
                    HdtwdWarning,
                    stacklevel=2,
                )
            text = write_nexus(tree, mass, size)
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
    elif suffix in TREE_SUFFIXES:
        write_newick_file(path, tree)
    else:
        raise OutputError(
            f"unknown tree file type {suffix or '(no suffix)'!r}; expected one of {', '.join(TREE_SUFFIXES)}", path
        )


def write_newick_file(path: str, tree: TreeLike) -> None:
    """Write ``tree`` as Newick to ``path`` atomically.

    Newick holds the topology, names and branch lengths only: a tree with feature weights is
    written without them (and without a denoiser), with a warning (the ``.h5`` tree keeps them).
    """
    lost = [
        what
        for what, have in (
            ("feature weights (idf)", tree.feature_weights is not None),
            ("denoiser", tree.denoiser is not None),
        )
        if have
    ]
    with atomic_path(path) as tmp:  # a target that cannot be written is refused before the warning
        if lost:
            warnings.warn(
                f"{path}: the Newick file carries no {' nor '.join(lost)}; write the .h5 tree to reproduce these "
                "distances",
                HdtwdWarning,
                stacklevel=2,
            )
        text = write_newick(tree)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)


def read_tree_file(path: str) -> TreeRecord:
    """Read a tree from an hdtwd tree file (.h5), a Newick file (.nwk, .newick, .tree, .tre) or Nexus
    (.nex, .nexus), not yet validated (:meth:`hdtwd_cli.Tree.read` validates it)."""
    if not os.path.exists(path):
        raise InputError("no such file", path)
    if os.path.isdir(path):
        raise InputError("is a directory, not a tree file", path)
    suffix = Path(path).suffix.lower()
    if suffix in (".h5", ".hdf5"):
        return read_tree(path)
    if suffix in (".nwk", ".newick", ".tree", ".tre", ".nex", ".nexus"):
        from hdtwd_cli.io._nexus import NEXUS_SUFFIXES, read_nexus

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
    raise InputError(
        f"unknown tree file type {suffix or '(no suffix)'!r}; expected one of {', '.join(TREE_SUFFIXES)}", path
    )
