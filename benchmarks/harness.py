"""Shared harness of the benchmark scripts: machine facts, idle-machine waiting, timed runs, result sections.

One copy of what every ``bench_*.py`` script needs around its own measurements:

- :func:`machine_facts`, :func:`machine_summary`, :func:`machine_line`: what the numbers ran on
  (lscpu model name, nproc, total RAM, date, commit, Python / numpy / scipy / numba versions);
- :func:`cpu_busy_s`, :func:`background_cores`, :func:`wait_quiet`: the machine is shared, so
  before a timed run the scripts wait for it to be idle and afterwards report the CPU that other
  processes used during the run ("other load", in cores);
- :func:`run_timed_once`, :func:`run_timed`, :func:`least_disturbed`, :func:`parse_time_v`: a
  command under ``/usr/bin/time -v`` (wall time, peak RSS, CPU seconds), repeated while other
  processes disturbed it;
- :func:`write_section`, :func:`emit_section`: replace (or append) one ``## Issue N`` section of the
  history, :data:`HISTORY` (``benchmarks/archive/RESULTS-history.md``), only when a script is given
  ``--write``; ``benchmarks/RESULTS.md`` is written by hand;
- :func:`work_dir`, :func:`require_tools`, :func:`git_commit`, :func:`utc_stamp`,
  :func:`meminfo_bytes`: small shared plumbing.

The scripts import it as a sibling module::

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import harness  # noqa: E402
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from datasets import _check_outside_repo, cache_dir

__all__ = [
    "BACKGROUND_LIMIT_CORES",
    "HERE",
    "HISTORY",
    "REPO",
    "TIMED_ATTEMPT_FIELDS",
    "TIME_BIN",
    "background_cores",
    "cpu_busy_s",
    "git_commit",
    "least_disturbed",
    "machine_facts",
    "machine_line",
    "machine_summary",
    "meminfo_bytes",
    "parse_time_v",
    "require_tools",
    "run_timed",
    "run_timed_once",
    "utc_stamp",
    "wait_quiet",
    "emit_section",
    "work_dir",
    "write_section",
]

#: This folder (``benchmarks/``).
HERE = Path(__file__).resolve().parent
#: The repository root: the working directory of every timed command.
REPO = HERE.parent
#: Where ``--write`` puts a script's rendered ``## Issue N`` section (replacing the one of that heading):
#: the issue-by-issue history. ``RESULTS.md`` (today's figures) is curated by hand and never written.
HISTORY = HERE / "archive" / "RESULTS-history.md"
#: GNU time, for wall time, peak RSS and CPU seconds of a whole process.
TIME_BIN = "/usr/bin/time"
#: A run counts as clean when other processes used less than this many cores on average.
BACKGROUND_LIMIT_CORES = 0.10
#: The per-attempt figures :func:`run_timed` keeps under ``attempts``.
TIMED_ATTEMPT_FIELDS = ("wall_s", "user_s", "sys_s", "max_rss_MB", "background_cores")

_CLK_TCK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------ plumbing
def _sh(cmd: list[str]) -> str:
    """stdout of ``cmd``, stripped; ``"(<error>)"`` if it cannot run or fails."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except Exception as e:  # pragma: no cover - tool missing
        return f"({e})"


def work_dir(name: str) -> Path:
    """The folder ``<cache_dir>/<name>`` for a script's data and records, created if missing.

    Parameters
    ----------
    name : str
        Sub-folder of :func:`datasets.cache_dir` (``$HDTWD_BENCH_CACHE`` or ``~/.cache/hdtwd-bench``).

    Returns
    -------
    pathlib.Path
        The folder.

    Raises
    ------
    ValueError
        If the folder would lie inside the repository (nothing is cached there).
    """
    d = cache_dir() / name
    _check_outside_repo(d)
    d.mkdir(parents=True, exist_ok=True)
    return d


def require_tools() -> str:
    """Exit unless ``/usr/bin/time`` and ``hdtwd`` are available; return the ``hdtwd`` path.

    Returns
    -------
    str
        Absolute path of the ``hdtwd`` executable on ``PATH``.

    Raises
    ------
    SystemExit
        With an installation hint, when either is missing.
    """
    if not Path(TIME_BIN).exists():
        sys.exit(f"{TIME_BIN} not found; install it: apt-get update && apt-get install -y time")
    hdtwd = shutil.which("hdtwd")
    if hdtwd is None:
        sys.exit("hdtwd not on PATH; pip install -e . first")
    return hdtwd


def git_commit() -> str:
    """Short hash of the repository's ``HEAD``.

    Returns
    -------
    str
        ``git rev-parse --short HEAD`` in :data:`REPO` (the error, in parentheses, if git fails).
    """
    return _sh(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])


def utc_stamp() -> str:
    """The current UTC time as ``YYYYmmddTHHMMSSZ``, for record file names.

    Returns
    -------
    str
        E.g. ``"20261126T042856Z"``.
    """
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def meminfo_bytes(field: str = "MemTotal") -> float:
    """One field of ``/proc/meminfo``, in bytes.

    Parameters
    ----------
    field : str, default "MemTotal"
        Field name without the colon, e.g. ``"MemTotal"`` or ``"MemAvailable"``.

    Returns
    -------
    float
        The value in bytes; ``0.0`` when the field or the file is missing.
    """
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024.0
    except OSError:
        pass
    return 0.0


# ------------------------------------------------------------------ machine facts
def _blas_name() -> str:
    try:
        cfg = np.show_config(mode="dicts")  # numpy >= 1.25
        b = cfg["Build Dependencies"]["blas"]
        return f"{b.get('name')} {b.get('version')}"
    except Exception:
        return "?"


def gemm_probe(n: int = 3000, reps: int = 3) -> float:
    """The machine's float64 GEMM rate now, in GFLOPS (median of ``reps`` n x n products, both cores).

    These shared machines swing by 30-50 % between phases within an hour; recorded with a run, the
    probe tells a slow phase from a slow change.
    """
    a = np.random.default_rng(0).random((n, n))
    rates = []
    for _ in range(reps):
        t = time.perf_counter()
        a @ a
        rates.append(2 * n**3 / (time.perf_counter() - t) / 1e9)
    return float(np.median(rates))


def machine_facts(probe: bool = False) -> dict[str, Any]:
    """What a benchmark ran on, for its JSON record (with ``probe``: :func:`gemm_probe` too, ~1 s).

    Returns
    -------
    dict
        ``date_utc`` (``date -u``), ``git_commit``, ``git_dirty`` (uncommitted changes under
        ``hdtwd_cli/``), ``nproc``, ``cpu_model`` (lscpu "Model name"), ``memory`` (the ``Mem:``
        line of ``free -g``), ``mem_total_GiB`` (``MemTotal``), ``python``, ``numpy``, ``scipy``,
        ``numba``, ``numba_threads``, ``blas`` and ``env`` (the thread-count variables).
    """
    import numba
    import scipy

    lscpu = _sh(["lscpu"])
    model = re.search(r"^Model name:\s*(.+)$", lscpu, re.M)
    mem = _sh(["free", "-g"]).splitlines()
    return {
        "date_utc": _sh(["date", "-u"]),
        "git_commit": git_commit(),
        "git_dirty": bool(
            _sh(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no", "--", "hdtwd_cli"])
        ),
        "nproc": _sh(["nproc"]),
        "cpu_model": model.group(1).strip() if model else "?",
        "memory": mem[1] if len(mem) > 1 else "?",
        "mem_total_GiB": meminfo_bytes("MemTotal") / 2**30,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
        "numba_threads": numba.config.NUMBA_NUM_THREADS,
        "blas": _blas_name(),
        "env": {
            k: os.environ.get(k)
            for k in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "NUMBA_NUM_THREADS")
        },
        **({"gemm_probe_GFLOPS": gemm_probe()} if probe else {}),
    }


