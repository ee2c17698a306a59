"""Leiden clustering on the hdtwd kNN graph vs scanpy's default PCA graph.

Protocol
--------
For each data set two neighbour graphs are built over the same cells:

``hdtwd``
    The data are written to an ``.h5ad`` file in ``cache_dir()/leiden`` and the shipped CLI is
    run as a subprocess, ``hdtwd distance IN.h5ad --knn 15 --key-added hdtwd -o OUT.h5ad -q``
    (all other options at their defaults, so the input is used on the scale it is stored on,
    unless ``--extra "ARGS"`` appends further CLI options, e.g. ``--extra "--denoise 50"``).
    The graph is read back from ``OUT.h5ad`` (scanpy's neighbours layout: ``uns[KEY]`` naming
    ``obsp`` matrices).  The time is the wall time of the whole CLI process: interpreter start,
    reading, learning the feature tree, the neighbour search and writing.
``scanpy``
    scanpy's default recipe: counts are normalised to 1e4 per cell and ``log1p``-transformed,
    log data are used as they are; then ``sc.pp.pca(n_comps=50)`` and ``sc.pp.neighbors``
    with its defaults (15 neighbours, UMAP connectivities).  The time covers these steps in
    this process, after a small warm-up run so numba compilation is not counted.

On each graph ``sc.tl.leiden(resolution=1, flavor="igraph", n_iterations=2, directed=False)``
runs for seeds 0..4 (the leidenalg default is used if the installed scanpy lacks the igraph
flavour).  Every partition is scored with the adjusted Rand index against the cell-type labels;
the table reports the mean ± std over the seeds and the number of clusters found.

Data sets
---------
``pbmc``      ``scanpy.datasets.pbmc68k_reduced()``, its ``.raw`` (log-normalised, 700 x 765),
              labels ``obs["bulk_labels"]`` (10 classes).
``zeisel7``   Zeisel et al. mouse cortex, 3005 x 4000, log1p, 7 classes (``datasets.py``).
``zeisel48``  the same cells with the 48 subclasses: the graphs and Leiden partitions are shared
              with ``zeisel7`` and scored against both label sets.
``cbmc``      CITE-seq cord-blood cells, 8617 x 500, raw counts, 13 classes (``datasets.py``).

Running
-------
::

    python benchmarks/bench_leiden.py                   # all sets; JSON per set into the cache
    python benchmarks/bench_leiden.py --sets pbmc       # a subset
    python benchmarks/bench_leiden.py --markdown        # print the table from the cached JSON
    python benchmarks/bench_leiden.py --extra "--denoise 50" --tag denoise50
                                                        # extra ``hdtwd distance`` options
    python benchmarks/bench_leiden.py --markdown --tags default,denoise50
                                                        # one hdtwd column per tag

Results are cached as ``cache_dir()/leiden/<set>.json`` for the default tag (no ``--extra``)
and ``cache_dir()/leiden/<set>.<tag>.json`` otherwise (``$HDTWD_BENCH_CACHE`` or
``~/.cache/hdtwd-bench``); ``--extra`` needs a ``--tag`` other than ``default`` so runs with
different options do not overwrite each other.  With several ``--tags`` the table has one hdtwd
column (ARI and time) per tag and the scanpy columns of the first tag that has the set (the
scanpy graph does not depend on the tag).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import inspect
import json
import platform
import shlex
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from datasets import load

#: Label sets, in table order, and the group of cells (one pair of graphs) each belongs to.
SETS = {"pbmc": "pbmc", "zeisel7": "zeisel", "zeisel48": "zeisel", "cbmc": "cbmc"}
SEEDS = range(5)
RESOLUTION = 1.0
N_NEIGHBORS = 15
N_PCS = 50
KEY = "hdtwd"
#: The tag of runs without ``--extra``: its results keep the untagged file names.
DEFAULT_TAG = "default"


@dataclass
class Group:
    """Cells shared by one or more label sets.

    Attributes
    ----------
    name : str
        Group name (``pbmc``, ``zeisel`` or ``cbmc``).
    X : numpy.ndarray
        Dense ``float32`` matrix, cells x genes.
    labels : dict of str to numpy.ndarray
        Label vector per label-set name.
    values : str
        ``"counts"`` or ``"log1p"`` (log-normalised).
    """

    name: str
    X: np.ndarray
    labels: dict[str, np.ndarray]
    values: str


def load_group(group: str) -> Group:
    """Load the cells of `group` with the label sets that belong to it."""
    if group == "pbmc":
        import scanpy as sc

        adata = sc.datasets.pbmc68k_reduced()
        X = adata.raw.X
        X = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
        labels = {"pbmc": adata.obs["bulk_labels"].to_numpy().astype(str)}
        return Group(group, X.astype(np.float32), labels, "log1p")
    members = [s for s, g in SETS.items() if g == group]
    first = load(members[0])
    labels = {s: (first if s == members[0] else load(s)).labels.astype(str) for s in members}
    return Group(group, first.X.astype(np.float32), labels, first.values)


def to_anndata(g: Group):
    """An AnnData of the group's cells, labels in ``obs``."""
    import anndata as ad
    import pandas as pd

    obs = pd.DataFrame(
        {k: pd.Categorical(v) for k, v in g.labels.items()}, index=pd.Index([f"c{i}" for i in range(g.X.shape[0])])
    )
    var = pd.DataFrame(index=pd.Index([f"g{j}" for j in range(g.X.shape[1])]))
    return ad.AnnData(X=g.X.copy(), obs=obs, var=var)


