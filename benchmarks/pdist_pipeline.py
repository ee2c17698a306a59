"""The ``hdtwd distance`` pipeline with SciPy's ``pdist`` as the final pairwise step.

Usage::

    python benchmarks/pdist_pipeline.py DATA.npy -o D.npy

Same method and the same library calls as ``hdtwd distance DATA.npy -o D.npy`` with default
parameters, through the public API (``hdtwd_cli.io.read_matrix``, ``hdtwd_cli.learn_tree``,
``hdtwd_cli.tree_vectors``); only the all-pairs L1 distance between the tree vectors is computed with
``scipy.spatial.distance.pdist(Y, "cityblock")`` + ``squareform`` instead of the library's
compiled kernel. The matrix is written with ``numpy.save``. Per-stage wall times go to stderr as
``pdist_pipeline: stage NAME SECONDS`` lines (machine-readable for ``bench_end_to_end.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from scipy.spatial.distance import pdist, squareform

import hdtwd_cli as hd
from hdtwd_cli.io import read_matrix


@contextmanager
def _stage(name: str, times: dict[str, float]) -> Iterator[None]:
    t0 = time.perf_counter()
    yield
    dt = time.perf_counter() - t0
    times[name] = dt
    print(f"pdist_pipeline: stage {name} {dt:.4f}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="samples x features matrix (.npy or any format hdtwd reads)")
    ap.add_argument("-o", "--output", required=True, help="distance matrix to write (.npy)")
    args = ap.parse_args(argv)

    times: dict[str, float] = {}
    t_all = time.perf_counter()
    with _stage("read", times):
        md = read_matrix(args.data)
    params = hd.TreeParams()  # what `hdtwd distance` uses by default
    print(f"pdist_pipeline: params {params}", file=sys.stderr, flush=True)
    with _stage("learn_tree", times):  # transform, feature space, diffusion, embedding, decode
        T = hd.learn_tree(md.X, md.feature_names, params=params)
    with _stage("align_normalize_embed", times):
        Y = hd.tree_vectors(T, md.X, md.feature_names)
    with _stage("pdist", times):
        d = pdist(Y, "cityblock")
    with _stage("squareform", times):
        D = squareform(d)
        del d
    with _stage("save", times):
        np.save(args.output, D, allow_pickle=False)
    total = time.perf_counter() - t_all
    print(f"pdist_pipeline: stage total {total:.4f}", file=sys.stderr, flush=True)
    print(
        f"pdist_pipeline: n={D.shape[0]} features={md.X.shape[1]} tree_nodes={T.n_nodes} embedding_dim={Y.shape[1]}",
        file=sys.stderr,
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
