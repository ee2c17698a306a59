"""The paper's App. E toy over many draws: the distribution behind tests/test_planted.py's thresholds.

For each seed, ``gaussian_tree_samples(1000, seed)`` (balanced binary tree, 15 nodes, drawn along
the edges: the same samples on every CPU), a tree learned with each preset, and the Pearson
correlation between hdtwd's TWD and the true tree's TWD over all pairs. Prints (and with
``--write`` records in archive/RESULTS-history.md) mean, standard deviation, quantiles and the values of the
seeds the test uses.

Usage::

    python benchmarks/bench_toy.py --seeds 200 [--write] [--json toy.json]
    python benchmarks/bench_toy.py --from-json toy.json     # the table again from the recorded values
    python benchmarks/cpu_kind.py avx2 -- python benchmarks/bench_toy.py --seeds 5   # AVX2 paths
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.spatial.distance import pdist
from scipy.stats import pearsonr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

import hdtwd_cli as hd
from hdtwd_cli.datasets import gaussian_tree_samples

PRESETS = ("paper", "default")
TEST_SEEDS = range(5)


def planted_twd(X: np.ndarray, parent: np.ndarray) -> np.ndarray:
    r"""The condensed TWD of the rows of ``X`` on the tree that generated them (unit edges, mass on every node,
    nodes in heap order: ``parent[v] < v``): :math:`\sum_{v \ne root} |m_i(v) - m_{i'}(v)|` with :math:`m_i(v)`
    the share of row ``i``'s mass at ``v`` and below it (the closed form of exact OT on a tree)."""
    below = X / X.sum(axis=1, keepdims=True)
    for v in range(parent.shape[0] - 1, 0, -1):  # children after their parents: fold each into its parent
        below[:, parent[v]] += below[:, v]
    return pdist(below[:, parent >= 0], "cityblock")


def correlation(seed: int, preset: str) -> float:
    X, parent = gaussian_tree_samples(1000, seed)
    params, _ = harness.resolve_params(preset)
    names = [f"v{i}" for i in range(X.shape[1])]
    tree = hd.learn_tree(X, names, params=params, check_memory=False)
    D = hd.distances(X, tree=tree, feature_names=names)
    return float(pearsonr(D[np.triu_indices(X.shape[0], 1)], planted_twd(X, parent))[0])


def table(rs: dict[str, np.ndarray]) -> str:
    """The Markdown table of each preset's correlations (one per seed, seed order)."""
    rows = []
    for p in PRESETS:
        r = rs[p]
        q = np.quantile(r, [0.01, 0.05, 0.5])
        five = r[: len(TEST_SEEDS)]
        # the test's statistic: the mean of 5 seeds, over all disjoint groups of 5 seeds
        groups = r[: len(r) // 5 * 5].reshape(-1, 5).mean(axis=1)
        rows.append(
            f"| {p} | {r.mean():.3f} | {r.std(ddof=1):.3f} | {r.min():.3f} | {q[0]:.3f} | {q[1]:.3f} | "
            f"{q[2]:.3f} | {groups.min():.3f} | {', '.join(f'{v:.3f}' for v in five)} |"
        )
    return (
        "| preset | mean r | std | min | 1 % | 5 % | median | lowest mean of 5 seeds | seeds 0-4 |\n"
        "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument(
        "--write",
        action="store_true",
        help="record the table in benchmarks/archive/RESULTS-history.md (harness.HISTORY)",
    )
    ap.add_argument("--json", type=Path, help="also write every value here (with the machine and the commit)")
    ap.add_argument("--from-json", type=Path, help="print the table of the values --json recorded, computing nothing")
    a = ap.parse_args()
    if a.from_json:
        record = json.loads(a.from_json.read_text())
        print(table({p: np.array(record["values"][p]) for p in PRESETS}))
        print(f"recorded: {record['machine']}, {record['commit']}, {record['date']}")
        return
    t0 = time.time()
    rs = {p: np.array([correlation(s, p) for s in range(a.seeds)]) for p in PRESETS}
    print(table(rs))
    print(f"{a.seeds} seeds x {len(PRESETS)} presets in {time.time() - t0:.0f} s")
    if a.json:
        record = {"machine": harness.machine_line(), "commit": harness.git_commit(), "date": harness.utc_stamp()}
        a.json.write_text(json.dumps({**record, "values": {p: rs[p].tolist() for p in PRESETS}}))
    if a.write:
        section = (
            "## Issue 24: the App. E toy over many draws\n\n" + harness.machine_line() + "\n\n"
            f"`python benchmarks/bench_toy.py --seeds {a.seeds}`: Pearson r between hdtwd's TWD and the "
            "true tree's TWD (1,000 samples of N(5, pinv(L)) drawn along the tree's edges, all pairs), "
            "one draw per seed.\n\n" + table(rs) + "\n"
        )
        harness.write_section(harness.HISTORY, section, "## Issue 24: the App. E toy over many draws")


if __name__ == "__main__":
    main()
