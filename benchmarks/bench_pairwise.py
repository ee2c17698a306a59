"""Issue 5: the pairwise distance step (all-pairs TWD on a fixed tree) vs pdist, scikit-bio, Striped UniFrac.

Only the distance step is timed: the tree is given. Every peer runs in the same process, on the
same tree and the same (integer-count) data, each timing is the median of 3 runs, and every peer's
matrix is compared with hdtwd's.

Data sets
    ``zeisel``  Zeisel, 3005 cells x 4000 genes, raw counts (``load("zeisel7", values="counts")``;
                scikit-bio casts counts to int64, so the log1p values cannot be used for everyone);
    ``cbmc``    CBMC, 8617 cells x 500 genes, raw counts;
    ``corpus``  a synthetic sparse corpus: 5000 documents over 24,000 words, Zipf word frequencies,
                50-200 tokens per document (:func:`make_corpus`, seed 0).

Trees
    Zeisel and CBMC: the tree hdtwd learns from the same counts (``learn_tree`` with the
    ``default`` preset), cached as ``.h5`` and ``.nwk`` under ``<cache_dir>/pairwise/``.
    Corpus: learning a tree over 24,000 features is too expensive, so a random binary tree
    (:func:`random_tree`: random pairs of subtrees joined, seed 0) with edge lengths drawn uniformly
    from [0.01, 1) (seed 1).

Methods
    hdtwd          ``hd.distances(X, tree)``: normalisation + tree vectors + compiled kernel, timed whole;
    scipy          ``pdist(Y, "cityblock")`` on ``Y = hd.tree_vectors(tree, X)``, without and with the
                   time to build ``Y`` (same run);
    scikit-bio     ``beta_diversity("weighted_unifrac", counts, ..., normalized=False,
                   validate=False)`` with the default engine and with ``engine="numba"``; the Newick
                   parse (``TreeNode.read``) is done once, untimed. When a full set would take more
                   than ``--skbio-budget`` seconds (estimated from a probe on 200 samples), every
                   method is also timed on a random subset and scikit-bio's full time is
                   extrapolated by n(n-1) scaling;
    Striped UniFrac the result of one ``pip install unifrac`` attempt (``--unifrac-log``).

Also: two memory runs of the CLI under ``/usr/bin/time -v`` (blocked HDF5 output for 30,000 x 2,000;
``--knn 15`` for 100,000 x 2,000). Public names only. (The in-cache roofline of the kernel, answered in the
history's "Issue 5" and "Issue 14" sections, was a probe: ``git show 7dc0ed9:benchmarks/bench_pairwise.py``.)

Each part writes a JSON record under ``<cache_dir>/pairwise/``; ``--render`` merges the latest
record of every part into the issue-5 section, printed (and with ``--write`` put into
``benchmarks/archive/RESULTS-history.md``, ``harness.HISTORY``).

Usage::

    python benchmarks/bench_pairwise.py --small 300                       # quick debug run
    python benchmarks/bench_pairwise.py --gate /tmp/hdtwd-go-bench5 --write  # everything, then render
    python benchmarks/bench_pairwise.py --parts corpus
    python benchmarks/bench_pairwise.py --render --write
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import datasets
import harness
from pairwise_memory import agreement, condensed, log, memory_runs, random_tree, work_dir
from pairwise_report import LABELS, RETRY_MAX_S, SECTION_TITLE, SLOW_S, render, unifrac_summary

PARTS = ("zeisel", "cbmc", "corpus", "memory")
MAX_TRIES = 3  # timed calls per run while disturbed by other processes (``--max-tries``)
SKBIO_PROBE_N = 200


# ------------------------------------------------------------------ timing
def _own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(
    fn: Callable[[], Any],
    max_wait_s: float,
    max_tries: int | None = None,
    split: Callable[[], dict[str, float]] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """One timed call of ``fn`` in this process, after waiting for the machine to be idle.

    Retried (up to ``max_tries`` calls) while other processes used >= harness.BACKGROUND_LIMIT_CORES
    during it; the least disturbed call is kept. Returns (result, figures).
    """
    best: tuple[Any, dict[str, Any]] | None = None
    for _ in range(max(1, MAX_TRIES if max_tries is None else max_tries)):
        if max_wait_s > 0:
            harness.wait_quiet(max_wait_s)
        busy0, own0 = harness.cpu_busy_s(), _own_cpu_s()
        t0 = time.perf_counter()
        out = fn()
        wall = time.perf_counter() - t0
        own = _own_cpu_s() - own0
        bg = harness.background_cores(harness.cpu_busy_s() - busy0, own, wall)
        fig = {"s": wall, "cpu_s": own, "background_cores": bg}
        if split is not None:  # per-call figures recorded by fn itself
            fig.update(split())
        if best is None or bg < best[1]["background_cores"]:
            best = (out, fig)
        else:
            del out
        if bg < harness.BACKGROUND_LIMIT_CORES or wall > RETRY_MAX_S:
            break
        if _ + 1 < max(1, MAX_TRIES if max_tries is None else max_tries):
            log(f"  disturbed: other processes used {bg:.2f} cores; retrying")
    assert best is not None
    return best


def repeat(
    fn: Callable[[], Any], reps: int, max_wait_s: float, label: str, split: Callable[[], dict[str, float]] | None = None
) -> tuple[Any, dict[str, Any]]:
    """``reps`` timed calls; the median and all runs. ``split`` returns extra per-run figures."""
    runs = []
    out = None
    for r in range(reps):
        out = None  # free the previous result before the next run
        out, fig = timed(fn, max_wait_s, split=split)
        runs.append(fig)
        log(f"  {label} run {r + 1}/{reps}: {fig['s']:.3f} s (other load {fig['background_cores']:.2f})")
        if fig["s"] > SLOW_S:  # a peer this slow is timed once (its repeats varied < 1 % here)
            break
    med = {
        "median_s": float(np.median([f["s"] for f in runs])),
        "runs": runs,
        "max_background_cores": max(f["background_cores"] for f in runs),
    }
    if split is not None:
        for k in runs[0]:
            if k not in ("s", "cpu_s", "background_cores"):
                med[f"median_{k}"] = float(np.median([f[k] for f in runs]))
    return out, med


# ------------------------------------------------------------------ data and trees
def make_corpus(
    n_docs: int = 5000, n_words: int = 24000, seed: int = 0, zipf_s: float = 1.0, min_len: int = 50, max_len: int = 200
) -> sp.csr_matrix:
    """Sparse document x word counts: word w has probability proportional to 1/(rank+1)^s (the
    ranks are a random permutation of the words), each document draws a length uniformly in
    [min_len, max_len] and that many tokens i.i.d. from the Zipf law."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_words + 1, dtype=np.float64) ** zipf_s
    p /= p.sum()
    word_of_rank = rng.permutation(n_words)
    lengths = rng.integers(min_len, max_len + 1, size=n_docs)
    rows = []
    for i, ln in enumerate(lengths):
        w = word_of_rank[rng.choice(n_words, size=int(ln), p=p)]
        u, c = np.unique(w, return_counts=True)
        rows.append(np.column_stack([np.full(u.size, i), u, c]))
    trip = np.concatenate(rows)
    X = sp.csr_matrix((trip[:, 2].astype(np.float64), (trip[:, 0], trip[:, 1])), shape=(n_docs, n_words))
    X.sort_indices()
    return X


