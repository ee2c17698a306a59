"""Feature embeddings: the features' ambient vectors (``--feature-embedding FILE``), one row per name.

The paper's experiments place words by word2vec vectors and genes by Gene2vec vectors. Accepted
files, features matched to the data by NAME:

- ``.txt``, ``.vec`` (optionally ``.gz``): word2vec / GloVe text, one ``name v1 v2 ... vd`` per line,
  separated by spaces; a first line of two integers (word2vec's ``count dim`` header) is skipped.
- ``.npz``: an ``np.savez`` archive with arrays ``vectors`` (m x d) and ``names`` (m,).
- ``.npy``: an m x d array, with the names one per line in the ``.txt`` file of the same stem
  (``vectors.npy`` + ``vectors.txt``).
- ``.h5ad``: AnnData whose ROWS are the features: ``obs_names`` and ``X``.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from hdtwd_cli.errors import HdtwdError, InputError
from hdtwd_cli.io._guard import DECODE_ERRORS, open_hdf5
from hdtwd_cli.io._text import open_text

__all__ = ["read_feature_embedding", "EMBEDDING_SUFFIXES"]

EMBEDDING_SUFFIXES = (".txt", ".vec", ".txt.gz", ".vec.gz", ".npz", ".npy", ".h5ad")


def _check(vectors: np.ndarray, names: list[str], path: str) -> tuple[np.ndarray, list[str]]:
    if vectors.ndim != 2 or vectors.shape[0] == 0 or vectors.shape[1] == 0:
        raise InputError("a feature embedding needs one row of at least one value per feature", path)
    if vectors.shape[0] != len(names):
        raise InputError(f"{vectors.shape[0]} vectors but {len(names)} names", path)
    if not np.all(np.isfinite(vectors)):
        i = int(np.flatnonzero(~np.all(np.isfinite(vectors), axis=1))[0])
        raise InputError(f"the vector of {names[i]!r} holds NaN or infinite values", path)
    seen: set[str] = set()
    for nm in names:
        if nm in seen:
            raise InputError(f"feature {nm!r} has two vectors", path)
        seen.add(nm)
    return np.ascontiguousarray(vectors, dtype=np.float64), names


def _read_text(path: str) -> tuple[np.ndarray, list[str]]:
    names: list[str] = []
    rows: list[list[float]] = []
    width = None
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.rstrip("\n").rstrip("\r").split(" ")
            parts = [p for p in parts if p != ""]
            if not parts:
                continue
            if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                continue  # word2vec header "count dim"
            try:
                vals = [float(p) for p in parts[1:]]
            except ValueError:
                raise InputError(f"line {lineno}: not a name followed by numbers", path) from None
            if width is None:
                width = len(vals)
            if len(vals) != width or width == 0:
                raise InputError(f"line {lineno}: {len(vals)} values where line 1 has {width}", path)
            names.append(parts[0])
            rows.append(vals)
    if not rows:
        raise InputError("no vectors in the file", path)
    return np.array(rows, dtype=np.float64), names


def read_feature_embedding(path: str) -> tuple[np.ndarray, list[str]]:
    """Read a feature embedding (module docstring) as ``(vectors, names)``, one row per name."""
    low = path.lower()
    if not os.path.exists(path):
        raise InputError("no such file", path)
    try:
        if low.endswith((".txt", ".vec", ".txt.gz", ".vec.gz")):
            return _check(*_read_text(path), path)
        if low.endswith(".npz"):
            with np.load(path, allow_pickle=False) as z:
                if "vectors" not in z or "names" not in z:
                    raise InputError("an .npz feature embedding needs arrays 'vectors' and 'names'", path)
                return _check(np.asarray(z["vectors"], dtype=np.float64), [str(s) for s in z["names"]], path)
        if low.endswith(".npy"):
            names_path = path[:-4] + ".txt"
            if not os.path.exists(names_path):
                raise InputError(f"an .npy feature embedding needs its names, one per line, in {names_path}", path)
            with open(names_path, encoding="utf-8") as fh:
                names = [ln.rstrip("\r\n") for ln in fh if ln.strip()]
            return _check(np.asarray(np.load(path, allow_pickle=False), dtype=np.float64), names, path)
        if low.endswith(".h5ad"):
            import anndata

            open_hdf5(path).close()
            a = anndata.read_h5ad(path)
            X = a.X.toarray() if sp.issparse(a.X) else np.asarray(a.X)
            return _check(np.asarray(X, dtype=np.float64), [str(s) for s in a.obs_names], path)
    except (HdtwdError, MemoryError):
        raise
    except DECODE_ERRORS as e:
        raise InputError(f"cannot read the feature embedding ({type(e).__name__}: {e})", path) from None
    raise InputError(f"unknown feature-embedding format; use one of {', '.join(EMBEDDING_SUFFIXES)}", path)
