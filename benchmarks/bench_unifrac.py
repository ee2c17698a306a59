"""Issue 14: the whole command, end to end, against Striped UniFrac (``ssu``), on this machine.

Parts (each writes ``<part>.json`` into ``~/.cache/hdtwd-bench/unifrac-issue14``; ``--markdown``
renders them all, ``--write`` replaces the issue-14 section of archive/RESULTS-history.md):

- ``prepare``: the workloads as files (Zeisel counts 3,005 x 4,000 and CBMC counts 8,617 x 500 as
  ``.npy``; the planted corpora 5,000 x 24,000 and 5,600 x 42,000 as sparse ``.npz``), each tree
  learned once by ``hdtwd distance --newick`` with the defaults, and a BIOM table (features x
  samples, HDF5, written with ``biom-format``) of the same counts for ``ssu``.
- ``distance``: the distance step on a given tree, whole process vs whole process, medians of 3
  runs taken in turns: ``hdtwd distance DATA --tree T.nwk -o D.npy -q`` against ``ssu -i T.biom -t
  T.nwk -m weighted_unnormalized_fp64 -o D.h5 --format hdf5_fp64 --pcoa 0`` (and ``_fp32`` with
  ``hdf5_fp32``); every result is checked against hdtwd's (``ssu`` reads branch lengths as
  float32, so about 1e-7 relative is expected).
- ``e2e``: ``hdtwd distance DATA -o D.npy -q`` with the defaults (the tree learned too):
  medians of 3 (1 run for the corpora).
- ``stages``: the same command once more with ``-v``, each stage's seconds from its lines
  (``bench_end_to_end.py --stages-only``).
- ``startup``: ``hdtwd --version`` and ``hdtwd distance sample_data/produce.csv``, medians of 5.

Every run first byte-compiles ``hdtwd_cli`` (as ``pip install`` does; :func:`byte_compile`).

(The sparse corpus's kernel against its micro-kernel's in-cache ceiling, the ``roofline`` probe, is answered in
the history's "Issue 14" section: ``git show 7dc0ed9:benchmarks/bench_unifrac.py``.)

With ``--cpus native,avx2`` the ``distance`` and ``e2e`` parts run hdtwd on each CPU kind's code
paths in turns with ssu (``cpu_kind.py``: the AVX2 paths on an AVX-512 machine), check that the
kinds give the same matrix, and ``--markdown`` adds the per-CPU table (issue 24); ``--workdir``
keeps such a run's records apart from the issue-14 ones.

Usage::

    apt-get install -y unifrac-tools && pip install biom-format   # ssu and its input format
    python benchmarks/bench_unifrac.py prepare distance e2e stages startup
    python benchmarks/bench_unifrac.py --markdown --write
    python benchmarks/bench_unifrac.py --workdir unifrac-issue24 --cpus native,avx2 prepare distance e2e
    python benchmarks/bench_unifrac.py --workdir unifrac-issue24 --cpus native,avx2 --markdown --write
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cpu_kind
import datasets
import harness

WD = harness.work_dir("unifrac-issue14")
HEADING = "## Issue 14: end to end, against Striped UniFrac"
WORKLOADS = {  # name -> (label, distance step vs ssu?)
    "zeisel": ("Zeisel counts 3,005 x 4,000", True),
    "cbmc": ("CBMC counts 8,617 x 500", True),
    "corpus24k": ("corpus 5,000 x 24,000 (sparse)", True),
    "corpus42k": ("corpus 5,600 x 42,000 (sparse)", False),
}
CORPORA = {"corpus24k": (5000, 24000), "corpus42k": (5600, 42000)}
HDTWD = [sys.executable, "-m", "hdtwd_cli"]


def byte_compile() -> None:
    """Byte-compile hdtwd_cli first, as ``pip install`` does: a development checkout run with
    ``PYTHONDONTWRITEBYTECODE=1`` (set on these machines) would otherwise compile every module from
    source on every run, ~0.2 s that no installed copy pays."""
    import compileall

    import hdtwd_cli

    compileall.compile_dir(str(Path(hdtwd_cli.__file__).parent), quiet=1)


def data_path(name: str) -> Path:
    return WD / (f"{name}.npz" if name in CORPORA else f"{name}.npy")


ONLY: set[str] = set(WORKLOADS)  # --only: the workloads to (re)run; the others' records are kept
CPUS: list[str] = ["native"]  # --cpus: the CPU kinds whose code paths hdtwd runs on (cpu_kind.py)
HEADING_CPUS = "## Issue 24: both CPU kinds, against Striped UniFrac"


def _tool(kind: str) -> str:
    return "hdtwd" if kind == "native" else f"hdtwd_{kind}"


def _save(part: str, rec: dict[str, Any], facts: dict[str, Any] | None = None) -> None:
    """Store a part's record with the facts of its run (date, commit, machine), taken at run time."""
    old = _load(part) if part != "startup" else {}
    rec = {**old, **rec, "facts": facts or harness.machine_facts()}
    (WD / f"{part}.json").write_text(json.dumps(rec, indent=1, default=str))


