"""Limits: inputs that claim (or unpack to) far more than memory are refused quickly (§ 13).

Each input of ``tests/_fuzz.limit_files(big=True)`` (headers and attributes claiming 10^9 x 10^9,
a sparse matrix with 10^11 entries declared, a Newick nested 10^6 deep, a tree of 10^7 nodes, a
2 GB gzip bomb) is run through ``hdtwd distance`` under an address-space limit
(``prlimit --as``, default 4 GB) and GNU time: exit code, the message, seconds and peak memory.

    python benchmarks/limits.py [--as-bytes 4e9] [--small]   # --small: without the slow ones (as the suite runs them)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from _fuzz import limit_files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--as-bytes", type=float, default=4e9, help="address-space limit of each run (prlimit --as)")
    ap.add_argument("--small", action="store_true", help="leave out the 10^7-node tree and the 2 GB gzip bomb")
    a = ap.parse_args()
    print(f"| input | exit | message | seconds | peak memory (limit {a.as_bytes / 1e9:.0f} GB) |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "in").mkdir()
        for case in limit_files(root / "in", big=not a.small):
            out = root / "out"
            out.mkdir()
            argv = [s.replace("{OUT}", str(out)) for s in case.argv]
            timing = root / "time.txt"
            cmd = ["/usr/bin/time", "-f", "%e %M", "-o", str(timing), "prlimit", f"--as={int(a.as_bytes)}"]
            cmd += [sys.executable, "-m", "hdtwd_cli", *argv, "-q"]
            r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **dict(case.env)))
            seconds, kb = timing.read_text().split()[-2:]
            message = r.stderr.strip().replace(str(root / "in") + "/", "").replace("|", "/")
            left = sorted(p.name for p in out.iterdir())
            note = f" (left: {left})" if left else ""
            print(
                f"| {case.name} | {r.returncode} | {message[:220]}{note} | {float(seconds):.1f} | "
                f"{int(kb) / 1024:.0f} MB |",
                flush=True,
            )
            for p in out.iterdir():
                p.unlink()
            out.rmdir()


if __name__ == "__main__":
    main()
