"""The matrix of an ``.h5ad`` file read with h5py, in AnnData's documented on-disk layout.

AnnData's file format (anndata.readthedocs.io, "On-disk format", encoding version 0.1.0 onwards)
tags every element with ``encoding-type`` / ``encoding-version`` attributes:

- the root group: ``anndata``;
- a matrix (``X``, ``raw/X``, ``layers/NAME``): a dataset (``array``) or a group ``csr_matrix`` /
  ``csc_matrix`` holding ``data``, ``indices``, ``indptr`` with the attribute ``shape``;
- ``obs`` / ``var``: a group ``dataframe`` whose attribute ``_index`` names the column holding the
  row names (a ``string-array`` dataset); a column is a ``string-array`` or a ``categorical`` group
  (``codes``, ``categories``; code -1 is a missing value).

:func:`read_h5ad_parts` reads exactly the parts a command needs from that layout, without importing
anndata (whose import, through pandas and, when installed, dask and zarr, costs about a second of
every command). Whatever it does not recognise (an older layout without encoding tags, another
column type, a missing ``X``) it leaves to ``anndata.read_h5ad`` by returning ``None``, so every
file anndata reads is still read, with anndata's values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.memory import available_memory, human_bytes
from hdtwd_cli.errors import InputError, ResourceError
from hdtwd_cli.io._guard import check_sparse, numeric

__all__ = ["H5adParts", "read_h5ad_parts"]

#: The parts read: the matrix, the obs and var names, the obs columns asked for (as strings), and where
#: else the file holds a matrix (``raw.X``, layer names) for the hint of an error.
H5adParts = tuple[Any, list[str], list[str], dict[str, np.ndarray], bool, list[str]]


class _Unrecognised(Exception):
    """A part is not in the layout read here: anndata reads the file instead."""


def _encoding(obj: Any) -> str:
    value = obj.attrs.get("encoding-type", None)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        raise _Unrecognised
    return value


def _strings(ds: Any) -> np.ndarray:
    """A ``string-array`` dataset as a 1-D object array of ``str`` (the type anndata's columns have)."""
    import h5py

    if not isinstance(ds, h5py.Dataset) or _encoding(ds) != "string-array" or ds.ndim != 1:
        raise _Unrecognised
    if h5py.check_string_dtype(ds.dtype) is None:
        raise _Unrecognised
    return np.array([str(v) for v in ds.asstr()[()]], dtype=object)


def _column(group: Any, name: str) -> np.ndarray:
    """A ``string-array`` or string ``categorical`` column as strings (a missing value as ``"nan"``, as pandas)."""
    import h5py

    obj = group[name]
    if isinstance(obj, h5py.Dataset):
        return _strings(obj)
    if _encoding(obj) != "categorical" or "codes" not in obj or "categories" not in obj:
        raise _Unrecognised
    categories = _strings(obj["categories"])
    codes = np.asarray(obj["codes"][()])
    if (
        codes.dtype.kind not in "iu"
        or codes.ndim != 1
        or codes.size
        and (codes.min() < -1 or codes.max() >= categories.size)
    ):
        raise _Unrecognised
    if not categories.size:
        return np.full(codes.size, "nan", dtype=object)
    return np.where(codes < 0, "nan", categories[np.maximum(codes, 0)]).astype(object)


def _names(f: Any, frame: str) -> tuple[Any, list[str]]:
    """The dataframe group ``frame`` and its index (row names)."""
    g = f.get(frame)
    if g is None or _encoding(g) != "dataframe":
        raise _Unrecognised
    index = g.attrs.get("_index", None)
    if isinstance(index, bytes):
        index = index.decode("utf-8", "replace")
    if not isinstance(index, str) or index not in g:
        raise _Unrecognised
    return g, _strings(g[index]).tolist()


def _fits(datasets: list[Any], path: str, what: str) -> None:
    """Refuse, before reading, datasets whose declared sizes pass the available memory."""
    need = sum(int(d.size) * d.dtype.itemsize for d in datasets)
    have = available_memory()
    if need > have:
        raise ResourceError(
            f"{what} declares {human_bytes(need)} of values, more than the {human_bytes(have)} of memory available",
            path,
        )


def _matrix(obj: Any, path: str, what: str) -> Any:
    """A dense ``array`` dataset as an ndarray, a ``csr_matrix`` / ``csc_matrix`` group as a SciPy matrix."""
    import h5py

    kind = _encoding(obj)
    if isinstance(obj, h5py.Dataset):
        if kind != "array" or obj.dtype.kind not in "biuf":
            raise _Unrecognised
        _fits([obj], path, what)
        return obj[()]
    if kind not in ("csr_matrix", "csc_matrix") or any(k not in obj for k in ("data", "indices", "indptr")):
        raise _Unrecognised
    if not all(isinstance(obj[k], h5py.Dataset) for k in ("data", "indices", "indptr")):
        raise _Unrecognised
    _fits([obj[k] for k in ("data", "indices", "indptr")], path, what)
    shape = numeric(obj.attrs.get("shape", np.zeros(0)), path, f"{what} shape", kinds="iu", ndim=1)
    if shape.size != 2 or shape.min() < 0:
        raise InputError(f"{what} shape {shape.tolist()} is not two non-negative sizes", path)
    arrays = [
        numeric(obj[k][()], path, f"{what} {k}", kinds="biuf" if k == "data" else "iu", ndim=1)
        for k in ("data", "indices", "indptr")
    ]
    build = sp.csr_matrix if kind == "csr_matrix" else sp.csc_matrix
    try:
        X = build(tuple(arrays), shape=(int(shape[0]), int(shape[1])))
    except (ValueError, TypeError, IndexError) as e:
        raise InputError(f"{what} is inconsistent ({e})", path) from None
    check_sparse(X, path)
    return X


def read_h5ad_parts(f: Any, path: str, layer: str | None, use_raw: bool, obs_keys: tuple[str, ...]) -> H5adParts | None:
    """The parts of the open ``.h5ad`` file ``f`` a command reads, or ``None`` to read it with anndata.

    Returns
    -------
    X : ndarray or sparse matrix
        ``X``, ``raw/X`` (``use_raw``) or ``layers/LAYER``, with the stored type.
    obs_names, var_names : list of str
        The rows' names and the matrix's columns' names (``raw/var`` with ``use_raw``).
    obs : dict
        The columns ``obs_keys`` of ``obs`` as arrays of ``str``.
    has_raw, layers : bool, list of str
        Where else the file holds a matrix (for the hint of a refused matrix).

    Raises
    ------
    InputError
        A part asked for is missing (no ``raw``, no such layer or obs column), or a sparse matrix's
        arrays are inconsistent. Other damage is left to anndata (``None``), which names it.
    """
    try:
        if _encoding(f) != "anndata":
            return None
        has_raw = "raw" in f
        layers = list(f["layers"].keys()) if "layers" in f else []
        obs_group, obs_names = _names(f, "obs")
        if use_raw:
            if not has_raw:
                raise InputError("AnnData has no .raw", path)
            where, var_frame, what = f["raw"].get("X"), "raw/var", "raw.X"
        elif layer:
            if layer not in layers:
                have = ", ".join(layers[:8]) or "none"
                raise InputError(f"AnnData has no layer {layer!r} (layers: {have})", path)
            where, var_frame, what = f["layers"][layer], "var", f"layer {layer!r}"
        else:
            where, var_frame, what = f.get("X"), "var", "X"
        if where is None:
            return None
        _, var_names = _names(f, var_frame)
        obs = {}
        for k in obs_keys:
            if k not in obs_group or k == obs_group.attrs.get("_index"):
                return None  # anndata names the columns it has
            obs[k] = _column(obs_group, k)
        X = _matrix(where, path, what)
        if X.ndim != 2 or X.shape[0] != len(obs_names) or any(v.shape != (X.shape[0],) for v in obs.values()):
            return None
        return X, obs_names, var_names, obs, has_raw, layers
    except _Unrecognised:
        return None