def _ram(facts: Mapping[str, Any]) -> str:
    """Total RAM in GiB: ``mem_total_GiB`` if recorded, else the total of the ``free -g`` line."""
    gib = facts.get("mem_total_GiB")
    if gib:
        return f"{gib:.0f} GiB"
    free_line = str(facts.get("memory", "?"))
    parts = free_line.split()
    return f"{parts[1]} GiB" if len(parts) > 1 and parts[0] == "Mem:" else free_line


def machine_summary(facts: Mapping[str, Any] | None = None) -> str:
    """The hardware in a few words: processor, cores, total RAM.

    Parameters
    ----------
    facts : mapping, optional
        A :func:`machine_facts` record (an older one without ``mem_total_GiB`` is fine);
        default: this machine now.

    Returns
    -------
    str
        E.g. ``"AMD EPYC (lscpu model name), nproc = 2, 24 GiB RAM"``.
    """
    f = machine_facts() if facts is None else facts
    return f"{f['cpu_model']} (lscpu model name), nproc = {f['nproc']}, {_ram(f)} RAM"


def machine_line(facts: Mapping[str, Any] | None = None, extra: Sequence[str] = ()) -> str:
    """The one-line markdown description of a run: date, commit, machine, versions.

    Parameters
    ----------
    facts : mapping, optional
        A :func:`machine_facts` record; default: this machine now.
    extra : sequence of str, optional
        More ``"name version"`` items, listed after Python and numpy (e.g. ``"scipy 1.17.1"``).

    Returns
    -------
    str
        ``"Run <date> at commit `<hash>`. Machine: <machine_summary>. Python <v>, numpy <v>[, extra]."``;
        " (hdtwd_cli/ had uncommitted changes)" follows the commit when ``git_dirty`` is set.
    """
    f = machine_facts() if facts is None else facts
    dirty = " (hdtwd_cli/ had uncommitted changes)" if f.get("git_dirty") else ""
    items = [f"Python {f['python']}", f"numpy {f['numpy']}", *extra]
    probe = (
        f" A float64 GEMM probe gave {f['gemm_probe_GFLOPS']:.0f} GFLOPS at the start."
        if f.get("gemm_probe_GFLOPS")
        else ""
    )
    return (
        f"Run {f['date_utc']} at commit `{f['git_commit']}`{dirty}. Machine: {machine_summary(f)}. "
        + ", ".join(items)
        + "."
        + probe
    )


