"""Every malformed input of bad_inputs.CASES through a real subprocess: one stderr line, exit code, no output."""

import hashlib
import os
from pathlib import Path

import pytest
from bad_inputs import CASES
from conftest import run_hdtwd


def _digests(paths: list) -> dict:
    """SHA-256 of every regular file among ``paths`` (directories: every file below them)."""
    out = {}
    for p in map(Path, paths):
        files = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else []
        for f in files:
            out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def test_the_table_is_big_enough():
    assert len(CASES) >= 70


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(tmp_path, case, monkeypatch):
    cid, what, setup, code, needle = case
    # Dask's own setting: how long an unreachable scheduler is retried (the command's default is Dask's, 30 s)
    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", "2s")
    argv = setup(tmp_path)
    before = {p.name for p in tmp_path.rglob("*")}
    inputs = _digests([a for a in argv if isinstance(a, Path) or (isinstance(a, str) and os.path.exists(a))])
    proc = run_hdtwd(*argv, input=b"", check=False)
    err = proc.stderr.decode()
    assert proc.returncode == code, err
    assert needle in err, err
    assert "Traceback" not in err
    if code != 0:
        assert len(err.strip().splitlines()) == 1, err
        after = {p.name for p in tmp_path.rglob("*")}
        assert after == before, f"left behind: {after - before}"
    else:
        assert proc.returncode == 0
    assert _digests(list(inputs)) == inputs, "an input file was changed"


def test_the_documented_table_is_the_cases_table():
    """docs/bad-inputs.md is generated from CASES (``python tests/bad_inputs.py > docs/bad-inputs.md``): one row
    per case, in order, with its exit code (the messages themselves are checked by test_bad_input)."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "bad-inputs.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| ") and not line.startswith("| what the user")]
    assert len(rows) == len(CASES), "regenerate: python tests/bad_inputs.py > docs/bad-inputs.md"
    for row, (cid, what, _setup, code, _needle) in zip(rows, CASES):
        assert row.startswith(f"| {what.replace('|', chr(92) + '|')} | {code} | "), (cid, row)
