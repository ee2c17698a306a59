"""Joint hierarchies (Lin, Coifman, Mishne & Talmon, NeurIPS 2025): the evidence behind their defaults and the table.

Two steps, each resumable (one JSON file per measured cell under ``cache_dir()/bench-joint/``; delete
a file to measure it again):

``grid``
    The choice of ``JointParams``' defaults: for every (set, form) of ``--sets``, the kNN accuracy of
    the joint distances under classify's protocol (stratified 70/30 splits, seed 0, best k of 1..19;
    both trees learned on the training rows, the test rows placed on the final features' tree with
    its filter) for each variant ``share/gamma`` (share 1: Algorithm 1), beside hdtwd's defaults
    (round 0) on the same splits; rounds run and seconds.
``table``
    ``hdtwd classify`` with ``joint``, ``joint-alt``, ``hdtwd``, ``star`` and the baselines on every set.
``markdown``
    Both as tables (RESULTS.md).

Sets and forms as ``bench_forms.py`` (``load_form``) plus ``planted`` (a generated count matrix with
a planted features' hierarchy and classes)::

    python benchmarks/bench_joint.py grid --sets pbmc:lognorm,rnamix:counts --variants 1/0,0.9/0,0.5/0 --splits 3
    python benchmarks/bench_joint.py table --sets ... --splits 5
    python benchmarks/bench_joint.py markdown
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_forms import load_form
from datasets import cache_dir

import hdtwd_cli as hd
from hdtwd_cli import TreeParams
from hdtwd_cli.evaluate._protocol import DEFAULT_K
from hdtwd_cli.evaluate._splits import knn_accuracy, stratified_splits
from hdtwd_cli.joint._alternate import JointParams, alternate_hierarchies
from hdtwd_cli.tree._learn import learn_trees, prepare
from hdtwd_cli.twd._distance import query_distances
from hdtwd_cli.twd._histograms import align_to_tree

OUT = cache_dir() / "bench-joint"


def load(spec: str) -> tuple[Any, list[str], np.ndarray] | None:
    name, form = spec.split(":") if ":" in spec else (spec, "counts")
    if name == "planted":
        from datasets import PLANTED

        from hdtwd_cli.datasets import planted_counts

        X, y = planted_counts(**PLANTED)[:2]
        return sp.csr_matrix(X, dtype=np.float64), [f"g{j}" for j in range(X.shape[1])], np.asarray(y).astype(str)
    return load_form(name, form)


def _summary(acc: np.ndarray) -> dict[str, Any]:
    means = acc.mean(axis=0)
    b = int(np.argmax(means))
    return {"mean": float(means[b]), "best_k": DEFAULT_K[b], "per_split": [float(v) for v in acc[:, b]]}


def grid_cell(spec: str, variant: str, splits: int) -> dict[str, Any] | None:
    path = OUT / f"grid3-s{splits}" / spec.replace(":", "-") / f"{variant.replace('/', '_')}.json"
    if path.is_file():
        return json.loads(path.read_text())
    data = load(spec)
    if data is None:
        return None
    X, names, y = data
    X = sp.csr_matrix(X, dtype=np.float64)
    share, gamma = (float(v) for v in variant.split("/"))
    acc, base, rounds, conv, secs, base_secs = [], [], [], [], [], []
    per_round: dict[int, list] = {}
    changes: dict[int, list] = {}
    moved: dict[int, list] = {}
    params = TreeParams()
    for tr, te in stratified_splits(y, splits, 0.3, 0):
        t0 = time.perf_counter()
        prep = prepare(X[tr], names, params)
        T0 = learn_trees(X[tr], names, params, [params.scales], prepared=prep)[params.scales]
        base_secs.append(time.perf_counter() - t0)
        D0 = query_distances(T0, align_to_tree(X[tr], names, T0), align_to_tree(X[te], names, T0))
        base.append(knn_accuracy(D0, y[tr], y[te], DEFAULT_K))
        t0 = time.perf_counter()
        jp = JointParams(algorithm="alternating" if share >= 1 else "filtered", share=min(share, 1.0), gamma=gamma)
        J = alternate_hierarchies(
            X[tr], names, [f"s{i}" for i in tr], params, jp, prepared=prepare(X[tr], names, params), trace=True
        )
        T = J.features_tree
        D = query_distances(T, align_to_tree(X[tr], names, T), align_to_tree(X[te], names, T))
        secs.append(time.perf_counter() - t0)
        acc.append(knn_accuracy(D, y[tr], y[te], DEFAULT_K))
        for rd in J.rounds:  # each round's features' tree, filtered as the output would be
            Tr = rd.features_tree
            Dr = query_distances(Tr, align_to_tree(X[tr], names, Tr), align_to_tree(X[te], names, Tr))
            per_round.setdefault(rd.index, []).append(knn_accuracy(Dr, y[tr], y[te], DEFAULT_K))
            changes.setdefault(rd.index, []).append(rd.change)
            moved.setdefault(rd.index, []).append(rd.moved)
        rounds.append(len(J.rounds))
        conv.append(J.converged)
    rec = {
        "set": spec,
        "variant": variant,
        "shape": list(X.shape),
        "splits": splits,
        "joint": _summary(np.array(acc)),
        "defaults": _summary(np.array(base)),
        "rounds": rounds,
        "converged": conv,
        "seconds": secs,
        "defaults_seconds": base_secs,
        "per_round": {r: _summary(np.array(a))["mean"] for r, a in per_round.items() if len(a) == splits},
        "change": {r: float(np.mean(c)) for r, c in changes.items()},
        "moved": {r: float(np.mean(c)) for r, c in moved.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1))
    return rec


TABLE_METHODS = ["hdtwd", "star", "joint", "joint-alt", "pca", "cosine", "l1", "euclidean"]


def table_cell(spec: str, splits: int, only: list[str] | None = None) -> dict[str, Any] | None:
    """classify on ``spec`` with :data:`TABLE_METHODS` (and tf-idf on counts); ``only``: these methods, kept
    apart (``extra-table-s<splits>``) and joined to the row in the markdown (the same splits: seed 0)."""
    path = OUT / (f"extra-table-s{splits}" if only else f"table-s{splits}") / f"{spec.replace(':', '-')}.json"
    if path.is_file():
        return json.loads(path.read_text())
    data = load(spec)
    if data is None:
        return None
    X, names, y = data
    counts = spec.endswith("counts") or ":" not in spec
    methods = only or TABLE_METHODS + (["tfidf-l1", "tfidf-cosine"] if counts else [])
    t0 = time.perf_counter()
    r = hd.classify(X, y, names, methods=methods, splits=splits)
    rec = {"set": spec, "shape": list(X.shape), "splits": splits, "seconds": time.perf_counter() - t0}
    rec["methods"] = {
        k: {f: v.get(f) for f in ("mean", "std", "best_k", "per_split", "seconds", "params")}
        for k, v in r["methods"].items()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1, default=str))
    return rec


def ari_cell(spec: str) -> dict[str, Any] | None:
    """The samples' tree against the labels: ARI of its cut at the class count (all rows, labels unseen),
    beside Ward linkage on scanpy's PCA and Leiden on scanpy's graph (resolution 1 and the resolution
    whose cluster count is nearest the class count, from a fixed grid)."""
    path = OUT / "ari" / f"{spec.replace(':', '-')}.json"
    if path.is_file():
        return json.loads(path.read_text())
    data = load(spec)
    if data is None:
        return None
    import anndata
    import scanpy as sc
    from bench_leiden import _scipy_compat
    from scipy.cluster.hierarchy import fcluster, linkage
    from sklearn.metrics import adjusted_rand_score

    _scipy_compat()
    X, names, y = data
    k = int(np.unique(y).size)
    rec: dict[str, Any] = {"set": spec, "shape": list(X.shape), "classes": k}
    t0 = time.perf_counter()
    J = hd.learn_joint(X, names)
    rec["joint_seconds"] = time.perf_counter() - t0
    rec["joint"] = float(adjusted_rand_score(y, J.sample_clusters(k)))
    a = anndata.AnnData(X=sp.csr_matrix(X, dtype=np.float32))
    counts = spec.endswith("counts") or ":" not in spec
    if counts:
        sc.pp.normalize_total(a, target_sum=1e4)
        sc.pp.log1p(a)
    sc.pp.scale(a, max_value=10)
    sc.pp.pca(a, n_comps=min(50, min(a.shape) - 1), random_state=0)
    Z = linkage(a.obsm["X_pca"], method="ward")
    rec["ward_pca"] = float(adjusted_rand_score(y, fcluster(Z, k, criterion="maxclust")))
    sc.pp.neighbors(a, random_state=0)
    best = None
    for res in (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0):
        sc.tl.leiden(a, resolution=res, random_state=0, flavor="igraph", n_iterations=2, directed=False)
        got = a.obs["leiden"].to_numpy()
        score, count = float(adjusted_rand_score(y, got)), int(np.unique(got).size)
        if res == 1.0:
            rec["leiden_1"] = score
            rec["leiden_1_clusters"] = count
        if best is None or abs(count - k) < abs(best[1] - k):
            best = (score, count, res)
    assert best is not None
    rec["leiden_k"], rec["leiden_k_clusters"], rec["leiden_k_resolution"] = best
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1))
    return rec


def oracle_cell(spec: str, splits: int) -> dict[str, Any]:
    """How much a samples' tree can tell the features' tree: one round's features' tree built (as the joint
    rounds build it, Algorithm 1) from the TRUE classes' tree of the training rows (root -> one node per
    class -> its samples) and from the learned samples' tree, against the defaults' tree; kNN accuracy on
    the test rows (classify's splits)."""
    import dataclasses

    from hdtwd_cli import Tree
    from hdtwd_cli.joint._alternate import _histograms
    from hdtwd_cli.joint._informed import in_leaf_order, items_tree

    path = OUT / f"oracle-s{splits}" / f"{spec.replace(':', '-')}.json"
    if path.is_file():
        return json.loads(path.read_text())
    data = load(spec)
    assert data is not None
    X, names, y = data
    X = sp.csr_matrix(X, dtype=np.float64)
    params = TreeParams()
    acc: dict[str, list] = {}

    def score(T: Tree, tr: np.ndarray, te: np.ndarray) -> np.ndarray:
        return knn_accuracy(
            query_distances(T, align_to_tree(X[tr], names, T), align_to_tree(X[te], names, T)), y[tr], y[te], DEFAULT_K
        )

    for tr, te in stratified_splits(y, splits, 0.3, 0):
        prep = prepare(X[tr], names, params)
        T0 = learn_trees(X[tr], names, params, [params.scales], prepared=prep)[params.scales]
        acc.setdefault("defaults", []).append(score(T0, tr, te))
        cols = list(T0.leaf_names)
        H = _histograms(X[tr], names, T0)
        mass = H.sum(axis=0)
        placed = np.flatnonzero(mass > 0)
        G = np.ascontiguousarray((H[:, placed] / mass[placed]).T)
        pn = [cols[j] for j in placed]
        space = dataclasses.replace(
            prep.space, matrix=None, names=pn, unplaced=[cols[j] for j in np.flatnonzero(mass <= 0)]
        )
        finisher = dataclasses.replace(prep, space=space)
        classes = np.unique(y[tr])
        n, C = len(tr), len(classes)
        parent = np.empty(n + C + 1, dtype=np.int64)
        parent[:n] = n + np.searchsorted(classes, y[tr])
        parent[n : n + C] = n + C
        parent[-1] = -1
        snames = [f"s{i}" for i in range(n)]
        truth = Tree(parent=parent, length=np.r_[np.ones(n + C), 0.0], leaf_names=snames)
        learned, _ = items_tree(H[:, in_leaf_order(T0, cols)], snames, T0, params, 0.0)
        for what, Ts in (("classes' tree", truth), ("learned samples' tree", learned)):
            Tc, _ = items_tree(G[:, in_leaf_order(Ts, snames)], pn, Ts, params, 0.0)
            acc.setdefault(what, []).append(score(finisher.finish(Tc, params), tr, te))
    rec = {"set": spec, "splits": splits, **{k: _summary(np.array(v))["mean"] for k, v in acc.items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1))
    return rec


def scale_cell(n: int, m: int) -> dict[str, Any]:
    """``hdtwd distance --joint`` against the defaults' ``hdtwd distance`` on ``n`` UMI-like cells x ``m`` genes
    (``atlas.synth``): wall time and peak memory of each whole command (``/usr/bin/time -v``), in turns."""
    import subprocess
    import tempfile

    from atlas import synth

    path = OUT / "scale" / f"{n}x{m}.json"
    if path.is_file():
        return json.loads(path.read_text())
    data = synth(n, m)
    rec: dict[str, Any] = {"n": n, "m": m}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in (("defaults", []), ("joint", ["--joint", "--samples-tree", f"{tmp}/S.nwk"])):
            cmd = [
                "/usr/bin/time",
                "-v",
                sys.executable,
                "-m",
                "hdtwd_cli",
                "distance",
                str(data),
                "-o",
                f"{tmp}/D.npy",
            ]
            t0 = time.perf_counter()
            out = subprocess.run(cmd + extra + ["-v"], capture_output=True, text=True, check=True)
            rec[f"{name}_seconds"] = time.perf_counter() - t0
            peak = [ln for ln in out.stderr.splitlines() if "Maximum resident set size" in ln]
            rec[f"{name}_peak_gb"] = int(peak[0].split()[-1]) / 1e6 if peak else None
            rec[f"{name}_log"] = [ln for ln in out.stderr.splitlines() if "round" in ln][-8:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1))
    return rec


