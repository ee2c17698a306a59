"""Approximate neighbours and the exact work on a Dask cluster: the same bits as one process.

A ``distributed.LocalCluster`` with two worker processes stands in for a real cluster: the kNN
graph and the Zarr all-pairs store must be the single-process bits, and a worker killed during a
run must end in a correct, complete result or a clean failure that leaves no store behind.
"""

import os

import anndata
import numpy as np
import pytest
import scipy.sparse as sp
from _faults import KILL_FILES, killable_cluster
from conftest import SAMPLE, run_hdtwd

import hdtwd_cli as hd
from hdtwd_cli.knn._choose import AUTO_NNDESCENT_ABOVE, choose_method

distributed = pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")


@pytest.fixture(scope="module")
def fault_root(tmp_path_factory):
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def cluster(fault_root):
    """Two worker processes whose tasks die on request: the worker plugin of tests/_faults.py,
    installed from here (hdtwd has no test hook; restarted workers get the plugin too)."""
    with killable_cluster(fault_root) as (c, client):
        yield c, client


@pytest.fixture
def fault_dir(cluster, fault_root):
    """The workers' fault directory, empty at the start of each test and emptied after it, so that a
    fault file a test leaves behind (failing before a task took it) never reaches the next test. The
    next test also starts with both workers back: a condition, not a delay (restarting a killed
    worker takes what it takes on a loaded runner; the timeout is only a safety net)."""
    c, client = cluster
    assert os.listdir(fault_root) == []
    try:
        yield fault_root
    finally:
        for name in KILL_FILES:
            (fault_root / name).unlink(missing_ok=True)
        client.wait_for_workers(2, timeout=600)


def cells_X():
    ad = anndata.read_h5ad(SAMPLE / "cells.h5ad")
    return ad.X, list(ad.var_names)


def test_knn_on_the_cluster_is_the_single_process_bits(cluster, tmp_path):
    c, client = cluster
    X, names = cells_X()
    dv = hd.distance_vectors(X, feature_names=names)
    one, many = dv.knn(15), dv.knn(15, client=client)
    assert np.array_equal(one.indices, many.indices) and np.array_equal(one.distances, many.distances)
    # many block-pair tasks (each distance computed once, folded as tasks finish): the same bits
    from hdtwd_cli.knn._dask import nearest_neighbors_dask
    from hdtwd_cli.twd._distance import nearest_neighbors

    ref = nearest_neighbors(dv.base, 14, 2048)
    for block in (37, 64):
        got = nearest_neighbors_dask(client, dv.base, 14, block=block)
        assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1]), block
    # through the command line: --scheduler, and the same graph as without it
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "--knn", "15", "-o", tmp_path / "a.npz")
    run_hdtwd(
        "distance", SAMPLE / "cells.h5ad", "--knn", "15", "--scheduler", c.scheduler_address, "-o", tmp_path / "b.npz"
    )
    A, B = sp.load_npz(tmp_path / "a.npz"), sp.load_npz(tmp_path / "b.npz")
    assert (A != B).nnz == 0 and A.nnz == 300 * 14


def test_all_pairs_into_zarr_on_the_cluster(cluster, tmp_path):
    c, client = cluster
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "-o", tmp_path / "D.npy")
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "--scheduler", c.scheduler_address, "-o", tmp_path / "D.zarr")
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "-o", tmp_path / "L.zarr")  # the same store without a cluster
    D = np.load(tmp_path / "D.npy")
    for store in ("D.zarr", "L.zarr"):
        g = zarr.open_group(str(tmp_path / store), mode="r")
        assert g.attrs["complete"] is True and np.array_equal(g["distances"][:], D)
        assert list(g["row_names"][:3]) == list(anndata.read_h5ad(SAMPLE / "cells.h5ad").obs_names[:3])
    import dask.array as da

    assert np.array_equal(da.from_zarr(str(tmp_path / "D.zarr"), component="distances").compute(), D)
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_a_worker_killed_once_still_gives_the_complete_result(cluster, fault_dir, tmp_path):
    c, client = cluster
    X, names = cells_X()
    dv = hd.distance_vectors(X, feature_names=names)
    (fault_dir / "kill-once").write_text("")
    dv.to_zarr(str(tmp_path / "D.zarr"), client=client)
    assert not (fault_dir / "kill-once").exists()  # the fault happened: a worker died mid-run
    g = zarr.open_group(str(tmp_path / "D.zarr"), mode="r")
    assert g.attrs["complete"] is True and np.array_equal(g["distances"][:], dv.matrix())
    (fault_dir / "kill-once").write_text("")
    graph = dv.knn(10, client=client)
    assert not (fault_dir / "kill-once").exists()
    assert np.array_equal(graph.indices, dv.knn(10).indices)
    client.wait_for_workers(2, timeout=600)  # both back: a condition; the timeout is a safety net only


