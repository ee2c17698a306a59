"""Fault injection for the tests, kept out of the package: hdtwd itself has no test hook.

Two parts:

- A launcher, ``python tests/_faults.py --faults DIR --pause POINT [--pause POINT ...] -- ARGS``,
  that runs ``hdtwd ARGS`` (:func:`hdtwd_cli.cli.main`, as ``python -m hdtwd_cli`` does) after
  wrapping one package function per pause point. At the point, the run writes ``DIR/POINT``
  (atomically; its text says what the run holds there: a file name) and waits until the test
  creates ``DIR/POINT.go``. The test side (:func:`paused_run`) waits for the announcement, does its
  deed (a signal, a change to the input) and releases the run. Nothing depends on how fast either
  side is; the deadlines below are safety nets that turn a hung run into a failure.

  ========== ======================================================= ===========================
  point      where the run waits                                     ``DIR/POINT`` holds
  ========== ======================================================= ===========================
  reading    the input's (inode, size, mtime) has been taken, before  the input's path(s)
             its bytes are read (``io._matrix._file_state``)
  computing  the output file is open, before the distances are        the temporary output file
             computed into it (``_api._distances.tree_distances``)
  writing    the temporary output file is complete, before it is      the temporary output file
             renamed into place (``io._atomic._publish``)
  ========== ======================================================= ===========================

  Each point pauses once (its first call). A signal that arrives while the run waits is handled
  there, as between two steps of the real work: the same exception, the same clean-up.

- Dask worker faults: :class:`KillWorkers`, a worker plugin that wraps the task functions of
  :mod:`hdtwd_cli.knn._dask` in each worker process (the current ones and every restarted one: the
  scheduler hands its plugins to each worker that registers, before the worker takes tasks). Tasks
  are pickled by reference (module and name), so the worker runs whatever its module attribute
  holds: the wrapper. Before each task it looks in its fault directory: ``kill-once`` (removed
  first, so exactly one worker dies) or ``kill-always`` kills the worker process (exit 17).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

try:
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # pragma: no cover - the Dask tests are skipped then
    WorkerPlugin = object  # type: ignore[misc,assignment]

HERE = Path(__file__).resolve()
POINTS = ("reading", "computing", "writing")
#: Safety nets only, never the synchronisation: how long the test waits for an announcement (a
#: cold numba compilation on a loaded 2-core runner included) and how long a paused run waits for
#: its release (the test always releases or kills it long before).
ANNOUNCE_DEADLINE_S = 600
RELEASE_DEADLINE_S = 1200
POLL_S = 0.01


# ---------------------------------------------------------------------------------------------
# in the hdtwd process


def _pause(faults: str, point: str, detail: str) -> None:
    """Announce ``point`` in ``faults/point`` and wait for ``faults/point.go``."""
    part = os.path.join(faults, f"{point}.part")
    with open(part, "w") as fh:
        fh.write(detail)
    os.replace(part, os.path.join(faults, point))  # the test never sees a half-written announcement
    go = os.path.join(faults, f"{point}.go")
    deadline = time.monotonic() + RELEASE_DEADLINE_S
    while not os.path.exists(go):  # a signal arriving here raises here (Terminated, KeyboardInterrupt)
        if time.monotonic() > deadline:
            sys.stderr.write(f"tests/_faults.py: never released at {point}\n")
            os._exit(99)
        time.sleep(POLL_S)


def install(faults: str, points: list[str]) -> None:
    """Wrap the package function of each pause point (module attributes: the callers look them up)."""
    waiting = set(points)

    def pause_once(point: str, detail: str) -> None:
        if point in waiting:
            waiting.discard(point)
            _pause(faults, point, detail)

    if "reading" in points:
        from hdtwd_cli.io import _matrix

        file_state = _matrix._file_state

        def paused_file_state(paths: tuple[str, ...]) -> Any:
            state = file_state(paths)
            pause_once("reading", os.pathsep.join(map(str, paths)))
            return state

        _matrix._file_state = paused_file_state
    if "computing" in points:
        from hdtwd_cli._api import _distances as _api

        tree_distances = _api.tree_distances

        def paused_tree_distances(*args: Any, **kwargs: Any) -> Any:
            pause_once("computing", str(getattr(kwargs.get("out"), "filename", "") or ""))
            return tree_distances(*args, **kwargs)

        _api.tree_distances = paused_tree_distances
    if "writing" in points:
        from hdtwd_cli.io import _atomic

        publish = _atomic._publish

        def paused_publish(tmp: Any, target: Any) -> None:
            pause_once("writing", str(tmp))
            publish(tmp, target)

        _atomic._publish = paused_publish


def launcher_main(argv: list[str]) -> None:
    """``--faults DIR --pause POINT ... -- ARGS``: run ``hdtwd ARGS`` with the pause points installed."""
    if "--" not in argv:
        sys.exit("usage: _faults.py --faults DIR [--pause POINT]... -- HDTWD-ARGS...")
    split = argv.index("--")
    opts, args = argv[:split], argv[split + 1 :]
    faults, points = None, []
    while opts:
        flag, value, opts = opts[0], opts[1], opts[2:]
        if flag == "--faults":
            faults = value
        elif flag == "--pause" and value in POINTS:
            points.append(value)
        else:
            sys.exit(f"_faults.py: unknown {flag} {value}")
    if faults is None:
        sys.exit("_faults.py: --faults DIR is required")
    from hdtwd_cli.cli import main  # first, as `python -m hdtwd_cli` imports it

    install(faults, points)
    sys.argv = ["hdtwd", *args]
    main()


# ---------------------------------------------------------------------------------------------
# in the test process


class PausedRun:
    """A ``hdtwd`` subprocess started by the launcher; :meth:`wait` and :meth:`release` its points."""

    def __init__(self, proc: subprocess.Popen, faults: Path) -> None:
        self.proc = proc
        self.faults = faults

    def wait(self, point: str) -> str:
        """Block until the run announces ``point``; return what it wrote there.

        Fails (never hangs) if the run ends first or does not get there within the safety deadline."""
        flag = self.faults / point
        deadline = time.monotonic() + ANNOUNCE_DEADLINE_S
        while not flag.exists():
            if self.proc.poll() is not None:
                _, err = self.proc.communicate()
                raise AssertionError(
                    f"the run ended (exit {self.proc.returncode}) before it reached "
                    f"{point!r}:\n{err.decode(errors='replace')}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"the run did not reach {point!r} within {ANNOUNCE_DEADLINE_S} s")
            time.sleep(POLL_S)
        return flag.read_text()

    def release(self, point: str) -> None:
        (self.faults / f"{point}.go").touch()


@contextlib.contextmanager
def paused_run(
    faults: Path, *args: Any, pause: tuple[str, ...] = (), env: dict | None = None, **popen: Any
) -> Iterator[PausedRun]:
    """Start ``hdtwd ARGS`` through the launcher, pausing at ``pause``; killed on the way out if
    still running (a failed test leaves no process behind). ``faults`` must exist."""
    for point in pause:
        assert point in POINTS, point
    e = dict(os.environ, **(env or {}))
    e.pop("COLUMNS", None)
    cmd = [sys.executable, str(HERE), "--faults", str(faults)]
    for point in pause:
        cmd += ["--pause", point]
    proc = subprocess.Popen(
        [*cmd, "--", *map(str, args)],
        stdout=popen.pop("stdout", subprocess.PIPE),
        stderr=popen.pop("stderr", subprocess.PIPE),
        env=e,
        **popen,
    )
    try:
        yield PausedRun(proc, Path(faults))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


# ---------------------------------------------------------------------------------------------
# Dask workers

#: The task functions of hdtwd_cli.knn._dask that client.submit sends to the workers.
TASKS = ("_knn_pair_task", "_zarr_task", "_run")
#: The fault files a test may leave in the directory of :class:`KillWorkers`.
KILL_FILES = ("kill-once", "kill-always")


def _kill_if_asked(faults: str) -> None:
    if os.path.exists(os.path.join(faults, "kill-always")):
        os._exit(17)
    try:
        os.remove(os.path.join(faults, "kill-once"))  # atomic: one worker wins, the others go on
    except FileNotFoundError:
        return
    os._exit(17)


def _killing(task: Callable, faults: str) -> Callable:
    def run(*args: Any, **kwargs: Any) -> Any:
        _kill_if_asked(faults)
        return task(*args, **kwargs)

    run.__wrapped__ = task  # type: ignore[attr-defined]
    run.fault_dir = faults  # type: ignore[attr-defined]
    return run


def tasks_patched(faults: str) -> bool:
    """In a worker (``client.run``): whether every task function is the wrapper for ``faults``."""
    from hdtwd_cli.knn import _dask

    return all(getattr(getattr(_dask, name), "fault_dir", None) == faults for name in TASKS)


class KillWorkers(WorkerPlugin):
    """Wrap :data:`TASKS` in each worker process so that :data:`KILL_FILES` in ``faults`` kill it."""

    name = "hdtwd-test-kill-workers"

    def __init__(self, faults: str) -> None:
        self.faults = str(faults)

    def setup(self, worker: Any = None) -> None:
        from hdtwd_cli.knn import _dask

        for name in TASKS:
            task = getattr(_dask, name)
            task = getattr(task, "__wrapped__", task)  # a second setup does not wrap twice
            setattr(_dask, name, _killing(task, self.faults))


def install_on_workers(client: Any, faults: Path) -> None:
    """Register :class:`KillWorkers` for ``faults`` on the cluster of ``client`` and check that every
    worker now runs the wrappers. This module travels by value (workers need not import it)."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    client.register_plugin(KillWorkers(str(faults)))
    done = client.run(tasks_patched, str(faults))
    assert done and all(done.values()), done


@contextlib.contextmanager
def killable_cluster(faults: Path, workers: int = 2) -> Iterator[tuple[Any, Any]]:
    """A ``LocalCluster`` of single-threaded worker processes whose tasks die on request
    (:class:`KillWorkers` for ``faults``, restarted workers included), and its client.

    A killed worker's nanny starts a new one, but LocalCluster closes that nanny for good when no
    worker of its name is registered ``lost-worker-timeout`` (15 s) after ANY removal of it, a timer
    that a slow restart (a loaded runner: the 2nd and later deaths of kill-always) loses: the cluster
    would then never get its workers back. With the timer out of reach, a worker's return is a
    condition only, whatever the machine's speed.
    """
    import dask
    import distributed

    with (
        dask.config.set({"distributed.deploy.lost-worker-timeout": "1 day"}),
        distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
        ) as c,
        distributed.Client(c) as client,
    ):
        install_on_workers(client, faults)
        yield c, client


if __name__ == "__main__":
    launcher_main(sys.argv[1:])
