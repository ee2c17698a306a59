"""Time and peak memory of the public API, parametrised over sizes, on generated counts (airspeed velocity).

Every benchmark calls public names only (``hdtwd_cli``, ``hdtwd_cli.datasets``): what a user's notebook
calls, so a change anywhere below the door shows here. The data are ``hd.datasets.planted_hierarchy``
counts (cells over a planted gene tree) and ``hd.datasets.planted_corpus`` documents, made once per
parameter set in ``setup`` (not timed). The sizes run from what CI runs (the first of each list, in
tests/test_benchmarks.py, every benchmark once) to a laptop's minutes; the atlas sizes (10^5-10^6
cells, all genes) stay with ``bench_atlas.py``, which times whole processes. A comparison is one
``asv continuous`` run on one machine: these machines are shared, so a ratio, never a time on its
own, is evidence (docs/performance.md).

    asv run --config benchmarks/asv.conf.json --python=same --quick       # this environment
    asv continuous --config benchmarks/asv.conf.json main HEAD            # a change against main
"""

from __future__ import annotations

import numpy as np

import hdtwd_cli as hd
from hdtwd_cli.datasets import planted_corpus, planted_hierarchy

#: (samples, features) of the cell benchmarks: the first is CI's tiny run; the last crosses the landmark
#: operator's threshold (more than 5,000 features).
CELLS = [(200, 120), (2_000, 1_000), (5_000, 6_000)]
#: (documents, words) of the corpus benchmarks.
CORPORA = [(200, 400), (3_000, 6_000)]


def _cells(n: int, m: int) -> tuple[np.ndarray, list[str], np.ndarray]:
    """UMI-like counts (most entries 0) of ``n`` cells over ``m`` genes, the genes' names and the planted tree."""
    X, _, parent = planted_hierarchy(n, m, counts_per_feature=0.15, seed=0)
    return X, [f"f{j}" for j in range(m)], parent


class _Cells:
    """Planted counts of each size in :data:`CELLS` (``setup``)."""

    params = [CELLS]
    param_names = ["samples x features"]
    timeout = 900

    def setup(self, shape: tuple[int, int]) -> None:
        self.X, self.names, self.planted = _cells(*shape)


class LearnTree(_Cells):
    """``hd.learn_tree`` with the defaults (denoising, the diffusion learner) on planted counts."""

    def time_learn_tree(self, shape: tuple[int, int]) -> None:
        hd.learn_tree(self.X, self.names, check_memory=False)

    def peakmem_learn_tree(self, shape: tuple[int, int]) -> None:
        hd.learn_tree(self.X, self.names, check_memory=False)


class Distances(_Cells):
    """All pairs (``hd.distances``) and the kNN graph (``hd.knn_graph``, 15 neighbours) on a given tree (each size's
    tree learned once, in ``setup_cache``)."""

    def setup_cache(self) -> dict[tuple[int, int], hd.Tree]:
        trees = {}
        for shape in CELLS:
            X, names, _ = _cells(*shape)
            trees[shape] = hd.learn_tree(X, names, check_memory=False)
        return trees

    def setup(self, trees: dict[tuple[int, int], hd.Tree], shape: tuple[int, int]) -> None:
        super().setup(shape)
        self.tree = trees[shape]

    def time_all_pairs(self, trees: dict, shape: tuple[int, int]) -> None:
        hd.distances(self.X, self.tree, feature_names=self.names)

    def peakmem_all_pairs(self, trees: dict, shape: tuple[int, int]) -> None:
        hd.distances(self.X, self.tree, feature_names=self.names)

    def time_knn_graph(self, trees: dict, shape: tuple[int, int]) -> None:
        hd.knn_graph(self.X, 15, tree=self.tree, feature_names=self.names)

    def peakmem_knn_graph(self, trees: dict, shape: tuple[int, int]) -> None:
        hd.knn_graph(self.X, 15, tree=self.tree, feature_names=self.names)


class Corpus:
    """A sparse corpus end to end: the tree learned and all pairs (``hd.distances`` without a tree)."""

    params = [CORPORA]
    param_names = ["documents x words"]
    timeout = 900

    def setup(self, shape: tuple[int, int]) -> None:
        n, m = shape
        self.X, _, _ = planted_corpus(n, m, seed=0)
        self.names = [f"w{j}" for j in range(m)]

    def time_distances(self, shape: tuple[int, int]) -> None:
        hd.distances(self.X, feature_names=self.names)

    def peakmem_distances(self, shape: tuple[int, int]) -> None:
        hd.distances(self.X, feature_names=self.names)


class Recovery(_Cells):
    """How well the default tree recovers the planted hierarchy (rooted-triplet agreement): tracked, not timed,
    so that a speed change that costs the tree shows beside its gain."""

    params = [CELLS[:2]]

    def track_triplet_agreement(self, shape: tuple[int, int]) -> float:
        tree = hd.learn_tree(self.X, self.names, check_memory=False)
        return float(hd.datasets.recovery(tree, self.planted).triplets)

    track_triplet_agreement.unit = "agreement"
