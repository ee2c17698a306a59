"""Shared helpers: running the real ``hdtwd`` command and independent oracles."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hdtwd_cli._runtime.simd import prefer_wide_vectors

prefer_wide_vectors()  # before numba loads: the kernels compiled here are those of the `hdtwd` subprocesses

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.sparse.csgraph import shortest_path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data"


def run_hdtwd(*args: str, input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``python -m hdtwd_cli ARGS`` in a real subprocess (real pipes, real exit codes)."""
    env = dict(os.environ)
    env.pop("COLUMNS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "hdtwd_cli", *map(str, args)],
        input=input,
        capture_output=True,
        env=env,
        timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"hdtwd {' '.join(map(str, args))} exited {proc.returncode}\n{proc.stderr.decode()}")
    return proc


def path_metric(parent: np.ndarray, length: np.ndarray, n_leaves: int) -> np.ndarray:
    """Leaf-to-leaf path lengths by Dijkstra on the tree graph (independent of hdtwd's code)."""
    n = parent.shape[0]
    child = np.flatnonzero(parent >= 0)
    # tiny offset keeps zero-length edges in the sparse graph; removed afterwards
    G = sp.coo_matrix((length[child] + 1e-300, (child, parent[child])), shape=(n, n))
    D = shortest_path(G.tocsr(), directed=False)
    return D[:n_leaves, :n_leaves]


def exact_ot(a: np.ndarray, b: np.ndarray, C: np.ndarray) -> float:
    """Exact optimal-transport cost between histograms ``a`` and ``b`` by linear programming."""
    m = a.shape[0]
    A_eq = np.vstack([np.kron(np.eye(m), np.ones((1, m))), np.kron(np.ones((1, m)), np.eye(m))])
    # HiGHS's optimality tolerances are absolute (1e-7): on costs of 1e-12 every plan looked optimal
    # (a plan of cost 2.7e-12 between two identical histograms). Solved on the cost scaled to 1.
    scale = float(C.max()) if C.size and C.max() > 0 else 1.0
    # Tolerances at HiGHS's tightest (1e-10 of the largest cost): the oracle is exact to ~1e-10 C.max().
    res = linprog(
        C.ravel() / scale,
        A_eq=A_eq,
        b_eq=np.concatenate([a, b]),
        bounds=(0, None),
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    assert res.status == 0, res.message
    return float(res.fun) * scale


def assert_twd_is_exact_ot(tree, histograms: int = 5, seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The TWD on ``tree`` equals exact OT (:func:`exact_ot`) on its path metric for random histograms;
    returns the histograms and their TWD matrix."""
    from hdtwd_cli.twd._distance import tree_wasserstein

    C = path_metric(tree.parent, tree.length, tree.n_leaves)
    H = np.random.default_rng(seed).random((histograms, tree.n_leaves))
    H /= H.sum(axis=1, keepdims=True)
    D = tree_wasserstein(tree, H)
    for i in range(histograms):
        for j in range(i + 1, histograms):
            assert D[i, j] == pytest.approx(exact_ot(H[i], H[j], C), rel=1e-8, abs=1e-12)
    return H, D


def planted_groups(seed: int, per: int, d: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """4 groups of 2 subgroups of ``per`` unit vectors: a group direction, plus 0.6 of a subgroup
    direction (all orthonormal), plus a little noise. Returns the vectors and the subgroup of each."""
    rng = np.random.default_rng(seed)
    G = np.linalg.qr(rng.normal(size=(d, 12)))[0].T
    rows, sub = [], []
    for g in range(4):
        for s in range(2):
            for _ in range(per):
                x = G[g] + 0.6 * G[4 + 2 * g + s] + 0.05 * rng.normal(size=d)
                rows.append(x / np.linalg.norm(x))
                sub.append(2 * g + s)
    return np.array(rows), np.array(sub)


def feature_names(m: int) -> list[str]:
    """``g0 .. g{m-1}``: feature names for trees built in tests."""
    return [f"g{j}" for j in range(m)]


def clades(parent: np.ndarray, n_leaves: int) -> set[frozenset[int]]:
    """The leaf set below every node of a tree whose parents come after their children."""
    leaves: list[set[int]] = [{i} for i in range(n_leaves)] + [set() for _ in range(parent.size - n_leaves)]
    for v in range(parent.size - 1):
        leaves[parent[v]] |= leaves[v]
    return {frozenset(s) for s in leaves}


@pytest.fixture
def short_hyperbolic_training(monkeypatch):
    """HypHC's trees (``hhc``) trained on 20,000 triplets instead of its 10^6 x 20 epochs, which take 6 s a tree
    whatever the number of features: for tests whose assertions hold for any training length (the registered
    builder, its route and its decoding are unchanged; test_hyperbolic_hc checks the training itself)."""
    from hdtwd_cli.evaluate import _hyperbolic_hc

    monkeypatch.setitem(_hyperbolic_hc.hhc_tree.__kwdefaults__, "triplets", 20_000)


@pytest.fixture
def produce_csv() -> Path:
    return SAMPLE / "produce.csv"


def caterpillar(m: int):
    """A chain of ``m`` leaves (single linkage's worst case, ``m - 1`` deep): leaf i hangs off internal node
    m+i (leaf 0 off m), the internal nodes form a chain to the root; random edge lengths (seed 0)."""
    from hdtwd_cli.tree._tree import Tree

    parent = np.empty(2 * m - 1, dtype=np.int64)
    parent[0] = m
    parent[1:m] = m + np.arange(m - 1)
    parent[m : 2 * m - 2] = np.arange(m + 1, 2 * m - 1)
    parent[-1] = -1
    length = np.r_[np.random.default_rng(0).random(2 * m - 2), 0.0]
    return Tree(parent=parent, length=length, leaf_names=[f"t{i}" for i in range(m)])


# A skipped test is a check that did not run: with the test extra installed (`pip install '.[test]'`, as CI
# does) nothing may skip, so a skip fails the run. HDTWD_ALLOW_SKIPS=1 lets a checkout without some extra
# run the rest (the skips are then reported, never counted as passes).
_ALLOW_SKIPS = os.environ.get("HDTWD_ALLOW_SKIPS") == "1"


def _as_failure(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail") and not _ALLOW_SKIPS:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, which the test extra rules out (HDTWD_ALLOW_SKIPS=1 allows it): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    outcome = yield
    _as_failure(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):  # type: ignore[no-untyped-def]
    outcome = yield
    _as_failure(outcome.get_result())
