"""Many runs at once: concurrent writers of the same and different outputs, readers beside them (§ 13).

Each round starts ``--processes`` ``hdtwd`` commands at once (``distance`` into ``.npy``, ``.npz``
and ``.h5``, ``classify --json``), several writing the SAME target with DIFFERENT contents (float64
and float32 matrices, two input formats), while reader threads read every target over and over.
Some writers are ended mid-write, the moment their temporary file appears (a handshake on the
file, not a delay): SIGTERM (they must exit 143 and remove it) or SIGKILL (the next run writing
that target removes it). Then one clean run per command. Checked:

- every read of a target is the whole of one of its valid contents (computed beforehand, one
  command at a time): a torn or mixed file is counted;
- every exit code is documented (0; 143 after SIGTERM; -9 after SIGKILL);
- at the end the output folder holds the targets only: no temporary file left;
- ``--dask``: the approximate kNN graph on a 2-worker LocalCluster whose worker is killed during
  a task (tests/_faults.py's worker plugin), equal to the single process's graph, several times.

    python benchmarks/soak.py --processes 32 --rounds 4 [--dask 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parent / "sample_data"
sys.path.insert(0, str(HERE.parent / "tests"))


def commands(out: Path) -> list[tuple[str, list[str]]]:
    """(target, argv) pairs; several per target, with different contents."""
    produce, cells = str(SAMPLE / "produce.csv"), str(SAMPLE / "cells.h5ad")
    return [
        ("P.npy", ["distance", produce, "-o", str(out / "P.npy")]),
        ("P.npy", ["distance", produce, "--dtype", "float32", "-o", str(out / "P.npy")]),
        ("G.npz", ["distance", cells, "--knn", "5", "-o", str(out / "G.npz")]),
        ("G.npz", ["distance", cells, "--knn", "9", "-o", str(out / "G.npz")]),
        ("C.h5", ["distance", str(SAMPLE / "corpus.npz"), "-o", str(out / "C.h5")]),
        ("C.h5", ["distance", str(SAMPLE / "corpus.mtx"), "--dtype", "float32", "-o", str(out / "C.h5")]),
        (
            "R.json",
            ["classify", produce, "--labels", str(SAMPLE / "produce_labels.txt"), "--splits", "2"]
            + ["--k", "1,3", "--methods", "hdtwd,l1", "--json", str(out / "R.json")],
        ),
        ("D.npy", ["distance", cells, "-o", str(out / "D.npy")]),
    ]


def _hdtwd(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hdtwd_cli", *argv, "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".hdtwd-tmp-" in p.name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, default=32, help="concurrent commands per round")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--readers", type=int, default=4, help="reader threads")
    ap.add_argument("--dask", type=int, default=0, help="Dask runs with a worker killed mid-task")
    a = ap.parse_args()
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ref, out = root / "ref", root / "out"
        ref.mkdir()
        out.mkdir()
        valid: dict[str, set[bytes]] = {}
        for i, (target, argv) in enumerate(commands(ref)):  # each content once, one at a time
            own = [s.replace(str(ref / target), str(ref / f"{i}-{target}")) for s in argv]
            subprocess.run([sys.executable, "-m", "hdtwd_cli", *own, "-q"], check=True, stdout=subprocess.DEVNULL)
            valid.setdefault(target, set()).add((ref / f"{i}-{target}").read_bytes())
        cmds = commands(out)
        reads, torn = Counter(), Counter()
        stop = threading.Event()

        def reader() -> None:
            while not stop.is_set():
                for target in valid:
                    try:
                        data = (out / target).read_bytes()
                    except FileNotFoundError:
                        continue
                    reads[target] += 1
                    if data not in valid[target]:
                        torn[target] += 1

        threads = [threading.Thread(target=reader, daemon=True) for _ in range(a.readers)]
        for t in threads:
            t.start()
        exits: Counter = Counter()
        bad_exits = []
        ended = Counter()
        for rnd in range(a.rounds):
            procs = []
            for j in range(a.processes):
                target, argv = cmds[j % len(cmds)]
                procs.append((j, target, _hdtwd(argv)))
            for j, target, p in procs:  # every 5th writer ended once its temporary file exists
                if j % 5 != 4:
                    continue
                sig = signal.SIGTERM if (j // 5 + rnd) % 2 == 0 else signal.SIGKILL
                stem, suffix = os.path.splitext(target)
                tmpname = out / f".{stem}.hdtwd-tmp-{p.pid}{suffix}"
                while p.poll() is None and not tmpname.exists():  # handshake: the run is writing
                    time.sleep(0.002)
                if p.poll() is None:
                    p.send_signal(sig)
                    ended[sig.name] += 1
            for j, _target, p in procs:
                _, err = p.communicate()
                exits[p.returncode] += 1
                if p.returncode not in (0, 143, -9):
                    bad_exits.append((cmds[j % len(cmds)][1], p.returncode, err.decode()[-300:]))
        for _target, argv in cmds:  # clean runs: they also remove what killed runs left
            subprocess.run([sys.executable, "-m", "hdtwd_cli", *argv, "-q"], check=True, stdout=subprocess.DEVNULL)
        stop.set()
        for t in threads:
            t.join()
        left = _temporaries(out)
        names = sorted(p.name for p in out.iterdir())
        final_ok = all((out / t).read_bytes() in valid[t] for t in valid)
        print(f"| processes | {a.rounds} rounds x {a.processes} = {a.rounds * a.processes} (+{len(cmds)} clean runs) |")
        print("|---|---|")
        print(f"| ended mid-write | SIGTERM {ended['SIGTERM']}, SIGKILL {ended['SIGKILL']} |")
        print(f"| exit codes | {dict(sorted(exits.items()))} |")
        print(f"| undocumented exit codes | {len(bad_exits)} |")
        print(f"| reads of the targets while written | {sum(reads.values())} ({dict(reads)}) |")
        print(f"| torn or mixed reads | {sum(torn.values())} |")
        print(f"| temporary files left | {len(left)} {left if left else ''} |")
        print(f"| files in the output folder | {names} |")
        print(f"| final outputs valid | {final_ok} |")
        for b in bad_exits:
            print("BAD EXIT", b)
        if a.dask:
            print(dask_part(root, a.dask))
    print(f"({time.time() - t0:.0f} s)")


def dask_part(root: Path, runs: int) -> str:
    """The approximate kNN graph on a 2-worker LocalCluster, one worker killed during a task, ``runs`` times."""
    import scipy.sparse as sp
    from _faults import killable_cluster

    faults = root / "faults"
    faults.mkdir()
    cells = str(SAMPLE / "cells.h5ad")
    base = ["distance", cells, "--knn", "15", "--knn-method", "nndescent"]
    subprocess.run([sys.executable, "-m", "hdtwd_cli", *base, "-o", str(root / "single.npz"), "-q"], check=True)
    ref = sp.load_npz(root / "single.npz")
    same = died = 0
    with killable_cluster(faults) as (c, client):
        for i in range(runs):
            client.wait_for_workers(2, timeout=600)
            (faults / "kill-once").write_text("")
            out = root / f"dask{i}.npz"
            subprocess.run(
                [sys.executable, "-m", "hdtwd_cli", *base, "--scheduler", c.scheduler_address, "-o", str(out), "-q"],
                check=True,
            )
            died += not (faults / "kill-once").exists()
            G = sp.load_npz(out)
            same += (G != ref).nnz == 0 and (G.indices == ref.indices).all()
            left = _temporaries(root)
            assert not left, left
    return f"| Dask runs with a worker killed mid-task | {runs}: a worker died in {died}, the single process's graph in {same} |"


if __name__ == "__main__":
    main()
