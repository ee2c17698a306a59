"""Every malformed input of bad_inputs.CASES through a real subprocess: one stderr line, exit code, no output."""

import pytest

from bad_inputs import CASES
from conftest import run_hdtwd


def test_the_table_is_big_enough():
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(tmp_path, case):
    cid, what, setup, code, needle = case
    argv = setup(tmp_path)
    before = {p.name for p in tmp_path.rglob("*")}
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