def learned_tree(key: str, X: np.ndarray, names: list[str]):
    """The tree hdtwd learns from ``X`` with the current ``default`` preset, cached as .h5 and .nwk
    (the file name carries a hash of the parameters, so a changed preset learns a new tree)."""
    import hashlib

    import hdtwd_cli as hd

    params = hd.TreeParams.from_preset("default")
    tag = hashlib.sha256(json.dumps(params.as_dict(), sort_keys=True, default=str).encode()).hexdigest()[:10]
    h5 = work_dir() / f"{key}_counts_tree_{tag}.h5"
    info: dict[str, Any] = {"cached": str(h5), "params": str(params)}
    if h5.exists():
        return hd.Tree.read(str(h5)), info
    log(f"learning the tree for {key} ({X.shape[1]} features, {params}) ...")
    t0 = time.perf_counter()
    tree = hd.learn_tree(X, names, params=params, check_memory=False)
    info["learn_s"] = time.perf_counter() - t0
    tree.write(str(h5), {"source": f"bench_pairwise {key} counts"})
    h5.with_suffix(".nwk").write_text(tree.to_newick())
    return tree, info


def load_part(name: str, small: int | None, seed: int = 0):
    """(X with one column per leaf of the tree, in its leaf order (dense or CSR, float64 counts), tree, info,
    rows of the full set)."""
    if name in ("zeisel", "cbmc"):
        ds = datasets.load("zeisel7" if name == "zeisel" else "cbmc", values="counts")
        X, names = np.ascontiguousarray(ds.X, dtype=np.float64), ds.feature_names
        assert np.array_equal(X, np.rint(X)), "counts are not integers"
        tree, tinfo = learned_tree(name, X, names)
        tinfo["source"] = f"learned by hdtwd from the same counts, preset default ({tinfo['params']})"
    else:
        X = make_corpus()
        names = [f"w{j}" for j in range(X.shape[1])]
        t0 = time.perf_counter()
        tree = random_tree(X.shape[1])
        tinfo = {
            "source": "random_tree(24000, seed=0), edge lengths U[0.01, 1) (seed 1); "
            "not learned (too expensive at m = 24,000)",
            "build_s": time.perf_counter() - t0,
        }
    column = {n: j for j, n in enumerate(names)}
    X = X[:, [column[n] for n in tree.leaf_names]]  # every feature is a leaf of these trees
    if sp.issparse(X):
        X = sp.csr_matrix(X)
    rows = np.arange(X.shape[0])
    if small:
        rows = np.sort(np.random.default_rng(seed).choice(X.shape[0], size=min(small, X.shape[0]), replace=False))
        X = X[rows]
    nnz = X.nnz if sp.issparse(X) else int(np.count_nonzero(X))
    info = {
        "n": int(X.shape[0]),
        "m": int(X.shape[1]),
        "sparse": bool(sp.issparse(X)),
        "density": nnz / (X.shape[0] * X.shape[1]),
        "mean_total_count": float(np.asarray(X.sum(axis=1)).mean()),
        "tree_nodes": tree.n_nodes,
        "tree_leaves": tree.n_leaves,
        "tree_depth": int(tree.depth().max()),
        "tree": tinfo,
    }
    return X, tree, info, rows


