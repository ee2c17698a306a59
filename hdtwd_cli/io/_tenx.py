"""Cell Ranger (10x Genomics) outputs: the ``filtered_feature_bc_matrix/`` directory and the ``.h5`` file.

10x stores genes x cells; both readers return cells x genes (rows = samples, as everywhere in
hdtwd), sparse, with barcodes as sample names and gene symbols or gene ids as feature names
(``var_names``, as scanpy's ``read_10x_mtx`` / ``read_10x_h5``). As scanpy does by default
(``gex_only=True``), only "Gene Expression" features are kept when the files name feature types
(antibody capture, CRISPR guides and the like are other measurements).

Directory layout (Cell Ranger 3+ and 2): ``[PREFIX]matrix.mtx[.gz]`` with ``[PREFIX]barcodes.tsv[.gz]``
and ``[PREFIX]features.tsv[.gz]`` (3+) or ``[PREFIX]genes.tsv`` (2); GEO's one-folder form with a
common prefix (``GSM1_matrix.mtx.gz``, ...) is read too, and so is the matrix file given alone
when its two companions lie next to it.

``.h5``: group ``matrix`` (Cell Ranger 3+: ``data``, ``indices``, ``indptr``, ``shape``,
``barcodes``, ``features/{id,name,feature_type,genome}``) or one group per genome (Cell Ranger 2:
``genes``, ``gene_names``). As scanpy's ``read_10x_h5(genome=)``: a Cell Ranger 2 file with several
genomes needs one named (the error lists them); in a Cell Ranger 3+ file a genome keeps only its
features (all are kept by default).
"""

from __future__ import annotations

import os
import re
import zlib
from typing import Literal

import numpy as np
import scipy.sparse as sp

from hdtwd_cli.errors import InputError, ParameterError
from hdtwd_cli.io._guard import check_sparse, numeric, open_hdf5, read_matrix_market, reading
from hdtwd_cli.io._text import open_text

__all__ = ["VAR_NAMES", "tenx_files", "read_10x_mtx", "read_10x_h5"]

VarNames = Literal["gene_symbols", "gene_ids"]
VAR_NAMES = ("gene_symbols", "gene_ids")
_MATRIX = re.compile(r"^(.*)matrix\.mtx(\.gz)?$")


def _check_var_names(var_names: str) -> None:
    if var_names not in VAR_NAMES:
        raise ParameterError(f"must be one of {', '.join(VAR_NAMES)}, not {var_names!r}", "var_names")


def _companion(folder: str, prefix: str, names: tuple[str, ...]) -> str | None:
    for name in names:
        for ext in (".gz", ""):
            p = os.path.join(folder, prefix + name + ext)
            if os.path.isfile(p):
                return p
    return None


def tenx_files(path: str) -> tuple[str, str, str] | None:
    """``(matrix, features, barcodes)`` of a 10x matrix directory or matrix file, or None when ``path`` is not one.

    Raises
    ------
    InputError
        A directory with a 10x matrix whose companion files are missing, or with several matrices.
    """
    if os.path.isdir(path):
        folder = path
        found = sorted(f for f in os.listdir(path) if _MATRIX.match(f) and os.path.isfile(os.path.join(path, f)))
        if not found:
            return None
        prefixes = sorted({_MATRIX.match(f).group(1) for f in found})  # type: ignore[union-attr]
        if len(prefixes) > 1:
            raise InputError(
                f"holds {len(prefixes)} 10x matrices ({', '.join(found[:4])}); give the matrix file itself", path
            )
        matrix = os.path.join(path, found[0])
        prefix = prefixes[0]
    else:
        m = _MATRIX.match(os.path.basename(path))
        if m is None:
            return None
        folder, prefix, matrix = os.path.dirname(path) or ".", m.group(1), path
    features = _companion(folder, prefix, ("features.tsv", "genes.tsv"))
    barcodes = _companion(folder, prefix, ("barcodes.tsv",))
    if features is None or barcodes is None:
        if not os.path.isdir(path):
            return None  # a plain Matrix Market file that happens to be called matrix.mtx
        missing = [f"{prefix}{n}.tsv[.gz]" for n, f in (("features", features), ("barcodes", barcodes)) if f is None]
        raise InputError(f"10x matrix directory without {' and '.join(missing)}", path)
    return matrix, features, barcodes


def _read_lines(path: str) -> list[list[str]]:
    try:
        with open_text(path) as fh:
            return [ln.rstrip("\r\n").split("\t") for ln in fh if ln.strip()]
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:
        raise InputError(f"not a readable 10x table ({e})", path) from None


def _feature_table(rows: list[list[str]], path: str, var_names: str) -> tuple[list[str], np.ndarray | None]:
    """Feature names and the "Gene Expression" mask (None: no feature types given)."""
    col = 1 if var_names == "gene_symbols" else 0
    if any(len(r) <= col for r in rows):
        bad = next(i for i, r in enumerate(rows) if len(r) <= col)
        raise InputError(f"line {bad + 1} has no {'gene symbol (column 2)' if col else 'gene id'}", path)
    names = [r[col] for r in rows]
    if all(len(r) >= 3 for r in rows):
        return names, np.array([r[2] == "Gene Expression" for r in rows])
    return names, None


def _keep_gex(X: sp.csr_matrix, names: list[str], gex: np.ndarray | None, path: str) -> tuple[sp.csr_matrix, list[str]]:
    if gex is None or gex.all():
        return X, names
    if not gex.any():
        raise InputError("no 'Gene Expression' features", path)
    keep = np.flatnonzero(gex)
    return sp.csr_matrix(X[:, keep]), [names[j] for j in keep]


