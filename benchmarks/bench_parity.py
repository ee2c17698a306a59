"""One answer by every route, on real sets: ``embed`` -> ``decode-tree`` -> ``distance --tree`` against the
one-shot ``distance``, byte for byte, with the defaults.

Each set runs as a user runs the command (``python -m hdtwd_cli``), from an ``.h5ad``: Zeisel
(3,005 x 4,000 counts) and CBMC (8,617 x 500) from the benchmark cache (datasets.py), and the
real 15,000-gene count matrices of ``../shared/data/cells`` (raw counts, and scanpy's
log-normalised form of them). Reported per set: the sha256 of both ``.npy`` outputs, whether they
are equal, the largest absolute difference, what the tree's metadata says of the denoising, and
the wall time of each route.

    python benchmarks/bench_parity.py --out parity.json [--only zeisel,cbmc]   # --only sample: sample_data's cells
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CELLS = HERE.parent.parent / "shared" / "data" / "cells"
#: The shipped sample cells (300 x 64 counts): the smallest set, asked for by name (``--only sample``).
SAMPLE = HERE.parent / "sample_data" / "cells.h5ad"


def _lognorm(src: Path, dst: Path) -> Path:
    """scanpy's ``normalize_total(target_sum=1e4)`` + ``log1p`` of the counts in ``src``."""
    import anndata
    import scanpy as sc

    a = anndata.read_h5ad(src)
    sc.pp.normalize_total(a, target_sum=1e4)
    sc.pp.log1p(a)
    a.write_h5ad(dst)
    return dst


def inputs(workdir: Path, only: set[str] | None) -> dict[str, Path]:
    """Set name -> ``.h5ad`` path (written into ``workdir`` where needed)."""
    from datasets import write_set_h5ad

    out: dict[str, Path] = {}
    if only is not None and "sample" in only:
        out["sample"] = SAMPLE
    for name in ("zeisel", "cbmc"):
        if only is None or name in only:
            out[name] = write_set_h5ad(name, workdir / f"{name}.h5ad")
    for path in sorted(CELLS.glob("*.h5ad")):
        name = path.stem
        if only is None or name in only:
            out[name] = path
            out[f"{name} (log-normalised)"] = _lognorm(path, workdir / f"{name}.lognorm.h5ad")
    return out


def _run(*args: object) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "hdtwd_cli", *map(str, args), "-q"], check=True)
    return time.perf_counter() - t0


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def compare(name: str, data: Path, workdir: Path) -> dict:
    """Both routes on ``data``; the row of the report."""
    from hdtwd_cli import Tree

    d = workdir / name.replace(" ", "_").replace("(", "").replace(")", "")
    d.mkdir(exist_ok=True)
    chain = _run("embed", data, "-o", d / "E.h5")
    chain += _run("decode-tree", d / "E.h5", "-o", d / "T.h5")
    chain += _run("distance", data, "--tree", d / "T.h5", "-o", d / "D_chain.npy")
    one = _run("distance", data, "-o", d / "D_one.npy", "--save-tree", d / "T_one.h5")
    A, B = np.load(d / "D_chain.npy"), np.load(d / "D_one.npy")
    md = Tree.read(str(d / "T.h5")).metadata
    return {
        "set": name,
        "shape": list(A.shape),
        "sha256_chain": _sha(d / "D_chain.npy"),
        "sha256_one_shot": _sha(d / "D_one.npy"),
        "same_bytes": bool(_sha(d / "D_chain.npy") == _sha(d / "D_one.npy")),
        "max_abs_diff": float(np.abs(A - B).max()),
        "denoise": int(md.get("denoise", 0)),
        "denoise_rule": str(md.get("denoise_rule", "")),
        "seconds_chain": round(chain, 1),
        "seconds_one_shot": round(one, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("parity.json"))
    ap.add_argument("--only", help="comma-separated set names")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in inputs(Path(tmp), only).items():
            rows.append(compare(name, path, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    args.out.write_text(json.dumps(rows, indent=1))
    print("| set | n | same bytes | chain / one-shot sha256 | denoise (rule) | chain / one-shot s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['set']} | {r['shape'][0]} | {'yes' if r['same_bytes'] else 'NO (' + str(r['max_abs_diff']) + ')'} | "
            f"{r['sha256_chain']} / {r['sha256_one_shot']} | {r['denoise']} ({r['denoise_rule']}) | "
            f"{r['seconds_chain']} / {r['seconds_one_shot']} |"
        )


if __name__ == "__main__":
    main()
