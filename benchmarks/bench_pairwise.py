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

SECTION_TITLE = "## Issue 5: the pairwise distance step vs pdist, scikit-bio and Striped UniFrac"
PARTS = ("zeisel", "cbmc", "corpus", "memory")
LABELS = {
    "zeisel": "Zeisel (raw counts)",
    "cbmc": "CBMC (raw counts)",
    "corpus": "Synthetic corpus (counts)",
}
REL_TOL = 1e-9
MAX_TRIES = 3  # timed calls per run while disturbed by other processes (``--max-tries``)
RETRY_MAX_S = 120.0  # a disturbed call longer than this is kept (its load is reported), not repeated
SKBIO_PROBE_N = 200
SLOW_S = 60.0  # a method whose run takes longer than this is timed once, not ``--reps`` times


def work_dir() -> Path:
    return harness.work_dir("pairwise")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


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


def random_tree(m: int, seed: int = 0, length_seed: int = 1, prefix: str = "w"):
    """Random binary tree over ``m`` leaves named ``{prefix}0..``: two random subtrees joined at a time (seed
    ``seed``), edge lengths U[0.01, 1) (seed ``length_seed``); an :class:`hd.Tree`, leaves first, the root last."""
    import hdtwd_cli as hd

    rng = np.random.default_rng(seed)
    parent = np.full(2 * m - 1, -1, dtype=np.int64)
    active = list(range(m))
    for node in range(m, 2 * m - 1):
        for _ in range(2):  # draw a subtree, move the last one into its place
            i = int(rng.integers(len(active)))
            parent[active[i]] = node
            active[i] = active[-1]
            active.pop()
        active.append(node)
    length = np.random.default_rng(length_seed).uniform(0.01, 1.0, size=parent.shape[0])
    length[-1] = 0.0
    t = hd.Tree(parent=parent, length=length, leaf_names=[f"{prefix}{j}" for j in range(m)])
    t.validate()
    return t


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
def condensed(D: np.ndarray) -> np.ndarray:
    from scipy.spatial.distance import squareform

    return squareform(D, force="tovector", checks=False)


def agreement(ref: np.ndarray, other: np.ndarray) -> dict[str, Any]:
    """Max relative difference |a - b| / max(|a|, |b|) over pairs (0 where both are 0)."""
    a = np.asarray(ref, dtype=np.float64)
    b = np.asarray(other, dtype=np.float64)
    if a.shape != b.shape:
        raise RuntimeError(f"shape mismatch {a.shape} vs {b.shape}")
    diff = np.abs(a - b)
    denom = np.maximum(np.abs(a), np.abs(b))
    rel = np.divide(diff, denom, out=np.zeros_like(diff), where=denom > 0)
    mx = float(rel.max()) if rel.size else 0.0
    return {
        "max_rel_diff": mx,
        "max_abs_diff": float(diff.max()) if diff.size else 0.0,
        "max_D": float(a.max()) if a.size else 0.0,
        "ok": mx <= REL_TOL,
        "bitwise_equal": bool(np.array_equal(a, b)),
    }


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


