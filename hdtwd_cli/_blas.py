"""One BLAS thread for the LAPACK factorisations whose bits depend on BLAS's thread count.

OpenBLAS splits the reductions inside LAPACK's eigensolvers and QR / SVD (``syevd``'s ``symv`` /
``syr2k`` steps, for instance) by thread, so the same matrix gives eigenvectors that differ in the
last bits with 1 and with 2 threads (2,000 x 2,000: up to 2.4e-13), and those differences reach
the tree: 100,000 cells gave other tree vectors under ``OMP_NUM_THREADS=1`` (a Dask worker's
setting, or ``--threads 1``) than with two threads, and a million-cell kNN graph differed in 70
rows (issue 28). Every such factorisation runs inside :func:`serial_lapack`, so the tree is the
same bits at any thread count. Cost: ``syevd`` of 2,000 / 4,000 features takes 1.4 / 14.0 s on one
thread against 0.8 / 7.6 s on two (this machine); the products around it keep their threads
(OpenBLAS computes each entry of a ``gemm`` on one thread: the same bits).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["serial_lapack"]


@contextmanager
def serial_lapack() -> Iterator[None]:
    """BLAS limited to one thread inside the block (threadpoolctl), restored after it."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield
