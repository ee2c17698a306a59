"""The memory part of the pairwise benchmark: the command line under GNU time on generated counts (blocked HDF5
output for 30,000 x 2,000; ``--knn 15`` for 100,000 x 2,000), each under a memory cap (``bench_pairwise.py --parts memory``);
and the helpers every part of it shares (the work folder, the log, the random tree, the agreement of two matrices).

Support for ``bench_pairwise.py``; public names only.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

REL_TOL = 1e-9


def work_dir() -> Path:
    return harness.work_dir("pairwise")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


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
