"""Run the README's "Install and run" and "First steps" shell blocks as a new user would.

Each line of those ```sh blocks runs with bash in a fresh temporary folder holding a copy of
sample_data/ and the repository's .gitignore (a git work tree, as a clone), after exactly the README's
install (``pip install .``, run on this checkout). A line that fails stops the script with its command
and stderr (exit 1), and so does a file the steps leave that ``git status`` shows. CI (.ci/run) runs this in a
virtual environment that has nothing but that install.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("## Install and run", "## First steps")


def commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    out = []
    for title in SECTIONS:
        body = text.split(title, 1)[1].split("\n## ", 1)[0]
        for block in re.findall(r"```sh\n(.*?)```", body, flags=re.S):
            out += [line.strip() for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return out


def main() -> None:
    cmds = commands()
    if not any(c.startswith("pip install .") for c in cmds) or not any("hdtwd plot" in c for c in cmds):
        sys.exit("README: the install line or the first steps are not where this script looks")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(REPO / "sample_data", Path(tmp) / "sample_data")
        shutil.copy(REPO / ".gitignore", Path(tmp) / ".gitignore")
        for git in (
            ["init", "-q"],
            ["add", "."],
            ["-c", "user.name=ci", "-c", "user.email=ci@ci", "commit", "-qm", "clone"],
        ):
            subprocess.run(["git", *git], cwd=tmp, check=True, capture_output=True)
        for cmd in cmds:
            run = re.sub(r"^pip install \.(?=\s|$)", f"pip install --quiet {REPO}", cmd)
            start = time.perf_counter()
            proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", run], cwd=tmp, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"README step failed ({proc.returncode}): {cmd}\n{proc.stderr}")
            print(f"ok ({time.perf_counter() - start:.1f} s): {cmd}", flush=True)
        left = subprocess.run(["git", "status", "--porcelain"], cwd=tmp, capture_output=True, text=True).stdout
        if left:  # a clone that follows the README stays clean: .gitignore lists what the steps write
            sys.exit(f"README steps leave files that .gitignore does not list:\n{left}")
        print("ok: git status is clean after the README's steps", flush=True)


if __name__ == "__main__":
    main()
