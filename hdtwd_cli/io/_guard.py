"""What every reader checks before trusting a file: decoding errors named, index arrays validated.

Two rules keep a damaged file from reaching an internal error or a crash:

- The libraries that decode a format (gzip / zlib, zipfile, NumPy's ``.npy`` header parser,
  h5py, anndata, SciPy's Matrix Market reader) report damaged bytes with their own exception
  types. :func:`reading` turns those raised while a file is DECODED into one
  :class:`~hdtwd_cli.errors.InputError` naming the file; it wraps the decoding only, never the
  method, so a bug elsewhere still surfaces as one.
- Compiled parsers trust their text: SciPy's Matrix Market reader (``fast_matrix_market``) crashes
  the process on a NUL byte in the file, and on junk after the last value of a file without a final
  newline. :func:`read_matrix_market` scans for NUL bytes first and adds the newline.
- libhdf5 trusts its global heaps (where variable-length strings live): a collection whose free
  space object has size 0 makes the library loop forever, deaf to every signal but SIGKILL.
  :func:`open_hdf5` walks every collection first (:func:`check_global_heaps`).
- Compiled code trusts index arrays: SciPy's C++ routines read a CSR matrix's ``indptr`` and
  ``indices`` without bounds checks (a negative or too large index has crashed the process).
  :func:`check_sparse` validates them with NumPy before any such routine sees the matrix.
"""

from __future__ import annotations

import io
import os
import re
import struct
import tokenize
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from hdtwd_cli.errors import HdtwdError, InputError

__all__ = [
    "DECODE_ERRORS",
    "check_global_heaps",
    "check_sparse",
    "numeric",
    "open_hdf5",
    "read_matrix_market",
    "reading",
    "refuse_nul_bytes",
]

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


def _open_text(path: str) -> Any:
    import gzip

    return gzip.open(path, "rb") if path.lower().endswith(".gz") else open(path, "rb")


def refuse_nul_bytes(path: str, what: str, chunk: int = 1 << 24) -> bytes:
    """InputError if ``path`` (gunzipped when its name ends in ``.gz``) holds a NUL byte; else its last byte.

    One streamed pass (``chunk`` bytes at a time) before a compiled text parser reads the file:
    text formats never hold NUL, and SciPy's Matrix Market reader crashes on one.
    """
    offset = 0
    last = b""
    with reading(path, what), _open_text(path) as fh:
        while block := fh.read(chunk):
            at = block.find(b"\0")
            if at >= 0:
                raise InputError(f"{what} holds a NUL byte at byte {offset + at} (a damaged or binary file)", path)
            offset += len(block)
            last = block[-1:]
    return last


class _NewlineAtEnd(io.RawIOBase):
    """A binary file read as it is, then one ``\\n`` more."""

    def __init__(self, fh: Any) -> None:
        self._fh = fh
        self._tail = b"\n"

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._fh.readinto(buffer)
        if n or not self._tail:
            return n
        buffer[:1] = self._tail
        self._tail = b""
        return 1


def read_matrix_market(path: str) -> Any:
    """``scipy.io.mmread(path)`` made safe for damaged text: one line per problem, never a crash.

    SciPy's compiled reader (``fast_matrix_market``) crashes the process on a NUL byte anywhere
    and on any byte but a digit or a newline after the last value when the file does not end in a
    newline (``1 1 1 `` at the end of a file: a trailing space). The first pass refuses NUL bytes
    (:func:`refuse_nul_bytes`); a file that does not end in a newline is read through a stream that
    adds one (the same values: a Matrix Market file is the same with or without it).
    """
    import scipy.io

    last = refuse_nul_bytes(path, "Matrix Market file")
    try:
        if last == b"\n":
            return scipy.io.mmread(path)
        with _open_text(path) as fh:
            return scipy.io.mmread(io.BufferedReader(_NewlineAtEnd(fh)))
    except HdtwdError:
        raise
    except Exception as e:
        raise InputError(f"not a readable Matrix Market file ({_short(e)})", path) from None


