"""The denoise lever (rank-r principal-component reconstruction of the samples' values).

The contract: the TWD of denoised samples is still an exact tree-Wasserstein distance (exact OT
on the tree's path metric between the denoised, weighted histograms); the map equals an
independent SVD reconstruction; it is stored with the tree and applied by ``--tree``.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import exact_ot, path_metric, run_hdtwd

from hdtwd_cli._api import chosen_methods, distances
from hdtwd_cli.errors import ParameterError
from hdtwd_cli.evaluate._synthetic import planted_counts
from hdtwd_cli.tree._denoise import Denoiser, denoise, fit_denoiser
from hdtwd_cli.tree._features import idf_weights
from hdtwd_cli.tree._learn import extend_tree, learn_tree
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._distance import tree_wasserstein
from hdtwd_cli.twd._histograms import align_to_tree, normalize_rows


def _counts(seed: int = 0, n: int = 50, m: int = 14):
    X, _, _ = planted_counts(n, m, 2, seed=seed)
    return np.asarray(X, dtype=np.float64), [f"g{j}" for j in range(m)]


def _svd_reconstruction(F_fit: np.ndarray, F: np.ndarray, r: int) -> np.ndarray:
    """The oracle: numpy's SVD of the centred fitted rows, projection V V^T (basis-free)."""
    mu = F_fit.mean(axis=0)
    _, _, Vt = np.linalg.svd(F_fit - mu, full_matrices=False)
    return np.maximum(mu + (F - mu) @ Vt[:r].T @ Vt[:r], 0.0)


def _log_cp10k(X: np.ndarray) -> np.ndarray:
    return np.log1p(X * (1e4 / X.sum(axis=1))[:, None])


@pytest.mark.parametrize("counts", [True, False])
def test_denoised_values_equal_an_independent_svd_reconstruction(counts):
    X, _ = _counts(1)
    if not counts:
        X = np.log1p(X) * 1.37  # a log scale: not counts, used as given
    d = fit_denoiser(X[:35], 4)
    assert d.log_counts is counts and d.rank == 4
    F = _log_cp10k if counts else (lambda A: A)
    want = _svd_reconstruction(F(X[:35]), F(X), 4)
    got = denoise(X, d)
    assert np.all(got >= 0)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    # a full-rank map is the identity on the fitted rows' span: nothing is denoised
    full = fit_denoiser(X[:35], 99)
    assert full.rank == min(35, X.shape[1]) - 1


def test_twd_of_denoised_samples_is_exact_ot_on_the_tree():
    """The tree is learned from the denoised rows; every sample is denoised, weighted, normalised."""
    X, names = _counts(2)
    tree = learn_tree(X[:40], names, TreeParams(denoise=3))
    assert tree.denoiser is not None and tree.metadata["denoise"] == 3
    A = align_to_tree(X, names, tree).rows()  # computed on demand
    # independently: reconstruction, then the tree's idf weights, in leaf order
    order = [names.index(n) for n in tree.leaf_names]
    # the idf weights are those of the samples' own values (the denoised rows are dense)
    np.testing.assert_allclose(tree.feature_weights, idf_weights(X[:40])[order], rtol=1e-15)
    want = _svd_reconstruction(_log_cp10k(X[:40]), _log_cp10k(X), 3)[:, order] * tree.feature_weights[None, :]
    np.testing.assert_allclose(A, want, rtol=1e-9, atol=1e-10)
    H = normalize_rows(A)
    D = tree_wasserstein(tree, H)
    C = path_metric(tree.parent, tree.length, tree.n_leaves)
    for i, j in [(0, 1), (0, 45), (3, 44), (41, 48)]:
        assert D[i, j] == pytest.approx(exact_ot(H[i], H[j], C), rel=1e-8, abs=1e-12)
    # the tree is the one learned from the denoised rows
    from hdtwd_cli.tree._denoise import denoise as _den

    T2 = learn_tree(_den(X[:40], fit_denoiser(X[:40], 3)), names, TreeParams(weighting="none"))
    assert T2.parent.tolist() == tree.parent.tolist() and T2.leaf_names == tree.leaf_names
    # and it is a different distance from the undenoised one on the same tree
    bare = dataclasses.replace(tree, denoiser=None)
    assert not np.allclose(D, tree_wasserstein(bare, normalize_rows(align_to_tree(X, names, bare))))


