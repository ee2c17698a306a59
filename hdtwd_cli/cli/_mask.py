"""``--mask-var``: the features of an ``.h5ad`` input that a command uses, as ``sc.pp.pca``'s ``mask_var``.

After ``sc.pp.highly_variable_genes`` an AnnData marks its highly variable genes in
``var["highly_variable"]``; scanpy's PCA (and so ``sc.pp.neighbors``) uses those genes only. The
commands do the same on an ``.h5ad`` input: the matrix read is restricted to the features the column
marks (matched by name when ``--use-raw`` reads ``raw.X``), and the outputs record it
(``mask_var``). The column is read with h5py where it is a plain boolean dataset or AnnData's
``nullable-boolean`` group, so that a command on an ``.h5ad`` still does not import anndata.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hdtwd_cli.errors import InputError, ParameterError

__all__ = ["NO_MASK", "apply_mask"]

#: ``--mask-var``'s value that keeps every feature (``mask_var=None`` in Python).
NO_MASK = "none"
#: The column used by default, where it exists (``hdtwd_cli._api._scanpy.HVG``).
HVG = "highly_variable"


def _strings(ds: Any) -> list[str]:
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in ds[()]]


def _column_from_file(path: str, frame: str, column: str) -> tuple[Any, list[str]] | None:
    """``frame[column]`` (``frame``: ``var`` or ``obs``) of the ``.h5ad`` at ``path`` and the frame's index,
    or ``None`` when the frame has no such column."""
    import h5py

    with h5py.File(path, "r") as f:
        g = f.get(frame)
        if g is None or not isinstance(g, h5py.Group) or column not in g:
            return None
        index = g.attrs.get("_index", None)
        index = index.decode() if isinstance(index, bytes) else index
        obj = g[column]
        if isinstance(index, str) and index in g:
            names = _strings(g[index])
            if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "b":
                return np.asarray(obj[()], dtype=bool), names
            if isinstance(obj, h5py.Group) and {"values", "mask"} <= set(obj):  # nullable-boolean
                values, missing = np.asarray(obj["values"][()]), np.asarray(obj["mask"][()], dtype=bool)
                if values.dtype.kind == "b":
                    return values & ~missing, names
    import anndata  # another layout or column type: anndata's reading, with its messages

    ad = anndata.read_h5ad(path, backed="r")
    try:
        df = ad.var if frame == "var" else ad.obs
        return df[column].to_numpy(), [str(v) for v in df.index]
    finally:
        ad.file.close()


def apply_mask(md: Any, column: str | None, path: str) -> str | None:
    """Restrict ``md`` (a :class:`hdtwd_cli.io.MatrixData`) to the features ``column`` marks; returns a line for
    ``-v`` (``None`` when every feature is kept).

    ``column``: ``None`` (the default) uses ``var["highly_variable"]`` where an ``.h5ad`` input has it;
    :data:`NO_MASK` keeps every feature; another name must be a boolean column of the input's ``var``
    (its ``obs`` with ``--transpose``, whose rows are then the features).
    """
    name = HVG if column is None else column
    if column == NO_MASK:
        md.options["mask_var"] = NO_MASK
        return None
    h5ad = str(path).lower().endswith(".h5ad") or md.adata is not None
    if not h5ad:
        if column is not None:
            raise ParameterError("selects features of an .h5ad input (its var columns)", "mask_var", str(path))
        return None
    transposed = bool(md.options.get("transpose"))
    if md.adata is not None:
        df = md.adata.var
        found = (df[name].to_numpy(), [str(v) for v in df.index]) if name in df.columns else None
    elif str(path) != "-":
        found = _column_from_file(str(path), "obs" if transposed else "var", name)
    else:
        found = None
    if found is None:
        if column is not None:
            raise InputError(f"--mask-var {column}: the AnnData's {'obs' if transposed else 'var'} has no such column")
        return None
    from hdtwd_cli._api import feature_mask

    keep = feature_mask(md.feature_names, found[1], found[0], label=name)
    md.options["mask_var"] = name
    if keep.all():
        return None
    index = np.flatnonzero(keep)
    read = len(md.feature_names)
    md.X = md.X[:, index]
    md.feature_names = [md.feature_names[i] for i in index]
    return f"using the {index.size} of {read} features var[{name!r}] marks (--mask-var {NO_MASK}: all of them)"