#: The HDF5 signature; the superblock starts at byte 0 or after a user block of 512 * 2^k bytes.
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
#: A global heap collection: "GCOL", version 1, three reserved bytes, then its size.
_GCOL = b"GCOL\x01\x00\x00\x00"


def _length_size(mm: Any) -> int:
    """The superblock's "size of lengths" (bytes of a length field; 8 when no superblock is found)."""
    base = 0
    while base + 16 <= len(mm):
        if mm[base : base + 8] == _HDF5_SIGNATURE:
            version = mm[base + 8]
            size = mm[base + 14] if version < 2 else mm[base + 10]
            return size if size in (2, 4, 8, 16) else 8
        base = 512 if base == 0 else 2 * base
    return 8


def check_global_heaps(path: Any) -> None:
    r"""InputError if a global heap collection of the HDF5 file ``path`` would hang libhdf5.

    A collection (HDF5 file format, "Global Heap") is ``GCOL``, version 1, 3 reserved bytes, its
    size ``S`` (``L`` bytes, the superblock's size of lengths), then objects: index (2 bytes),
    reference count (2), reserved (4), size ``s`` (``L``), the data padded to 8 bytes. libhdf5
    reads a collection by stepping ``p += 8 + L + ceil8(s)`` for an object and ``p += s`` for the
    free space (index 0) while ``p < S``: a free-space size of 0 never advances (an endless loop
    in C that no signal handler interrupts). The same walk here refuses a step of 0 bytes, or one
    past the collection's end, before the library sees the file. Candidates that are not
    collections (the 8 signature bytes inside other data, a size beyond the file) are skipped;
    a valid collection's extent is skipped whole. One pass of a regular expression over the
    memory-mapped file (about 2.7 GB/s from the page cache), then about a microsecond per object.
    """
    import mmap

    if not isinstance(path, (str, os.PathLike)):  # a file object (h5py reads those too)
        at = path.tell()
        try:
            _walk_global_heaps(path.read(), path)
        finally:
            path.seek(at)
        return
    with reading(os.fspath(path), "HDF5 file"), open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size < len(_GCOL):
            return
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            _walk_global_heaps(mm, path)


def _walk_global_heaps(buf: Any, path: Any) -> None:
    """:func:`check_global_heaps` on the file's bytes ``buf`` (bytes or a memory map)."""
    L = _length_size(buf)
    header = _align8(8 + L)
    object_header = 8 + L
    total = len(buf)
    walked = 0  # the end of the last collection walked: candidates inside it are its data
    for found in re.finditer(re.escape(_GCOL), buf):
        at = found.start()
        size = int.from_bytes(buf[at + 8 : at + 8 + L], "little")
        end = at + size
        if at < walked or size <= header or end > total:
            continue  # not a collection (or one libhdf5 refuses itself)
        p = at + header
        while p < end and p + object_header <= end:
            index = int.from_bytes(buf[p : p + 2], "little")
            s = int.from_bytes(buf[p + 8 : p + 8 + L], "little")
            step = object_header + _align8(s) if index else s
            if step == 0 or p + step > end:
                raise InputError(
                    f"damaged HDF5 file: the global heap at byte {at} has an object of "
                    f"{s} bytes at byte {p} (would hang the HDF5 library)",
                    path,
                )
            p += step
        walked = end


def _align8(n: int) -> int:
    return (n + 7) & ~7


def open_hdf5(path: Any) -> Any:
    """``h5py.File(path, "r")`` after :func:`check_global_heaps`; a file that is not HDF5 is one InputError."""
    import h5py

    check_global_heaps(path)
    try:
        return h5py.File(path, "r")
    except FileNotFoundError:
        raise InputError("no such file", path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not an HDF5 file", path) from None
    except DECODE_ERRORS:
        raise InputError("not an HDF5 file (truncated or another format)", path) from None
