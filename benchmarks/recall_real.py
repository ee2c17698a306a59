"""Recall@14 of ``--knn 15 --knn-method nndescent`` on every real set we have, against the exact search on
every row, through the public API (``DistanceVectors.knn``); RESULTS.md section 10.

    python benchmarks/recall_real.py [pbmc cbmc zeisel bbcsport classic]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from atlas import recall
from datasets import load_set

import hdtwd_cli as hd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sets", nargs="*", help="real sets (default: pbmc cbmc zeisel bbcsport classic)")
    names = ap.parse_args().sets or ["pbmc", "cbmc", "zeisel", "bbcsport", "classic"]
    out: dict = {"machine": harness.machine_line(), "commit": harness.git_commit(), "date": harness.utc_stamp()}
    path = harness.work_dir("recall-issue28") / "real_sets.json"
    for name in names:
        X, feats, _ = load_set(name)
        dv = hd.distance_vectors(X, feature_names=feats)
        t = time.perf_counter()
        ex = dv.knn(15, "exact").indices[:, 1:]
        res = {"n": int(X.shape[0]), "m": int(X.shape[1]), "exact_s": time.perf_counter() - t}
        t = time.perf_counter()
        ap = dv.knn(15, "nndescent", seed=0).indices[:, 1:]
        res["nndescent"] = {"recall": recall(ex, ap), "s": time.perf_counter() - t}
        out[name] = res
        print(name, json.dumps(res), flush=True)
        path.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
