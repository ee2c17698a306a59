"""Issue 25 ablation: one row per lever, each ONE change from TODAY's defaults, on every set.

Protocol (the splits of ``hdtwd classify``): 5 stratified 70/30 splits (``stratified_splits``,
seed 0); every tree, operator, gene selection and principal axis is learned from the TRAINING
rows of the split only; accuracy = best-k mean kNN accuracy (k = 1, 3, ..., 19) over the splits,
± the std over splits at that k. Every row is an exact tree-Wasserstein distance (a tree metric
on preprocessed histograms, or an average of several: L1 on concatenated tree vectors).

Rows
----
- ``defaults``: ``learn_tree`` with ``TreeParams()``.
- ``smoothing x P^t (t = 1)``: each histogram times the row-stochastic feature diffusion operator
  :math:`P = \\hat D^{-1}\\hat Q` of the training rows (the method's own operator; the exact path
  only: the landmark operator has no m x m P, so the text sets show ``-``), on the default tree.
- ``cut tree (subtrees of < 4 leaves collapsed)``: edges below nodes with fewer than 4 leaves
  set to 0 (the leaves moved up to the internal node that carries them).
- ``HVG 2,000 placed + rest at root``: the 2,000 (at most half the) most variable features of the training rows
  (normalised dispersion within 20 mean bins, scanpy's seurat flavour, on log1p(CP10k) for
  counts) placed by the diffusion, every other feature hung from the root (idf of all features).
- ``ensemble of 3 trees (70 % subsamples)``: mean TWD of trees learned on three random 70 %
  subsamples of the training rows.
- ``denoised histograms r = 20`` / ``r = 50``: the default tree, every sample's values replaced by
  their rank-r reconstruction (:mod:`hdtwd_cli.tree._denoise`, axes of the training rows).
- ``mean of defaults and denoised histograms r = 50``.
- ``--denoise 50``: ``TreeParams(denoise=50)``, the shipped lever: the tree is learned from the
  denoised training rows too.
- baselines: cosine, euclidean, l1, tf-idf (counts), PCA (50 components, log1p(CP10k) for counts).

Stability of the default tree: for the 5 split trees, the mean over the 10 pairs of the
normalised Robinson-Foulds distance (rooted clusters) and of the cophenetic correlation
(path metric on 300 random leaves), and the per-split accuracy beside each tree's mean
cophenetic correlation to the other four.

    python benchmarks/ablation_levers.py --sets pbmc,cbmc,zeisel,bbcsport,classic   # JSON into the cache
    python benchmarks/ablation_levers.py --markdown
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from datasets import load_set

from hdtwd_cli import TreeParams
from hdtwd_cli.evaluate._protocol import DEFAULT_K, baseline_distances
from hdtwd_cli.evaluate._splits import knn_accuracy, stratified_splits
from hdtwd_cli.tree._denoise import fit_denoiser, is_count_data, log_cp10k
from hdtwd_cli.tree._diffusion import DiffusionOperator
from hdtwd_cli.tree._features import idf_weights
from hdtwd_cli.tree._learn import feature_operator, feature_space, learn_tree
from hdtwd_cli.tree._tree import root_distances
from hdtwd_cli.twd._distance import query_distances, subtree_masses
from hdtwd_cli.twd._histograms import align_to_tree, normalize_rows

ROWS = (
    "defaults",
    "smoothing x P^t (t = 1)",
    "cut tree (subtrees of < 4 leaves collapsed)",
    "HVG 2,000 placed + rest at root",
    "ensemble of 3 trees (70 % subsamples)",
    "denoised histograms r = 20, default tree",
    "denoised histograms r = 50, default tree",
    "mean of defaults and denoised histograms r = 50",
    "--denoise 50 (tree learned from the denoised rows)",
)
BASELINES = ("cosine", "euclidean", "l1", "tfidf-l1", "tfidf-cosine", "pca")
N_HVG = 2000


def highly_variable(X: np.ndarray | sp.spmatrix, n_top: int) -> np.ndarray:
    """Indices of the ``n_top`` features of largest normalised dispersion (seurat flavour)."""
    L = log_cp10k(X) if is_count_data(X) else X
    E = L.expm1() if sp.issparse(L) else np.expm1(np.asarray(L, dtype=np.float64))
    mean = np.asarray(E.mean(axis=0)).ravel()
    sq = np.asarray(E.multiply(E).mean(axis=0)).ravel() if sp.issparse(E) else (E * E).mean(axis=0)
    var = np.maximum(sq - mean**2, 0) * E.shape[0] / max(E.shape[0] - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        disp = np.log(np.where(mean > 0, var / mean, np.nan))
        lm = np.log1p(mean)
    edges = np.linspace(np.nanmin(lm), np.nanmax(lm), 21)
    b = np.clip(np.digitize(lm, edges[1:-1]), 0, 19)
    z = np.full(mean.shape, -np.inf)
    for k in range(20):
        s = (b == k) & np.isfinite(disp)
        if s.sum() > 1 and np.nanstd(disp[s]) > 0:
            z[s] = (disp[s] - disp[s].mean()) / disp[s].std(ddof=1)
        elif s.any():
            z[s] = 0.0
    return np.sort(np.lexsort((np.arange(z.size), -z))[: min(n_top, z.size)])


def _zero_columns(X: np.ndarray | sp.spmatrix, keep: np.ndarray) -> np.ndarray | sp.csr_matrix:
    mask = np.zeros(X.shape[1])
    mask[keep] = 1.0
    return sp.csr_matrix(X.multiply(mask[None, :])) if sp.issparse(X) else np.asarray(X) * mask[None, :]


def _row_stochastic(op: DiffusionOperator) -> np.ndarray:
    r""":math:`P = \hat D^{-1/2} V \Lambda V^\top \hat D^{1/2}` (raw eigenvalues: the operator itself)."""
    d = op.sqrt_degree
    M = (op.eigenvectors * op.raw_eigenvalues) @ op.eigenvectors.T
    return np.maximum((M / d[:, None]) * d[None, :], 0.0)


def _smoothed(tree, X, names, space, P) -> np.ndarray:
    H = normalize_rows(align_to_tree(X, names, tree))
    H = H.toarray() if sp.issparse(H) else np.array(H)
    idx = {n: i for i, n in enumerate(tree.leaf_names)}
    cols = np.array([idx[n] for n in space.names])
    H[:, cols] = H[:, cols] @ P
    return H


def _twd(tree, names, Xtr, Xte) -> np.ndarray:
    return query_distances(tree, align_to_tree(Xtr, names, tree), align_to_tree(Xte, names, tree))


def _clusters(tree, order: dict[str, int], salt: np.ndarray) -> set[int]:
    """Rooted clusters (leaf sets of internal nodes) as 64-bit sums of random leaf keys."""
    h = np.zeros(tree.n_nodes, dtype=np.uint64)
    h[: tree.n_leaves] = salt[[order[n] for n in tree.leaf_names]]
    with np.errstate(over="ignore"):  # sums modulo 2^64 on purpose
        for c in range(tree.n_nodes - 1):
            h[tree.parent[c]] += h[c]
    return set(h[tree.n_leaves :].tolist())


def _cophenetic(tree, leaves: list[str]) -> np.ndarray:
    """Path distances between the named leaves (condensed), through their lowest common ancestor."""
    idx = {n: i for i, n in enumerate(tree.leaf_names)}
    rd = root_distances(tree)
    chains = []
    for n in leaves:
        v, chain = idx[n], []
        while v >= 0:
            chain.append(v)
            v = tree.parent[v]
        chains.append(chain)
    sets = [set(c) for c in chains]
    out = []
    for i in range(len(leaves)):
        for j in range(i + 1, len(leaves)):
            lca = next(v for v in chains[j] if v in sets[i])
            out.append(rd[chains[i][0]] + rd[chains[j][0]] - 2 * rd[lca])
    return np.array(out)


def stability(trees: list, names: list[str], seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    order = {n: i for i, n in enumerate(names)}
    salt = rng.integers(1, 2**63, size=len(names), dtype=np.uint64)
    common = sorted(set.intersection(*(set(t.leaf_names) for t in trees)))
    leaves = [common[i] for i in np.sort(rng.choice(len(common), size=min(300, len(common)), replace=False))]
    cl = [_clusters(t, order, salt) for t in trees]
    co = [_cophenetic(t, leaves) for t in trees]
    rf, cc = np.full((len(trees),) * 2, np.nan), np.full((len(trees),) * 2, np.nan)
    for a in range(len(trees)):
        for b in range(a + 1, len(trees)):
            rf[a, b] = rf[b, a] = len(cl[a] ^ cl[b]) / max(len(cl[a]) + len(cl[b]), 1)
            cc[a, b] = cc[b, a] = float(np.corrcoef(co[a], co[b])[0, 1])
    return {
        "rf": float(np.nanmean(rf)),
        "cophenetic": float(np.nanmean(cc)),
        "cophenetic_per_tree": np.nanmean(cc, axis=1).tolist(),
    }


def run(name: str, n_splits: int, rows: tuple[str, ...]) -> dict:
    X, names, labels = load_set(name)
    counts = is_count_data(X)
    first = next(iter(labels.values()))
    splits = stratified_splits(first, n_splits, 0.3, seed=0)
    acc: dict[str, dict[str, list]] = {ls: {} for ls in labels}
    trees, denoised_trees, seconds = [], [], {}

    def record(row: str, D: np.ndarray, tr: np.ndarray, te: np.ndarray) -> None:
        for ls, y in labels.items():
            acc[ls].setdefault(row, []).append(knn_accuracy(D, y[tr], y[te], DEFAULT_K).tolist())

    for s, (tr, te) in enumerate(splits):
        Xtr, Xte = X[tr], X[te]
        params = TreeParams()
        t0 = time.time()
        tree = learn_tree(Xtr, names, params)
        seconds["tree"] = seconds.get("tree", 0.0) + time.time() - t0
        trees.append(tree)
        D0 = _twd(tree, names, Xtr, Xte)
        record("defaults", D0, tr, te)
        if "smoothing x P^t (t = 1)" in rows:
            space = feature_space(Xtr, names, params)
            op = feature_operator(space.matrix, params)
            if isinstance(op, DiffusionOperator):
                P = _row_stochastic(op)
                record(
                    "smoothing x P^t (t = 1)",
                    query_distances(tree, _smoothed(tree, Xtr, names, space, P), _smoothed(tree, Xte, names, space, P)),
                    tr,
                    te,
                )
            del op
        if "cut tree (subtrees of < 4 leaves collapsed)" in rows:
            size = subtree_masses(tree, np.ones((1, tree.n_leaves)))[0]
            cut = dataclasses.replace(tree, length=np.where(size >= 4, tree.length, 0.0))
            record("cut tree (subtrees of < 4 leaves collapsed)", _twd(cut, names, Xtr, Xte), tr, te)
        if "HVG 2,000 placed + rest at root" in rows:
            hv = highly_variable(Xtr, min(N_HVG, X.shape[1] // 2))
            th = learn_tree(_zero_columns(Xtr, hv), names, params)
            w = dict(zip(names, idf_weights(Xtr).tolist()))
            th.feature_weights = np.array([w[n] for n in th.leaf_names])
            record("HVG 2,000 placed + rest at root", _twd(th, names, Xtr, Xte), tr, te)
        if "ensemble of 3 trees (70 % subsamples)" in rows:
            D = np.zeros_like(D0)
            for b in range(3):
                sub = np.sort(np.random.default_rng([s, b]).choice(tr.size, size=int(0.7 * tr.size), replace=False))
                tb = learn_tree(Xtr[sub], names, params)
                D += _twd(tb, names, Xtr, Xte) / 3
            record("ensemble of 3 trees (70 % subsamples)", D, tr, te)
        for r in (20, 50):
            row = f"denoised histograms r = {r}, default tree"
            if row in rows:
                bare = dataclasses.replace(tree, feature_weights=None)
                td = dataclasses.replace(tree, denoiser=fit_denoiser(align_to_tree(Xtr, names, bare), r))
                Dd = _twd(td, names, Xtr, Xte)
                record(row, Dd, tr, te)
                if r == 50 and "mean of defaults and denoised histograms r = 50" in rows:
                    record("mean of defaults and denoised histograms r = 50", (D0 + Dd) / 2, tr, te)
        if "--denoise 50 (tree learned from the denoised rows)" in rows:
            tdn = learn_tree(Xtr, names, TreeParams(denoise=50))
            denoised_trees.append(tdn)
            record("--denoise 50 (tree learned from the denoised rows)", _twd(tdn, names, Xtr, Xte), tr, te)
        for b in BASELINES:
            if b.startswith("tfidf") and not counts:
                continue
            record("baseline: " + b, baseline_distances(b, Xte, Xtr), tr, te)
        print(f"{name} split {s} done ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    st = stability(trees, names)
    st["accuracy_per_split"] = {ls: [float(np.max(a)) for a in acc[ls]["defaults"]] for ls in labels}
    rep = {
        "set": name,
        "shape": list(X.shape),
        "counts": counts,
        "splits": n_splits,
        "acc": acc,
        "stability": st,
        "seconds": seconds,
        "machine": harness.machine_line(),
        "commit": harness.git_commit(),
    }
    if denoised_trees:
        rep["stability_denoise50"] = stability(denoised_trees, names)
    return rep


def markdown(reports: list[dict]) -> str:
    lines = harness.accuracy_table(reports, "lever (one change from today's defaults)")
    lines += [
        "",
        "| set | default tree across the 5 splits: normalised RF | cophenetic correlation | "
        "per split: accuracy (best k) / the tree's mean cophenetic correlation to the others |",
        "|---|---|---|---|",
    ]
    for r in reports:
        st = r["stability"]
        per = "; ".join(
            f"{ls}: " + ", ".join(f"{a:.1f}/{c:.2f}" for a, c in zip(v, st["cophenetic_per_tree"]))
            for ls, v in st["accuracy_per_split"].items()
        )
        lines.append(f"| {r['set']} | {st['rf']:.2f} | {st['cophenetic']:.2f} | {per} |")
        if "stability_denoise50" in r:
            sd = r["stability_denoise50"]
            lines.append(f"| {r['set']}, `--denoise 50` trees | {sd['rf']:.2f} | {sd['cophenetic']:.2f} | |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="pbmc,cbmc,zeisel,bbcsport,classic")
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--rows", default="", help="';'-separated rows to run (default: all)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    out = harness.work_dir("ablation-issue25")
    sets = args.sets.split(",")
    if not args.markdown:
        rows = tuple(args.rows.split(";")) if args.rows else ROWS
        for name in sets:
            rep = run(name, args.splits, rows)
            cached = out / f"{name}.json"
            if args.rows and cached.exists():  # the rows not rerun stay as they were
                old = json.loads(cached.read_text())
                for ls in rep["acc"]:
                    old["acc"][ls].update({k: v for k, v in rep["acc"][ls].items() if k in rows})
                if "stability_denoise50" in rep:
                    old["stability_denoise50"] = rep["stability_denoise50"]
                rep = old
            cached.write_text(json.dumps(rep))
    reps = [json.loads((out / f"{n}.json").read_text()) for n in sets if (out / f"{n}.json").exists()]
    print(markdown(reps))


if __name__ == "__main__":
    main()
