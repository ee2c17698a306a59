"""Writing what ``hdtwd distance -o`` asks for: a matrix by suffix, a kNN graph, a Zarr store.

The formats themselves belong to :mod:`hdtwd_cli.io`; this module decides, from the output's
suffix and the options, which computation feeds which writer (the kNN search, the blocked
matrix, the matrix in memory), so that the I/O layer never runs the method.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import scipy.sparse as sp

from hdtwd_cli.errors import HdtwdWarning, OutputError, ParameterError
from hdtwd_cli.io import (
    TREE_SUFFIXES,
    atomic_path,
    distance_suffix,
    write_distances,
    write_distances_blocked,
    write_npy_in_place,
)

KNN_SUFFIXES = (".npz", ".h5ad")
#: Tree files that keep everything (feature weights, denoiser, Haar filter).
H5_TREE_SUFFIXES = (".h5", ".hdf5")


def write_knn(
    path: str, graph: Any, record: dict, *, key_added: str | None = None, adata: Any = None, vectors: Any = None
) -> None:
    """Write a kNN graph (:class:`hdtwd_cli._api.KnnGraph`): ``.npz`` or ``.h5ad``.

    ``.npz``: the CSR distance matrix (``scipy.sparse.load_npz``), the ``n_neighbors - 1`` distances
    of each row. ``.h5ad``: ``adata`` (the input AnnData, or a new one) with the graph in
    ``sc.pp.neighbors``' layout (:func:`hdtwd_cli._api.write_graph`) and ``vectors`` as ``obsm["X_hdtwd"]``.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in KNN_SUFFIXES:
        raise OutputError(f"a kNN graph is written as .npz or .h5ad, not {suffix or '(no suffix)'!r}", path)
    with atomic_path(path) as tmp:
        if suffix == ".npz":
            sp.save_npz(tmp, graph.distance_matrix())
        else:
            from hdtwd_cli._api import write_graph

            write_graph(adata, graph, key_added, vectors, record)
            adata.write_h5ad(tmp)


def new_adata(X: Any, sample_names: list[str], feature_names: list[str]) -> Any:
    """An AnnData of ``X`` with the names (for an ``.h5ad`` output of a non-AnnData input)."""
    import anndata
    import pandas as pd

    return anndata.AnnData(X=X, obs=pd.DataFrame(index=sample_names), var=pd.DataFrame(index=feature_names))


def _is_zarr(path: str) -> bool:
    return path != "-" and Path(path.rstrip("/")).suffix.lower() == ".zarr"


@dataclass
class DistanceOutputs:
    """What ``hdtwd distance`` is asked to write: the result (``-o``, its format, a kNN graph), the
    learned tree's files and, with ``--joint``, the samples' tree. :meth:`checked` holds every check of
    them, before any work; :meth:`write` writes them all."""

    output: Path
    fmt: str | None
    knn: int | None
    knn_method: str | None
    key_added: str | None
    store_vectors: bool | None
    scheduler: str | None
    save_tree: Path | None
    newick: Path | None
    samples_tree: Path | None = None

    @property
    def h5ad(self) -> bool:
        """The result is a kNN graph in an ``.h5ad`` (which keeps the input AnnData)."""
        return self.knn is not None and str(self.output).lower().endswith(".h5ad")

    def checked(self, data: Path, tree: Path | None, reference: Path | None) -> DistanceOutputs:
        """``self``, once the output paths (none overwrites an input), the result's suffix, the kNN graph's
        formats and the learned tree's files are checked."""
        from hdtwd_cli.io import check_output_path

        output = self.output
        check_output_path(output, [data, tree, reference])
        if self.knn is not None and (str(output) == "-" or Path(str(output)).suffix.lower() not in KNN_SUFFIXES):
            raise ParameterError("writes a sparse graph: use -o FILE.npz or -o FILE.h5ad", "n_neighbors", output)
        if self.knn is None and str(output) != "-" and self.fmt is None:
            distance_suffix(str(output))
        check_result_options(str(output), self.knn, self.knn_method, self.scheduler)
        for extra in (self.save_tree, self.newick):
            if extra is not None:
                check_output_path(extra, [data, tree, output])
        if tree is not None and (self.save_tree or self.newick):
            raise ParameterError("{a} and {b} save a LEARNED tree: not with {arg}", "tree", a="save_tree", b="newick")
        if self.samples_tree is not None:
            check_output_path(self.samples_tree, [data, tree, output, self.save_tree, self.newick])
            if Path(self.samples_tree).suffix.lower() not in TREE_SUFFIXES:
                raise OutputError(f"a tree is written as {', '.join(TREE_SUFFIXES)}", str(self.samples_tree))
        return self

    def write(
        self,
        dv: Any,
        md: Any,
        ref: Any,
        *,
        preset: str,
        seed: int,
        client: Any,
        reporter: Any,
        samples: Any = None,
    ) -> str:
        """Write the learned tree's files, the samples' tree ``samples`` (``--joint``) and the result of
        ``dv`` (a :class:`hdtwd_cli._api.DistanceVectors`) for the input ``md`` (and the reference ``ref``);
        returns :func:`write_result`'s summary."""
        from hdtwd_cli.io import stores_metadata

        # the input's fingerprint (a hash of all values: a pass over the input) only where it is stored
        trees = (self.save_tree, self.newick, self.samples_tree)
        stored = any(trees) or stores_metadata(str(self.output), self.fmt, self.knn is not None)
        if samples is not None:  # --joint: the features' tree was learned with the samples' tree
            dv.record.update(tree_source="joint", params=dict(dv.tree.metadata))
        meta = {**(md.record() if stored else {}), **dv.record, "preset": preset}
        with kept_elsewhere(self.save_tree):
            for path in (self.save_tree, self.newick):
                if path is not None:  # a Nexus tree carries the samples' mass per node (io/_nexus.py)
                    dv.tree.write(str(path), meta, tree_mass(dv.tree, md.X, md.feature_names, str(path)))
        if self.samples_tree is not None and samples is not None:
            samples.write(str(self.samples_tree), meta)
        adata = None
        if self.h5ad:
            adata = md.adata if md.adata is not None else new_adata(md.X, md.sample_names, md.feature_names)
        return write_result(
            str(self.output),
            dv,
            md.sample_names,
            md.sample_names if ref is None else ref.sample_names,
            meta,
            fmt=self.fmt,
            knn=self.knn,
            key_added=self.key_added,
            adata=adata,
            store_vectors=self.store_vectors,
            reporter=reporter,
            knn_method=self.knn_method or "auto",
            seed=seed,
            client=client,
        )


