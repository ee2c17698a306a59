"""Joint hierarchies (Lin, Coifman, Mishne & Talmon, NeurIPS 2025): the evidence behind their defaults and the table.

Steps, each resumable (one JSON file per measured cell under ``cache_dir()/bench-joint/``; delete a file
to measure it again):

``table``
    ``hdtwd classify`` with ``joint``, ``joint-alt``, ``hdtwd``, ``star`` and the baselines on every set.
``ari``
    The samples' tree against the labels (ARI of its cut at the class count) beside scanpy's clusterings.
``scale``
    ``hdtwd distance --joint`` against the defaults on generated cells.
``markdown``
    The tables (RESULTS.md section 14).

The probes that chose ``JointParams``' defaults (``grid``: share and gamma against hdtwd's defaults on the
same splits) and asked how much a samples' tree can tell the features' tree (``oracle``) are answered in
section 14; read them with ``git show 7dc0ed9:benchmarks/bench_joint.py``.

Sets and forms as ``bench_forms.py`` (``load_form``) plus ``planted`` (a generated count matrix with
a planted features' hierarchy and classes)::

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

OUT = cache_dir() / "bench-joint"


def load(spec: str) -> tuple[Any, list[str], np.ndarray] | None:
    name, form = spec.split(":") if ":" in spec else (spec, "counts")
    if name == "planted":
        from datasets import PLANTED

        from hdtwd_cli.datasets import planted_counts

        X, y = planted_counts(**PLANTED)[:2]
        return sp.csr_matrix(X, dtype=np.float64), [f"g{j}" for j in range(X.shape[1])], np.asarray(y).astype(str)
    return load_form(name, form)


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
    return "\n".join(lines)


def main() -> None:
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("table", "ari", "scale", "markdown"))
    ap.add_argument("--size", default="10000x2000", help="scale: cells x genes")
    ap.add_argument("--methods", default=None, help="table: only these methods (kept apart, joined in markdown)")
    ap.add_argument("--sets", default="planted,pbmc:lognorm,rnamix:counts,cellmix4:counts")
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
        if a.step == "ari":
            print(ari_cell(spec), flush=True)
        else:
            r = table_cell(spec, a.splits, a.methods.split(",") if a.methods else None)
            if r:
                print(spec, {k: round(v["mean"], 1) for k, v in r["methods"].items()}, flush=True)


if __name__ == "__main__":
    main()
