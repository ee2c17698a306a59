"""Regenerate the small files in sample_data/ (deterministic): ``python sample_data/make_sample_data.py``.

- produce.csv   the paper's produce model: 100 documents x 8 words (header of words, document names)
- produce_labels.txt  one label per document: "fruit" when it mentions a fruit (the paper's task)
- cells.h5ad    300 cells x 64 genes of Poisson counts on a planted gene tree, obs['cell_type']
- cells_labels.txt  one label per cell (same as obs['cell_type'])
- corpus.npz    sparse documents x words (scipy.sparse.save_npz), 400 x 300
- corpus.mtx    the same corpus in Matrix Market format

Not generated here: bbcsport.h5ad, the BBC Sport corpus (Greene & Cunningham, 2006; 737 articles of
5 sports) as word counts (737 x 13,162, CSR float32), obs['label'] the sport; the preprocessing and
the source are in the file's ``uns['preprocessing']`` and ``uns['provenance']``. The documentation's
BBCSPORT tutorial and pictures read it, so that a clone builds its own documentation.
Provenance: a byte copy of the developers' BBCSPORT text set (``bbcsport.h5ad``, whose README
gives the preprocessing; not shipped with hdtwd), made from ``dataset/bbcsport.csv`` of the texthero repository
(github.com/jbesomi/texthero, commit 37d09f0299fe14329b4fae5002c3a1950e4f563e), itself the BBC Sport
corpus of Greene & Cunningham, "Practical solutions to the problem of diagonal dominance in kernel
document clustering", ICML 2006 (mlg.ucd.ie/datasets/bbc.html). The file holds word counts and
labels only, not the articles' text, whose copyright is the BBC's; neither that README nor the
file states a licence for the data (cite Greene & Cunningham, 2006 when using it).
"""

from __future__ import annotations

from pathlib import Path

import anndata
import numpy as np
import pandas as pd
import scipy.io
import scipy.sparse as sp

from hdtwd_cli.evaluate._synthetic import PRODUCE_WORDS, planted_counts, produce_documents

HERE = Path(__file__).resolve().parent


def main() -> None:
    X = produce_documents(100, seed=0).astype(int)
    with open(HERE / "produce.csv", "w") as fh:
        fh.write("document," + ",".join(PRODUCE_WORDS) + "\n")
        for i, row in enumerate(X):
            fh.write(f"doc{i:03d}," + ",".join(map(str, row)) + "\n")
    labels = ["fruit" if row[:3].sum() > 0 else "no-fruit" for row in X]
    (HERE / "produce_labels.txt").write_text("\n".join(labels) + "\n")

    C, labels, _ = planted_counts(300, 64, 4, seed=1)
    names = np.array(["T-cell", "B-cell", "monocyte", "NK"])[labels]
    ad = anndata.AnnData(
        X=C.astype(np.float32),
        obs=pd.DataFrame({"cell_type": pd.Categorical(names)}, index=[f"cell{i:03d}" for i in range(300)]),
        var=pd.DataFrame(index=[f"GENE{j:02d}" for j in range(64)]),
    )
    ad.write_h5ad(HERE / "cells.h5ad")
    (HERE / "cells_labels.txt").write_text("\n".join(names) + "\n")

    rng = np.random.default_rng(2)
    n_docs, n_words = 400, 300
    topics = rng.dirichlet(np.full(n_words, 0.05), size=5)
    zipf = 1.0 / np.arange(1, n_words + 1)
    rows = []
    for i in range(n_docs):
        p = 0.5 * topics[i % 5] + 0.5 * zipf / zipf.sum()
        rows.append(rng.multinomial(rng.integers(20, 80), p / p.sum()))
    M = sp.csr_matrix(np.array(rows, dtype=np.float64))
    sp.save_npz(HERE / "corpus.npz", M)
    scipy.io.mmwrite(str(HERE / "corpus.mtx"), M.astype(np.int64), field="integer")


if __name__ == "__main__":
    main()
