"""Issue 26: the seed paper's Table 1 rebuilt on every labelled set - hdtwd beside the competitors' trees.

For each set, ``evaluate`` (the protocol of ``hdtwd classify``: 5 stratified 70/30 splits, seed 0,
best-k mean kNN accuracy ± std over splits) runs ONE method per call on the same splits, so each
method's wall time is its own (tree building on the training rows and the TWDs of the split):
hdtwd with the defaults and with ``--preset paper`` (its (c, K) for the set), the competitors'
trees of :mod:`hdtwd_cli.competitors` (``quadtree``, ``mst``, ``cluster-tree``, ``tswd-1/5/10``)
and the simple baselines. ``mst`` needs the dense ``m x m`` distances: skipped above
``MST_MAX_FEATURES`` features (CLASSIC), and the table says so.

    python benchmarks/bench_table1.py --sets pbmc,cbmc,zeisel48,zeisel7,bbcsport,classic
    python benchmarks/bench_table1.py --markdown
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from bench_classify import PAPER, get  # noqa: E402

from hdtwd_cli.defaults import TREE_METHODS  # noqa: E402
from hdtwd_cli.denoise import is_count_data  # noqa: E402
from hdtwd_cli.evaluation import evaluate, summarise  # noqa: E402
from hdtwd_cli.pipeline import resolve_params  # noqa: E402

MST_MAX_FEATURES = 10000
BASE = ("cosine", "euclidean", "l1", "tfidf-l1", "tfidf-cosine", "pca")


def run(name: str) -> dict:
    X, names, y = get(name)
    defaults, _ = resolve_params("default")
    eps, K = PAPER.get(name, (None, None))
    paper, _ = resolve_params("paper", eps=eps, scales=K)
    rows: dict[str, dict] = {}
    plan = [("hdtwd defaults", "hdtwd", defaults), ("hdtwd --preset paper", "hdtwd", paper)]
    plan += [(m, m, defaults) for m in TREE_METHODS]
    plan += [(b, b, defaults) for b in BASE if not (b.startswith("tfidf") and not is_count_data(X))]
    for label, method, params in plan:
        if method == "mst" and X.shape[1] > MST_MAX_FEATURES:
            rows[label] = {"skipped": f"{X.shape[1]} features: the dense m x m distances of the MST"}
            continue
        t = time.time()
        res = evaluate(X, names, y, [method], [params.eps], [params.scales], params)
        s = summarise(res, {})["methods"][method]
        rows[label] = {"mean": s["mean"], "std": s["std"], "best_k": s["best_k"], "seconds": time.time() - t}
        print(f"{name} {label}: {s['mean']:.1f} ± {s['std']:.1f} in {time.time() - t:.0f} s", file=sys.stderr, flush=True)
    return {"set": name, "shape": list(X.shape), "classes": int(len(np.unique(y))), "rows": rows,
            "machine": harness.machine_line(), "commit": harness.git_commit()}


def markdown(reports: list[dict]) -> str:
    labels = list(dict.fromkeys(k for r in reports for k in r["rows"]))
    lines = ["| method | " + " | ".join(f"{r['set']} ({r['shape'][0]:,} x {r['shape'][1]:,})" for r in reports) + " |",
             "|---|" + "---|" * len(reports)]
    for lab in labels:
        cells = []
        for r in reports:
            v = r["rows"].get(lab)
            if v is None:
                cells.append("-")
            elif "skipped" in v:
                cells.append("skipped")
            else:
                cells.append(f"{v['mean']:.1f} ± {v['std']:.1f} ({v['seconds']:.0f} s)")
        lines.append(f"| {lab} | " + " | ".join(cells) + " |")
    lines.append("| hdtwd defaults - best competitor tree | " + " | ".join(
        f"{r['rows']['hdtwd defaults']['mean'] - max(r['rows'][m]['mean'] for m in TREE_METHODS if 'mean' in r['rows'].get(m, {})):+.1f}"
        for r in reports) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    harness.per_set_main(run, markdown, "table1-issue26", "pbmc,cbmc,zeisel48,zeisel7,bbcsport,classic")
