"""The exact re-ranking of approximate candidates, the search's own recall check and the default search.

Oracles: the graph from a vector cache small enough to evict every block against the graph from the
default cache (the same bits); the recall check against neighbours given in no particular order; the
default (``auto``) against the exact search below 20,000 samples.
"""

from __future__ import annotations

import anndata
import numpy as np
import scipy.sparse as sp
from conftest import SAMPLE, run_hdtwd

import hdtwd_cli as hd
from hdtwd_cli.knn._choose import AUTO_NNDESCENT_ABOVE, choose_method
from hdtwd_cli.knn._search import SampledExact


def _denoised(rank: int = 10):
    ad = anndata.read_h5ad(SAMPLE / "cells.h5ad")
    params = hd.TreeParams(denoise=rank)
    return hd.distance_vectors(sp.csr_matrix(ad.X), feature_names=list(ad.var_names), params=params)


def test_a_small_vector_cache_evicts_and_gives_the_same_graph(monkeypatch):
    """The re-ranking's vector cache (a few dozen vectors here, so that blocks evict each other's)
    changes the time only: the same neighbours and the same bits of every distance."""
    from hdtwd_cli.knn import _search

    dv = _denoised()
    want = dv.knn(15, "nndescent", seed=1)
    D = dv.matrix()
    n = D.shape[0]
    np.testing.assert_array_equal(want.distances, D[np.arange(n)[:, None], want.indices])  # exact TWDs
    monkeypatch.setattr(_search, "_RERANK_BYTES", 8 * dv.base.dim * 40)  # 40 vectors: 10 rows a block
    got = dv.knn(15, "nndescent", seed=1)
    assert np.array_equal(want.indices, got.indices) and np.array_equal(want.distances, got.distances)


def test_the_sampled_recall_reads_the_kth_nearest_whatever_the_order():
    dv = _denoised()
    check = SampledExact(dv.base, 3, rows=np.array([0, 1]))
    check.distances = np.array([[3.0, 1.0, 2.0], [1.0, 5.0, 4.0]])  # the k nearest in no order
    found = np.zeros((dv.base.n, 3))
    found[0], found[1] = [1.0, 2.0, 3.0], [1.0, 4.0, 5.0]
    assert check.recall(found) == 1.0
    found[1] = [1.0, 4.0, 6.0]  # one found neighbour beyond the exact third
    assert check.recall(found) == 5 / 6


def test_auto_is_the_default_and_exact_below_the_bound(tmp_path):
    assert choose_method("auto", AUTO_NNDESCENT_ABOVE) == "exact"
    assert choose_method("auto", AUTO_NNDESCENT_ABOVE + 1) == "nndescent"
    dv = _denoised()
    default, exact = dv.knn(15), dv.knn(15, "exact")
    assert default.params["knn_method"] == "exact"
    assert np.array_equal(default.indices, exact.indices) and np.array_equal(default.distances, exact.distances)
    out = tmp_path / "g.npz"
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "--denoise", "10", "--knn", "15", "-o", out)
    G = sp.load_npz(out).tocsr()
    for i in range(G.shape[0]):
        assert set(G[i].indices) == set(exact.indices[i, 1:])
