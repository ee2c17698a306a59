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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, OutputError
from ..tree import Tree
from .atomic import atomic_path
from .hdf5 import read_tree, write_distances_h5
from .newick import NewickError, read_newick, write_newick

__all__ = ["DISTANCE_SUFFIXES", "TREE_SUFFIXES", "write_distances", "write_newick_file", "read_tree_file"]

DISTANCE_SUFFIXES = (".npy", ".h5", ".hdf5", ".csv", ".tsv")
TREE_SUFFIXES = (".h5", ".hdf5", ".nwk", ".newick", ".tree", ".tre")


def distance_suffix(path: str) -> str:
    """The output suffix, or an :class:`OutputError` naming the supported ones."""
    suffix = Path(path).suffix.lower()
    if suffix not in DISTANCE_SUFFIXES:
        raise OutputError(
            f"unknown output type {suffix or '(no suffix)'!r}; expected one of {', '.join(DISTANCE_SUFFIXES)}",
            path)
    return suffix


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
                              "redirect it or use --output-format tsv", "<stdout>")
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


def write_newick_file(path: str, tree: Tree) -> None:
    """Write ``tree`` as Newick to ``path`` atomically."""
    text = write_newick(tree)
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)


def read_tree_file(path: str) -> Tree:
    """Read a tree from an hdtwd tree file (.h5) or a Newick file (.nwk, .newick, .tree, .tre)."""
    if not os.path.exists(path):
        raise InputError("no such file", path)
    if os.path.isdir(path):
        raise InputError("is a directory, not a tree file", path)
    suffix = Path(path).suffix.lower()
    if suffix in (".h5", ".hdf5"):
        return read_tree(path)
    if suffix in (".nwk", ".newick", ".tree", ".tre"):
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except UnicodeDecodeError:
            raise InputError("not a text (Newick) file", path) from None
        try:
            return read_newick(text)
        except NewickError as e:
            raise InputError(f"invalid Newick: {e}", path) from None
    raise InputError(f"unknown tree file type {suffix or '(no suffix)'!r}; expected one of "
                     f"{', '.join(TREE_SUFFIXES)}", path)
