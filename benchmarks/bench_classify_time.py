"""Issue 11: time and peak memory of ``hdtwd classify`` with the defaults, whole process.

Workloads: CLASSIC (7,095 x 23,423 word counts, ``../shared/data/text/classic.h5ad``) and a
synthetic corpus of the size of the kept-back one (8,000 documents x 39,184 words, 4 top-level
topics, :func:`hdtwd_cli.datasets.planted_corpus`, Zipf word frequencies). Each is run as
``hdtwd classify FILE --labels obs:label -q`` under ``/usr/bin/time -v`` after waiting for an idle
machine (``harness.wait_quiet``); wall time, peak RSS and the printed table are recorded.

    python benchmarks/bench_classify_time.py               # both workloads, JSON into the cache
    python benchmarks/bench_classify_time.py --markdown    # the table from the cache
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from datasets import TEXT_DIR

WORKLOADS = ("classic", "corpus39k")
#: The shipped sample cells (300 x 64 counts, labelled): the smallest workload, asked for by name.
SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"


def corpus_h5ad(path: Path) -> Path:
    """The 8,000 x 39,184 synthetic corpus as .h5ad with its 4 top-level topics as labels."""
    if path.exists():
        return path
    import anndata
    import pandas as pd

    from hdtwd_cli.datasets import planted_corpus

    X, doc_topic, _ = planted_corpus(8000, 39184, branching=(4, 4, 4), mean_length=100.0, seed=0)
    obs = pd.DataFrame(
        {"label": pd.Categorical((doc_topic // 16).astype(str))}, index=[f"d{i}" for i in range(X.shape[0])]
    )
    a = anndata.AnnData(X=X, obs=obs)
    a.var_names = [f"w{j}" for j in range(X.shape[1])]
    path.parent.mkdir(parents=True, exist_ok=True)
    a.write_h5ad(path)
    return path


def run(name: str, work: Path, max_wait_s: float) -> dict:
    labels = "obs:label"
    if name == "classic":
        data = TEXT_DIR / "classic.h5ad"
    elif name == "sample-cells":
        data, labels = SAMPLE / "cells.h5ad", str(SAMPLE / "cells_labels.txt")
    else:
        data = corpus_h5ad(work / "corpus39k.h5ad")
    hdtwd = str(Path(sys.executable).with_name("hdtwd"))
    cmd = [hdtwd, "classify", str(data), "--labels", labels, "-q", "--json", str(work / f"{name}.report.json")]
    rec = harness.run_timed(cmd, work / f"{name}.log", max_tries=2, max_wait_s=max_wait_s)
    rec["report"] = json.loads((work / f"{name}.report.json").read_text())
    return rec


def markdown(recs: dict[str, dict]) -> str:
    lines = [
        "| workload | n x m | wall (whole process) | peak RSS | hdtwd | best baseline |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in recs.items():
        rep = r["report"]
        meth = rep["methods"]
        base = max((k for k in meth if k != "hdtwd"), key=lambda k: meth[k]["mean"])
        lines.append(
            f"| {name} | {rep['n_samples']:,} x {rep['n_features']:,} | {r['wall_s']:.0f} s | "
            f"{r['max_rss_MB'] / 1000:.2f} GB | {meth['hdtwd']['mean']:.1f} ± {meth['hdtwd']['std']:.1f} | "
            f"{base} {meth[base]['mean']:.1f} ± {meth[base]['std']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="also: sample-cells (sample_data's cells)")
    ap.add_argument("--max-wait", type=float, default=300.0, help="wait up to this long for an idle machine")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    work = harness.work_dir("classify-time")
    out = work / "results.json"
    recs = json.loads(out.read_text()) if out.exists() else {}
    if not args.markdown:
        for name in args.workloads.split(","):
            r = run(name, work, args.max_wait)
            r.pop("stderr", None)
            r["machine"] = harness.machine_facts()
            recs[name] = r
            out.write_text(json.dumps(recs, indent=1, default=str))
            print(f"{name}: {r['wall_s']:.0f} s, {r['max_rss_MB']:.0f} MB", file=sys.stderr, flush=True)
    print(markdown(recs))
    if recs:
        print(f"\nmachine: {next(iter(recs.values())).get('machine')}")


if __name__ == "__main__":
    main()