# ------------------------------------------------------------------ memory runs (CLI)
def synth_counts(n: int, m: int, seed: int, nnz_per_row: int = 100) -> sp.csr_matrix:
    """Sparse counts: each row has about ``nnz_per_row`` distinct features with Poisson(3)+1 counts."""
    rng = np.random.default_rng(seed)
    k = rng.integers(nnz_per_row // 2, 3 * nnz_per_row // 2 + 1, size=n)
    indptr = np.concatenate([[0], np.cumsum(k)])
    cols = np.empty(indptr[-1], dtype=np.int32)
    for i in range(n):
        cols[indptr[i] : indptr[i + 1]] = np.sort(rng.choice(m, size=k[i], replace=False))
    vals = (rng.poisson(3.0, size=indptr[-1]) + 1).astype(np.float64)
    return sp.csr_matrix((vals, cols, indptr), shape=(n, m))


def mem_data(wd: Path, n: int, seed: int, m: int = 2000) -> Path:
    """``SYNTH_<n>.npz`` (written once): :func:`synth_counts` as an uncompressed scipy.sparse .npz."""
    p = wd / f"SYNTH_{n}_s{seed}.npz"
    if not p.exists():
        log(f"  writing {p.name} ...")
        sp.save_npz(p, synth_counts(n, m, seed), compressed=False)
    return p


def _cli_run(cmd: list[str], log_path: Path, max_wait_s: float) -> dict[str, Any]:
    if max_wait_s > 0:
        harness.wait_quiet(max_wait_s)
    r = harness.run_timed_once(cmd, log_path)
    r.pop("stderr", None)
    return r


def memory_runs(args) -> dict[str, Any]:

    hdtwd = harness.require_tools()
    wd = work_dir() / "mem"
    wd.mkdir(exist_ok=True)
    m = 2000
    n_block = args.mem_n
    n_knn = args.knn_n
    n_probe = min(5000, n_knn)
    tree = random_tree(m, seed=0, length_seed=1, prefix="f")  # names f0..f1999 = the CLI's defaults
    tpath = wd / "T.nwk"
    tpath.write_text(tree.to_newick())
    out: dict[str, Any] = {
        "m": m,
        "tree": "random_tree(2000, seed=0), lengths U[0.01, 1) (seed 1), leaves f0..f1999, Newick",
        "data": "sparse counts, 50-150 distinct features per row, Poisson(3)+1 values, scipy.sparse .npz",
    }

    def data(n: int, seed: int) -> Path:
        return mem_data(wd, n, seed, m)

    # warm numba's on-disk cache (untimed)
    tiny = data(200, 99)
    subprocess.run(
        [hdtwd, "distance", str(tiny), "--tree", str(tpath), "-o", str(wd / "tiny.h5"), "-q"],
        check=True,
        cwd=harness.REPO,
    )

    # (1) all pairs, blocked HDF5 output
    p = data(n_block, 1)
    dout = wd / "D.h5"
    cmd = [hdtwd, "distance", str(p), "--tree", str(tpath), "-o", str(dout), "-q"]
    log(f"[memory] blocked all pairs, n = {n_block}")
    r = _cli_run(cmd, wd / "blocked.log", args.max_wait)
    r["n"] = n_block
    r["output_bytes"] = dout.stat().st_size
    r["check"] = _check_h5_rows(p, tree, dout)
    dout.unlink()
    out["blocked"] = r
    log(f"  {r['wall_s']:.1f} s, peak RSS {r['max_rss_MB']:.0f} MB")

    # (2) kNN graph: estimate from a 5000-row run first
    p = data(n_probe, 2)
    cmd = [hdtwd, "distance", str(p), "--tree", str(tpath), "--knn", "15", "-o", str(wd / "G_probe.npz"), "-q"]
    log(f"[memory] kNN probe, n = {n_probe}")
    r = _cli_run(cmd, wd / "knn_probe.log", args.max_wait)
    r["n"] = n_probe
    out["knn_probe"] = r
    est = r["wall_s"] * (n_knn / n_probe) ** 2
    out["knn_estimate_s"] = est
    log(f"  {r['wall_s']:.1f} s, peak {r['max_rss_MB']:.0f} MB; n = {n_knn} estimated {est / 60:.0f} min")
    n_run = n_knn if est <= args.knn_limit else args.knn_fallback_n
    p = data(n_run, 3)
    cmd = [hdtwd, "distance", str(p), "--tree", str(tpath), "--knn", "15", "-o", str(wd / "G.npz"), "-q"]
    log(f"[memory] kNN, n = {n_run}")
    r = _cli_run(cmd, wd / "knn.log", args.max_wait)
    r["n"] = n_run
    r["output_bytes"] = (wd / "G.npz").stat().st_size
    G = sp.load_npz(wd / "G.npz")
    r["graph"] = {"shape": list(G.shape), "nnz": int(G.nnz)}
    out["knn"] = r
    out["knn_target_n"] = n_knn
    if n_run != n_knn:
        out["knn_extrapolated_s"] = r["wall_s"] * (n_knn / n_run) ** 2
    log(f"  {r['wall_s']:.1f} s, peak {r['max_rss_MB']:.0f} MB")
    if n_run != n_knn and args.knn_partial_s > 0:
        # the target size itself, stopped after a fixed time or once its RSS passes a cap (so it
        # cannot push the shared machine out of memory): its peak covers reading, the tree vectors
        # and the first blocks of the neighbour search
        slope = (r["max_rss_MB"] - out["knn_probe"]["max_rss_MB"]) / ((n_run - n_probe) or 1)
        predicted = r["max_rss_MB"] + slope * (n_knn - n_run)
        out["knn_rss_linear_MB"] = {"slope_MB_per_sample": slope, "predicted_MB": predicted}
        cap = min(args.knn_partial_cap_GB * 1e9, 0.6 * harness.meminfo_bytes("MemAvailable"))
        p = data(n_knn, 4)
        cmd = [hdtwd, "distance", str(p), "--tree", str(tpath), "--knn", "15", "-o", str(wd / "G_partial.npz"), "-q"]
        log(
            f"[memory] kNN, n = {n_knn}, stopped after {args.knn_partial_s} s or at {cap / 1e9:.1f} GB RSS "
            f"(linear prediction {predicted:.0f} MB)"
        )
        if args.max_wait > 0:
            harness.wait_quiet(args.max_wait)
        q = run_capped(cmd, args.knn_partial_s, cap)
        q.update({"n": n_knn, "cmd": cmd, "time_limit_s": args.knn_partial_s, "rss_cap_MB": cap / 1e6})
        out["knn_partial"] = q
        log(f"  stopped by {q['stopped_by']} after {q['wall_s']:.0f} s, peak {q['max_rss_MB']:.0f} MB")
    return out


def run_capped(cmd: list[str], max_s: float, cap_bytes: float) -> dict[str, Any]:
    """Run ``cmd``; SIGINT it after ``max_s`` seconds or once its RSS exceeds ``cap_bytes``.

    The peak is the kernel's high-water mark ``VmHWM`` of the process (what ``/usr/bin/time``
    reports as maximum resident set size), read every 0.2 s until it exits.
    """
    import signal

    def status() -> dict[str, int]:
        try:
            with open(f"/proc/{proc.pid}/status") as fh:
                return {ln.split(":")[0]: int(ln.split()[1]) for ln in fh if ln.startswith(("VmHWM", "VmRSS"))}
        except (OSError, ValueError, IndexError):
            return {}

    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=harness.REPO)
    hwm_kb, stopped = 0, "exit"
    while proc.poll() is None:
        st = status()
        hwm_kb = max(hwm_kb, st.get("VmHWM", 0))
        if stopped == "exit":
            if st.get("VmRSS", 0) * 1024 > cap_bytes:
                stopped = "memory cap"
                proc.send_signal(signal.SIGINT)
            elif time.perf_counter() - t0 > max_s:
                stopped = "time limit"
                proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
    err = proc.stderr.read() if proc.stderr else ""
    return {
        "stopped_by": stopped,
        "returncode": proc.returncode,
        "wall_s": time.perf_counter() - t0,
        "max_rss_MB": hwm_kb * 1024 / 1e6,
        "stderr_tail": err.strip().splitlines()[-2:],
    }


def _check_h5_rows(data: Path, tree, dout: Path, rows: int = 64) -> dict[str, Any]:
    """Spot check: the first and last rows of the blocked output against the public cross distances."""
    import h5py

    import hdtwd_cli as hd

    X = sp.load_npz(data).tocsr()
    names = [f"f{j}" for j in range(X.shape[1])]  # the command's default names
    n = X.shape[0]
    sel = np.r_[0:rows, n - rows : n]
    with h5py.File(dout, "r") as f:
        Dh = f["distances"][sel, :]
    Dr = hd.distances(X[sel], tree, reference=X, feature_names=names, reference_feature_names=names)
    Dr[np.arange(sel.size), sel] = 0.0
    a = agreement(Dr, Dh)
    return {"rows_checked": int(sel.size), **a}


# ------------------------------------------------------------------ report
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