def test_denoiser_is_stored_with_the_tree_and_applied_by_tree(tmp_path):
    X, names = _counts(3)
    tree = learn_tree(X, names, TreeParams(denoise=5))
    path = tmp_path / "t.h5"
    tree.write(str(path))
    back = Tree.read(str(path))
    assert back.denoiser is not None and back.denoiser.log_counts
    np.testing.assert_array_equal(back.denoiser.axes, tree.denoiser.axes)
    np.testing.assert_array_equal(
        distances(X, feature_names=names, tree=back), distances(X, feature_names=names, tree=tree)
    )
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tree.write(str(tmp_path / "t.nwk"))
    assert any("denoiser" in str(x.message) for x in w)
    # the command line: --denoise with --save-tree, then --tree gives the same bytes
    data = tmp_path / "x.npy"
    np.save(data, X)
    run_hdtwd("distance", data, "--denoise", "5", "--save-tree", tmp_path / "c.h5", "-o", tmp_path / "D1.npy", "-q")
    run_hdtwd("distance", data, "--tree", tmp_path / "c.h5", "-o", tmp_path / "D2.npy", "-q")
    D1, D2 = np.load(tmp_path / "D1.npy"), np.load(tmp_path / "D2.npy")
    assert D1.tobytes() == D2.tobytes()
    D0 = distances(X)
    assert not np.allclose(D1, D0)  # the option reached the library
    bad = run_hdtwd(
        "distance", data, "--tree", tmp_path / "c.h5", "--denoise", "3", "-o", tmp_path / "D3.npy", check=False
    )
    assert bad.returncode != 0 and b"--denoise" in bad.stderr and not (tmp_path / "D3.npy").exists()


def test_features_hung_from_a_stored_tree_keep_their_values():
    X, names = _counts(4)
    tree = learn_tree(X, names, TreeParams(denoise=3, weighting="none"))
    big = extend_tree(tree, names + ["new"])
    assert big.denoiser.covered.tolist() == [True] * len(names) + [False]
    Xn = np.hstack([X, np.arange(X.shape[0], dtype=float)[:, None] % 3])
    A = align_to_tree(Xn, names + ["new"], big).rows()
    np.testing.assert_allclose(A[:, -1], _log_cp10k(Xn)[:, -1], rtol=1e-12)
    assert np.all(A >= 0) and A[:, -1].max() > 0


def test_a_row_with_nothing_left_keeps_its_values():
    d = Denoiser(mean=np.zeros(3), axes=np.array([[1.0], [0.0], [0.0]]), log_counts=False, covered=np.ones(3, bool))
    out = denoise(np.array([[0.0, 2.0, 1.0], [3.0, 1.0, 0.0]]), d)
    np.testing.assert_array_equal(out, [[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]])


def test_float32_input_gives_the_float64_distances():
    X, names = _counts(5)
    p = TreeParams(denoise=4)
    D64 = distances(X, feature_names=names, params=p)
    D32 = distances(X.astype(np.float32), feature_names=names, params=p)
    np.testing.assert_allclose(D32, D64, rtol=1e-12, atol=1e-14)


def test_denoise_must_be_a_non_negative_integer():
    with pytest.raises(ParameterError, match="denoise"):
        TreeParams(denoise=-1)


def test_classify_shows_pca_beside_tfidf_for_cells_not_for_documents():
    X, _ = _counts(6)
    assert chosen_methods(X)[-3:] == ["tfidf-l1", "tfidf-cosine", "pca"]
    docs = np.zeros((40, 200))
    docs[np.arange(40)[:, None], (np.arange(40)[:, None] * 5 + np.arange(3)[None, :]) % 200] = 1  # words rarely shared
    assert "pca" not in chosen_methods(docs) and "tfidf-l1" in chosen_methods(docs)
    assert chosen_methods(np.log1p(X))[-1] == "pca"


def test_denoising_more_rows_than_memory_holds_is_refused_before_it_starts():
    from hdtwd_cli.errors import ResourceError
    from hdtwd_cli.tree._learn import learn_trees

    X, names = _counts(7)
    n, m = X.shape
    with pytest.raises(ResourceError, match="scatter") as e:
        learn_trees(X, names, TreeParams(denoise=3), [7], available=1000)
    assert "denoise" in str(e.value) and "tree" in str(e.value)
    # the rows are streamed: memory for the m x m matrix is enough, not for the n x m values
    roomy = 4 * 16 * m * m
    assert roomy < 24 * n * m
    learn_trees(X, names, TreeParams(denoise=3), [7], available=roomy)
    with pytest.raises(ResourceError, match="made dense"):  # the latent space reads the columns themselves
        learn_trees(X, names, TreeParams(denoise=3, feature_space="svd"), [7], available=roomy)


def _cells(n: int = 240, m: int = 160, seed: int = 5) -> np.ndarray:
    """Counts of cells of 6 types over genes that co-occur (most cells express most genes)."""
    rng = np.random.default_rng(seed)
    means = rng.gamma(1.0, 1.0, size=(6, m))
    return rng.poisson(means[rng.integers(0, 6, n)] * rng.uniform(0.5, 2.0, size=(n, 1))).astype(np.float64)


