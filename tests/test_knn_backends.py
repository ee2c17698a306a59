"""The approximate kNN backends (``--knn-method``): candidates from hdtwd's NN-descent or from
pynndescent, re-ranked by the exact TWD, so every distance in the graph is exact."""

from __future__ import annotations

import anndata
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import SAMPLE, run_hdtwd

import hdtwd_cli as hd

pytest.importorskip("pynndescent")


def _cells():
    ad = anndata.read_h5ad(SAMPLE / "cells.h5ad")
    return ad.X, list(ad.var_names)


@pytest.fixture(scope="module")
def exact():
    X, names = _cells()
    dv = hd.distance_vectors(X, feature_names=names)
    return dv, dv.matrix(), dv.knn(15)


@pytest.mark.parametrize("method", ["nndescent", "pynndescent"])
def test_backend_graph_has_exact_distances_and_high_recall(exact, method):
    dv, D, want = exact
    g = dv.knn(15, method, seed=4)
    n = D.shape[0]
    assert g.indices.shape == (n, 15) and np.array_equal(g.indices[:, 0], np.arange(n))
    # every distance is the exact TWD of its pair, in the order (distance, index)
    np.testing.assert_array_equal(g.distances, D[np.arange(n)[:, None], g.indices])
    assert np.all(np.diff(g.distances, axis=1) >= 0)
    recall = np.mean([len(set(a[1:]) & set(b[1:])) / 14 for a, b in zip(g.indices, want.indices)])
    assert recall >= 0.95, recall


@pytest.mark.parametrize("method", ["nndescent", "pynndescent"])
def test_backend_is_deterministic_per_seed(exact, method):
    dv = exact[0]
    a, b = dv.knn(15, method, seed=7), dv.knn(15, method, seed=7)
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.distances, b.distances)


def test_pynndescent_from_the_command_line(tmp_path):
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "--knn", "15", "--knn-method", "pynndescent", "-o", tmp_path / "p.npz")
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "--knn", "15", "-o", tmp_path / "e.npz")
    P, E = sp.load_npz(tmp_path / "p.npz"), sp.load_npz(tmp_path / "e.npz")
    assert P.shape == E.shape and P.nnz == E.nnz == E.shape[0] * 14
    # the pairs both graphs hold have the same (exact) distance, bit for bit
    Pd, Ed = P.toarray(), E.toarray()
    both = (Pd != 0) & (Ed != 0)
    assert both.sum() >= 0.95 * E.nnz
    np.testing.assert_array_equal(Pd[both], Ed[both])
