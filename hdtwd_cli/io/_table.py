"""Delimited text tables (``.csv``, ``.tsv``, gzip-compressed too): where the names are, never guessed.

Layout
    One row per sample, one column per feature, values as decimal numbers. Names are read only
    where the layout leaves no other reading:

    - **Header.** The first row is a header of feature names when its corner cell is empty
      (``,7157,672`` : pandas' and R's index column; numeric names are names) or when every cell
      after the corner is text (``gene,TP53,EGFR``). A first row that cannot be told apart from a
      data row (``gene,7157,672`` above rows that start with a name: a header of numeric ids or a
      sample named ``gene``?) is an error naming ``header``: the caller says which. So is a table
      of numbers whose first row holds distinct integers above non-integer values (numeric ids over
      normalised data?). A table of numbers only otherwise has no names (``np.savetxt``).
    - **First column.** Sample names when the header's corner cell is empty, or the header has one
      name fewer than the rows have fields (R's ``write.table``), or every cell of the column is
      text. A first row or column mixing numbers and text otherwise is an error naming the cell.
    - **QIIME's classic OTU table** (``biom convert --to-tsv``): optional ``# ...`` comment lines,
      then a header whose corner cell is ``#OTU ID`` followed by the sample ids, then one row per
      OTU (its id, then its counts), optionally a last ``taxonomy`` / ``Consensus Lineage``
      column (dropped). The format says it is OTUs x samples: it is read as samples x OTUs.

``header=True`` / ``False`` overrides the header rule (then numbers in the first row are names,
or the first row is data).
"""

from __future__ import annotations

import csv
import re
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from hdtwd_cli._runtime.memory import allowance, available_memory, human_bytes
from hdtwd_cli.errors import InputError, ParameterError, ResourceError
from hdtwd_cli.io._text import open_text

__all__ = ["Table", "read_delimited", "is_number", "TEXT_BYTES_FACTOR", "TEXT_SHARE"]

#: Memory a delimited table takes while it is read, per byte of its text (Python's lists of cells;
#: measured 4.2 for one-digit counts and 8.1 for 6-digit decimals, plus the float64 values).
TEXT_BYTES_FACTOR = 10
#: Share of the available memory that reading a delimited table may take.
TEXT_SHARE = 0.85

_OTU_ID = re.compile(r"^#\s*(otu|feature)[ _]?id$", re.IGNORECASE)
_LINEAGE = ("taxonomy", "consensus lineage", "consensuslineage")
_INTEGER = re.compile(r"^\d+$")


@dataclass
class Table:
    """A delimited table read as samples x features.

    Attributes
    ----------
    values : ndarray of float64, shape (samples, features)
    sample_names, feature_names : list of str or None
        None where the file names none.
    layout : str or None
        The name of a format that fixes the orientation itself (``"a QIIME OTU table"``): the table
        was transposed by that rule and a caller's ``transpose`` does not apply.
    """

    values: np.ndarray
    sample_names: list[str] | None
    feature_names: list[str] | None
    layout: str | None = None


def is_number(s: str) -> bool:
    """Whether ``s`` reads as a float (``"1"``, ``"2.5e3"``, ``"inf"``; not ``""``)."""
    try:
        float(s)
    except ValueError:
        return False
    return True


def _rows(path: str, delimiter: str) -> tuple[list[list[str]], list[int]]:
    """The non-blank rows of the file and their line numbers, within the memory hdtwd allows itself."""
    limit = int(TEXT_SHARE * available_memory() / TEXT_BYTES_FACTOR)  # characters that fit as cells
    read = 0

    def counted(fh: Any) -> Any:
        nonlocal read
        for line in fh:
            read += len(line)
            if read > limit:
                raise ResourceError(
                    f"{human_bytes(read)} of text read so far; a delimited table takes about "
                    f"{TEXT_BYTES_FACTOR} times its text in memory while it is read, more than hdtwd allows "
                    f"itself: {allowance(TEXT_SHARE, available_memory())}; convert it to .npz, .mtx or .h5ad",
                    path,
                )
            yield line

    try:
        with open_text(path, newline="", encoding="utf-8-sig") as fh:  # a UTF-8 BOM is dropped
            rows = [r for r in csv.reader(counted(fh), delimiter=delimiter)]
    except (csv.Error, UnicodeDecodeError, EOFError) as e:
        raise InputError(f"not a readable {delimiter!r}-delimited text file ({e})", path) from None
    except (OSError, zlib.error) as e:  # gzip: not a gzip file / truncated or damaged stream
        raise InputError(f"not a readable compressed file ({e})", path) from None
    lines = [i + 1 for i, r in enumerate(rows) if r and any(c.strip() for c in r)]
    rows = [r for r in rows if r and any(c.strip() for c in r)]
    if not rows:
        raise InputError("file is empty", path)
    return rows, lines


def _values(rows: list[list[str]], lines: list[int], start: int, path: str) -> np.ndarray:
    """The cells from column ``start`` on as float64, an error naming the first one that is not a number."""
    width = len(rows[0])
    vals = np.empty((len(rows), width - start), dtype=np.float64)
    for i, r in enumerate(rows):
        try:
            vals[i] = [float(c) for c in r[start:]]
        except ValueError:
            j = next(j for j, c in enumerate(r[start:]) if not is_number(c))
            raise InputError(
                f"line {lines[i]}, column {j + 1 + start}: {r[start + j]!r} is not a number", path
            ) from None
    return vals


def _check_width(rows: list[list[str]], lines: list[int], path: str) -> int:
    width = len(rows[0])
    for i, r in enumerate(rows):
        if len(r) != width:
            raise InputError(f"line {lines[i]} has {len(r)} fields, expected {width} (ragged table)", path)
    return width


