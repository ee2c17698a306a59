"""TWD (Eq. 5) against exact optimal transport on the decoded tree's path metric."""

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import exact_ot, path_metric

from hdtwd_cli.tree._learn import learn_tree
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._distance import tree_wasserstein
from hdtwd_cli.twd._histograms import normalize_rows
from hdtwd_cli.twd._kernels import l1_distances as pairwise_l1


def random_case(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(4, 11))
    n = int(rng.integers(6, 14))
    X = rng.poisson(2.0, size=(n, m)).astype(float) * (rng.random((n, m)) < 0.7)
    X[:, :] += X.sum(axis=0) == 0  # no empty feature column
    X[X.sum(axis=1) == 0, 0] = 1.0  # no empty row
    tree = learn_tree(
        X,
        [f"f{j}" for j in range(m)],
        TreeParams.from_preset("paper", eps=float(rng.choice([0.1, 1, 5])), scales=int(rng.integers(0, 8))),
    )
    return X, tree


@pytest.mark.parametrize("seed", range(24))
def test_twd_equals_exact_ot_on_tree_metric(seed):
    X, tree = random_case(seed)
    D = tree_wasserstein(tree, X)
    C = path_metric(tree.parent, tree.length, tree.n_leaves)
    H = normalize_rows(X)
    rng = np.random.default_rng(100 + seed)
    pairs = [tuple(rng.choice(X.shape[0], 2, replace=False)) for _ in range(4)]
    for i, j in pairs:
        ot = exact_ot(H[i], H[j], C)
        assert abs(D[i, j] - ot) <= 1e-8 * max(ot, 1e-300), (D[i, j], ot)


def test_twd_equals_pot_emd2():
    ot = pytest.importorskip("ot")
    X, tree = random_case(99)
    D = tree_wasserstein(tree, X)
    C = path_metric(tree.parent, tree.length, tree.n_leaves)
    H = normalize_rows(X)
    for i in range(1, X.shape[0]):
        v = ot.emd2(H[0], H[i], C)
        assert abs(D[0, i] - v) <= 1e-8 * v


def test_twd_equals_unnormalised_weighted_unifrac():
    skbio = pytest.importorskip("skbio")
    from skbio.diversity import beta_diversity

    X, tree = random_case(7)
    import io

    from hdtwd_cli.io._newick import write_newick

    sk_tree = skbio.TreeNode.read(io.StringIO(write_newick(tree)), convert_underscores=False)
    counts = X.astype(np.int64)  # scikit-bio casts to int64: feed integer counts
    dm = beta_diversity(
        "weighted_unifrac",
        counts,
        ids=[f"s{i}" for i in range(len(X))],
        taxa=tree.leaf_names,
        tree=sk_tree,
        normalized=False,
        validate=False,
    )
    D = tree_wasserstein(tree, X)
    assert np.allclose(dm.data, D, rtol=1e-9, atol=0)


def test_general_tree_with_multifurcation():
    # root with three children, one internal node with two leaves: hand-computed TWD
    tree = Tree(
        parent=np.array([4, 4, 5, 5, 5, -1]),
        length=np.array([1.0, 2.0, 3.0, 4.0, 0.5, 0.0]),
        leaf_names=["a", "b", "c", "d"],
    )
    tree.validate()
    X = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])
    D = tree_wasserstein(tree, X)
    assert np.isclose(D[0, 1], 3.0)  # a -> b through node 4
    assert np.isclose(D[0, 2], 1 + 0.5 + 3)  # a -> 4 -> root -> c
    assert np.isclose(D[2, 3], 7.0)
    C = path_metric(tree.parent, tree.length, 4)
    assert np.allclose(D, C)


def test_sparse_input_and_float32():
    X, tree = random_case(5)
    D = tree_wasserstein(tree, X)
    assert np.array_equal(D, tree_wasserstein(tree, sp.csr_matrix(X)))
    D32 = tree_wasserstein(tree, X, dtype="float32")
    assert D32.dtype == np.float32 and np.allclose(D32, D, rtol=1e-5)


