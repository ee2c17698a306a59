"""User-facing errors and the exit codes the command line maps them to.

Every error a user can cause carries the file it concerns, so that the command line prints one
line ``hdtwd: error: FILE: problem`` and exits with the documented code:

====  =====================================================================
code  meaning
====  =====================================================================
0     success
1     internal error (a bug: please report it, ``-v`` shows the traceback)
2     bad usage or bad input (unreadable file, malformed matrix, mismatch)
3     output cannot be written (unwritable path, would overwrite an input)
4     not enough memory for the requested computation (refused up front)
130   interrupted (Ctrl-C); no partial output is left behind
====  =====================================================================
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["HdtwdError", "InputError", "OutputError", "ResourceError"]


class HdtwdError(Exception):
    """Base class of the errors a user can cause; ``exit_code`` is the process exit status."""

    exit_code = 2

    def __init__(self, message: str, path: str | Path | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = None if path is None else str(path)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InputError(HdtwdError):
    """An input file is missing, unreadable or holds data the method cannot use."""

    exit_code = 2


class OutputError(HdtwdError):
    """An output file cannot be written."""

    exit_code = 3


class ResourceError(HdtwdError):
    """The computation would not fit in memory; refused before it starts."""

    exit_code = 4
