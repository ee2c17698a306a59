"""Atomic output: write to a temporary file in the target's directory, then rename over it.

A failed or interrupted run (Ctrl-C included) removes its temporary file and leaves any earlier
file at the target untouched; readers never see a half-written output.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import OutputError

__all__ = ["atomic_path", "check_output_path"]


def check_output_path(path: str | os.PathLike, inputs: Sequence[str | os.PathLike] = ()) -> str:
    """Refuse outputs that cannot be written or that name one of the ``inputs``.

    Raises
    ------
    OutputError
    """
    p = str(path)
    if p == "":
        raise OutputError("empty output path")
    if p == "-":
        return p
    if os.path.isdir(p) and not (p.rstrip("/").lower().endswith(".zarr")
                                 and os.path.exists(os.path.join(p, "zarr.json"))):  # a store is replaced whole
        raise OutputError("is a directory", p)
    d = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(d):
        raise OutputError(f"directory {d} does not exist", p)
    if not os.access(d, os.W_OK | os.X_OK):
        raise OutputError(f"directory {d} is not writable", p)
    for inp in inputs:
        if inp is None or str(inp) == "-":
            continue
        try:
            same = os.path.exists(p) and os.path.samefile(p, inp)
        except OSError:
            same = False
        if same or os.path.abspath(p) == os.path.abspath(str(inp)):
            raise OutputError(f"output would overwrite the input {inp}", p)
    return p


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path next to ``path`` (same suffix); rename it to ``path`` on success.

    On any exception (``KeyboardInterrupt`` included) the temporary file is removed.
    """
    target = Path(path)
    tmp = target.with_name(f".{target.stem}.hdtwd-tmp-{os.getpid()}{target.suffix}")
    try:
        yield str(tmp)
        os.replace(tmp, target)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OutputError(f"cannot write ({e.strerror or e})", str(path)) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