def skbio_tree(tree):
    import skbio

    return skbio.TreeNode.read(io.StringIO(tree.to_newick()), convert_underscores=False)


# ------------------------------------------------------------------ agreement
# ------------------------------------------------------------------ methods on one data set
def time_methods(X, tree, reps: int, max_wait_s: float) -> tuple[dict[str, Any], np.ndarray]:
    """Time hdtwd and scipy on the rows of ``X`` (columns in the tree's leaf order); the condensed hdtwd
    result for agreement checks."""
    from scipy.spatial.distance import pdist

    import hdtwd_cli as hd

    n = X.shape[0]
    names = tree.leaf_names
    res: dict[str, Any] = {"n": n}
    D, r = repeat(lambda: hd.distances(X, tree, feature_names=names), reps, max_wait_s, "hdtwd distances")
    res["hdtwd"] = r
    ref = condensed(D)
    del D

    tY = {"s": 0.0}

    def y_then_pdist():
        t = time.perf_counter()
        Yl = hd.tree_vectors(tree, X, names)
        tY["s"], tY["d"] = time.perf_counter() - t, Yl.shape[1]
        t = time.perf_counter()
        out = pdist(Yl, "cityblock")
        tY["pdist_s"] = time.perf_counter() - t
        return out

    d, r = repeat(
        y_then_pdist,
        reps,
        max_wait_s,
        "tree vectors + pdist",
        split=lambda: {"twd_vectors_s": tY["s"], "pdist_s": tY["pdist_s"]},
    )
    r["agreement"] = agreement(ref, d)
    res["scipy"] = r
    res["hdtwd"]["d"] = int(tY["d"])  # the tree vectors' columns: nodes with mass in some row
    return res, ref


