"""Standard input and output through real pipes (CliRunner's BytesIO stdin would hide seek bugs)."""

import io
import os
import subprocess
import sys

import numpy as np
from conftest import SAMPLE, run_hdtwd


def parse_table(text: str, sep: str = "\t") -> np.ndarray:
    rows = text.strip().splitlines()[1:]
    return np.array([[float(v) for v in r.split(sep)[1:]] for r in rows])


def test_stdin_csv_to_stdout_tsv_equals_file_result(tmp_path):
    run_hdtwd("distance", SAMPLE / "produce.csv", "-o", tmp_path / "D.npy")
    proc = run_hdtwd("distance", "-", "-o", "-", input=(SAMPLE / "produce.csv").read_bytes())
    D = parse_table(proc.stdout.decode())
    assert np.array_equal(D, np.load(tmp_path / "D.npy"))
    assert proc.stderr == b""  # no progress mixed in when stderr is not a terminal


def test_binary_formats_from_a_pipe_are_sniffed(tmp_path):
    ref = tmp_path / "ref.npy"
    run_hdtwd("distance", SAMPLE / "corpus.npz", "-o", ref)
    for name in ("corpus.npz", "corpus.mtx"):
        out = tmp_path / f"{name}.npy"
        run_hdtwd("distance", "-", "-o", out, input=(SAMPLE / name).read_bytes())
        assert np.array_equal(np.load(out), np.load(ref))
    X = np.random.default_rng(0).poisson(2.0, size=(12, 6)).astype(float) + 1
    buf = io.BytesIO()
    np.save(buf, X)
    proc = run_hdtwd("distance", "-", "-o", "-", "--output-format", "npy", input=buf.getvalue())
    D = np.load(io.BytesIO(proc.stdout))
    assert D.shape == (12, 12) and np.all(np.diag(D) == 0)


def test_h5ad_from_a_pipe_with_explicit_format(tmp_path):
    out = tmp_path / "D.csv"
    run_hdtwd("distance", "-", "--format", "h5ad", "-o", out, input=(SAMPLE / "cells.h5ad").read_bytes())
    assert out.read_text().splitlines()[0].split(",")[1] == "cell000"


def test_empty_stdin_is_one_line_error():
    proc = run_hdtwd("distance", "-", "-o", "-", input=b"", check=False)
    assert proc.returncode == 2 and proc.stderr.decode().strip() == "hdtwd: error: <stdin>: standard input is empty"


def test_binary_output_to_a_terminal_is_refused():
    import pty

    master, slave = os.openpty() if hasattr(os, "openpty") else pty.openpty()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "hdtwd_cli",
                "distance",
                str(SAMPLE / "produce.csv"),
                "-o",
                "-",
                "--output-format",
                "npy",
            ],
            stdout=slave,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 3
    assert b"refusing to write binary .npy data to a terminal" in proc.stderr


def test_reader_closing_the_pipe_is_not_an_error():
    p1 = subprocess.Popen(
        [sys.executable, "-m", "hdtwd_cli", "distance", str(SAMPLE / "corpus.npz"), "-o", "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = p1.stdout.read(10)
    p1.stdout.close()
    err = p1.stderr.read()
    p1.wait(timeout=120)
    assert first and b"Traceback" not in err and b"internal error" not in err


def test_ctrl_c_leaves_no_partial_output(tmp_path):
    import signal

    from _faults import paused_run

    rng = np.random.default_rng(0)
    X = rng.poisson(1.0, size=(300, 2000)).astype(float) + (rng.random((300, 2000)) < 0.01)
    X[:, X.sum(axis=0) == 0] = 1
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "D.npy"
    out.write_bytes(b"previous result")  # an earlier output must survive an interrupted run
    faults = tmp_path.parent / f"{tmp_path.name}-faults"
    faults.mkdir()
    # handshake (tests/_faults.py): the run announces its finished temporary file and waits before
    # the rename; Ctrl-C reaches it there, then the test releases it (moot once it has ended)
    with paused_run(
        faults,
        "distance",
        tmp_path / "x.npy",
        "-o",
        out,
        pause=("writing",),
        stdout=None,
        # a shell's background job inherits SIGINT ignored: give the child the
        # terminal's default, as Ctrl-C in a foreground shell would find it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as run:
        run.wait("writing")
        run.proc.send_signal(signal.SIGINT)
        run.release("writing")
        _, err = run.proc.communicate(timeout=120)
    assert run.proc.returncode == 130, err.decode()
    assert b"interrupted" in err and b"Traceback" not in err
    assert out.read_bytes() == b"previous result"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D.npy", "x.npy"]