def test_cross_distances_match_pairwise():
    X, tree = random_case(11)
    D = tree_wasserstein(tree, X)
    Dq = tree_wasserstein(tree, X, Xq=X[:3])
    assert Dq.shape == (3, X.shape[0])
    assert np.allclose(Dq, D[:3], rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cross_distances_without_the_reference_vectors_held_are_the_same_bits(monkeypatch, dtype):
    """Cross distances against a reference whose tree vectors would not fit the memory share are computed
    against the reference block by block: the bits of the held vectors, in any blocks."""
    from hdtwd_cli.twd import _distance
    from hdtwd_cli.twd._distance import TreeVectors, tree_distance_blocks

    X, tree = random_case(11)
    Xq = np.vstack([X[:3], X[5:9]])
    tv = TreeVectors(tree, X, dtype, extra=Xq)
    held = np.vstack([b for _, b in tree_distance_blocks(tv, Xq, 4, dtype, kernel="dense")])
    monkeypatch.setattr(_distance, "REFERENCE_FRACTION", 0.0)
    for rows in (1, 3, X.shape[0]):
        monkeypatch.setattr(_distance, "REFERENCE_BLOCK_BYTES", rows * tv.dim * 8)
        got = list(tree_distance_blocks(tv, Xq, 4, dtype, kernel="dense"))
        assert [i0 for i0, _ in got] == [0, 4]
        assert np.vstack([b for _, b in got]).tobytes() == held.tobytes()


@pytest.mark.parametrize("form", ["dense", "sparse", "denoised"])
def test_vector_blocks_reuse_one_buffer_and_give_the_rows_bits(form):
    """``TreeVectors.blocks``: each block the bits of ``of_rows`` computed alone, all blocks in one buffer (each
    valid until the next); with ``out``, the blocks are its rows and it holds every vector after the pass;
    ``of_rows`` into given buffers, the bits of fresh ones."""
    import hdtwd_cli as hd

    rng = np.random.default_rng(4)
    X = rng.poisson(rng.gamma(0.5, size=(3, 40))[rng.integers(0, 3, 90)] * 3).astype(float)
    X[X.sum(axis=1) == 0, 0] = 1.0
    params = hd.TreeParams(denoise=5 if form == "denoised" else 0)
    tv = hd.distance_vectors(
        sp.csr_matrix(X) if form == "sparse" else X, feature_names=[f"g{j}" for j in range(40)], params=params
    ).base
    want = tv.of_rows(np.arange(tv.n))
    budget = 7 * tv.dim * 8
    got = [(i0, Y.copy(), Y.ctypes.data) for i0, Y in tv.blocks(budget)]
    assert [i0 for i0, _, _ in got] == list(range(0, tv.n, 7))
    assert np.vstack([Y for _, Y, _ in got]).tobytes() == want.tobytes()
    assert len({at for _, _, at in got}) == 1  # one buffer
    out = np.empty_like(want)
    for i0, Y in tv.blocks(budget, out):
        assert np.shares_memory(Y, out[i0 : i0 + 7])
    assert out.tobytes() == want.tobytes()
    Y, values = tv.buffers(20)
    assert (values is not None) == (form == "denoised")
    idx = np.array([5, 80, 5, 0])
    assert tv.of_rows(idx, out=Y[:4], values=None if values is None else values[:4]).tobytes() == want[idx].tobytes()


@pytest.mark.parametrize("d", [1, 255, 257, 1024, 2500])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gathered_distances_are_the_tiled_kernels_bits(d, dtype):
    """``l1_gather`` (slabs of ``GATHER_COLUMNS`` columns, eight candidates at a time and a remainder) gives
    ``l1_distances``' bits for every pair, with slabs of one pass and of several."""
    from hdtwd_cli.twd import _kernels

    rng = np.random.default_rng(d)
    B = (rng.gamma(0.3, size=(40, d)) * (rng.random((40, d)) < 0.6)).astype(dtype)
    B[7] = B[3]
    A = B[[3, 0, 39, 7, 11]].copy()
    cand = rng.integers(0, 40, size=(5, 13))
    cand[0, :2] = [3, 7]  # identical rows: an exact 0
    want = pairwise_l1(A, B)
    out = np.empty(cand.shape)
    _kernels.l1_gather(A, B, cand, out)
    assert out.tobytes() == np.take_along_axis(want, cand, axis=1).tobytes()
    assert out[0, 0] == 0.0 and out[0, 1] == 0.0


def test_pairwise_l1_matches_scipy():
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(0)
    Y = rng.random((75, 530))
    D = pairwise_l1(Y)
    assert np.allclose(D, cdist(Y, Y, "cityblock"), rtol=1e-12)
    assert np.array_equal(D, D.T) and np.all(np.diag(D) == 0)


def test_zero_row_is_refused_with_its_index():
    X = np.ones((4, 3))
    X[2] = 0
    with pytest.raises(ValueError, match="row 2"):
        normalize_rows(X)


def test_kernel_gives_same_bits_when_compiled_and_when_loaded_from_cache(tmp_path):
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(0)
    np.save(tmp_path / "Y.npy", rng.random((70, 1037)))
    code = (
        "import sys, numpy as np; from hdtwd_cli.twd._kernels import l1_distances; "
        "np.save(sys.argv[2], l1_distances(np.load(sys.argv[1])))"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    for i in range(2):  # first run compiles and writes the cache, second loads it
        subprocess.run([sys.executable, "-c", code, tmp_path / "Y.npy", tmp_path / f"D{i}.npy"], check=True, env=env)
    assert any((tmp_path / "cache").rglob("*.nbi"))
    assert np.array_equal(np.load(tmp_path / "D0.npy"), np.load(tmp_path / "D1.npy"))
    # the cached code is loaded without numba's lowering registries (hdtwd_cli._runtime.jit), and a cache
    # miss after such a load still compiles (numba's compiler loads them itself)
    check = (
        code + "; assert 'numba.np.linalg' not in sys.modules, 'full refresh on a cache load'"
        "; from hdtwd_cli.twd._kernels import row_norms; out = np.empty(3)"
        "; row_norms(np.ones((3, 5), dtype=np.float32), out); assert (out == 5).all()"
        "; assert 'numba.np.linalg' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", check, tmp_path / "Y.npy", tmp_path / "D3.npy"], check=True, env=env)
    assert np.array_equal(np.load(tmp_path / "D0.npy"), np.load(tmp_path / "D3.npy"))
    # and the same bits with LLVM's default vector width (the runs above inherit the full width
    # that conftest asks for, as `hdtwd` does: hdtwd_cli._runtime.simd)
    narrow = {k: v for k, v in env.items() if k != "NUMBA_CPU_FEATURES"}
    subprocess.run([sys.executable, "-c", code, tmp_path / "Y.npy", tmp_path / "D2.npy"], check=True, env=narrow)
    assert np.array_equal(np.load(tmp_path / "D0.npy"), np.load(tmp_path / "D2.npy"))


def test_wide_vectors_only_before_numba_and_only_when_unset():
    import os
    import subprocess
    import sys

    code = (
        "import os, sys; {pre}from hdtwd_cli._runtime.simd import prefer_wide_vectors; "
        "print(prefer_wide_vectors(), os.environ.get('NUMBA_CPU_FEATURES', ''))"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CPU_FEATURES"}

    def run(pre="", **extra):
        out = subprocess.run(
            [sys.executable, "-c", code.format(pre=pre)],
            check=True,
            capture_output=True,
            text=True,
            env=dict(env, **extra),
        ).stdout.split(" ", 1)
        return out[0] == "True", out[1].strip()

    done, features = run()
    assert done == ("+avx512f" in features)  # set exactly when the CPU has AVX-512
    if done:
        assert features.endswith(",-prefer-256-bit")
    assert run(pre="import numba; ") == (False, "")  # numba already configured: left alone
    assert run(NUMBA_CPU_FEATURES="+avx2") == (False, "+avx2")  # the user's choice is kept


@pytest.mark.parametrize("shape", [(0, 5), (1, 5), (37, 1001), (259, 515), (6, 0)])
def test_kernel_edge_shapes_and_bit_identities(shape):
    """Symmetric call, cross call, row blocks, one thread or two: the same bits (any tile edge)."""
    import numba
    from scipy.spatial.distance import cdist

    from hdtwd_cli.twd._kernels import l1_distances

    rng = np.random.default_rng(1)
    A = rng.random(shape)
    D = l1_distances(A)
    assert D.shape == (shape[0], shape[0])
    if shape[0]:
        np.testing.assert_allclose(D, cdist(A, A, "cityblock"), rtol=1e-12, atol=1e-12)
        assert np.array_equal(D, D.T) and np.all(np.diag(D) == 0)
        C = l1_distances(A, A)
        off = ~np.eye(shape[0], dtype=bool)
        assert np.array_equal(C[off], D[off])
        blocks = np.vstack([l1_distances(A[i : i + 50], A) for i in range(0, shape[0], 50)])
        assert np.array_equal(blocks, C)
        before = numba.get_num_threads()
        try:
            numba.set_num_threads(1)
            D1 = l1_distances(A)
        finally:
            numba.set_num_threads(before)
        assert np.array_equal(D1, D)
        # float32 storage: widened exactly, summed in float64
        D32 = l1_distances(A.astype(np.float32))
        np.testing.assert_allclose(
            D32,
            cdist(A.astype(np.float32).astype(np.float64), A.astype(np.float32).astype(np.float64), "cityblock"),
            rtol=1e-12,
            atol=1e-12,
        )


@pytest.mark.parametrize("block", [64, 333, 5000])
def test_streamed_knn_equals_brute_force(block):
    import scipy.sparse as sp

    from hdtwd_cli.evaluate._synthetic import random_binary_tree
    from hdtwd_cli.tree._tree import Tree
    from hdtwd_cli.twd._distance import TreeVectors, nearest_neighbors

    rng = np.random.default_rng(2)
    m = 40
    tree = Tree(
        parent=random_binary_tree(m, 1),
        length=np.r_[rng.uniform(0.1, 1, 2 * m - 2), 0.0],
        leaf_names=[f"f{j}" for j in range(m)],
    )
    counts = rng.poisson(0.4, size=(700, m))
    counts[np.arange(700), np.arange(700) % m] += 1
    Xs = sp.csr_matrix(counts.astype(np.float64))
    Y = TreeVectors(tree, Xs).rows()
    D = pairwise_l1(Y)
    np.fill_diagonal(D, np.inf)
    ref = np.argsort(D, axis=1, kind="stable")[:, :9]
    for src in (TreeVectors(tree, Xs), Y):
        idx, dist = nearest_neighbors(src, 9, block)
        assert np.array_equal(idx, ref)
        assert np.array_equal(dist, np.take_along_axis(D, ref, axis=1))


def test_streamed_knn_never_holds_all_vectors():
    import tracemalloc

    import scipy.sparse as sp

    from hdtwd_cli.evaluate._synthetic import random_binary_tree
    from hdtwd_cli.tree._tree import Tree
    from hdtwd_cli.twd._distance import TreeVectors, nearest_neighbors

    m, n = 300, 6000
    tree = Tree(
        parent=random_binary_tree(m, 0),
        length=np.r_[np.full(2 * m - 2, 0.5), 0.0],
        leaf_names=[f"f{j}" for j in range(m)],
    )
    X = sp.random(n, m, density=0.05, random_state=3, format="csr")
    X = X + sp.csr_matrix((np.ones(n), (np.arange(n), np.arange(n) % m)), shape=(n, m))
    src = TreeVectors(tree, X)
    full = n * src.dim * 8
    nearest_neighbors(src, 5, 256)  # compile
    tracemalloc.start()
    try:
        nearest_neighbors(src, 5, 256)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.3 * full, (peak, full)


def test_compiled_tree_vectors_equal_the_numpy_reference():
    """TreeVectors (compiled per-row pass) == tree_embedding (column passes) on the kept columns, bit for bit."""
    import scipy.sparse as sp

    from hdtwd_cli.twd._distance import TreeVectors, tree_embedding
    from hdtwd_cli.twd._histograms import normalize_rows

    for seed in range(5):
        X, tree = random_case(seed)
        X = X.copy()
        X[:, 0] = 0  # a leaf without mass: its column (and maybe ancestors) is dropped
        X[:, 1] += 1
        for dtype in ("float64", "float32"):
            ref = tree_embedding(tree, normalize_rows(X), dtype)
            ref = ref[:, np.any(ref != 0, axis=0)]
            tv = TreeVectors(tree, sp.csr_matrix(X[2:]), dtype, extra=X[:2])
            Y, Yq = tv.rows(), tv.of(X[:2])
            assert np.array_equal(np.vstack([Yq, Y]), ref)


def test_picked_rows_and_their_quantised_vectors():
    """TreeVectors.of_rows (rows picked by index in the kernel: any order, repeats) equals the rows'
    slices, and TreeVectors.quantised (fused kernel for CSR input) equals _nndescent.quantise of
    them bit for bit, for float64 and float32 counts, sparse and dense; above the NumPy twins' size."""
    from hdtwd_cli.evaluate._synthetic import random_binary_tree
    from hdtwd_cli.twd._distance import TreeVectors
    from hdtwd_cli.twd._kernels import quantise

    rng = np.random.default_rng(3)
    m, n = 400, 3000  # 2,600 picked rows x 799 nodes: above _small.SMALL_WORK, the compiled kernels
    tree = Tree(
        parent=random_binary_tree(m, 1),
        length=np.r_[rng.uniform(0.1, 1, 2 * m - 2), 0.0],
        leaf_names=[f"g{j}" for j in range(m)],
    )
    X = rng.poisson(0.3, size=(n, m)).astype(np.float64)
    X[:, 0] += 1
    pick = np.concatenate([rng.integers(0, n, 2600), [7, 7, 0, n - 1]])
    ref = None
    for data in (sp.csr_matrix(X), X, sp.csr_matrix(X.astype(np.float32)), X.astype(np.float32)):
        tv = TreeVectors(tree, data)
        full = tv.rows()
        assert np.array_equal(tv.of_rows(pick), full[pick])
        assert np.array_equal(tv.rows(10, 50), full[10:50])
        assert np.array_equal(tv.of_rows(pick[:3]), full[pick[:3]])  # the NumPy twin's path too
        top = float(full.max())
        q = tv.quantised(pick, top)
        assert q.dtype == np.uint16 and np.array_equal(q, quantise(full[pick], top))
        assert np.array_equal(tv.quantised(pick, 0.5 * top), quantise(full[pick], 0.5 * top))  # clipped at 65535
        ref = q if ref is None else ref
        assert np.array_equal(q, ref)  # dtype and layout of the input do not matter


def _documents(n, m, seed):
    """Sparse word counts: each document a handful of words from a Zipf-like vocabulary."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, m + 1)
    rows = [rng.choice(m, size=int(rng.integers(1, 12)), p=p / p.sum()) for _ in range(n)]
    X = sp.csr_matrix(
        (np.ones(sum(map(len, rows))), np.concatenate(rows), np.concatenate([[0], np.cumsum([len(r) for r in rows])])),
        shape=(n, m),
    )
    X.sum_duplicates()
    return X


@pytest.mark.parametrize(
    "n,m,dtype",
    [(1, 300, "float64"), (31, 300, "float64"), (97, 3000, "float64"), (70, 3000, "float32"), (65, 520, "float64")],
)
def test_pruned_kernel_gives_the_dense_kernels_bits(n, m, dtype):
    """The block-pair pruned kernel (sparse documents) equals the dense tiled kernel bit for bit:
    all pairs, cross distances, row blocks, one thread or two, float32 storage; and it really prunes."""
    import numba

    from hdtwd_cli.evaluate._synthetic import random_binary_tree
    from hdtwd_cli.twd._distance import TreeVectors, pruned_share, tree_distance_blocks, tree_distances
    from hdtwd_cli.twd._pruned import row_panels

    rng = np.random.default_rng(n)
    X = _documents(n, m, seed=m)
    Xq = _documents(45, m, seed=m + 1)
    parent = random_binary_tree(m, seed=3)
    length = rng.uniform(0.01, 1.0, parent.shape[0])
    length[-1] = 0.0
    length[rng.random(length.shape[0]) < 0.05] = 0.0  # zero-length edges are dropped columns
    tree = Tree(parent, length, [f"w{j}" for j in range(m)])
    tv = TreeVectors(tree, X, dtype, extra=Xq)
    dense = tree_distances(tv, None, dtype, kernel="dense")
    pruned = tree_distances(tv, None, dtype, kernel="pruned")
    assert pruned.dtype == np.dtype(dtype)
    assert np.array_equal(dense, pruned)
    assert np.all(np.diag(pruned) == 0) and np.array_equal(pruned, pruned.T)
    assert np.array_equal(tree_distances(tv, Xq, dtype, kernel="dense"), tree_distances(tv, Xq, dtype, kernel="pruned"))
    for block in (7, 64):
        blocks = np.vstack([b for _, b in tree_distance_blocks(tv, None, block, dtype, kernel="pruned")])
        assert np.array_equal(blocks, dense)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        assert np.array_equal(tree_distances(tv, None, dtype, kernel="pruned"), dense)
    finally:
        numba.set_num_threads(before)
    if n >= 64:  # documents of a few words leave most nodes out of a pair of blocks
        panels = row_panels(tv.x, tree.parent, tv.cols, tree.length, tv.dim)
        assert panels.sizes.max() < tv.dim
        assert pruned_share(tv) < 0.9


def test_pruned_kernel_is_chosen_for_documents_only():
    from hdtwd_cli.evaluate._synthetic import random_binary_tree
    from hdtwd_cli.twd._distance import TreeVectors, pruned_share

    m = 4000
    parent = random_binary_tree(m, seed=1)
    length = np.ones(parent.shape[0])
    length[-1] = 0.0
    tree = Tree(parent, length, [f"w{j}" for j in range(m)])
    assert pruned_share(TreeVectors(tree, _documents(256, m, seed=2))) < 0.5
    dense_counts = np.random.default_rng(0).poisson(1.0, size=(256, m)) + 0.0
    assert pruned_share(TreeVectors(tree, dense_counts)) == 1.0  # dense input: the dense kernel
    assert pruned_share(TreeVectors(tree, sp.csr_matrix(dense_counts))) > 0.9


def test_overlap_form_is_exact_for_identical_rows_and_refuses_negative_input():
    """D = S_a + S_b - 2 sum min(a, b): identical rows give an exact 0, every value is >= 0 (the three
    sums share their order), near-duplicates keep a small absolute error; negative rows are refused."""
    from hdtwd_cli.twd._kernels import l1_distances

    rng = np.random.default_rng(7)
    A = rng.random((40, 700)) * (rng.random((40, 700)) < 0.5)
    A[1] = A[0]
    A[2] = A[0] * (1 + 1e-12)  # a near-duplicate
    D = l1_distances(A)
    C = l1_distances(A[:5], A)
    assert D[0, 1] == 0.0 and C[0, 1] == 0.0 and C[1, 0] == 0.0
    assert np.all(D >= 0) and np.all(C >= 0)
    exact = np.abs(A[0] - A[2]).sum()
    assert abs(D[0, 2] - exact) <= 1e-15 * 4 * A[0].sum()
    with pytest.raises(ValueError, match="non-negative"):
        l1_distances(A - 0.5)


def test_numpy_twins_of_the_kernels_give_the_same_bits(monkeypatch):
    """Small problems skip numba (its first call costs ~0.5 s): the NumPy twins in _small must give
    exactly the compiled kernels' values - row sums, tree vectors, the L1 kernel, the HD-LCA product,
    and so the learned tree and the distances of the whole pipeline."""
    from hdtwd_cli._runtime import twins as _small
    from hdtwd_cli.twd._distance import TreeVectors
    from hdtwd_cli.twd._kernels import l1_distances, norms, row_sums

    rng = np.random.default_rng(5)
    X = rng.poisson(1.5, size=(60, 40)).astype(float) * (rng.random((60, 40)) < 0.6)
    X[X.sum(axis=1) == 0, 0] = 1.0
    X[:, X.sum(axis=0) == 0] = 1.0
    A = rng.random((23, 600)) * (rng.random((23, 600)) < 0.4)
    B = rng.random((17, 600))

    def run():
        tree = learn_tree(X, [f"g{j}" for j in range(40)], TreeParams.from_preset("default"))
        tv = TreeVectors(tree, X)
        tvs = TreeVectors(tree, sp.csr_matrix(X), "float32")
        return [
            row_sums(X),
            row_sums(np.asfortranarray(X)),
            norms(A),
            l1_distances(A),
            l1_distances(A, B),
            l1_distances(A.astype(np.float32), B.astype(np.float32), np.float32),
            tree.parent,
            tree.length,
            tv.rows(),
            tvs.rows(),
            tree_wasserstein(tree, X),
        ]

    small = run()
    monkeypatch.setattr(_small, "SMALL_WORK", 0)
    compiled = run()
    for a, b in zip(small, compiled):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_shared_support_count_is_the_intersection():
    # pruned_fraction's count of the nodes two blocks share: sorted supports without repeats
    from hdtwd_cli.twd._pruned import _shared

    rng = np.random.default_rng(0)
    for _ in range(500):
        p, q = (np.unique(rng.integers(0, rng.integers(1, 300), rng.integers(0, 80))) for _ in range(2))
        assert _shared(p, q) == np.intersect1d(p, q).size == _shared(q, p)
