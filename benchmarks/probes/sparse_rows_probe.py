"""Issue 5: is a sparse-row L1 kernel faster than the dense tiled kernel on document TWD vectors?

Documents touch few leaves, but every leaf also puts mass on all its ancestors, so the TWD
vectors ``y = w * R x`` are far less sparse than ``x``. This probe builds them for the first n
documents of the issue-5 corpus (5,000 x 24,000 Zipf words, random binary tree; see
bench_pairwise.py), and times the library's dense kernel against a compiled scatter/gather
sparse kernel (row i scattered into a dense buffer, row j scattered into a marker buffer, so
every term is an exact |a - b|, no cancellation), both multi-threaded, same run.

    python benchmarks/probes/sparse_rows_probe.py 1000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))  # benchmarks/: bench_pairwise
sys.path.insert(0, str(BENCH.parent))  # the repository: hdtwd_cli without an install

from bench_pairwise import make_corpus, random_tree

from hdtwd_cli.twd._distance import TreeVectors
from hdtwd_cli.twd._kernels import l1_distances


@njit(parallel=True, cache=True)
def sparse_l1(indptr, idx, val, ncols, out):  # pragma: no cover - compiled
    n = indptr.shape[0] - 1
    for i in prange(n):
        a = np.zeros(ncols)
        mark = np.zeros(ncols)
        for p in range(indptr[i], indptr[i + 1]):
            a[idx[p]] = val[p]
        for j in range(i + 1, n):
            s = 0.0
            for p in range(indptr[j], indptr[j + 1]):
                mark[idx[p]] = val[p]
            for p in range(indptr[i], indptr[i + 1]):
                k = idx[p]
                s += abs(a[k] - mark[k])
            for p in range(indptr[j], indptr[j + 1]):
                k = idx[p]
                if a[k] == 0.0:
                    s += val[p]
                mark[k] = 0.0
            out[i, j] = s
            out[j, i] = s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", type=int, nargs="?", default=1000, help="the first n documents of the corpus")
    n = ap.parse_args().n
    X = make_corpus()[:n]
    T = random_tree(24000)
    Y = TreeVectors(T, X, "float64").rows()
    Ysp = sp.csr_matrix(Y)
    print(
        f"{n} documents: TWD vectors {Y.shape[1]} of {T.n_nodes} nodes kept (zero weight or zero mass dropped); "
        f"density {Ysp.nnz / Y.size:.4f}, {Ysp.nnz / n:.0f} non-zeros per row (x: {X.nnz / n:.0f})"
    )
    out = np.zeros((n, n))
    sparse_l1(Ysp.indptr[:3], Ysp.indices, Ysp.data, Y.shape[1], np.zeros((2, 2)))
    l1_distances(Y[:20])
    for _ in range(3):
        t = time.perf_counter()
        D = l1_distances(Y)
        td = time.perf_counter() - t
        t = time.perf_counter()
        sparse_l1(Ysp.indptr, Ysp.indices, Ysp.data, Y.shape[1], out)
        ts = time.perf_counter() - t
        print(
            f"dense {td:.2f} s, sparse {ts:.2f} s, dense/sparse {td / ts:.2f}, "
            f"max rel diff {np.abs(D - out).max() / D.max():.1e}"
        )


if __name__ == "__main__":
    main()
