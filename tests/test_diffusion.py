"""Feature diffusion operator (docs/method.md section 1) against a direct dense construction."""

import numpy as np
import pytest
import scipy.sparse as sp

from hdtwd_cli.tree._diffusion import diffusion_densities, diffusion_operator, feature_distances, kernel_scale


def direct_operator(X, c):
    """Eq. 1 step by step, without the symmetric conjugate."""
    A = X / np.linalg.norm(X, axis=0)
    d = np.clip(1 - A.T @ A, 0, 2)
    np.fill_diagonal(d, 0)
    sigma = np.median(d[np.triu_indices(d.shape[0], 1)])
    Q = np.exp(-(d**2) / (c * sigma))
    D = Q.sum(1)
    Qh = Q / D[:, None] / D[None, :]
    return Qh / Qh.sum(1)[None, :]  # P = Qh Dh^-1, column-stochastic


def test_operator_matches_direct_construction():
    rng = np.random.default_rng(0)
    X = rng.random((40, 12))
    op = diffusion_operator(X, eps=2.0, eigenvalue_floor=-1.0)  # integer power: no clipping needed
    P = direct_operator(X, 2.0)
    phi, neg = diffusion_densities(op, 1.0)
    # rows of phi are columns of P^1
    assert np.allclose(phi.T, P, atol=1e-10)
    assert np.allclose(P.sum(axis=0), 1.0)
    assert neg == 0.0
    # with the default floor the negative eigenvalues are clipped, and that is recorded
    clipped = diffusion_operator(X, eps=2.0)
    assert op.raw_eigenvalues.min() < 0 and clipped.clipped_spectral_mass > 0


def test_fractional_power_composes():
    rng = np.random.default_rng(1)
    X = rng.random((30, 10))
    op = diffusion_operator(X, eps=1.0)
    half, _ = diffusion_densities(op, 0.5)
    full, _ = diffusion_densities(op, 1.0)
    # P^(1/2) P^(1/2) = P when no eigenvalue was clipped
    if op.clipped_spectral_mass == 0:
        assert np.allclose(half.T @ half.T, full.T, atol=1e-8)
    assert np.allclose(half.sum(axis=1), 1.0, atol=1e-6)


def test_eigenvalues_clipped_and_recorded():
    rng = np.random.default_rng(2)
    X = rng.random((20, 60))
    op = diffusion_operator(X, eps=5.0)
    assert op.eigenvalues.min() > 0 and op.eigenvalues.max() <= 1.0
    assert np.isclose(op.raw_eigenvalues[0], 1.0)
    neg = op.raw_eigenvalues[op.raw_eigenvalues < 0]
    if neg.size:
        assert op.clipped_spectral_mass > 0


def test_sparse_and_dense_give_same_distances():
    rng = np.random.default_rng(3)
    X = rng.random((50, 15)) * (rng.random((50, 15)) < 0.3)
    X[0] = 1.0
    assert np.allclose(feature_distances(X), feature_distances(sp.csr_matrix(X)), atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_correlation_distance_is_one_minus_pearson_for_every_storage(dtype):
    """The correlation distance from the centred Gram matrix (no centred copy) equals NumPy's Pearson
    correlation; dense and sparse storage of counts give the same bits; a constant column (all zero, or
    the same count in every sample) is at distance 1 from every other."""
    from scipy.spatial.distance import squareform

    from hdtwd_cli.tree._average import correlation_distances

    rng = np.random.default_rng(4)
    X = rng.poisson(rng.gamma(1.0, 2.0, (1, 25)) * rng.uniform(0.5, 3.0, (80, 1))).astype(dtype)
    X[:, 3] = 0.0
    X[:, 7] = 5.0
    live = np.setdiff1d(np.arange(25), [3, 7])
    D = feature_distances(X, "correlation")
    oracle = 1.0 - np.corrcoef(X[:, live].astype(np.float64).T)
    np.testing.assert_allclose(D[np.ix_(live, live)], np.clip(oracle, 0.0, 2.0), rtol=0, atol=1e-12)
    for j in (3, 7):
        assert np.all(np.delete(D[j], j) == 1.0) and D[j, j] == 0.0
    assert D.tobytes() == feature_distances(sp.csr_matrix(X.astype(np.float64)), "correlation").tobytes()
    assert np.array_equal(D, D.T)
    # the average learner reads the same values (its condensed form, no rounding to zero of tiny distances)
    np.testing.assert_allclose(squareform(D, checks=False), correlation_distances(X), rtol=0, atol=1e-9)
    # correlation ignores a shift of a column (the cosine does not)
    Y = X.astype(np.float64)
    Y[:, live[0]] += 7.0
    np.testing.assert_allclose(feature_distances(Y, "correlation"), D, rtol=0, atol=1e-12)
    cos_x, cos_y = feature_distances(X[:, live], "cosine"), feature_distances(Y[:, live], "cosine")
    assert not np.allclose(cos_x[0], cos_y[0])


def test_zero_column_is_refused():
    X = np.ones((5, 3))
    X[:, 1] = 0
    with pytest.raises(ValueError, match="all-zero"):
        feature_distances(X)


def test_kernel_scale_is_median_of_pairs():
    D = np.array([[0, 1, 4], [1, 0, 2], [4, 2, 0]], dtype=float)
    assert kernel_scale(D) == 2.0
    # an even number of pairs (the mean of the middle two), and the matrix left untouched
    rng = np.random.default_rng(1)
    A = rng.random((9, 9))
    D = A + A.T
    np.fill_diagonal(D, 0.0)
    before = D.copy()
    assert kernel_scale(D) == float(np.median(D[np.triu_indices(9, 1)]))
    np.testing.assert_array_equal(D, before)


@pytest.mark.parametrize("counts", [True, False])
def test_column_gram_kernel_matches_dense_product(counts, monkeypatch):
    """The blocked CSR Gram kernel equals X^T X: exactly for counts, to rounding for real values;
    the same bits whatever the rows split per chunk (each entry is summed over the rows in order)."""
    from hdtwd_cli._runtime.sparse import canonical_csr
    from hdtwd_cli.tree import _kernels
    from hdtwd_cli.tree._kernels import column_gram_csr

    rng = np.random.default_rng(3)
    X = sp.random(400, 300, density=0.07, random_state=rng, format="csr")
    if counts:
        X.data = np.ceil(X.data * 20)
    X = X[:, rng.permutation(300)]  # unsorted indices: the door's form is required, never made here
    with pytest.raises(TypeError, match="canonical"):
        column_gram_csr(X)
    X = canonical_csr(X)
    G = column_gram_csr(X)
    D = X.toarray()
    ref = D.T @ D
    assert G.shape == (300, 300)
    assert np.array_equal(G, G.T)
    if counts:
        assert np.array_equal(G, ref)
    else:
        np.testing.assert_allclose(G, ref, rtol=1e-12, atol=1e-15)
    assert np.count_nonzero(G) == np.count_nonzero(ref)
    for chunk in (1, 7, 399):
        monkeypatch.setattr(_kernels, "GRAM_CHUNK_ROWS", chunk)
        assert np.array_equal(column_gram_csr(X), G), chunk
    monkeypatch.setattr(_kernels, "GRAM_CHUNK_ROWS", 1 << 14)
    monkeypatch.setattr(_kernels, "GRAM_SPLIT_BYTES", 100)  # split positions of 1 row at a time
    assert np.array_equal(column_gram_csr(X), G)


def test_column_gram_reads_int32_and_int64_indices_alike_and_scales_exactly():
    """The Gram kernel takes the CSR's index arrays as they are (no int64 copies), and the sparse
    ``column_gram`` scales the stored values by ``1 / s`` (a power of two) in place of a product with
    a diagonal matrix: the same bits as that product's Gram, for real values too."""
    from hdtwd_cli._runtime.sparse import canonical_csr
    from hdtwd_cli.tree._diffusion import column_gram, column_scale
    from hdtwd_cli.tree._kernels import column_gram_csr

    rng = np.random.default_rng(8)
    X = sp.random(500, 120, density=0.1, random_state=rng, format="csr") * 37.0
    X.data[::9] = 0.0  # explicit zeros
    wide = sp.csr_matrix((X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64)), shape=X.shape)
    assert X.indices.dtype == np.int32 and np.array_equal(column_gram_csr(X), column_gram_csr(wide))
    for scale in (column_scale(X), float(column_scale(X).max())):
        old = column_gram_csr(canonical_csr(X @ sp.diags(1.0 / np.broadcast_to(scale, (X.shape[1],)))))
        assert np.array_equal(column_gram(X, scale), old)
        rev = np.concatenate([np.arange(b - 1, a - 1, -1) for a, b in zip(X.indptr[:-1], X.indptr[1:])])
        unsorted = sp.csr_matrix((X.data[rev], X.indices[rev], X.indptr), shape=X.shape)  # each row reversed
        unsorted.has_sorted_indices = False
        for other in (X.tocsc(), unsorted):  # refused, never converted in the stage
            with pytest.raises(TypeError, match="canonical"):
                column_gram(other, scale)
            assert np.array_equal(column_gram(canonical_csr(other), scale), old)  # the door's form of it
        with pytest.raises(TypeError, match="csr float32"):
            column_gram(X.astype(np.float32), scale)


