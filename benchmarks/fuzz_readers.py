"""The long fuzz run: thousands of damaged inputs in every format, with several seeds (§ 13).

The mutations, the seed files and the judging are the suite's (``tests/_fuzz.py``, which
``tests/test_fuzz.py`` runs a few hundred cases of): each case is a damaged copy of a small valid
file run through the command that reads it, in a forked child of one warm interpreter. A case
fails on exit 1, a crash (a signal), a hang, a traceback, more than one error line, an output or a
temporary file left after a failure, or an invalid result after a success.

    python benchmarks/fuzz_readers.py --per-seed 500 --seeds 1,2,3 --json fuzz.json
    python benchmarks/fuzz_readers.py --per-seed 2000 --seeds 21 --minutes 20   # formats in turn, 20 min

Prints the table for RESULTS.md (cases per format, exits by code, failures by kind) and every
failing case (format, damage, what was wrong), and exits 1 if any case failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from _fuzz import Server, cases, seed_files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-seed", type=int, default=200, help="damaged copies per format and seed")
    ap.add_argument("--seeds", default="1,2,3", help="comma-separated mutation seeds")
    ap.add_argument("--formats", help="comma-separated subset of the formats (default: all)")
    ap.add_argument("--json", type=Path, help="write every failing case and the counts here")
    ap.add_argument(
        "--minutes",
        type=float,
        help="stop starting cases after this long (formats taken in turn, so each gets its share), and report",
    )
    a = ap.parse_args()
    exits: dict[str, Counter] = defaultdict(Counter)
    problems: dict[str, Counter] = defaultdict(Counter)
    failures = []
    t0 = time.time()
    stopped = False
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "seeds").mkdir()
        seeds = seed_files(root / "seeds")
        if a.formats:
            seeds = [s for s in seeds if s.name in a.formats.split(",")]
        server = Server()
        try:
            for rng_seed in (int(s) for s in a.seeds.split(",")):
                work = root / f"work{rng_seed}"
                work.mkdir()
                if stopped:
                    break
                for c in cases(seeds, work, a.per_seed, rng_seed, server, interleave=a.minutes is not None):
                    stopped = a.minutes is not None and time.time() - t0 > 60 * a.minutes
                    exits[c.seed][c.rc] += 1
                    if c.problem:
                        kind = c.problem.split(":")[0]
                        problems[c.seed][kind] += 1
                        failures.append(
                            {
                                "format": c.seed,
                                "seed": rng_seed,
                                "case": c.index,
                                "damage": c.damage,
                                "problem": c.problem,
                                "stderr": c.message,
                            }
                        )
                        print(f"FAIL {c.seed} seed {rng_seed} #{c.index} ({c.damage}): {c.problem}", flush=True)
                    if stopped:
                        break
        finally:
            server.close()
    total = sum(sum(v.values()) for v in exits.values())
    codes = sorted({rc for v in exits.values() for rc in v})
    budget = f" (stopped by --minutes {a.minutes:g})" if stopped else ""
    print(f"\n{total} cases in {time.time() - t0:.0f} s{budget}; seeds {a.seeds}, {a.per_seed} per format and seed\n")
    print("| input | cases | " + " | ".join(f"exit {rc}" for rc in codes) + " | failures |")
    print("|---|---|" + "---|" * len(codes) + "---|")
    for name in exits:
        row = [str(exits[name][rc]) for rc in codes]
        bad = ", ".join(f"{k} {n}" for k, n in problems[name].items()) or "0"
        print(f"| {name} | {sum(exits[name].values())} | " + " | ".join(row) + f" | {bad} |")
    all_codes = Counter()
    for v in exits.values():
        all_codes.update(v)
    print(f"| all | {total} | " + " | ".join(str(all_codes[rc]) for rc in codes) + f" | {len(failures)} |")
    if a.json:
        a.json.write_text(json.dumps({"exits": {k: dict(v) for k, v in exits.items()}, "failures": failures}, indent=1))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
