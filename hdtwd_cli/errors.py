"""Errors and warnings of the library, and the exit codes the command line maps them to.

Every error a user can cause is a :class:`ValueError` subclass (so ``except ValueError`` in a
notebook catches it) that names what it concerns: the file (``path``) or the Python argument
(``argument``, :class:`ParameterError`). The library words its messages for Python callers
(``eps must be positive``); the command line alone turns an argument into its flag
(``--eps must be positive``) and an error into one line ``hdtwd: error: FILE: problem`` and
the documented exit code:

====  =====================================================================
code  meaning
====  =====================================================================
0     success
1     internal error (a bug: please report it, ``-v`` shows the traceback)
2     bad usage or bad input (unreadable file, malformed matrix, mismatch)
3     output cannot be written (unwritable path, would overwrite an input)
4     not enough memory for the requested computation (refused up front)
5     the Dask cluster failed the work (workers died repeatedly, scheduler lost)
130   interrupted (Ctrl-C); no partial output is left behind
141   the reader of standard output went away (``| head``)
143   terminated (SIGTERM, e.g. ``kill`` or a batch scheduler); no partial output is left behind
====  =====================================================================

Every warning is a :class:`HdtwdWarning` (filter them with
``warnings.filterwarnings("ignore", category=hdtwd_cli.HdtwdWarning)``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = [
    "HdtwdError",
    "InputError",
    "ParameterError",
    "OutputError",
    "ResourceError",
    "ClusterError",
    "HdtwdWarning",
    "Terminated",
]


class HdtwdWarning(UserWarning):
    """A recoverable oddity the user should hear about (the one warning category of hdtwd)."""


class HdtwdError(ValueError):
    """Base class of the errors a user can cause; ``exit_code`` is the process exit status.

    ``message`` may name Python arguments as ``{key}`` placeholders, with ``names`` mapping
    each key to the argument (``"{a} and {b} exclude each other", a="layer", b="use_raw"``):
    ``str()`` writes the Python names, :meth:`worded` any other spelling (the CLI's flags).
    """

    exit_code = 2

    def __init__(self, message: str, path: str | Path | None = None, **names: str) -> None:
        self.template = message
        self.names = names
        self.path = None if path is None else str(path)
        self.message = self.worded(lambda a: a)
        super().__init__(self.message)

    def worded(self, name_of: Callable[[str], str]) -> str:
        """The message with every argument written as ``name_of(python_name)`` (no path)."""
        if not self.names:
            return self.template
        return self.template.format(**{k: name_of(v) for k, v in self.names.items()})

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InputError(HdtwdError):
    """An input (file or array) is missing, unreadable or holds data the method cannot use."""

    exit_code = 2


class ParameterError(HdtwdError):
    """A parameter value is invalid or conflicts with another; ``argument`` is its Python name.

    ``message`` may contain ``{arg}`` where the argument's name belongs, else the name is put
    first: ``ParameterError("must be positive", "eps")`` reads ``eps must be positive``.
    """

    exit_code = 2

    def __init__(self, message: str, argument: str, path: str | Path | None = None, **names: str) -> None:
        self.argument = argument
        super().__init__(message if "{arg}" in message else "{arg} " + message, path, arg=argument, **names)


class OutputError(HdtwdError):
    """An output file cannot be written."""

    exit_code = 3


class ClusterError(HdtwdError):
    """The Dask cluster could not finish the work; nothing was written."""

    exit_code = 5


class ResourceError(HdtwdError):
    """The computation would not fit in memory; refused before it starts."""

    exit_code = 4


_RECEIVED: list[int] = []  # signals turned into Terminated, in the order they arrived


def terminated_by(signum: int) -> Terminated:
    """Record that the termination signal ``signum`` arrived (:func:`check_terminated` re-raises it
    later) and return the exception the signal handler raises."""
    _RECEIVED.append(signum)
    return Terminated(signum)


def termination_received() -> bool:
    """Whether a termination signal has arrived in this process."""
    return bool(_RECEIVED)


def check_terminated() -> None:
    """Raise :class:`Terminated` again if a termination signal arrived.

    The handler raises at once, but an exception raised while a C library calls back into Python
    (numba compiling: llvmlite's ctypes callbacks) is printed and dropped there. Stage boundaries
    and the final rename of every output check again, so such a run still ends with no output.
    """
    if _RECEIVED:
        raise Terminated(_RECEIVED[0])


class Terminated(BaseException):
    """The process received SIGTERM or SIGHUP (raised by the command line's handler, so that every
    temporary file is removed on the way out, as for Ctrl-C). Exit code 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        import signal

        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum
