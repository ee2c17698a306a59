"""Every malformed input of bad_inputs.CASES through a real subprocess: one stderr line, exit code, no output.

The subprocesses are forked children of one warm interpreter (tests/_fuzz.py's fork server, as for the damaged
files): each case runs ``hdtwd``'s own entry point in a process of its own, with an empty standard input, and
ends with its own exit status, without paying the interpreter's and the imports' start for each of the cases.
docs/bad-inputs.md is generated through fresh ``python -m hdtwd_cli`` processes (tests/bad_inputs.py).
"""

import hashlib
import os
from pathlib import Path

import pytest
from _fuzz import Server
from bad_inputs import CASES


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


@pytest.fixture(scope="module")
def server():
    env = dict(os.environ)
    env.pop("COLUMNS", None)  # usage messages as in any terminal (conftest.run_hdtwd does the same)
    # Dask's own setting: how long an unreachable scheduler is retried (the command's default is Dask's, 30 s)
    env["DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT"] = "2s"
    s = Server(env)
    yield s
    s.close()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(tmp_path, case, server):
    cid, what, setup, code, needle = case
    argv = [str(a) for a in setup(tmp_path)]
    before = {p.name for p in tmp_path.rglob("*")}
    inputs = _digests([a for a in argv if os.path.exists(a)])
    stderr = tmp_path.parent / f"{tmp_path.name}.stderr"  # beside the case's folder, not in it
    returncode = server.run(argv, Path.cwd(), stderr)
    err = stderr.read_text()
    assert returncode == code, err
    assert needle in err, err
    assert "Traceback" not in err
    if code != 0:
        assert len(err.strip().splitlines()) == 1, err
        after = {p.name for p in tmp_path.rglob("*")}
        assert after == before, f"left behind: {after - before}"
    else:
        assert returncode == 0
    assert _digests(list(inputs)) == inputs, "an input file was changed"


def test_the_documented_table_is_the_cases_table():
    """docs/bad-inputs.md is generated from CASES (``python tests/bad_inputs.py > docs/bad-inputs.md``): one row
    per case, in order, with its exit code (the messages themselves are checked by test_bad_input)."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "bad-inputs.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| ") and not line.startswith("| what the user")]
    assert len(rows) == len(CASES), "regenerate: python tests/bad_inputs.py > docs/bad-inputs.md"
    for row, (cid, what, _setup, code, _needle) in zip(rows, CASES):
        assert row.startswith(f"| {what.replace('|', chr(92) + '|')} | {code} | "), (cid, row)
