"""Opening text files that may be gzip-compressed (``.gz``): one place for every reader."""

from __future__ import annotations

from typing import IO

__all__ = ["open_text"]


def open_text(path: str, newline: str | None = None, encoding: str = "utf-8") -> IO[str]:
    """A text stream over ``path`` (strict decoding), gunzipped when its name ends in ``.gz``."""
    if path.lower().endswith(".gz"):
        import gzip

        return gzip.open(path, "rt", newline=newline, encoding=encoding, errors="strict")
    return open(path, newline=newline, encoding=encoding, errors="strict")
