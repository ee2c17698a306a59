"""One BLAS thread where the bits would otherwise depend on BLAS's thread count.

OpenBLAS splits some reductions by thread: LAPACK's eigensolvers and QR / SVD (``syevd``'s
``symv`` / ``syr2k`` steps, for instance) on every CPU kind, and on the Haswell (AVX2) kernels
products as well. The same matrix then gives eigenvectors that differ in the last bits with 1 and
with 2 threads (2,000 x 2,000: up to 2.4e-13), and those differences reach the tree: the tree
vectors, and so the kNN graph, would depend on ``OMP_NUM_THREADS`` (1 in a Dask worker, or with
``--threads 1``). So tree learning runs inside :func:`serial_blas`:
:func:`hdtwd_cli.tree._learn.learn_trees` and the stages that ``embed`` / ``decode-tree`` run on
their own (``feature_space``, ``embed``, ``decode_from_embedding``; under the AVX2 kernels,
embedding then decoding gave another tree than ``learn_tree`` while only the latter was serial),
and so does every LAPACK factorisation, for callers of the stages' own functions. The price is
LAPACK's speed-up from more threads, mostly in the eigendecomposition of many features
(benchmarks/RESULTS.md, "Whole commands with the defaults").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["serial_blas"]


@contextmanager
def serial_blas() -> Iterator[None]:
    """BLAS limited to one thread inside the block (threadpoolctl), restored after it.

    threadpoolctl limits the BLAS libraries loaded when the block is entered. SciPy ships its own
    OpenBLAS, loaded by the first ``import scipy.linalg``; were that import inside the block (the
    stages import it lazily), SciPy's products would run on every core the first time in a
    process and on one thread afterwards, and a tree's bits would depend on what the process had
    run before. So SciPy's BLAS is loaded first.
    """
    import scipy.linalg  # noqa: F401 - loads SciPy's own BLAS, so that the limit covers it
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield
