"""Issue 25: which property of the distance moves Leiden's ARI, measured in one process.

For each set, one default tree learned on ALL cells (as ``hdtwd distance`` does), then kNN graphs
(15 neighbours, the cell itself included, scanpy's UMAP connectivities through
``hdtwd_cli.knn._graph.umap_connectivities``) of several exact tree-Wasserstein distances on that tree
and of two baselines, Leiden (resolution 1, igraph flavour, 2 iterations, seeds 0..4) and the ARI
against every label set, beside the kNN accuracy of the same distance (5 splits of
``stratified_splits``; the tree is shared by the splits here, so the accuracies are transductive
and differ slightly from the per-split trees of ``ablation_levers.py``). The PCA row goes
through the same graph code as the others and reproduces ``sc.pp.neighbors`` + Leiden
(bench_leiden.py) to the third decimal on pbmc68k.

Rows: the defaults; the leaf term lambda = 1, 4 (``--leaf-length``: adds lambda x mean depth x
L1); every edge length divided by its subtree's leaf count to the power 0.5 and 1 (fine
structure weighted up, gene modules down); ``--denoise 50`` (its own tree, learned from the
denoised cells); L1 between the histograms; PCA.

    python benchmarks/probes/leiden_levers.py --sets pbmc,cbmc,zeisel     # prints the markdown table
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: harness, datasets
import harness
from datasets import load_set

from hdtwd_cli.evaluate._protocol import DEFAULT_K, knn_accuracy, pca_representation, stratified_splits
from hdtwd_cli.knn._graph import umap_connectivities
from hdtwd_cli.tree._learn import learn_tree
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.twd._distance import (
    align_to_tree,
    subtree_masses,
    tree_embedding,
)
from hdtwd_cli.twd._kernels import l1_distances

K = 15
SEEDS = range(5)


def leiden_ari(D: np.ndarray, labels: dict[str, np.ndarray]) -> dict:
    """ARI (mean, std over seeds) per label set and the cluster counts of the kNN graph of ``D``."""
    import anndata
    import scanpy as sc
    from sklearn.metrics import adjusted_rand_score

    n = D.shape[0]
    D = D.copy()
    np.fill_diagonal(D, -1.0)  # the cell itself first, at distance 0 (scanpy's convention)
    idx = np.argpartition(D, K - 1, axis=1)[:, :K]
    dd = np.take_along_axis(D, idx, 1)
    o = np.lexsort((idx, dd), axis=1)
    idx, dd = np.take_along_axis(idx, o, 1), np.take_along_axis(dd, o, 1)
    dd[:, 0] = 0.0
    a = anndata.AnnData(X=np.zeros((n, 1)))
    a.obsp["connectivities"] = umap_connectivities(idx, dd)
    a.uns["neighbors"] = {"connectivities_key": "connectivities", "params": {"method": "umap"}}
    parts = []
    for seed in SEEDS:
        sc.tl.leiden(
            a, resolution=1.0, random_state=seed, flavor="igraph", n_iterations=2, directed=False, key_added="_l"
        )
        parts.append(a.obs["_l"].to_numpy().astype(str))
    out = {ls: [float(adjusted_rand_score(y, p)) for p in parts] for ls, y in labels.items()}
    out["clusters"] = [len(set(p)) for p in parts]
    return out


def knn_acc(D: np.ndarray, labels: dict[str, np.ndarray]) -> dict:
    splits = stratified_splits(next(iter(labels.values())), 5, 0.3, seed=0)
    out = {}
    for ls, y in labels.items():
        a = np.array([knn_accuracy(D[np.ix_(te, tr)], y[tr], y[te], DEFAULT_K) for tr, te in splits])
        m = a.mean(axis=0)
        out[ls] = float(m.max())
    return out


def run(name: str) -> dict:
    X, names, labels = load_set(name)
    tree = learn_tree(X, names, TreeParams())
    A = align_to_tree(X, names, tree)
    A = A.toarray() if sp.issparse(A) else np.asarray(A)
    H = A / A.sum(axis=1, keepdims=True)
    M = subtree_masses(tree, H)
    size = subtree_masses(tree, np.ones((1, tree.n_leaves)))[0]
    h = tree.metadata["mean_leaf_depth"]
    leaf = np.arange(tree.n_nodes) < tree.n_leaves

    def twd(length: np.ndarray) -> np.ndarray:
        keep = np.flatnonzero(length > 0)
        return l1_distances(np.ascontiguousarray(M[:, keep] * length[keep][None, :]))

    rows: dict[str, np.ndarray] = {}
    L0 = tree.length
    rows["defaults"] = twd(L0)
    rows["leaf term lambda = 1"] = twd(L0 + leaf * 1.0 * h)
    rows["leaf term lambda = 4"] = twd(L0 + leaf * 4.0 * h)
    rows["edge length / subtree leaves^0.5"] = twd(L0 * size**-0.5)
    rows["edge length / subtree leaves"] = twd(L0 * size**-1.0)
    td = learn_tree(X, names, TreeParams(denoise=50))
    Ad = align_to_tree(X, names, td)
    rows["--denoise 50"] = l1_distances(tree_embedding(td, Ad / Ad.sum(axis=1, keepdims=True)))
    rows["baseline: l1 (histograms)"] = l1_distances(H, None, np.dtype("float64"), None)
    Xd = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    Z, _ = pca_representation(Xd, Xd)
    sq = np.einsum("ij,ij->i", Z, Z)
    rows["baseline: pca (50 components, same graph code)"] = np.sqrt(
        np.maximum(sq[:, None] + sq[None, :] - 2 * Z @ Z.T, 0)
    )
    res = {}
    for row, D in rows.items():
        res[row] = {"leiden": leiden_ari(D, labels), "knn": knn_acc(D, labels)}
        print(f"{name} {row}: done", file=sys.stderr, flush=True)
    return {
        "set": name,
        "labels": list(labels),
        "rows": res,
        "machine": harness.machine_line(),
        "commit": harness.git_commit(),
    }


def markdown(reports: list[dict]) -> str:
    cols = [(r, ls) for r in reports for ls in r["labels"]]
    lines = [
        "| distance (default tree) | " + " | ".join(f"{ls}: ARI / clusters / kNN %" for _, ls in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for row in reports[0]["rows"]:
        cells = []
        for r, ls in cols:
            v = r["rows"][row]
            a = np.array(v["leiden"][ls])
            c = v["leiden"]["clusters"]
            cells.append(f"{a.mean():.3f} ± {a.std():.3f} / {min(c)}-{max(c)} / {v['knn'][ls]:.1f}")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    harness.per_set_main(run, markdown, "leiden-levers", "pbmc,cbmc,zeisel")