def _load(part: str) -> dict[str, Any]:
    p = WD / f"{part}.json"
    return json.loads(p.read_text()) if p.exists() else {}


def _run(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    r = harness.run_timed_once(cmd, log, env)
    r.pop("stderr", None)
    return r


def part_prepare() -> dict[str, Any]:
    import biom
    from biom.util import biom_open

    from hdtwd_cli.datasets import planted_corpus

    rec: dict[str, Any] = {}
    for name in WORKLOADS:
        p = data_path(name)
        if name in CORPORA:
            n, m = CORPORA[name]
            X, _, _ = planted_corpus(n, m, mean_length=100.0, seed=0)
            X = sp.csr_matrix(X)
            sp.save_npz(p, X)
        else:
            X = np.asarray(
                datasets.load("zeisel7" if name == "zeisel" else "cbmc", values="counts").X, dtype=np.float64
            )
            np.save(p, X)
        tree = WD / f"{name}.nwk"
        r = _run(
            HDTWD + ["distance", str(p), "-o", str(WD / f"{name}_D_default.npy"), "--newick", str(tree), "-q"],
            WD / f"{name}_prepare.log",
        )
        cols = [f"f{j}" for j in range(X.shape[1])]
        t = biom.Table(
            sp.csr_matrix(X).T.tocsr() if sp.issparse(X) else X.T,
            observation_ids=cols,
            sample_ids=[f"s{i}" for i in range(X.shape[0])],
        )
        with biom_open(str(WD / f"{name}.biom"), "w") as fh:
            t.to_hdf5(fh, "hdtwd benchmark")
        rec[name] = {"shape": list(X.shape), "nnz": int(sp.csr_matrix(X).nnz), "learn_run": r}
        print(f"prepared {name}: {X.shape}, learned in {r['wall_s']:.1f} s", file=sys.stderr, flush=True)
    return rec


def _ssu_matrix(path: Path) -> np.ndarray:
    import h5py

    with h5py.File(path, "r") as f:
        order = [s.decode() for s in f["order"][:]]
        D = f["matrix"][:]
    idx = np.argsort([int(s[1:]) for s in order])
    return D[np.ix_(idx, idx)]


def _agreement(D: np.ndarray, E: np.ndarray) -> float:
    scale = np.maximum(np.abs(D), np.abs(E))
    off = scale > 0
    return float(np.max(np.abs(D - E)[off] / scale[off])) if off.any() else 0.0


def part_distance(reps: int = 3) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "ssu": subprocess.run(["dpkg-query", "-W", "unifrac-tools"], capture_output=True, text=True).stdout.strip()
    }
    for name, (_, vs_ssu) in WORKLOADS.items():
        if not vs_ssu or name not in ONLY:
            continue
        tree, biomf = WD / f"{name}.nwk", WD / f"{name}.biom"
        tools = {
            **{
                _tool(k): HDTWD
                + ["distance", str(data_path(name)), "--tree", str(tree), "-o", str(WD / f"D_{_tool(k)}.npy"), "-q"]
                for k in CPUS
            },
            "ssu_fp64": [
                "ssu",
                "-i",
                str(biomf),
                "-t",
                str(tree),
                "-m",
                "weighted_unnormalized_fp64",
                "-o",
                str(WD / "D_ssu64.h5"),
                "--format",
                "hdf5_fp64",
                "--pcoa",
                "0",
            ],
            "ssu_fp32": [
                "ssu",
                "-i",
                str(biomf),
                "-t",
                str(tree),
                "-m",
                "weighted_unnormalized_fp32",
                "-o",
                str(WD / "D_ssu32.h5"),
                "--format",
                "hdf5_fp32",
                "--pcoa",
                "0",
            ],
        }
        envs = {_tool(k): cpu_kind.env_for(k) for k in CPUS}
        for k in CPUS:  # each kind's machine code compiled / cached before the clock
            _run(tools[_tool(k)], WD / f"{name}_{_tool(k)}_warm.log", envs[_tool(k)])
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in tools}
        for rep in range(reps):
            for tool, cmd in tools.items():  # in turns: a slow spell hits every tool
                runs[tool].append(_run(cmd, WD / f"{name}_{tool}_{rep}.log", envs.get(tool)))
        D = np.load(WD / "D_hdtwd.npy")
        agree = {
            "ssu_fp64": _agreement(D, _ssu_matrix(WD / "D_ssu64.h5")),
            "ssu_fp32": _agreement(D, _ssu_matrix(WD / "D_ssu32.h5")),
        }
        for k in CPUS[1:]:  # the same bits on every kind (the kernels' determinism contract)
            agree[_tool(k)] = float(np.abs(np.load(WD / f"D_{_tool(k)}.npy") - D).max())
        out = {}
        for tool, rs in runs.items():
            out[tool] = {
                "wall_s": [r["wall_s"] for r in rs],
                "median_s": statistics.median(r["wall_s"] for r in rs),
                "max_rss_MB": max(r["max_rss_MB"] for r in rs),
                "cpu_s": statistics.median(r["user_s"] + r["sys_s"] for r in rs),
                "background_cores": max(r["background_cores"] for r in rs),
                "max_rel_diff_vs_hdtwd": agree.get(tool),
            }
        rec[name] = {**out, "agreement": agree}
        print(name, {t: round(v["median_s"], 2) for t, v in out.items()}, agree, file=sys.stderr, flush=True)
    return rec


