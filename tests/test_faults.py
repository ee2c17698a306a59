"""Faults while writing and reading, each through a real subprocess.

A full disk (RLIMIT_FSIZE), a read-only directory, SIGKILL and SIGTERM at the moment the output is
being put in place, two runs writing one file, outputs that are directories or FIFOs, an input
that changes while it is read. In every case: the earlier output survives byte for byte or one
complete new file replaces it, no temporary file is left, errors are one line with the documented
exit code.
"""

import os
import resource
import signal
import subprocess
import sys

import numpy as np
import pytest
from _faults import paused_run
from conftest import run_hdtwd


def _data(tmp_path, n=60, m=8, seed=0, name="x.npy"):
    rng = np.random.default_rng(seed)
    X = rng.poisson(2.0, size=(n, m)).astype(float) + (rng.random((n, m)) < 0.1)
    X[:, 0] += 1
    p = tmp_path / name
    np.save(p, X)
    return p


def _leftovers(folder):
    return sorted(f for f in os.listdir(folder) if "hdtwd-tmp" in f)


def _popen(*args, env=None, **kw):
    e = dict(os.environ, **(env or {}))
    e.pop("COLUMNS", None)
    return subprocess.Popen(
        [sys.executable, "-m", "hdtwd_cli", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=e,
        **kw,
    )


def _one_line(stderr: bytes) -> str:
    text = stderr.decode()
    assert "Traceback" not in text
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1, text
    return lines[0]


def test_disk_full_keeps_the_previous_output(tmp_path):
    data = _data(tmp_path, n=200)
    out = tmp_path / "D.npy"
    run_hdtwd("distance", data, "-o", tmp_path / "warm.npy", "-q")  # compiled kernels cached first
    out.write_bytes(b"previous result")
    limit = 64 * 1024  # the 200 x 200 float64 matrix needs 320 kB

    def small_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [sys.executable, "-m", "hdtwd_cli", "distance", str(data), "-o", str(out), "-q"],
        capture_output=True,
        preexec_fn=small_disk,
        timeout=300,
    )
    assert proc.returncode == 3
    line = _one_line(proc.stderr)
    assert str(out) in line and "cannot write" in line
    assert out.read_bytes() == b"previous result"
    assert _leftovers(tmp_path) == []


@pytest.fixture
def tmpfs(tmp_path):
    """A mount point for a small tmpfs (root only, where mounting is allowed), unmounted afterwards."""
    point = tmp_path / "mnt"
    point.mkdir()
    mounted = []

    def mount(options):
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True)
        if r.returncode != 0:
            pytest.skip(
                f"cannot mount a tmpfs here ({r.stderr.decode().strip() or 'not root'}): "
                "the fault needs a file system of its own"
            )
        mounted.append(point)
        return point

    yield mount
    for p in mounted:
        subprocess.run(["umount", str(p)], capture_output=True)


def test_full_file_system_keeps_the_previous_output(tmp_path, tmpfs):
    data = _data(tmp_path, n=200)
    run_hdtwd("distance", data, "-o", tmp_path / "warm.npy", "-q")
    disk = tmpfs("size=128k")
    out = disk / "D.npy"
    out.write_bytes(b"previous result")
    (disk / "filler").write_bytes(b"\0" * 16384)  # leaves less than the 320 kB the matrix needs
    proc = run_hdtwd("distance", data, "-o", out, "-q", check=False)
    assert proc.returncode == 3
    line = _one_line(proc.stderr)
    assert str(out) in line and "cannot write" in line
    assert out.read_bytes() == b"previous result"
    assert _leftovers(disk) == []


def test_read_only_directory_is_refused_before_any_work(tmp_path, tmpfs):
    data = _data(tmp_path)
    if os.geteuid() == 0:  # root writes into any directory whatever its mode: use a read-only file system
        ro = tmpfs("ro,size=64k")
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        os.chmod(ro, 0o555)
    try:
        proc = run_hdtwd("distance", data, "-o", ro / "D.npy", check=False)
    finally:
        if os.geteuid() != 0:
            os.chmod(ro, 0o755)
    assert proc.returncode == 3
    line = _one_line(proc.stderr)
    assert "not writable" in line and str(ro / "D.npy") in line
    assert os.listdir(ro) == []


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGKILL, -9)])
def test_killed_while_writing_keeps_the_old_file(tmp_path, sig, code):
    data = _data(tmp_path)
    out = tmp_path / "D.npy"
    out.write_bytes(b"previous result")
    faults = tmp_path / "faults"
    faults.mkdir()
    # handshake (tests/_faults.py): the run announces its complete temporary file just before the
    # rename and waits; the signal reaches it there, whatever the machine's speed
    with paused_run(faults, "distance", data, "-o", out, "-q", pause=("writing",)) as run:
        tmp_file = run.wait("writing")
        assert os.path.exists(tmp_file)  # the complete temporary file, not yet renamed
        run.proc.send_signal(sig)
        run.release("writing")  # moot once the signal has ended the run; never a hang if it did not
        _, err = run.proc.communicate(timeout=120)
    assert run.proc.returncode == code
    assert out.read_bytes() == b"previous result"
    if sig == signal.SIGTERM:
        line = _one_line(err)
        assert line == "hdtwd: terminated (SIGTERM); no output written"
        assert _leftovers(tmp_path) == []
    else:  # no handler runs on SIGKILL: the next run writing the same output removes the leftover
        assert _leftovers(tmp_path) == [os.path.basename(tmp_file)]
        run_hdtwd("distance", data, "-o", out, "-q")
        assert _leftovers(tmp_path) == []
        assert np.load(out).shape == (60, 60)


