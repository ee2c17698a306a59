"""Full-width vectors for the compiled kernels: AVX-512 where the CPU has it.

LLVM tunes Intel server CPUs since Skylake-X for 256-bit vectors (``prefer-256-bit``), so numba's
kernels use half of an AVX-512 register. Compiled without that preference, the pairwise L1
kernel (:mod:`hdtwd_cli.twd._kernels`) runs markedly faster on AVX-512 CPUs (docs/performance.md,
"Dependencies"), with the same bits: its sums do not
depend on the vector width (the kernels' determinism contract).

Numba reads its target features once, when it is imported, from ``NUMBA_CPU_FEATURES``;
:func:`prefer_wide_vectors` sets that variable to the host's features minus the preference. The
``hdtwd`` command asks for it (:func:`prefer_wide_vectors_on_load`: the whole process is ours) and
:func:`hdtwd_cli._runtime.jit.load` applies it just before numba is imported, so a run that never needs
numba never loads LLVM either. In a notebook, call it before anything imports numba (it does
nothing once numba is loaded, or when ``NUMBA_CPU_FEATURES`` is already set), so other
libraries' numba code is left as the user set it up. Child processes (Dask workers started here) inherit the variable.
"""

from __future__ import annotations

import os
import sys

__all__ = ["prefer_wide_vectors", "prefer_wide_vectors_on_load"]

_ON_LOAD = False


def prefer_wide_vectors_on_load() -> None:
    """Have :func:`prefer_wide_vectors` applied when hdtwd imports numba (:func:`hdtwd_cli._runtime.jit.load`)."""
    global _ON_LOAD
    _ON_LOAD = True


def prefer_wide_vectors() -> bool:
    """Let numba's LLVM use full AVX-512 vectors in this process; True when it now will.

    Does nothing (returns False) when numba is already imported, when ``NUMBA_CPU_FEATURES`` is
    set, or when the CPU has no AVX-512.
    """
    if "numba" in sys.modules or os.environ.get("NUMBA_CPU_FEATURES"):
        return False
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    features = llvm.get_host_cpu_features()
    if not features.get("avx512f", False):
        return False
    os.environ["NUMBA_CPU_FEATURES"] = features.flatten() + ",-prefer-256-bit"
    return True