def part_e2e(reps: int = 3) -> dict[str, Any]:
    rec: dict[str, Any] = {}
    for name in WORKLOADS:
        if name not in ONLY:
            continue
        n_runs = 1 if name in CORPORA else reps
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in CPUS}
        for i in range(n_runs):
            for k in CPUS:  # in turns
                runs[k].append(
                    _run(
                        HDTWD + ["distance", str(data_path(name)), "-o", str(WD / f"D_e2e_{k}.npy"), "-q"],
                        WD / f"{name}_e2e_{k}_{i}.log",
                        cpu_kind.env_for(k),
                    )
                )
        D0 = np.load(WD / f"{name}_D_default.npy")
        by_cpu = {}
        for k, rs in runs.items():
            D = np.load(WD / f"D_e2e_{k}.npy")
            by_cpu[k] = {
                "wall_s": [r["wall_s"] for r in rs],
                "median_s": statistics.median(r["wall_s"] for r in rs),
                "max_rss_MB": max(r["max_rss_MB"] for r in rs),
                "background_cores": max(r["background_cores"] for r in rs),
                "same_as_prepare": bool(np.array_equal(D, D0)),
                "max_abs_diff_vs_prepare": float(np.abs(D - D0).max()),
                "max_rel_diff_vs_prepare": _agreement(D0, D),
            }
        rec[name] = {**by_cpu[CPUS[0]], "by_cpu": by_cpu}
        print(
            name,
            {k: (round(v["median_s"], 2), v["max_abs_diff_vs_prepare"]) for k, v in by_cpu.items()},
            file=sys.stderr,
            flush=True,
        )
    return rec


