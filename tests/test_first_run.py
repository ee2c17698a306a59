"""A newcomer's first run: one stderr line (at a terminal) while numba compiles uncached kernels, none later.

The state is numba's on-disk cache: an empty ``NUMBA_CACHE_DIR`` is a first run, the same folder
afterwards a later one. The line comes from a cache miss (``jit.on_first_compile``), not from a clock.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading

import numpy as np

from hdtwd_cli._runtime import jit
from hdtwd_cli.cli._options import COMPILING, OUTPUT, command


def _run(args: list[str], cache: str, terminal: bool) -> tuple[int, str]:
    """The command's exit code and stderr; with ``terminal`` its stderr is a pseudo-terminal (a person's
    shell), read by a thread until the command closes it (end of file: no sleeps, no timing)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, COLUMNS="400")  # a wide terminal: rich wraps no line
    cmd = [sys.executable, "-m", "hdtwd_cli", *args]
    if not terminal:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        return proc.returncode, proc.stderr
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        code = proc.wait(timeout=600)
        reader.join(timeout=600)
    finally:
        os.close(master)
    return code, b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")


def test_the_compile_line_appears_on_the_first_run_only(tmp_path):
    # large enough for the compiled kernels (smaller inputs take their NumPy twins and compile nothing)
    X = np.random.default_rng(0).poisson(1.0, (600, 300)).astype(np.float64)
    np.save(tmp_path / "X.npy", X)
    cache = str(tmp_path / "numba-cache")
    code, err = _run(["distance", str(tmp_path / "X.npy"), "-o", str(tmp_path / "D1.npy")], cache, True)
    assert code == 0, err
    assert err.count(COMPILING) == 1, err
    assert os.listdir(cache), "numba cached nothing"
    code, err = _run(["distance", str(tmp_path / "X.npy"), "-o", str(tmp_path / "D2.npy")], cache, True)
    assert code == 0, err
    assert COMPILING not in err, err
    assert np.load(tmp_path / "D1.npy").tobytes() == np.load(tmp_path / "D2.npy").tobytes()


def test_a_pipeline_never_sees_the_compile_line(tmp_path):
    """stderr not a terminal (a pipeline, a script, CI): a cold cache adds nothing, so an error stays one line."""
    X = np.random.default_rng(0).poisson(1.0, (600, 300)).astype(np.float64)
    np.save(tmp_path / "X.npy", X)
    code, err = _run(["distance", str(tmp_path / "X.npy"), "-o", str(tmp_path / "D.npy")], str(tmp_path / "c"), False)
    assert code == 0 and err == "", err
    assert os.listdir(tmp_path / "c"), "numba cached nothing: this was not a first run"


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