def neighbors_key(adata, preferred: str = KEY) -> str:
    """The ``uns`` key of a neighbours graph in `adata`, `preferred` if it is one.

    A key qualifies when ``uns[key]`` names a ``connectivities_key`` present in ``obsp``.
    """

    def ok(k: str) -> bool:
        entry = adata.uns.get(k)
        return isinstance(entry, dict) and entry.get("connectivities_key") in adata.obsp

    if ok(preferred):
        return preferred
    found = [k for k in adata.uns if ok(k)]
    if len(found) != 1:
        raise KeyError(
            f"no unique neighbours entry in uns (candidates {found}); uns={list(adata.uns)}, obsp={list(adata.obsp)}"
        )
    print(f"[leiden] note: hdtwd graph found under uns[{found[0]!r}], not {preferred!r}", file=sys.stderr)
    return found[0]


def hdtwd_graph(g: Group, workdir: Path, extra: tuple[str, ...] = ()):
    """Build the hdtwd kNN graph with the CLI, `extra` appended to its arguments;
    return (AnnData with the graph, key, seconds, info with the command)."""
    import anndata as ad

    src, out = workdir / f"{g.name}.h5ad", workdir / f"{g.name}_{KEY}.h5ad"
    to_anndata(g).write_h5ad(src)
    out.unlink(missing_ok=True)
    exe = Path(sys.executable).with_name("hdtwd")
    cmd = [str(exe), "distance", str(src), "--knn", str(N_NEIGHBORS), "--key-added", KEY, "-o", str(out), "-q", *extra]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr}")
    if proc.stderr.strip():
        print(f"[leiden] hdtwd stderr: {proc.stderr.strip()}", file=sys.stderr)
    adata = ad.read_h5ad(out)
    if adata.n_obs != g.X.shape[0]:
        raise ValueError(f"{out}: {adata.n_obs} cells, expected {g.X.shape[0]}")
    key = neighbors_key(adata)
    layout = {"uns": {key: _plain(adata.uns[key])}, "obsp": sorted(adata.obsp)}
    return adata, key, seconds, {"cmd": cmd, "layout": layout}


def _warm_up_scanpy() -> None:
    """Run the scanpy recipe once on a tiny random matrix so numba compiles outside the timing."""
    import anndata as ad
    import scanpy as sc

    rng = np.random.default_rng(0)
    a = ad.AnnData(rng.poisson(1.0, (200, 60)).astype(np.float32))
    sc.pp.log1p(a)
    sc.pp.pca(a, n_comps=20)
    sc.pp.neighbors(a, n_neighbors=N_NEIGHBORS)


def _scipy_compat() -> None:
    """scanpy 1.11.5 calls ``getnnz`` on the ``csr_array`` that scikit-learn returns for more than
    4,096 cells; SciPy 1.17 removed it from the array classes. Give it back (same meaning)."""
    import scipy.sparse as sp

    for cls in (sp.csr_array, sp.csc_array, sp.coo_array):
        if not hasattr(cls, "getnnz"):
            cls.getnnz = lambda self, axis=None: self._getnnz(axis=axis)


