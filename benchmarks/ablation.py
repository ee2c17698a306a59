"""Issue 4: ablation of hdtwd's choices, one thing at a time, on real and planted data.

Base configuration = the paper (spec sections 1-4): no transform, eps = c x median with c = 1,
K = 7, single linkage on the HD-LCA values, hyperbolic edge weights. Each row of the table changes
ONE thing. Accuracy = best-k mean kNN accuracy (k = 1..19 odd) over 3 random 70/30 splits
(stratified by the finest labels; Zeisel's 7- and 48-class sets share the splits and the trees),
trees learned on training rows only. Baselines (cosine, euclidean, l1) on the same histograms.

    python benchmarks/ablation.py --sets cbmc,zeisel,planted,produce   # writes JSON to the cache
    python benchmarks/ablation.py --markdown                            # table from the cache
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from datasets import cache_dir, load  # noqa: E402

from hdtwd_cli.diffusion import diffusion_operator  # noqa: E402
from hdtwd_cli.distance import normalize_rows, tree_wasserstein  # noqa: E402
from hdtwd_cli.evaluation import DEFAULT_K, baseline_distances, knn_accuracy, stratified_splits  # noqa: E402
from hdtwd_cli.hyperbolic import HyperbolicEmbedding, hyperbolic_embedding  # noqa: E402
from hdtwd_cli.pipeline import align_to_tree, apply_transform, drop_empty_features  # noqa: E402
from hdtwd_cli.synthetic import PRODUCE_WORDS, planted_counts, produce_documents  # noqa: E402
from hdtwd_cli.tree import Tree, hd_binary_tree, hd_lca_merge_order  # noqa: E402

BASE = {"transform": "none", "bandwidth": "median", "eps": 1.0, "K": 7, "linkage": "single", "weights": "hyperbolic"}
VARIATIONS = {
    "linkage": ["average", "complete", "weighted"],
    "eps": [0.01, 0.03, 0.1, 0.3, 3.0, 10.0],
    "K": [0, 3, 11, 15],
    "transform": ["log1p", "sqrt"],
    "bandwidth": ["knn"],
    "weights": ["merge-height"],
}


def configs(extra: list[dict] | None = None, one_at_a_time: bool = True) -> list[dict]:
    out = [dict(BASE)]
    for key, vals in (VARIATIONS.items() if one_at_a_time else ()):
        for v in vals:
            c = dict(BASE)
            c[key] = v
            out.append(c)
    for e in extra or []:
        c = dict(BASE)
        c.update(e)
        out.append(c)
    return out


def get_sets(name: str):
    """(X, names, {label_set_name: labels}) with the finest label set first."""
    if name == "zeisel":
        z7, z48 = load("zeisel7"), load("zeisel48")
        return z48.X, list(z48.feature_names), {"zeisel48": np.asarray(z48.labels).astype(str),
                                                 "zeisel7": np.asarray(z7.labels).astype(str)}
    if name == "cbmc":
        d = load("cbmc")
        return d.X, list(d.feature_names), {"cbmc": np.asarray(d.labels).astype(str)}
    if name == "planted":
        X, y, _ = planted_counts(1500, 400, 12, seed=0, depth=300.0, noise=1.5)
        return X, [f"g{j}" for j in range(X.shape[1])], {"planted": y.astype(str)}
    if name == "produce":
        X = produce_documents(300, seed=0)
        return X, list(PRODUCE_WORDS), {"produce": (X[:, :3].sum(1) > 0).astype(int).astype(str)}
    raise ValueError(name)


def scale_terms(emb: HyperbolicEmbedding) -> list[np.ndarray]:
    """Per-scale condensed 0.5*log(|dpsi|^2/4 + 2^(k-4)), so any K is a prefix mean."""
    m = emb.n_features
    iu = np.triu_indices(m, 1)
    out = []
    for k in range(emb.n_scales):
        P = emb.psi[k]
        s = np.einsum("ij,ij->i", P, P)
        d2 = (s[:, None] + s[None, :] - 2 * (P @ P.T))[iu]
        np.maximum(d2, 0, out=d2)
        out.append(0.5 * np.log(d2 / 4 + emb.heights[k] ** 2))
    return out


def build_tree(emb, terms, K, linkage, weights, names):
    log_a = np.mean(terms[: K + 1], axis=0)
    sub = HyperbolicEmbedding(emb.psi[: K + 1], emb.heights[: K + 1], emb.negative_mass[: K + 1])
    children, merge_log_a = hd_lca_merge_order(log_a, len(names), linkage)
    m = len(names)
    parent = np.full(2 * m - 1, -1)
    parent[children[:, 0]] = np.arange(m, 2 * m - 1)
    parent[children[:, 1]] = np.arange(m, 2 * m - 1)
    if weights == "hyperbolic":
        length = hd_binary_tree(sub, children)
    else:  # ultrametric: height difference of log a between a node and its parent
        h = np.r_[np.full(m, np.mean([np.log(sub.heights[k]) for k in range(K + 1)])), merge_log_a]
        h = np.maximum.accumulate(h[m:], axis=0) if False else h
        length = np.r_[np.maximum(h[parent[:-1]] - h[:-1], 0), 0.0]
    return Tree(parent=parent, length=length, leaf_names=names)


def run(name: str, n_splits: int = 3, extra: list[dict] | None = None, one_at_a_time: bool = True) -> dict:
    X0, names0, label_sets = get_sets(name)
    first = next(iter(label_sets.values()))
    splits = stratified_splits(first, n_splits, 0.3, seed=0)
    ks = list(DEFAULT_K)
    cfgs = configs(extra, one_at_a_time)
    acc = {ls: {json.dumps(c, sort_keys=True): [] for c in cfgs} for ls in label_sets}
    bnames = [f"{b}{suffix}" for suffix in ("", " (log1p)") for b in ("cosine", "euclidean", "l1")]
    base_acc = {ls: {b: [] for b in bnames} for ls in label_sets}
    timing = {}
    for s, (tr, te) in enumerate(splits):
        groups: dict[tuple, list[dict]] = {}
        for c in cfgs:
            groups.setdefault((c["transform"], c["bandwidth"], c["eps"]), []).append(c)
        for (transform, bandwidth, eps), cs in groups.items():
            t0 = time.time()
            X = apply_transform(X0, transform)
            Xtr, names, _ = drop_empty_features(X[tr], names0)
            op = diffusion_operator(Xtr, eps=eps, bandwidth=bandwidth)
            Kmax = max(c["K"] for c in cs)
            emb = hyperbolic_embedding(op, Kmax)
            terms = scale_terms(emb)
            for c in cs:
                tree = build_tree(emb, terms, c["K"], c["linkage"], c["weights"], names)
                A = align_to_tree(X[tr], names0, tree, drop_unknown=True)
                B = align_to_tree(X[te], names0, tree, drop_unknown=True)
                D = tree_wasserstein(tree, A, Xq=B)
                for ls, y in label_sets.items():
                    acc[ls][json.dumps(c, sort_keys=True)].append(knn_accuracy(D, y[tr], y[te], ks).tolist())
            timing[f"{transform},{bandwidth},{eps}"] = time.time() - t0
            print(f"{name} split {s} {transform} {bandwidth} c={eps}: {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
        for suffix, tf in (("", "none"), (" (log1p)", "log1p")):
            H = normalize_rows(apply_transform(X0, tf))
            for b in ("cosine", "euclidean", "l1"):
                D = baseline_distances(b, H[te], H[tr])
                for ls, y in label_sets.items():
                    base_acc[ls][b + suffix].append(knn_accuracy(D, y[tr], y[te], ks).tolist())
    return {"set": name, "shape": list(X0.shape), "splits": n_splits, "acc": acc, "baselines": base_acc,
            "timing": timing}


def best(runs: list) -> tuple[float, float]:
    a = np.array(runs)
    m = a.mean(axis=0)
    i = int(np.argmax(m))
    return float(m[i]), float(a[:, i].std(ddof=1)) if a.shape[0] > 1 else 0.0


def markdown(reports: list[dict]) -> str:
    label_sets = [ls for r in reports for ls in r["acc"]]
    cfg_keys = list(next(iter(reports[0]["acc"].values())).keys())
    head = "| change from the paper's configuration | " + " | ".join(label_sets) + " |"
    lines = [head, "|---|" + "---|" * len(label_sets)]
    for key in cfg_keys:
        c = json.loads(key)
        diff = [f"{k} = {v}" for k, v in c.items() if BASE.get(k) != v]
        label = ", ".join(diff) if diff else "**paper** (c = 1, K = 7, single, hyperbolic weights, no transform)"
        cells = []
        for r in reports:
            for ls in r["acc"]:
                if key in r["acc"][ls]:
                    m, s = best(r["acc"][ls][key])
                    cells.append(f"{m:.1f}")
                else:
                    cells.append("-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for b in next(iter(reports[0]["baselines"].values())):
        cells = [f"{best(r['baselines'][ls][b])[0]:.1f}" for r in reports for ls in r["baselines"]]
        lines.append(f"| baseline: {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="produce,planted,cbmc,zeisel")
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--extra", default="[]", help="JSON list of extra configurations (dicts of changes)")
    ap.add_argument("--tag", default="stage1")
    ap.add_argument("--only-extra", action="store_true", help="skip the one-at-a-time rows (stage 2)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    out = cache_dir() / "ablation"
    out.mkdir(parents=True, exist_ok=True)
    sets = args.sets.split(",")
    if not args.markdown:
        for name in sets:
            rep = run(name, args.splits, json.loads(args.extra), not args.only_extra)
            (out / f"{args.tag}-{name}.json").write_text(json.dumps(rep))
    reps = [json.loads((out / f"{args.tag}-{n}.json").read_text()) for n in sets if (out / f"{args.tag}-{n}.json").exists()]
    print(markdown(reps))


if __name__ == "__main__":
    main()