def _otu_table(rows: list[list[str]], lines: list[int], path: str, header: bool | None) -> Table | None:
    """QIIME's classic OTU table (``#OTU ID`` corner after optional ``#`` comment lines), or None."""
    k = 0
    while k < len(rows) and rows[k][0].strip().startswith("#") and not _OTU_ID.match(rows[k][0].strip()):
        k += 1
    if k == len(rows) or not _OTU_ID.match(rows[k][0].strip()):
        return None
    if header is False:
        raise ParameterError(
            f"cannot apply: line {lines[k]}'s {rows[k][0].strip()!r} marks the header of a QIIME OTU table",
            "header",
            path,
        )
    head = [c.strip() for c in rows[k]]
    body, at = rows[k + 1 :], lines[k + 1 :]
    if not body:
        raise InputError("QIIME OTU table has a header but no OTU rows", path)
    _check_width([head, *body], [lines[k], *at], path)
    if head[-1].lower() in _LINEAGE:  # per-OTU metadata, not a sample
        head, body = head[:-1], [r[:-1] for r in body]
    if len(head) < 2:
        raise InputError("QIIME OTU table names no sample after '#OTU ID'", path)
    otus = [r[0].strip() for r in body]
    vals = _values(body, at, 1, path)
    return Table(np.ascontiguousarray(vals.T), head[1:], otus, layout="a QIIME OTU table")


def _has_header(first: list[str], below: list[list[str]], at: int, path: str) -> bool:
    """Whether the first row is a header, by the rule of the module docstring (an error where it cannot tell)."""
    corner, rest = first[0], first[1:]
    rest_num = [is_number(c) for c in rest]
    if corner == "" or not any(rest_num):  # an index column's empty corner, or names for every column
        return True
    if not all(rest_num):
        text = [j + 1 for j, n in enumerate(rest_num) if not n]
        nums = sum(rest_num) + is_number(corner)
        words = len(first) - nums
        if nums > len(text):
            j = text[0]
            why = f"{first[j]!r} is not a number, but {nums} of the row's other cells are"
        else:
            j = next(j + 1 for j, n in enumerate(rest_num) if n)
            why = f"{first[j]!r} is a number among the header's {words} names"
        raise InputError(
            f"line {at}, column {j + 1}: {why}; a header must name every column and a data row hold only numbers",
            path,
        )
    if not below:
        return False  # one row of numbers: data (a header alone is an error either way)
    named = all(not is_number(r[0].strip()) for r in below)  # the rows below start with a name
    if named and len(first) == len(below[0]) - 1:
        return True  # one name fewer than the rows have fields: R's write.table
    shown = ", ".join(first[1:4]) + (", ..." if len(first) > 4 else "")
    if not is_number(corner) or named:
        return _ambiguous(
            f"line {at} could be a header of numeric names or a data row ({corner!r}, then {shown})", path
        )
    return False  # a table of numbers only


def _ambiguous(what: str, path: str) -> bool:
    raise InputError(what + "? say which with {h}", path, h="header")


def read_delimited(path: str, delimiter: str, *, header: bool | None = None) -> Table:
    """Read a delimited table as samples x features with the names the layout holds.

    Parameters
    ----------
    path : str
        The file (``.gz``: gzip-compressed).
    delimiter : str
        ``","`` or ``"\\t"``.
    header : bool, optional
        Whether the first row is a header; None (default) decides by the rule of the module docstring
        and refuses where the first row cannot be told apart from data, so nothing is guessed.

    Returns
    -------
    Table

    Raises
    ------
    InputError
        Unreadable text, a ragged table, a cell that is not a number, a header that cannot be told
        apart from data (naming ``header``).
    """
    rows, lines = _rows(path, delimiter)
    otu = _otu_table(rows, lines, path, header)
    if otu is not None:
        return otu
    first = [c.strip() for c in rows[0]]
    auto = header is None
    if header is None:
        header = _has_header(first, rows[1:], lines[0], path)
    names: list[str] | None = None
    if header:
        names, rows, lines = first, rows[1:], lines[1:]
        if not rows:
            raise InputError("file has a header but no data rows", path)
    width = _check_width(rows, lines, path)
    col0 = [r[0].strip() for r in rows]
    text0 = [i for i, c in enumerate(col0) if not is_number(c)]
    index = len(text0) == len(rows) or (
        names is not None and ((names[0] == "" and len(names) == width) or len(names) == width - 1)
    )
    if text0 and not index:
        i = text0[0]
        raise InputError(
            f"line {lines[i]}, column 1: {col0[i]!r} is not a number, but the column holds "
            f"numbers in {len(rows) - len(text0)} of {len(rows)} rows (sample names need an empty "
            "first header cell or a name in every row)",
            path,
        )
    start = 1 if index else 0
    if width - start < 1:
        raise InputError("no numeric columns", path)
    if names is not None:
        if len(names) == width:
            names = names[start:]
        elif not (index and len(names) == width - 1):
            raise InputError(f"header has {len(names)} fields but rows have {width}", path)
    vals = _values(rows, lines, start, path)
    if auto and names is None and not index and len(rows) > 1 and _looks_like_ids(first):
        below = vals[1:]
        if np.any(np.isfinite(below) & (below != np.round(below))):
            shown = ", ".join(first[:4]) + (", ..." if len(first) > 4 else "")
            _ambiguous(f"line {lines[0]} holds distinct integers ({shown}) above non-integer values: numeric ids", path)
    return Table(vals, col0 if index else None, names)


def _looks_like_ids(first: list[str]) -> bool:
    """A row of distinct plain integers (``7157,672,1956``): how numeric ids are written."""
    return len(set(first)) == len(first) and all(_INTEGER.match(c) for c in first)