@pytest.mark.parametrize("parts", [None, 1, 3, 7])
def test_column_absmax_is_numpy_s_for_any_part_count(parts):
    """Each column's largest |x| (0 without entries): negative values, explicit zeros, duplicates
    (summed first), float32 values, int32 or int64 indices; a maximum is exact, so any split agrees."""
    from hdtwd_cli._runtime.sparse import canonical_csr
    from hdtwd_cli.tree._kernels import column_absmax_csr

    rng = np.random.default_rng(parts or 0)
    X = sp.random(300, 50, density=0.08, random_state=rng, format="csr")
    X.data = (X.data - 0.5) * 10.0
    X = X[:, rng.permutation(50)]
    X.data[X.indices == 13] = 0.0
    X.eliminate_zeros()  # a column with no value
    X.data[::7] = 0.0  # explicit zeros
    assert X[:, 13].nnz == 0
    dup = sp.csr_matrix(
        (np.r_[X.data, 2.5, 3.0], np.r_[X.indices, 4, 4], np.r_[X.indptr[:-1], X.indptr[-1] + 2]), shape=X.shape
    )  # row 299 holds column 4 twice: 5.5 once summed
    for M in (
        X,
        dup,
        X.astype(np.float32),
        sp.csr_matrix((X.data, X.indices.astype(np.int64), X.indptr), shape=X.shape),
    ):
        want = np.abs(M.toarray()).max(axis=0)
        if not (M.dtype == np.float64 and M.has_canonical_format):
            with pytest.raises(TypeError, match="canonical"):
                column_absmax_csr(M, parts)
        got = column_absmax_csr(canonical_csr(M), parts)  # the form the door gives the stages
        assert got.dtype == np.float64 and np.array_equal(got, want.astype(np.float64))
    assert column_absmax_csr(canonical_csr(dup), parts)[4] >= 5.5
    assert column_absmax_csr(canonical_csr(X), parts)[13] == 0.0


def test_column_presence_is_the_nonzero_pattern_of_the_columns():
    from hdtwd_cli._runtime.sparse import canonical_csr
    from hdtwd_cli.tree._kernels import column_presence_csr

    rng = np.random.default_rng(4)
    X = sp.random(200, 80, density=0.1, random_state=rng, format="csr")
    X.data[::5] = 0.0  # explicit zeros are absent
    X = X[:, rng.permutation(80)]  # unsorted indices: refused; the door's form of them is read
    with pytest.raises(TypeError, match="canonical"):
        column_presence_csr(X, np.arange(80))
    X = canonical_csr(X)
    for cols in (np.arange(80), np.sort(rng.choice(80, 17, replace=False)), np.array([3]), np.array([], np.int64)):
        B = column_presence_csr(X, cols)
        assert B.shape == (200, cols.size) and B.has_canonical_format and np.all(B.data == 1.0)
        assert np.array_equal(B.toarray(), (X.toarray()[:, cols] != 0).astype(float))


@pytest.mark.parametrize(
    "m", [40, 1450, 1500]
)  # NumPy below SMALL_WORK entries, the compiled pass above (23 and 24 tiles of 64)
def test_sqrt_densities_are_the_bits_of_sqrt_of_the_densities(m):
    # psi: the float32 product S^t, then scaling, clipping and root in float64, rounded once
    from hdtwd_cli.tree._diffusion import POWER_DTYPE, _scaled, _symmetric_power, diffusion_sqrt_densities

    X = np.random.default_rng(5).poisson(0.7, size=(80, m)).astype(float) + 0.01
    op = diffusion_operator(X)
    for t in (1.0, 0.125):
        St = _symmetric_power(op, t, POWER_DTYPE)
        assert St.dtype == np.float32 and np.array_equal(St, St.T)
        phi, neg = _scaled(St.astype(np.float64), op.sqrt_degree)
        for dtype in (np.float64, np.float32):
            psi, neg2 = diffusion_sqrt_densities(op, t, dtype)
            assert psi.dtype == dtype and np.array_equal(psi, np.sqrt(phi).astype(dtype))
            assert np.isclose(neg2, neg, rtol=1e-9, atol=1e-15)
        # the float64 reference (diffusion_densities; each row has mass 1): within float32 rounding
        exact, _ = diffusion_densities(op, t)
        assert 0 < np.abs(phi - exact).max() < 1e-6