PAPER = {  # the follow-up's Table (their labels, per-set tuned parameters): HD-TWD / Algorithm 1 / Algorithm 2
    "bbcsport": "96.1 / 96.7 / 97.3",
    "classic": "96.9 / 97.3 / 97.6",
    "zeisel48:counts": "89.1 / 90.1 / 94.0 (47 classes)",
    "cbmc:counts": "84.3 / 86.7 / 93.3 (56 classes)",
}
BASELINES = ("pca", "cosine", "l1", "euclidean", "tfidf-l1", "tfidf-cosine")


def _mean(ms: dict[str, Any], k: str) -> str:
    return f"{ms[k]['mean']:.1f}" if k in ms and ms[k].get("mean") is not None else "-"


def markdown() -> str:
    lines = []
    for d in sorted(OUT.glob("table-s*")):
        lines += [
            f"Splits: {d.name[7:]}.",
            "",
            "| set (n x m) | joint | joint-alt | joint-transductive | defaults | star | PCA | best simple baseline | "
            "joint - defaults | joint - best baseline | joint - star | rounds (joint) | paper |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for f in sorted(d.glob("*.json")):
            r = json.loads(f.read_text())
            ms = r["methods"]
            extra = d.parent / f"extra-{d.name}" / f.name
            if extra.is_file():
                ms = {**ms, **json.loads(extra.read_text())["methods"]}
            base = max((k for k in BASELINES if k in ms), key=lambda k: ms[k]["mean"])
            j = ms["joint"]["mean"]
            rounds = (ms["joint"].get("params") or {}).get("rounds", [])
            lines.append(
                f"| {r['set']} ({r['shape'][0]:,} x {r['shape'][1]:,}) | {_mean(ms, 'joint')} | {_mean(ms, 'joint-alt')} | "
                f"{_mean(ms, 'joint-transductive')} | {_mean(ms, 'hdtwd')} | {_mean(ms, 'star')} | {_mean(ms, 'pca')} | "
                f"{base} {ms[base]['mean']:.1f} | {j - ms['hdtwd']['mean']:+.1f} | {j - ms[base]['mean']:+.1f} | "
                f"{j - ms['star']['mean']:+.1f} | {','.join(map(str, rounds))} | {PAPER.get(r['set'], '-')} |"
            )
        lines.append("")
    for f in sorted(OUT.glob("oracle-s*/*.json")):
        r = json.loads(f.read_text())
        truth, learned = r["classes' tree"], r["learned samples' tree"]
        lines.append(
            f"- oracle {r['set']} ({r['splits']} splits): defaults {r['defaults']:.1f}; one round's features' tree "
            f"from the classes' tree {truth:.1f}, from the learned samples' tree {learned:.1f}"
        )
    lines.append("")
    lines += [
        "| set | classes | samples' tree cut (joint) | Ward on scanpy's PCA | Leiden res. 1 (clusters) | "
        "Leiden nearest the class count (res., clusters) | joint s |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in sorted((OUT / "ari").glob("*.json")):
        r = json.loads(f.read_text())
        lines.append(
            f"| {r['set']} | {r['classes']} | {r['joint']:.3f} | {r['ward_pca']:.3f} | {r['leiden_1']:.3f} "
            f"({r['leiden_1_clusters']}) | {r['leiden_k']:.3f} ({r['leiden_k_resolution']}, {r['leiden_k_clusters']}) | "
            f"{r['joint_seconds']:.0f} |"
        )
    lines.append("")
    for d in sorted(OUT.glob("grid3-s*")):
        lines += [
            f"Grid ({d.name}): joint / defaults, per round, samples' distances moved, s per split (joint / defaults)",
            "",
        ]
        for f in sorted(d.glob("*/*.json")):
            r = json.loads(f.read_text())
            pr = ", ".join(f"{v:.1f}" for v in r.get("per_round", {}).values())
            mv = ", ".join(f"{v:.3f}" for v in r.get("moved", {}).values())
            lines.append(
                f"- {r['set']} {r['variant']}: {r['joint']['mean']:.1f} / {r['defaults']['mean']:.1f}; rounds {pr}; "
                f"moved {mv}; {np.mean(r['seconds']):.1f} / {np.mean(r['defaults_seconds']):.1f} s"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("grid", "table", "ari", "scale", "oracle", "markdown"))
    ap.add_argument("--size", default="10000x2000", help="scale: cells x genes")
    ap.add_argument("--methods", default=None, help="table: only these methods (kept apart, joined in markdown)")
    ap.add_argument("--sets", default="planted,pbmc:lognorm,rnamix:counts,cellmix4:counts")
    ap.add_argument("--variants", default="1/0,0.9/0,0.5/0,0.9/0.1")
    ap.add_argument("--splits", type=int, default=3)
    a = ap.parse_args()
    if a.step == "markdown":
        print(markdown())
        return
    if a.step == "scale":
        n, m = (int(v) for v in a.size.split("x"))
        print(scale_cell(n, m))
        return
    for spec in a.sets.split(","):
        if a.step == "grid":
            for v in a.variants.split(","):
                r = grid_cell(spec, v, a.splits)
                if r:
                    print(r.get("per_round"), r.get("change"), r.get("moved"))
                    print(
                        f"{spec} {v}: joint {r['joint']['mean']:.1f} defaults {r['defaults']['mean']:.1f} "
                        f"rounds {r['rounds']} {np.mean(r['seconds']):.1f} s/split",
                        flush=True,
                    )
        elif a.step == "oracle":
            print(oracle_cell(spec, a.splits), flush=True)
        elif a.step == "ari":
            print(ari_cell(spec), flush=True)
        else:
            r = table_cell(spec, a.splits, a.methods.split(",") if a.methods else None)
            if r:
                print(spec, {k: round(v["mean"], 1) for k, v in r["methods"].items()}, flush=True)


if __name__ == "__main__":
    main()