# ------------------------------------------------------------------ idle machine
def cpu_busy_s() -> float:
    """System-wide busy CPU seconds since boot, all cores.

    Returns
    -------
    float
        user + nice + system + irq + softirq + steal from the first line of ``/proc/stat``
        (idle and iowait excluded), in seconds.
    """
    with open("/proc/stat") as fh:
        f = [int(x) for x in fh.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (f + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / _CLK_TCK


def background_cores(busy_s: float, own_s: float, wall_s: float) -> float:
    """Average CPU load of other processes during a measured run ("other load").

    Parameters
    ----------
    busy_s : float
        System-wide busy CPU seconds during the run (a difference of :func:`cpu_busy_s`).
    own_s : float
        CPU seconds of the measured run itself (user + sys).
    wall_s : float
        Wall time of the run.

    Returns
    -------
    float
        ``max(0, busy_s - own_s) / wall_s``, in cores.
    """
    return max(0.0, busy_s - own_s) / max(wall_s, 1e-9)


def wait_quiet(max_wait_s: float, window_s: float = 3.0, needed: int = 2) -> float:
    """Wait until the machine is idle, or until ``max_wait_s`` passed.

    Idle: other load below :data:`BACKGROUND_LIMIT_CORES` for ``needed`` consecutive windows.

    Parameters
    ----------
    max_wait_s : float
        Longest wait, in seconds (0: return at once).
    window_s : float, default 3.0
        Length of one measuring window, in seconds.
    needed : int, default 2
        Consecutive quiet windows that count as idle.

    Returns
    -------
    float
        Seconds waited (a note goes to stderr when that was more than the minimum).
    """
    t0 = time.perf_counter()
    ok = 0
    while time.perf_counter() - t0 < max_wait_s:
        b0 = cpu_busy_s()
        time.sleep(window_s)
        load = (cpu_busy_s() - b0) / window_s
        ok = ok + 1 if load < BACKGROUND_LIMIT_CORES else 0
        if ok >= needed:
            break
    waited = time.perf_counter() - t0
    if waited > 2 * needed * window_s:
        print(f"  (waited {waited:.0f} s for other processes to finish)", file=sys.stderr, flush=True)
    return waited


# ------------------------------------------------------------------ timed runs
def least_disturbed(
    run_once: Callable[[], dict[str, Any]],
    max_tries: int = 1,
    max_wait_s: float = 0.0,
    keep: Sequence[str] = TIMED_ATTEMPT_FIELDS,
) -> dict[str, Any]:
    """Repeat a measured run while other processes disturbed it; keep the least disturbed.

    Parameters
    ----------
    run_once : callable
        One measured run; returns a dict with at least ``background_cores``.
    max_tries : int, default 1
        Runs at most. A run with ``background_cores`` below :data:`BACKGROUND_LIMIT_CORES` ends it.
    max_wait_s : float, default 0.0
        Before each run, :func:`wait_quiet` up to this long (0: no waiting).
    keep : sequence of str, default TIMED_ATTEMPT_FIELDS
        Fields of every run listed under ``attempts``.

    Returns
    -------
    dict
        A copy of the run with the smallest ``background_cores``, plus ``attempts``: one dict
        of the ``keep`` fields per run, in order.
    """
    attempts: list[dict[str, Any]] = []
    for _ in range(max(1, max_tries)):
        if max_wait_s > 0:
            wait_quiet(max_wait_s)
        r = run_once()
        attempts.append(r)
        if r["background_cores"] < BACKGROUND_LIMIT_CORES:
            break
        print(
            f"  disturbed: other processes used {r['background_cores']:.2f} cores on average; retrying",
            file=sys.stderr,
            flush=True,
        )
    best = dict(min(attempts, key=lambda a: a["background_cores"]))
    best["attempts"] = [{k: a[k] for k in keep} for a in attempts]
    return best


def local_cluster(n_workers: int, **options: Any) -> Any:
    """A ``distributed.LocalCluster`` of ``n_workers`` single-threaded worker processes (numba and BLAS on one
    thread each, no dashboard, quiet logs); ``options`` go to it as well (e.g. ``memory_limit=0``)."""
    import distributed

    return distributed.LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=50,
        env={"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
        **options,
    )


def parse_time_v(text: str) -> dict[str, Any]:
    """Parse the report of ``/usr/bin/time -v``.

    Parameters
    ----------
    text : str
        What ``/usr/bin/time -v -o FILE`` wrote.

    Returns
    -------
    dict
        ``wall_s`` (Elapsed (wall clock)), ``max_rss_kb`` (Maximum resident set size), ``user_s``,
        ``sys_s`` and ``cpu_percent`` (``None`` when absent).

    Raises
    ------
    RuntimeError
        If the wall time, peak RSS or CPU times are missing.
    """
    m_wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)
    m_rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    m_user = re.search(r"User time \(seconds\): ([\d.]+)", text)
    m_sys = re.search(r"System time \(seconds\): ([\d.]+)", text)
    m_cpu = re.search(r"Percent of CPU this job got: (\d+)%", text)
    if not (m_wall and m_rss and m_user and m_sys):
        raise RuntimeError(f"could not parse /usr/bin/time output:\n{text}")
    secs = 0.0
    for part in m_wall.group(1).split(":"):
        secs = secs * 60 + float(part)
    return {
        "wall_s": secs,
        "max_rss_kb": int(m_rss.group(1)),
        "user_s": float(m_user.group(1)),
        "sys_s": float(m_sys.group(1)),
        "cpu_percent": int(m_cpu.group(1)) if m_cpu else None,
    }


def run_timed_once(cmd: list[str], log: Path, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd`` once under ``/usr/bin/time -v`` in :data:`REPO`.

    Parameters
    ----------
    cmd : list of str
        The command.
    log : pathlib.Path
        Its stdout + stderr go here; the time report to ``log.with_suffix(".time")``.
    env : mapping, optional
        The command's whole environment (default: this process's), e.g. ``cpu_kind.env_for("avx2")``.

    Returns
    -------
    dict
        ``background_cpu_s``, ``background_cores`` (other load during the run), ``cmd``,
        ``wall_s``, ``wall_s_perf_counter``, ``max_rss_kb``, ``max_rss_MB`` (10^6 bytes),
        ``user_s``, ``sys_s``, ``cpu_percent`` and ``stderr``.

    Raises
    ------
    RuntimeError
        If the command fails or the time report cannot be parsed.
    """
    tfile = log.with_suffix(".time")
    full = [TIME_BIN, "-v", "-o", str(tfile), *cmd]
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    busy0 = cpu_busy_s()
    t0 = time.perf_counter()
    proc = subprocess.run(full, capture_output=True, text=True, cwd=REPO, env=None if env is None else dict(env))
    wall_py = time.perf_counter() - t0
    busy = cpu_busy_s() - busy0
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    tv = parse_time_v(tfile.read_text())
    own = tv["user_s"] + tv["sys_s"]
    return {
        "background_cpu_s": max(0.0, busy - own),
        "background_cores": background_cores(busy, own, wall_py),
        "cmd": cmd,
        "wall_s": tv["wall_s"],
        "wall_s_perf_counter": wall_py,
        "max_rss_kb": tv["max_rss_kb"],
        "max_rss_MB": tv["max_rss_kb"] * 1024 / 1e6,
        "user_s": tv["user_s"],
        "sys_s": tv["sys_s"],
        "cpu_percent": tv["cpu_percent"],
        "stderr": proc.stderr,
    }


def stage_times(log_text: str) -> dict[str, float]:
    """``hdtwd -v``'s ``hdtwd: STAGE: N s`` lines of a run's log: stage -> seconds (the command's own account
    of where its time went; the stage profilers read it rather than the package's insides)."""
    out: dict[str, float] = {}
    for line in log_text.splitlines():
        hit = re.match(r"hdtwd: (.+): ([0-9.]+) s( to .+)?$", line)
        if hit:
            out[hit.group(1)[:80] + (hit.group(3) or "")] = float(hit.group(2))
    return out


def run_with_stages(cmd: list[str], log: Path) -> dict[str, Any]:
    """:func:`run_timed_once` of an ``hdtwd ... -v`` command, with ``stages``: its own account of where the time
    went (:func:`stage_times` of its log)."""
    run = run_timed_once(cmd, log)
    run["stages"] = stage_times(log.read_text())
    return run


def run_timed(cmd: list[str], log: Path, max_tries: int = 1, max_wait_s: float = 0.0) -> dict[str, Any]:
    """:func:`run_timed_once`, repeated while other processes disturbed it (:func:`least_disturbed`).

    Parameters
    ----------
    cmd : list of str
        The command.
    log : pathlib.Path
        Its output log (see :func:`run_timed_once`).
    max_tries : int, default 1
        Runs at most.
    max_wait_s : float, default 0.0
        Before each run, wait up to this long for an idle machine.

    Returns
    -------
    dict
        The least disturbed run's figures, with every run's under ``attempts``.
    """
    return least_disturbed(lambda: run_timed_once(cmd, log), max_tries, max_wait_s)


# ------------------------------------------------------------------ the history (RESULTS-history.md)
def _level(line: str) -> int:
    """Markdown heading level of ``line`` (0 if it is not a heading)."""
    m = re.match(r"(#{1,6})\s", line)
    return len(m.group(1)) if m else 0


def write_section(results_md: Path, section: str, heading: str) -> None:
    """Replace (or append) one section of a results file, leaving the rest byte for byte.

    Parameters
    ----------
    results_md : pathlib.Path
        The markdown file, normally :data:`HISTORY` (created with a ``# Benchmark results`` title if missing).
    section : str
        The new section, its heading line first.
    heading : str
        The heading line that starts the section to replace, e.g. ``"## Issue 2: ..."``. The
        section runs up to the next heading of the same or a higher level (lines in fenced code
        blocks do not count) or the end of the file. Without such a line the section is appended.

    Raises
    ------
    ValueError
        If ``heading`` is not a markdown heading line.
    """
    level = _level(heading)
    if not level:
        raise ValueError(f"not a markdown heading: {heading!r}")
    text = results_md.read_text() if results_md.exists() else "# Benchmark results\n"
    lines = text.splitlines(keepends=True)
    fenced = False
    start: int | None = None
    end = len(lines)
    for i, ln in enumerate(lines):
        if ln.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if start is None:
            if ln.rstrip() == heading.rstrip():
                start = i
        elif 0 < _level(ln) <= level:
            end = i
            break
    if start is None:
        new = text.rstrip("\n") + "\n\n" + section
    else:
        tail = "".join(lines[end:])
        new = "".join(lines[:start]) + section + ("\n" + tail if tail else "")
    results_md.write_text(new.rstrip("\n") + "\n")


def emit_section(text: str, heading: str, write: bool) -> None:
    """Print a rendered section; with ``write``, also put it in place of ``heading``'s in :data:`HISTORY`."""
    print(text)
    if write:
        write_section(HISTORY, text, heading)
        print(f"updated {HISTORY}", file=sys.stderr)


def best_k(runs: Sequence[Sequence[float]]) -> tuple[float, float]:
    """Best-k mean accuracy over splits (rows: splits, columns: k) and the std over splits at that k."""
    a = np.array(runs)
    m = a.mean(axis=0)
    i = int(np.argmax(m))
    return float(m[i]), float(a[:, i].std(ddof=1)) if a.shape[0] > 1 else 0.0


def accuracy_table(reports: Sequence[Mapping[str, Any]], heading: str) -> list[str]:
    """Markdown rows: one per key of ``report["acc"][label_set]`` (baselines last), one column per label set."""
    cols = [(r, ls) for r in reports for ls in r["acc"]]
    keys = list(dict.fromkeys(k for r, ls in cols for k in r["acc"][ls]))
    keys = [k for k in keys if not k.startswith("baseline")] + [k for k in keys if k.startswith("baseline")]
    lines = [f"| {heading} | " + " | ".join(ls for _, ls in cols) + " |", "|---|" + "---|" * len(cols)]
    for key in keys:
        cells = []
        for r, ls in cols:
            v = r["acc"][ls].get(key)
            cells.append(f"{best_k(v)[0]:.1f} ± {best_k(v)[1]:.1f}" if v else "-")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return lines


def per_set_main(
    run: Callable[[str], dict], markdown: Callable[[list[dict]], str], workdir: str, default_sets: str
) -> None:
    """``--sets a,b`` runs ``run(set)`` into ``work_dir(workdir)/SET.json``; ``--markdown`` only prints
    ``markdown`` of the cached reports (of the sets that have one)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default=default_sets)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    out = work_dir(workdir)
    sets = args.sets.split(",")
    if not args.markdown:
        for name in sets:
            (out / f"{name}.json").write_text(json.dumps(run(name)))
    print(markdown([json.loads((out / f"{n}.json").read_text()) for n in sets if (out / f"{n}.json").exists()]))


def resolve_params(preset: str = "default", seed: int = 0, **overrides: Any) -> tuple[Any, str]:
    """A preset's tree parameters with explicit values (not None) winning, and its data transform: the
    public :meth:`hdtwd_cli.TreeParams.from_preset`, as the command line's options resolve."""
    import hdtwd_cli as hd

    params = hd.TreeParams.from_preset(preset, seed=seed, **overrides)
    return params, params.transform
