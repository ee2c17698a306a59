"""Progress bars and messages on stderr (rich), silent when stderr is not a terminal or with --quiet.

Results never go through this module: they go to files or stdout.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Reporter"]


class Reporter:
    """Stage progress and verbose messages for one command run.

    Parameters
    ----------
    quiet : bool
        No progress bars and no ``-v`` messages (warnings and errors still print).
    verbose : int
        ``-v`` count: 1 prints stage summaries.
    """

    def __init__(self, quiet: bool = False, verbose: int = 0) -> None:
        self._console: Any = None
        self.show_bars = (not quiet) and sys.stderr.isatty()
        self.verbose = 0 if quiet else verbose

    @property
    def console(self) -> Any:
        """rich's stderr console, made on first use: a quiet run that prints nothing never imports rich."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False)
        return self._console

    @contextlib.contextmanager
    def stage(self, description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
        """A progress bar for one stage; yields ``advance(n)``. Checks for a dropped termination on entry and exit.

        With ``-v`` the stage's wall time is printed when it ends (``hdtwd: <stage>: 12.3 s``).
        """
        from hdtwd_cli.errors import check_terminated

        check_terminated()
        start = time.perf_counter()
        if not self.show_bars:
            yield lambda n=1: None  # type: ignore[misc]
            check_terminated()
            self.info(f"{description}: {time.perf_counter() - start:.1f} s")
            return
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}" if total else ""),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        with bar:
            task = bar.add_task(description, total=total)
            yield lambda n=1: bar.advance(task, n)  # type: ignore[misc]
        check_terminated()
        self.info(f"{description}: {time.perf_counter() - start:.1f} s")

    def note(self, message: str) -> None:
        """A progress-level message (memory estimates): shown with the bars or with ``-v``."""
        if self.show_bars or self.verbose:
            self.console.print(f"hdtwd: {message}", markup=False, soft_wrap=True)

    def info(self, message: str) -> None:
        """A ``-v`` message on stderr."""
        if self.verbose:
            self.console.print(f"hdtwd: {message}", markup=False, soft_wrap=True)
