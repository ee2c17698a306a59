"""Run a command as it would run on an AVX2-only CPU, on a machine that has AVX-512.

The project's machines have been an Intel Xeon and an AMD EPYC with AVX-512 and an AMD EPYC with
AVX2 only; every test, default and quoted figure must hold on both kinds. On an AVX-512 machine
the AVX2 code paths of every numerical library hdtwd uses are selected, for the child process
only, by:

- numba (hdtwd's kernels): ``NUMBA_CPU_NAME=haswell`` and ``NUMBA_CPU_FEATURES`` = the host's
  features with every ``avx512*`` (and AMX / AVX-VNNI) feature switched off;
- OpenBLAS (NumPy's and SciPy's BLAS / LAPACK): ``OPENBLAS_CORETYPE=Haswell``;
- NumPy's own SIMD loops: ``NPY_DISABLE_CPU_FEATURES`` = the AVX-512 dispatch targets.

Usage::

    python benchmarks/cpu_kind.py avx2 -- pytest -q -n 2     # the suite on the AVX2 paths
    python benchmarks/cpu_kind.py native -- hdtwd ...        # the host's own paths (no change)

:func:`env_for` gives the environment for scripts that start their own processes
(``bench_unifrac.py --cpu avx2``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

__all__ = ["KINDS", "env_for", "describe"]

KINDS = ("native", "avx2")
_OFF_PREFIXES = ("avx512", "amx", "avxvnni", "avxifma", "avxneconvert", "avxvnniint")


def _numba_features_without_avx512() -> str:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    feats = llvm.get_host_cpu_features()
    out = []
    for name, on in sorted(feats.items()):
        on = on and not name.startswith(_OFF_PREFIXES)
        out.append(("+" if on else "-") + name)
    out.append("-prefer-256-bit")  # as hdtwd's own choice on AVX-512 hosts (harmless without it)
    return ",".join(out)


def _numpy_avx512_targets() -> str:
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__
    from numpy._core._multiarray_umath import __cpu_features__

    return " ".join(
        t for t in __cpu_dispatch__ if (t.startswith("AVX512") or t == "X86_V4") and __cpu_features__.get(t, False)
    )


def env_for(kind: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process that runs on the code paths of ``kind`` (see module docstring)."""
    env = dict(os.environ if base is None else base)
    if kind == "native":
        return env
    if kind != "avx2":
        raise ValueError(f"unknown CPU kind {kind!r} (one of {', '.join(KINDS)})")
    env["NUMBA_CPU_NAME"] = "haswell"
    env["NUMBA_CPU_FEATURES"] = _numba_features_without_avx512()
    env["OPENBLAS_CORETYPE"] = "Haswell"
    targets = _numpy_avx512_targets()
    if targets:
        env["NPY_DISABLE_CPU_FEATURES"] = targets
    else:
        env.pop("NPY_DISABLE_CPU_FEATURES", None)
    return env


def describe(kind: str) -> str:
    """One line for RESULTS.md: which paths ``kind`` selects on this machine."""
    if kind == "native":
        return "the host's own code paths"
    e = env_for("avx2", {})
    return (
        f"AVX2 paths: NUMBA_CPU_NAME={e['NUMBA_CPU_NAME']}, numba features without avx512*, "
        f"OPENBLAS_CORETYPE={e['OPENBLAS_CORETYPE']}, NPY_DISABLE_CPU_FEATURES='{e.get('NPY_DISABLE_CPU_FEATURES', '')}'"
    )


def main(argv: list[str]) -> int:
    usage = f"usage: python {sys.argv[0]} {{{','.join(KINDS)}}} -- COMMAND [ARGS...]"
    if argv[:1] in (["-h"], ["--help"]):
        print(usage + "\n\n" + (__doc__ or "").strip())
        return 0
    if len(argv) < 3 or argv[0] not in KINDS or argv[1] != "--":
        print(usage, file=sys.stderr)
        return 2
    env = env_for(argv[0])
    os.execvpe(argv[2], argv[2:], env)
    return 0  # pragma: no cover - exec does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