@pytest.mark.parametrize("point", ["reading", "computing"])
def test_sigterm_during_computation_exits_143_and_leaves_nothing(tmp_path, point):
    # The data go through a real pipe (spooled to a private file under TMPDIR). Handshake
    # (tests/_faults.py): the run announces that it is reading its spooled copy, or computing into
    # its open temporary output, and waits there; the test sends SIGTERM at that moment, then
    # releases it (moot once the signal has ended the run; a run that ignored it finishes and fails
    # the exit-code assertion instead of hanging).
    data = _data(tmp_path, n=300, m=40)
    out = tmp_path / "D.npy"
    spool = tmp_path / "spool"
    spool.mkdir()
    faults = tmp_path / "faults"
    faults.mkdir()
    r, w = os.pipe()
    with paused_run(
        faults, "distance", "-", "-o", out, "-q", pause=(point,), env={"TMPDIR": str(spool)}, stdin=r
    ) as run:
        os.close(r)
        with open(w, "wb") as pipe:
            pipe.write(data.read_bytes())
        held = run.wait(point)
        if point == "reading":
            assert held.startswith(str(spool)) and os.path.exists(held)  # the spooled copy of standard input
        else:
            assert _leftovers(tmp_path) == [os.path.basename(held)]  # the output being computed into
        assert run.proc.poll() is None, "the run ended before it could be interrupted"
        run.proc.send_signal(signal.SIGTERM)
        run.release(point)
        _, err = run.proc.communicate(timeout=120)
    assert run.proc.returncode == 143, err.decode()
    assert _one_line(err) == "hdtwd: terminated (SIGTERM); no output written"
    assert not out.exists() and _leftovers(tmp_path) == []
    assert list(spool.iterdir()) == []  # the spooled copy of standard input is gone too


def test_two_runs_writing_one_file_leave_one_complete_result(tmp_path):
    a, b = _data(tmp_path, seed=1, name="a.npy"), _data(tmp_path, seed=2, name="b.npy")
    run_hdtwd("distance", a, "-o", tmp_path / "Da.npy", "-q")
    run_hdtwd("distance", b, "-o", tmp_path / "Db.npy", "-q")
    want = {(tmp_path / "Da.npy").read_bytes(), (tmp_path / "Db.npy").read_bytes()}
    assert len(want) == 2
    out = tmp_path / "D.npy"
    for _ in range(3):
        procs = [_popen("distance", p, "-o", out, "-q") for p in (a, b)]
        for p in procs:
            p.communicate(timeout=300)
            assert p.returncode == 0
        assert out.read_bytes() in want
        assert _leftovers(tmp_path) == []


def test_output_that_is_a_directory_or_a_fifo_is_refused(tmp_path):
    data = _data(tmp_path)
    (tmp_path / "D.npy").mkdir()
    proc = run_hdtwd("distance", data, "-o", tmp_path / "D.npy", check=False)
    assert proc.returncode == 3 and "is a directory" in _one_line(proc.stderr)
    fifo = tmp_path / "pipe.npy"
    os.mkfifo(fifo)
    proc = run_hdtwd("distance", data, "-o", fifo, check=False)  # must not block on the FIFO
    assert proc.returncode == 3 and "not a regular file" in _one_line(proc.stderr)
    assert _leftovers(tmp_path) == []


def test_input_from_a_fifo_is_read_like_standard_input(tmp_path):
    data = _data(tmp_path)
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    proc = _popen("distance", fifo, "-o", tmp_path / "D.npy", "-q")
    with open(fifo, "wb") as fh:
        fh.write(data.read_bytes())
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    run_hdtwd("distance", data, "-o", tmp_path / "D_ref.npy", "-q")
    assert np.array_equal(np.load(tmp_path / "D.npy"), np.load(tmp_path / "D_ref.npy"))


def test_input_changed_while_read_is_an_error(tmp_path):
    rng = np.random.default_rng(0)
    n, m = 2_000, 40
    path = tmp_path / "big.csv"
    with open(path, "w") as fh:
        fh.write(",".join(f"g{j}" for j in range(m)) + "\n")
        block = rng.integers(0, 9, size=(n, m))
        fh.write("\n".join(",".join(map(str, r)) for r in block) + "\n")
    out = tmp_path / "D.npy"
    faults = tmp_path / "faults"
    faults.mkdir()
    # handshake (tests/_faults.py): the reader has taken the file's (inode, size, mtime) and waits
    # before reading it; the test changes the file under it, then releases it
    with paused_run(faults, "distance", path, "-o", out, "-q", pause=("reading",)) as run:
        assert run.wait("reading") == str(path)
        with open(path, "a") as fh:
            fh.write(",".join(["1"] * m) + "\n")
        run.release("reading")
        _, err = run.proc.communicate(timeout=300)
    assert run.proc.returncode == 2, err.decode()
    line = _one_line(err)
    assert str(path) in line and "changed while it was being read" in line
    assert not out.exists() and _leftovers(tmp_path) == []
