"""The issue-5 section of the pairwise benchmark: its records rendered as markdown (``bench_pairwise.py --render``).

Support for ``bench_pairwise.py``; public names only.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

SECTION_TITLE = "## Issue 5: the pairwise distance step vs pdist, scikit-bio and Striped UniFrac"
RETRY_MAX_S = 120.0  # a disturbed call longer than this is kept (its load is reported), not repeated
SLOW_S = 60.0  # a method whose run takes longer than this is timed once, not ``--reps`` times
LABELS = {
    "zeisel": "Zeisel (raw counts)",
    "cbmc": "CBMC (raw counts)",
    "corpus": "Synthetic corpus (counts)",
}


def fmt_s(x: float) -> str:
    return f"{x:.3g}" if x < 10 else f"{x:.1f}"


def render(rec: dict[str, Any]) -> str:
    mach = rec["machine"]
    v = rec["versions"]
    o = [SECTION_TITLE, ""]
    o.append(
        harness.machine_line(
            mach,
            [
                f"scipy {v['scipy']}",
                f"numba {v['numba']} (threads {v['numba_threads']})",
                f"scikit-bio {v['skbio']}",
                f"hdtwd {v['hdtwd']}",
            ],
        )
    )
    o.append("")
    o.append(
        "Only the distance step is timed: all pairs of samples on a fixed tree, in one Python process, "
        "each figure the median of 3 runs (numba caches warm, untimed warm-up calls first; a method whose run "
        f"took over {SLOW_S:.0f} s was timed once). Every method "
        "gets the same tree and the same integer counts. Before each run the script waits for the machine "
        "to be idle; a run during which other processes used >= "
        f"{harness.BACKGROUND_LIMIT_CORES} cores is repeated "
        f"(up to 3 tries, the least disturbed kept; calls over {RETRY_MAX_S:.0f} s are not repeated); "
        '"load" is the largest such background load among the '
        "3 kept runs, in cores. Ratio = median / median of hdtwd on the same samples. Max rel diff = "
        "max over pairs of |a - b| / max(|a|, |b|) against hdtwd (tolerance 1e-9)."
    )
    o.append("")
    o.append(
        "- hdtwd: `hd.distances(X, tree)` (row normalisation + tree vectors `Y` + compiled kernel; returns the "
        "n x n matrix)."
    )
    o.append(
        "- scipy: `pdist(Y, 'cityblock')` on `Y = hd.tree_vectors(tree, X)` (returns the condensed "
        'n(n-1)/2 vector; single-threaded); "+ Y" adds the time to build `Y` in the same run.'
    )
    o.append(
        "- scikit-bio: `beta_diversity('weighted_unifrac', counts, ids=..., taxa=leaf names, "
        "tree=TreeNode.read(io.StringIO(tree.to_newick()), convert_underscores=False), normalized=False, "
        f"validate=False)` with int64 counts; default engine (resolves to `{_default_engine(rec)}`: "
        "a Python callable per pair through `pdist`) and `engine='numba'` (its parallel kernel, 0.7.4). "
        "The Newick parse is not timed (see notes)."
    )
    o.append("")

    for name in ("zeisel", "cbmc", "corpus"):
        if name not in rec["datasets"]:
            continue
        d = rec["datasets"][name]
        info = d["info"]
        o.append(f"### {d['label']}: {info['n']} x {info['m']}")
        o.append("")
        t = info["tree"]
        o.append(
            f"Tree: {t['source']}; {info['tree_nodes']} nodes, depth {info['tree_depth']}. "
            f"Density {info['density']:.3g}, mean row total {info['mean_total_count']:.0f}. "
            f"Tree-vector dimension d = {d['full']['hdtwd']['d']}."
        )
        o.append("")
        o.append("| samples | method | median s | runs s | ratio vs hdtwd | max rel diff | load |")
        o.append("|---|---|---:|---|---:|---:|---:|")
        for block_key in ("full", "subset"):
            if block_key not in d:
                continue
            b = d[block_key]
            nlab = f"all {b['n']}" if block_key == "full" else f"subset {b['n']}"
            h = b["hdtwd"]["median_s"]
            o.extend(_rows(b, nlab, h))
            if block_key == "subset":
                sc = b["scale_to_full"]
                for eng in ("default", "numba"):
                    k = f"skbio_{eng}"
                    fk = d["full"].get(k, {})
                    if k in b and "median_s" in b[k] and (fk.get("skipped") or fk.get("stopped")):
                        est = b[k]["median_s"] * sc
                        o.append(
                            f"| all {d['full']['n']} (extrapolated) | scikit-bio ({_eng(d, eng)}), "
                            f"subset median x {sc:.1f} (pairs ratio) | ~{fmt_s(est)} |  | "
                            f"~{est / d['full']['hdtwd']['median_s']:.0f} |  |  |"
                        )
        o.append("| - | Striped UniFrac (`unifrac`) | not installable | | | | |")
        o.append("")
        probes = "; ".join(
            f"{_eng(d, e)}: {p['probe']['s']:.2f} s on {p['probe']['n']} samples -> est. "
            f"{p['probe']['estimate_full_s']:.0f} s for all"
            for e, p in d["engines"].items()
        )
        o.append(
            f"scikit-bio probes (decide full set vs subset, budget {d.get('skbio_budget_s', 600):.0f} s per run): {probes}. "
            f"Newick parse into a TreeNode: {info['skbio_newick_parse_s']:.2f} s (untimed above)."
        )
        o.append("")

    if "memory" in rec:
        mm = rec["memory"]
        o.append("### Memory: `hdtwd distance` under `/usr/bin/time -v`")
        o.append("")
        o.append(
            f'Data: {mm["data"]}; tree: {mm["tree"]}. Peak RSS = "Maximum resident set size" '
            "(MB = 10^6 bytes); goal < 4 GB."
        )
        o.append("")
        o.append("| run | n | wall s | peak RSS MB | < 4 GB | note |")
        o.append("|---|---:|---:|---:|---|---|")
        b = mm["blocked"]
        ck = b["check"]
        o.append(
            f"| all pairs, `-o D.h5` (blocked) | {b['n']} | {b['wall_s']:.1f} | {b['max_rss_MB']:.0f} | "
            f"{'yes' if b['max_rss_MB'] < 4000 else 'NO'} | output {b['output_bytes'] / 1e9:.2f} GB; "
            f"{ck['rows_checked']} rows vs in-process: max rel diff {ck['max_rel_diff']:.2g} |"
        )
        p = mm["knn_probe"]
        o.append(
            f"| `--knn 15 -o G.npz` (probe) | {p['n']} | {p['wall_s']:.1f} | {p['max_rss_MB']:.0f} | "
            f"{'yes' if p['max_rss_MB'] < 4000 else 'NO'} | x (n/{p['n']})^2 -> est. "
            f"{mm['knn_estimate_s'] / 60:.0f} min for n = {mm['knn_target_n']} |"
        )
        k = mm["knn"]
        note = f"graph {k['graph']['shape'][0]} x {k['graph']['shape'][1]}, nnz {k['graph']['nnz']}"
        if "knn_extrapolated_s" in mm:
            note += (
                f"; **extrapolated** to n = {mm['knn_target_n']}: ~{mm['knn_extrapolated_s'] / 60:.0f} min "
                f"(x (n/{k['n']})^2)"
            )
        o.append(
            f"| `--knn 15 -o G.npz` | {k['n']} | {k['wall_s']:.1f} | {k['max_rss_MB']:.0f} | "
            f"{'yes' if k['max_rss_MB'] < 4000 else 'NO'} | {note} |"
        )
        if "knn_partial" in mm:
            q = mm["knn_partial"]
            lin = mm["knn_rss_linear_MB"]
            o.append(
                f"| `--knn 15 -o G.npz`, **partial**: SIGINT after {q['time_limit_s']} s or at "
                f"{q['rss_cap_MB'] / 1e3:.1f} GB RSS | {q['n']} | {q['wall_s']:.0f} | "
                f"{'>= ' if q['stopped_by'] == 'memory cap' else ''}{q['max_rss_MB']:.0f} | "
                f"{'yes' if q['max_rss_MB'] < 4000 else 'NO'} | stopped by {q['stopped_by']}; peak so far "
                f"(reading, tree vectors, first neighbour blocks). Linear fit of the two complete kNN runs: "
                f"{lin['slope_MB_per_sample'] * 1000:.0f} MB per 1000 samples, predicts "
                f"{lin['predicted_MB'] / 1e3:.1f} GB at n = {q['n']} |"
            )
        o.append("")

    o.append("### Striped UniFrac")
    o.append("")
    o.append(rec.get("unifrac", "(not attempted)"))
    o.append("")
    if rec.get("notes"):
        o.append("### Notes")
        o.append("")
        for note in rec["notes"]:
            o.append(f"- {note}")
        o.append("")
    o.append("### Reproduce")
    o.append("")
    o.append("```bash")
    o.append("python benchmarks/bench_pairwise.py --gate /tmp/hdtwd-go-bench5 --write   # all parts, then this section")
    o.append(
        "python benchmarks/bench_pairwise.py --parts zeisel                   # one part; records in "
        "~/.cache/hdtwd-bench/pairwise/"
    )
    o.append("python benchmarks/bench_pairwise.py --render --write                 # re-render from the records")
    if "memory" in rec:
        for key in ("blocked", "knn_probe", "knn"):
            o.append("/usr/bin/time -v " + " ".join(_short(c) for c in rec["memory"][key]["cmd"]))
        if "knn_partial" in rec["memory"]:
            o.append(
                " ".join(_short(c) for c in rec["memory"]["knn_partial"]["cmd"])
                + "   # partial, VmHWM polled by the script"
            )
    o.append("pip install unifrac")
    o.append("```")
    o.append("")
    return "\n".join(o)


def _default_engine(rec: dict[str, Any]) -> str:
    return next((d["skbio_default_engine"] for d in rec["datasets"].values()), "?")


def _short(c: str) -> str:
    c = str(c)
    home = str(Path.home())
    if c.startswith(home):
        c = "~" + c[len(home) :]
    if c.endswith("/hdtwd"):
        c = "hdtwd"
    return c


def _eng(d: dict[str, Any], eng: str) -> str:
    return f"default = {d.get('skbio_default_engine', '?')}" if eng == "default" else f"engine='{eng}'"


def _rows(b: dict[str, Any], nlab: str, h: float) -> list[str]:
    out = []

    def runs(r):
        return ", ".join(fmt_s(x["s"]) for x in r["runs"])

    hd = b["hdtwd"]
    out.append(
        f"| {nlab} | **hdtwd** `hd.distances` | {fmt_s(hd['median_s'])} | {runs(hd)} | 1.00 | - | "
        f"{hd['max_background_cores']:.2f} |"
    )
    if "scipy" in b:
        s = b["scipy"]
        a = s["agreement"]["max_rel_diff"]
        out.append(
            f"| {nlab} | scipy `pdist(Y, 'cityblock')` | {fmt_s(s['median_pdist_s'])} | "
            f"{', '.join(fmt_s(x['pdist_s']) for x in s['runs'])} | {s['median_pdist_s'] / h:.2f} | "
            f"{a:.2g} | {s['max_background_cores']:.2f} |"
        )
        out.append(
            f"| {nlab} | scipy tree vectors + `pdist` | {fmt_s(s['median_s'])} | {runs(s)} | "
            f"{s['median_s'] / h:.2f} | {a:.2g} | {s['max_background_cores']:.2f} |"
        )
    for eng in ("default", "numba"):
        k = f"skbio_{eng}"
        if k in b:
            s = b[k]
            lab = "default engine" if eng == "default" else "`engine='numba'`"
            if s.get("skipped"):
                out.append(
                    f"| {nlab} | scikit-bio weighted UniFrac, {lab} | not run (probe estimate over "
                    "the budget) | | | | |"
                )
                continue
            if s.get("stopped"):
                done = ", ".join(fmt_s(x["s"]) for x in s["runs"])
                out.append(
                    f"| {nlab} | scikit-bio weighted UniFrac, {lab} | > {s['cap_s']:.0f} (run stopped "
                    f"after {s['stopped_after_s']:.0f} s) | {done} | > {s['cap_s'] / h:.0f} | | |"
                )
                continue
            out.append(
                f"| {nlab} | scikit-bio weighted UniFrac, {lab} | {fmt_s(s['median_s'])} | {runs(s)} | "
                f"{s['median_s'] / h:.2f} | {s['agreement']['max_rel_diff']:.2g} | "
                f"{s['max_background_cores']:.2f} |"
            )
    return out


def unifrac_summary(log_path: Path) -> str:
    if not log_path.exists():
        return "`pip install unifrac` was not attempted (no log)."
    text = log_path.read_text()
    lines = text.splitlines()
    when = lines[0] if lines else "?"
    coll = [ln.strip() for ln in lines if ln.strip().startswith(("Collecting", "Downloading"))]
    err = [ln.strip() for ln in lines if "Error" in ln and "Traceback" not in ln]
    rc = next((ln for ln in reversed(lines) if ln.startswith("rc=")), "rc=?")
    return (
        f"One attempt, {when}: `pip install unifrac` failed ({rc}). pip fetched "
        + ", ".join(f"`{c}`" for c in coll if c.startswith("Downloading"))
        + '; building the dependency `iow` (an sdist) stopped at "Getting requirements to build wheel" with '
        + (f"`{err[-1]}`" if err else "an error")
        + ", so unifrac's own C++ extension (which needs the Striped UniFrac library `libssu`, shipped "
        "through conda/bioconda) was never reached. Nothing was installed; Striped UniFrac is not timed."
    )