def test_workers_dying_every_time_fail_cleanly_without_a_store(cluster, fault_dir, tmp_path):
    c, client = cluster
    X, names = cells_X()
    dv = hd.distance_vectors(X, feature_names=names)
    (fault_dir / "kill-always").write_text("")
    with pytest.raises(hd.ClusterError, match="nothing was written") as e:
        dv.to_zarr(str(tmp_path / "D.zarr"), client=client)
    (fault_dir / "kill-always").unlink()  # (the fault_dir fixture removes it too, should this test fail)
    assert e.value.exit_code == 5  # the command line's exit status for it (hdtwd_cli.errors)
    assert os.listdir(tmp_path) == []  # no store, no temporary store


def test_nndescent_recall_exact_distances_and_determinism():
    X, names = cells_X()
    dv = hd.distance_vectors(X, feature_names=names)
    exact = dv.knn(15)
    a, b = dv.knn(15, "nndescent", seed=3), dv.knn(15, "nndescent", seed=3)
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.distances, b.distances)
    recall = np.mean([len(set(p) & set(q)) / 14 for p, q in zip(exact.indices[:, 1:], a.indices[:, 1:])])
    assert recall >= 0.95, recall
    D = dv.matrix()
    assert np.array_equal(a.distances[:, 1:], np.take_along_axis(D, a.indices[:, 1:], axis=1))  # exact TWDs
    assert np.all(np.diff(a.distances, axis=1) >= 0)


def test_partitioned_nndescent_when_the_vectors_exceed_the_budget(monkeypatch):
    """Above SEARCH_BYTES the search runs in overlapping k-means partitions: recall kept, distances exact.

    Every sample in its 2 nearest clusters (PARTITION_BORDER = inf): recall >= 0.95 with half the
    vectors per partition, with clusters of a quarter of a partition (PARTITION_FILL = 0.25; the
    default 0.5, measured at 10^6 cells, makes 4 clusters of these 300 cells, pieces of which are
    cut apart: >= 0.9, below). The default border rule (a 2nd cluster only for samples near its border,
    measured at 10^6 cells) places fewer samples twice and, on partitions this small (150 rows),
    loses neighbours at the borders: still >= 0.8."""
    from hdtwd_cli.knn import _search as search

    X, names = cells_X()
    monkeypatch.setattr(search, "PARTITION_FILL", 0.25)
    dv = hd.distance_vectors(X, feature_names=names)
    exact = dv.knn(15)
    budget = X.shape[0] * dv.base.dim * 2 // 2  # half of the (uint16) vectors fits at once
    monkeypatch.setattr(search, "SEARCH_BYTES", budget)
    rows = budget // (2 * dv.base.dim)
    got = {}
    for border in (float("inf"), search.PARTITION_BORDER):
        groups = search.partitions(dv.base, rows, seed=3, border=border)
        assert len(groups) >= 2 and max(g.size for g in groups) <= rows
        covered = np.bincount(np.concatenate(groups), minlength=X.shape[0])
        assert covered.min() >= 1  # every sample is searched
        monkeypatch.setattr(search, "PARTITION_BORDER", border)
        a, b = dv.knn(15, "nndescent", seed=3), dv.knn(15, "nndescent", seed=3)
        assert np.array_equal(a.indices, b.indices) and np.array_equal(a.distances, b.distances)
        assert all(len(set(r)) == 15 for r in a.indices)  # no neighbour twice
        D = dv.matrix()
        assert np.array_equal(a.distances[:, 1:], np.take_along_axis(D, a.indices[:, 1:], axis=1))
        got[border] = (
            sum(g.size for g in groups),
            np.mean([len(set(p) & set(q)) / 14 for p, q in zip(exact.indices[:, 1:], a.indices[:, 1:])]),
        )
    (every, r_every), (bordered, r_border) = got[float("inf")], got[search.PARTITION_BORDER]
    assert r_every >= 0.95, r_every
    assert bordered < every and r_border >= 0.8, (bordered, every, r_border)
    monkeypatch.setattr(search, "PARTITION_FILL", 0.5)
    monkeypatch.setattr(search, "PARTITION_BORDER", float("inf"))
    a = dv.knn(15, "nndescent", seed=3)
    assert np.mean([len(set(p) & set(q)) / 14 for p, q in zip(exact.indices[:, 1:], a.indices[:, 1:])]) >= 0.9


