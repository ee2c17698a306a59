"""Issue 28: where NN-descent loses recall, and what a neighbours-of-neighbours round gives back.

On the UMI-like synthetic cells of ``bench_scale.synth`` (planted hierarchy, 2,000 genes), the
approximate search of ``--knn-method nndescent`` (``search.approximate_neighbors``) is run
unpartitioned and with partitions forced (``search.SEARCH_BYTES`` lowered so that a partition holds
``--part`` of the samples, as 536,000 of 1,000,000 do at the default budget of uint16 vectors), each with and without
one :func:`search.refine` round; recall@k of 1,000 sampled rows against their exact neighbours
(brute force on the same tree vectors), and the time of each step.

    python benchmarks/recall_probe.py --n 100000 --part 0.54
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from bench_scale import recall, synth
from partition_probe import exact_rows

import hdtwd_cli as hd
from hdtwd_cli.knn import _search as search


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=14, help="neighbours other than the sample (--knn k+1)")
    ap.add_argument("--part", type=float, default=0.54, help="fraction of the samples per forced partition")
    ap.add_argument("--modes", default="whole,partitioned", help="whole (the default budget) and/or partitioned")
    ap.add_argument("--hops", default="4,14", help="refine variants: neighbours whose lists are added ('' none)")
    ap.add_argument(
        "--search-bytes",
        type=float,
        default=None,
        help="the 'whole' mode's search.SEARCH_BYTES (default: the library's, 4 GiB)",
    )
    args = ap.parse_args()
    n, k = args.n, args.k
    X = sp.load_npz(synth(n)).tocsr()
    t = time.perf_counter()
    tv = hd.distance_vectors(X, hd.learn_tree(X)).base
    out: dict = {
        "n": n,
        "k": k,
        "part": args.part,
        "search_bytes": args.search_bytes,
        "tree_s": time.perf_counter() - t,
        "machine": harness.machine_line(),
        "commit": harness.git_commit(),
    }
    rows = np.sort(np.random.default_rng(1).choice(n, 1000, replace=False))
    t = time.perf_counter()
    exact = exact_rows(tv, rows, k)
    out["exact_1000_rows_s"] = time.perf_counter() - t
    default_bytes = search.SEARCH_BYTES
    tag = "" if args.search_bytes is None else f"_sb{args.search_bytes:g}"
    path = harness.work_dir("recall-issue28") / f"probe_{n}_{args.part}{tag}.json"
    budgets = {"whole": int(args.search_bytes or default_bytes), "partitioned": int(args.part * n * tv.dim * 2)}
    for label in args.modes.split(","):
        search.SEARCH_BYTES = budgets[label]
        t = time.perf_counter()
        idx, _ = search.approximate_neighbors(tv, k, seed=0)
        res = {"recall": recall(exact, idx[rows]), "search_s": time.perf_counter() - t}
        for hops in [int(h) for h in args.hops.split(",") if h]:
            t = time.perf_counter()
            ridx, _ = search.refine(tv, idx, k, hops=hops)
            res[f"refine{hops}"] = {"recall": recall(exact, ridx[rows]), "s": time.perf_counter() - t}
        out[label] = res
        print(label, res, flush=True)
        path.write_text(json.dumps(out, indent=1))
    search.SEARCH_BYTES = default_bytes


if __name__ == "__main__":
    main()
