"""Atomic output: write to a temporary file in the target's directory, then rename over it.

A failed or interrupted run (Ctrl-C, SIGTERM, a full disk included) removes its temporary file and
leaves any earlier file at the target untouched; readers never see a half-written output. Two runs
writing the same target each write their own temporary file (named after the process id) and
rename it: the last rename wins, whole. A run killed with SIGKILL cannot clean up: its temporary
file (``.NAME.hdtwd-tmp-PID.SUFFIX``, hidden) is removed by the next run that writes the same target
once no process with that id is alive.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from hdtwd_cli.errors import OutputError, check_terminated

__all__ = ["atomic_path", "check_output_path"]


def check_output_path(path: str | os.PathLike, inputs: Sequence[str | os.PathLike | None] = ()) -> str:
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
    _refuse_special(p)
    if os.path.isdir(p) and not (
        p.rstrip("/").lower().endswith(".zarr") and os.path.exists(os.path.join(p, "zarr.json"))
    ):  # a store is replaced whole
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


def _refuse_special(p: str) -> None:
    """Refuse a target that exists and is neither a regular file nor a directory: renaming a finished file
    over a device or a FIFO (``/dev/null``, a named pipe) would replace it with that file."""
    if os.path.exists(p) and not os.path.isdir(p) and not os.path.isfile(p):
        raise OutputError(
            "is not a regular file (a FIFO, socket or device); write to a file, or to - for "
            "standard output where the command offers it",
            p,
        )


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path next to ``path`` (same suffix); rename it to ``path`` on success.

    On any exception (``KeyboardInterrupt`` included) the temporary file is removed. A ``path`` that is a
    device, FIFO or socket is an :class:`~hdtwd_cli.errors.OutputError` before anything is written.
    """
    _refuse_special(str(path))
    target = Path(path)
    tmp = target.with_name(f".{target.stem}.hdtwd-tmp-{os.getpid()}{target.suffix}")
    remove_stale_temporaries(target)
    try:
        yield str(tmp)
        check_terminated()
        _publish(tmp, target)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OutputError(f"cannot write ({e.strerror or e})", str(path)) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _publish(tmp: Path, target: Path) -> None:
    """Put the finished temporary file ``tmp`` in place at ``target`` (one atomic rename)."""
    os.replace(tmp, target)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove the temporary files of ``target`` left by runs that were killed (their process is gone)."""
    removed = []  # type: ignore[var-annotated]
    prefix = f".{target.stem}.hdtwd-tmp-"
    try:
        entries = os.listdir(target.parent if str(target.parent) else ".")
    except OSError:
        return removed
    for name in entries:
        if not (name.startswith(prefix) and name.endswith(target.suffix)):
            continue
        pid = name[len(prefix) : len(name) - len(target.suffix)]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            p = target.with_name(name)
            with contextlib.suppress(OSError):
                if p.is_dir():
                    import shutil

                    shutil.rmtree(p)
                else:
                    p.unlink()
                removed.append(p)
    return removed