def part_stages() -> dict[str, Any]:
    rec: dict[str, Any] = {}
    for name in WORKLOADS:
        out = WD / "D_stages.npy"
        cmd = [
            sys.executable,
            str(HERE / "bench_end_to_end.py"),
            "--stages-only",
            str(data_path(name)),
            "--stages-out",
            str(out),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=harness.REPO)
        if proc.returncode:
            raise RuntimeError(proc.stderr[-3000:])
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("STAGES_JSON ")][-1]
        rec[name] = json.loads(line[len("STAGES_JSON ") :])
        print(name, f"{rec[name]['total_s']:.1f} s", file=sys.stderr, flush=True)
    return rec


def part_startup(reps: int = 5) -> dict[str, Any]:
    sample = harness.REPO / "sample_data" / "produce.csv"
    out = {}
    for key, cmd in (
        ("version", ["hdtwd", "--version"]),
        ("produce", ["hdtwd", "distance", str(sample), "-o", str(WD / "D_produce.npy"), "-q"]),
    ):
        exe = shutil.which("hdtwd") or str(Path(sys.executable).parent / "hdtwd")
        rs = [_run([exe] + cmd[1:], WD / f"startup_{key}_{i}.log") for i in range(reps)]
        out[key] = {
            "wall_s": [r["wall_s"] for r in rs],
            "median_s": statistics.median(r["wall_s"] for r in rs),
            "max_rss_MB": statistics.median(r["max_rss_MB"] for r in rs),
        }
    print(out, file=sys.stderr)
    return out


PARTS = {
    "prepare": part_prepare,
    "distance": part_distance,
    "e2e": part_e2e,
    "stages": part_stages,
    "startup": part_startup,
}


def landmark_switch() -> list[str]:
    """The exact/landmark switch: kNN accuracy of the landmark configurations on Zeisel (bench_classify.py)."""
    wd = harness.work_dir("classify-issue11")
    rows = []
    for name in ("zeisel7", "zeisel48"):
        p = wd / f"{name}.json"
        if not p.exists():
            continue
        cfg = json.loads(p.read_text())["configs"]
        ex = cfg.get("defaults")
        for key, label in (
            ("defaults", "exact operator (today's default at 4,000 genes)"),
            ("landmarks500", "500 random landmarks"),
            ("landmarks1000", "1,000 random landmarks"),
            ("kmeans1000", "1,000 k-means landmarks"),
            ("landmarks2000", "2,000 random landmarks"),
        ):
            c = cfg.get(key)
            if c and ex:
                rows.append(f"| {name} | {label} | {c['mean']:.1f} ± {c['std']:.1f} | {c['mean'] - ex['mean']:+.1f} |")
    if not rows:
        return []
    return (
        [
            "### The exact/landmark switch (kNN accuracy, 5 splits, `bench_classify.py --configs ...`)",
            "",
            "| labels | operator | accuracy | vs exact |",
            "|---|---|---|---|",
        ]
        + rows
        + [""]
    )


def markdown() -> str:
    return render(_load("prepare"), _load("distance"), _load("e2e"), _load("stages"), _load("startup"))


NOTES = """### Reading these figures: what is met, what is not

This run: 04:42-04:57 UTC (2026-11-27), every part of this script in one go at 1877f7a, after the
fifth round of issue-14 changes. All are bit-neutral: the distance matrices of Zeisel, CBMC and the
5,000 x 24,000 corpus end to end with the defaults are the same bytes as at 609029f (the previous
session's last commit), and each change is tested for the same bits.
- Complete linkage without the ranks when no tie decides (`_linkage.untied_complete_linkage`):
  the chain runs on `log a` itself and reports whether a scan's smallest value sat in two slots;
  untied, with distinct heights, its tree is the ranks' tree (proof in the docstring). Zeisel's
  merge order 1.0-1.35 -> 0.21-0.27 s (the sort of 8 M values is gone).
- The square roots of the densities vectorised (`_kernels._sqrt_densities`: zero-start views and
  a transposed copy of each tile, so `vdivpd`/`vsqrtpd` run instead of scalar code): 0.10-0.14 ->
  0.045-0.07 s per scale at 4,000 features.
- The output file's pages are faulted in by one `madvise(MADV_POPULATE_WRITE)` in a background
  thread beside the kernel (`io.output._populate`): CBMC's distance step on its tree, 6 runs each
  in turns against 609029f, median 3.31 vs 3.75 s, system time 0.62-0.89 vs 0.83-1.07 s.
- No copy of dense data whose columns are all kept, `column_scale` without an `|X|` copy (Zeisel:
  0.11 + 0.1 s, peak 762 -> 668 MB end to end).
- Landmarks + complete linkage: the tiled product goes straight into the square matrix the chain
  works on (`hd_lca_products(square=True)`), no condensed vector and no copy of it: peak 4.96 ->
  3.8-3.9 GB on both corpora; products + linkage 27.8 -> 25.1-26.3 s (corpus, in turns). Per tile
  the Gram tiles of all scales first, then one pass forms each pair's product in a register
  (`_kernels.lca_product_tile`, 2.4-2.8 -> 1.5-1.6 ms per tile), 512-row tiles (BLAS packs each
  operand half as often: 15-25 % faster at 14,000 features; 64 rows would change the bits).
- The pruned kernel's panels from each block's own nodes only (`_pruned._block_nodes`: 1.2-1.46 ->
  0.37-0.59 s on the corpus) and the kernel choice's sampled overlap by binary search
  (`pruned_share` 1 s -> 0.09 s).

The two runs of this session (each every part in one go; medians of 3, tools in turns):

| run | GEMM probe | distance step Zeisel / CBMC / corpus (ratio to ssu fp64) | end to end Zeisel (ssu alone) | CBMC | corpus 24k | corpus 42k |
|---|---|---|---|---|---|---|
| 04:09-04:27, 5bfc087 (before 512-row tiles) | 67-125 GFLOPS | 3.81 / 3.81 / 10.89 s (5.6x / 5.4x / 7.1x) | 19.7 s (21.5 s) | 4.4 s | 41.5 s | 39.8 s, 3.88 GB |
| this run, 1877f7a | 140 GFLOPS | 3.10 / 2.65 / 8.16 s (5.4x / 5.5x / 8.4x) | 14.4 s (16.7 s) | 2.7 s | 34.9 s | 44.4 s, 3.92 GB |

The previous session's three runs (ea1866e-5ba5b77, GEMM probe 101-123): distance step 5.0-6.3x /
4.9-5.1x / 5.9-7.0x; Zeisel end to end 18.1-21.1 s against ssu's 17.6-18.4 s; corpus 24k 36.2-44.1 s.

- Distance step, at least 5x Striped UniFrac fp64 (whole process): met on all three workloads in
  both runs of this session (Zeisel 5.4-5.6x, CBMC 5.4-5.5x, corpus 7.1-8.4x). A CBMC run is 37 G
  min-add terms (two vector operations per term; the tiled kernel reaches the in-L1 micro-kernel's
  rate, 22-27 G terms/s in quick phases: sub-blocking the passes so the packed tile stays in L1
  gained nothing), its 594 MB result and ~0.6 s of fixed cost (numba's import 0.19 s, typer 0.29's
  pydantic adapters ~0.17 s). Values agree with ssu to 6.6e-9 - 3.2e-8 (fp64).
- End to end with the defaults: Zeisel no slower than ssu's distance step alone: met in both runs
  (19.7 vs 21.5 s, 14.4 vs 16.7 s), 0.68 GB (met). What is left is LAPACK and BLAS: syevd on the
  4,000 x 4,000 operator and 16 float32 syrk; the rest of the stage table is under 2.5 s. CBMC
  2.7-4.4 s (met). Corpus 5,000 x 24,000: 34.9 s (met), 41.5 s in the slow first run (GEMM probe
  67 GFLOPS at its start): not met there. 5,600 x 42,000: 39.8-44.4 s and 3.9 GB (met).
- kNN accuracy with the defaults, re-measured after the changes (`bench_classify.py --configs
  defaults`, 05:00-05:04): CBMC 93.9 +- 0.5, Zeisel-7 92.5 +- 0.4, Zeisel-48 61.8 +- 1.0:
  unchanged (every change is bit-neutral).
- `hdtwd --version` 0.09 s (met); `hdtwd distance sample_data/produce.csv` 0.49 s (met).
- Stage tables above; the sparse kernel's roofline fraction: 37 % of the dense micro-kernel's rate
  in this run (37-48 % in the earlier runs). Its time is in the short runs of shared nodes per
  256-node pass (31 on average) and the merge of two supports per pair of blocks.
- Tried and left: the per-tile pass in a worker thread beside the next tile's BLAS products (no
  gain: the BLAS threads and the pass share two cores), a compiled column scaling for `W` (slower
  than NumPy's), `MAP_POPULATE` on the output (read faults on a shared mapping: every page faults
  again when written), populating the output before the kernel (serial: 0.14-0.76 s).
"""


def render_cpus(prep: dict, dist: dict, e2e: dict) -> str:
    """The per-CPU table (issue 24): hdtwd on each kind's code paths against the same ssu runs."""
    facts = next((p["facts"] for p in (dist, e2e) if p.get("facts")), None)
    kinds = [
        k
        for k in cpu_kind.KINDS
        if any(_tool(k) in dist.get(n, {}) for n in WORKLOADS)
        or any(k in e2e.get(n, {}).get("by_cpu", {}) for n in WORKLOADS)
    ]
    o = [
        HEADING_CPUS,
        "",
        harness.machine_line(facts),
        "",
        "Each hdtwd run on the code paths of one CPU kind: `native` = this machine's own (AVX-512), `avx2` = "
        f"{cpu_kind.describe('avx2')} (`benchmarks/cpu_kind.py`), set for that process only. Distance step: "
        "medians of 3 runs, every tool in turns (ssu is the same binary for both; ratio = ssu fp64 / hdtwd), "
        "each kind's machine code compiled once before the clock. End to end: the tree learned too, "
        "defaults, medians of 3 (corpora: 1 run), kinds in turns.",
        "",
        "| workload | "
        + " | ".join(f"distance step {k} (ratio)" for k in kinds)
        + " | ssu fp64 | "
        + " | ".join(f"end to end {k}" for k in kinds)
        + " | same matrix on both kinds |",
        "|---|" + "---|" * (2 * len(kinds) + 2),
    ]
    for name, (label, _) in WORKLOADS.items():
        d, e = dist.get(name, {}), e2e.get(name, {})
        if not d and not e:
            continue
        s64 = d.get("ssu_fp64", {}).get("median_s")
        cells = []
        for k in kinds:
            h = d.get(_tool(k), {}).get("median_s")
            cells.append(f"{h:.2f} s ({s64 / h:.1f}x)" if h and s64 else "-")
        cells.append(f"{s64:.2f} s" if s64 else "-")
        by = e.get("by_cpu", {})
        for k in kinds:
            r = by.get(k)
            cells.append(f"{r['median_s']:.1f} s, {r['max_rss_MB'] / 1000:.2f} GB" if r else "-")
        same = []
        for k in kinds[1:]:
            agree = d.get("agreement", {}).get(_tool(k))
            r = by.get(k)
            parts = []
            if agree is not None:
                parts.append("step: " + ("identical" if agree == 0 else f"max |diff| {agree:.1e}"))
            if r is not None:
                parts.append(
                    "end to end: "
                    + ("identical" if r["same_as_prepare"] else f"max rel. diff {r['max_rel_diff_vs_prepare']:.1e}")
                )
            same.append("; ".join(parts) or "-")
        cells.append(" / ".join(same) or "-")
        o.append(f"| {label} | " + " | ".join(cells) + " |")
    o.append("")
    return "\n".join(o)


