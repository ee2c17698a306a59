"""Issue 2: end-to-end wall time and peak memory of ``hdtwd distance`` vs the same pipeline with pdist.

For each data set (Zeisel: stored log1p values, 3005 cells x 4000 genes; CBMC: raw counts,
8617 cells x 500 genes) this script

1. writes the cells x genes matrix as ``.npy`` into ``<cache_dir>/e2e/`` (outside the repo);
2. runs, each as a subprocess under ``/usr/bin/time -v``,
   (a) ``hdtwd distance DATA.npy -o D_hdtwd.npy -q`` and
   (b) ``python benchmarks/pdist_pipeline.py DATA.npy -o D_pdist.npy``,
   recording wall time and maximum resident set size;
3. compares the two matrices;
4. runs ``hdtwd distance DATA -o OUT -v`` once more and reads each stage's seconds from the command's
   own ``-v`` lines (the whole process's peak memory from GNU time);
5. writes a JSON record next to the data and (with ``--write``) replaces the issue-2 section of
   ``benchmarks/archive/RESULTS-history.md`` (``harness.HISTORY``).

Before the timed runs one untimed ``hdtwd distance`` on a 40 x 30 matrix fills numba's on-disk
kernel cache, so no timed run pays JIT compilation. Each configuration runs once.

Usage::

    python benchmarks/bench_end_to_end.py --write         # both data sets, write the history's section
    python benchmarks/bench_end_to_end.py --datasets cbmc # records only
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import datasets
import harness

SECTION_TITLE = "## Issue 2: end-to-end `hdtwd distance` vs the same pipeline with scipy pdist"
CONFIGS = {
    # name in this benchmark -> (datasets.load key, label)
    "zeisel": ("zeisel7", "Zeisel (log1p, as stored)"),
    "cbmc": ("cbmc", "CBMC (raw counts)"),
}


# ------------------------------------------------------------------ helpers
def _pdist_stages(stderr: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^pdist_pipeline: stage (\S+) ([\d.]+)$", stderr, re.M)}


def _compare(path_a: Path, path_b: Path) -> dict[str, float]:
    A = np.load(path_a)
    B = np.load(path_b)
    if A.shape != B.shape:
        raise RuntimeError(f"shape mismatch {A.shape} vs {B.shape}")
    diff = np.abs(A - B)
    off = ~np.eye(A.shape[0], dtype=bool)
    denom = np.maximum(np.abs(A), np.abs(B))
    pos = off & (denom > 0)
    rel = diff[pos] / denom[pos]
    return {
        "max_abs_diff": float(diff.max()),
        "max_D": float(A.max()),
        "max_abs_diff_over_max_D": float(diff.max() / A.max()),
        "max_elementwise_rel_diff": float(rel.max()) if rel.size else 0.0,
        "bitwise_equal": bool(np.array_equal(A, B)),
        "diag_max_abs": float(max(np.abs(np.diag(A)).max(), np.abs(np.diag(B)).max())),
    }


# ------------------------------------------------------------------ stages, as the command accounts for them
#: The group of a ``-v`` stage line, by its first words.
_GROUPS = (
    ("reading", "read"),
    ("denoising", "denoise"),
    ("feature space", "features' space"),
    ("diffusion operator", "diffusion"),
    ("landmark", "diffusion"),
    ("multi-scale", "diffusion"),
    ("hd-lca", "tree decode"),
    ("complete linkage", "tree decode"),
    ("average linkage", "tree decode"),
    ("single linkage", "tree decode"),
    ("tree-wasserstein", "distance"),
)


def _group(stage: str) -> str:
    low = stage.lower()
    return next((g for prefix, g in _GROUPS if low.startswith(prefix)), "other")


def stages_main(data: str, out: str, compare_to: str | None) -> None:
    """Run ``hdtwd distance DATA -o OUT -v`` once and print its stages as JSON (``STAGES_JSON``).

    The stages and their seconds are the command's own ``-v`` lines (:func:`harness.stage_times`), so the
    profile follows the command as it is (no wrapper names a function of the package); the whole process's
    wall time and peak memory come from GNU time; what the lines do not cover (start-up, option checks,
    writing) is one row.
    """
    log = Path(out).with_suffix(".log")
    run = harness.run_with_stages([harness.require_tools(), "distance", data, "-o", out, "-v"], log)
    stages = run["stages"]
    nan = float("nan")
    rows: list[dict[str, Any]] = [
        {"stage": k, "group": _group(k), "depth": 0, "s": v, "peak_MB": nan} for k, v in stages.items()
    ]
    rows.append(
        {
            "stage": "(rest of the process: start-up, option checks, writing)",
            "group": "other",
            "depth": 0,
            "s": run["wall_s"] - sum(stages.values()),
            "peak_MB": nan,
        }
    )
    D = np.load(out, mmap_mode="r")
    result: dict[str, Any] = {
        "rows": rows,
        "n": int(D.shape[0]),
        "command_s": run["wall_s"],
        "total_s": run["wall_s"],
        "peak_MB": run["max_rss_MB"],
    }
    if compare_to:
        ref = np.load(compare_to)
        result["equal_to_cli_output"] = bool(np.array_equal(ref, np.asarray(D)))
    print("STAGES_JSON " + json.dumps(result), flush=True)


def _run_stages_once(data: Path, out: Path, compare_to: Path) -> dict[str, Any]:
    import resource

    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--stages-only",
        str(data),
        "--stages-out",
        str(out),
        "--compare-to",
        str(compare_to),
    ]
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0 = harness.cpu_busy_s()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=harness.REPO)
    wall = time.perf_counter() - t0
    busy = harness.cpu_busy_s() - busy0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"stage timing failed:\n{proc.stderr[-3000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("STAGES_JSON ")][-1]
    res = json.loads(line[len("STAGES_JSON ") :])
    own = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    res["background_cores"] = harness.background_cores(busy, own, wall)
    return res


def _run_stages(data: Path, out: Path, compare_to: Path, max_tries: int = 1, max_wait_s: float = 0.0) -> dict[str, Any]:
    return harness.least_disturbed(
        lambda: _run_stages_once(data, out, compare_to), max_tries, max_wait_s, keep=("total_s", "background_cores")
    )


# ------------------------------------------------------------------ report
def _fmt_s(x: float) -> str:
    return f"{x:.2f}" if x < 100 else f"{x:.1f}"


def _group_sums(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds per group, counting a call only when no enclosing call has the same group."""
    sums: dict[str, float] = {}
    stack: list[tuple[int, str]] = []
    for row in rows:
        while stack and stack[-1][0] >= row["depth"]:
            stack.pop()
        if all(g != row["group"] for _, g in stack):
            sums[row["group"]] = sums.get(row["group"], 0.0) + row["s"]
        stack.append((row["depth"], row["group"]))
    return sums


def _first_params(record: dict[str, Any]) -> str:
    for r in record["datasets"].values():
        if r.get("pdist_info", {}).get("params"):
            return r["pdist_info"]["params"]
    return "?"


def _pdist_info(stderr: str) -> dict[str, Any]:
    info: dict[str, Any] = {}
    m = re.search(r"^pdist_pipeline: n=(\d+) features=(\d+) tree_nodes=(\d+) embedding_dim=(\d+)$", stderr, re.M)
    if m:
        info.update(
            n=int(m.group(1)), features=int(m.group(2)), tree_nodes=int(m.group(3)), embedding_dim=int(m.group(4))
        )
    m = re.search(r"^pdist_pipeline: params (.+)$", stderr, re.M)
    if m:
        info["params"] = m.group(1)
    return info


def render(record: dict[str, Any]) -> str:
    f = record["machine"]
    env = ", ".join(f"{k}={'unset' if v is None else v}" for k, v in f["env"].items())
    out: list[str] = [SECTION_TITLE, ""]
    out.append(
        harness.machine_line(
            f,
            [
                f"scipy {f['scipy']}",
                f"numba {f['numba']} (NUMBA_NUM_THREADS = {f['numba_threads']})",
                f"BLAS {f['blas']}",
            ],
        )
        + f" Environment: {env}."
    )
    out.append("")
    out.append(
        "Each configuration ran as a fresh process under `/usr/bin/time -v` (wall = "
        '"Elapsed (wall clock)", peak RSS = "Maximum resident set size", MB = 10^6 bytes; CPU = '
        "user + sys). Both tools read the same `.npy` (float64, cells x genes), use the library's "
        f"default parameters (`{_first_params(record)}`) and write a float64 "
        "`.npy`. Ratio = wall / wall of `hdtwd distance` on the same data. numba's kernel cache "
        "was warm (one untimed small run first). The machine is shared: before each run the script "
        f'waits for it to be idle, "other load" is the CPU used by other processes during the run '
        f"(system busy time from `/proc/stat` minus the run's own, in cores), and a run with other load "
        f'>= {harness.BACKGROUND_LIMIT_CORES} cores is repeated ("runs" = attempts; the least disturbed is '
        "reported)."
    )
    out.append("")
    out.append("| data | n x m | tool | wall s | CPU s | peak RSS MB | n*n*8 B (MB) | ratio | other load | runs |")
    out.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for _name, r in record["datasets"].items():
        n, m = r["shape"]
        out_mb = n * n * 8 / 1e6
        base = r["hdtwd"]["wall_s"]
        for tool, key in (("`hdtwd distance`", "hdtwd"), ("pdist pipeline", "pdist")):
            t = r[key]
            out.append(
                f"| {r['label']} | {n} x {m} | {tool} | {_fmt_s(t['wall_s'])} | "
                f"{_fmt_s(t['user_s'] + t['sys_s'])} | {t['max_rss_MB']:.0f} | {out_mb:.0f} | "
                f"{t['wall_s'] / base:.2f} | {t['background_cores']:.2f} | {len(t.get('attempts', [1]))} |"
            )
    st = record.get("startup")
    if st:
        out.append("")
        out.append(
            f"Startup floor: `hdtwd --version` takes {st['wall_s']:.2f} s wall, {st['max_rss_MB']:.0f} MB peak RSS."
        )

    out.append("")
    out.append("### Where the time goes")
    out.append("")
    out.append(
        "`hdtwd distance DATA -o OUT -v` run once more (`bench_end_to_end.py --stages-only`): each stage's "
        "seconds as the command's `-v` lines give them, the rest of the process (start-up, option checks, "
        "writing) in one row. % = share of the whole process; its peak memory from GNU time."
    )
    for _name, r in record["datasets"].items():
        s = r["stages"]
        n, m = r["shape"]
        info = r.get("pdist_info", {})
        out.append("")
        out.append(
            f"**{r['label']}**, {n} x {m}; learned tree: {info.get('tree_nodes', '?')} nodes, "
            f"tree-embedding dimension {info.get('embedding_dim', '?')}. The profiled run "
            f"{s['total_s']:.2f} s, peak {s.get('peak_MB', float('nan')):.0f} MB (the timed run: {r['hdtwd']['wall_s']:.2f} s wall); "
            f"other load {s['background_cores']:.2f} cores, {len(s.get('attempts', [1]))} run(s)."
        )
        out.append("")
        out.append("| stage | group | s | % | peak MB |")
        out.append("|---|---|---:|---:|---:|")
        for row in s["rows"]:
            pk = row["peak_MB"]
            out.append(
                f"| {'· ' * row['depth']}{row['stage']} | {row['group']} | {row['s']:.2f} | "
                f"{100 * row['s'] / s['total_s']:.1f} | {'' if pk != pk else f'{pk:.0f}'} |"
            )
        out.append("")
        out.append(
            "By group (outermost call of each group): "
            + ", ".join(f"{g} {v:.2f} s ({100 * v / s['total_s']:.0f}%)" for g, v in _group_sums(s["rows"]).items())
            + "."
        )
        ps = r["pdist_stages"]
        out.append("")
        out.append(
            "pdist pipeline, its own stage timer: "
            + ", ".join(f"{k} {v:.2f} s" for k, v in ps.items() if k != "total")
            + f"; total {ps.get('total', float('nan')):.2f} s."
        )

    out.append("")
    out.append("### Agreement")
    out.append("")
    out.append(
        "| data | max abs diff | max D | max abs diff / max D | max elementwise rel. diff "
        "(off-diagonal) | bitwise equal |"
    )
    out.append("|---|---:|---:|---:|---:|---|")
    for _name, r in record["datasets"].items():
        a = r["agreement"]
        out.append(
            f"| {r['label']} | {a['max_abs_diff']:.3g} | {a['max_D']:.4g} | "
            f"{a['max_abs_diff_over_max_D']:.3g} | {a['max_elementwise_rel_diff']:.3g} | "
            f"{a['bitwise_equal']} |"
        )
    eq = [f"{r['label']}: {r['stages']['equal_to_cli_output']}" for r in record["datasets"].values()]
    out.append("")
    out.append("The in-process stage run reproduces the CLI's matrix bit for bit (" + "; ".join(eq) + ").")
    if record.get("notes"):
        out.append("")
        out.append("### Notes")
        out.append("")
        for note in record["notes"]:
            out.append(f"- {note}")

    out.append("")
    out.append("### Reproduce")
    out.append("")
    out.append("```bash")
    out.append(
        "python benchmarks/bench_end_to_end.py --write   # writes data to $HDTWD_BENCH_CACHE or "
        "~/.cache/hdtwd-bench/e2e, replaces this section"
    )
    out.append("# or by hand, per data set (DATA = ~/.cache/hdtwd-bench/e2e/zeisel.npy or cbmc.npy):")
    out.append("/usr/bin/time -v hdtwd distance DATA -o D_hdtwd.npy -q")
    out.append("/usr/bin/time -v python benchmarks/pdist_pipeline.py DATA -o D_pdist.npy")
    out.append("python benchmarks/bench_end_to_end.py --stages-only DATA --stages-out D_stages.npy")
    out.append("```")
    out.append("")
    return "\n".join(out)


