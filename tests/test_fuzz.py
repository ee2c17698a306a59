"""Every reader fuzzed: damaged copies of a valid file in every input format never end in an internal error.

Seeded mutations (tests/_fuzz.py) of small valid files, each run through the command that reads it
in a forked child of one warm interpreter: a documented exit code with one ``hdtwd: error:`` line,
or a valid result; never exit 1, a traceback, a crash, a hang, a partial output or a temporary
file left behind. The same cases every run (fixed seeds); the long run with other seeds is
``benchmarks/fuzz_readers.py``.
"""

import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest
from _fuzz import Server, cases, limit_files, seed_files

#: Damaged copies per input format (about 20 formats): a few hundred cases.
PER_SEED = 10


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return seed_files(tmp_path_factory.mktemp("seeds"))


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.close()


def test_the_seed_files_are_read_successfully(seeds, server, tmp_path):
    """The undamaged files run (else the damaged ones prove nothing)."""
    from _fuzz import verdict

    for seed in seeds:
        out = tmp_path / seed.name
        out.mkdir()
        argv = [a.replace("{F}", str(seed.path)).replace("{OUT}", str(out)) for a in seed.argv]
        rc = server.run(argv, tmp_path, tmp_path / "err.txt")
        text = (tmp_path / "err.txt").read_text()
        assert rc == 0 and verdict(rc, text, out, seed.output, seed.symmetric) is None, (seed.name, rc, text)


@pytest.mark.parametrize("part", [0, 1])
def test_damaged_inputs_get_one_line_and_a_documented_exit(seeds, server, tmp_path, part):
    half = seeds[part::2]
    found = list(cases(half, tmp_path, PER_SEED, rng_seed=2026 + part, server=server))
    assert len(found) == PER_SEED * len(half)
    bad = [f"{c.seed}#{c.index} ({c.damage}): {c.problem}" for c in found if c.problem]
    assert not bad, "\n".join(bad)
    exits = Counter(c.rc for c in found)
    assert exits[2] > 0  # the damage is real: most cases are refused


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux's prlimit")
def test_inputs_claiming_more_than_memory_are_refused_at_once_under_an_address_space_limit(tmp_path):
    """Headers and attributes that claim 10^9 x 10^9, 10^11 stored entries, a Newick 10^6 deep, a gzip
    bomb: exit 2 or 4 with one line, no output, under ``prlimit --as`` (an allocation the limit refused
    would show as exit 4 with an out-of-memory line, a killed process as a signal)."""
    (tmp_path / "in").mkdir()
    for case in limit_files(tmp_path / "in"):
        out = tmp_path / "out"
        out.mkdir()
        argv = [s.replace("{OUT}", str(out)) for s in case.argv]
        cmd = ["prlimit", f"--as={3 * 10**9}", sys.executable, "-m", "hdtwd_cli", *argv]
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **dict(case.env)))
        lines = r.stderr.strip().splitlines()
        assert r.returncode in (2, 4), (case.name, r.returncode, r.stderr[-500:])
        assert len(lines) == 1 and lines[0].startswith("hdtwd: error: "), (case.name, r.stderr[-500:])
        assert "out of memory" not in lines[0], (case.name, lines[0])  # refused by a check, not by a failed allocation
        assert list(out.iterdir()) == [], case.name
        out.rmdir()
