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

Products can have both: :func:`gram_upper` cuts a Gram matrix into tiles fixed by its size alone,
computes each tile with one single-threaded BLAS call and runs the tiles on numba's thread count.
A tile's bits depend only on its operands, so the product is the same at any thread count while
every core works.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

import numpy as np

_Item = TypeVar("_Item")

__all__ = ["block_pairs", "gram_upper", "mirror_upper", "on_every_core", "serial_blas", "symmetric_eigh"]

#: Rows of ``W`` per tile of :func:`gram_upper`. Fixed (never from the thread count), so the tiles,
#: and with them the bits, are a function of the matrix's size alone.
GRAM_TILE = 1024

#: Columns of the eigenvectors per back-transformation block of :func:`symmetric_eigh`; fixed, like
#: :data:`GRAM_TILE`.
EIGH_COLUMNS = 512


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


def gram_upper(W: np.ndarray, *, add_to: np.ndarray | None = None) -> np.ndarray:
    r"""The upper triangle of :math:`W W^\top` (``W``: ``m x n``, either layout), from fixed tiles on every core.

    With row blocks :math:`I, J` of :data:`GRAM_TILE` rows, tile :math:`(I, J)`, :math:`J \ge I`, is
    :math:`W_I W_J^\top`, one BLAS call on one thread (a symmetric rank-k update on the diagonal):
    each entry is one BLAS dot product, whatever thread computes its tile, so the result has the
    same bits at any thread count. Tiles run on ``numba.get_num_threads()`` threads (NumPy's
    products release the GIL) inside :func:`serial_blas`.

    Parameters
    ----------
    W : ndarray, shape (m, n), float32 or float64
    add_to : ndarray, shape (m, m), optional
        Add the tiles into this array's upper triangle (C order) instead of a new one.

    Returns
    -------
    ndarray, shape (m, m)
        Entries ``[i, j]``, ``j >= i``, filled (C order); the rest not meaningful.
    """
    m = W.shape[0]
    out = np.zeros((m, m), dtype=W.dtype) if add_to is None else add_to
    blocks = [slice(i, min(i + GRAM_TILE, m)) for i in range(0, m, GRAM_TILE)]
    tiles = [(I, J) for a, I in enumerate(blocks) for J in blocks[a:]]

    def tile(pair: tuple[slice, slice]) -> None:
        I, J = pair
        A = W[I]
        T = A @ A.T if I == J else A @ W[J].T  # A @ A.T: NumPy's symmetric rank-k update
        if add_to is None:
            out[I, J] = T
        else:
            out[I, J] += T

    with serial_blas():
        on_every_core(tile, tiles)
    return out


def block_pairs(m: int, block: int) -> Iterator[tuple[slice, slice]]:
    """Row and column blocks ``(I, J)`` of an ``m x m`` matrix with ``J`` on or right of the diagonal."""
    for i0 in range(0, m, block):
        for j0 in range(i0, m, block):
            yield slice(i0, min(i0 + block, m)), slice(j0, min(j0 + block, m))


def mirror_upper(A: np.ndarray, block: int = 256) -> np.ndarray:
    """Copy the upper triangle of ``A`` onto the lower one in place (exact: a selection, no arithmetic)."""
    for I, J in block_pairs(A.shape[0], block):
        if I == J:
            d = A[I, I]
            d[...] = np.where(np.triu(np.ones(d.shape, dtype=bool)), d, d.T)
        else:
            A[J, I] = A[I, J].T
    return A


def on_every_core(
    work: Callable[[_Item], None], blocks: Sequence[_Item], done: Callable[[_Item], None] | None = None
) -> None:
    """``work(block)`` for every block, on ``numba.get_num_threads()`` threads (one when one block).

    ``done(block)`` runs on the calling thread once ``work(block)`` has finished, in the blocks' order
    (a progress bar's steps); an error or an interrupt cancels the blocks not yet started and is raised.
    The blocks must write disjoint outputs: which thread runs a block, and when, is not fixed, so a
    block's bits may depend on its own operands only (the callers' BLAS calls are single-threaded,
    :func:`serial_blas`).
    """
    if len(blocks) == 1:
        work(blocks[0])
        if done is not None:
            done(blocks[0])
        return
    from concurrent.futures import ThreadPoolExecutor

    import numba

    with ThreadPoolExecutor(max_workers=max(1, numba.get_num_threads())) as pool:
        futures = [(b, pool.submit(work, b)) for b in blocks]
        try:
            for block, future in futures:
                future.result()
                if done is not None:
                    done(block)
        except BaseException:  # an error or Ctrl-C: the blocks not started are dropped, not run to the end
            for _, future in futures:
                future.cancel()
            raise


def symmetric_eigh(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Eigenvalues (ascending) and orthonormal eigenvectors of the symmetric ``A``, its storage reused.

    LAPACK's divide-and-conquer solver in three steps, the expensive last one on every core with the
    same bits at any thread count:

    1. ``dsytrd``: :math:`A = Q T Q^\top` with :math:`T` tridiagonal, :math:`Q` held as Householder
       reflectors in ``A``'s lower triangle (one thread);
    2. ``dstevd``: :math:`T = Z \Lambda Z^\top` by divide and conquer (one thread);
    3. :math:`V = Q Z`: the reflectors act on rows ``1..m-1`` (``dormtr``'s reduction to
       ``dormqr``), applied to fixed blocks of :data:`EIGH_COLUMNS` columns of :math:`Z`, each by
       one single-threaded ``dormqr`` call, the blocks on numba's thread count. A column's bits
       depend only on its block, and the blocks only on ``m``.

    The steps of ``scipy.linalg.eigh(driver="evd")`` (``dsyevd``), with the back-transformation
    (:math:`2m^3` flops, against :math:`\tfrac43 m^3` for the reduction) split by columns.

    Parameters
    ----------
    A : ndarray, shape (m, m), float64, Fortran order
        Symmetric; its lower triangle is read and then overwritten.

    Returns
    -------
    lam : ndarray, shape (m,)
    V : ndarray, shape (m, m), Fortran order
        ``A @ V[:, i] = lam[i] * V[:, i]``.
    """
    from scipy.linalg import lapack

    m = A.shape[0]
    if m == 1:
        return A[0].astype(np.float64), np.ones((1, 1), order="F")
    with serial_blas():
        lwork = int(lapack.dsytrd_lwork(m, lower=1)[0])
        c, d, e, tau, info = lapack.dsytrd(A, lower=1, lwork=max(lwork, 1), overwrite_a=1)
        if info == 0:
            lam, Z, info = lapack.dstevd(d, e, compute_v=1, overwrite_d=1, overwrite_e=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"the symmetric eigensolver did not converge (LAPACK info {info})")
        if m < 3:  # at most one reflector, acting on one row: Q = I
            return lam, np.asfortranarray(Z)
        R = np.asfortranarray(c[1:, : m - 1])  # the reflectors, in dormqr's layout
        del c
        tau = tau[: m - 1]

        def back(cols: slice) -> None:
            block = np.asfortranarray(Z[1:, cols])
            work = int(lapack.dormqr("L", "N", R, tau, block, -1)[1][0])
            out, _, status = lapack.dormqr("L", "N", R, tau, block, max(work, 1), overwrite_c=1)
            if status != 0:  # pragma: no cover - LAPACK checks only its arguments here
                raise np.linalg.LinAlgError(f"dormqr failed (LAPACK info {status})")
            Z[1:, cols] = out

        on_every_core(back, [slice(j, min(j + EIGH_COLUMNS, m)) for j in range(0, m, EIGH_COLUMNS)])
    return lam, Z
