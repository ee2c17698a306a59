"""The start-up and platform tricks of ``hdtwd_cli/_runtime`` and the hand-written LLVM IR: each one
either works on the installed libraries or says loudly that it has fallen back (docs/performance.md,
"Tricks"), and every fallback gives the same values."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hdtwd_cli._runtime import jit
from hdtwd_cli.knn import _nndescent


def test_numba_still_has_the_private_cache_api_the_cache_load_uses():
    """``jit._load_cached_code_only`` replaces numba's ``Cache.load_overload`` on hdtwd's dispatchers;
    with another numba layout it leaves them alone (numba's own path: correct, 0.2 s slower)."""
    import numba
    from numba.core.caching import Cache
    from numba.core.runtime import nrt

    missing = [a for a in ("_load_overload", "_guard_against_spurious_io_errors") if not hasattr(Cache, a)]
    missing += [] if hasattr(nrt, "rtsys") and hasattr(nrt.rtsys, "initialize") else ["nrt.rtsys.initialize"]
    assert not missing, (
        f"numba {numba.__version__} lacks {missing}: the cache-load trick of hdtwd_cli/_runtime/jit.py is "
        "off (the plain fallback runs); re-measure the start-up and update docs/performance.md"
    )


def test_numba_still_has_the_ir_helpers_the_byte_sum_is_built_with():
    import numba

    assert jit.ir_supported(_nndescent.SAD_IR_NEEDS), (
        f"numba {numba.__version__} lacks a cgutils helper of {_nndescent.SAD_IR_NEEDS}: NN-descent's byte "
        "sums run the plain loop (_sad_u8_loop: the same lists, slower); re-measure docs/performance.md"
    )


def _sums(Q, ranges):
    """The byte sums through the IR (one group per range, through l1_bytes) and through the plain loop."""
    jit.load()
    import numba

    @numba.njit
    def both(Q, G, a, b):
        out = np.empty((a.size, 2), np.int64)
        for t in range(a.size):
            out[t, 0] = _nndescent.l1_bytes(Q, G, a[t], b[t])
            out[t, 1] = _nndescent._sad_u8_loop(Q, a[t], b[t], G[0, 0], G[0, 1])
        return out

    rng = np.random.default_rng(0)
    a, b = rng.integers(0, Q.shape[0], 300), rng.integers(0, Q.shape[0], 300)
    return [both(Q, np.array([[k0, k1, 0]], dtype=np.int64), a, b) for k0, k1 in ranges]


def test_the_plain_loop_gives_the_irs_integers():
    rng = np.random.default_rng(1)
    Q = rng.integers(0, 256, size=(40, 32 * 9), dtype=np.uint8)
    Q[0] = 255
    Q[1] = 0  # the extreme difference in every column
    for out in _sums(Q, [(0, 32), (32, 96), (64, 32 * 9)]):
        assert np.array_equal(out[:, 0], out[:, 1])


def test_without_the_ir_helpers_the_search_falls_back_to_the_same_lists(tmp_path):
    """A numba without the helpers (simulated: ``ir_supported`` says no) runs the plain loop, and
    NN-descent gives the same lists; the loop in a fresh numba cache, so that no IR machine code is reused."""
    code = (
        "import sys, numpy as np\n"
        "from hdtwd_cli._runtime import jit\n"
        "jit.ir_supported = lambda needs: sys.argv[1] == 'ir'\n"
        "from hdtwd_cli.knn import _nndescent\n"
        "rng = np.random.default_rng(3)\n"
        "Y = np.abs(rng.normal(size=(400, 64))) * (rng.random((400, 64)) < 0.5)\n"
        "Q, code = _nndescent.encode_floats(Y)\n"
        "I = _nndescent.nn_descent(Q, code, 10, 0)\n"
        "used = jit.sys.modules['hdtwd_cli.knn._nndescent']._sad_u8\n"
        "np.save(sys.argv[2], I)\n"
        "print(type(used).__name__)\n"
    )
    kinds = {}
    for mode in ("ir", "loop"):  # the intrinsic's machine code is what every run caches; the loop's, a fresh cache
        env = dict(os.environ) if mode == "ir" else dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache-loop"))
        proc = subprocess.run(
            [sys.executable, "-c", code, mode, str(tmp_path / f"{mode}.npy")],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
        kinds[mode] = proc.stdout.strip()
    assert kinds["ir"] != kinds["loop"], kinds  # the intrinsic, then the loop's dispatcher
    assert np.array_equal(np.load(tmp_path / "ir.npy"), np.load(tmp_path / "loop.npy"))


def test_the_fast_exit_still_finds_cpythons_atexit_runner():
    """``cli._app._exit`` runs the atexit handlers itself, then skips the interpreter's teardown; without
    CPython's ``atexit._run_exitfuncs`` it takes the normal exit (correct, slower)."""
    import atexit

    assert callable(getattr(atexit, "_run_exitfuncs", None)), (
        "atexit._run_exitfuncs is gone: hdtwd's fast exit falls back to sys.exit; update docs/performance.md"
    )


def test_gram_tiles_are_the_same_bits_at_any_thread_count_and_match_the_product():
    """``blas.gram_upper``: fixed tiles, each one single-threaded BLAS call, so 1 and 2 threads give the
    same bits; the upper triangle equals NumPy's product to rounding, in both layouts and dtypes, and
    ``add_to`` accumulates."""
    import numba

    from hdtwd_cli._runtime import blas

    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        W = rng.random((2 * blas.GRAM_TILE + 37, 300)).astype(dtype)
        iu = np.triu_indices(W.shape[0])
        got = {}
        before = numba.get_num_threads()
        try:
            for threads in (1, 2):
                numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
                got[threads] = blas.gram_upper(W)
        finally:
            numba.set_num_threads(before)
        assert got[1].tobytes() == got[2].tobytes()
        ref = W.astype(np.float64) @ W.astype(np.float64).T
        assert np.allclose(got[1][iu], ref[iu], rtol=1e-5 if dtype == np.float32 else 1e-12)
        tol = 1e-5 if dtype == np.float32 else 1e-12
        assert np.allclose(blas.gram_upper(np.asfortranarray(W))[iu], ref[iu], rtol=tol)
        acc = got[1].copy()
        blas.gram_upper(W, add_to=acc)
        assert np.array_equal(acc[iu], (got[1] + got[1])[iu])


def test_symmetric_eigh_is_the_same_bits_at_any_thread_count_and_an_eigendecomposition():
    """``blas.symmetric_eigh``: the back-transformation in fixed column blocks gives the same bits at
    1 and 2 threads; eigenvalues equal LAPACK's ``syevd`` (SciPy) to rounding, and ``A V = V Lambda``
    with ``V`` orthonormal, for sizes below, at and across the block width."""
    import numba
    import scipy.linalg

    from hdtwd_cli._runtime import blas

    rng = np.random.default_rng(5)
    for m in (1, 2, 3, 7, blas.EIGH_COLUMNS, 2 * blas.EIGH_COLUMNS + 37):
        A = rng.standard_normal((m, m))
        A = A + A.T
        got = {}
        before = numba.get_num_threads()
        try:
            for threads in (1, 2):
                numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
                got[threads] = blas.symmetric_eigh(np.asfortranarray(A))  # a copy: A is overwritten
        finally:
            numba.set_num_threads(before)
        (lam, V), (lam2, V2) = got[1], got[2]
        assert lam.tobytes() == lam2.tobytes() and V.tobytes() == V2.tobytes()
        scale = max(1.0, float(np.abs(A).max()))
        assert np.allclose(lam, scipy.linalg.eigh(A, driver="evd", eigvals_only=True), rtol=0, atol=1e-12 * m * scale)
        assert np.abs(A @ V - V * lam[None, :]).max() <= 1e-12 * m * scale
        assert np.abs(V.T @ V - np.eye(m)).max() <= 1e-13 * m


def test_denoised_rows_one_pass_gram_is_the_scaled_rows_gram():
    """The Gram matrix kept from the one pass over denoised rows, divided by powers of two afterwards, is the
    bits of scaling the rows first (block by block, in the same order)."""
    import scipy.sparse as sp

    from hdtwd_cli._runtime import blas
    from hdtwd_cli.tree._denoise import BLOCK_ROWS, DenoisedRows, fit_denoiser
    from hdtwd_cli.tree._diffusion import column_scale

    rng = np.random.default_rng(3)
    X = sp.csr_matrix(rng.poisson(rng.gamma(0.5, 2.0, (1, 160)), (BLOCK_ROWS + 900, 160)).astype(float))
    A = DenoisedRows(X, fit_denoiser(X, 12))
    s = column_scale(A)
    assert np.all(np.frexp(s)[0] == 0.5)  # powers of two
    ref = np.zeros((160, 160))
    for _, R in A.blocks():
        blas.gram_upper((R / s).T, add_to=ref)
    A.summarise(gram=True)
    iu = np.triu_indices(160)
    assert A.gram_upper(s)[iu].tobytes() == ref[iu].tobytes()
    cols = np.array([0, 5, 6, 100, 159])
    assert (
        A.select(cols).gram_upper(s[cols])[np.triu_indices(5)].tobytes()
        == ref[np.ix_(cols, cols)][np.triu_indices(5)].tobytes()
    )


def test_on_every_core_reports_blocks_in_order_and_raises_a_blocks_error():
    """``done`` sees every finished block in the blocks' order on the calling thread; a block's error is
    raised, and ``done`` is called for no block from the failed one on."""
    import threading

    from hdtwd_cli._runtime import blas

    seen, ran = [], set()
    caller = threading.get_ident()

    def work(b: int) -> None:
        ran.add(b)

    def done(b: int) -> None:
        assert threading.get_ident() == caller
        seen.append(b)

    blas.on_every_core(work, list(range(9)), done)
    assert seen == list(range(9)) and ran == set(range(9))

    def failing(b: int) -> None:
        if b == 3:
            raise ValueError("block 3")

    seen.clear()
    with pytest.raises(ValueError, match="block 3"):
        blas.on_every_core(failing, list(range(9)), done)
    assert seen == [0, 1, 2]


_KEEP_PROBE = """
import sys
import numpy as np
from hdtwd_cli._runtime import memory

def rss():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmRSS:"))

kept = memory.keep_freed_memory() if sys.argv[1] == "keep" else False
a = np.ones(200_000_000 // 8)  # 200 MB, touched
touched = rss()
at = a.ctypes.data
del a
freed = rss()
free = memory.kept_free_bytes()
b = np.ones(200_000_000 // 8)
same_place = int(b.ctypes.data == at)
del b
before = rss()
released = memory.release_kept_memory()
after = memory.kept_free_bytes()
print(kept, touched - freed, free, same_place, memory.available_memory(), released, before - rss(), after)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator and /proc: Linux")
def test_kept_freed_memory_is_reused_and_counted_as_available():
    """``keep_freed_memory``: a freed 200 MB block stays with the process (its resident size does not fall),
    the next block of that size takes its place, and the kept bytes count as available; without it glibc
    returns the block to the kernel; ``release_kept_memory`` gives the kept block back."""
    runs = {}
    for mode in ("keep", "plain"):
        out = subprocess.run(
            [sys.executable, "-c", _KEEP_PROBE, mode], capture_output=True, text=True, check=True
        ).stdout.split()
        runs[mode] = [int(v) if v.lstrip("-").isdigit() else v for v in out]
    kept, dropped, free, same_place, _, released, given_back, after = runs["keep"]
    assert kept == "True" and dropped < 20_000_000 and free >= 190_000_000 and same_place == 1
    # release_kept_memory (a Dask client before its workers run): the kept block goes back, nothing is kept after
    assert released == "True" and given_back > 150_000_000 and after == 0
    plain_kept, plain_dropped, plain_free, _, _, plain_released, _, _ = runs["plain"]
    assert plain_kept == "False" and plain_dropped > 150_000_000 and plain_free == 0 and plain_released == "False"


_PAGES_PROBE = """
import sys
from hdtwd_cli._runtime import memory

if sys.argv[1] == "late":
    import numpy
done = memory.without_huge_pages() if sys.argv[1] != "plain" else False
import numpy as np
try:
    from numpy._core.multiarray import _set_madvise_hugepage
except ImportError:  # NumPy 1
    from numpy.core.multiarray import _set_madvise_hugepage

asked = _set_madvise_hugepage(False)  # returns the setting it replaces
a = np.ones(64 << 17)  # 64 MB, touched
with open("/proc/self/smaps_rollup") as fh:
    huge = next(int(line.split()[1]) for line in fh if line.startswith("AnonHugePages:"))
print(done, asked, huge)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="transparent huge pages and /proc: Linux")
def test_without_huge_pages_turns_numpys_request_off():
    """``without_huge_pages``: NumPy no longer asks for huge pages (its switch reads off; by default on), called
    before NumPy's import (``early``: NumPy reads the setting then) or after it (``late``: NumPy's own switch);
    where the kernel gives them only on request (``[madvise]``) a fresh 64 MB array holds none."""
    runs = {}
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    for mode in ("early", "late", "plain"):
        out = subprocess.run(
            [sys.executable, "-c", _PAGES_PROBE, mode], capture_output=True, text=True, check=True, env=env
        ).stdout.split()
        runs[mode] = out
    assert runs["early"][:2] == runs["late"][:2] == ["True", "False"]
    assert runs["plain"][:2] == ["False", "True"]
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if thp.exists() and "[madvise]" in thp.read_text():
        assert int(runs["early"][2]) == int(runs["late"][2]) == 0