# ------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Issue 2 end-to-end benchmark.")
    ap.add_argument("--datasets", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument(
        "--write", action="store_true", help="replace the issue-2 section of --results (default: print it only)"
    )
    ap.add_argument("--no-results", action="store_true", help=argparse.SUPPRESS)  # the old opt-out; now the default
    ap.add_argument("--results", default=str(harness.HISTORY), help="the file --write updates (default: %(default)s)")
    ap.add_argument("--note", action="append", default=[], help="extra note for the report")
    ap.add_argument(
        "--max-tries",
        type=int,
        default=3,
        help="rerun a timed command (up to this many runs in all) while other processes "
        f"used >= {harness.BACKGROUND_LIMIT_CORES} cores during it; the least disturbed run is kept",
    )
    ap.add_argument(
        "--max-wait",
        type=float,
        default=900.0,
        help="before each timed run, wait up to this many seconds for the machine to be idle",
    )
    ap.add_argument(
        "--render", metavar="JSON", help="only re-render a stored record (and, with --write, update --results)"
    )
    ap.add_argument("--stages-only", metavar="DATA", help=argparse.SUPPRESS)
    ap.add_argument("--stages-out", help=argparse.SUPPRESS)
    ap.add_argument("--compare-to", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.stages_only:
        out = args.stages_out or str(Path(args.stages_only).with_name("D_stages.npy"))
        stages_main(args.stages_only, out, args.compare_to)
        return 0

    if args.render:
        record = json.loads(Path(args.render).read_text())
        record["notes"] = list(record.get("notes", [])) + [n for n in args.note if n not in record.get("notes", [])]
        Path(args.render).write_text(json.dumps(record, indent=1, default=str))
        section = render(record)
        print(section)
        if args.write:
            harness.write_section(Path(args.results), section, SECTION_TITLE)
        return 0

    hdtwd = harness.require_tools()
    work = harness.work_dir("e2e")
    record: dict[str, Any] = {"machine": harness.machine_facts(), "datasets": {}, "notes": list(args.note)}

    # Warm numba's on-disk cache (untimed) so no timed run pays JIT compilation.
    rng = np.random.default_rng(0)
    tiny = work / "warmup.npy"
    np.save(tiny, rng.poisson(2.0, (40, 30)).astype(np.float64) + 1.0)
    subprocess.run([hdtwd, "distance", str(tiny), "-o", str(work / "warmup_D.npy"), "-q"], check=True, cwd=harness.REPO)
    record["startup"] = harness.run_timed([hdtwd, "--version"], work / "startup.log", args.max_tries, args.max_wait)

    for name in args.datasets:
        key, label = CONFIGS[name]
        ds = datasets.load(key)  # stored values: log1p for Zeisel, counts for CBMC
        data = work / f"{name}.npy"
        np.save(data, np.ascontiguousarray(ds.X, dtype=np.float64))
        n, m = ds.X.shape
        del ds
        print(f"[{name}] {n} x {m} -> {data}", file=sys.stderr, flush=True)
        d_h = work / f"{name}_D_hdtwd.npy"
        d_p = work / f"{name}_D_pdist.npy"
        tw = {"max_tries": args.max_tries, "max_wait_s": args.max_wait}
        r_h = harness.run_timed([hdtwd, "distance", str(data), "-o", str(d_h), "-q"], work / f"{name}_hdtwd.log", **tw)
        print(f"[{name}] hdtwd: {r_h['wall_s']:.2f} s, {r_h['max_rss_MB']:.0f} MB", file=sys.stderr)
        r_p = harness.run_timed(
            [sys.executable, str(HERE / "pdist_pipeline.py"), str(data), "-o", str(d_p)],
            work / f"{name}_pdist.log",
            **tw,
        )
        print(f"[{name}] pdist: {r_p['wall_s']:.2f} s, {r_p['max_rss_MB']:.0f} MB", file=sys.stderr)
        agree = _compare(d_h, d_p)
        print(f"[{name}] agreement: {agree}", file=sys.stderr, flush=True)
        stages = _run_stages(data, work / f"{name}_D_stages.npy", d_h, **tw)
        record["datasets"][name] = {
            "label": label,
            "data": str(data),
            "shape": [n, m],
            "hdtwd": r_h,
            "pdist": r_p,
            "pdist_stages": _pdist_stages(r_p["stderr"]),
            "pdist_info": _pdist_info(r_p["stderr"]),
            "agreement": agree,
            "stages": stages,
        }
        for p in (d_p, work / f"{name}_D_stages.npy"):
            p.unlink(missing_ok=True)

    end_commit = harness.git_commit()
    record["machine"]["git_commit_end"] = end_commit
    if end_commit != record["machine"]["git_commit"]:
        record["notes"].append(
            f"HEAD moved from `{record['machine']['git_commit']}` to `{end_commit}` during the run "
            "(another engineer was committing); the figures may mix the two versions."
        )
    rec_path = work / f"issue2_{harness.utc_stamp()}.json"
    rec_path.write_text(json.dumps(record, indent=1, default=str))
    print(f"record: {rec_path}", file=sys.stderr)
    section = render(record)
    print(section)
    if args.write:
        harness.write_section(Path(args.results), section, SECTION_TITLE)
        print(f"updated {args.results}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
