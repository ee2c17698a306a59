"""Is each speed trick still worth it? Every trick switched off in turn, on a whole command.

docs/performance.md keeps a trick only where a whole realistic command shows its gain (about 10 %
or more) on the CPU kinds we have. This script measures that gain on this machine: each trick is
switched off by a few statements run in the process before the command (``python -c PATCH; main()``,
nothing in the package knows about it), and the command runs with the trick on and off,
alternating (ABBA), after a warm-up of each; the "off" runs compile into a numba cache of their own
(machine code cached with the trick in place would otherwise be loaded for kernels whose callee a
patch replaces). Reported per trick and workload: the median wall time
on and off, the ratio off / on (above 1: the trick pays), the peak RSS and whether the outputs are
the same bytes (they must be, except where a trick is a stated precision departure).

    python benchmarks/compare_tricks.py --reps 3 --out tricks.json
    python benchmarks/compare_tricks.py --only Gram,exit --workloads produce,zeisel

The workloads are the sample data's (produce, BBCSPORT), CBMC and Zeisel end to end and with a
stored tree, 100,000 synthetic cells with ``--knn 15``, 10,000 UMI-like cells over 33,000 genes with ``--knn 15``
(bench_atlas's), and 300 documents over a 200,000-word
vocabulary with a stored Newick tree of it (datasets.py and atlas.py fetch or make them into the
benchmark cache).
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
    "Gram matrices from fixed tiles on every core": (
        "import hdtwd_cli._runtime.blas as b\nb.GRAM_TILE = 1 << 30",
        ("zeisel", "synth100k"),
        False,
    ),
    "the eigenvectors' back-transformation in column blocks on every core": (
        "import hdtwd_cli._runtime.blas as b\nb.EIGH_COLUMNS = 1 << 30",
        ("zeisel",),
        True,
    ),
    "dense blocks' Gram by BLAS tiles in the denoiser's fit": (
        "import hdtwd_cli.tree._denoise as d\nd.DENSE_GRAM_FRACTION = 2.0",
        ("zeisel", "cbmc"),
        False,
    ),
    "a partition's denoised rows held for its search": (
        "import hdtwd_cli.knn._search as s\ns.HOLD_FRACTION = 0.0",
        ("synth100k",),
        True,
    ),
    "plain Newick scanned by a compiled pass": (
        "import hdtwd_cli.io._newick as n\nn.PLAIN_SCAN_CHARS = 1 << 62",
        ("flat-newick",),
        True,
    ),
    "the command keeps the memory it frees": (
        "import hdtwd_cli.cli._app as a\na.keep_freed_memory = lambda: False",
        ("zeisel", "cbmc", "genes10k"),
        True,
    ),
    "NumPy's arrays in base pages": (
        "import hdtwd_cli.cli._app as a\na.without_huge_pages = lambda: False",
        ("zeisel", "cbmc", "genes10k"),
        True,
    ),
    "one BLAS thread for the tree (a cost: below 1 means it costs)": (
        "import contextlib\nimport threadpoolctl\n"
        "threadpoolctl.threadpool_limits = lambda *a, **k: contextlib.nullcontext()",
        ("zeisel",),
        False,
    ),
}


def _vocabulary(cache: Path, words: int = 200_000, docs: int = 300) -> tuple[Path, Path]:
    """A sparse corpus over a large vocabulary (``docs`` x ``words``, .h5ad with the words' names) and a
    random binary tree over the words as Newick text (about 8 MB): ``distance --tree`` is then mostly reading the tree."""
    import anndata
    import numpy as np
    import scipy.sparse as sp

    import hdtwd_cli as hd

    data, tree = cache / f"vocabulary_{words}.h5ad", cache / f"vocabulary_{words}.nwk"
    if data.exists() and tree.exists():
        return data, tree
    rng = np.random.default_rng(0)
    names = [f"w{j}" for j in range(words)]
    X = sp.random(docs, words, density=0.002, format="csr", random_state=1, data_rvs=lambda k: rng.integers(1, 5, k))
    anndata.AnnData(X=X.astype(np.float32), var=__import__("pandas").DataFrame(index=names)).write_h5ad(data)
    parent = np.full(2 * words - 1, -1, dtype=np.int64)
    free = list(range(words))  # nodes without a parent, merged two at a time at random

    def take() -> int:
        i = int(rng.integers(len(free)))
        free[i], free[-1] = free[-1], free[i]
        return free.pop()

    for v in range(words, 2 * words - 1):
        parent[[take(), take()]] = v
        free.append(v)
    tree.write_text(hd.Tree(parent=parent, length=rng.random(2 * words - 1) + 0.1, leaf_names=names).to_newick())
    return data, tree


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
    if "genes10k" in inputs:
        w["genes10k"] = ["distance", str(inputs["genes10k"]), "--knn", "15", "-o", "{out}/G.npz", "-q"]
    if "flat-newick" in inputs:
        w["flat-newick"] = ["distance", str(inputs["flat-newick"]), "--tree", str(trees["flat-newick"])]
        w["flat-newick"] += ["-o", "{out}/D.npy", "-q"]
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
    sizes = [s for s in ("cbmc", "zeisel", "synth100k", "genes10k") if any(w.startswith(s) for w in wanted)]
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
    if "flat-newick" in wanted:
        inputs["flat-newick"], trees["flat-newick"] = _vocabulary(cache)
    workloads = _workloads(inputs, trees)
    record: dict = {"cpu": _cpu(), "runs": {}}
    print("| trick | workload | on | off | off / on | peak RSS on / off | bytes |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as compiled:
        out = Path(tmp)
        for name, (patch, names, same_expected) in tricks.items():
            for wname in names:
                if wname not in wanted or wname not in workloads:
                    continue
                args = workloads[wname]
                runs: dict[str, list[tuple[float, float, str]]] = {"on": [], "off": []}
                patches = {"on": "", "off": patch}
                # "off" compiles into a numba cache of its own: machine code cached with the trick would
                # otherwise be loaded for kernels whose callee the patch replaces
                caches = {"on": None, "off": Path(compiled) / name.replace(" ", "_")[:40]}
                for key in ("on", "off"):  # warm-up, and the numba cache of any recompiled kernel
                    _run(HERE.parent, args, out, patches[key], caches[key])
                for rep in range(a.reps):
                    for key in ("on", "off") if rep % 2 == 0 else ("off", "on"):
                        runs[key].append(_run(HERE.parent, args, out, patches[key], caches[key]))
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