@contextlib.contextmanager
def kept_elsewhere(*paths: Path | str | None) -> Iterator[None]:
    """Silence the warning that a Newick or Nexus tree loses the weights or the denoiser where one of ``paths``
    is an ``.h5`` tree written by the same command, which keeps them (the warning's own advice)."""
    with warnings.catch_warnings():
        if any(p is not None and Path(str(p)).suffix.lower() in H5_TREE_SUFFIXES for p in paths):
            warnings.filterwarnings("ignore", message=r".*write the \.h5 tree to reproduce", category=HdtwdWarning)
        yield


def tree_mass(tree: Any, X: Any, names: list[str], path: str) -> Any:
    """The samples' mean histogram on the tree's leaves where ``path`` is a Nexus file (else None)."""
    from hdtwd_cli._api import mean_tree_histogram
    from hdtwd_cli.io import NEXUS_SUFFIXES

    if Path(path).suffix.lower() not in NEXUS_SUFFIXES:
        return None
    return mean_tree_histogram(tree, X, names)


def check_result_options(path: str, knn: int | None, knn_method: str | None, scheduler: str | None) -> None:
    """Refuse, before any work, the combinations :func:`write_result` cannot honour (``knn_method``: None
    when not given)."""
    if knn is None and knn_method is not None:
        raise ParameterError("applies to the kNN graph ({b})", "knn_method", b="n_neighbors")
    if scheduler and not (_is_zarr(path) or knn is not None):
        raise ParameterError(
            "runs the kNN search ({a}) or writes all pairs into a Zarr store (-o FILE.zarr); "
            "in-memory outputs are single-process",
            "scheduler",
            a="n_neighbors",
        )


def write_result(
    path: str,
    dv: Any,
    row_names: list[str],
    col_names: list[str],
    meta: dict,
    *,
    fmt: str | None = None,
    knn: int | None = None,
    key_added: str | None = None,
    adata: Any = None,
    store_vectors: bool | None = None,
    reporter: Any = None,
    knn_method: str = "auto",
    seed: int = 0,
    client: Any = None,
) -> str:
    """Write what ``-o`` asks of a :class:`hdtwd_cli._api.DistanceVectors`; returns a one-line summary.

    ``knn``: the kNN graph (``.npz`` / ``.h5ad``; searched by ``knn_method``, on the cluster of
    ``client`` when given); a ``.zarr`` store: the matrix in row blocks (written by the cluster's
    workers with ``client``); an ``.h5`` file: the matrix streamed in row blocks; anything else:
    the whole matrix in memory (refused up front when it would not fit).
    """
    zarr_out = _is_zarr(path)
    if knn is not None:
        graph = dv.knn(knn, knn_method, seed, client)
        vectors = None if Path(path).suffix.lower() != ".h5ad" else dv.vectors_for_obsm(store_vectors)
        write_knn(path, graph, dict(graph.params, **meta), key_added=key_added, adata=adata, vectors=vectors)
        return f"wrote {path}: {knn} neighbours per sample (the sample itself included)"
    rows, cols = dv.shape
    if zarr_out:
        from hdtwd_cli._api import write_zarr

        with reporter.stage(f"tree-Wasserstein distances ({rows} x {cols}, Zarr)", rows) as adv:
            write_zarr(path, dv, row_names, col_names, meta, client, adv)
        return f"wrote {path} ({rows} x {cols} {dv.dtype}, Zarr)"
    if path != "-" and fmt is None and Path(path).suffix.lower() in (".h5", ".hdf5"):
        block = dv.block_rows()
        with reporter.stage(f"tree-Wasserstein distances ({rows} x {cols}, blocked)", rows) as adv:
            write_distances_blocked(path, dv.blocks(block), (rows, cols), row_names, col_names, meta, dv.dtype, adv)
        return f"wrote {path} ({rows} x {cols} {dv.dtype}, in blocks of {block} rows)"
    if (
        path != "-"
        and rows * cols
        and hasattr(os, "posix_fallocate")
        and ("." + fmt.lstrip(".") if fmt else distance_suffix(path)) == ".npy"
    ):
        write_npy_in_place(path, (rows, cols), dv.dtype, lambda out: dv.matrix(out=out))
    else:
        write_distances(path, dv.matrix(), row_names, col_names, meta, fmt)
    return f"wrote {path} ({rows} x {cols} {dv.dtype})"
