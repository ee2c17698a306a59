"""BIOM tables (the microbiome ecosystem's OTU / feature tables), read with h5py or json alone.

BIOM stores observations (OTUs, ASVs) x samples; this reader returns samples x observations
(rows = samples, as everywhere in hdtwd), sparse, with the sample ids as sample names and the
observation ids as feature names. Metadata (taxonomy and the like) are not read.

BIOM 2.1 (HDF5; 2.0 has the same datasets)
    ``observation/ids`` and ``sample/ids`` (strings); ``sample/matrix/{data,indptr,indices}``:
    the table compressed by sample (CSR of samples x observations: ``indptr`` has one entry per
    sample plus one, ``indices`` are observation positions); ``observation/matrix/{data,indptr,
    indices}``: the same values compressed by observation. The root attribute ``shape`` is
    ``(observations, samples)``. The sample-compressed copy is read; a file holding only the
    observation-compressed one is read from that.

BIOM 1.0 (JSON)
    An object with ``rows`` (one ``{"id": ...}`` per observation), ``columns`` (one per sample),
    ``shape`` ``[observations, samples]``, ``matrix_type`` ``"sparse"`` (``data`` = ``[row, column,
    value]`` triples, each position at most once) or ``"dense"`` (``data`` = one list per
    observation).

The format says which axis holds the samples, so a caller's ``transpose`` does not apply.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli.errors import InputError
from hdtwd_cli.io._guard import check_sparse, numeric, open_hdf5, reading

__all__ = ["read_biom", "HDF5_MAGIC"]

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def read_biom(path: str) -> tuple[sp.csr_matrix, list[str], list[str]]:
    """Samples x observations CSR values, sample ids and observation ids of a BIOM 2.x or 1.0 file.

    Parameters
    ----------
    path : str

    Returns
    -------
    X : scipy.sparse.csr_matrix, shape (samples, observations)
    sample_ids, observation_ids : list of str

    Raises
    ------
    InputError
        Neither HDF5 nor JSON, or a layout that is not the one described in the module docstring.
    """
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head == HDF5_MAGIC:
        return _read_hdf5(path)
    return _read_json(path)


def _strings(ds: Any) -> list[str]:
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in np.asarray(ds).tolist()]


def _read_hdf5(path: str) -> tuple[sp.csr_matrix, list[str], list[str]]:
    f = open_hdf5(path)
    with f, reading(path, "BIOM file"):
        missing = [k for k in ("observation/ids", "sample/ids") if k not in f]
        if missing:
            raise InputError(f"not a BIOM 2 file: no {', '.join(missing)}", path)
        obs, samples = _strings(f["observation/ids"][()]), _strings(f["sample/ids"][()])
        if "shape" in f.attrs:
            shape = numeric(f.attrs["shape"], path, "BIOM shape attribute", kinds="iu", ndim=1).tolist()
            if shape != [len(obs), len(samples)]:
                raise InputError(
                    f"BIOM shape attribute {shape} does not match its {len(obs)} observation and "
                    f"{len(samples)} sample ids",
                    path,
                )
        by_sample = "sample/matrix/indptr" in f
        group = "sample/matrix" if by_sample else "observation/matrix"
        need = [f"{group}/{k}" for k in ("data", "indices", "indptr")]
        if any(k not in f for k in need):
            raise InputError(f"BIOM file lacks {' or '.join(k for k in need if k not in f)}", path)
        arrays = [numeric(f[k][()], path, k, ndim=1) for k in need]
        rows, cols = (len(samples), len(obs)) if by_sample else (len(obs), len(samples))
        try:
            M = sp.csr_matrix(tuple(arrays), shape=(rows, cols))
        except (ValueError, TypeError, IndexError) as e:
            raise InputError(f"BIOM {group} is inconsistent ({e})", path) from None
        check_sparse(M, path)
    X = M if by_sample else sp.csr_matrix(M.T)
    return X, samples, obs


def _ids(entries: Any, what: str, path: str) -> list[str]:
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "id" in e for e in entries):
        raise InputError(f"BIOM 1.0 {what!r} must be a list of objects with an 'id'", path)
    return [str(e["id"]) for e in entries]


def _read_json(path: str) -> tuple[sp.csr_matrix, list[str], list[str]]:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise InputError(f"not a BIOM file: neither HDF5 (BIOM 2) nor JSON (BIOM 1.0) ({e})", path) from None
    if not isinstance(doc, dict) or not all(k in doc for k in ("rows", "columns", "data", "matrix_type")):
        raise InputError("not a BIOM 1.0 table: a JSON object needs 'rows', 'columns', 'data', 'matrix_type'", path)
    obs, samples = _ids(doc["rows"], "rows", path), _ids(doc["columns"], "columns", path)
    n, m = len(obs), len(samples)
    if "shape" in doc and list(doc["shape"]) != [n, m]:
        raise InputError(f"BIOM shape {doc['shape']} does not match its {n} rows and {m} columns", path)
    kind, data = doc["matrix_type"], doc["data"]
    try:
        if kind == "dense":
            D = np.asarray(data, dtype=np.float64)
            if D.shape != (n, m) and not (D.size == 0 and n * m == 0):
                raise InputError(f"BIOM dense data has shape {D.shape}, expected ({n}, {m})", path)
            M = sp.csr_matrix(D.reshape(n, m))
        elif kind == "sparse":
            T = np.asarray(data, dtype=np.float64) if len(data) else np.zeros((0, 3))
            if T.ndim != 2 or T.shape[1] != 3:
                raise InputError("BIOM sparse data must be [row, column, value] triples", path)
            r, c = T[:, 0], T[:, 1]
            bad = (r != np.floor(r)) | (c != np.floor(c)) | (r < 0) | (r >= n) | (c < 0) | (c >= m)
            if np.any(bad):
                i = int(np.flatnonzero(bad)[0])
                raise InputError(f"BIOM sparse entry {i} {T[i].tolist()} is outside the {n} x {m} table", path)
            key = r.astype(np.int64) * m + c.astype(np.int64)
            if np.unique(key).size != key.size:
                raise InputError("BIOM sparse data give one position twice", path)
            M = sp.csr_matrix((T[:, 2], (r.astype(np.int64), c.astype(np.int64))), shape=(n, m))
        else:
            raise InputError(f"BIOM matrix_type {kind!r} is neither 'sparse' nor 'dense'", path)
    except (ValueError, TypeError) as e:
        raise InputError(f"BIOM data are not a table of numbers ({e})", path) from None
    return sp.csr_matrix(M.T), samples, obs