def render(prep: dict, dist: dict, e2e: dict, stages: dict, start: dict) -> str:
    facts = next((p["facts"] for p in (dist, e2e, stages, start) if p.get("facts")), None)
    o = [HEADING, "", harness.machine_line(facts), ""]  # the run's date and commit, not the rendering's
    if dist:
        o += [
            f"### Distance step on a given tree, whole process vs whole process ({dist.get('ssu', 'ssu')})",
            "",
            "Medians of 3 runs in turns under `/usr/bin/time -v`; both tools use both cores; each reads its "
            "own format (hdtwd: `.npy` / `.npz`, ssu: BIOM) and writes the full float64 (fp32: float32) "
            "matrix; hdtwd's modules byte-compiled first, as `pip install` leaves them. "
            "Ratio = ssu time / hdtwd time.",
            "",
            "| workload | hdtwd | ssu fp64 | ratio | ssu fp32 | ratio | peak RSS hdtwd / ssu fp64 | "
            "max rel. diff vs hdtwd (fp64 / fp32) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, (label, _) in WORKLOADS.items():
            r = dist.get(name)
            if not r:
                continue
            h, s64, s32 = r["hdtwd"], r["ssu_fp64"], r["ssu_fp32"]
            o.append(
                f"| {label} | {h['median_s']:.2f} s | {s64['median_s']:.2f} s | {s64['median_s'] / h['median_s']:.1f}x "
                f"| {s32['median_s']:.2f} s | {s32['median_s'] / h['median_s']:.1f}x | "
                f"{h['max_rss_MB']:.0f} / {s64['max_rss_MB']:.0f} MB | "
                f"{s64['max_rel_diff_vs_hdtwd']:.1e} / {s32['max_rel_diff_vs_hdtwd']:.1e} |"
            )
        o.append("")
    if e2e:
        o += [
            "### End to end with the defaults (`hdtwd distance DATA -o D.npy -q`, the tree learned too)",
            "",
            "| workload | wall (runs) | peak RSS | ssu fp64 distance step alone |",
            "|---|---|---|---|",
        ]
        for name, (label, _) in WORKLOADS.items():
            r = e2e.get(name)
            if not r:
                continue
            s = dist.get(name, {}).get("ssu_fp64", {}).get("median_s")
            o.append(
                f"| {label} | {r['median_s']:.1f} s ({', '.join(f'{w:.1f}' for w in r['wall_s'])}) | "
                f"{r['max_rss_MB'] / 1000:.2f} GB | {f'{s:.1f} s' if s else '-'} |"
            )
        o.append("")
    o += landmark_switch()
    if start:
        o += [
            f"Start-up: `hdtwd --version` {start['version']['median_s']:.2f} s "
            f"({start['version']['max_rss_MB']:.0f} MB); `hdtwd distance sample_data/produce.csv -o D.npy` "
            f"{start['produce']['median_s']:.2f} s (medians of 5).",
            "",
        ]
    if stages:
        o += ["### Where the time goes (each stage's seconds from the command's `-v` lines)", ""]
        for name, (label, _) in WORKLOADS.items():
            r = stages.get(name)
            if not r:
                continue
            o += [f"**{label}**: {r['total_s']:.1f} s in all", "", "| stage | s | peak MB |", "|---|---:|---:|"]
            for row in r["rows"]:
                if row["s"] < 0.005 and row["depth"] > 0:
                    continue
                pk = row.get("peak_MB")
                o.append(
                    f"| {'· ' * row['depth']}{row['stage']} | {row['s']:.2f} | "
                    f"{'' if pk is None or pk != pk else f'{pk:.0f}'} |"
                )
            o.append("")
    o.append(NOTES)
    return "\n".join(o)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("parts", nargs="*", help=", ".join(PARTS))
    ap.add_argument("--only", default=",".join(WORKLOADS), help="distance / e2e: only these workloads")
    ap.add_argument(
        "--cpus",
        default="native",
        help="distance / e2e: hdtwd on these CPU kinds' code paths "
        f"({', '.join(cpu_kind.KINDS)}; the first is the reference)",
    )
    ap.add_argument("--workdir", default="unifrac-issue14", help="folder of the records under the cache")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument(
        "--write",
        action="store_true",
        help="with --markdown: replace its section in archive/RESULTS-history.md (harness.HISTORY)",
    )
    args = ap.parse_args()
    ONLY.intersection_update(args.only.split(","))
    CPUS[:] = args.cpus.split(",")
    global WD
    WD = harness.work_dir(args.workdir)
    if args.parts:
        byte_compile()
    for part in args.parts:
        facts = harness.machine_facts(probe=True)
        _save(part, PARTS[part](), facts)
    if args.markdown and len(CPUS) > 1:
        harness.emit_section(render_cpus(_load("prepare"), _load("distance"), _load("e2e")), HEADING_CPUS, args.write)
    elif args.markdown:
        harness.emit_section(markdown(), HEADING, args.write)


if __name__ == "__main__":
    main()
