"""Issue 11 ablation: which levers make the TWD beat the simple baselines, on every set.

Every row changes ONE thing (or the named combination) from the PREVIOUS library defaults (issue 4:
data-column feature space, no feature weights, no leaf term, no transform). Accuracy = best-k mean
kNN accuracy (k = 1, 3, ..., 19) over 3 random 70/30 splits (``stratified_splits``, seed 0, the
splits of ``hdtwd classify``), trees learned on the training rows only, all through the SHIPPED
functions: ``learn_tree`` for each tree, ``lengthen_leaves`` for the leaf term and the tree's own
``feature_weights`` for the idf rows (the idf weights change the histograms, never a data-space
tree: cosine distances between columns do not see column scales), ``query_distances`` (the kernel of ``classify``) and
``knn_accuracy`` for the score, ``baseline_distances`` for the baselines.

    python benchmarks/probes/ablation.py --sets bbcsport,classic,zeisel,cbmc,pbmc   # JSON into the cache
    python benchmarks/probes/ablation.py --sets ... --markdown                      # the table from the cache
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: harness, datasets
import harness
from datasets import load_set

from hdtwd_cli.evaluate._protocol import DEFAULT_K, baseline_distances, is_count_data, knn_accuracy, stratified_splits
from hdtwd_cli.tree._learn import auto_leaf_length, learn_tree
from hdtwd_cli.tree._params import apply_transform, resolve_params
from hdtwd_cli.tree._tree import lengthen_leaves
from hdtwd_cli.twd._distance import (
    align_to_tree,
    query_distances,
)

#: The previous library defaults (issue 4): the starting point of every row.
PREVIOUS = {
    "feature_space": "data",
    "weighting": "none",
    "leaf_length": 0.0,
    "transform": "none",
    "min_df": 1,
    "ensemble": 1,
}
#: Rows: (label, changes from PREVIOUS). ``transform`` "log1p" applies to count data only.
LEVERS: list[tuple[str, dict]] = [
    ("previous defaults (data space, no weights, no leaf term)", {}),
    ("idf feature weights", {"weighting": "idf"}),
    ("leaf term lambda = 0.25", {"leaf_length": 0.25}),
    ("leaf term lambda = 1", {"leaf_length": 1.0}),
    ("leaf term lambda = 4", {"leaf_length": 4.0}),
    ("svd feature space (r = 100)", {"feature_space": "svd"}),
    ("log1p transform (count data)", {"transform": "log1p"}),
    ("idf + lambda = 1", {"weighting": "idf", "leaf_length": 1.0}),
    ("idf + lambda = 4", {"weighting": "idf", "leaf_length": 4.0}),
    ("svd + idf", {"feature_space": "svd", "weighting": "idf"}),
    ("svd + idf + lambda = 0.25", {"feature_space": "svd", "weighting": "idf", "leaf_length": 0.25}),
    ("svd + idf + lambda = 1", {"feature_space": "svd", "weighting": "idf", "leaf_length": 1.0}),
    ("svd + idf + lambda = 4", {"feature_space": "svd", "weighting": "idf", "leaf_length": 4.0}),
    ("log1p + idf + lambda = 1", {"transform": "log1p", "weighting": "idf", "leaf_length": 1.0}),
    (
        "log1p + svd + idf + lambda = 1",
        {"transform": "log1p", "feature_space": "svd", "weighting": "idf", "leaf_length": 1.0},
    ),
    ("svd + idf + automatic lambda = (1 - e) / e", {"feature_space": "svd", "weighting": "idf", "leaf_length": "auto"}),
    (
        "svd + idf + automatic lambda + min_df = 2",
        {"feature_space": "svd", "weighting": "idf", "leaf_length": "auto", "min_df": 2},
    ),
    ("data + idf + automatic lambda", {"feature_space": "data", "weighting": "idf", "leaf_length": "auto"}),
    (
        "THE NEW DEFAULTS: auto space (svd for words, data for cells) + idf + automatic lambda",
        {"feature_space": "auto", "weighting": "idf", "leaf_length": "auto"},
    ),
    (
        "new defaults, mean of 3 trees (seeds 0, 1, 2: landmark draws and SVD)",
        {"feature_space": "auto", "weighting": "idf", "leaf_length": "auto", "ensemble": 3},
    ),
]
#: The rows run on the large corpus (each row costs a full TWD there).
FEW = (
    "previous defaults (data space, no weights, no leaf term)",
    "idf feature weights",
    "idf + lambda = 4",
    "svd + idf",
    "svd + idf + lambda = 1",
    "svd + idf + lambda = 4",
    "svd + idf + automatic lambda = (1 - e) / e",
    "svd + idf + automatic lambda + min_df = 2",
    "THE NEW DEFAULTS: auto space (svd for words, data for cells) + idf + automatic lambda",
)
BASELINE_ROWS = ("cosine", "euclidean", "l1", "tfidf-l1", "tfidf-cosine", "pca")


def _config(changes: dict, counts: bool) -> dict:
    c = dict(PREVIOUS, **changes)
    if not counts:
        c["transform"] = "none"  # log1p of values already on a log scale is not a lever
    return c


def run(name: str, n_splits: int = 3, levers: list[tuple[str, dict]] | None = None) -> dict:
    """Accuracies of every lever and baseline on ``name`` (one tree per split per tree-defining config)."""
    X, names, labels = load_set(name)
    levers = levers or LEVERS
    counts = is_count_data(X)
    first = next(iter(labels.values()))
    splits = stratified_splits(first, n_splits, 0.3, seed=0)
    acc: dict[str, dict[str, list]] = {ls: {} for ls in labels}
    timing: dict[str, float] = {}
    for s, (tr, te) in enumerate(splits):
        trees: dict[tuple, object] = {}
        for label, changes in levers:
            c = _config(changes, counts)
            Xt = apply_transform(X, c["transform"])
            D = np.zeros((len(te), len(tr)))
            for seed in range(c["ensemble"]):  # an average of TWDs = L1 on the concatenated tree vectors
                key = (c["feature_space"], c["transform"], c["min_df"], seed)
                if key not in trees:
                    t0 = time.time()
                    params, _ = resolve_params(
                        "default",
                        seed=seed,
                        feature_space=c["feature_space"],
                        weighting="idf",
                        leaf_length=0.0,
                        min_df=c["min_df"],
                    )
                    trees[key] = learn_tree(Xt[tr], names, params)
                    timing[f"tree {key}"] = timing.get(f"tree {key}", 0.0) + time.time() - t0
                    print(f"{name} split {s}: tree {key} in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
                tree = trees[key]
                if c["weighting"] == "none":
                    tree = replace(tree, feature_weights=None)
                # the rule's energy e is recorded by learn_tree (the latent share, 1 for data columns)
                lam = (
                    auto_leaf_length(tree.metadata["latent_energy"]) if c["leaf_length"] == "auto" else c["leaf_length"]
                )
                tree = lengthen_leaves(tree, lam * tree.metadata["mean_leaf_depth"])
                D += query_distances(tree, align_to_tree(Xt[tr], names, tree), align_to_tree(Xt[te], names, tree))
            D /= c["ensemble"]
            for ls, y in labels.items():
                acc[ls].setdefault(label, []).append(knn_accuracy(D, y[tr], y[te], DEFAULT_K).tolist())
        for b in BASELINE_ROWS:
            if (b.startswith("tfidf") and not counts) or (b == "pca" and X.shape[1] > 10000):
                continue
            D = baseline_distances(b, X[te], X[tr])
            for ls, y in labels.items():
                acc[ls].setdefault("baseline: " + b, []).append(knn_accuracy(D, y[tr], y[te], DEFAULT_K).tolist())
    return {
        "set": name,
        "shape": list(X.shape),
        "splits": n_splits,
        "acc": acc,
        "timing": timing,
        "levers": [lab for lab, _ in levers],
    }


def markdown(reports: list[dict]) -> str:
    return "\n".join(harness.accuracy_table(reports, "lever (change from the previous defaults)"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="bbcsport,zeisel,cbmc,pbmc,classic")
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--tag", default="issue11")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--few", default="classic", help="sets that run only the rows in FEW (costly TWDs)")
    ap.add_argument("--only", default="", help="';'-separated row labels to (re)run, merged into the cached JSON")
    args = ap.parse_args()
    out = harness.work_dir("ablation")
    sets = args.sets.split(",")
    if not args.markdown:
        for name in sets:
            rows = [lv for lv in LEVERS if lv[0] in FEW] if name in args.few.split(",") else LEVERS
            if args.only:
                rows = [lv for lv in rows if lv[0] in args.only.split(";")]
            rep = run(name, args.splits, rows)
            cached = out / f"{args.tag}-{name}.json"
            if args.only and cached.exists():  # merge: the rows not rerun stay as they were
                old = json.loads(cached.read_text())
                for ls in rep["acc"]:
                    old["acc"][ls].update(rep["acc"][ls])
                rep = old
            cached.write_text(json.dumps(rep))
    reps = [
        json.loads((out / f"{args.tag}-{n}.json").read_text()) for n in sets if (out / f"{args.tag}-{n}.json").exists()
    ]
    print(markdown(reps))


if __name__ == "__main__":
    main()
