"""How much memory there is, how the process keeps what it frees, and byte counts for messages."""

from __future__ import annotations

import ctypes
import importlib
import os
import sys

__all__ = [
    "allowance",
    "available_memory",
    "human_bytes",
    "keep_freed_memory",
    "kept_free_bytes",
    "release_kept_memory",
    "without_huge_pages",
]

#: glibc's ``mallopt`` parameters (malloc.h) and their defaults (mallopt(3)).
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_TRIM_DEFAULT, _MMAP_MAX_DEFAULT = 128 * 1024, 65536
#: Whether :func:`keep_freed_memory` took effect in this process.
_KEEPING = False


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt  # noqa: B018 - glibc's (musl and macOS have none)
        libc.mallinfo2  # noqa: B018 - glibc 2.33 or later
    except (OSError, AttributeError):
        return None
    return libc


def keep_freed_memory() -> bool:
    r"""Have the C library keep the memory this process frees for its next allocations (glibc); True where it does.

    By default glibc maps every allocation above 32 MB on its own and returns it to the kernel when it is
    freed, so each block of a pass over rows (hundreds of MB, block after block, pass after pass) is fresh
    memory that the kernel must zero, and that on a virtual machine whose host takes back the guest's free
    memory the host must supply again: there each fresh GB costs seconds of system time. Here every
    allocation comes from the heap (``mallopt(M_MMAP_MAX, 0)``) and freed memory is never returned
    (``M_TRIM_THRESHOLD``): a block allocated again reuses pages the process holds, and the peak resident
    size can exceed the peak in use where a freed region is too small for the next request. Values are
    unchanged (the allocator decides where, never what); :func:`available_memory` counts the kept free
    bytes as available. The command line calls this once at start (a process that ends after one
    command); the library leaves the allocator of its caller's process alone.
    """
    global _KEEPING
    libc = _libc()
    if libc is None:
        return False
    # -1: glibc reads the threshold as a size_t, the largest (never trim)
    _KEEPING = bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, -1))
    return _KEEPING


def release_kept_memory() -> bool:
    """Give the memory :func:`keep_freed_memory` kept back to the system and stop keeping it; True where it did.

    For a process that hands its work to others on the same machine (a Dask client and its local workers):
    the free bytes its heap holds would otherwise be missing to them. glibc's defaults are restored
    (``M_TRIM_THRESHOLD``, ``M_MMAP_MAX``) and ``malloc_trim(0)`` returns every free page. Values are unchanged.
    """
    global _KEEPING
    libc = _libc() if _KEEPING else None
    if libc is None:
        return False
    libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_DEFAULT)
    libc.mallopt(_M_MMAP_MAX, _MMAP_MAX_DEFAULT)
    libc.malloc_trim(0)
    _KEEPING = False
    return True


def without_huge_pages() -> bool:
    r"""Have NumPy leave its arrays in the kernel's base pages; True where NumPy's switch is set (or will be).

    NumPy asks the kernel for transparent huge pages on every large array (``madvise(MADV_HUGEPAGE)``).
    Where the kernel compacts memory to serve such a request (``defrag`` set to ``madvise``, the usual
    default) and the host of a virtual machine must also supply the guest's freed memory again, the first
    touch of each fresh GB stalls for seconds instead of a fraction of one; the arrays' values and every
    result are the same in either kind of page. NumPy reads ``NUMPY_MADVISE_HUGEPAGE`` when it is imported
    (set here to 0, so a command that never imports NumPy does not pay for it, and the processes it starts,
    e.g. Dask's workers, inherit it); once imported, its own switch is set. The command line calls this once
    at start, beside :func:`keep_freed_memory`; the library leaves its caller's NumPy alone.
    """
    os.environ["NUMPY_MADVISE_HUGEPAGE"] = "0"
    if "numpy" not in sys.modules:
        return True
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            switch = getattr(importlib.import_module(module), "_set_madvise_hugepage", None)
        except ImportError:
            continue
        if switch is not None:
            switch(False)
            return True
    return False


def kept_free_bytes() -> int:
    """Bytes freed and kept by this process's allocator for reuse (0 unless :func:`keep_freed_memory` took effect)."""
    libc = _libc() if _KEEPING else None
    if libc is None:
        return 0
    libc.mallinfo2.restype = _MallInfo2
    return int(libc.mallinfo2().fordblks)


def available_memory() -> int:
    """Bytes of memory this process may still take (``HDTWD_MEMORY_LIMIT`` overrides, e.g. for tests).

    The least of the machine's available memory (``MemAvailable``), the headroom under this
    process's address-space limit (``ulimit -v``, ``prlimit --as``) and the headroom of its
    control group (a container's or a batch job's memory limit, cgroup v2 or v1), so that a job
    given 8 GB on a large node is refused before the kernel's OOM killer ends it; plus the memory this
    process has freed and keeps for reuse (:func:`kept_free_bytes`).
    """
    env = os.environ.get("HDTWD_MEMORY_LIMIT")
    if env:
        return int(float(env))
    found = [_meminfo_available(), _address_space_headroom(), _cgroup_headroom()]
    return max(0, min(v for v in found if v is not None)) + kept_free_bytes()


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def _status_bytes(key: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _address_space_headroom() -> int | None:
    """The soft ``RLIMIT_AS`` minus the address space in use (``VmSize``); None without a limit."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    return soft - (_status_bytes("VmSize") or 0)


def _read_number(path: str) -> int | None:
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_headroom() -> int | None:
    """The memory limit of this process's control group minus its usage (page cache counted as free)."""
    try:
        with open("/proc/self/cgroup") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and controllers == "":  # cgroup v2
            base = "/sys/fs/cgroup" + path.rstrip("/")
            limit, usage, stat = (f"{base}/memory.{k}" for k in ("max", "current", "stat"))
        elif "memory" in controllers.split(","):  # cgroup v1
            base = "/sys/fs/cgroup/memory" + path.rstrip("/")
            limit, usage, stat = (f"{base}/memory.{k}" for k in ("limit_in_bytes", "usage_in_bytes", "stat"))
        else:
            continue
        cap, used = _read_number(limit), _read_number(usage)
        if cap is None or used is None or cap >= 1 << 60:  # "max", or v1's "no limit" (about 2^63)
            continue
        cache = 0
        try:
            with open(stat) as fh:
                for row in fh:
                    k, _, v = row.partition(" ")
                    if k in ("inactive_file", "total_inactive_file"):
                        cache = max(cache, int(v))
        except (OSError, ValueError):
            pass
        return cap - used + cache
    return None


def human_bytes(n: float) -> str:
    """``1234567`` -> ``'1.2 MB'`` (decimal units)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def allowance(share: float, available: int) -> str:
    """The memory a stage may use, for refusals: ``'8.0 MB (80 % of the 10.0 MB available)'``.

    A stage keeps ``1 - share`` of the available memory free (for the interpreter, the libraries'
    buffers and estimates that run short), so a refusal names both figures: "needs 8.9 MB but
    10.0 MB are available" would read as a contradiction.
    """
    return f"{human_bytes(share * available)} ({share:.0%} of the {human_bytes(available)} available)"
