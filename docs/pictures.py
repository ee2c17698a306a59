"""The pictures of docs/plots.md and the README, from BBCSPORT (``../shared/data/text``): ``python docs/pictures.py``.

Writes docs/bbcsport_tree.png, docs/bbcsport_heatmap.png and docs/bbcsport_report.png with the
library defaults (the tree and the distances of all 737 documents; the classify report of the
default methods plus the Quadtree and tree-sliced competitors, 5 splits).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "benchmarks"))

import hdtwd_cli as hd  # noqa: E402
from hdtwd_cli import pl  # noqa: E402
from sets import load_set  # noqa: E402


def main() -> None:
    X, words, labels = load_set("bbcsport")
    y = labels["bbcsport"]
    tree = hd.learn_tree(X, words)
    pl.save(pl.tree(tree, X, words, tips=40),
            str(HERE / "bbcsport_tree.png"), dpi=90)
    D = hd.distances(X, tree, feature_names=words)
    pl.save(pl.distance_heatmap(D, y, title="BBCSPORT: TWD between 737 articles"), str(HERE / "bbcsport_heatmap.png"),
            dpi=60)
    report = hd.classify(X, y, words, methods=["hdtwd", "quadtree", "tswd-5", "cosine", "l1", "tfidf-l1"])
    pl.save(pl.classify_report(report), str(HERE / "bbcsport_report.png"), dpi=90)
    print({m: round(r["mean"], 1) for m, r in report["methods"].items()}, np.round(D.mean(), 4))


if __name__ == "__main__":
    main()
