"""numba on first use: ``njit`` that defers importing numba until a compiled kernel is called.

Importing numba (and its first compiled call) is a fixed start-up cost that small problems never
need: they take the NumPy twins of the kernels (``tree/_small.py``, ``twd/_small.py``), and
``hdtwd distance`` on a few hundred values should not wait for a compiler. The kernel modules
decorate their functions with :func:`njit` from here and import :func:`prange` from here; the
first call of any of them imports numba, sets every registered module's ``prange`` to
``numba.prange`` and replaces every registered function, in its module, by numba's dispatcher for
it (compilation itself stays lazy, per signature, as with ``numba.njit``; the on-disk cache is the
same). Compiled callers therefore see dispatchers for the kernels they call. Once numba is
loaded, functions decorated later get their dispatcher at once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["njit", "intrinsic", "ir_supported", "prange", "load", "on_first_compile"]

_PENDING: list[_Lazy] = []
#: (module, name, typer, fallback, needs): made numba intrinsics by load(), or the fallback's kernel
_INTRINSICS: list[tuple[str, str, Callable, str | None, tuple[str, ...]]] = []
_LOADED = False


def prange(*args: int) -> range:  # pragma: no cover - replaced by numba.prange before any compilation
    """Placeholder for ``numba.prange`` (which :func:`load` puts in its place)."""
    return range(*args)


class _Lazy:
    """A kernel whose numba dispatcher is made on the first call of any kernel."""

    def __init__(self, fn: Callable, options: dict[str, Any]) -> None:
        self.py_func = fn
        self.options = options
        self.dispatcher: Any = None
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.dispatcher is None:
            load()
        return self.dispatcher(*args, **kwargs)


def _dispatch(lazy: _Lazy) -> None:
    import numba

    module = sys.modules[lazy.py_func.__module__]
    if "prange" in vars(module):
        module.prange = numba.prange  # type: ignore[attr-defined]
    lazy.dispatcher = numba.njit(**lazy.options)(lazy.py_func)
    _load_cached_code_only(lazy.dispatcher)


def _load_cached_code_only(dispatcher: Any) -> None:
    """Let ``dispatcher`` load its on-disk machine code without numba's full context refresh.

    numba's ``Cache.load_overload`` first calls ``target_context.refresh()``, which imports and
    installs every lowering registry numba has (NumPy, linear algebra, random, typed containers,
    and through them SciPy's BLAS bindings) on the first call of every process (benchmarks/RESULTS.md,
    "Start-up"), none of it needed to run machine code that is
    already compiled. Loading that code needs the symbols it links against: numba's C helpers and
    math functions (installed when the context is created), the parallel runtime (re-run by the
    cached entry's own ``reload_init``) and the NRT, which this initialises. A cache miss still
    compiles through numba's compiler, which refreshes the contexts itself. Only hdtwd's
    dispatchers are changed (their cache object, not numba's class); an unknown numba layout
    leaves them as they are. The machine code, and so every result, is the same bytes.
    """
    cache = getattr(dispatcher, "_cache", None)
    if cache is None or not all(hasattr(cache, a) for a in ("_load_overload", "_guard_against_spurious_io_errors")):
        return
    try:
        from numba.core.runtime import nrt
    except ImportError:  # pragma: no cover - another numba layout
        return
    if not hasattr(nrt, "rtsys") or not hasattr(nrt.rtsys, "initialize"):  # pragma: no cover
        return

    def load_overload(sig: Any, target_context: Any) -> Any:
        nrt.rtsys.initialize(target_context)
        with cache._guard_against_spurious_io_errors():
            loaded = cache._load_overload(sig, target_context)
        if loaded is None:  # a miss: numba compiles this signature now, and caches it
            _compiling()
        return loaded

    cache.load_overload = load_overload


#: Called once per process, before the first kernel whose machine code is not in numba's on-disk cache is
#: compiled (see :func:`on_first_compile`); ``None``: nothing.
_ON_COMPILE: Callable[[], None] | None = None
_ANNOUNCED = False


def on_first_compile(callback: Callable[[], None] | None) -> None:
    """Call ``callback`` once, when a cached kernel (``cache=True``) misses numba's on-disk cache and is
    about to be compiled: the first run of a path, or after the cache was emptied or the kernels changed.

    A cache hit (every later run) never calls it, so the command line can say, on that first run only,
    why it is silent for a few seconds. ``None`` removes the callback.
    """
    global _ON_COMPILE
    _ON_COMPILE = callback


def _compiling() -> None:
    global _ANNOUNCED
    if _ON_COMPILE is not None and not _ANNOUNCED:
        _ANNOUNCED = True
        _ON_COMPILE()


def load() -> None:
    """Import numba and give every registered kernel its dispatcher (idempotent).

    Modules that imported a kernel by name (``from ._kernels import tile_pass``) get the
    dispatcher in its place too: numba resolves a compiled caller's callees from its globals.
    """
    from hdtwd_cli._runtime import simd as _simd

    global _LOADED
    if _simd._ON_LOAD and "numba" not in sys.modules:
        _simd.prefer_wide_vectors()  # the command's choice, before numba reads its target features
    _LOADED = True
    while _PENDING:
        _dispatch(_PENDING.pop(0))
    while _INTRINSICS:  # after the kernels: a fallback is one of them (compilation stays lazy)
        _make_intrinsic(*_INTRINSICS.pop(0))
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == __name__.split(".")[0]:
            for attr, value in list(vars(module).items()):
                if isinstance(value, _Lazy) and value.dispatcher is not None:
                    setattr(module, attr, value.dispatcher)


def ir_supported(needs: tuple[str, ...]) -> bool:
    """Whether the installed numba has every ``numba.core.cgutils`` helper in ``needs``: the API that
    hand-written LLVM IR is built with (numba does not promise it between versions)."""
    try:
        from numba.core import cgutils
    except ImportError:  # pragma: no cover - another numba layout
        return False
    return all(hasattr(cgutils, n) for n in needs)


def _make_intrinsic(module: str, name: str, typer: Callable, fallback: str | None, needs: tuple[str, ...]) -> Any:
    from numba.extending import intrinsic as numba_intrinsic

    mod = sys.modules[module]
    if fallback is not None and not ir_supported(needs):
        value = getattr(mod, fallback)  # the plain compiled loop: the same integers, slower
        value = value.dispatcher if isinstance(value, _Lazy) else value
    else:
        value = numba_intrinsic(typer)
    setattr(mod, name, value)
    return value


def intrinsic(*, fallback: str | None = None, needs: tuple[str, ...] = ()) -> Callable[[Callable], Any]:
    """``numba.extending.intrinsic(typer)`` (LLVM IR written by hand), put in its module's namespace
    when numba is loaded (:func:`load`), before any kernel that calls it is compiled. Until then
    the name holds ``typer`` itself, which only compiled code may call.

    ``fallback`` names a kernel of the same module (decorated with :func:`njit`, defined BEFORE the
    intrinsic) that computes the same values in plain numba; it takes the intrinsic's place when
    the installed numba lacks a ``numba.core.cgutils`` helper in ``needs`` (:func:`ir_supported`).
    """

    def deco(typer: Callable) -> Any:
        entry = (typer.__module__, typer.__name__, typer, fallback, needs)
        if _LOADED:
            return _make_intrinsic(*entry)
        _INTRINSICS.append(entry)
        return typer

    return deco


def njit(**options: Any) -> Callable[[Callable], Any]:
    """``numba.njit(**options)``, applied when numba is first needed (see the module docstring)."""

    def deco(fn: Callable) -> Any:
        lazy = _Lazy(fn, options)
        if _LOADED:
            _dispatch(lazy)
            return lazy.dispatcher
        _PENDING.append(lazy)
        return lazy

    return deco
