"""Recall@14 of the approximate search (``--knn-method nndescent``) on every real set we have, against the
exact search on every row.

Denoised sets (counts and log-normalised cells, with the defaults) are searched on their principal
coordinates (``knn/_coordinates.py``): for them the run also sweeps the candidate factor (2.25, 3.25 and
the shipped 4.5 x k) and times each search against the exact one in the same process. Word counts
(no denoising) are searched on byte-coded tree vectors, as before. The cell-type pools and the RNA
mixture come from ``../shared`` (kept-back sets; skipped where absent).

    python benchmarks/recall_real.py [pbmc cbmc zeisel bbcsport classic rnamix cellmix4]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from atlas import recall
from datasets import load_set

import hdtwd_cli as hd
from hdtwd_cli.knn import _coordinates

SHARED_CELLS = Path(__file__).resolve().parents[2] / "shared" / "data" / "cells"
FACTORS = (2.25, 3.25, _coordinates.COORDINATE_CANDIDATE_FACTOR)


def _load(name: str):
    """``(X, feature names)`` of a set: :func:`datasets.load_set`, or the kept-back cell sets of ``../shared``."""
    if name in ("rnamix", "cellmix4"):
        import anndata
        import scipy.sparse as sp

        file = {"rnamix": "cellbench_rnamix_celseq2.h5ad", "cellmix4": "cellbench_cellmix4.h5ad"}[name]
        a = anndata.read_h5ad(SHARED_CELLS / file)
        return sp.csr_matrix(a.X), list(a.var_names)
    X, feats, _ = load_set(name)
    return X, feats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sets", nargs="*", help="real sets (default: all seven)")
    names = ap.parse_args().sets or ["pbmc", "cbmc", "zeisel", "rnamix", "cellmix4", "bbcsport", "classic"]
    out: dict = {"machine": harness.machine_line(), "commit": harness.git_commit(), "date": harness.utc_stamp()}
    path = harness.work_dir("recall-issue28") / "real_sets_coordinates.json"
    for name in names:
        if name in ("rnamix", "cellmix4") and not SHARED_CELLS.exists():
            continue
        X, feats = _load(name)
        dv = hd.distance_vectors(X, feature_names=feats)
        t = time.perf_counter()
        ex = dv.knn(15, "exact").indices[:, 1:]
        res: dict = {"n": int(X.shape[0]), "m": int(X.shape[1]), "dim": int(dv.base.dim), "exact_s": 0.0}
        res["exact_s"] = time.perf_counter() - t
        res["coordinates"] = _coordinates.has_coordinates(dv.base)
        factors = FACTORS if res["coordinates"] else (None,)
        for factor in factors:
            old = _coordinates.COORDINATE_CANDIDATE_FACTOR
            if factor is not None:
                _coordinates.COORDINATE_CANDIDATE_FACTOR = factor
            try:
                t = time.perf_counter()
                found = dv.knn(15, "nndescent", seed=0).indices[:, 1:]
                res[f"factor_{factor}"] = {"recall": recall(ex, found), "s": time.perf_counter() - t}
            finally:
                _coordinates.COORDINATE_CANDIDATE_FACTOR = old
        out[name] = res
        print(name, json.dumps(res), flush=True)
        path.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
