"""Issue 3/4/11 benchmark: kNN accuracy of hdtwd and baselines on real data, the paper's protocol.

For each data set: 5 random 70/30 splits (stratified, seed 0), the feature tree learned from the
training rows of each split, kNN for k = 1, 3, ..., 19 on precomputed distances; per method the best
k's mean +- std over splits. Every method sees the same splits (``evaluate``, as ``hdtwd classify``).

    python benchmarks/bench_classify.py                 # all sets, write JSON into the cache
    python benchmarks/bench_classify.py --sets cbmc     # a subset
    python benchmarks/bench_classify.py --markdown      # print the table from the cached JSON

Per CPU kind (issue 24): each kind's run into its own folder, then the two compared::

    python benchmarks/cpu_kind.py native -- python benchmarks/bench_classify.py --configs defaults --workdir classify-issue24-native
    python benchmarks/cpu_kind.py avx2 -- python benchmarks/bench_classify.py --configs defaults --workdir classify-issue24-avx2
    python benchmarks/bench_classify.py --compare classify-issue24-native,classify-issue24-avx2 [--write]

Configurations of hdtwd: ``paper`` (``--preset paper`` with the paper's (c, K) for the set, spec
section 5) and ``defaults`` (the library defaults). Baselines: cosine, Euclidean, L1 on every set,
tf-idf (L1, cosine) on word counts, PCA (scanpy's representation) on cells.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from datasets import load_set

import hdtwd_cli as hd
from hdtwd_cli import TreeParams

#: The paper's Optuna choices (docs/method.md section 5).
PAPER = {"zeisel7": (2.0, 7), "zeisel48": (2.0, 7), "cbmc": (5.0, 9), "bbcsport": (10.0, 12), "classic": (1.0, 15)}
#: Table 1 of the paper (Zeisel / CBMC on its own 47 / 56 subclass label sets): hdtwd, cosine.
PUBLISHED = {
    "zeisel7": (89.1, 73.5),
    "zeisel48": (89.1, 73.5),
    "cbmc": (84.3, 72.7),
    "bbcsport": (96.1, 91.5),
    "classic": (96.9, 90.3),
}
SETS = ("bbcsport", "classic", "zeisel48", "zeisel7", "cbmc", "pbmc")
TEXT = ("bbcsport", "classic")


def get(name: str):
    X, names, labels = load_set("zeisel" if name.startswith("zeisel") else name)
    return X, names, labels[name]


def run(name: str, configs: dict[str, tuple[TreeParams, str]]) -> dict:
    X, names, y = get(name)
    report = {"set": name, "shape": list(X.shape), "n_classes": int(len(np.unique(y))), "configs": {}, "baselines": {}}
    t = time.time()
    extra = ["tfidf-l1", "tfidf-cosine"] if name in TEXT else ["pca"]
    report["baselines"] = hd.classify(X, y, names, methods=["cosine", "euclidean", "l1"] + extra)["methods"]
    report["baselines_s"] = time.time() - t
    for cname, (params, tf) in configs.items():
        t = time.time()
        # the preset's (eps, K) as the parameters' own (not a grid), its transform (tf) applied by classify
        s = hd.classify(X, y, names, methods=["hdtwd"], params=params)["methods"]["hdtwd"]
        s["seconds"] = time.time() - t
        s["params"]["transform"] = tf
        report["configs"][cname] = s
        print(
            f"{name} {cname} ({params}, {tf}): {s['mean']:.1f} +- {s['std']:.1f} (k={s['best_k']}) "
            f"in {s['seconds']:.0f}s",
            file=sys.stderr,
            flush=True,
        )
    return report


def markdown(reports: list[dict]) -> str:
    cols = ["cosine", "euclidean", "l1", "tfidf-l1", "tfidf-cosine", "pca"]
    lines = [
        "| data | n x m | classes | hdtwd defaults | hdtwd `--preset paper` | "
        + " | ".join(cols)
        + " | best baseline | defaults - best baseline | paper (its labels): hdtwd / cosine |",
        "|---|---|---|---|---|" + "---|" * len(cols) + "---|---|---|",
    ]

    def cell(v):
        return f"{v['mean']:.1f} ± {v['std']:.1f}"

    for r in reports:
        b = r["baselines"]
        best_name = max(b, key=lambda k: b[k]["mean"])
        paper = r["configs"].get("paper")
        pcell = (cell(paper) + f" (c={paper['params']['eps']:g}, K={paper['params']['scales']})") if paper else "n/a"
        d = r["configs"]["defaults"]
        pub = PUBLISHED.get(r["set"])
        lines.append(
            f"| {r['set']} | {r['shape'][0]:,} x {r['shape'][1]:,} | {r['n_classes']} | **{cell(d)}** | {pcell} | "
            + " | ".join(cell(b[c]) if c in b else "" for c in cols)
            + f" | {best_name} | {d['mean'] - b[best_name]['mean']:+.1f} | "
            f"{f'{pub[0]} / {pub[1]}' if pub else 'n/a'} |"
        )
    return "\n".join(lines)


COMPARE_HEADING = "## Issue 24: kNN accuracy with the defaults on both CPU kinds"
COMPARE_HEADING_25 = "## Issue 25: kNN accuracy of the defaults and --denoise 50 on both CPU kinds"


def compare(dirs: list[str], sets: list[str], heading: str = COMPARE_HEADING) -> str:
    """Defaults' accuracy per set on each CPU kind's run, and the largest per-split difference."""
    runs = {
        d: {
            n: json.loads((harness.work_dir(d) / f"{n}.json").read_text())
            for n in sets
            if (harness.work_dir(d) / f"{n}.json").exists()
        }
        for d in dirs
    }
    configs = ",".join(dict.fromkeys(c for r in runs[dirs[0]].values() for c in r["configs"]))
    o = [
        heading,
        "",
        harness.machine_line(),
        "",
        f"`bench_classify.py --configs {configs}` run once per CPU kind (`cpu_kind.py native|avx2 -- ...`), same "
        "splits: mean +- std over 5 splits, best k; baselines from the same run.",
        "",
        "| data (configuration) | "
        + " | ".join(f"{d}" for d in dirs)
        + " | largest per-split difference | best baseline ("
        + dirs[0]
        + ") |",
        "|---|" + "---|" * (len(dirs) + 2),
    ]
    for n in sets:
        rs = [runs[d].get(n) for d in dirs]
        if any(r is None for r in rs):
            continue
        for name in [c for c in rs[0]["configs"] if all(c in r["configs"] for r in rs)]:
            cfg = [r["configs"][name] for r in rs]
            diff = max(float(np.max(np.abs(np.subtract(c["per_split"], cfg[0]["per_split"])))) for c in cfg[1:])
            b = rs[0]["baselines"]
            best = max(b, key=lambda k: b[k]["mean"])
            label = n if name == "defaults" else f"{n}, {name}"
            o.append(
                f"| {label} | "
                + " | ".join(f"{c['mean']:.1f} ± {c['std']:.1f} (k={c['best_k']})" for c in cfg)
                + f" | {diff:.2f} points | {best} {b[best]['mean']:.1f} ± {b[best]['std']:.1f} |"
            )
    o.append("")
    return "\n".join(o)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument(
        "--configs",
        default="defaults,paper",
        help="configurations to (re)run; the others are kept from the cached JSON",
    )
    ap.add_argument("--workdir", default="classify-issue11", help="folder of the JSON records under the cache")
    ap.add_argument("--compare", help="two workdirs (native,avx2): the per-CPU accuracy table")
    ap.add_argument(
        "--write",
        action="store_true",
        help="with --compare: replace its section in archive/RESULTS-history.md (harness.HISTORY)",
    )
    args = ap.parse_args()
    if args.compare:
        heading = COMPARE_HEADING_25 if "issue25" in args.compare else COMPARE_HEADING
        harness.emit_section(compare(args.compare.split(","), args.sets.split(","), heading), heading, args.write)
        return
    out_dir = harness.work_dir(args.workdir)
    sets = args.sets.split(",")
    if not args.markdown:
        for name in sets:
            eps, K = PAPER.get(name, (None, None))
            configs = {
                "defaults": harness.resolve_params("default"),
                "paper": harness.resolve_params("paper", eps=eps, scales=K),
                # issue 14: the landmark path where the automatic switch used the exact one
                "exact": harness.resolve_params("default", landmarks=0),
                "landmarks500": harness.resolve_params("default", landmarks=500),
                "landmarks1000": harness.resolve_params("default", landmarks=1000),
                "kmeans1000": harness.resolve_params("default", landmarks=1000, landmark_method="kmeans"),
                "landmarks2000": harness.resolve_params("default", landmarks=2000),
                # denoising: forced at rank 50, and off (the defaults before denoise="auto")
                "denoise50": harness.resolve_params("default", denoise=50),
                "denoise0": harness.resolve_params("default", denoise=0),
            }
            wanted = args.configs.split(",")
            rep = run(name, {k: v for k, v in configs.items() if k in wanted})
            cached = out_dir / f"{name}.json"
            if cached.exists():  # keep the configurations not rerun
                old = json.loads(cached.read_text())["configs"]
                rep["configs"] = {**{k: v for k, v in old.items() if k not in wanted}, **rep["configs"]}
            cached.write_text(json.dumps(rep, indent=1))
    reports = [json.loads((out_dir / f"{n}.json").read_text()) for n in sets if (out_dir / f"{n}.json").exists()]
    print(markdown(reports))


if __name__ == "__main__":
    main()
