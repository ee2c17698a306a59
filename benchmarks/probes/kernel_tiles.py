"""The pairwise L1 kernel's tile shape on this CPU: time and bits on Zeisel's tree vectors.

The dense kernel (:mod:`hdtwd_cli.twd._kernels`) works on tiles of ``_TI`` rows of A x ``_TJ`` rows
of B; per tile it holds the packed pass of B (``TK x _TJ`` float64), the pass's sums and the
tile's totals (``_TI x _TJ`` float64 each): 768 KB at 256 x 128, more than a Zen 3 core's 512 KB
L2 and within a Zen 4 core's 1 MB. The shape never changes a value (the per-pair order of the sums
is fixed by ``TK`` alone), so it is a pure speed choice; this probe times shapes in one process each
(a fresh numba cache per shape, the module's constants set before compiling) and checks the bits.

    python benchmarks/probes/kernel_tiles.py                  # the shapes below, 3 runs each
    python benchmarks/probes/kernel_tiles.py --shapes 256x128,256x64

Needs the tree and counts of ``bench_unifrac.py prepare`` (``--workdir``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SHAPES = "256x128,256x64,128x128,128x64,256x32"

CHILD = r"""
import os, sys, time
import numpy as np
from hdtwd_cli._runtime.simd import prefer_wide_vectors
prefer_wide_vectors()  # as the hdtwd command compiles its kernels
from hdtwd_cli.io._output import read_tree_file
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd import _kernels as K
from hdtwd_cli.twd._distance import TreeVectors
K._TI, K._TJ = int(sys.argv[1]), int(sys.argv[2])
work, ref = sys.argv[3], sys.argv[4]
X = np.load(os.path.join(work, "zeisel.npy"))
Y = TreeVectors(Tree.from_record(read_tree_file(os.path.join(work, "zeisel.nwk"))), X).rows()
K.l1_distances(Y[:600])  # compiles
times = []
for _ in range(3):
    t = time.perf_counter()
    D = K.l1_distances(Y)
    times.append(time.perf_counter() - t)
if not os.path.exists(ref):
    np.save(ref, D)
n = Y.shape[0]
rate = n * (n - 1) / 2 * Y.shape[1] / min(times) / 1e9
same = np.array_equal(np.load(ref), D)
print(f"{K._TI} x {K._TJ}: best {min(times):.3f} s, median {sorted(times)[1]:.3f} s, {rate:.1f} G terms/s, same bits {same}")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=SHAPES, help="TIxTJ,... (the first is the reference for the bits)")
    ap.add_argument("--workdir", default="unifrac-issue42z4", help="bench_unifrac.py's folder under the cache")
    args = ap.parse_args()
    work = Path.home() / ".cache" / "hdtwd-bench" / args.workdir
    with tempfile.TemporaryDirectory() as tmp:
        ref = os.path.join(tmp, "reference.npy")
        for shape in args.shapes.split(","):
            ti, tj = shape.split("x")
            env = {**os.environ, "NUMBA_CACHE_DIR": tempfile.mkdtemp(dir=tmp)}  # compiled with these constants
            subprocess.run([sys.executable, "-c", CHILD, ti, tj, str(work), ref], env=env, check=True)


if __name__ == "__main__":
    main()
