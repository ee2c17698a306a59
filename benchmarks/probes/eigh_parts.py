"""The diffusion operator's eigendecomposition on this CPU, part by part, and a parallel reduction that keeps the bits.

``symmetric_eigh`` (``hdtwd_cli/_runtime/blas.py``) is LAPACK's ``syevd`` in three steps: the reduction to
tridiagonal form ``dsytrd`` (one thread), the tridiagonal solver ``dstevd`` (one thread) and the
back-transformation ``dormqr`` (fixed column blocks on every core). The first two run on one BLAS
thread because OpenBLAS's threaded ``dsymv`` sums per thread: their bits would depend on the
thread count. This probe measures, on Zeisel's operator ``S`` (4,000 x 4,000, captured from the
default pipeline), alternating the parts and taking medians of 3:

- LAPACK's ``dsytrd``, ``dstevd`` and the blocked back-transformation at 1 and 2 threads; one
  ``dgemm`` of the same size (the back-transformation's arithmetic at BLAS-3 speed); the float32
  Gram product of the HD-LCA stage (:func:`~hdtwd_cli._runtime.blas.gram_upper`, 16 per run at 8 scales)
  against OpenBLAS's own ``ssyrk``;
- a blocked Householder reduction (LAPACK's ``dsytrd`` / ``dlatrd`` algorithm) whose memory-bound
  symmetric matrix-vector products run on every core in column blocks fixed by the size alone,
  each block's partial sums added in a fixed order, and whose trailing updates are fixed tiles of
  one single-threaded BLAS call each: the same bits at 1 and 2 threads (checked here). Two
  variants of its column sums: ``reassoc`` (LLVM may reorder each column's dot product to
  vectorise it, so the bits depend on the vector width: the command and a notebook differ on an
  Intel AVX-512 CPU) and ``strict`` (each sum in index order, 8 columns at a time).

    python benchmarks/probes/eigh_parts.py               # needs bench_unifrac.py prepare's zeisel.npy

Findings (real Zen 4, 2026-12-01) are in benchmarks/RESULTS.md, "Speed against peers".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np
from numba import njit, prange
from scipy.linalg import lapack
from threadpoolctl import threadpool_limits

PANEL = 32  # reflectors per panel (LAPACK's dsytrd block size)
TILE = 256  # rows of a trailing-update tile


def capture_operator(work: Path) -> np.ndarray:
    """Zeisel's symmetric operator S as the default pipeline hands it to ``symmetric_eigh`` (cached)."""
    out = work / "zeisel_S.npy"
    if not out.exists():
        import hdtwd_cli as hd
        import hdtwd_cli.tree._diffusion as dif

        original = dif.symmetric_eigh

        def keep(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            np.save(out, np.asfortranarray(A))
            return original(A)

        dif.symmetric_eigh = keep
        hd.learn_tree(np.load(work / "zeisel.npy"))
        dif.symmetric_eigh = original
    return np.asfortranarray(np.load(out))


def _symv_kernels(fastmath: bool | set[str], fused: bool):
    """``symv(AT, off, x, starts, partial, y)``: ``y = A[off:, off:] x`` from the lower triangle (``AT = A.T``).

    Eight columns at a time: their dot products with ``x`` and their contributions to ``y``. With
    ``reassoc`` both in one loop (LLVM vectorises the dot products by reordering them); in index
    order (``strict``) the dot products stay scalar, so the contributions get a loop of their own.
    """

    @njit(fastmath=fastmath, boundscheck=False)
    def dots8(r0, r1, r2, r3, r4, r5, r6, r7, x, p, xs):
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
        x0, x1, x2, x3, x4, x5, x6, x7 = xs[0], xs[1], xs[2], xs[3], xs[4], xs[5], xs[6], xs[7]
        if fused:
            for i in range(r0.size):
                a0, a1, a2, a3, a4, a5, a6, a7, xi = r0[i], r1[i], r2[i], r3[i], r4[i], r5[i], r6[i], r7[i], x[i]
                s0 += a0 * xi
                s1 += a1 * xi
                s2 += a2 * xi
                s3 += a3 * xi
                s4 += a4 * xi
                s5 += a5 * xi
                s6 += a6 * xi
                s7 += a7 * xi
                p[i] += ((a0 * x0 + a1 * x1) + (a2 * x2 + a3 * x3)) + ((a4 * x4 + a5 * x5) + (a6 * x6 + a7 * x7))
            return np.array([s0, s1, s2, s3, s4, s5, s6, s7])
        for i in range(r0.size):
            xi = x[i]
            s0 += r0[i] * xi
            s1 += r1[i] * xi
            s2 += r2[i] * xi
            s3 += r3[i] * xi
            s4 += r4[i] * xi
            s5 += r5[i] * xi
            s6 += r6[i] * xi
            s7 += r7[i] * xi
        for i in range(r0.size):  # the column contributions, in a fixed order per row
            p[i] += ((r0[i] * x0 + r1[i] * x1) + (r2[i] * x2 + r3[i] * x3)) + (
                (r4[i] * x4 + r5[i] * x5) + (r6[i] * x6 + r7[i] * x7)
            )
        return np.array([s0, s1, s2, s3, s4, s5, s6, s7])

    @njit(fastmath=fastmath, boundscheck=False)
    def one(col, x, p, xj):
        s = 0.0
        for i in range(col.size):
            s += col[i] * x[i]
            p[i] += col[i] * xj
        return s

    @njit(parallel=True, boundscheck=False)
    def symv(AT, off, x, starts, partial, y):
        n = x.shape[0]
        nb = starts.shape[0] - 1
        for b in prange(nb):
            c0, c1 = starts[b], starts[b + 1]
            p = partial[b]
            p[c0:n] = 0.0
            j = c0
            while j + 8 <= c1:
                for a in range(8):  # the 8 x 8 diagonal block, lower part
                    for q in range(a + 1):
                        v = AT[off + j + q, off + j + a]
                        if a == q:
                            p[j + a] += v * x[j + a]
                        else:
                            p[j + a] += v * x[j + q]
                            p[j + q] += v * x[j + a]
                lo, hi = off + j + 8, off + n
                s = dots8(
                    AT[off + j, lo:hi], AT[off + j + 1, lo:hi], AT[off + j + 2, lo:hi], AT[off + j + 3, lo:hi],
                    AT[off + j + 4, lo:hi], AT[off + j + 5, lo:hi], AT[off + j + 6, lo:hi], AT[off + j + 7, lo:hi],
                    x[j + 8 :], p[j + 8 :], x[j : j + 8],
                )  # fmt: skip
                for a in range(8):
                    p[j + a] += s[a]
                j += 8
            while j < c1:
                s1 = one(AT[off + j, off + j + 1 : off + n], x[j + 1 :], p[j + 1 :], x[j])
                p[j] += AT[off + j, off + j] * x[j] + s1
                j += 1
        for i in range(n):  # the blocks' partial sums, in block order
            t = 0.0
            for b in range(nb):
                if starts[b] <= i:
                    t += partial[b, i]
            y[i] = t

    return symv


SYMV = {"reassoc": _symv_kernels({"reassoc"}, True), "strict": _symv_kernels(False, False)}


@njit
def block_starts(size):
    """Column blocks of a ``size`` x ``size`` lower triangle with about equal areas: a function of ``size`` only."""
    nb = min(max(size // 128, 1), 16)
    s = np.empty(nb + 1, np.int64)
    s[0], s[nb] = 0, size
    for b in range(1, nb):
        c = int(size * (1.0 - np.sqrt(1.0 - b / nb)))
        s[b] = min(max((c // 8) * 8, s[b - 1]), size)
    return s


@njit(boundscheck=False)
def _dot(a, b):
    s = 0.0
    for i in range(a.size):
        s += a[i] * b[i]
    return s


@njit(boundscheck=False)
def column_step(A, V, W, j, i):
    """Column ``j`` updated by the panel's first ``i`` reflectors; its Householder reflector (``dlarfg``). Returns (beta, tau)."""
    n = A.shape[0]
    col = A[:, j]
    for q in range(i):
        wj, vj = W[j, q], V[j, q]
        vq, wq = V[:, q], W[:, q]
        for r in range(j, n):
            col[r] -= vq[r] * wj + wq[r] * vj
    if j >= n - 1:
        return 0.0, 0.0
    alpha = col[j + 1]
    x = col[j + 2 :]
    xn2 = _dot(x, x)
    if xn2 == 0.0:
        return alpha, 0.0
    beta = -np.copysign(np.sqrt(alpha * alpha + xn2), alpha)
    tau = (beta - alpha) / beta
    scale = 1.0 / (alpha - beta)
    for r in range(x.size):
        x[r] *= scale
    col[j + 1] = 1.0
    return beta, tau


@njit(boundscheck=False)
def finish_w(A, V, W, w, j, i, tau, tmp):
    """``w = tau (A v - V W^T v - W V^T v)``, then ``w -= (tau/2)(w^T v) v`` (``dlatrd``); store ``v`` and ``w``."""
    v = A[j + 1 :, j]
    for q in range(i):
        tmp[q] = _dot(W[j + 1 :, q], v)
        tmp[i + q] = _dot(V[j + 1 :, q], v)
    for q in range(i):
        t1, t2 = tmp[q], tmp[i + q]
        vq, wq = V[j + 1 :, q], W[j + 1 :, q]
        for r in range(w.size):
            w[r] -= vq[r] * t1 + wq[r] * t2
    for r in range(w.size):
        w[r] *= tau
    alpha = -0.5 * tau * _dot(w, v)
    for r in range(w.size):
        w[r] += alpha * v[r]
        W[j + 1 + r, i] = w[r]
        V[j + 1 + r, i] = v[r]


@njit(parallel=True)
def trailing_update(A, VW, WV, k, tile):
    """``A[k:, k:] -= VW WV^T`` on the tiles on or below the diagonal (``VW = [V W]``, ``WV = [W V]``)."""
    m = A.shape[0] - k
    nt = (m + tile - 1) // tile
    for t in prange(nt * (nt + 1) // 2):
        a = 0
        while (a + 1) * (a + 2) // 2 <= t:
            a += 1
        b = t - a * (a + 1) // 2
        i0, i1 = a * tile, min(a * tile + tile, m)
        j0, j1 = b * tile, min(b * tile + tile, m)
        P = np.dot(WV[j0:j1], VW[i0:i1].T)  # one BLAS call per tile
        for c in range(j1 - j0):
            col = A[k + i0 : k + i1, k + j0 + c]
            for r in range(i1 - i0):
                col[r] -= P[c, r]


def tridiagonalize(A: np.ndarray, variant: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A = Q T Q^T`` in place (Fortran order, lower triangle): ``d``, ``e``, ``tau``; reflectors below the subdiagonal."""
    symv = SYMV[variant]
    n = A.shape[0]
    d, e, taus = np.empty(n), np.empty(n - 1), np.zeros(n - 1)
    V, W = np.zeros((n, PANEL), order="F"), np.zeros((n, PANEL), order="F")
    tmp, wbuf, pbuf = np.empty(2 * PANEL), np.empty(n), np.zeros(16 * n)
    with threadpool_limits(1, "blas"):
        for k0 in range(0, n, PANEL):
            nb = min(PANEL, n - k0)
            V[:], W[:] = 0.0, 0.0
            for i in range(nb):
                j = k0 + i
                beta, tau = column_step(A, V, W, j, i)
                d[j] = A[j, j]
                if j < n - 1:
                    e[j], taus[j] = beta, tau
                    size = n - j - 1
                    st = block_starts(size)
                    part = pbuf[: (len(st) - 1) * size].reshape(len(st) - 1, size)
                    symv(A.T, j + 1, A[j + 1 :, j], st, part, wbuf[:size])
                    finish_w(A, V, W, wbuf[:size], j, i, tau, tmp)
            k = k0 + nb
            if k < n:
                VW = np.ascontiguousarray(np.hstack([V[k:, :nb], W[k:, :nb]]))
                WV = np.ascontiguousarray(np.hstack([W[k:, :nb], V[k:, :nb]]))
                trailing_update(A, VW, WV, k, TILE)
    return d, e, taus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default="unifrac-issue42z4", help="bench_unifrac.py's folder under the cache")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    work = Path.home() / ".cache" / "hdtwd-bench" / args.workdir
    from hdtwd_cli._runtime.blas import gram_upper

    S = capture_operator(work)
    n = S.shape[0]
    lwork = int(lapack.dsytrd_lwork(n, lower=1)[0])
    c, d0, e0, tau0, _ = lapack.dsytrd(S.copy(order="F"), lower=1, lwork=lwork)
    lam, Z, _ = lapack.dstevd(d0.copy(), e0.copy(), compute_v=1)
    R, tau0 = np.asfortranarray(c[1:, : n - 1]), tau0[: n - 1]
    W32 = np.asfortranarray(Z.astype(np.float32))

    # correctness and bits of the parallel reduction
    for variant in SYMV:
        got = {}
        for threads in (1, 2):
            numba.set_num_threads(threads)
            got[threads] = tridiagonalize(S.copy(order="F"), variant)
        same = all(a.tobytes() == b.tobytes() for a, b in zip(got[1], got[2], strict=True))
        w = lapack.dsterf(got[1][0].copy(), got[1][1].copy())[0]
        print(
            f"{variant}: the same bits at 1 and 2 threads: {same}; eigenvalues vs LAPACK: {np.abs(np.sort(w) - lam).max():.1e}"
        )

    def time_of(f, threads):
        t = time.perf_counter()
        f(threads)
        return time.perf_counter() - t

    def sytrd(th):
        with threadpool_limits(th, "blas"):
            lapack.dsytrd(S.copy(order="F"), lower=1, overwrite_a=1, lwork=lwork)

    def stevd(th):
        with threadpool_limits(th, "blas"):
            lapack.dstevd(d0.copy(), e0.copy(), compute_v=1)

    def back(th):
        def block(cols):
            C = np.asfortranarray(Z[1:, cols])
            lw = int(lapack.dormqr("L", "N", R, tau0, C, -1)[1][0])
            lapack.dormqr("L", "N", R, tau0, C, lw, overwrite_c=1)

        with threadpool_limits(1, "blas"), ThreadPoolExecutor(th) as pool:
            list(pool.map(block, [slice(j, min(j + 512, n)) for j in range(0, n, 512)]))

    def dgemm(th):
        with threadpool_limits(th, "blas"):
            Z @ Z

    def gram32(th):
        numba.set_num_threads(th)
        gram_upper(W32)

    def ssyrk(th):
        with threadpool_limits(th, "blas"):
            W32 @ W32.T

    def reduction(variant):
        def run(th):
            numba.set_num_threads(th)
            tridiagonalize(S.copy(order="F"), variant)

        run.__name__ = f"parallel reduction ({variant})"
        return run

    parts = [sytrd, reduction("reassoc"), reduction("strict"), stevd, back, dgemm, gram32, ssyrk]
    runs = [(f, th) for f in parts for th in (1, 2)]
    times: dict[str, list[float]] = {}
    for rep in range(args.reps):
        for f, th in runs if rep % 2 == 0 else runs[::-1]:
            times.setdefault(f"{f.__name__}, {th} thread{'s' if th > 1 else ''}", []).append(time_of(f, th))
    for name, ts in times.items():
        print(f"{name:40s} median {statistics.median(ts):6.2f} s   runs {', '.join(f'{t:.2f}' for t in ts)}")


if __name__ == "__main__":
    sys.exit(main())
