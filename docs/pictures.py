"""The pictures of docs/plots.md and the README, from BBCSPORT (``sample_data/bbcsport.h5ad``).

Run ``python docs/pictures.py``.

Writes docs/bbcsport_tree.png, docs/bbcsport_heatmap.png and docs/bbcsport_report.png with the
library defaults (the tree and the distances of all 737 documents; the classify report of the
default methods plus the Quadtree and tree-sliced competitors, 5 splits).
"""

from __future__ import annotations

from pathlib import Path

import anndata
import numpy as np

import hdtwd_cli as hd
from hdtwd_cli import pl

HERE = Path(__file__).resolve().parent


def main() -> None:
    docs = anndata.read_h5ad(HERE.parent / "sample_data" / "bbcsport.h5ad")
    X, words, y = docs.X, list(docs.var_names), docs.obs["label"].astype(str).to_numpy()
    tree = hd.learn_tree(X, words)
    pl.save(pl.tree(tree, X, words, tips=40), str(HERE / "bbcsport_tree.png"), dpi=90)
    D = hd.distances(X, tree, feature_names=words)
    pl.save(
        pl.distance_heatmap(D, y, title="BBCSPORT: TWD between 737 articles"),
        str(HERE / "bbcsport_heatmap.png"),
        dpi=60,
    )
    report = hd.classify(X, y, words, methods=["hdtwd", "quadtree", "tswd-5", "cosine", "l1", "tfidf-l1"])
    pl.save(pl.classify_report(report), str(HERE / "bbcsport_report.png"), dpi=90)
    print({m: round(r["mean"], 1) for m, r in report["methods"].items()}, np.round(D.mean(), 4))


if __name__ == "__main__":
    main()