def _skbio_call(counts, tree, tnode, eng: str):
    import skbio.diversity

    kw = {} if eng == "default" else {"engine": eng}
    return skbio.diversity.beta_diversity(
        "weighted_unifrac",
        counts,
        ids=[f"s{i}" for i in range(counts.shape[0])],
        taxa=tree.leaf_names,
        tree=tnode,
        normalized=False,
        validate=False,
        **kw,
    )


def skbio_probe(X, tree, tnode, eng: str, max_wait_s: float) -> dict[str, Any]:
    """Time scikit-bio once on SKBIO_PROBE_N random samples; per-pair cost."""
    n0 = min(SKBIO_PROBE_N, X.shape[0])
    idx = np.sort(np.random.default_rng(7).choice(X.shape[0], size=n0, replace=False))
    Xs = X[idx]
    counts = (Xs.toarray() if sp.issparse(Xs) else Xs).astype(np.int64)
    _, fig = timed(lambda: _skbio_call(counts, tree, tnode, eng), max_wait_s)
    fig["n"] = n0
    fig["per_pair_s"] = fig["s"] / (n0 * (n0 - 1) / 2)
    return fig


def skbio_worker(args) -> int:
    """Hidden mode: time scikit-bio on given rows, one JSON line per event on stdout.

    Runs in its own process so that the parent can stop a run that exceeds the budget.
    """
    name, eng = args.skbio_worker, args.engine
    X, tree, _info, _rows = load_part(name, None)
    rows = np.load(args.rows_file)
    X = X[rows]
    counts = (X.toarray() if sp.issparse(X) else X).astype(np.int64)
    del X
    tnode = skbio_tree(tree)
    _skbio_call(counts[:5], tree, tnode, eng)  # warm-up (numba compiles its kernel here)

    def emit(obj: dict[str, Any]) -> None:
        print(json.dumps(obj), flush=True)

    def call():
        emit({"event": "start", "t": time.time()})
        return _skbio_call(counts, tree, tnode, eng).condensed_form()

    d = None
    for r in range(args.reps):
        d = None
        d, fig = timed(call, args.max_wait)
        emit({"event": "done", "run": r, **fig})
        log(
            f"  scikit-bio ({eng}) run {r + 1}/{args.reps}: {fig['s']:.3f} s (other load {fig['background_cores']:.2f})"
        )
    np.save(args.out_npy, d)
    emit({"event": "finished"})
    return 0


