"""Does the learned features' tree recover a planted hierarchy? Every learner on every planted family (RESULTS.md § 15).

Families (features x samples; the planted tree is known):

- ``random`` / ``balanced`` / ``deep``: Poisson counts from Brownian log-rates down a planted binary
  tree of that shape (:func:`hdtwd_cli.datasets.planted_hierarchy`), at bulk-like depth
  (20 counts per feature and sample: ``bulk``) or UMI-like depth (0.15: ``umi``, 85-95 % zeros);
- ``classes``: :func:`~hdtwd_cli.datasets.planted_counts` (4 class profiles plus a Brownian
  draw per sample on a random tree: the package's older planted set);
- ``corpus``: :func:`~hdtwd_cli.datasets.planted_corpus` (words under a topic tree 8 x 4 x 4,
  Zipf frequencies; the planted tree is the topic tree with the words as leaves of their topic);
- ``produce``: the paper's produce model (Sec. 5.1; 8 words, 100 documents as sample_data/produce.csv);
- ``toy``: the paper's App. E toy (a balanced tree of 15 nodes, every node a feature: each hangs
  as a leaf from its node in the planted tree).

Learners: hdtwd's defaults, ``--learner average``, ``--preset paper``; SciPy's average linkage on the
correlation distances of log1p values and Ward on log1p values (the one-line peers); classify's
competitor trees on hdtwd's features' space (``--competitors``). Measures
(:mod:`hdtwd_cli.evaluate._recovery`): rooted-triplet agreement (chance 1/3) and the Spearman
correlation of leaf-to-leaf path lengths.

Usage::

    python benchmarks/bench_recovery.py run [--families random,balanced,deep,classes,corpus,produce,toy]
        [--sizes 300,1000,3000] [--depths bulk,umi] [--seeds 1] [--competitors quadtree,mst,...]
    python benchmarks/bench_recovery.py run --families random --sizes 20000 --depths umi --peers ""   # landmarks
    python benchmarks/bench_recovery.py classify [--sizes 300,1000]    # kNN accuracy on the planted sets
    python benchmarks/bench_recovery.py cost [--sizes 4000,20000,40000]   # whole commands, each learner
    python benchmarks/bench_recovery.py joint [--sizes 200,400]   # the joint hierarchies' SAMPLES' tree
    python benchmarks/bench_recovery.py markdown

One JSON record per (family, size, depth, seed, learner) in ``~/.cache/hdtwd-bench/recovery/``: a
record present is not measured again (delete it to re-measure).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.cluster.hierarchy import linkage

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

import hdtwd_cli as hd
from hdtwd_cli.datasets import (
    PRODUCE_WORDS,
    gaussian_tree_samples,
    planted_corpus,
    planted_counts,
    planted_hierarchy,
    produce_documents,
)

DEPTHS = {"bulk": 20.0, "umi": 0.15}
LEARNERS = {"defaults": ("default", {}), "average": ("default", {"learner": "average"}), "paper": ("paper", {})}
PEERS = ("scipy-average", "scipy-ward")
OUT = harness.work_dir("recovery")


def planted_set(family: str, m: int, depth: str, seed: int) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
    """``(X, feature names, planted parent array, planted node names)`` of one family."""
    if family in ("random", "balanced", "deep"):
        X, _, parent = planted_hierarchy(min(2 * m, 4000), m, shape=family, counts_per_feature=DEPTHS[depth], seed=seed)
        names = [f"g{j}" for j in range(m)]
        return X, names, parent, names + [f"n{j}" for j in range(m - 1)]
    if family == "classes":
        X, _, parent = planted_counts(n_samples=2 * m, n_features=m, seed=seed)
        names = [f"g{j}" for j in range(m)]
        return X, names, parent, names + [f"n{j}" for j in range(m - 1)]
    if family == "corpus":
        X, _, leaf_topic = planted_corpus(n_docs=2 * m, n_words=m, branching=(8, 4, 4), mean_length=100.0, seed=seed)
        # root (last) -> 8 topics -> 4 -> 4 leaf topics (128) -> words
        n_leaf, n_mid, n_top = 128, 32, 8
        first = m
        leaf_node = first + np.arange(n_leaf)
        mid_node = first + n_leaf + np.arange(n_mid)
        top_node = first + n_leaf + n_mid + np.arange(n_top)
        root = first + n_leaf + n_mid + n_top
        parent = np.full(root + 1, -1, dtype=np.int64)
        parent[:m] = leaf_node[leaf_topic]
        parent[leaf_node] = mid_node[np.arange(n_leaf) // 4]
        parent[mid_node] = top_node[np.arange(n_mid) // 4]
        parent[top_node] = root
        names = [f"w{j}" for j in range(m)]
        return X.toarray(), names, parent, names + [f"t{j}" for j in range(root + 1 - m)]
    if family == "produce":
        X = produce_documents(100, seed)
        # fruits (0-2) | vegetables: root (3-4), leaf (5-7)
        parent = np.array([8, 8, 8, 9, 9, 10, 10, 10, 12, 11, 11, 12, -1])
        return X, list(PRODUCE_WORDS), parent, list(PRODUCE_WORDS) + ["fruits", "roots", "leaves", "veg", "root"]
    if family == "toy":
        X, heap = gaussian_tree_samples(1000, seed)
        k = heap.shape[0]  # every heap node v is a feature, a leaf hung from its node k + v
        parent = np.concatenate([k + np.arange(k), np.where(heap >= 0, k + heap, -1)])
        names = [f"v{i}" for i in range(k)]
        return X, names, parent, names + [f"node{i}" for i in range(k)]
    raise ValueError(f"unknown family {family!r}")


def scipy_tree(Z: np.ndarray, names: list[str]) -> hd.Tree:
    """SciPy's linkage ``Z`` as an :class:`hd.Tree`: merge ``i`` is node ``m + i`` (the root last), every node at
    half its merge distance (made non-decreasing: UPGMA's heights), each edge the difference of its ends'."""
    m = len(names)
    parent = np.full(2 * m - 1, -1, dtype=np.int64)
    parent[Z[:, 0].astype(np.int64)] = parent[Z[:, 1].astype(np.int64)] = np.arange(m, 2 * m - 1)
    height = np.zeros(2 * m - 1)
    height[m:] = np.maximum.accumulate(Z[:, 2] / 2.0)
    length = np.zeros(2 * m - 1)
    length[:-1] = height[parent[:-1]] - height[:-1]
    return hd.Tree(parent=parent, length=length, leaf_names=list(names), merge_height=height[m:].copy())


def _scipy_tree(X: np.ndarray, names: list[str], method: str):
    keep = X.sum(axis=0) > 0
    L = np.log1p(np.maximum(X[:, keep], 0))
    Z = linkage(L.T, method="average", metric="correlation") if method == "average" else linkage(L.T, method="ward")
    return scipy_tree(Z, [n for n, k in zip(names, keep) if k])


def measure(family: str, m: int, depth: str, seed: int, learner: str) -> dict:
    X, names, parent, pnames = planted_set(family, m, depth, seed)
    t0 = time.perf_counter()
    if learner in LEARNERS:
        preset, over = LEARNERS[learner]
        params, _ = harness.resolve_params(preset, **over)
        tree = hd.learn_tree(X, names, params=params, check_memory=False)
    elif learner in PEERS:
        tree = _scipy_tree(X, names, learner.split("-")[1])
    else:
        params, _ = harness.resolve_params("default", seed=seed)
        tree = hd.competitor_trees(X, names, method=learner, params=params)[0]
    wall = time.perf_counter() - t0
    r = hd.datasets.recovery(tree, parent, planted_names=pnames, seed=seed)
    return {
        "family": family,
        "features": int(X.shape[1]),
        "samples": int(X.shape[0]),
        "depth": depth if family in ("random", "balanced", "deep") else "-",
        "seed": seed,
        "learner": learner,
        "triplets": r.triplets,
        "spearman": r.spearman,
        "seconds": wall,
    }


def run(args: argparse.Namespace) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    peers = [c for c in args.peers.split(",") if c]
    learners = list(LEARNERS) + peers + [c for c in args.competitors.split(",") if c]
    for family in args.families.split(","):
        sizes = [int(s) for s in args.sizes.split(",")] if family not in ("produce", "toy") else [0]
        depths = args.depths.split(",") if family in ("random", "balanced", "deep") else ["-"]
        for m in sizes:
            for depth in depths:
                for seed in (int(s) for s in args.seeds.split(",")):
                    for learner in learners:
                        if learner == "paper" and m > 5000:
                            continue  # the paper's single linkage on the exact operator: m^2 K memory
                        key = OUT / f"{family}-{m}-{depth}-{seed}-{learner}.json"
                        if key.exists():
                            continue
                        rec = measure(family, m, depth, seed, learner)
                        key.write_text(json.dumps(rec))
                        print(json.dumps(rec), flush=True)


def markdown(args: argparse.Namespace) -> None:
    recs = [
        json.loads(p.read_text())
        for p in sorted(OUT.glob("*.json"))
        if not p.name.startswith(("classify-", "cost-", "joint-"))
    ]
    cols = [c for c in list(LEARNERS) + list(PEERS) if any(r["learner"] == c for r in recs)]
    cols += sorted({r["learner"] for r in recs} - set(cols))
    rows: dict[tuple, dict[str, list]] = {}
    for r in recs:
        rows.setdefault((r["family"], r["features"], r["samples"], r["depth"]), {}).setdefault(r["learner"], []).append(
            r
        )
    print("| family | features x samples | depth | " + " | ".join(cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    for (fam, m, n, depth), by in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][3])):
        cells = []
        for c in cols:
            rs = by.get(c, [])
            cells.append(
                "-"
                if not rs
                else f"{np.mean([r['triplets'] for r in rs]):.2f} / {np.mean([r['spearman'] for r in rs]):.2f}"
            )
        print(f"| {fam} | {m:,} x {n:,} | {depth} | " + " | ".join(cells) + " |")
    runs = [json.loads(p.read_text()) for p in sorted(OUT.glob("classify-*.json"))]
    if runs:
        print("\n| planted set | diffusion (defaults) | average | star | best baseline | new - star | new - best |")
        print("|---|---|---|---|---|---|---|")
    for r in runs:
        d, a = r["defaults"], r["average"]
        name, best = max(((k, v[0]) for k, v in d.items() if k not in ("hdtwd", "star")), key=lambda kv: kv[1])
        print(
            f"| {r['family']} {r['m']:,} x {2 * r['m']:,} {r['depth']} | {d['hdtwd'][0]:.1f} ± {d['hdtwd'][1]:.1f} | "
            f"{a['hdtwd'][0]:.1f} ± {a['hdtwd'][1]:.1f} | {d['star'][0]:.1f} | {name} {best:.1f} | "
            f"{a['hdtwd'][0] - d['star'][0]:+.1f} | {a['hdtwd'][0] - best:+.1f} |"
        )
    joints = [json.loads(p.read_text()) for p in sorted(OUT.glob("joint-*.json"))]
    if joints:
        print(
            "\n| planted samples | samples x features | depth | joint (diffusion) | joint (average) | SciPy average |"
        )
        print("|---|---|---|---|---|---|")
    for j in joints:
        cells = " | ".join(f"{j[k][0]:.2f} / {j[k][1]:.2f}" for k in ("diffusion", "average", "scipy-average"))
        print(f"| {j['shape']} | {j['samples']:,} x 1,000 | {j['depth']} | {cells} |")
    costs = [json.loads(p.read_text()) for p in sorted(OUT.glob("cost-*-*.json"))]
    if costs:
        print("\n| features | learner | wall s | peak MB | other load (cores) |")
        print("|---|---|---|---|---|")
    for c in sorted(costs, key=lambda c: (c["features"], c["learner"])):
        print(
            f"| {c['features']:,} | {c['learner']} | {c['wall_s']:.1f} | {c['max_rss_MB']:.0f} | "
            f"{c.get('background_cores', float('nan')):.2f} |"
        )


def classify(args: argparse.Namespace) -> None:
    """kNN accuracy (the paper's protocol) on planted sets: hdtwd's defaults, ``--learner average``, the
    star tree and the baselines on the same splits; the label is the top clade with the most mass."""

    OUT.mkdir(parents=True, exist_ok=True)
    for family in args.families.split(","):
        for m in (int(s) for s in args.sizes.split(",")):
            for depth in args.depths.split(","):
                key = OUT / f"classify-{family}-{m}-{depth}.json"
                if key.exists():
                    continue
                X, y, _ = planted_hierarchy(2 * m, m, shape=family, counts_per_feature=DEPTHS[depth], seed=2)
                names = [f"g{j}" for j in range(m)]
                out = {}
                for label, params in (("defaults", hd.TreeParams()), ("average", hd.TreeParams(learner="average"))):
                    rep = hd.classify(X, y.astype(str), feature_names=names, params=params)
                    out[label] = {k: [v["mean"], v["std"]] for k, v in rep["methods"].items() if "mean" in v}
                key.write_text(
                    json.dumps({"family": family, "m": m, "depth": depth, "classes": np.bincount(y).tolist(), **out})
                )
                print(key.read_text(), flush=True)


def cost(args: argparse.Namespace) -> None:
    """Time and peak memory of whole ``hdtwd distance`` commands (tree learned, 2,000 UMI-like samples) with
    each learner, alternating, at each feature count (GNU time; ``harness.run_timed_once``)."""
    import anndata
    import scipy.sparse as sp

    OUT.mkdir(parents=True, exist_ok=True)
    for m in (int(s) for s in args.sizes.split(",")):
        data = OUT / f"cost-{m}.h5ad"
        if not data.exists():
            X, _, _ = planted_hierarchy(2000, m, shape="random", counts_per_feature=0.15, seed=1)
            keep = X.sum(axis=0) > 0
            names = np.array([f"g{j}" for j in range(m)])[keep]
            anndata.AnnData(sp.csr_matrix(X[:, keep].astype(np.float32)), var={"gene": names}).write_h5ad(data)
        for learner in ("diffusion", "average"):
            key = OUT / f"cost-{m}-{learner}.json"
            if key.exists():
                continue
            cmd = [str(Path(sys.executable).with_name("hdtwd")), "distance", str(data), "--learner", learner]
            cmd += ["-o", str(OUT / f"cost-{m}-{learner}.npy"), "-q"]
            rec = harness.run_timed_once(cmd, OUT / f"cost-{m}-{learner}.log")
            rec.update({"features": m, "learner": learner})
            key.write_text(json.dumps(rec))
            print(json.dumps({k: rec[k] for k in ("features", "learner", "wall_s", "max_rss_MB")}), flush=True)


def joint(args: argparse.Namespace) -> None:
    """The joint hierarchies' samples' tree (``hd.learn_joint``, both learners) against planted SAMPLES: the rows
    are the leaves of a planted tree (``planted_hierarchy`` transposed: n samples x 1,000 features whose log-rates
    are Brownian down the samples' tree), beside SciPy's average linkage on the samples' log1p correlations."""

    OUT.mkdir(parents=True, exist_ok=True)
    for n in (int(s) for s in args.sizes.split(",")):
        for shape in args.families.split(","):
            for depth in args.depths.split(","):
                key = OUT / f"joint-{shape}-{n}-{depth}.json"
                if key.exists():
                    continue
                Xt, _, parent = planted_hierarchy(1000, n, shape=shape, counts_per_feature=DEPTHS[depth], seed=1)
                X = Xt.T.copy()  # n samples (the planted tree's leaves) x 1,000 features
                keep = X.sum(axis=1) > 0
                names = [f"s{i}" for i in range(n)]
                pnames = names + [f"n{i}" for i in range(n - 1)]
                X, kept = X[keep], [nm for nm, k in zip(names, keep) if k]
                rec = {"shape": shape, "samples": int(X.shape[0]), "depth": depth}
                for label, params in (("diffusion", hd.TreeParams()), ("average", hd.TreeParams(learner="average"))):
                    J = hd.learn_joint(X, sample_names=kept, params=params, with_distances=False)
                    t = J.samples_tree
                    r = hd.datasets.recovery(t, parent, planted_names=pnames)
                    rec[label] = [r.triplets, r.spearman]
                L = np.log1p(X)
                Z = linkage(L, method="average", metric="correlation")
                r = hd.datasets.recovery(scipy_tree(Z, kept), parent, planted_names=pnames)
                rec["scipy-average"] = [r.triplets, r.spearman]
                key.write_text(json.dumps(rec))
                print(json.dumps(rec), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("run", "markdown", "classify", "cost", "joint"))
    ap.add_argument("--families", default="random,balanced,deep,classes,corpus,produce,toy")
    ap.add_argument("--sizes", default="300,1000,3000")
    ap.add_argument("--depths", default="bulk,umi")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--competitors", default="quadtree,mst,cluster-tree,treerep")
    ap.add_argument(
        "--peers", default=",".join(PEERS), help="SciPy's linkages ('' skips them: hours at 20,000 features)"
    )
    args = ap.parse_args()
    {"run": run, "markdown": markdown, "classify": classify, "cost": cost, "joint": joint}[args.part](args)


if __name__ == "__main__":
    main()
