"""Issue 24: the defaults never fail on valid input: a family of generated corpora and every real set,
end to end with the defaults, on each CPU kind's code paths.

Each case is one whole process, ``hdtwd distance DATA -o D.npy -v`` with no other option (the tree
learned with the defaults), under ``/usr/bin/time -v``; the record keeps the exit code, wall time,
peak RSS, how many features hung from the root because no landmark reached them (the ``-v`` line),
and whether the two CPU kinds gave the same matrix (max relative difference otherwise).

The corpus family (``planted_corpus``: a topic hierarchy over the words, Zipf word weights, every
unseen word given one token in a document of its topic, so many hapaxes) spans vocabularies of
2,000-50,000 words, Zipf exponents 0.8-1.4, documents of 5-500 tokens (log-uniform) and shares of
each document drawn from the whole vocabulary of 0.2-0.6. The real sets: BBCSPORT, CLASSIC, Zeisel,
CBMC and pbmc68k_reduced (``datasets.load_set``).

Usage::

    python benchmarks/bench_corpora.py run [--cpus native,avx2] [--only NAME,...]
    python benchmarks/bench_corpora.py --markdown [--write]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cpu_kind
import harness

WD = harness.work_dir("corpora-issue24")
HEADING = "## Issue 24: the defaults on a family of corpora and every real set, both CPU kinds"
HDTWD = [sys.executable, "-m", "hdtwd_cli"]

#: name -> (documents, words, Zipf exponent, token range per document, share from the whole vocabulary)
FAMILY: dict[str, tuple[int, int, float, tuple[int, int], float]] = {
    "v2k-z0.8-len5-500": (1500, 2000, 0.8, (5, 500), 0.4),
    "v5k-z1.4-len5-50": (3000, 5000, 1.4, (5, 50), 0.2),
    "v12k-z1.07-len5-500": (3000, 12000, 1.07, (5, 500), 0.3),
    "v24k-z1.07-len100-root0.2": (5000, 24000, 1.07, (60, 160), 0.2),
    "v24k-z1.2-len5-500-root0.6": (5000, 24000, 1.2, (5, 500), 0.6),
    "v50k-z0.8-len5-100": (4000, 50000, 0.8, (5, 100), 0.3),
    "v50k-z1.4-len20-500": (5000, 50000, 1.4, (20, 500), 0.2),
}
REAL = ("bbcsport", "classic", "zeisel", "cbmc", "pbmc")


def corpus(name: str) -> sp.csr_matrix:
    from hdtwd_cli.datasets import planted_corpus

    n, m, z, lengths, root = FAMILY[name]
    rest = (1.0 - root) / 3
    X, _, _ = planted_corpus(
        n, m, zipf=z, length_range=lengths, level_weights=(root, rest, rest, rest), seed=sum(map(ord, name))
    )
    return X


def data_file(name: str) -> Path:
    p = WD / f"{name}.npz"
    if p.exists():
        return p
    if name in FAMILY:
        sp.save_npz(p, corpus(name))
    else:
        from datasets import load_set

        X, _, _ = load_set(name)
        sp.save_npz(p, sp.csr_matrix(X))
    return p


def run_case(name: str, kind: str) -> dict[str, Any]:
    path = data_file(name)
    out = WD / f"D_{name}_{kind}.npy"
    try:
        r = harness.run_timed_once(
            HDTWD + ["distance", str(path), "-o", str(out), "-v"], WD / f"{name}_{kind}.log", cpu_kind.env_for(kind)
        )
        code = 0
    except RuntimeError as e:  # a failing case is a finding: recorded, the others still run
        r, code = {"wall_s": float("nan"), "max_rss_MB": float("nan")}, 1
        (WD / f"{name}_{kind}.log").write_text(str(e))
    err = (WD / f"{name}_{kind}.log").read_text(errors="replace")
    far = re.search(r"(\d+) feature\(s\) far from every landmark", err)
    X = sp.load_npz(path)
    rec = {
        "exit": code,
        "wall_s": r["wall_s"],
        "max_rss_MB": r["max_rss_MB"],
        "shape": list(X.shape),
        "nnz": int(X.nnz),
        "hapax_words": int((np.diff(sp.csc_matrix(X).indptr) == 1).sum()),
        "far_from_landmarks": int(far.group(1)) if far else 0,
        "ok": out.exists(),
        "last_line": err.strip().splitlines()[-1] if err.strip() else "",
    }
    return rec


def _load() -> dict[str, Any]:
    p = WD / "corpora.json"
    return json.loads(p.read_text()) if p.exists() else {}


def run(names: list[str], kinds: list[str]) -> None:
    rec = _load()
    facts = harness.machine_facts(probe=True)
    for name in names:
        entry = {"by_cpu": {}, "facts": facts}
        for kind in kinds:
            entry["by_cpu"][kind] = run_case(name, kind)
            r = entry["by_cpu"][kind]
            print(
                f"{name} {kind}: ok={r['ok']} {r['wall_s']:.1f} s {r['max_rss_MB'] / 1000:.2f} GB "
                f"far={r['far_from_landmarks']}",
                file=sys.stderr,
                flush=True,
            )
        mats = [WD / f"D_{name}_{k}.npy" for k in kinds]
        if len(kinds) > 1 and all(p.exists() for p in mats):
            D0 = np.load(mats[0])
            for k, p in zip(kinds[1:], mats[1:]):
                D = np.load(p)
                scale = np.maximum(np.abs(D0), np.abs(D))
                off = scale > 0
                entry["by_cpu"][k]["max_rel_diff_vs_" + kinds[0]] = (
                    float(np.max(np.abs(D - D0)[off] / scale[off])) if off.any() else 0.0
                )
                entry["by_cpu"][k]["identical_to_" + kinds[0]] = bool(np.array_equal(D, D0))
        for p in mats:
            p.unlink(missing_ok=True)
        rec[name] = entry
        (WD / "corpora.json").write_text(json.dumps(rec, indent=1, default=str))


def markdown() -> str:
    rec = _load()
    if not rec:
        return ""
    facts = next(iter(rec.values()))["facts"]
    kinds = [k for k in cpu_kind.KINDS if any(k in e["by_cpu"] for e in rec.values())]
    o = [
        HEADING,
        "",
        harness.machine_line(facts),
        "",
        "`python benchmarks/bench_corpora.py run --cpus " + ",".join(kinds) + "`: one whole process per case, "
        "`hdtwd distance DATA -o D.npy -v` with the defaults and nothing else. `avx2`: "
        + cpu_kind.describe("avx2")
        + ". Corpora from `planted_corpus` (topic hierarchy over the words, Zipf "
        "weights, every word occurs, log-uniform document lengths; `root` = share of each document drawn from "
        "the whole vocabulary).",
        "",
        "| data | n x m | non-zeros | words seen once | "
        + " | ".join(f"{k}: exit, wall, peak RSS" for k in kinds)
        + " | features far from every landmark (at the root) | same matrix on both kinds |",
        "|---|---|---|---|" + "---|" * len(kinds) + "---|---|",
    ]
    order = list(FAMILY) + list(REAL)
    for name in order:
        e = rec.get(name)
        if not e:
            continue
        b = e["by_cpu"]
        first = b[kinds[0]] if kinds[0] in b else next(iter(b.values()))
        label = name
        if name in FAMILY:
            n, m, z, (lo, hi), root = FAMILY[name]
            label = f"corpus: Zipf {z}, {lo}-{hi} tokens, root {root}"
        cells = [
            f"{b[k]['exit']}, {b[k]['wall_s']:.1f} s, {b[k]['max_rss_MB'] / 1000:.2f} GB" if k in b else "-"
            for k in kinds
        ]
        same = []
        for k in kinds[1:]:
            if k in b and f"identical_to_{kinds[0]}" in b[k]:
                same.append(
                    "identical"
                    if b[k][f"identical_to_{kinds[0]}"]
                    else f"max rel. diff {b[k][f'max_rel_diff_vs_{kinds[0]}']:.1e}"
                )
        o.append(
            f"| {label} | {first['shape'][0]:,} x {first['shape'][1]:,} | {first['nnz']:,} | "
            f"{first['hapax_words']:,} | "
            + " | ".join(cells)
            + f" | {first['far_from_landmarks']:,} | "
            + (" / ".join(same) or "-")
            + " |"
        )
    o.append("")
    return "\n".join(o)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="*", help="run")
    ap.add_argument("--cpus", default="native,avx2")
    ap.add_argument("--only", default=",".join(list(FAMILY) + list(REAL)))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument(
        "--write", action="store_true", help="with --markdown: replace its section in archive/RESULTS-history.md"
    )
    a = ap.parse_args()
    if "run" in a.parts:
        run(a.only.split(","), a.cpus.split(","))
    if a.markdown:
        harness.emit_section(markdown(), HEADING, a.write)


if __name__ == "__main__":
    main()
