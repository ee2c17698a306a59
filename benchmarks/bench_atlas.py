"""Issue 28: the approximate kNN search at atlas scale, whole processes, one machine and a LocalCluster.

- ``single N``: ``hdtwd distance SYNTH_N.npz --knn 15 --knn-method nndescent -o G.npz`` under
  ``/usr/bin/time -v`` (wall time, peak RSS), then recall@14 of 1,000 sampled rows against their
  exact neighbours (brute force on the same tree vectors, ``atlas.sampled_exact``, cached);
- ``dask N W``: the same command with ``--scheduler`` on a ``LocalCluster`` of ``W`` single-threaded
  worker processes started by this script (numba loaded in them before the clock): wall time of the
  command, each worker's peak RSS (``VmHWM``), and whether the graph is the single process's bits.

Results: ``atlas_<part>_<N>[_W].json`` in the cache folder ``scale-issue13``; RESULTS.md by hand.

    python benchmarks/bench_atlas.py single 100000
    python benchmarks/bench_atlas.py dask 1000000 2
    python benchmarks/bench_atlas.py project 1000000 1.26   # placements per sample (RESULTS.md § 10)
    python benchmarks/bench_atlas.py project-single 1000000  # from the single process's -v log
    python benchmarks/bench_atlas.py genes 100000 20000    # all genes, the defaults (denoising's rule)
    python benchmarks/bench_atlas.py genes-dask 100000 2 --genes 20000   # the same on a 2-worker LocalCluster

``genes N M``: ``hdtwd distance GENES_N_M.npz --knn 15 -v --save-tree T.h5`` with every option at its
default (M genes with a realistic tail of rarely detected genes, ``atlas.synth_genes``: the landmark
operator above 5,000, denoising as its rule says, the search ``auto``), each stage's time from ``-v``,
scanpy's recipe on the same file (the ratio), then recall@14 of 500 sampled rows against their exact
neighbours on the saved tree. ``genes-finish N M``: the same after the command, from its record.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from atlas import WD, recall, sampled_exact, synth, synth_genes, vm_hwm_mb


def graph_recall(path: Path, n: int, denoise: str = "0") -> float:
    rows, exact = sampled_exact(n, 14, denoise)
    G = sp.load_npz(path).tocsr()
    return recall(exact, [G[r].indices for r in rows])


def _table(n: int, serial: float, parallel: Any) -> list[str]:
    """Rows of the projection table: the client's ``serial`` seconds at ``n`` cells scaled to each size,
    plus ``parallel(cells, workers)`` seconds."""
    rows = ["| cells | 8 workers | 64 workers | 512 workers | of which the client alone |", "|---|---|---|---|---|"]
    for cells in (10**6, 10**7):
        f = cells / n
        cols = [f"{(serial * f + parallel(cells, p)) / 60:.0f} min" for p in (8, 64, 512)]
        rows.append(f"| 10^{int(np.log10(cells))} | " + " | ".join(cols) + f" | {serial * f / 60:.0f} min |")
    return rows


def projection(d: dict, placements: float) -> list[str]:
    """Wall time of the approximate search for 10^6 / 10^7 cells on P single-threaded workers, from the
    measured 2-worker run at ``d["n"]`` cells: its partition tasks' compute (NN-descent and exact
    re-ranking) per placement of a sample (partitions keep their size, so it grows linearly in n; a
    phase cannot end before its largest task) and the client's serial phases (reading, the tree, the
    partitions' k-means before the first task; the merge and writing after the last), scaled
    linearly in n on a client like this machine."""
    n, t = d["n"], d["tasks"]["nndescent"]
    r = t["compute_s"] / (placements * n)
    before = t["first_start_s"]
    after = d["wall_s"] - t["last_stop_s"]
    serial = before + after
    rows = _table(n, serial, lambda cells, p: max(r * placements * cells / p, t["max_s"]))
    rows += [
        "",
        f"Rates measured at {n:,} cells on 2 workers: {r * 1e3:.2f} ms of one thread per placed sample "
        f"(NN-descent and re-ranking; {placements} placements per sample, the largest task {t['max_s']:.0f} s); "
        f"the client's serial phases {before:.0f} s before the first task and {after:.0f} s after the last.",
    ]
    return rows


def projection_single(n: int) -> list[str]:
    """Wall time of ``--knn 15 --knn-method nndescent`` for 10^6 / 10^7 cells on P single-threaded
    workers, from the single-process run at ``n`` cells (``atlas_single_N``: its ``-v`` log gives the
    partitions and the seconds of their NN-descent and re-ranking). Per-row compute = 2 x wall per
    row (two threads, taken as perfectly parallel, which flatters one thread); partitions keep their
    size, so the tasks grow as placements x n; a phase cannot end before its largest task; the rest
    of the run (reading, the tree, the partitions' k-means, the merge, writing) stays on the client,
    scaled linearly in n."""
    import re

    d = json.loads((WD / f"atlas_single_{n}.json").read_text())
    log = (WD / f"atlas_single_{n}.log").read_text()
    search_s = float(re.search(r"NN-descent and exact re-ranking of \d+ candidates: ([0-9.]+) s", log).group(1))
    m = re.search(r"NN-descent in (\d+) partition\(s\) of (\d+)-(\d+) samples \(([0-9.]+) per sample\)", log)
    largest, placements = int(m.group(3)), float(m.group(4))
    r = 2 * search_s / (placements * n)
    serial = d["wall_s"] - search_s
    rows = _table(n, serial, lambda cells, p: max(r * placements * cells / p, r * largest))
    rows += [
        "",
        f"From the single process at {n:,} cells (commit {d['commit']}): NN-descent and re-ranking "
        f"{r * 1e3:.2f} ms of one core per placed sample ({placements} placements per sample, largest "
        f"partition {largest:,} rows: {r * largest:.0f} s per task), the rest {serial:.0f} s on the client.",
    ]
    return rows


SCANPY_RECIPE = """
import sys, time, anndata, scanpy as sc, scipy.sparse as sp
if not hasattr(sp.csr_array, "getnnz"):  # scanpy 1.11 reads the graph with getnnz, gone from SciPy 1.17's arrays
    sp.csr_array.getnnz = lambda self, axis=None: self._getnnz(axis=axis)
a = anndata.AnnData(sp.load_npz(sys.argv[1]).tocsr().astype("float32"))
sc.pp.normalize_total(a, target_sum=1e4)
sc.pp.log1p(a)
sc.pp.highly_variable_genes(a, n_top_genes=2000, subset=True)
sc.pp.pca(a, n_comps=50)
sc.pp.neighbors(a, n_neighbors=15)
"""


def all_genes(n: int, m: int, sampled: int = 500, *, reuse: bool = False) -> dict[str, Any]:
    """``hdtwd distance`` with the defaults on ``n`` cells x ``m`` genes (:func:`atlas.synth_genes`, a realistic
    tail of rare genes), ``--knn 15``: time, peak memory, each stage's time, whether and why it denoised,
    recall@14 of ``sampled`` rows on the saved tree; scanpy's recipe (normalize_total, log1p, 2,000 HVGs,
    50 PCs, ``sc.pp.neighbors``) on the same file in the same run, and the ratio (see the module docstring).
    ``reuse``: take the command's figures from the record of an earlier run (``genes-finish``)."""
    from atlas import exact_rows

    import hdtwd_cli as hd

    data = synth_genes(n, m)
    tag = f"{n}_{m}"
    g, t = WD / f"atlas_genes_G{tag}.npz", WD / f"atlas_genes_T{tag}.h5"
    cmd = [harness.require_tools(), "distance", str(data), "--knn", "15", "-v"]
    log = WD / f"atlas_genes_{tag}.log"
    record = WD / f"atlas_genes_{tag}_command.json"
    if reuse:
        out = json.loads(record.read_text())
    else:
        out = {"n": n, "genes": m, "machine": harness.machine_line(), "commit": harness.git_commit()}
        out["date"] = harness.utc_stamp()
        out.update(harness.run_with_stages([*cmd, "--save-tree", str(t), "-o", str(g)], log))
        record.write_text(json.dumps(out, indent=1, default=str))
    recipe = WD / "scanpy_recipe.py"
    recipe.write_text(SCANPY_RECIPE)
    out["scanpy"] = harness.run_timed_once(
        [sys.executable, str(recipe), str(data)], WD / f"atlas_genes_scanpy_{tag}.log"
    )
    out["ratio_to_scanpy"] = out["wall_s"] / out["scanpy"]["wall_s"]
    tree = hd.Tree.read(str(t))
    out.update({k: tree.metadata.get(k) for k in ("denoise", "denoise_rule", "n_landmarks", "feature_source")})
    rows = np.sort(np.random.default_rng(1).choice(n, sampled, replace=False))
    X = sp.load_npz(data).tocsr()
    exact = exact_rows(X, tree, rows, 14)
    G = sp.load_npz(g).tocsr()
    out["recall"] = recall(exact, [G[r].indices for r in rows])
    out["recall_rows"] = sampled
    (WD / f"atlas_genes_{tag}.json").write_text(json.dumps(out, indent=1, default=str))
    return out