def read_10x_mtx(path: str, var_names: str = "gene_symbols") -> tuple[sp.csr_matrix, list[str], list[str]]:
    """Cells x genes CSR counts, barcodes and feature names of a 10x matrix directory (or matrix file).

    Same matrix and names as ``scanpy.read_10x_mtx(path, var_names=...)`` (tested).
    """
    _check_var_names(var_names)
    files = tenx_files(path)
    if files is None:
        raise InputError("not a 10x matrix directory (no matrix.mtx[.gz])", path)
    matrix, features, barcodes = files
    M = read_matrix_market(matrix)
    X = sp.csr_matrix(sp.coo_matrix(M).T)
    feats = _read_lines(features)
    cells = [r[0] for r in _read_lines(barcodes)]
    if len(feats) != X.shape[1]:
        raise InputError(f"{len(feats)} features for a matrix of {X.shape[1]} genes", features)
    if len(cells) != X.shape[0]:
        raise InputError(f"{len(cells)} barcodes for a matrix of {X.shape[0]} cells", barcodes)
    names, gex = _feature_table(feats, features, var_names)
    X, names = _keep_gex(X, names, gex, features)
    return X, cells, names


def _strings(ds: object) -> list[str]:
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in np.asarray(ds)]


def read_10x_h5(
    path: str, var_names: str = "gene_symbols", genome: str | None = None
) -> tuple[sp.csr_matrix, list[str], list[str]]:
    """Cells x genes CSR counts, barcodes and feature names of a Cell Ranger ``.h5`` file.

    Same matrix and names as ``scanpy.read_10x_h5(path, genome=genome)`` (tested), with
    ``var_names`` choosing ``name`` (gene symbols) or ``id``.
    """
    _check_var_names(var_names)
    import h5py

    f = open_hdf5(path)
    with f, reading(path, "Cell Ranger .h5 file"):
        legacy = ("data", "indices", "indptr", "shape", "barcodes", "genes", "gene_names")
        if "matrix" in f:
            g = f["matrix"]
            need: tuple[str, ...] = ("data", "indices", "indptr", "shape", "barcodes", "features")
        else:
            groups = [k for k in f.keys() if isinstance(f[k], h5py.Group)]
            genomes = [k for k in groups if all(n in f[k] for n in legacy)]  # Cell Ranger 2: a group per genome
            if not genomes:
                raise InputError(
                    "not a 10x .h5 file (no 'matrix' group, no genome group); hdtwd's own .h5 files "
                    "are trees and embeddings (--tree, --embedding)",
                    path,
                )
            if genome is not None and genome not in genomes:
                raise InputError(f"10x .h5 file has no genome {genome!r} (genomes: {', '.join(genomes)})", path)
            if genome is None and len(genomes) > 1:
                raise InputError(
                    f"10x .h5 file holds {len(genomes)} genomes ({', '.join(genomes)}): choose one with {{a}} NAME",
                    path,
                    a="genome",
                )
            g = f[genome or genomes[0]]
            need = legacy
        missing = [k for k in need if k not in g]
        if missing:
            raise InputError(f"10x .h5 group {g.name!r} lacks {', '.join(missing)}", path)
        shape = numeric(g["shape"][()], path, "10x .h5 matrix shape", kinds="iu", ndim=1)
        if shape.size != 2 or shape.min() < 0:
            raise InputError(f"10x .h5 matrix shape {shape.tolist()} is not two non-negative sizes", path)
        genes, cells = (int(v) for v in shape)
        arrays = [numeric(g[k][()], path, f"10x .h5 matrix {k}", ndim=1) for k in ("data", "indices", "indptr")]
        try:
            X = sp.csr_matrix(tuple(arrays), shape=(cells, genes))
        except (ValueError, TypeError, IndexError) as e:
            raise InputError(f"10x .h5 matrix is inconsistent ({e})", path) from None
        check_sparse(X, path)
        barcodes = _strings(g["barcodes"])
        if "features" in need:
            ft = g["features"]
            names = _strings(ft["name" if var_names == "gene_symbols" else "id"])
            gex = (
                np.array([t == "Gene Expression" for t in _strings(ft["feature_type"])])
                if "feature_type" in ft
                else None
            )
            if gex is not None and gex.size != genes:
                raise InputError(f"10x .h5 features/feature_type has {gex.size} entries for {genes} features", path)
            if genome is not None:
                found = _strings(ft["genome"]) if "genome" in ft else []
                if found and len(found) != genes:
                    raise InputError(f"10x .h5 features/genome has {len(found)} entries for {genes} features", path)
                if genome not in found:
                    listed = ", ".join(sorted(set(found))) or "none recorded"
                    raise InputError(f"10x .h5 file has no features of genome {genome!r} (genomes: {listed})", path)
                mine = np.array([s == genome for s in found])
                gex = mine if gex is None else gex & mine
        else:
            names = _strings(g["gene_names" if var_names == "gene_symbols" else "genes"])
            gex = None
    if len(names) != genes or len(barcodes) != cells:
        raise InputError(
            f"10x .h5 names ({len(barcodes)} barcodes, {len(names)} features) do not match its "
            f"{genes} x {cells} matrix",
            path,
        )
    X, names = _keep_gex(X, names, gex, path)
    return X, barcodes, names
