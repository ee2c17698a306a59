"""No hidden state: every public function gives the float64 answer whatever the input's
dtype and storage, whatever ran before it in the process, and never changes its input.

The defect this guards against: ``scipy.sparse.csr_matrix(X, dtype=np.float64)`` shares a float32
CSR matrix's index arrays; sorting them in place (scanpy's ``pbmc68k_reduced().raw.X`` has unsorted
indices) corrupted the CALLER's matrix, so the first call was right and every later call on the
same object was wrong by up to 0.09 (distances 0.2-0.5). The inputs here have unsorted indices and
are reused, unchanged objects across calls in several orders, on the NumPy twins (small problems)
and on the compiled kernels.
"""

from __future__ import annotations

import itertools

import anndata
import numpy as np
import pytest
import scipy.sparse as sp

import hdtwd_cli as hd
from hdtwd_cli._runtime import twins as _small


def _shuffled_csr(X: np.ndarray, dtype, seed: int) -> sp.csr_matrix:
    """CSR of ``X`` whose indices are NOT sorted within rows (as in scanpy's bundled data)."""
    C = sp.csr_matrix(X.astype(dtype))
    rng = np.random.default_rng(seed)
    idx, dat = C.indices.copy(), C.data.copy()
    for i in range(C.shape[0]):
        a, b = C.indptr[i], C.indptr[i + 1]
        p = rng.permutation(b - a)[::-1]
        idx[a:b], dat[a:b] = idx[a:b][p], dat[a:b][p]
    out = sp.csr_matrix((dat, idx, C.indptr.copy()), shape=C.shape)
    out.has_sorted_indices = False
    assert not out.has_canonical_format
    return out


def _data(kind: str) -> np.ndarray:
    """Counts exact in float32: ``cells`` (most genes co-occur) or ``docs`` (most words never do: SVD space)."""
    rng = np.random.default_rng(7)
    if kind == "cells":
        prog = rng.gamma(1.0, 1.0, size=(4, 40)) * (rng.random((4, 40)) < 0.5)
        z = rng.integers(0, 4, size=90)
        return rng.poisson(prog[z] * 2.0 + 0.05).astype(np.float64)
    X = np.zeros((90, 120))
    for i in range(90):
        topic = i % 3
        words = rng.choice(40, size=6) + 40 * topic
        np.add.at(X[i], words, 1.0)
    return X


def _variants(X: np.ndarray) -> dict[str, object]:
    return {
        "float64 dense": X.astype(np.float64),
        "float32 dense": X.astype(np.float32),
        "float32 dense F-order": np.asfortranarray(X.astype(np.float32)),
        "float32 CSR unsorted": _shuffled_csr(X, np.float32, 1),
        "float64 CSR unsorted": _shuffled_csr(X, np.float64, 2),
        "float32 CSC": sp.csc_matrix(X.astype(np.float32)),
        "int64 dense": X.astype(np.int64),
    }


def _snapshot(V) -> tuple:
    if sp.issparse(V):
        return (type(V), V.dtype, V.indptr.tobytes(), V.indices.tobytes(), V.data.tobytes())
    return (type(V), V.dtype, np.asarray(V).tobytes(order="A"), V.flags["C_CONTIGUOUS"])


def _calls(names: list[str], tree: hd.Tree, labels: np.ndarray, landmarks: int) -> dict[str, object]:
    """Each public entry point as ``f(X) -> tuple of arrays`` (its whole numerical answer)."""
    params = hd.TreeParams(landmarks=landmarks)

    def learn(X):
        T = hd.learn_tree(X, names, params=params)
        return T.parent, T.length, T.merge_height

    def knn(X):
        g = hd.knn_graph(X, 6, tree=tree, feature_names=names)
        return g.indices, g.distances

    def neighbors(X):
        ad = anndata.AnnData(X=X)
        ad.var_names = names
        hd.neighbors(ad, n_neighbors=6, tree=tree)
        return (ad.obsp["distances"].toarray(), ad.obsp["connectivities"].toarray())

    def embed(X):
        E = hd.embed(X, names, params=params)
        T = hd.decode_tree(E)
        return T.parent, T.length

    def classify(X):
        rep = hd.classify(X, labels, names, methods=["hdtwd", "l1"], k=[1, 3], splits=2, params=params)
        return tuple(
            np.array([list(r["per_k"].values()), r["per_split"]], dtype=object).ravel()
            for r in (rep["methods"]["hdtwd"], rep["methods"]["l1"])
        )

    return {
        "learn_tree": learn,
        "distances (learned)": lambda X: (hd.distances(X, feature_names=names, params=params),),
        "distances (tree)": lambda X: (hd.distances(X, tree=tree, feature_names=names),),
        "distances (cross)": lambda X: (
            hd.distances(X[:30], tree=tree, reference=X, feature_names=names, reference_feature_names=names),
        ),
        "tree_vectors": lambda X: (hd.tree_vectors(tree, X, names),),
        "knn_graph": knn,
        "neighbors": neighbors,
        "embed + decode_tree": embed,
        "classify": classify,
    }


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))


def _close(a: tuple, b: tuple) -> bool:
    """Integers (tree topology, neighbour indices) equal; values within 1e-12 relative."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype.kind in "iub" or x.dtype == object:
            if not np.array_equal(x, y):
                return False
        elif not np.allclose(x, y, rtol=1e-12, atol=1e-15):
            return False
    return True


@pytest.mark.parametrize("kernels", ["numpy twins", "compiled"])
@pytest.mark.parametrize("kind,landmarks", [("cells", 0), ("docs", 0), ("cells", 12)])
def test_every_public_function_gives_the_float64_answer_in_any_order(kind, landmarks, kernels, monkeypatch):
    monkeypatch.setattr(_small, "SMALL_WORK", 10**12 if kernels == "numpy twins" else 0)
    X = _data(kind)
    names = [f"g{j}" for j in range(X.shape[1])]
    labels = np.arange(X.shape[0]) % 3
    tree = hd.learn_tree(X.copy(), names, params=hd.TreeParams(landmarks=landmarks))
    calls = _calls(names, tree, labels, landmarks)
    # the answers on fresh float64 copies, dense and sparse, before anything else ran on the variants.
    # The dtype never changes a bit; the storage may change the last bits on the landmark path
    # (SciPy's sparse product vs BLAS for the feature-landmark distances: 3e-17 in edge lengths on
    # the AVX2 paths, identical on AVX-512), never the tree's topology or a neighbour.
    want_dense = {name: f(X.copy()) for name, f in calls.items()}
    want_sparse = {name: f(sp.csr_matrix(X)) for name, f in calls.items()}
    for name in calls:
        assert _close(want_sparse[name], want_dense[name]), f"{name}: sparse and dense storage disagree"
    variants = _variants(X)
    snaps = {v: _snapshot(V) for v, V in variants.items()}
    # every call on every variant, in both orders: for any two calls A and B, A ran before B on every
    # variant in one order and after it in the other; the input's snapshot is checked after every call
    pairs = list(itertools.product(calls, variants))
    orders = [pairs, pairs[::-1]]
    for order in orders:
        for call, v in order:
            got = calls[call](variants[v])
            want = (want_sparse if sp.issparse(variants[v]) else want_dense)[call]
            assert _same(got, want), f"{call} on {v} differs from the float64 answer ({kind}, {kernels})"
            assert _snapshot(variants[v]) == snaps[v], f"{call} changed its input ({v})"
    # and the float64 answers themselves did not move with what ran before them
    for name, f in calls.items():
        assert _same(f(X.copy()), want_dense[name]) and _same(f(sp.csr_matrix(X)), want_sparse[name]), name


def test_the_reported_snippet_pbmc68k():
    """The issue's snippet: a float32 learn_tree between two distances calls changes nothing."""
    sc = pytest.importorskip("scanpy")
    a = sc.datasets.pbmc68k_reduced()
    X, names = a.raw.X, list(a.raw.var_names)
    assert X.dtype == np.float32 and not X.has_sorted_indices  # the property that exposed the defect
    before = _snapshot(X)
    T = hd.learn_tree(X.astype(np.float64), names)
    D1 = hd.distances(X, tree=T, feature_names=names)
    hd.learn_tree(X, names)
    D2 = hd.distances(X, tree=T, feature_names=names)
    assert np.abs(D2 - D1).max() == 0.0
    assert np.array_equal(D1, hd.distances(X.astype(np.float64), tree=T, feature_names=names))
    assert _snapshot(X) == before


