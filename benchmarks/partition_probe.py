"""Issue 28: how many of a sample's exact neighbours share one of its partitions (the recall bound).

For each (overlap, rows per partition[, border ratio]) the fraction of the exact k neighbours of 1,000 sampled rows
that lie in at least one partition with the row: no search inside partitions can do better.

    python benchmarks/partition_probe.py --n 1000000
    python benchmarks/partition_probe.py --set cbmc --configs 2:/6:1.3:0.5,2:/6:1.3:0.65

A set's rows per partition may be written ``/q``: its samples divided by ``q``.
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
from atlas import EXACT_DIR, exact_rows, synth

import hdtwd_cli as hd
from hdtwd_cli.knn import _search as search


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=14)
    ap.add_argument("--configs", default="2:536000,2:125000,3:125000,4:125000,3:60000,4:60000,6:60000")
    ap.add_argument("--tag", default="")
    ap.add_argument("--set", default="", help="a real set (datasets.load_set) instead of the synthetic cells")
    args = ap.parse_args()
    k = args.k
    if args.set:
        from datasets import load_set

        X, feats, _ = load_set(args.set)
        tv = hd.distance_vectors(X, feature_names=feats).base
        n, name = tv.n, args.set
    else:
        n, name = args.n, str(args.n)
        X = sp.load_npz(synth(n)).tocsr()
        tv = hd.distance_vectors(X, hd.learn_tree(X)).base
    s_rows = min(1000, n)
    rows = np.sort(np.random.default_rng(1).choice(n, s_rows, replace=False))
    cache = EXACT_DIR / f"exact_{name}_{k}.npy"
    if cache.exists():
        exact = np.load(cache)
    else:
        exact = exact_rows(tv, rows, k)
        np.save(cache, exact)
    out = {"n": n, "k": k, "dim": tv.dim, "machine": harness.machine_line(), "commit": harness.git_commit()}
    for cfg in args.configs.split(","):
        parts = cfg.split(":")
        ov = int(parts[0])
        mr = n // int(parts[1][1:]) if parts[1].startswith("/") else int(parts[1])
        border = float(parts[2]) if len(parts) > 2 else float("inf")
        fill = float(parts[3]) if len(parts) > 3 else None  # mean cluster size / max rows (search.PARTITION_FILL)
        t = time.perf_counter()
        groups = search.partitions(
            tv, mr, 0, ov, border, fill, min_size=int(np.ceil(search.CANDIDATE_FACTOR * k)) + 1
        )  # as the search does
        s = time.perf_counter() - t
        member = [[] for _ in range(s_rows)]
        pos = {int(r): a for a, r in enumerate(rows)}
        for g_i, g in enumerate(groups):
            for r in np.intersect1d(g, rows):
                member[pos[int(r)]].append(g_i)
        sets = [np.concatenate([groups[g] for g in m]) if m else np.empty(0, np.int64) for m in member]
        cov = float(np.mean([np.isin(exact[a], sets[a]).mean() for a in range(s_rows)]))
        res = {
            "max_rows": mr,
            "coverage": cov,
            "parts": len(groups),
            "sizes": [int(min(map(len, groups))), int(max(map(len, groups)))],
            "placements_per_sample": sum(map(len, groups)) / n,
            "s": s,
        }
        out[cfg] = res
        print(cfg, res, flush=True)
        (EXACT_DIR / f"coverage_{name}{args.tag}.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
