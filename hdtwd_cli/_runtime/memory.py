"""How much memory there is, and byte counts for messages."""

from __future__ import annotations

import os

__all__ = ["available_memory", "human_bytes"]


def available_memory() -> int:
    """Bytes of memory available now (``HDTWD_MEMORY_LIMIT`` overrides, e.g. for tests)."""
    env = os.environ.get("HDTWD_MEMORY_LIMIT")
    if env:
        return int(float(env))
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def human_bytes(n: float) -> str:
    """``1234567`` -> ``'1.2 MB'`` (decimal units)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