def scanpy_graph(g: Group):
    """Build scanpy's default PCA graph; return (AnnData with the graph, key, seconds, info)."""
    import scanpy as sc

    _scipy_compat()

    _warm_up_scanpy()
    adata = to_anndata(g)
    t = time.perf_counter()
    if g.values == "counts":
        sc.pp.normalize_total(adata, target_sum=1e4)
        sc.pp.log1p(adata)
    sc.pp.pca(adata, n_comps=N_PCS)
    sc.pp.neighbors(adata, n_neighbors=N_NEIGHBORS)
    seconds = time.perf_counter() - t
    return adata, "neighbors", seconds, {"params": _plain(adata.uns["neighbors"]["params"])}


def leiden_kwargs() -> dict:
    """Leiden options: the igraph flavour if this scanpy has it, else the leidenalg default."""
    import scanpy as sc

    if "flavor" in inspect.signature(sc.tl.leiden).parameters:
        return {"flavor": "igraph", "n_iterations": 2, "directed": False}
    return {}


def cluster(adata, key: str) -> list[np.ndarray]:
    """Leiden partitions of the graph under `key`, one per seed."""
    import scanpy as sc

    parts = []
    for seed in SEEDS:
        sc.tl.leiden(
            adata, resolution=RESOLUTION, random_state=seed, neighbors_key=key, key_added="_leiden", **leiden_kwargs()
        )
        parts.append(adata.obs["_leiden"].to_numpy().astype(str))
    return parts


def score(parts: list[np.ndarray], labels: np.ndarray) -> dict:
    """ARI of each partition against `labels`, with mean, std and cluster counts."""
    from sklearn.metrics import adjusted_rand_score

    ari = [float(adjusted_rand_score(labels, p)) for p in parts]
    return {
        "ari": ari,
        "mean": float(np.mean(ari)),
        "std": float(np.std(ari)),
        "clusters": [int(np.unique(p).size) for p in parts],
    }