def skbio_runs(name: str, rows: np.ndarray, eng: str, reps: int, cap_s: float, ref: np.ndarray, args) -> dict[str, Any]:
    """``reps`` timed scikit-bio runs in a worker process; a run longer than ``cap_s`` is stopped."""
    import queue
    import threading

    wd = work_dir()
    rows_file = wd / f"rows_{name}_{os.getpid()}.npy"
    out_npy = wd / f"skbio_{name}_{eng}_{os.getpid()}.npy"
    np.save(rows_file, rows)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--skbio-worker",
        name,
        "--engine",
        eng,
        "--rows-file",
        str(rows_file),
        "--out-npy",
        str(out_npy),
        "--reps",
        str(reps),
        "--max-wait",
        str(args.max_wait),
        "--max-tries",
        str(MAX_TRIES),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=harness.REPO)
    q: queue.Queue = queue.Queue()

    def reader():
        for line in proc.stdout:  # type: ignore[union-attr]
            q.put(line)
        q.put(None)

    threading.Thread(target=reader, daemon=True).start()
    runs, started, stopped_after = [], None, None
    while True:
        try:
            line = q.get(timeout=1.0)
        except queue.Empty:
            if started is not None and time.time() - started > cap_s:
                stopped_after = time.time() - started
                proc.kill()
                log(f"  scikit-bio ({eng}): run stopped after {stopped_after:.0f} s (cap {cap_s:.0f} s)")
                proc.wait()
                break
            continue
        if line is None:
            break
        ev = json.loads(line)
        if ev["event"] == "start":
            started = ev["t"]
        elif ev["event"] == "done":
            runs.append({k: ev[k] for k in ("s", "cpu_s", "background_cores")})
            started = None
    rc = proc.wait()
    rows_file.unlink(missing_ok=True)
    res: dict[str, Any] = {"n": int(rows.size), "engine": eng, "cap_s": cap_s, "runs": runs}
    if stopped_after is not None:
        res.update({"stopped": True, "stopped_after_s": stopped_after})
        out_npy.unlink(missing_ok=True)
        return res
    if rc != 0 or len(runs) != reps:
        raise RuntimeError(f"scikit-bio worker failed (exit {rc}): {' '.join(cmd)}")
    d = np.load(out_npy)
    out_npy.unlink(missing_ok=True)
    res.update(
        {
            "stopped": False,
            "median_s": float(np.median([r["s"] for r in runs])),
            "max_background_cores": max(r["background_cores"] for r in runs),
            "agreement": agreement(ref, d),
        }
    )
    return res


def pairs(n: int) -> float:
    return n * (n - 1) / 2


def run_dataset(name: str, args) -> dict[str, Any]:
    X, tree, info, rows = load_part(name, args.small)
    log(f"[{name}] {info['n']} x {info['m']}, tree {info['tree_nodes']} nodes (depth {info['tree_depth']})")
    t0 = time.perf_counter()
    tnode = skbio_tree(tree)
    info["skbio_newick_parse_s"] = time.perf_counter() - t0

    # warm-ups (untimed): numba caches of hdtwd and scikit-bio's numba kernel
    import hdtwd_cli as hd

    hd.distances(X[:5], tree, feature_names=tree.leaf_names)
    c5 = (X[:5].toarray() if sp.issparse(X) else X[:5]).astype(np.int64)
    _skbio_call(c5, tree, tnode, "numba")

    engines = ["default", "numba"]
    rec: dict[str, Any] = {"label": LABELS[name], "info": info, "engines": {}, "skbio_budget_s": args.skbio_budget}
    from skbio.diversity._driver import _resolve_engine

    rec["skbio_default_engine"] = _resolve_engine(None, ("cython", "numba"))
    n = info["n"]
    for eng in engines:
        pr = skbio_probe(X, tree, tnode, eng, args.max_wait)
        est = pr["per_pair_s"] * pairs(n)
        pr["estimate_full_s"] = est
        rec["engines"][eng] = {"probe": pr}
        log(f"[{name}] scikit-bio ({eng}) probe: {pr['s']:.2f} s on {pr['n']} -> full set about {est:.0f} s")
    del tnode

    log(f"[{name}] full set: hdtwd, scipy")
    rec["full"], ref = time_methods(X, tree, args.reps, args.max_wait)
    sub_engines = []
    for eng in engines:
        if rec["engines"][eng]["probe"]["estimate_full_s"] > args.skbio_budget:
            rec["full"][f"skbio_{eng}"] = {"skipped": True}
            sub_engines.append(eng)
            continue
        log(f"[{name}] full set: scikit-bio ({eng}), each run capped at {args.skbio_budget:.0f} s")
        est = rec["engines"][eng]["probe"]["estimate_full_s"]
        r = skbio_runs(name, rows, eng, 1 if est > SLOW_S else args.reps, args.skbio_budget, ref, args)
        rec["full"][f"skbio_{eng}"] = r
        if r["stopped"]:
            sub_engines.append(eng)
    del ref
    if sub_engines:
        worst = max(rec["engines"][e]["probe"]["per_pair_s"] for e in sub_engines)
        nsub = next((s for s in (1000, 500, 250) if worst * pairs(s) <= args.skbio_budget / 2), 250)
        nsub = min(nsub, n)
        idx = np.sort(np.random.default_rng(11).choice(n, size=nsub, replace=False))
        log(f"[{name}] subset n' = {nsub}: every method, scikit-bio engines {engines}")
        sub, ref = time_methods(X[idx], tree, args.reps, args.max_wait)
        for eng in engines:
            sub[f"skbio_{eng}"] = skbio_runs(name, rows[idx], eng, args.reps, 2 * args.skbio_budget, ref, args)
        sub["scale_to_full"] = pairs(n) / pairs(nsub)
        rec["subset"] = sub
    return rec