@pytest.mark.parametrize(
    "params", [{}, {"landmarks": 60}, {"feature_space": "svd", "feature_dims": 20}], ids=["exact", "landmarks", "svd"]
)
def test_the_tree_is_the_same_bits_with_one_or_two_blas_threads(params):
    """LAPACK's eigensolvers and QR / SVD (and, on AVX2 kernels, products) give other last bits with
    another BLAS thread count; tree learning runs on one BLAS thread (hdtwd_cli._runtime.blas), so the tree
    does not depend on --threads or OMP_NUM_THREADS."""
    from threadpoolctl import threadpool_limits

    from hdtwd_cli.tree._params import TreeParams

    rng = np.random.default_rng(8)  # features enough for OpenBLAS to thread (the sample's 300 cells are not)
    X = sp.csr_matrix(rng.poisson(rng.gamma(0.5, 1.0, size=(1, 900)), size=(400, 900)).astype(np.float32))
    got = []
    for threads in (1, 2):
        with threadpool_limits(limits=threads, user_api="blas"):
            t = hd.learn_tree(X, params=TreeParams(**params))
        got.append((t.to_newick(), np.asarray(t.parent).tobytes(), np.asarray(t.length).tobytes()))
    assert got[0] == got[1]


@pytest.mark.parametrize("partitioned", [False, True])
def test_the_approximate_search_gives_the_float64_graph_for_every_input_dtype(partitioned, monkeypatch):
    """``method="nndescent"``: the byte code (column ranges of the tree vectors), NN-descent and the
    exact re-ranking give the float64 input's graph bit for bit for every dtype and storage, searched
    whole or in partitions (the code then comes from the partitions' pass)."""
    from hdtwd_cli.knn import _search as search

    X = _data("cells")
    names = [f"g{j}" for j in range(X.shape[1])]
    tree = hd.learn_tree(X, names)
    if partitioned:
        dim = hd.tree_vectors(tree, X[:1], names).shape[1]
        monkeypatch.setattr(search, "SEARCH_BYTES", X.shape[0] * dim * 2 // 2)

    def graph(V):
        g = hd.knn_graph(V, 8, tree=tree, feature_names=names, method="nndescent", seed=3)
        return g.indices, g.distances

    want = graph(X.astype(np.float64))
    for label, V in _variants(X).items():
        assert _same(graph(V), want), label


_FIRST_OR_SECOND = """
import sys
import numpy as np
import hdtwd_cli as hd

rng = np.random.default_rng(0)
L = rng.gamma(1.0, 1.0, size=(6, 200))
X = rng.poisson(L[rng.integers(0, 6, 600)] * rng.uniform(0.5, 2.0, size=(600, 1)))
P = hd.TreeParams(denoise=int(sys.argv[1]))
if sys.argv[2] == "second":
    hd.distances(X + 1, params=P)  # loads every library the first call loads
sys.stdout.buffer.write(hd.distances(X, params=P).tobytes())
"""


@pytest.mark.parametrize("denoise", [0, 50])
def test_the_first_call_in_a_process_gives_the_bits_of_a_later_one(denoise):
    """A process's first tree and a later one are the same bits.

    The defect guarded against: SciPy ships its own OpenBLAS, loaded by the first ``import
    scipy.linalg``; when that happened inside the tree's one-thread BLAS block, the limit did not
    cover it, so the first tree's HD-LCA products ran on every core and later ones on one thread
    (different rounding: the same matrix gave different bytes depending on what the process, or a
    pytest worker, had run before). Each order runs in a fresh interpreter.
    """
    import subprocess
    import sys

    out = {
        order: subprocess.run(
            [sys.executable, "-c", _FIRST_OR_SECOND, str(denoise), order], capture_output=True, check=True
        ).stdout
        for order in ("first", "second")
    }
    assert len(out["first"]) == 600 * 600 * 8
    assert out["first"] == out["second"]
