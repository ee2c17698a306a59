"""Reading data matrices (rows = samples, columns = features) from every supported format.

=========  ==================================================================================
suffix     how it is read
=========  ==================================================================================
.npy       a 2-D numeric NumPy array (``allow_pickle=False``)
.npz       a ``scipy.sparse.save_npz`` matrix, or an ``np.savez`` archive holding one 2-D array
.mtx       Matrix Market (``scipy.io.mmread``); kept sparse
.csv/.tsv  :mod:`hdtwd_cli.io._table`: a header when its corner cell is empty or it names every
           column; sample names in the first column by the layout; a first row that cannot be told
           apart from data is an error naming ``header``; QIIME's ``#OTU ID`` table read as samples
           x OTUs. ``.gz`` compressed too
.biom      BIOM 2.1 (HDF5) or 1.0 (JSON) (:mod:`hdtwd_cli.io._biom`): observations x samples read as
           samples x observations, with their ids
.mtx.gz    Matrix Market, gzip-compressed
.h5        Cell Ranger's HDF5 (:mod:`hdtwd_cli.io._tenx`); genes x cells read as cells x genes
10x dir    ``filtered_feature_bc_matrix/`` (matrix.mtx.gz, features.tsv.gz, barcodes.tsv.gz)
.h5ad      AnnData: ``X`` by default, ``layer=NAME`` for ``layers[NAME]``, ``use_raw`` for
           ``raw.X``; names from ``obs_names`` / ``var_names``
=========  ==================================================================================

Names that say the matrix is features x samples (gene ids for the samples, cell barcodes for the
features: :mod:`hdtwd_cli.io._orient`) are an error naming ``transpose``. Sparse input stays sparse
(CSR). Feature names that are missing are generated (``f0, f1, ...``); duplicates are made unique
(``name``, ``name-1``, ...) with a warning.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.memory import human_bytes
from hdtwd_cli._runtime.sparse import canonical_csr
from hdtwd_cli.errors import HdtwdError, HdtwdWarning, InputError, ParameterError, ResourceError
from hdtwd_cli.io._biom import HDF5_MAGIC, read_biom
from hdtwd_cli.io._guard import DECODE_ERRORS, check_sparse, open_hdf5, read_matrix_market, reading
from hdtwd_cli.io._h5ad import read_h5ad_parts
from hdtwd_cli.io._orient import check_orientation
from hdtwd_cli.io._table import read_delimited
from hdtwd_cli.io._tenx import read_10x_h5, read_10x_mtx, tenx_files

__all__ = [
    "MatrixData",
    "read_labels",
    "read_matrix",
    "read_stdin_matrix",
    "sniff_format",
    "make_unique",
    "fingerprint",
    "MATRIX_SUFFIXES",
]

MATRIX_SUFFIXES = (".npy", ".npz", ".mtx", ".mtx.gz", ".csv", ".csv.gz", ".tsv", ".tsv.gz", ".h5ad", ".h5", ".biom")
#: Formats that say themselves which axis holds the samples (``transpose`` does not apply).
_ORIENTED = {".biom": "a BIOM table"}


@dataclass
class MatrixData:
    """A samples x features matrix with its names.

    Attributes
    ----------
    X : ndarray (float64) or scipy.sparse.csr_matrix
    sample_names, feature_names : list of str
    path : str
        Where it was read from (for messages).
    obs : dict
        Per-sample annotations read along (``.h5ad`` obs columns), keyed by column name.
    adata : AnnData or None
        The whole ``.h5ad`` object (transposed with ``transpose``), when asked for with
        ``keep_adata`` (an ``.h5ad`` output keeps every field of its input).
    options : dict
        How the matrix was read: ``transpose``, ``layer``, ``use_raw`` (recorded in outputs).
    """

    X: np.ndarray | sp.csr_matrix
    sample_names: list[str]
    feature_names: list[str]
    path: str = "<memory>"
    obs: dict = field(default_factory=dict)
    adata: Any = None
    options: dict = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.X.shape[0]), int(self.X.shape[1]))

    @property
    def is_sparse(self) -> bool:
        return sp.issparse(self.X)

    def record(self) -> dict[str, Any]:
        """What every output records about its input: file name, fingerprint, shape, how it was read."""
        from hdtwd_cli._version import __version__

        return {
            "hdtwd_version": __version__,
            "input_path": os.path.basename(self.path),
            "input_fingerprint": fingerprint(self.X, self.feature_names),
            "n_samples": self.shape[0],
            "n_features": self.shape[1],
            **self.options,
        }


def make_unique(names: list[str], what: str = "feature", path: str | None = None) -> list[str]:
    """Make names unique as AnnData does (``g``, ``g-1``, ``g-2``, ...), warning when needed.

    Empty names are replaced by ``f<index>`` (features) or ``s<index>`` (samples).
    """
    prefix = "f" if what == "feature" else "s"
    names = [str(s) if str(s) != "" else f"{prefix}{i}" for i, s in enumerate(names)]
    seen: set[str] = set(names)
    if len(seen) == len(names):
        return names
    counts: dict[str, int] = {}
    out: list[str] = []
    first: set[str] = set()
    n_dup = 0
    for s in names:
        if s not in first:
            first.add(s)
            out.append(s)
            continue
        n_dup += 1
        k = counts.get(s, 0)
        while True:
            k += 1
            cand = f"{s}-{k}"
            if cand not in seen:
                break
        counts[s] = k
        seen.add(cand)
        out.append(cand)
    where = f"{path}: " if path else ""
    warnings.warn(
        f"{where}{n_dup} duplicate {what} names made unique by appending -1, -2, ...", HdtwdWarning, stacklevel=2
    )
    return out


def check_values(X: np.ndarray | sp.spmatrix, path: str) -> np.ndarray | sp.csr_matrix:
    """Convert to float64 (CSR when sparse) and check shape, finiteness and sign."""
    if X.dtype.kind in "iu":  # beyond 2^53 an integer is not exact in float64: counts would change
        vals = X.data if sp.issparse(X) else np.asarray(X)
        top = int(vals.max()) if vals.size else 0  # type: ignore[union-attr]
        if top > 2**53:
            raise InputError(
                f"integer values above 2^53 (max {top}) are not exact as float64; "
                "scale them down or store them as floating point",
                path,
            )
    if sp.issparse(X):
        if X.dtype.kind not in "biuf":
            raise InputError(f"matrix has non-numeric type {X.dtype}", path)
        check_sparse(X, path)  # before SciPy's compiled routines read the index arrays
        X = canonical_csr(X)  # never sorts the caller's index arrays in place
        vals = X.data
    else:
        X = np.asarray(X)
        if X.dtype.kind not in "biuf":
            raise InputError(f"matrix has non-numeric type {X.dtype}", path)
        if X.ndim != 2:
            raise InputError(f"expected a 2-D matrix, found {X.ndim} dimension(s)", path)
        X = np.ascontiguousarray(X, dtype=np.float64)
        vals = X.ravel()
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise InputError(f"matrix is empty (shape {X.shape[0]} x {X.shape[1]})", path)
    if not np.all(np.isfinite(vals)):
        bad = np.flatnonzero(~np.isfinite(vals))
        raise InputError(f"matrix holds {bad.size} NaN or infinite value(s)", path)
    if vals.size and vals.min() < 0:
        raise InputError(
            f"matrix holds negative values (min {float(vals.min())!r}); weights must be non-negative", path
        )
    return X


def _check_npy_header(path: str) -> None:
    """Refuse an ``.npy`` file whose header claims more values than the file holds, before any allocation."""
    from numpy.lib import format as npformat

    with open(path, "rb") as fh:
        version = npformat.read_magic(fh)
        read_header = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
        shape, _, dtype = read_header(fh)
        held = os.fstat(fh.fileno()).st_size - fh.tell()
    if dtype.hasobject:
        return  # refused by np.load with its own message
    claimed = int(np.prod([int(s) for s in shape], dtype=object)) * dtype.itemsize
    if claimed > held:
        dims = " x ".join(str(s) for s in shape) or "a scalar"
        raise InputError(
            f"header claims {dims} {dtype} values ({human_bytes(claimed)}) but the file holds "
            f"{human_bytes(held)} after it (truncated or damaged)",
            path,
        )


def _read_npy(path: str) -> tuple[np.ndarray, None, None]:
    try:
        with reading(path, ".npy file"):
            _check_npy_header(path)
            arr = np.load(path, allow_pickle=False)
    except InputError as e:
        if "allow_pickle" in e.message:
            raise InputError("array holds Python objects; numeric arrays only", path) from None
        raise
    return arr, None, None


def _read_npz(path: str) -> tuple[np.ndarray | sp.spmatrix, None, None]:
    try:
        return sp.load_npz(path), None, None
    except Exception:
        pass
    try:
        with np.load(path, allow_pickle=False) as z:
            keys = list(z.keys())
            if len(keys) != 1:
                raise InputError(f"neither a scipy.sparse .npz nor an archive with one array (keys: {keys[:5]})", path)
            return z[keys[0]], None, None
    except InputError:
        raise
    except Exception as e:
        raise InputError(f"not a readable .npz file ({e})", path) from None


def _read_mtx(path: str) -> tuple[sp.spmatrix, None, None]:
    M = read_matrix_market(path)
    return (sp.csr_matrix(M) if sp.issparse(M) else np.asarray(M)), None, None


def _alternatives(has_raw: bool, layers: list[str]) -> str:
    """Where else an AnnData holds a matrix, named for a hint (``raw.X``, layers)."""
    alt = (["raw.X ({a})"] if has_raw else []) + (
        [f"layers {', '.join(map(repr, layers[:5]))} ({{b}} NAME)"] if layers else []
    )
    return " and ".join(alt)


def _read_h5ad(path: str, layer: str | None, use_raw: bool, obs_keys: tuple[str, ...], keep_adata: bool):
    """``X`` (or ``raw.X`` / a layer), the names and obs columns of an ``.h5ad`` file, and the hint of where else
    it holds a matrix; the AnnData itself too with ``keep_adata``.

    The layout anndata documents is read with h5py (:func:`hdtwd_cli.io._h5ad.read_h5ad_parts`, no
    import of anndata); anything else, and ``keep_adata``, by ``anndata.read_h5ad``.
    """
    if use_raw and layer:
        raise ParameterError("{arg} and {b} exclude each other", "layer", path, b="use_raw")
    f = open_hdf5(path)
    parts = None
    with f:
        if not keep_adata:
            try:
                parts = read_h5ad_parts(f, path, layer, use_raw, obs_keys)
            except HdtwdError:
                raise
            except MemoryError as e:
                raise ResourceError(
                    f"reading the AnnData file needs more memory than is available ({e})", path
                ) from None
            except DECODE_ERRORS:
                parts = None  # damaged: anndata reads it and names what it finds
    if parts is not None:
        X, rows, cols, obs, has_raw, layers = parts
        return X, rows, cols, obs, None, _alternatives(has_raw, layers)
    try:
        import anndata
    except ImportError as e:  # pragma: no cover - anndata is a dependency
        raise InputError(f"reading .h5ad needs anndata ({e})", path) from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ad = anndata.read_h5ad(path)
    except MemoryError as e:
        raise ResourceError(f"reading the AnnData file needs more memory than is available ({e})", path) from None
    except Exception as e:
        raise InputError(f"not a readable AnnData file ({type(e).__name__}: {e})", path) from None
    var_names = [str(s) for s in ad.var_names]
    if use_raw:
        if ad.raw is None:
            raise InputError("AnnData has no .raw", path)
        X = ad.raw.X
        var_names = [str(s) for s in ad.raw.var_names]
    elif layer:
        if layer not in ad.layers:
            have = ", ".join(list(ad.layers.keys())[:8]) or "none"
            raise InputError(f"AnnData has no layer {layer!r} (layers: {have})", path)
        X = ad.layers[layer]
    else:
        X = ad.X
    if X is None:
        raise InputError("AnnData has no X", path)
    if not sp.issparse(X):
        X = np.asarray(X)
    obs = {}
    for k in obs_keys:
        if k not in ad.obs.columns:
            have = ", ".join(map(str, list(ad.obs.columns)[:8])) or "none"
            raise InputError(f"AnnData obs has no column {k!r} (columns: {have})", path)
        obs[k] = np.asarray(ad.obs[k].astype(str))
    hint = _alternatives(ad.raw is not None, list(ad.layers.keys()))
    return X, [str(s) for s in ad.obs_names], var_names, obs, ad, hint


def sniff_format(head: bytes) -> str:
    """The suffix of a matrix file from its first bytes (for standard input, which has no name)."""
    if head.startswith(b"\x1f\x8b"):  # gzip: sniff what it holds
        import zlib

        try:
            inner = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 4096)
        except zlib.error:
            inner = b""
        kind = sniff_format(inner) if inner else ".csv"
        return kind + ".gz" if kind in (".csv", ".tsv", ".mtx") else ".csv.gz"
    if head.startswith(b"\x93NUMPY"):
        return ".npy"
    if head.startswith(b"PK\x03\x04"):
        return ".npz"
    if head.startswith(HDF5_MAGIC):
        return ".h5ad"
    if head.lstrip().startswith(b"{"):  # JSON: BIOM 1.0
        return ".biom"
    if head.lstrip().startswith(b"%%MatrixMarket"):
        return ".mtx"
    first = head.split(b"\n", 1)[0]
    return ".tsv" if b"\t" in first else ".csv"


def read_stdin_matrix(stream: Any, fmt: str | None = None, name: str = "<stdin>", **kw: Any) -> MatrixData:
    """Read a matrix from a binary stream (standard input, a FIFO): buffered, since pipes are not seekable.

    The bytes are spooled to a private temporary file whose suffix is ``fmt`` or sniffed from the
    content (:func:`sniff_format`), then read like a file; messages name ``name``. The temporary
    directory is removed on every way out (errors, Ctrl-C, SIGTERM).
    """
    data = stream.read()
    if not data:
        raise InputError("standard input is empty" if name == "<stdin>" else "stream is empty", name)
    suffix = ("." + fmt.lstrip(".")) if fmt else sniff_format(data[:4096])
    with tempfile.TemporaryDirectory(prefix="hdtwd-stdin-") as d:
        tmp = os.path.join(d, "stdin" + suffix)
        with open(tmp, "wb") as fh:
            fh.write(data)
        del data
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                md = read_matrix(tmp, **kw)
            except HdtwdError as e:
                e.template, e.path = e.template.replace(tmp, name), name
                e.message = e.worded(lambda a: a)
                raise
        for w in caught:
            warnings.warn(str(w.message).replace(tmp, name), HdtwdWarning, stacklevel=2)
    md.path = name
    return md


def read_matrix(
    path: str | os.PathLike,
    transpose: bool = False,
    layer: str | None = None,
    use_raw: bool = False,
    obs_keys: tuple[str, ...] = (),
    keep_adata: bool = False,
    var_names: str | None = None,
    genome: str | None = None,
    *,
    header: bool | None = None,
) -> MatrixData:
    """Read a samples x features matrix from ``path`` (format from the suffix).

    Parameters
    ----------
    path : path-like
    transpose : bool
        The file stores features x samples (e.g. genes x cells): transpose it.
    layer, use_raw : optional
        ``.h5ad`` only: read ``layers[layer]`` or ``raw.X`` instead of ``X``.
    obs_keys : tuple of str
        ``.h5ad`` only: obs columns to read along (as strings).
    keep_adata : bool
        ``.h5ad`` only: keep the whole AnnData in :attr:`MatrixData.adata`.
    var_names : {"gene_symbols", "gene_ids"}, optional
        10x inputs only (:mod:`hdtwd_cli.io._tenx`): feature names from gene symbols (default) or ids.
    genome : str, optional
        Cell Ranger ``.h5`` only: the genome to read (needed when a Cell Ranger 2 file holds several),
        as ``scanpy.read_10x_h5(genome=)``.
    header : bool, optional
        ``.csv``/``.tsv`` only: whether the first row is a header. None (default): decided by the layout
        (:mod:`hdtwd_cli.io._table`), an error naming ``header`` where the first row cannot be told
        apart from data.

    Raises
    ------
    InputError
        Missing or unreadable file, unknown suffix, non-numeric, NaN/Inf or negative values.
    """
    p = str(path)
    if not os.path.exists(p):
        raise InputError("no such file", p)
    if not os.access(p, os.R_OK):
        raise InputError("permission denied", p)
    tenx = tenx_files(p)
    if os.path.isdir(p) and tenx is None:
        raise InputError("is a directory, not a matrix file or a 10x matrix directory", p)
    suffix = format_suffix(p)
    if tenx is None and not os.path.isfile(p):  # a FIFO, e.g. <(zcat x.csv.gz): read it like standard input
        with open(p, "rb") as stream:
            return read_stdin_matrix(
                stream,
                suffix if suffix in MATRIX_SUFFIXES else None,
                name=p,
                transpose=transpose,
                layer=layer,
                use_raw=use_raw,
                obs_keys=obs_keys,
                keep_adata=keep_adata,
                var_names=var_names,
                genome=genome,
                header=header,
            )
    if (layer or use_raw) and suffix != ".h5ad":
        raise ParameterError(
            "{arg} and {b} apply to .h5ad files only",
            "layer" if layer else "use_raw",
            p,
            b="use_raw" if layer else "layer",
        )
    if obs_keys and suffix != ".h5ad":
        raise InputError("obs columns can only be read from .h5ad files", p)
    if var_names is not None and tenx is None and suffix != ".h5":
        raise ParameterError("applies to 10x inputs only (a matrix directory or a Cell Ranger .h5)", "var_names", p)
    if genome is not None and suffix != ".h5":
        raise ParameterError("applies to Cell Ranger .h5 files only", "genome", p)
    if header is not None and suffix not in (".csv", ".tsv", ".csv.gz", ".tsv.gz"):
        raise ParameterError("applies to .csv and .tsv tables only", "header", p)
    if tenx is None and os.path.getsize(p) == 0:
        raise InputError("file is empty", p)
    before = _file_state(tenx or (p,))
    obs: dict = {}
    ad = None
    hint = ""
    layout = _ORIENTED.get(suffix)
    if tenx is not None:
        X, rows, cols = read_10x_mtx(p, var_names or "gene_symbols")
    elif suffix == ".npy":
        X, rows, cols = _read_npy(p)  # type: ignore[assignment]
    elif suffix == ".npz":
        X, rows, cols = _read_npz(p)  # type: ignore[assignment]
    elif suffix in (".mtx", ".mtx.gz"):
        X, rows, cols = _read_mtx(p)  # type: ignore[assignment]
    elif suffix in (".csv", ".tsv", ".csv.gz", ".tsv.gz"):
        table = read_delimited(p, "\t" if suffix.startswith(".tsv") else ",", header=header)
        X, rows, cols, layout = table.values, table.sample_names, table.feature_names, table.layout  # type: ignore[assignment]
    elif suffix == ".h5ad":
        X, rows, cols, obs, ad, hint = _read_h5ad(p, layer, use_raw, obs_keys, keep_adata)
    elif suffix == ".h5":
        X, rows, cols = read_10x_h5(p, var_names or "gene_symbols", genome)
    elif suffix == ".biom":
        X, rows, cols = read_biom(p)
    else:
        raise InputError(
            f"unknown file type {suffix or '(no suffix)'!r}; expected one of {', '.join(MATRIX_SUFFIXES)} "
            "or a 10x matrix directory",
            p,
        )
    if _file_state(tenx or (p,)) != before:
        raise InputError(
            "the file changed while it was being read (size or modification time); read it again once it is complete", p
        )
    try:
        X = check_values(X, p)
    except InputError as e:
        if not hint or "negative" not in e.message:
            raise
        text = e.message.replace("{", "{{").replace("}", "}}")
        raise InputError(text + f"; the file also holds {hint}", p, a="use_raw", b="layer") from None
    if transpose and layout is not None:
        raise ParameterError(
            f"does not apply: {layout} says which ids are the samples (read as samples x features)", "transpose", p
        )
    if transpose:
        X = X.T.tocsr() if sp.issparse(X) else np.ascontiguousarray(X.T)
        rows, cols = cols, rows
        if obs:
            raise ParameterError("cannot be combined with obs columns", "transpose", p)
    n, m = X.shape
    if rows is not None and len(rows) != n:
        raise InputError(f"{len(rows)} sample names for {n} rows", p)
    if cols is not None and len(cols) != m:
        raise InputError(f"{len(cols)} feature names for {m} columns", p)
    check_orientation(sample_names=rows, feature_names=cols, transposed=transpose, path=p)
    sample_names = make_unique(rows if rows is not None else [f"s{i}" for i in range(n)], "sample", p)
    feature_names = make_unique(cols if cols is not None else [f"f{j}" for j in range(m)], "feature", p)
    if ad is not None and keep_adata:
        ad = ad.T.copy() if transpose else ad
    return MatrixData(
        X=X,
        sample_names=sample_names,
        feature_names=feature_names,
        path=p,
        obs=obs,
        adata=ad if keep_adata else None,
        options={"transpose": bool(transpose), "layer": layer, "use_raw": bool(use_raw)},
    )


def format_suffix(path: str) -> str:
    """The format part of a file name: ``.csv``, or ``.csv.gz`` for a compressed one (lower case)."""
    name = os.path.basename(path).lower()
    suffix = Path(name).suffix
    if suffix == ".gz":
        suffix = Path(name[:-3]).suffix + ".gz"
    return suffix


def _file_state(paths: tuple[str, ...]) -> list[tuple[int, int, int]]:
    """(inode, size, modification time) of each file: compared before and after reading."""
    out = []
    for q in paths:
        st = os.stat(q)
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return out


def fingerprint(X: np.ndarray | sp.spmatrix, feature_names: list[str]) -> str:
    """SHA-256 of the matrix values and feature names, independent of the file format.

    Rows are hashed in blocks as canonical CSR (sorted indices, explicit zeros removed), so the
    same numbers give the same fingerprint whether read dense or sparse.
    """
    h = hashlib.sha256()
    n, m = X.shape
    h.update(f"hdtwd-matrix-v1:{n}x{m}\n".encode())
    for name in feature_names:
        h.update(name.encode("utf-8") + b"\0")
    block = 1024
    for start in range(0, n, block):
        B = X[start : start + block]
        B = sp.csr_matrix(B, dtype=np.float64)
        B.eliminate_zeros()
        B.sum_duplicates()
        B.sort_indices()
        h.update(np.diff(B.indptr).astype("<i8").tobytes())
        h.update(B.indices.astype("<i8").tobytes())
        h.update(B.data.astype("<f8").tobytes())
    return "sha256:" + h.hexdigest()


def read_labels(spec: str, md: MatrixData) -> np.ndarray:
    """Class labels of the rows of ``md``: ``obs:COLUMN`` (read along from an .h5ad) or a file, one per line."""
    if spec.startswith("obs:"):
        col = spec[4:]
        if col not in md.obs:
            raise InputError(f"obs column {col!r} was not read", md.path)
        return np.asarray(md.obs[col])
    path = Path(spec)
    if not path.exists():
        raise InputError("no such labels file", path)
    if path.is_dir():
        raise InputError("is a directory, not a labels file", path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise InputError("labels file is not UTF-8 text", path) from None
    while lines and lines[-1].strip() == "":
        lines.pop()
    labels = np.array([ln.strip() for ln in lines])
    if labels.shape[0] != md.shape[0]:
        raise InputError(f"{labels.shape[0]} labels for {md.shape[0]} samples in {md.path}", path)
    if np.any(labels == ""):
        raise InputError(f"empty label on line {int(np.flatnonzero(labels == '')[0]) + 1}", path)
    return labels