def _documents(n: int = 240, m: int = 400, seed: int = 6) -> np.ndarray:
    """Counts whose features rarely share a row (a few words per document)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, m))
    for i in range(n):
        X[i, rng.choice(m, size=6, replace=False)] = rng.integers(1, 4, size=6)
    return X


@pytest.mark.parametrize(
    ("kind", "rank", "reason"),
    [
        ("cells", 50, "raw counts whose features co-occur"),
        ("cells stored as float32", 50, "raw counts whose features co-occur"),
        ("cells stored as integers", 50, "raw counts whose features co-occur"),
        ("log1p counts", 50, "log1p of counts whose features co-occur"),
        ("log1p counts stored as float32", 50, "log1p of counts whose features co-occur"),
        ("log-normalised values", 50, "log-normalised values (scanpy's normalize_total + log1p) whose"),
        ("log-normalised values stored as float32", 50, "log-normalised values (scanpy's"),
        ("log-normalised values of a gene subset", 20, "log-normalised values of a gene subset (the rows' totals"),
        ("log-normalised values of a few genes", 0, "fewer than 40 samples or features"),
        ("square roots of counts", 0, "neither counts nor log-normalised"),
        ("documents", 0, "never co-occur"),
        ("few features", 0, "fewer than 100"),
    ],
)
def test_auto_chooses_by_the_form_of_the_values(kind, rank, reason):
    """The rule of docs/method.md section 11, form by form, on generated cells: what it chose and why is in
    the tree's metadata, and "auto" is the rule's rank, nothing more."""
    L = _log_cp10k(_cells(m=260))
    X = {
        "cells": _cells(),
        "cells stored as float32": _cells().astype(np.float32),
        "cells stored as integers": _cells().astype(np.int64),
        "log1p counts": np.log1p(_cells()),  # Zeisel's published matrix is on this scale
        "log1p counts stored as float32": np.log1p(_cells()).astype(np.float32),  # AnnData's usual type
        "log-normalised values": _log_cp10k(_cells()),  # scanpy's normalize_total + log1p
        "log-normalised values stored as float32": _log_cp10k(_cells()).astype(np.float32),
        "log-normalised values of a gene subset": L[:, np.argsort(-L.var(axis=0), kind="stable")[:160]],
        "log-normalised values of a few genes": L[:, np.argsort(-L.var(axis=0), kind="stable")[:30]],
        "square roots of counts": np.sqrt(_cells()),  # a variance-stabilised scale of no known form
        "documents": _documents(),
        "few features": _cells(m=60),
    }[kind]
    names = [f"g{j}" for j in range(X.shape[1])]
    tree = learn_tree(X, names, TreeParams())  # the default is "auto"
    assert TreeParams().denoise == "auto"
    assert tree.metadata["denoise"] == rank and reason in tree.metadata["denoise_rule"], tree.metadata["denoise_rule"]
    assert (tree.denoiser is not None) is (rank > 0)
    if rank:  # the value scale: log CP10k of counts, the values themselves once on a log scale
        assert tree.denoiser.log_counts is kind.startswith("cells")
    forced = learn_tree(X, names, TreeParams(denoise=rank))
    D_auto, D_forced = distances(X, tree=tree, feature_names=names), distances(X, tree=forced, feature_names=names)
    assert D_auto.tobytes() == D_forced.tobytes()  # auto is the rule's rank, nothing more


def test_the_command_says_what_auto_chose(tmp_path):
    data = tmp_path / "cells.npy"
    np.save(data, _cells())
    r = run_hdtwd("distance", data, "-o", tmp_path / "D.npy", "-v")
    assert b"denoising: rank 50 (raw counts whose features co-occur" in r.stderr
    assert b"denoising (rank 50 principal axes; raw counts whose features co-occur" in r.stderr
    np.save(data, _log_cp10k(_cells()).astype(np.float32))  # scanpy's log-normalised values, as AnnData holds them
    r = run_hdtwd("distance", data, "-o", tmp_path / "D.npy", "-v")
    assert b"denoising: rank 50 (log-normalised values (scanpy's normalize_total + log1p) whose" in r.stderr
    np.save(data, _documents())
    r = run_hdtwd("distance", data, "-o", tmp_path / "D.npy", "-v")
    assert b"denoising: off" in r.stderr
    bad = run_hdtwd("distance", data, "--denoise", "fifty", "-o", tmp_path / "E.npy", check=False)
    assert bad.returncode == 2 and b"'auto' or an integer" in bad.stderr and not (tmp_path / "E.npy").exists()
    with pytest.raises(ParameterError):
        TreeParams(denoise="fifty")


def test_a_sample_is_denoised_to_the_same_bits_in_any_block_and_on_either_kernel():
    """Each row is reconstructed alone (a fixed order of sums), so a sample's values and tree vector do
    not depend on the rows it is computed with: one process and a Dask worker see the same vectors."""
    import scipy.sparse as sp

    from hdtwd_cli.tree import _kernels, _small
    from hdtwd_cli.tree._denoise import DenoisedRows
    from hdtwd_cli.twd._distance import TreeVectors

    X = _cells()
    names = [f"g{j}" for j in range(X.shape[1])]
    tree = learn_tree(X, names, TreeParams(denoise=50))
    A = align_to_tree(sp.csr_matrix(X), names, tree)
    assert isinstance(A, DenoisedRows)
    whole = A.rows()
    for i in (0, 7, 239):
        assert A.rows(np.array([i])).tobytes() == whole[i : i + 1].tobytes()
    assert A.rows(np.arange(50, 90)).tobytes() == whole[50:90].tobytes()
    tv = TreeVectors(tree, A)
    Y = tv.rows()
    assert tv.of_rows(np.array([5, 3])).tobytes() == Y[[5, 3]].tobytes()
    # the NumPy twin (small blocks) and the compiled kernel give the same bits
    d = tree.denoiser
    F = np.log1p(X[:, [names.index(n) for n in tree.leaf_names]])
    out_small, out_jit = np.empty_like(F), np.empty_like(F)
    _small.reconstruct_rows(F, d.mean, d.axes, d.axes_t, out_small)
    _kernels.reconstruct_rows(F, d.mean, d.axes, d.axes_t, out_jit)
    assert out_small.tobytes() == out_jit.tobytes()
    # the CSR kernel reads the sparse values in place: the dense kernel's bits on their dense copy
    F[:, ::3] = 0.0
    C = sp.csr_matrix(F)
    out_csr = np.empty_like(F)
    _kernels.reconstruct_rows_csr(C.indptr, C.indices, C.data, d.mean, d.axes, d.axes_t, out_csr)
    _kernels.reconstruct_rows(F, d.mean, d.axes, d.axes_t, out_jit)
    assert out_csr.tobytes() == out_jit.tobytes()


def test_the_tiled_reconstruction_is_each_rows_own_sum_in_order():
    """``mu + Z Vt`` in tiles of any shape (remainders included) is, bit for bit, each element's products
    added over ``k`` in order onto ``mu`` (NumPy, one ``k`` at a time over all rows)."""
    from hdtwd_cli.tree._kernels import reconstruct_tiles

    rng = np.random.default_rng(3)
    Z, mu, Vt = rng.standard_normal((45, 13)), rng.random(301), rng.standard_normal((13, 301))
    want = np.repeat(mu[None, :], 45, axis=0)
    for k in range(13):
        want += Z[:, k : k + 1] * Vt[k]
    for tiles in ((1, 301), (16, 512), (7, 33), (45, 1), (64, 64)):
        out = np.full_like(want, np.nan)
        reconstruct_tiles(Z, mu, Vt, out, *tiles)
        assert out.tobytes() == want.tobytes(), tiles


def test_the_axes_are_the_same_bits_from_dense_or_sparse_storage():
    import scipy.sparse as sp

    X = _cells()
    a, b = fit_denoiser(X, 20), fit_denoiser(sp.csr_matrix(X), 20)
    assert a.mean.tobytes() == b.mean.tobytes() and a.axes.tobytes() == b.axes.tobytes()


def _tree_bytes(tree: Tree) -> tuple:
    d = tree.denoiser
    return (
        tree.parent.tobytes(),
        tree.length.tobytes(),
        tuple(tree.leaf_names),
        None if tree.feature_weights is None else tree.feature_weights.tobytes(),
        None if d is None else (d.mean.tobytes(), d.axes.tobytes()),
    )


def test_auto_denoises_above_the_landmark_threshold():
    """Neither the landmark operator (more than 5,000 features) nor the latent space turns the rule off:
    it depends on the values, never on the path or the memory."""
    from hdtwd_cli.tree._values import denoise_rank

    rng = np.random.default_rng(0)
    X = sp.random(120, 6000, density=0.3, format="lil", random_state=1, data_rvs=lambda k: rng.integers(1, 5, k))
    X[:, :50] = 1  # every sample shares these features: they co-occur
    assert denoise_rank(X.tocsr(), TreeParams()) == denoise_rank(X.tocsr(), TreeParams(landmarks=0))
    assert denoise_rank(X.tocsr(), TreeParams())[0] == 50
    assert denoise_rank(X[:, :4000].tocsr(), TreeParams(feature_space="svd"))[0] == 50


def test_auto_on_dense_counts_learns_from_the_denoised_rows_and_compares_the_samples_own_values():
    """Bulk-like counts (about 19 % zeros, under DENSE_ZERO_SHARE): the tree is the one learned from the
    denoised rows (the same bits as --denoise 50), the samples are compared by their own values (no map on
    the tree, so the distances are those of that tree without its map), by every route (embed -> decode);
    the same counts with sampling zeros keep the map; a forced rank keeps it too; stored zeros count."""
    import dataclasses

    import hdtwd_cli as hd
    from hdtwd_cli.datasets import planted_hierarchy
    from hdtwd_cli.tree._values import DENSE_ZERO_SHARE, zero_share

    X, _, _ = planted_hierarchy(300, 200, shape="random", counts_per_feature=20.0, seed=1)
    names = [f"g{j}" for j in range(200)]
    assert zero_share(X) < DENSE_ZERO_SHARE
    auto = hd.learn_tree(X, names)
    forced = hd.learn_tree(X, names, params=hd.TreeParams(denoise=50))
    assert auto.parent.tobytes() == forced.parent.tobytes() and auto.length.tobytes() == forced.length.tobytes()
    assert auto.denoiser is None and forced.denoiser is not None
    assert "dense (" in auto.metadata["denoise_rule"] and "own values" in auto.metadata["denoise_rule"]
    own = hd.distances(X, auto, feature_names=names)
    assert own.tobytes() == hd.distances(X, dataclasses.replace(forced, denoiser=None), feature_names=names).tobytes()
    chained = hd.decode_tree(hd.embed(X, names))
    assert chained.denoiser is None and chained.parent.tobytes() == auto.parent.tobytes()
    assert hd.distances(X, chained, feature_names=names).tobytes() == own.tobytes()
    S = X.copy()
    S[np.random.default_rng(0).random(S.shape) < 0.5] = 0  # sampling zeros: single-cell-like
    assert zero_share(S) > DENSE_ZERO_SHARE and hd.learn_tree(S, names).denoiser is not None
    stored = sp.csr_matrix(np.ones((4, 5)))
    stored.data[:10] = 0.0  # explicit zeros
    assert zero_share(stored) == 0.5


@pytest.mark.parametrize("blocks", [1, 4])
def test_the_denoised_landmark_tree_has_the_same_bits_for_any_dtype_thread_count_or_memory(blocks, monkeypatch):
    """The landmark operator reads the denoised rows by row blocks (held in memory or computed again):
    the same tree for float32 or float64 counts, dense or sparse storage, 1 or 2 threads, rows held or
    not; with one block the tree of the rows made dense, with several the same to rounding."""
    import numba
    from threadpoolctl import threadpool_limits

    from hdtwd_cli.tree import _landmarks, _values

    X = _cells(n=240, m=700)
    names = [f"g{j}" for j in range(X.shape[1])]
    p = TreeParams(landmarks=80)
    monkeypatch.setattr(_landmarks, "BLOCK_ROWS", 64 if blocks > 1 else 4096)
    ref = learn_tree(X, names, p)
    assert ref.metadata["denoise"] == 50 and ref.metadata["n_landmarks"] == 80
    assert ref.denoiser is not None and ref.metadata["denoise_rule"].startswith("raw counts")
    variants = {"float32": (X.astype(np.float32), 2, 1.0), "sparse": (sp.csr_matrix(X), 2, 1.0)}
    variants["streamed, 1 thread"] = (X, 1, 0.0)
    variants["held, 1 thread"] = (X, 1, 1.0)
    before = numba.get_num_threads()
    for what, (data, threads, hold) in variants.items():
        monkeypatch.setattr(_values, "HOLD_FRACTION", hold)
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        try:
            with threadpool_limits(limits=threads, user_api="blas"):
                got = learn_tree(data, names, p)
        finally:
            numba.set_num_threads(before)
        assert _tree_bytes(got) == _tree_bytes(ref), what
    # against the old route: the landmark operator on the rows made dense (one n x m matrix)
    from hdtwd_cli.tree._denoise import DenoisedRows

    real = _landmarks.landmark_operator
    monkeypatch.setattr(
        _landmarks,
        "landmark_operator",
        lambda Y, *a, **k: real(Y.dense() if isinstance(Y, DenoisedRows) else Y, *a, **k),
    )
    import hdtwd_cli.tree._learn as learn_mod

    monkeypatch.setattr(learn_mod, "landmark_operator", _landmarks.landmark_operator)
    dense = learn_tree(X, names, p)
    if blocks == 1:
        assert _tree_bytes(dense) == _tree_bytes(ref)
    else:
        D1, D2 = distances(X, tree=ref, feature_names=names), distances(X, tree=dense, feature_names=names)
        np.testing.assert_allclose(D1, D2, rtol=1e-6, atol=1e-9)


def test_a_denoiser_that_does_not_fit_is_refused_with_one_reason(monkeypatch):
    """Where the map does not fit in memory the command stops before it starts, saying why and what to do;
    ``auto`` never turns itself off for want of memory (the tree would depend on the machine)."""
    from hdtwd_cli.errors import ResourceError

    X = _cells(n=120, m=400)
    data = np.asarray(X)
    monkeypatch.setenv("HDTWD_MEMORY_LIMIT", str(600_000))  # less than the 120 x 400 centred values and their Gram
    with pytest.raises(ResourceError) as e:
        learn_tree_api(data)
    msg = str(e.value)
    assert "denoising at rank 50 (raw counts whose features co-occur" in msg
    assert "the 120 x 400 centred values and their 120 x 120 Gram matrix" in msg and "give denoise 0" in msg
    monkeypatch.setenv("HDTWD_MEMORY_LIMIT", str(1 << 34))
    assert learn_tree_api(data).metadata["denoise"] == 50


def learn_tree_api(X: np.ndarray) -> Tree:
    import hdtwd_cli as hd

    return hd.learn_tree(X, feature_names=[f"g{j}" for j in range(X.shape[1])])


def test_the_fit_from_the_rows_gram_matrix_is_the_svd_reconstruction():
    """With more features than rows the axes come from the n x n Gram matrix: the same projection as an
    independent SVD, the same bits for dense or sparse storage and at any thread count."""
    from threadpoolctl import threadpool_limits

    X = _cells(n=80, m=300)
    d = fit_denoiser(X[:60], 12)
    want = _svd_reconstruction(_log_cp10k(X[:60]), _log_cp10k(X), 12)
    np.testing.assert_allclose(denoise(X, d), want, rtol=1e-9, atol=1e-10)
    s = fit_denoiser(sp.csr_matrix(X[:60]), 12)
    with threadpool_limits(limits=1, user_api="blas"):
        t = fit_denoiser(X[:60], 12)
    assert d.axes.tobytes() == s.axes.tobytes() == t.axes.tobytes() and d.mean.tobytes() == s.mean.tobytes()
    twice = np.vstack([X[:30], X[:30]])  # rows that repeat: rank 29 at most, the rest left out
    r = fit_denoiser(twice, 40)
    assert r.rank == 40 and np.count_nonzero(np.abs(r.axes).sum(axis=0) > 0) <= 29
    np.testing.assert_allclose(denoise(twice, r), np.maximum(_log_cp10k(twice), 0), rtol=1e-9, atol=1e-9)


def test_held_rows_are_the_rows_computed_again_and_the_search_does_not_change(monkeypatch):
    """A partition's denoised rows, computed once and kept, are the bits of computing them again (held or
    not, in any mix); the partitioned search gives the same graph with and without holding."""
    import scipy.sparse as sp

    from hdtwd_cli.knn import _search as search
    from hdtwd_cli.tree._denoise import DenoisedRows, HeldRows
    from hdtwd_cli.twd._distance import TreeVectors

    X = _cells()
    names = [f"g{j}" for j in range(X.shape[1])]
    tree = learn_tree(X, names, TreeParams(denoise=50))
    A = align_to_tree(sp.csr_matrix(X), names, tree)
    assert isinstance(A, DenoisedRows)
    held = np.array([5, 3, 100, 7, 42])
    H = A.held(held)
    for idx in ([3, 7], [7, 3, 3], [3, 8], list(range(0, 120, 7))):
        assert H.rows(np.array(idx)).tobytes() == A.rows(np.array(idx)).tobytes()
    S = A.select(np.arange(0, A.shape[1], 3)[::-1])  # picked columns: held through the computed rows
    for source in (S, A):
        assert source.held(held).rows(held).tobytes() == source.rows(held).tobytes()
    tv = TreeVectors(tree, A)
    assert tv.holding(held, 0) is tv  # over budget: computed as usual
    th = tv.holding(held, 1 << 40)
    assert isinstance(th.x, HeldRows) and th.of_rows(held).tobytes() == tv.of_rows(held).tobytes()
    k, budget = 10, X.shape[0] * tv.dim * 2 // 2
    monkeypatch.setattr(search, "SEARCH_BYTES", budget)  # partitions
    graphs, made, counts = [], [], []
    init = HeldRows.__init__
    monkeypatch.setattr(HeldRows, "__init__", lambda self, *a: made.append(1) or init(self, *a))
    for share in (1.0, 0.0):  # held (all of the memory available covers them), never held
        monkeypatch.setattr(search, "HOLD_FRACTION", share)
        made.clear()
        graphs.append(search.approximate_neighbors(tv, k, 3))
        counts.append(len(made))
    assert counts[0] >= 2 and counts[1] == 0  # one per partition, then none
    assert graphs[0][0].tobytes() == graphs[1][0].tobytes() and graphs[0][1].tobytes() == graphs[1][1].tobytes()


def test_the_search_of_denoised_samples_compares_their_widest_columns(monkeypatch):
    """NN-descent on denoised samples compares only the :data:`SEARCH_COLUMNS` tree-vector columns of widest
    range (raw samples: all); every reported distance is still the exact TWD over all columns, the recall
    against the exact search stays high, and ``-v`` says so with the recall on sampled samples."""
    import scipy.sparse as sp
    from scipy.spatial.distance import cdist

    from hdtwd_cli.knn import _search as search
    from hdtwd_cli.knn._nndescent import widest_columns
    from hdtwd_cli.twd._distance import TreeVectors, nearest_neighbors

    X = _cells(n=600, m=160)
    names = [f"g{j}" for j in range(X.shape[1])]
    tree = learn_tree(X, names, TreeParams(denoise=50))
    tv = TreeVectors(tree, align_to_tree(sp.csr_matrix(X), names, tree))
    raw = TreeVectors(tree, np.ones((3, tree.n_leaves)))  # values that are not denoised rows
    keep = 128
    monkeypatch.setattr(search, "SEARCH_COLUMNS", keep)
    assert keep < tv.dim and search.searched_columns(tv) == keep and search.searched_columns(raw) == raw.dim
    code = search.search_code(tv)
    Y = tv.rows()
    span = np.ptp(np.rint(Y * 65535 / Y.max()), axis=0)
    coded = np.sort(code.columns[code.columns >= 0])
    assert np.array_equal(coded, widest_columns(span, keep)) and span[coded].min() >= np.sort(span)[-keep]
    k, notes = 10, []
    idx, dist = search.approximate_neighbors(tv, k, 3, note=notes.append)
    D = cdist(Y, Y, "cityblock")
    np.testing.assert_allclose(dist, D[np.arange(tv.n)[:, None], idx], rtol=1e-12)  # over every column
    want, _ = nearest_neighbors(tv, k)
    recall = np.mean([len(set(a) & set(b)) / k for a, b in zip(idx, want)])
    assert recall >= 0.98, recall  # 128 of 318 columns: 0.999 (64: 0.92, 32: 0.76)
    assert any(f"on {keep} of {tv.dim} tree-vector columns" in m for m in notes)
    assert any(f"recall@{k} of the {keep}-column search" in m for m in notes)


def test_rows_written_into_a_reused_buffer_are_the_rows(monkeypatch):
    """Every way of reading denoised rows into a caller's buffer gives the bits of a new array: computed or
    held, a run or a gather, all columns or picked ones; ``blocks()`` reads them all, held runs as read-only
    views of the held matrix (no copy)."""
    import scipy.sparse as sp

    from hdtwd_cli.tree import _denoise
    from hdtwd_cli.tree._denoise import DenoisedRows

    monkeypatch.setattr(_denoise, "BLOCK_ROWS", 32)  # several blocks, the last one short
    X = _cells()
    names = [f"g{j}" for j in range(X.shape[1])]
    tree = learn_tree(X, names, TreeParams(denoise=50))
    A = align_to_tree(sp.csr_matrix(X), names, tree)
    assert isinstance(A, DenoisedRows)
    n = A.shape[0]
    picked = A.select(np.arange(0, A.shape[1], 3)[::-1])
    every = np.arange(n)
    for source in (A, picked, A.held(every), picked.held(every), A.held(np.array([5, 3, 100, 7]))):
        want = source.rows()
        for idx in (np.array([3, 5]), np.array([7, 3, 3]), np.arange(10, 50), np.array([3, 8])):
            buf = np.full((idx.size, source.shape[1]), np.nan)
            got = source.rows(idx, out=buf)
            assert got is buf and got.tobytes() == want[idx].tobytes()
        blocks = list(source.blocks())
        assert [i0 for i0, _ in blocks] == list(range(0, n, 32))
        for i0, R in source.blocks():  # each valid until the next
            assert R.tobytes() == want[i0 : i0 + 32].tobytes()
    H = A.held(every)
    views = [R for _, R in H.blocks()]
    assert all(np.shares_memory(R, H._held) and not R.flags.writeable for R in views)


@pytest.mark.parametrize("density", [0.1, 0.6])
def test_a_blocks_gram_follows_its_values_not_their_storage(density, monkeypatch):
    """Dense (either layout) and sparse storage of one block give the same bits on either side of
    DENSE_GRAM_FRACTION, negative zeros included, and the product F^T F to rounding; the dense
    side never calls the sparse kernel and never writes into the block."""
    import scipy.sparse as sp

    from hdtwd_cli.tree import _denoise, _kernels

    rng = np.random.default_rng(3)
    F = rng.random((700, 300)) * (rng.random((700, 300)) < density)
    assert (np.count_nonzero(F) >= _denoise.DENSE_GRAM_FRACTION * F.size) == (density > 0.25)
    if density > 0.25:

        def refuse(_):
            raise AssertionError("a dense block reached the sparse kernel")

        monkeypatch.setattr(_kernels, "column_gram_csr", refuse)
    F[0, F[0] == 0] = -0.0  # a negative zero: no value of the CSR form
    s1, g1 = _denoise._column_sums_and_gram(F)
    s2, g2 = _denoise._column_sums_and_gram(sp.csr_matrix(F))
    assert s1.tobytes() == s2.tobytes() and g1.tobytes() == g2.tobytes()
    Ff = np.asfortranarray(F)
    s3, g3 = _denoise._column_sums_and_gram(Ff)  # F.T contiguous: the block itself must not be written
    assert s3.tobytes() == s1.tobytes() and g3.tobytes() == g1.tobytes()
    assert np.signbit(Ff[0][F[0] == 0]).all() and Ff.tobytes(order="C") == F.tobytes()
    np.testing.assert_allclose(g1, F.T @ F, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s1, F.sum(axis=0), rtol=1e-12)


@pytest.mark.parametrize("shape", [(60, 300), (300, 60)])
def test_the_fit_from_products_with_the_values_is_the_svd_reconstruction(shape, monkeypatch):
    """Where the Gram matrix would cost more than products with the values (all genes), the axes come from
    Lanczos on the implicit Gram operator: the projection of an independent SVD, the same bits for dense
    or sparse storage and at any thread count, rows that repeat left out as by the explicit fit."""
    import numba

    from hdtwd_cli.tree import _denoise

    n, m = shape
    X = _cells(n=n, m=m)
    X[:, ::3] *= np.random.default_rng(1).random((n, 1)) < 0.3  # a third of the genes sparse
    explicit = fit_denoiser(X, 12)
    monkeypatch.setattr(_denoise, "IMPLICIT_COST_PER_VALUE", 0)
    assert _denoise.fit_is_implicit(n, m, _denoise.row_nonzeros(X), 12)
    d = fit_denoiser(X, 12)
    want = _svd_reconstruction(_log_cp10k(X), _log_cp10k(X), 12)
    np.testing.assert_allclose(denoise(X, d), want, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(d.axes @ d.axes.T, explicit.axes @ explicit.axes.T, atol=1e-10)
    assert d.mean.tobytes() == explicit.mean.tobytes()
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        one = fit_denoiser(sp.csr_matrix(X), 12)
    finally:
        numba.set_num_threads(before)
    assert one.axes.tobytes() == d.axes.tobytes() and one.mean.tobytes() == d.mean.tobytes()
    twice = np.vstack([X[:25], X[:25]])  # rank 24 at most: the rest left out (zero columns)
    r = fit_denoiser(twice, 30)
    assert r.rank == 30 and np.count_nonzero(np.abs(r.axes).sum(axis=0) > 0) <= 24
    np.testing.assert_allclose(denoise(twice, r), np.maximum(_log_cp10k(twice), 0), rtol=1e-8, atol=1e-8)


def test_the_fit_is_chosen_by_the_counts_not_the_storage():
    """Gram matrix or products: the shape and each row's non-zeros decide (the same for dense or sparse
    storage, explicit zeros and -0.0 included); all genes of a few thousand cells take the products,
    a few thousand genes of many cells the Gram matrix."""
    from hdtwd_cli._runtime.sparse import canonical_csr
    from hdtwd_cli.tree._denoise import fit_is_implicit, row_nonzeros

    rng = np.random.default_rng(3)
    X = sp.random(50, 80, density=0.2, format="csr", random_state=4)
    D = X.toarray()
    D[0, 0] = -0.0
    S = sp.csr_matrix(D)
    S.data = np.append(S.data, [0.0])
    S.indices = np.append(S.indices, [0 if D[49, 0] == 0 else 1]).astype(S.indices.dtype)
    S.indptr[-1] += 1
    S = canonical_csr(S)  # as the door gives it: the explicit zero stays stored
    assert S.nnz == X.nnz + 1
    assert row_nonzeros(D).tolist() == row_nonzeros(S).tolist() == row_nonzeros(X).tolist()
    cells = np.full(10_000, 1_600)  # 10^4 cells, 1,600 genes detected each
    assert fit_is_implicit(10_000, 33_000, cells, 50)
    assert fit_is_implicit(100_000, 20_000, np.full(100_000, 1_600), 50)
    assert not fit_is_implicit(100_000, 2_000, np.full(100_000, 210), 50)
    assert not fit_is_implicit(3_000, 4_000, rng.integers(500, 2_000, 3_000), 50)
    assert not fit_is_implicit(40, 30_000, np.full(40, 30_000), 50)  # rank 39 at most: every axis


@pytest.mark.parametrize("nnz_shape", ["skewed", "empty"])
def test_centred_products_are_row_sums_in_stored_order(nnz_shape):
    """``centred_csr_matvec``: every row once, each ``out[i]`` its stored entries summed in order minus
    ``u_i (v . x)`` (``v . x`` summed in order), with rows of very different lengths and empty ones."""
    from hdtwd_cli.tree._kernels import centred_csr_matvec

    rng = np.random.default_rng(8)
    n, m = 301, 57
    dense = rng.gamma(0.5, size=(n, m)) * (rng.random((n, m)) < np.linspace(0.01, 1.0, n)[:, None] ** 3)
    if nnz_shape == "empty":
        dense[:] = 0.0
    dense[[0, 150, 300]] = 0.0  # empty rows, the last among them
    A = sp.csr_matrix(dense)
    x, u, v = rng.random(m), rng.random(n), rng.random(m)
    out = np.full(n, np.nan)
    centred_csr_matvec(A.indptr, A.indices, A.data, x, u, v, out)
    c = 0.0
    for j in range(m):
        c += v[j] * x[j]
    want = np.empty(n)
    for i in range(n):
        s = 0.0
        for p in range(A.indptr[i], A.indptr[i + 1]):
            s += A.data[p] * x[A.indices[p]]
        want[i] = s - u[i] * c
    assert out.tobytes() == want.tobytes()
