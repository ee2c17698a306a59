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


def _assert_exact_and_recalled(g, D, want):
    """Every distance of ``g`` is the exact TWD of its pair, in the order (distance, index); recall@14 >= 0.95."""
    n = D.shape[0]
    assert g.indices.shape == (n, 15) and np.array_equal(g.indices[:, 0], np.arange(n))
    np.testing.assert_array_equal(g.distances, D[np.arange(n)[:, None], g.indices])
    assert np.all(np.diff(g.distances, axis=1) >= 0)
    recall = np.mean([len(set(a[1:]) & set(b[1:])) / 14 for a, b in zip(g.indices, want.indices)])
    assert recall >= 0.95, recall


def test_nndescent_graph_has_exact_distances_high_recall_and_the_same_lists_per_seed(exact):
    dv, D, want = exact
    _assert_exact_and_recalled(dv.knn(15, "nndescent", seed=4), D, want)
    a, b = dv.knn(15, "nndescent", seed=7), dv.knn(15, "nndescent", seed=7)
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.distances, b.distances)


def test_pynndescent_graph_is_exact_recalled_and_seeded_through_the_api_and_the_command_line(exact, tmp_path):
    """pynndescent compiles its kernels in every process that first uses it (about 20 s; its cache does not
    cover them), so its checks share one process: the command line runs in it through typer's CliRunner."""
    from typer.testing import CliRunner

    from hdtwd_cli.cli._app import app

    dv, D, want = exact
    _assert_exact_and_recalled(dv.knn(15, "pynndescent", seed=4), D, want)
    a, b = dv.knn(15, "pynndescent", seed=7), dv.knn(15, "pynndescent", seed=7)
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.distances, b.distances)
    argv = ["distance", str(SAMPLE / "cells.h5ad"), "--knn", "15", "-q"]
    res = CliRunner().invoke(app, [*argv, "--knn-method", "pynndescent", "-o", str(tmp_path / "p.npz")])
    assert res.exit_code == 0, res.output
    run_hdtwd(*argv, "-o", tmp_path / "e.npz")
    P, E = sp.load_npz(tmp_path / "p.npz"), sp.load_npz(tmp_path / "e.npz")
    assert P.shape == E.shape and P.nnz == E.nnz == E.shape[0] * 14
    # the pairs both graphs hold have the same (exact) distance, bit for bit
    Pd, Ed = P.toarray(), E.toarray()
    both = (Pd != 0) & (Ed != 0)
    assert both.sum() >= 0.95 * E.nnz
    np.testing.assert_array_equal(Pd[both], Ed[both])
