"""Two source trees of hdtwd, the same commands, in one run: is the new tree slower anywhere?

Each workload is a whole ``hdtwd`` command run as a user runs it (``python -m hdtwd_cli ...``)
with ``PYTHONPATH`` set to one tree or the other, the two trees alternating (ABBA order), after a
warm-up run of each that fills its own numba cache. Reported: the median wall time and peak RSS
per tree and the ratio new / old, with the machine's CPU. The outputs of the two trees are
compared byte for byte as well (the same bytes are part of the contract of a refactoring).

Workloads: the start-up (``--version``, and the produce example), CBMC (8,617 x 500) and Zeisel
(3,005 x 4,000 counts) end to end, and 100,000 synthetic cells x 2,000 genes with ``--knn 15``
(the approximate search; atlas.py's generator). The single-cell sets are fetched into the
benchmark cache (datasets.py).

    python benchmarks/compare_speed.py --old /path/to/old/checkout --new . --reps 3 --out speed.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            flags = Path("/proc/cpuinfo").read_text()
            return line.split(":", 1)[1].strip() + (" (AVX-512)" if " avx512f" in flags else " (AVX2 only)")
    return platform.processor()


def _inputs(cache: Path, sizes: list[str]) -> dict[str, Path]:
    """The workloads' input files, made once into ``cache``."""
    from datasets import write_h5ad

    cache.mkdir(parents=True, exist_ok=True)
    out = {}
    if "cbmc" in sizes:
        out["cbmc"] = cache / "cbmc.h5ad"
        if not out["cbmc"].exists():
            write_h5ad("cbmc", out["cbmc"])
    if "zeisel" in sizes:
        out["zeisel"] = cache / "zeisel_counts.h5ad"
        if not out["zeisel"].exists():
            write_h5ad("zeisel48", out["zeisel"], values="counts")
    if "synth100k" in sizes:
        from atlas import synth

        out["synth100k"] = synth(100_000, folder=cache)
    if "genes10k" in sizes:
        from atlas import synth_genes

        out["genes10k"] = synth_genes(10_000, 33_000)  # bench_atlas's file (its cache folder)
    return out


def _workloads(inputs: dict[str, Path]) -> dict[str, list[str]]:
    sample = HERE.parent / "sample_data"
    w = {
        "start-up: --version": ["--version"],
        "start-up: produce.csv (100 x 14)": ["distance", str(sample / "produce.csv"), "-o", "{out}/D.npy"],
    }
    if "cbmc" in inputs:
        w["CBMC end to end"] = ["distance", str(inputs["cbmc"]), "-o", "{out}/D.npy", "-q"]
    if "zeisel" in inputs:
        w["Zeisel end to end"] = ["distance", str(inputs["zeisel"]), "-o", "{out}/D.npy", "-q"]
    if "synth100k" in inputs:
        w["10^5 cells --knn 15 (nndescent)"] = [
            "distance",
            str(inputs["synth100k"]),
            "--knn",
            "15",
            "--knn-method",
            "nndescent",
            "-o",
            "{out}/G.npz",
            "-q",
        ]
    return w


def _run(
    tree: Path, args: list[str], out: Path, patch: str = "", numba_cache: Path | None = None
) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) and a digest of the outputs of one run of ``hdtwd ARGS`` from ``tree``.

    ``patch``: Python statements run in the process before the command (compare_tricks.py switches
    a trick off this way); the command itself is the one ``python -m hdtwd_cli`` runs.
    ``numba_cache``: numba's cache folder for this run (``NUMBA_CACHE_DIR``): a kernel whose callee a
    patch replaces must be compiled again, not loaded from the machine code cached with the callee.
    """
    for f in out.iterdir():
        f.unlink()
    env = dict(os.environ, PYTHONPATH=str(tree))
    if numba_cache is not None:
        env["NUMBA_CACHE_DIR"] = str(numba_cache)
    launcher = ["-m", "hdtwd_cli"] if not patch else ["-c", patch + "\nfrom hdtwd_cli.cli._app import main\nmain()"]
    argv = [sys.executable, *launcher, *(a.replace("{out}", str(out)) for a in args)]
    t = time.perf_counter()
    # run from the output folder: Python puts the working directory first on the path, where a checkout's own
    # hdtwd_cli would shadow the tree in PYTHONPATH
    proc = subprocess.Popen(argv, env=env, cwd=out, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{tree}: hdtwd {' '.join(args)} failed:\n{err}")
    digest = hashlib.sha256()
    for f in sorted(out.iterdir()):
        digest.update(f.name.encode() + f.read_bytes())
    return wall, usage.ru_maxrss / 1024, digest.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True, help="the reference source tree")
    ap.add_argument("--new", type=Path, default=HERE.parent, help="the tree under test (default: this one)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sizes", default="cbmc,zeisel,synth100k", help="which data workloads (start-up always)")
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("HDTWD_BENCH_CACHE", "~/.cache/hdtwd-bench")))
    ap.add_argument("--out", type=Path, help="JSON of every run")
    a = ap.parse_args()
    inputs = _inputs(a.cache.expanduser(), a.sizes.split(","))
    trees = {"old": a.old.resolve(), "new": a.new.resolve()}
    record = {"cpu": _cpu(), "trees": {k: str(v) for k, v in trees.items()}, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for name, args in _workloads(inputs).items():
            runs: dict[str, list[tuple[float, float, str]]] = {"old": [], "new": []}
            for key in ("old", "new"):  # warm-up: each tree's numba cache
                _run(trees[key], args, out)
            for rep in range(a.reps):
                for key in ("old", "new") if rep % 2 == 0 else ("new", "old"):
                    runs[key].append(_run(trees[key], args, out))
            record["runs"][name] = runs
            med = {k: statistics.median(r[0] for r in v) for k, v in runs.items()}
            rss = {k: max(r[1] for r in v) for k, v in runs.items()}
            same = {r[2] for r in runs["old"]} == {r[2] for r in runs["new"]}
            print(
                f"| {name} | {med['old']:.2f} s | {med['new']:.2f} s | {med['new'] / med['old']:.3f} | "
                f"{rss['old']:.0f} / {rss['new']:.0f} MB | {'same bytes' if same else 'OUTPUTS DIFFER'} |",
                flush=True,
            )
    print(f"CPU: {record['cpu']}; medians of {a.reps} alternating runs after a warm-up of each")
    if a.out:
        a.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