# ------------------------------------------------------------------ main
def versions() -> dict[str, Any]:
    import numba
    import scipy
    import skbio

    import hdtwd_cli

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
        "numba_threads": numba.config.NUMBA_NUM_THREADS,
        "skbio": skbio.__version__,
        "hdtwd": getattr(hdtwd_cli, "__version__", "?"),
    }


def wait_gate(path: str, max_wait_s: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    while not os.path.exists(path) and time.perf_counter() - t0 < max_wait_s:
        time.sleep(30)
    waited = time.perf_counter() - t0
    ok = os.path.exists(path)
    load = os.getloadavg()
    log(f"gate {path}: {'present' if ok else 'absent (gave up waiting)'} after {waited:.0f} s; load {load}")
    return {"gate": path, "present": ok, "waited_s": waited, "loadavg": load}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Issue 5: pairwise distance step benchmark.")
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    ap.add_argument(
        "--small",
        type=int,
        default=None,
        help="debug: only this many samples per data set "
        "(and small memory runs); records are tagged and never rendered",
    )
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--max-wait", type=float, default=900.0, help="wait up to this long for an idle machine before each run"
    )
    ap.add_argument("--max-tries", type=int, default=3, help="calls per timed run while other processes disturb it")
    ap.add_argument(
        "--skbio-budget", type=float, default=600.0, help="seconds one scikit-bio run may take on a full set"
    )
    ap.add_argument("--mem-n", type=int, default=30000)
    ap.add_argument("--knn-n", type=int, default=100000)
    ap.add_argument(
        "--knn-limit", type=float, default=2400.0, help="run --knn at --knn-n only if estimated below this (s)"
    )
    ap.add_argument("--knn-fallback-n", type=int, default=30000)
    ap.add_argument(
        "--knn-partial-s", type=int, default=240, help="then also run --knn-n for this long (peak RSS); 0: skip"
    )
    ap.add_argument(
        "--knn-partial-cap-GB",
        type=float,
        default=12.0,
        help="stop the partial run once its RSS passes this (or 60%% of MemAvailable)",
    )
    ap.add_argument("--gate", default=None, help="wait for this file before timing (poll every 30 s)")
    ap.add_argument("--gate-max-wait", type=float, default=6000.0)
    ap.add_argument("--unifrac-log", default="/tmp/bench5/unifrac_pip.log")
    ap.add_argument("--note", action="append", default=[])
    ap.add_argument("--skbio-worker", help=argparse.SUPPRESS)
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    ap.add_argument("--rows-file", help=argparse.SUPPRESS)
    ap.add_argument("--out-npy", help=argparse.SUPPRESS)
    ap.add_argument("--render", action="store_true", help="only merge the stored records and render")
    ap.add_argument(
        "--write", action="store_true", help="replace the issue-5 section of --results (default: print it only)"
    )
    ap.add_argument("--no-results", action="store_true", help=argparse.SUPPRESS)  # the old opt-out; now the default
    ap.add_argument("--results", default=str(harness.HISTORY), help="the file --write updates (default: %(default)s)")
    args = ap.parse_args(argv)

    global MAX_TRIES
    MAX_TRIES = args.max_tries
    if args.skbio_worker:
        return skbio_worker(args)
    wd = work_dir()
    tag = f"small{args.small}" if args.small else "full"
    if args.small:
        args.mem_n, args.knn_n, args.knn_fallback_n = 2000, 6000, 3000
        args.knn_limit, args.knn_partial_s = 1.0, 20
        args.max_wait, MAX_TRIES = 0.0, 1

    if not args.render:
        gate = wait_gate(args.gate, args.gate_max_wait) if args.gate else None
        for part in args.parts:
            rec: dict[str, Any] = {
                "part": part,
                "tag": tag,
                "machine": harness.machine_facts(),
                "versions": versions(),
                "args": vars(args),
                "gate": gate,
                "loadavg_start": os.getloadavg(),
            }
            log(f"=== part {part} ({tag}); load average {rec['loadavg_start']}")
            if part == "memory":
                rec["result"] = memory_runs(args)
            else:
                rec["result"] = run_dataset(part, args)
            rec["loadavg_end"] = os.getloadavg()
            p = wd / f"issue5_{part}_{tag}_{harness.utc_stamp()}.json"
            p.write_text(json.dumps(rec, indent=1, default=str))
            log(f"record: {p}")
        if args.small:
            # render the small records for inspection only
            print(render(merge(wd, tag, args)))
            return 0

    merged = merge(wd, "full", args)
    section = render(merged)
    print(section)
    if args.write:
        harness.write_section(Path(args.results), section, SECTION_TITLE)
        log(f"updated {args.results}")
    return 0


