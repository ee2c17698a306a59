"""The walk of the samples' matrix through ``hd.distances``: how often the data goes back to a module it left.

Issue 61's measure of "one checked value at the door". Every call inside the package that receives a matrix
with the samples' row count (dense or sparse: the data and what is derived from it row for row) is a step; a
*stay* is a run of consecutive steps in one module, a *room* a module visited, a *return* a stay in a module
already left, a *climb* a stay in a higher layer (docs/architecture.md) than the one before. Also counted: how
many times the matrix is canonicalised (``canonical_csr``), value-checked (``check_values``), and how often a
stage checks that it was given the door's canonical form (``require_canonical``: a flag read, no conversion).

    python benchmarks/walk.py [--samples 200] [--features 300]

Prints one JSON line per storage (dense, CSR) of the same generated counts (public names only:
``hd.datasets.planted_counts``, ``hd.distances``).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from typing import Any

import numpy as np
import scipy.sparse as sp

import hdtwd_cli as hd

#: The layers from the bottom up (docs/architecture.md); a module's layer is the last prefix it matches.
LAYERS = (
    "hdtwd_cli._runtime",
    "hdtwd_cli.io",
    "hdtwd_cli.tree",
    "hdtwd_cli.twd",
    "hdtwd_cli.joint",
    "hdtwd_cli.knn",
    "hdtwd_cli.evaluate",
    "hdtwd_cli._api",
)


def _layer(module: str) -> int:
    return max((i for i, top in enumerate(LAYERS) if module == top or module.startswith(top + ".")), default=0)


def walk(X: Any, names: list[str]) -> dict[str, Any]:
    """The steps of ``hd.distances(X, feature_names=names)`` and their figures (see the module docstring)."""
    n = X.shape[0]
    steps: list[tuple[str, str]] = []

    def carries(v: object) -> bool:
        return (isinstance(v, np.ndarray) and v.ndim == 2 and v.shape[0] == n) or (sp.issparse(v) and v.shape[0] == n)

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__") or ""
        if not module.startswith("hdtwd_cli"):
            return
        code = frame.f_code
        given = [frame.f_locals.get(a) for a in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]]
        if any(carries(v) for v in given):
            steps.append((module, code.co_name))

    hd.distances(X[: max(3, n // 10)], feature_names=names)  # imports and compiled kernels before the walk
    sys.setprofile(profile)
    try:
        hd.distances(X, feature_names=names)
    finally:
        sys.setprofile(None)
    stays = [s for i, s in enumerate(steps) if i == 0 or steps[i - 1][0] != s[0]]
    seen: set[str] = set()
    returns = climbs = 0
    for i, (module, _) in enumerate(stays):
        returns += module in seen
        climbs += bool(i) and _layer(module) > _layer(stays[i - 1][0])
        seen.add(module)
    calls = collections.Counter(function for _, function in steps)
    return {
        "steps": len(steps),
        "stays": len(stays),
        "rooms": len(seen),
        "returns": returns,
        "climbs": climbs,
        "canonical_csr": calls["canonical_csr"],
        "require_canonical": calls["require_canonical"],
        "check_values": calls["check_values"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--features", type=int, default=300)
    a = ap.parse_args()
    X, _, _ = hd.datasets.planted_counts(a.samples, a.features, 3, seed=0)
    names = [f"g{j}" for j in range(X.shape[1])]
    for storage, M in (("dense", X), ("csr", sp.csr_matrix(X))):
        print(json.dumps({"storage": storage, "shape": list(X.shape), **walk(M, names)}), flush=True)


if __name__ == "__main__":
    main()
