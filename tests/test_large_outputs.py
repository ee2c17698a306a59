"""Outputs at scale: cross distances, blocked HDF5 output, kNN graphs in scanpy's layout, memory refusal."""

import os

import anndata
import h5py
import numpy as np
import scipy.sparse as sp
from conftest import SAMPLE, run_hdtwd


def test_reference_cross_distances(tmp_path):
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "--save-tree", tmp_path / "T.h5", "-o", tmp_path / "D.npy")
    ad = anndata.read_h5ad(SAMPLE / "cells.h5ad")
    ad[:40].write_h5ad(tmp_path / "query.h5ad")
    ad[100:].write_h5ad(tmp_path / "ref.h5ad")
    run_hdtwd(
        "distance",
        tmp_path / "query.h5ad",
        "--tree",
        tmp_path / "T.h5",
        "--reference",
        tmp_path / "ref.h5ad",
        "-o",
        tmp_path / "C.h5",
    )
    D = np.load(tmp_path / "D.npy")
    with h5py.File(tmp_path / "C.h5") as f:
        C = f["distances"][()]
        assert [s.decode() for s in f["col_names"][:2]] == ["cell100", "cell101"]
    assert C.shape == (40, 200)
    assert np.allclose(C, D[:40, 100:], rtol=1e-12, atol=0)


def test_blocked_h5_equals_in_memory(tmp_path):
    run_hdtwd("distance", SAMPLE / "corpus.npz", "-o", tmp_path / "D.npy")
    run_hdtwd("distance", SAMPLE / "corpus.npz", "-o", tmp_path / "D.h5")
    with h5py.File(tmp_path / "D.h5") as f:
        assert f["distances"].chunks is not None
        assert np.array_equal(f["distances"][()], np.load(tmp_path / "D.npy"))
    # one thread: BLAS sums in another order, so equal to rounding, not bit for bit
    run_hdtwd("distance", SAMPLE / "corpus.npz", "-o", tmp_path / "D1.npy", "--threads", "1")
    assert np.allclose(np.load(tmp_path / "D1.npy"), np.load(tmp_path / "D.npy"), rtol=1e-9)


def test_knn_graph_matches_brute_force_and_scanpy_layout(tmp_path):
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "-o", tmp_path / "D.npy")
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "--knn", "12", "-o", tmp_path / "G.npz")
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "--knn", "12", "-o", tmp_path / "G.h5ad", "--key-added", "twd")
    D = np.load(tmp_path / "D.npy")
    np.fill_diagonal(D, np.inf)
    nn = np.argsort(D, axis=1, kind="stable")[:, :11]  # --knn 12 counts the cell itself, as scanpy
    G = sp.load_npz(tmp_path / "G.npz").tocsr()
    assert G.shape == (300, 300) and np.all(np.diff(G.indptr) == 11)
    for i in (0, 17, 299):
        row = G[i]
        assert set(row.indices) == set(nn[i])
        assert np.allclose(np.sort(row.data), np.sort(D[i, nn[i]]), rtol=1e-12)
    ad = anndata.read_h5ad(tmp_path / "G.h5ad")
    assert ad.n_obs == 300 and "cell_type" in ad.obs  # the input's annotations travel along
    assert set(ad.uns["twd"]) >= {"connectivities_key", "distances_key", "params"}
    assert ad.uns["twd"]["connectivities_key"] == "twd_connectivities"
    assert ad.uns["twd"]["distances_key"] == "twd_distances"
    assert ad.uns["twd"]["params"]["n_neighbors"] == 12 and ad.uns["twd"]["params"]["method"] == "umap"
    Dk, C = ad.obsp["twd_distances"], ad.obsp["twd_connectivities"]
    assert sp.issparse(Dk) and sp.issparse(C)
    assert abs(C - C.T).max() < 1e-12  # symmetric
    assert C.data.min() > 0 and C.data.max() <= 1.0 + 1e-6 and C.dtype == np.float32
    assert (Dk != G).nnz == 0
    Y = ad.obsm["X_hdtwd"]  # the TWD vectors: L1 between rows = the stored distances
    assert np.allclose(np.abs(Y[0] - Y[G[0].indices]).sum(axis=1), G[0].data, rtol=1e-12)


def test_scanpy_umap_and_leiden_run_on_the_graph(tmp_path):
    import pytest

    sc = pytest.importorskip("scanpy")
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "--knn", "10", "-o", tmp_path / "G.h5ad")
    ad = anndata.read_h5ad(tmp_path / "G.h5ad")
    sc.tl.umap(ad)  # the default key: scanpy's own obsp["distances"] / ["connectivities"]
    assert ad.obsm["X_umap"].shape == (300, 2)
    try:
        sc.tl.leiden(ad, flavor="igraph", n_iterations=2)
    except ImportError:
        pytest.skip("igraph not installed")
    assert ad.obs["leiden"].nunique() > 1


def test_memory_refusal_points_to_the_ways_out(tmp_path):
    # the cells as .npy: an .h5ad's declared matrix is itself checked against the (here 10 kB) memory
    from hdtwd_cli.io import read_matrix

    cells = tmp_path / "cells.npy"
    X = read_matrix(SAMPLE / "cells.h5ad").X
    np.save(cells, X.toarray() if hasattr(X, "toarray") else X)
    env_out = tmp_path / "D.npy"
    tree = tmp_path / "t.h5"
    run_hdtwd("distance", cells, "-o", tmp_path / "first.npy", "--save-tree", tree)
    os.environ["HDTWD_MEMORY_LIMIT"] = "10000"
    try:
        proc = run_hdtwd("distance", cells, "--tree", tree, "-o", env_out, check=False)
        ok = run_hdtwd("distance", cells, "--tree", tree, "-o", tmp_path / "D.h5", check=False)
        learn = run_hdtwd("distance", cells, "-o", env_out, check=False)
    finally:
        del os.environ["HDTWD_MEMORY_LIMIT"]
    err = proc.stderr.decode()
    assert proc.returncode == 4
    assert "-o FILE.h5" in err and "--knn K" in err and len(err.strip().splitlines()) == 1
    assert not env_out.exists()
    assert ok.returncode == 0  # blocked output is not limited by the estimate
    # learning the tree is checked before its heavy stages, with the same one-line refusal
    err = learn.stderr.decode()
    assert learn.returncode == 4 and "learning the tree" in err and len(err.strip().splitlines()) == 1
    assert not env_out.exists()


def test_knn_distance_matrix_leaves_the_callers_arrays_unchanged():
    """The CSR constructor shared an int32 index array and sort_indices reordered it."""
    from hdtwd_cli.knn._graph import knn_distance_matrix

    for dtype in (np.int32, np.int64):
        idx = np.array([[0, 2, 1], [1, 0, 2], [2, 1, 0]], dtype=dtype)  # self first, as scanpy's lists
        dist = np.array([[0, 0.5, 0.25], [0, 0.75, 1.0], [0, 2.0, 1.5]])
        idx0, dist0 = idx.copy(), dist.copy()
        M = knn_distance_matrix(idx, dist)
        assert np.array_equal(idx, idx0) and np.array_equal(dist, dist0), dtype
        assert M[0, 1] == 0.25 and M[0, 2] == 0.5 and M[2, 0] == 1.5