def same_graph(a: Path, b: Path) -> bool:
    """Whether two saved kNN graphs (``-o G.npz``) are the same bits: structure and every distance."""
    A, B = sp.load_npz(a).tocsr(), sp.load_npz(b).tocsr()
    return bool(
        np.array_equal(A.indptr, B.indptr)
        and np.array_equal(A.indices, B.indices)
        and A.data.tobytes() == B.data.tobytes()
    )


def on_cluster(cmd: list[str], w: int, g: Path, log: Path, max_wait_s: float = 60.0) -> dict[str, Any]:
    """``cmd -o g`` with ``--scheduler`` on a ``LocalCluster`` of ``w`` single-threaded worker processes (numba
    loaded in them before the clock): the command's record, each worker's peak RSS and the tasks' times by kind."""
    import distributed

    out: dict[str, Any] = {}
    own_env = dict(__import__("os").environ)  # LocalCluster's env= also lands in this process's environment
    with (
        harness.local_cluster(w, memory_limit=0) as c,
        distributed.Client(c) as client,
    ):
        client.run(lambda: __import__("hdtwd_cli.knn._nndescent").__name__)
        harness.wait_quiet(max_wait_s)
        with distributed.get_task_stream(client) as ts:  # the command's tasks, seen from the scheduler
            t0 = __import__("time").time()
            out.update(
                harness.run_timed_once(
                    [*cmd, "--scheduler", c.scheduler_address, "-o", str(g)],
                    log,
                    env=own_env,
                )
            )
        out["worker_peak_MB"] = sorted(client.run(vm_hwm_mb).values())
        kinds: dict = {}
        for r in ts.data:
            kind = str(r["key"]).split("-")[1] if str(r["key"]).startswith("hdtwd-") else "other"
            comp = sum(x["stop"] - x["start"] for x in r["startstops"] if x["action"] == "compute")
            k = kinds.setdefault(
                kind, {"tasks": 0, "compute_s": 0.0, "max_s": 0.0, "first_start_s": 1e9, "last_stop_s": 0.0}
            )
            k["tasks"] += 1
            k["compute_s"] += comp
            k["max_s"] = max(k["max_s"], comp)
            for x in r["startstops"]:  # seconds since the command started: the client's phases between
                k["first_start_s"] = min(k["first_start_s"], x["start"] - t0)
                k["last_stop_s"] = max(k["last_stop_s"], x["stop"] - t0)
        out["tasks"] = kinds
    return out


