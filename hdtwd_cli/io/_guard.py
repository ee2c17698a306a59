"""What every reader checks before trusting a file: decoding errors named, index arrays validated.

Two rules keep a damaged file from reaching an internal error or a crash:

- The libraries that decode a format (gzip / zlib, zipfile, NumPy's ``.npy`` header parser,
  h5py, anndata, SciPy's Matrix Market reader) report damaged bytes with their own exception
  types. :func:`reading` turns those raised while a file is DECODED into one
  :class:`~hdtwd_cli.errors.InputError` naming the file; it wraps the decoding only, never the
  method, so a bug elsewhere still surfaces as one.
- Compiled parsers trust their text: SciPy's Matrix Market reader (``fast_matrix_market``) crashes
  the process on a NUL byte in the file. :func:`refuse_nul_bytes` scans a text file for them first.
- Compiled code trusts index arrays: SciPy's C++ routines read a CSR matrix's ``indptr`` and
  ``indices`` without bounds checks (a negative or too large index has crashed the process).
  :func:`check_sparse` validates them with NumPy before any such routine sees the matrix.
"""

from __future__ import annotations

import struct
import tokenize
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from hdtwd_cli.errors import HdtwdError, InputError

__all__ = ["DECODE_ERRORS", "check_sparse", "numeric", "reading", "refuse_nul_bytes"]

#: What the decoders raise on damaged bytes: I/O and truncation (h5py raises ``OSError``,
#: ``KeyError`` or ``RuntimeError`` for a damaged object header or B-tree), compressed streams,
#: ZIP archives (``.npz``), the ``.npy`` header (a Python literal: tokenizer and syntax errors),
#: and values that do not fit their declared type.
DECODE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    KeyError,
    RuntimeError,
    ValueError,
    TypeError,
    IndexError,
    UnicodeDecodeError,
    OverflowError,
    zlib.error,
    zipfile.BadZipFile,
    tokenize.TokenError,
    SyntaxError,
    struct.error,
)


def _short(e: BaseException, limit: int = 160) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextmanager
def reading(path: str, what: str) -> Iterator[None]:
    """Decode ``path`` inside this block: a decoder's error becomes ``InputError("damaged WHAT ...")``.

    Errors hdtwd raises itself (:class:`~hdtwd_cli.errors.HdtwdError`) and ``MemoryError`` pass
    through unchanged.
    """
    try:
        yield
    except (HdtwdError, MemoryError):
        raise
    except DECODE_ERRORS as e:
        raise InputError(f"damaged or unreadable {what} ({type(e).__name__}: {_short(e)})", path) from None


def numeric(value: Any, path: str, name: str, *, kinds: str = "iuf", ndim: int | None = None) -> np.ndarray:
    """``value`` (read from a file's field ``name``) as an array of one of ``kinds``, else InputError."""
    arr = np.asarray(value)
    if arr.dtype.kind not in kinds:
        raise InputError(f"{name} holds {arr.dtype} values, expected numbers", path)
    if ndim is not None and arr.ndim != ndim:
        raise InputError(f"{name} has {arr.ndim} dimension(s), expected {ndim}", path)
    return arr


def check_sparse(X: Any, path: str) -> None:
    """Validate a SciPy sparse matrix's index arrays before compiled code reads them.

    CSR / CSC: ``indptr`` has one entry per row (column) plus one, starts at 0, never decreases and
    ends at the number of stored entries; every index lies in ``[0, columns)`` (``[0, rows)``).
    COO: every row and column index in range. Other formats are converted by SciPy's Python code.
    """
    fmt = X.format
    if fmt in ("csr", "csc"):
        major, minor = X.shape if fmt == "csr" else X.shape[::-1]
        indptr, indices, data = np.asarray(X.indptr), np.asarray(X.indices), np.asarray(X.data)
        if indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu":
            raise InputError("sparse matrix with non-integer index arrays", path)
        if indptr.ndim != 1 or indices.ndim != 1 or data.ndim != 1:
            raise InputError("sparse matrix whose arrays are not one-dimensional", path)
        if indptr.size != major + 1:
            raise InputError(f"sparse matrix with {indptr.size} row pointers for {major} rows (need {major + 1})", path)
        if indices.size != data.size:
            raise InputError(f"sparse matrix with {indices.size} indices for {data.size} values", path)
        if int(indptr[0]) != 0 or int(indptr[-1]) != indices.size:
            raise InputError(
                f"sparse matrix whose row pointers run from {int(indptr[0])} to {int(indptr[-1])}, "
                f"not from 0 to its {indices.size} entries",
                path,
            )
        if np.any(indptr[1:] < indptr[:-1]):
            raise InputError("sparse matrix whose row pointers decrease", path)
        if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= minor):
            raise InputError(
                f"sparse matrix with an index outside 0..{minor - 1} ({int(indices.min())}..{int(indices.max())})",
                path,
            )
    elif fmt == "coo":
        for idx, size, axis in ((X.row, X.shape[0], "row"), (X.col, X.shape[1], "column")):
            if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= size):
                raise InputError(f"sparse matrix with a {axis} index outside 0..{size - 1}", path)


def refuse_nul_bytes(path: str, what: str, chunk: int = 1 << 24) -> None:
    """InputError if ``path`` (gunzipped when its name ends in ``.gz``) holds a NUL byte.

    One streamed pass (``chunk`` bytes at a time) before a compiled text parser reads the file:
    text formats never hold NUL, and SciPy's Matrix Market reader crashes on one.
    """
    import gzip

    offset = 0
    with reading(path, what), gzip.open(path, "rb") if path.lower().endswith(".gz") else open(path, "rb") as fh:
        while block := fh.read(chunk):
            at = block.find(b"\0")
            if at >= 0:
                raise InputError(f"{what} holds a NUL byte at byte {offset + at} (a damaged or binary file)", path)
            offset += len(block)