def test_a_partitioned_search_reports_its_recall_on_sampled_samples_and_warns_when_low(monkeypatch):
    """Partitioned, the search measures itself: the exact neighbours of RECALL_SAMPLE sampled samples
    (gathered in the partitions' pass over the vectors) against what it found. The figure -v prints is
    the recall computed from the exact search; partitions of 20 rows lose most neighbours: a warning."""
    import re

    from hdtwd_cli.errors import HdtwdWarning
    from hdtwd_cli.knn import _search as search

    X, names = cells_X()
    dv = hd.distance_vectors(X, feature_names=names)
    exact = dv.knn(15)
    notes: list = []
    search.approximate_neighbors(dv.base, 14, 3, note=notes.append)  # one partition: no check
    assert not any("recall" in m for m in notes)
    monkeypatch.setattr(search, "SEARCH_BYTES", X.shape[0] * dv.base.dim * 2 // 2)
    notes.clear()
    idx, dist = search.approximate_neighbors(dv.base, 14, 3, note=notes.append)
    said = [float(re.search(r"recall@14 .*: ([0-9.]+)$", m).group(1)) for m in notes if "recall@14" in m]
    rows = search.SampledExact(dv.base, 14, 3).rows
    assert rows.size == min(search.RECALL_SAMPLE, X.shape[0])
    kth = exact.distances[rows, -1:]
    truth = np.mean(dist[rows] <= kth * (1 + 1e-12))
    assert len(said) == 1 and abs(said[0] - truth) < 5e-4, (said, truth)
    assert truth < 1.0 or np.array_equal(np.sort(idx[rows], 1), np.sort(exact.indices[rows, 1:], 1))
    monkeypatch.setattr(search, "SEARCH_BYTES", 20 * dv.base.dim * 2)
    with pytest.warns(HdtwdWarning, match="partitioned approximate search found"):
        search.approximate_neighbors(dv.base, 14, 3)


def test_every_sample_is_searched_among_at_least_c_others_outliers_included():
    """k-means centres can end on outliers: a cluster that is the nearest of fewer than c + 1 samples
    is dissolved into the others (min_size), and a cluster cut into pieces gives pieces of max_rows
    (the last one too), so every sample's partitions hold >= c other samples: none is left with the
    arbitrary fallback candidates. With min_size = 2 some sample is (the case exists here)."""
    from hdtwd_cli.knn import _search as search

    X, names = cells_X()
    X = sp.vstack(
        [sp.csr_matrix(X)] + [sp.csr_matrix(([50.0], ([0], [j])), shape=(1, X.shape[1])) for j in range(0, 50, 10)]
    ).tocsr()  # 5 one-gene outliers
    tv = hd.distance_vectors(X, feature_names=names).base
    c = 32

    def fewest_others(groups):
        held = np.zeros(tv.n, dtype=np.int64)
        for g in groups:
            held[g] += g.size - 1
        return int(held.min())

    worst_before = min(fewest_others(search.partitions(tv, 40, seed)) for seed in range(5))
    assert worst_before < c, worst_before
    for seed in range(5):
        groups = search.partitions(tv, 40, seed, min_size=c + 1)
        assert max(g.size for g in groups) <= 40 and fewest_others(groups) >= c, seed


def test_cluster_sums_are_np_add_at_bit_for_bit():
    """k-means' update: per-cluster sums added in row order, as ``np.add.at`` adds them (values of
    very different magnitudes, so that another order would round differently); empty clusters are 0."""
    from hdtwd_cli.knn._search import cluster_sums

    rng = np.random.default_rng(6)
    Z = rng.standard_normal((5000, 7)) * 10.0 ** rng.integers(-8, 9, size=(5000, 1))
    labels = rng.integers(0, 9, size=5000)
    labels[labels == 4] = 5  # cluster 4 is empty
    want = np.zeros((10, 7))
    np.add.at(want, labels, Z)
    got = cluster_sums(Z, labels, 10)
    assert got.shape == (10, 7) and np.array_equal(got, want) and not got[4].any()
    assert not np.array_equal(got, np.stack([Z[labels == p][::-1].sum(axis=0) for p in range(10)]))  # order matters


def test_nearest_centres_are_the_brute_force_ones_ties_by_index():
    """k-means' assignment kernel: the ``count`` smallest squared distances by (distance, index),
    against NumPy's stable argsort; duplicated centres tie and keep the smaller index."""
    from hdtwd_cli.tree._kernels import nearest_centres

    rng = np.random.default_rng(2)
    Z = rng.integers(-3, 4, size=(400, 5)).astype(np.float64)  # small integers: many exact ties
    C = rng.integers(-3, 4, size=(9, 5)).astype(np.float64)
    C[6] = C[2]
    D = ((Z[:, None, :] - C[None]) ** 2).sum(-1)
    for count in (1, 2, 3, 9, 12):
        near, dist = nearest_centres(Z.astype(np.float32), C, count)
        want = np.argsort(D, axis=1, kind="stable")[:, : min(count, 9)]
        assert np.array_equal(near, want), count
        assert np.array_equal(dist, np.take_along_axis(D, want, axis=1)), count
    near = nearest_centres(Z, C, 2)[0]
    assert not np.any(near[:, 0] == 6) and np.array_equal(near[near[:, 1] == 6, 0], np.full((near[:, 1] == 6).sum(), 2))
    assert (near[:, 1] == 6).sum() > 0  # the twin of 2 is always right behind it


def test_partitions_rerank_their_own_candidates_as_the_union_would(monkeypatch):
    """Each partition's task re-ranks its own candidates; a sample in two partitions gets the k best of
    its two lists: bit for bit the exact re-ranking of the union of its candidates (search.rerank).
    Partitions smaller than the candidate lists fall back to other samples: still k distinct exact."""
    from hdtwd_cli.knn import _search as search
    from hdtwd_cli.knn._nndescent import nn_descent

    X, names = cells_X()
    tv = hd.distance_vectors(X, feature_names=names).base
    k, seed = 14, 3
    c = int(np.ceil(search.CANDIDATE_FACTOR * k))
    budget = X.shape[0] * tv.dim * 2 // 2
    monkeypatch.setattr(search, "SEARCH_BYTES", budget)
    monkeypatch.setattr(search, "PARTITION_BORDER", float("inf"))  # every sample in 2 partitions
    idx, dist = search.approximate_neighbors(tv, k, seed)
    groups = search.partitions(tv, budget // (2 * tv.dim), seed, min_size=c + 1)  # as the search does
    code = search.search_code(tv)
    union = [set() for _ in range(tv.n)]
    for g in groups:
        found = g[nn_descent(search.byte_vectors(tv, g, code), code, min(c, g.size - 1), seed)]
        for r, row in zip(g, found):
            union[r].update(row.tolist())
    assert sum(len(u) > c for u in union) > tv.n // 2  # the union matters
    cand = np.full((tv.n, max(map(len, union))), -1, dtype=np.int64)
    for r, u in enumerate(union):
        cand[r, : len(u)] = sorted(u)
    ref = search.rerank(tv, cand, k)
    assert np.array_equal(idx, ref[0]) and np.array_equal(dist, ref[1])
    monkeypatch.setattr(search, "SEARCH_BYTES", 20 * tv.dim * 2)  # partitions of <= 20 rows: lists of <= 19
    idx, dist = search.approximate_neighbors(tv, k, seed)
    D = hd.distance_vectors(X, feature_names=names).matrix()
    assert all(len(set(r)) == k and i not in r for i, r in enumerate(idx.tolist()))
    assert np.array_equal(dist, np.take_along_axis(D, idx, axis=1)) and np.all(np.diff(dist, axis=1) >= 0)


def test_the_approximate_search_reports_progress_up_to_n(monkeypatch):
    """Each partition reports half of its rows after its NN-descent, half after its re-ranking: n in all."""
    from hdtwd_cli.knn import _search as search

    X, names = cells_X()
    dv = hd.distance_vectors(X, feature_names=names)
    for budget in (search.SEARCH_BYTES, X.shape[0] * dv.base.dim * 2 // 2):
        monkeypatch.setattr(search, "SEARCH_BYTES", budget)
        seen: list = []
        search.approximate_neighbors(dv.base, 14, 3, seen.append)
        assert sum(seen) == X.shape[0] and min(seen) >= 0 and len(seen) >= 2, (budget, seen)


def test_approximate_search_on_the_cluster_is_the_single_process_bits(cluster, fault_dir, monkeypatch, tmp_path):
    """Issue 28: --knn-method nndescent --scheduler: partitions' NN-descent and re-ranking blocks as tasks,
    the single process's graph bit for bit (whole and partitioned), a worker killed once survived."""
    from hdtwd_cli.knn import _search as search

    c, client = cluster
    X, names = cells_X()
    dv = hd.distance_vectors(X, feature_names=names)
    one = dv.knn(15, "nndescent", seed=3)
    many = dv.knn(15, "nndescent", seed=3, client=client)
    assert np.array_equal(one.indices, many.indices) and np.array_equal(one.distances, many.distances)
    monkeypatch.setattr(search, "SEARCH_BYTES", X.shape[0] * dv.base.dim * 4 // 4)  # partitioned
    monkeypatch.setattr(search, "RERANK_TASK_ROWS", 37)  # many re-ranking tasks
    one = dv.knn(15, "nndescent", seed=3)
    (fault_dir / "kill-once").write_text("")
    many = dv.knn(15, "nndescent", seed=3, client=client)
    assert not (fault_dir / "kill-once").exists()  # a worker died mid-run
    assert np.array_equal(one.indices, many.indices) and np.array_equal(one.distances, many.distances)
    client.wait_for_workers(2, timeout=600)  # both back: a condition; the timeout is a safety net only
    monkeypatch.undo()
    # through the command line
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "--knn", "15", "--knn-method", "nndescent", "-o", tmp_path / "a.npz")
    run_hdtwd(
        "distance",
        SAMPLE / "cells.h5ad",
        "--knn",
        "15",
        "--knn-method",
        "nndescent",
        "--scheduler",
        c.scheduler_address,
        "-o",
        tmp_path / "b.npz",
    )
    A, B = sp.load_npz(tmp_path / "a.npz"), sp.load_npz(tmp_path / "b.npz")
    assert (A != B).nnz == 0 and A.nnz == 300 * 14


def test_auto_picks_by_the_number_of_samples():
    assert choose_method("auto", AUTO_NNDESCENT_ABOVE) == "exact"
    assert choose_method("auto", AUTO_NNDESCENT_ABOVE + 1) == "nndescent"
    with pytest.raises(hd.ParameterError, match="knn_method"):
        choose_method("annoy", 10)


def test_ties_are_settled_by_index_whatever_the_block_order():
    from hdtwd_cli.twd._distance import nearest_neighbors

    X = np.repeat(np.eye(6)[:, :5] + 0.1, 5, axis=0)  # groups of identical rows: many tied distances
    tree = hd.learn_tree(X + 1e-3)
    dv = hd.distance_vectors(X, tree)
    ref = nearest_neighbors(dv.base, 7, block=1000)
    for block in (1, 3, 7):
        got = nearest_neighbors(dv.base, 7, block=block)
        assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1]), block


def test_denoised_rows_give_the_single_process_graph_on_the_cluster(cluster, monkeypatch, tmp_path):
    """A denoising tree (rows reconstructed on demand, on the workers too): the exact and the
    approximate graphs on the cluster are the single process's bits, from the API and the command;
    also where NN-descent compares the widest columns only (the byte code, made on the client, says which)."""
    c, client = cluster
    X, names = cells_X()
    dv = hd.distance_vectors(X, feature_names=names, params=hd.TreeParams(denoise=10))
    assert dv.tree.metadata["denoise"] == 10
    plain = hd.distance_vectors(X, feature_names=names, params=hd.TreeParams(denoise=0))
    for method in ("exact", "nndescent"):
        one = dv.knn(15, method, seed=3)
        many = dv.knn(15, method, seed=3, client=client)
        assert np.array_equal(one.indices, many.indices) and np.array_equal(one.distances, many.distances), method
        assert not np.array_equal(one.indices, plain.knn(15, method, seed=3).indices), method  # denoising acted
    from hdtwd_cli.knn import _search as search

    every = dv.knn(15, "nndescent", seed=3)
    monkeypatch.setattr(search, "SEARCH_COLUMNS", 32)
    assert search.searched_columns(dv.base) == 32 < dv.base.dim
    one = dv.knn(15, "nndescent", seed=3)
    many = dv.knn(15, "nndescent", seed=3, client=client)
    assert np.array_equal(one.indices, many.indices) and np.array_equal(one.distances, many.distances)
    assert not np.array_equal(one.indices, every.indices)  # the subset acted
    for method in ("exact", "nndescent"):
        args = ("distance", SAMPLE / "cells.h5ad", "--denoise", "10", "--knn", "15", "--knn-method", method)
        run_hdtwd(*args, "-o", tmp_path / f"a_{method}.npz")
        run_hdtwd(*args, "--scheduler", c.scheduler_address, "-o", tmp_path / f"b_{method}.npz")
        A, B = sp.load_npz(tmp_path / f"a_{method}.npz"), sp.load_npz(tmp_path / f"b_{method}.npz")
        assert (A != B).nnz == 0 and A.nnz == 300 * 14 and np.array_equal(A.indices, B.indices), method