def genes_on_cluster(n: int, m: int, w: int) -> dict[str, Any]:
    """``genes N M``'s command (the defaults, ``--knn 15``) on a ``w``-worker LocalCluster: its time and memory,
    and whether its graph is the single process's (``genes``' graph file), bit for bit."""
    data = synth_genes(n, m)
    tag = f"{n}_{m}"
    g = WD / f"atlas_genes_G{tag}_w{w}.npz"
    out = {"n": n, "genes": m, "workers": w, "machine": harness.machine_line(), "commit": harness.git_commit()}
    out["date"] = harness.utc_stamp()
    cmd = [harness.require_tools(), "distance", str(data), "--knn", "15", "-v"]
    out.update(on_cluster(cmd, w, g, WD / f"atlas_genes_dask_{tag}_{w}.log"))
    ref = WD / f"atlas_genes_G{tag}.npz"
    if ref.exists():
        out["same_bits_as_single"] = same_graph(ref, g)
    out.pop("stderr", None)
    (WD / f"atlas_genes_dask_{tag}_{w}.json").write_text(json.dumps(out, indent=1, default=str))
    return {k: out[k] for k in out if k in ("wall_s", "max_rss_MB", "worker_peak_MB", "same_bits_as_single")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "part", choices=("single", "dask", "project", "project-single", "genes", "genes-finish", "genes-dask")
    )
    ap.add_argument("n", type=int, help="cells (SYNTH_N.npz)")
    ap.add_argument(
        "extra",
        nargs="?",
        help="dask, genes-dask: the number of workers W; project: placements per sample (RESULTS.md section 10); "
        "genes: the genes M",
    )
    ap.add_argument("--genes", type=int, default=20000, help="genes-dask: the genes M of GENES_N_M.npz")
    ap.add_argument(
        "--denoise",
        default="0",
        help="single, dask: the command's --denoise (0: the earlier defaults' tree, the records' default; auto: "
        "today's default); the recall is against the exact neighbours on that tree, dask's graph against the "
        "single run's with the same --denoise",
    )
    ap.add_argument(
        "--max-wait", type=float, default=60.0, help="single, dask: wait up to this long for an idle machine first"
    )
    args = ap.parse_args()
    if args.part in ("dask", "project", "genes-dask") and args.extra is None:
        ap.error(f"{args.part} needs its third argument (dask, genes-dask: W workers; project: placements per sample)")
    if args.part == "project-single":
        print("\n".join(projection_single(args.n)))
        return
    if args.part == "project":
        d = json.loads((WD / f"atlas_dask_{args.n}_2.json").read_text())
        print("\n".join(projection(d, float(args.extra))))
        return
    part, n = args.part, args.n
    if part in ("genes", "genes-finish"):
        print(json.dumps(all_genes(n, int(args.extra or 20000), reuse=part == "genes-finish"), indent=1, default=str))
        return
    if part == "genes-dask":
        print(json.dumps(genes_on_cluster(n, args.genes, int(args.extra)), default=str))
        return
    data = synth(n)
    cmd = [harness.require_tools(), "distance", str(data), "--knn", "15", "--knn-method", "nndescent", "-v"]
    out = {"n": n, "machine": harness.machine_line(), "commit": harness.git_commit(), "date": harness.utc_stamp()}
    if part == "single":
        tag = "" if args.denoise == "0" else f"_d{args.denoise}"
        g = WD / f"atlas_G{n}{tag}.npz"
        harness.wait_quiet(args.max_wait)
        cmd += ["--denoise", args.denoise]
        out.update(harness.run_timed_once([*cmd, "-o", str(g)], WD / f"atlas_single_{n}{tag}.log"))
        out["denoise"] = args.denoise
        out["recall"] = graph_recall(g, n, args.denoise)
        name = f"atlas_single_{n}{tag}.json"
    else:  # the single run's --denoise, its graph (atlas_G{n}{tag}.npz) and its exact rows
        w, tag = int(args.extra), "" if args.denoise == "0" else f"_d{args.denoise}"
        g = WD / f"atlas_G{n}_w{w}{tag}.npz"
        cmd += ["--denoise", args.denoise]
        out.update(on_cluster(cmd, w, g, WD / f"atlas_dask_{n}_{w}{tag}.log", args.max_wait))
        out["workers"], out["denoise"] = w, args.denoise
        ref = WD / f"atlas_G{n}{tag}.npz"
        if ref.exists():
            out["same_bits_as_single"] = same_graph(ref, g)
        out["recall"] = graph_recall(g, n, args.denoise)
        name = f"atlas_dask_{n}_{w}{tag}.json"
    out.pop("stderr", None)
    (WD / name).write_text(json.dumps(out, indent=1, default=str))
    print(
        json.dumps(
            {k: out[k] for k in out if k in ("wall_s", "max_rss_MB", "recall", "worker_peak_MB", "same_bits_as_single")}
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
