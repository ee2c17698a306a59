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


def test_readme_examples_run(tmp_path):
    cmds = readme_commands()
    assert len(cmds) >= 10
    shutil.copytree(REPO / "sample_data", tmp_path / "sample_data")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "hdtwd").write_text(f'#!/bin/sh\nexec {sys.executable} -m hdtwd_cli "$@"\n')
    (bindir / "hdtwd").chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    for cmd in cmds:
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, timeout=300
        )
        # a closed pipe (`| head`) is not a failure of the example
        assert proc.returncode in (0, 141), f"{cmd}\n{proc.stderr.decode()}"
    assert (tmp_path / "D.npy").exists() and (tmp_path / "tree.nwk").exists()
    assert (tmp_path / "tree.png").stat().st_size > 10_000 and (tmp_path / "report.png").stat().st_size > 10_000