def test_float32_power_keeps_log_a_within_the_stated_tolerance():
    # docs/method.md section 3: the float32 products (S^t and the Gram matrices) move log a by at most
    # 2e-5 from the all-float64 computation (measured 2.7e-6 - 1.0e-5 on pbmc68k, Zeisel, CBMC)
    from hdtwd_cli.tree import _hd_lca as tree_mod
    from hdtwd_cli.tree._hyperbolic import HyperbolicEmbedding, scale_heights

    X = np.random.default_rng(7).poisson(0.8, size=(120, 400)).astype(float) + 0.01
    op = diffusion_operator(X, bandwidth="knn")
    K = 5
    g = tree_mod.hd_lca_products(op, [K])[0][K]
    psi = np.stack([np.sqrt(diffusion_densities(op, 2.0**-k)[0]) for k in range(K + 1)])
    ref = tree_mod.hd_lca_product(
        HyperbolicEmbedding(psi=psi, heights=scale_heights(K), negative_mass=np.zeros(K + 1)), dtype=np.float64
    )
    err = np.abs(np.log(g) - np.log(ref)).max() * 0.5 / (K + 1)
    assert 0 < err < 2e-5


@pytest.mark.parametrize("m, block", [(1, 4), (7, 4), (300, 64), (257, 256)])
def test_symmetrize_is_the_bits_of_the_expression(m, block):
    from hdtwd_cli.tree._diffusion import _mirror_upper, _symmetrize

    A = np.random.default_rng(m).random((m, m))
    ref = A.copy()
    ref += ref.T  # NumPy buffers the overlapping transpose: every entry (a_ij + a_ji)
    ref *= 0.5
    upper = np.triu(A) + np.triu(A, 1).T
    B = A.copy()
    out = _symmetrize(A, block)
    assert out is A and np.array_equal(out, ref) and np.array_equal(out, out.T)
    assert np.array_equal(_mirror_upper(B, block), upper)  # the triangle of S^t made whole


@pytest.mark.parametrize("metric", ["cosine", "correlation", "euclidean"])
def test_features_identical_up_to_rounding_get_the_same_kernel_on_every_cpu(metric):
    """A distance of 0 on one CPU and 1e-16 on another switched the self-tuning bandwidth of
    a feature with k identical copies between the median and ~1e-8 (a kernel that differed by 1.0,
    trees that differed on BBCSPORT between the AVX-512 and AVX2 paths). Distances within the
    rounding of their formula are exactly 0, so a perturbation at rounding level changes nothing."""
    from hdtwd_cli.tree._diffusion import zero_rounding

    rng = np.random.default_rng(3)
    X = rng.poisson(3.0, size=(60, 30)).astype(float) + 1.0
    X[:, 1:9] = X[:, [0]]  # feature 0 and 8 exact copies: its 7th nearest neighbour is a copy
    Y = X.copy()
    Y[:, 1:9] *= 1.0 + 1e-13 * rng.standard_normal((1, 8))  # the same features, up to rounding
    D = feature_distances(X, metric)
    E = feature_distances(Y, metric)
    assert np.all(D[:9, :9] == 0) and np.all(E[:9, :9] == 0)
    a = diffusion_operator(X, metric=metric, bandwidth="knn", knn=7)
    b = diffusion_operator(Y, metric=metric, bandwidth="knn", knn=7)
    np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, rtol=0, atol=1e-9)
    # genuinely different features are never floored
    F = feature_distances(rng.random((40, 12)), metric)
    assert np.all(F[~np.eye(12, dtype=bool)] > 0)
    Z = np.array([[1e-10, 0.5]])
    zero_rounding(Z, "cosine", np.ones(1), np.ones(2))
    assert Z.tolist() == [[0.0, 0.5]]
