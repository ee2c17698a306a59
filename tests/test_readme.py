"""Every `hdtwd` example in the README and the docs' pages runs (from a copy of the repository's sample_data)."""

import os
import re
import shutil
import subprocess
import sys

from conftest import REPO

DOC_PAGES = ["README.md", "docs/usage.md", "docs/python.md", "docs/classify.md", "docs/plots.md"]


def readme_commands() -> list[str]:
    text = "\n".join((REPO / page).read_text() for page in DOC_PAGES)
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    cmds = []
    for block in blocks:
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("hdtwd ") or line.startswith("cat "):
                cmds.append(line)
    return cmds


def _git(*args: str, cwd) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def test_readme_examples_run(tmp_path):
    """Every example runs, in a git work tree holding sample_data/ and the repository's .gitignore, as a
    fresh clone does; afterwards `git status` is clean: every file the examples write is ignored."""
    cmds = readme_commands()
    assert len(cmds) >= 10
    clone = tmp_path / "clone"
    shutil.copytree(REPO / "sample_data", clone / "sample_data")
    shutil.copy(REPO / ".gitignore", clone / ".gitignore")
    git = shutil.which("git") is not None
    if git:
        _git("init", "-q", cwd=clone)
        _git("add", ".gitignore", "sample_data", cwd=clone)
        _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "clone", cwd=clone)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "hdtwd").write_text(f'#!/bin/sh\nexec {sys.executable} -m hdtwd_cli "$@"\n')
    (bindir / "hdtwd").chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    for cmd in cmds:
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c", cmd], cwd=clone, env=env, capture_output=True, timeout=300
        )
        # a closed pipe (`| head`) is not a failure of the example
        assert proc.returncode in (0, 141), f"{cmd}\n{proc.stderr.decode()}"
    assert (clone / "D.npy").exists() and (clone / "tree.nwk").exists()
    assert (clone / "tree.png").stat().st_size > 10_000 and (clone / "report.png").stat().st_size > 10_000
    if git:  # the examples' outputs are all ignored (.gitignore): a clone stays clean
        left = _git("status", "--porcelain", "--untracked-files=all", cwd=clone)
        assert left == "", f"files the examples leave that .gitignore does not list:\n{left}"
