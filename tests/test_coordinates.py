"""The approximate search of denoised samples: candidates from their principal coordinates, exact re-ranking.

Oracles: the coordinates against NumPy's product ``(f(x) - mu) V``; the graph's distances against the
exact all-pairs matrix; its neighbours against the exact search (recall); the sampled samples' exact
neighbours found during the re-ranking against a pass of their own.
"""

from __future__ import annotations

import anndata
import numpy as np
import scipy.sparse as sp
from conftest import SAMPLE, run_hdtwd

import hdtwd_cli as hd
from hdtwd_cli.knn._choose import AUTO_EXACT_WORK, AUTO_NNDESCENT_ABOVE, choose_method, method_for
from hdtwd_cli.knn._coordinates import COORDINATE_CANDIDATE_FACTOR, coordinate_neighbors, has_coordinates
from hdtwd_cli.knn._search import SampledExact, locality_order, rerank_shipped
from hdtwd_cli.tree._denoise import DenoisedRows, log_cp10k


def _cells():
    ad = anndata.read_h5ad(SAMPLE / "cells.h5ad")
    return sp.csr_matrix(ad.X), list(ad.var_names)


def _denoised(rank: int = 10):
    X, names = _cells()
    return hd.distance_vectors(X, feature_names=names, params=hd.TreeParams(denoise=rank))


def test_coordinates_are_the_centred_values_on_the_axes_whatever_the_storage_or_block():
    dv = _denoised()
    rows = dv.base.x
    assert isinstance(rows, DenoisedRows) and has_coordinates(dv.base)
    d = rows.denoiser
    Z = rows.coordinates()
    F = np.asarray(log_cp10k(rows.values).toarray()) if d.log_counts else rows.values.toarray()
    np.testing.assert_allclose(Z, (F - d.mean) @ d.axes, rtol=0, atol=1e-10 * np.abs(Z).max())
    dense = DenoisedRows(rows.values.toarray(), d).coordinates()
    assert np.array_equal(dense, Z)  # the same bits from dense storage
    part = DenoisedRows(rows.values[[5, 2, 250]], d).coordinates()
    assert np.array_equal(part, Z[[5, 2, 250]])  # a row's bits depend on that row alone


def test_the_graph_has_exact_distances_high_recall_and_one_answer_per_seed():
    dv = _denoised()
    D = dv.matrix()
    want = dv.knn(15, "exact")
    a, b = dv.knn(15, "nndescent", seed=3), dv.knn(15, "nndescent", seed=3)
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.distances, b.distances)
    n = D.shape[0]
    np.testing.assert_array_equal(a.distances, D[np.arange(n)[:, None], a.indices])  # exact TWDs
    assert np.all(np.diff(a.distances, axis=1) >= 0)
    recall = np.mean([len(set(p[1:]) & set(q[1:])) / 14 for p, q in zip(a.indices, want.indices)])
    assert recall >= 0.97, recall


def test_the_recall_is_measured_in_the_reranking_pass_and_reported():
    dv = _denoised()
    notes: list[str] = []
    idx, dist = coordinate_neighbors(dv.base, 14, seed=0, note=notes.append)
    assert any("recall@14 on 50 sampled samples" in s for s in notes), notes
    # the probe's exact neighbours, found while re-ranking, are those of a pass of their own
    tv = dv.base
    c = int(np.ceil(COORDINATE_CANDIDATE_FACTOR * 14))
    rng = np.random.default_rng(0)
    candidates = np.stack([rng.choice(np.delete(np.arange(tv.n), i), c, replace=False) for i in range(tv.n)])
    probe = SampledExact(tv, 14, seed=5)
    rerank_shipped(tv, candidates, 14, None, None, probe=probe)
    alone = SampledExact(tv, 14, seed=5).scan(tv)
    for p, q, e, f in zip(probe.distances, probe.indices, alone.distances, alone.indices):
        assert sorted(zip(p, q)) == sorted(zip(e, f))
    assert locality_order(candidates).size == tv.n


def test_the_sampled_recall_reads_the_kth_nearest_whatever_the_order():
    dv = _denoised()
    check = SampledExact(dv.base, 3, rows=np.array([0, 1]))
    check.distances = np.array([[3.0, 1.0, 2.0], [1.0, 5.0, 4.0]])  # the k nearest in no order
    found = np.zeros((dv.base.n, 3))
    found[0], found[1] = [1.0, 2.0, 3.0], [1.0, 4.0, 5.0]
    assert check.recall(found) == 1.0


def test_auto_searches_denoised_samples_approximately_only_when_the_exact_search_is_costly():
    assert choose_method("auto", 10_000, dim=50_000, coordinates=True) == "nndescent"
    assert choose_method("auto", 10_000, dim=50_000, coordinates=False) == "exact"
    small = int(np.sqrt(2 * AUTO_EXACT_WORK / 4_000))  # n^2 d / 2 at the bound
    assert choose_method("auto", small, dim=4_000, coordinates=True) == "exact"
    assert choose_method("auto", small + 1, dim=4_000, coordinates=True) == "nndescent"
    assert choose_method("auto", AUTO_NNDESCENT_ABOVE + 1) == "nndescent"
    assert choose_method("exact", 10**6, dim=10**5, coordinates=True) == "exact"
    assert method_for("auto", _denoised().base) == "exact"  # 300 cells: exact


def test_the_command_prints_the_recall_and_writes_the_api_graph(tmp_path):
    out = tmp_path / "g.npz"
    args = ("distance", SAMPLE / "cells.h5ad", "--denoise", "10", "--knn", "15", "--knn-method", "nndescent")
    r = run_hdtwd(*args, "-v", "-o", out)
    err = r.stderr.decode() if isinstance(r.stderr, bytes) else r.stderr
    assert "principal coordinates" in err and "recall@14" in err
    G = sp.load_npz(out).tocsr()
    g = _denoised().knn(15, "nndescent")
    for i in range(G.shape[0]):
        assert set(G[i].indices) == set(g.indices[i, 1:])
        np.testing.assert_array_equal(np.sort(G[i].data), g.distances[i, 1:])


def test_a_small_vector_cache_evicts_and_gives_the_same_graph(monkeypatch):
    """The re-ranking's vector cache (a few dozen vectors here, so that blocks evict each other's)
    changes the time only: the same neighbours and the same bits of every distance."""
    from hdtwd_cli.knn import _search

    dv = _denoised()
    want = dv.knn(15, "nndescent", seed=1)
    monkeypatch.setattr(_search, "_RERANK_BYTES", 8 * dv.base.dim * 70)  # 70 vectors: 17 rows a block
    got = dv.knn(15, "nndescent", seed=1)
    assert np.array_equal(want.indices, got.indices) and np.array_equal(want.distances, got.distances)


def test_many_samples_are_searched_on_their_tree_vectors(monkeypatch):
    """Above COORDINATE_MAX_SAMPLES the coordinates' ranking loses neighbours: the byte-coded search runs."""
    from hdtwd_cli.knn import _coordinates

    dv = _denoised()
    assert has_coordinates(dv.base)
    monkeypatch.setattr(_coordinates, "COORDINATE_MAX_SAMPLES", dv.base.n - 1)
    assert not has_coordinates(dv.base)
    notes: list[str] = []
    from hdtwd_cli.knn._choose import search_neighbors

    search_neighbors(dv.base, 14, "nndescent", note=notes.append)
    assert not any("principal coordinates" in s for s in notes) and any("partition" in s for s in notes), notes