def _plain(obj):
    """`obj` with numpy scalars and arrays turned into JSON-serialisable Python values."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def versions() -> dict:
    """Versions of the packages that shape the result."""
    out = {"python": platform.python_version()}
    for pkg in ("hdtwd", "scanpy", "anndata", "igraph", "leidenalg", "umap-learn", "scikit-learn"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def run_group(group: str, workdir: Path, extra: tuple[str, ...] = (), tag: str = DEFAULT_TAG) -> list[dict]:
    """Build both graphs of `group` (`extra`: further ``hdtwd distance`` arguments), cluster
    them and return one report per label set."""
    g = load_group(group)
    print(f"[leiden] {group}: {g.X.shape[0]} x {g.X.shape[1]} ({g.values})", file=sys.stderr, flush=True)
    builders = {"hdtwd": lambda: hdtwd_graph(g, workdir, extra), "scanpy": lambda: scanpy_graph(g)}
    graphs = {}
    for method, build in builders.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            adata, key, seconds, info = build()
            parts = cluster(adata, key)
        info["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
        graphs[method] = {"seconds": seconds, "key": key, "parts": parts, "info": info}
        print(f"[leiden] {group} {method}: graph {seconds:.1f} s", file=sys.stderr, flush=True)

    common = {
        "tag": tag,
        "extra": list(extra),
        "group": group,
        "cells": int(g.X.shape[0]),
        "genes": int(g.X.shape[1]),
        "values": g.values,
        "seeds": list(SEEDS),
        "resolution": RESOLUTION,
        "n_neighbors": N_NEIGHBORS,
        "n_pcs": N_PCS,
        "leiden": leiden_kwargs(),
        "versions": versions(),
        "machine": harness.machine_summary(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    reports = []
    for name, labels in g.labels.items():
        rep = dict(common, set=name, n_classes=int(np.unique(labels).size))
        for method, gr in graphs.items():
            rep[method] = dict(score(gr["parts"], labels), seconds=gr["seconds"], key=gr["key"], **gr["info"])
        reports.append(rep)
    return reports


def _cell(r: dict) -> str:
    c = r["clusters"]
    k = str(c[0]) if min(c) == max(c) else f"{min(c)}–{max(c)}"
    return f"{r['mean']:.3f} ± {r['std']:.3f} ({k})"


def result_path(out_dir: Path, set_name: str, tag: str = DEFAULT_TAG) -> Path:
    """The JSON file of `set_name` under `tag` (the untagged name for the default tag)."""
    return out_dir / (f"{set_name}.json" if tag == DEFAULT_TAG else f"{set_name}.{tag}.json")


def markdown(results: dict[str, dict[str, dict]]) -> str:
    """The results table, with the machines, dates and versions that produced it.

    `results` maps each tag, in column order, to its reports by set name (a tag may lack sets).
    """
    tags = list(results)
    sets = list(dict.fromkeys(s for by_set in results.values() for s in by_set))
    reports = [r for by_set in results.values() for r in by_set.values()]
    head = ["data", "cells"] + [f"hdtwd graph ARI [{t}] (mean ± std, clusters)" for t in tags]
    head += ["scanpy PCA graph ARI"] + [f"hdtwd time [{t}]" for t in tags] + ["scanpy time"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in sets:
        row = {t: results[t].get(s) for t in tags}
        first = next(r for r in row.values() if r is not None)
        cells = [f"{s} ({first['n_classes']} classes)", str(first["cells"])]
        cells += [_cell(r["hdtwd"]) if r else "–" for r in row.values()]
        cells += [_cell(first["scanpy"])]
        cells += [f"{r['hdtwd']['seconds']:.1f} s" if r else "–" for r in row.values()]
        cells += [f"{first['scanpy']['seconds']:.1f} s"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for t in tags:
        extra = {shlex.join(r.get("extra", [])) for r in results[t].values()}
        lines.append(
            f"Tag {t}: hdtwd distance extra options "
            + " / ".join(f"`{e}`" if e else "none" for e in sorted(extra))
            + "."
        )
    for m in sorted({r["machine"] for r in reports}):
        dates = sorted(r["date"][:10] for r in reports if r["machine"] == m)
        lines.append(f"Machine: {m}; run {dates[0]}" + (f" to {dates[-1]}" if dates[-1] != dates[0] else "") + ".")
    for v in {json.dumps(r["versions"], sort_keys=True) for r in reports}:
        lines.append("Versions: " + ", ".join(f"{k} {x}" for k, x in json.loads(v).items()) + ".")
    if reports:
        r = reports[0]
        lines.append(
            f"Leiden: resolution {r['resolution']:g}, seeds {r['seeds'][0]}..{r['seeds'][-1]}, "
            f"{r['leiden'] or 'leidenalg default'}; {r['n_neighbors']} neighbours; "
            f"scanpy graph on {r['n_pcs']} PCs. hdtwd time: whole CLI process."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS), help=f"comma-separated subset of {','.join(SETS)} (default: all)")
    ap.add_argument("--markdown", action="store_true", help="only print the table from the cached JSON results")
    ap.add_argument(
        "--extra",
        default="",
        metavar="ARGS",
        help="extra arguments appended to the hdtwd distance command, one "
        'shell-quoted string (e.g. --extra "--denoise 50"); needs --tag',
    )
    ap.add_argument(
        "--tag",
        default=DEFAULT_TAG,
        metavar="NAME",
        help=f"name of this configuration in the JSON file names and the table "
        f"(default: {DEFAULT_TAG}, the untagged file names)",
    )
    ap.add_argument(
        "--tags",
        default=None,
        metavar="NAMES",
        help="comma-separated tags to show side by side in the table (default: --tag)",
    )
    args = ap.parse_args(argv)
    sets = [s for s in args.sets.split(",") if s]
    unknown = [s for s in sets if s not in SETS]
    if unknown:
        ap.error(f"unknown sets {unknown}; choose from {list(SETS)}")
    extra = tuple(shlex.split(args.extra))
    if extra and args.tag == DEFAULT_TAG:
        ap.error("--extra needs a --tag other than the default")
    bad = [
        t
        for t in [args.tag, *(args.tags or "").split(",")]
        if t and not t.replace("-", "").replace("_", "").replace(".", "").isalnum()
    ]
    if bad:
        ap.error(f"tags must be letters, digits, '-', '_' or '.': {bad}")
    tags = [t for t in (args.tags or args.tag).split(",") if t]

    out_dir = harness.work_dir("leiden")
    if not args.markdown:
        for group in dict.fromkeys(SETS[s] for s in sets):
            for rep in run_group(group, out_dir, extra, args.tag):
                result_path(out_dir, rep["set"], args.tag).write_text(json.dumps(rep, indent=1))
    results = {
        t: {s: json.loads(result_path(out_dir, s, t).read_text()) for s in sets if result_path(out_dir, s, t).exists()}
        for t in tags
    }
    missing = [t for t, by_set in results.items() if not by_set]
    if missing:
        print(f"[leiden] no cached results for tags {missing}", file=sys.stderr)
    results = {t: by_set for t, by_set in results.items() if by_set}
    print(markdown(results) if results else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
