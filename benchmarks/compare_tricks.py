"""Is each speed trick still worth it? Every trick switched off in turn, on a whole command.

docs/performance.md keeps a trick only where a whole realistic command shows its gain (about 10 %
or more) on the CPU kinds we have. This script measures that gain on this machine: each trick is
switched off by a few statements run in the process before the command (``python -c PATCH; main()``,
nothing in the package knows about it), and the command runs with the trick on and off,
alternating (ABBA), after a warm-up of each. Reported per trick and workload: the median wall time
on and off, the ratio off / on (above 1: the trick pays), the peak RSS and whether the outputs are
the same bytes (they must be, except where a trick is a stated precision departure).

    python benchmarks/compare_tricks.py --reps 3 --out tricks.json
    python benchmarks/compare_tricks.py --only madvise,exit --workloads produce,cbmc-tree

The workloads are the sample data's (produce, BBCSPORT), CBMC and Zeisel end to end and with a
stored tree, and 100,000 synthetic cells with ``--knn 15`` (datasets.py and atlas.py fetch or make
them into the benchmark cache).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from compare_speed import _cpu, _inputs, _run

#: name -> (statements that switch the trick off, the workloads it is measured on, same bytes expected)
TRICKS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "numba imported on first use": ("import numba", ("produce",), True),
    "NumPy twins below 2 M operations": (
        "import hdtwd_cli._runtime.twins as t\nt.SMALL_WORK = 0\nt.SMALL_NODES = 0",
        ("produce",),
        True,
    ),
    "cached machine code loaded without the context refresh": (
        "import hdtwd_cli._runtime.jit as j\nj._load_cached_code_only = lambda dispatcher: None",
        ("bbcsport", "cbmc-tree"),
        True,
    ),
    "exit without the interpreter's teardown": (
        "import sys\nimport hdtwd_cli.cli._app as a\na._exit = sys.exit",
        ("produce", "cbmc-tree"),
        True,
    ),
    "madvise(MADV_POPULATE_WRITE) beside the kernel": (
        "import hdtwd_cli.io._output as o\no._populate = lambda address, nbytes: None",
        ("cbmc-tree", "zeisel-tree"),
        True,
    ),
    "pruned kernel for sparse documents": (
        "import hdtwd_cli.twd._distance as d\nd.PRUNE_BELOW = -1.0",
        ("bbcsport",),
        True,
    ),
    "hand-written LLVM IR for the byte sums": (
        "import hdtwd_cli._runtime.jit as j\nj.ir_supported = lambda needs: False",
        ("synth100k",),
        True,
    ),
    "float32 HD-LCA and diffusion products": (
        "import numpy as np\nimport hdtwd_cli.tree._hd_lca as h\nimport hdtwd_cli.tree._diffusion as f\n"
        "h.PRODUCT_DTYPE = np.float64\nf.POWER_DTYPE = np.float64",
        ("zeisel",),
        False,
    ),
    "one BLAS thread for the tree (a cost: below 1 means it costs)": (
        "import contextlib\nimport threadpoolctl\n"
        "threadpoolctl.threadpool_limits = lambda *a, **k: contextlib.nullcontext()",
        ("zeisel",),
        False,
    ),
}


def _workloads(inputs: dict[str, Path], trees: dict[str, Path]) -> dict[str, list[str]]:
    sample = HERE.parent / "sample_data"
    w = {
        "produce": ["distance", str(sample / "produce.csv"), "-o", "{out}/D.npy"],
        "bbcsport": ["distance", str(sample / "bbcsport.h5ad"), "-o", "{out}/D.npy", "-q"],
    }
    for key in ("cbmc", "zeisel"):
        if key in inputs:
            w[key] = ["distance", str(inputs[key]), "-o", "{out}/D.npy", "-q"]
            w[f"{key}-tree"] = ["distance", str(inputs[key]), "--tree", str(trees[key]), "-o", "{out}/D.npy", "-q"]
    if "synth100k" in inputs:
        w["synth100k"] = [
            *("distance", str(inputs["synth100k"]), "--knn", "15", "--knn-method", "nndescent"),
            *("-o", "{out}/G.npz", "-q"),
        ]
    return w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", help="comma-separated words: tricks whose name contains one of them")
    ap.add_argument("--workloads", help="comma-separated workload names (default: every one a trick names)")
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("HDTWD_BENCH_CACHE", "~/.cache/hdtwd-bench")))
    ap.add_argument("--out", type=Path, help="JSON of every run")
    a = ap.parse_args()
    tricks = {k: v for k, v in TRICKS.items() if not a.only or any(word in k for word in a.only.split(","))}
    wanted = set(a.workloads.split(",")) if a.workloads else {w for _, ws, _ in tricks.values() for w in ws}
    sizes = [s for s in ("cbmc", "zeisel", "synth100k") if any(w.startswith(s) for w in wanted)]
    cache = a.cache.expanduser()
    inputs = _inputs(cache, sizes)
    trees = {}
    for key in ("cbmc", "zeisel"):
        if key in inputs:
            trees[key] = cache / f"{key}_tree.h5"
            if not trees[key].exists():
                subprocess.run(
                    [sys.executable, "-m", "hdtwd_cli", "distance", str(inputs[key]), "--save-tree", str(trees[key])]
                    + ["-o", str(cache / f"{key}_D.npy"), "-q"],
                    check=True,
                    env=dict(os.environ, PYTHONPATH=str(HERE.parent)),
                )
    workloads = _workloads(inputs, trees)
    record: dict = {"cpu": _cpu(), "runs": {}}
    print("| trick | workload | on | off | off / on | peak RSS on / off | bytes |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for name, (patch, names, same_expected) in tricks.items():
            for wname in names:
                if wname not in wanted or wname not in workloads:
                    continue
                args = workloads[wname]
                runs: dict[str, list[tuple[float, float, str]]] = {"on": [], "off": []}
                patches = {"on": "", "off": patch}
                for key in ("on", "off"):  # warm-up, and the numba cache of any recompiled kernel
                    _run(HERE.parent, args, out, patches[key])
                for rep in range(a.reps):
                    for key in ("on", "off") if rep % 2 == 0 else ("off", "on"):
                        runs[key].append(_run(HERE.parent, args, out, patches[key]))
                record["runs"][f"{name} / {wname}"] = runs
                med = {k: statistics.median(r[0] for r in v) for k, v in runs.items()}
                rss = {k: max(r[1] for r in v) for k, v in runs.items()}
                same = {r[2] for r in runs["on"]} == {r[2] for r in runs["off"]}
                verdict = "same" if same else ("differ (expected)" if not same_expected else "DIFFER")
                print(
                    f"| {name} | {wname} | {med['on']:.2f} s | {med['off']:.2f} s | {med['off'] / med['on']:.3f} | "
                    f"{rss['on']:.0f} / {rss['off']:.0f} MB | {verdict} |",
                    flush=True,
                )
    print(f"CPU: {record['cpu']}; medians of {a.reps} alternating runs after a warm-up of each")
    if a.out:
        a.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
