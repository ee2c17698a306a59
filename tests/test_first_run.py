"""A newcomer's first run: one stderr line while numba compiles the kernels it has not cached, none later.

The state is numba's on-disk cache: an empty ``NUMBA_CACHE_DIR`` is a first run, the same folder
afterwards a later one. The line comes from a cache miss (``jit.on_first_compile``), not from a clock.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from hdtwd_cli._runtime import jit
from hdtwd_cli.cli._options import COMPILING, OUTPUT, command


def _run(args: list[str], cache: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    return subprocess.run(
        [sys.executable, "-m", "hdtwd_cli", *args], env=env, capture_output=True, text=True, timeout=600
    )


def test_the_compile_line_appears_on_the_first_run_only(tmp_path):
    # large enough for the compiled kernels (smaller inputs take their NumPy twins and compile nothing)
    X = np.random.default_rng(0).poisson(1.0, (600, 300)).astype(np.float64)
    np.save(tmp_path / "X.npy", X)
    cache = str(tmp_path / "numba-cache")
    first = _run(["distance", str(tmp_path / "X.npy"), "-o", str(tmp_path / "D1.npy")], cache)
    assert first.returncode == 0, first.stderr
    assert first.stderr.splitlines().count(COMPILING) == 1, first.stderr
    assert os.listdir(cache), "numba cached nothing"
    again = _run(["distance", str(tmp_path / "X.npy"), "-o", str(tmp_path / "D2.npy")], cache)
    assert again.returncode == 0, again.stderr
    assert COMPILING not in again.stderr, again.stderr
    assert np.load(tmp_path / "D1.npy").tobytes() == np.load(tmp_path / "D2.npy").tobytes()


def test_quiet_and_the_python_api_never_announce():
    seen = []

    @command(OUTPUT)
    def body(o: object = None) -> None:
        seen.append(jit._ON_COMPILE)

    jit.on_first_compile(None)
    try:
        body(quiet=True, verbose=0)
        body(quiet=False, verbose=0)
    finally:
        jit.on_first_compile(None)
    assert seen[0] is None and callable(seen[1])
    assert jit._ON_COMPILE is None  # a library call never prints it


def test_a_miss_calls_the_callback_once_per_process(monkeypatch):
    calls = []
    monkeypatch.setattr(jit, "_ANNOUNCED", False)
    jit.on_first_compile(lambda: calls.append(1))
    try:
        jit._compiling()
        jit._compiling()
    finally:
        jit.on_first_compile(None)
    assert calls == [1]