def merge(wd: Path, tag: str, args) -> dict[str, Any]:
    """The latest record of every part with this tag, as one record for :func:`render`."""
    merged: dict[str, Any] = {"datasets": {}, "notes": list(args.note), "args": vars(args)}
    latest: dict[str, Path] = {}
    for p in sorted(wd.glob(f"issue5_*_{tag}_*.json")):
        part = p.name.split("_")[1]
        latest[part] = p  # sorted by time stamp: the last one wins
    commits, dates = set(), []
    for part in PARTS:
        if part not in latest:
            continue
        rec = json.loads(latest[part].read_text())
        merged.setdefault("machine", rec["machine"])
        merged.setdefault("versions", rec["versions"])
        merged["args"] = {**rec["args"], **{k: v for k, v in vars(args).items() if k == "note"}}
        commits.add(rec["machine"]["git_commit"])
        dates.append(rec["machine"]["date_utc"])
        if part == "memory":
            merged["memory"] = rec["result"]
        else:
            merged["datasets"][part] = rec["result"]
        g = rec.get("gate")
        if g and not g["present"]:
            merged["notes"].append(
                f"part {part}: the go file {g['gate']} did not appear within "
                f"{g['waited_s'] / 60:.0f} min; run anyway at load average "
                f"{', '.join(f'{x:.2f}' for x in g['loadavg'])}."
            )
        merged["notes"].append(
            f"part {part}: started {rec['machine']['date_utc']}, load average at start "
            f"{', '.join(f'{x:.2f}' for x in rec['loadavg_start'])}, at end "
            f"{', '.join(f'{x:.2f}' for x in rec['loadavg_end'])}."
        )
    if "machine" not in merged:
        raise SystemExit(f"no {tag} records under {wd}")
    if len(commits) > 1:
        merged["notes"].append(f"the parts ran at different commits: {', '.join(sorted(commits))}.")
    merged["unifrac"] = unifrac_summary(Path(args.unifrac_log))
    return merged


if __name__ == "__main__":
    sys.exit(main())
