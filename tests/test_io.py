"""Every input format, Newick round trips (deep caterpillars, awkward labels) and HDF5 layouts."""

import io

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from conftest import caterpillar, run_hdtwd

from hdtwd_cli.errors import InputError
from hdtwd_cli.io import read_matrix
from hdtwd_cli.io._newick import format_label, read_newick, write_newick
from hdtwd_cli.tree._tree import Tree


def write_all_formats(tmp_path, X, features, samples):
    import anndata
    import pandas as pd

    paths = {}
    np.save(tmp_path / "x.npy", X)
    paths["npy"] = tmp_path / "x.npy"
    for ext, sep in (("csv", ","), ("tsv", "\t")):
        p = tmp_path / f"x.{ext}"
        with open(p, "w") as fh:
            fh.write(sep.join(["sample"] + features) + "\n")
            for name, row in zip(samples, X):
                fh.write(sep.join([name] + [repr(float(v)) for v in row]) + "\n")
        paths[ext] = p
    sp.save_npz(tmp_path / "x.npz", sp.csr_matrix(X))
    paths["npz"] = tmp_path / "x.npz"
    scipy.io.mmwrite(str(tmp_path / "x.mtx"), sp.coo_matrix(X))
    paths["mtx"] = tmp_path / "x.mtx"
    ad = anndata.AnnData(X=X.copy(), obs=pd.DataFrame(index=samples), var=pd.DataFrame(index=features))
    ad.write_h5ad(tmp_path / "x.h5ad")
    paths["h5ad"] = tmp_path / "x.h5ad"
    return paths


def test_every_format_gives_the_identical_distance_matrix(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.poisson(1.5, size=(40, 16)).astype(float) * (rng.random((40, 16)) < 0.6)
    X[X.sum(axis=1) == 0, 0] = 1
    X[0, X.sum(axis=0) == 0] = 1
    features = [f"gene_{j}" for j in range(16)]
    samples = [f"cell{i}" for i in range(40)]
    paths = write_all_formats(tmp_path, X, features, samples)
    results = {}
    for fmt, p in paths.items():
        out = tmp_path / f"D_{fmt}.npy"
        run_hdtwd("distance", p, "-o", out, "-q")
        results[fmt] = np.load(out)
    ref = results["npy"]
    assert ref.shape == (40, 40) and ref[0, 1] > 0
    for fmt, D in results.items():
        assert np.array_equal(D, ref), fmt


def test_names_are_read_from_each_format(tmp_path):
    X = np.arange(12, dtype=float).reshape(3, 4) + 1
    paths = write_all_formats(tmp_path, X, ["a", "b", "c", "d"], ["s1", "s2", "s3"])
    for fmt in ("csv", "tsv", "h5ad"):
        md = read_matrix(paths[fmt])
        assert md.feature_names == ["a", "b", "c", "d"] and md.sample_names == ["s1", "s2", "s3"]
        assert np.array_equal(md.X, X)
    md = read_matrix(paths["npz"])
    assert md.is_sparse and md.feature_names == ["f0", "f1", "f2", "f3"]
    t = read_matrix(paths["npy"], transpose=True)
    assert t.shape == (4, 3) and np.array_equal(t.X, X.T)


def test_csv_without_header_or_index(tmp_path):
    p = tmp_path / "plain.csv"
    p.write_text("1,2,3\n4,5,6\n")
    md = read_matrix(p)
    assert md.shape == (2, 3) and md.feature_names == ["f0", "f1", "f2"]


def test_duplicate_feature_names_are_made_unique_with_a_warning(tmp_path):
    p = tmp_path / "dup.csv"
    p.write_text("g,g,h,g\n1,2,3,4\n")
    with pytest.warns(UserWarning, match="duplicate"):
        md = read_matrix(p)
    assert md.feature_names == ["g", "g-1", "h", "g-2"]


@pytest.mark.parametrize(
    "content, message",
    [
        ("a,b\n1,x\n", "not a number"),
        ("a,b\n1,2\n3\n", "ragged"),
        ("a,b\n1,-2\n", "negative"),
        ("a,b\n1,nan\n", "NaN"),
    ],
)
def test_bad_csv_is_named(tmp_path, content, message):
    p = tmp_path / "bad.csv"
    p.write_text(content)
    with pytest.raises(InputError, match=message) as e:
        read_matrix(p)
    assert str(p) in str(e.value)


def canonical(tree, order):
    """Numbering-free form: node key (smallest leaf rank below, leaf count) -> (parent key, length).

    Two distinct nodes of one tree never share a key (nodes sharing a leaf are nested, so differ
    in size); iterative, O(nodes).
    """
    rank = {name: i for i, name in enumerate(order)}
    n, L = tree.n_nodes, tree.n_leaves
    low = np.full(n, np.iinfo(np.int64).max)
    size = np.zeros(n, dtype=np.int64)
    low[:L] = [rank[s] for s in tree.leaf_names]
    size[:L] = 1
    for c in range(n - 1):
        p = tree.parent[c]
        low[p] = min(low[p], low[c])
        size[p] += size[c]
    out = {}
    for v in range(n):
        p = tree.parent[v]
        out[(int(low[v]), int(size[v]))] = (None if p < 0 else (int(low[p]), int(size[p])), float(tree.length[v]))
    return out


def test_caterpillar_20000_round_trips_through_our_reader():
    tree = caterpillar(20000)
    tree.validate()
    assert tree.depth().max() >= 19999
    text = write_newick(tree)
    back = Tree.from_record(read_newick(text))
    back.validate()
    assert sorted(back.leaf_names) == sorted(tree.leaf_names)
    assert canonical(back, tree.leaf_names) == canonical(tree, tree.leaf_names)
    assert back.depth().max() == tree.depth().max()


def test_caterpillar_20000_reads_in_scikit_bio():
    skbio = pytest.importorskip("skbio")
    m = 20000
    tree = caterpillar(m)
    sk = skbio.TreeNode.read(io.StringIO(write_newick(tree)), convert_underscores=False)
    tips = {t.name: t for t in sk.tips()}
    assert len(tips) == m
    # topology and lengths: every tip's number of ancestors and its distance to the root
    depth = tree.depth()
    root_dist = np.zeros(tree.n_nodes)
    for v in range(tree.n_nodes - 2, -1, -1):
        root_dist[v] = root_dist[tree.parent[v]] + tree.length[v]
    for i in (0, 1, 2, 500, m // 2, m - 2, m - 1):
        node, k, acc = tips[f"t{i}"], 0, 0.0
        while node.parent is not None:
            acc += node.length
            node, k = node.parent, k + 1
        assert k == depth[i]
        assert np.isclose(acc, root_dist[i], rtol=1e-12)


AWKWARD = [
    "plain",
    "with space",
    "under_score",
    "o'clock",
    "a(b)",
    "x:y",
    "semi;colon",
    "comma,name",
    "[bracket]",
    "ünïcode",
    "1e-5",
    "-",
]


def test_awkward_labels_are_quoted_and_round_trip():
    m = len(AWKWARD)
    tree = caterpillar(m)
    tree.leaf_names = AWKWARD
    assert format_label("plain") == "plain"
    assert format_label("o'clock") == "'o''clock'"
    assert format_label("under_score") == "'under_score'"
    text = write_newick(tree)
    back = Tree.from_record(read_newick(text))
    assert sorted(back.leaf_names) == sorted(AWKWARD)
    assert canonical(back, AWKWARD) == canonical(tree, AWKWARD)


def test_awkward_labels_read_in_biopython_and_scikit_bio():
    Phylo = pytest.importorskip("Bio.Phylo")
    skbio = pytest.importorskip("skbio")
    tree = caterpillar(len(AWKWARD))
    tree.leaf_names = AWKWARD
    text = write_newick(tree)
    bp = Phylo.read(io.StringIO(text), "newick")
    assert sorted(t.name for t in bp.get_terminals()) == sorted(AWKWARD)
    sk = skbio.TreeNode.read(io.StringIO(text), convert_underscores=False)
    assert sorted(t.name for t in sk.tips()) == sorted(AWKWARD)


@pytest.mark.parametrize(
    "text, message",
    [
        ("(a:1,b:2", "closing"),
        ("(a:1,a:2);", "more than once"),
        ("(a:1,:2);", "no name"),
        ("(a:1,b);", "no branch length"),
        ("(a:1,b:x);", "not a number"),
        ("((a:1,b:1):1;", "unbalanced"),
        ("(a:(b:1,c:1):1,d:1);", "branch length is expected"),
    ],
)
def test_bad_newick_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        Tree.from_record(read_newick(text))


def test_newick_with_comments_and_multifurcation():
    t = Tree.from_record(read_newick("[comment]((a:1,b:2,c:3)90:0.5,d:4)root;"))
    t.validate()
    assert t.leaf_names == ["a", "b", "c", "d"]
    assert t.n_nodes == 6 and t.parent[-1] == -1
    assert np.allclose(t.length[:4], [1, 2, 3, 4])


def test_npy_written_in_place_is_np_save_and_atomic(tmp_path):
    from hdtwd_cli.io import _output as output

    D = np.random.default_rng(0).random((37, 53))
    np.save(tmp_path / "ref.npy", D)
    output.write_npy_in_place(str(tmp_path / "d.npy"), D.shape, D.dtype, lambda out: out.__setitem__(..., D))
    assert (tmp_path / "d.npy").read_bytes() == (tmp_path / "ref.npy").read_bytes()
    output.write_npy_in_place(str(tmp_path / "e.npy"), (0, 4), np.float32, lambda out: None)
    assert np.load(tmp_path / "e.npy").shape == (0, 4)

    def fail(out):
        out[0] = 1.0
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        output.write_npy_in_place(str(tmp_path / "f.npy"), D.shape, D.dtype, fail)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.npy", "e.npy", "ref.npy"]  # no partial file


def _newick_variants(rng: np.random.Generator, base: str) -> list[str]:
    """``base`` and damaged copies: characters dropped, doubled, swapped or replaced by delimiters."""
    out = [base]
    alphabet = "(),:;ab1.-e"
    for _ in range(300):
        s = list(base)
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(len(s)))
            kind = int(rng.integers(4))
            if kind == 0:
                del s[i]
            elif kind == 1:
                s.insert(i, s[i])
            elif kind == 2:
                s[i] = alphabet[int(rng.integers(len(alphabet)))]
            else:
                j = int(rng.integers(len(s)))
                s[i], s[j] = s[j], s[i]
        out.append("".join(s))
    return out


def test_plain_newick_scan_gives_the_general_readers_record_or_defers():
    """The compiled scan of plain Newick text returns the general reader's record bit for bit, and
    ``None`` wherever that reader raises: on written trees, deep chains and damaged copies."""
    from hdtwd_cli.io._newick import NewickError, _read_general, read_plain_newick

    rng = np.random.default_rng(5)
    bases = [
        "((a:1,b:2,c:3)90:0.5,d:4)root;",
        "((a:1,b:2):0.5,(c:1e-3,d:4):2):0;",
        write_newick(caterpillar(300)),
        write_newick(Tree.from_record(read_newick("(((x1:1,x2:2):1,x3:3):1,(x4:4,x5:5):1);"))),
    ]
    accepted = deferred = 0
    for base in bases:
        for text in _newick_variants(rng, base):
            try:
                want = _read_general(text)
            except NewickError:
                want = None
            got = read_plain_newick(text)
            if got is None:
                deferred += 1
                continue
            accepted += 1
            assert want is not None, text
            assert got.leaf_names == want.leaf_names, text
            assert got.parent.tobytes() == want.parent.tobytes(), text
            assert got.length.tobytes() == want.length.tobytes(), text
    assert accepted > 100 and deferred > 100  # both sides of the scan exercised


def test_global_heap_walk_passes_valid_files_and_refuses_a_step_of_zero(tmp_path):
    """Many strings over several heap collections, and the heap's signature inside a dataset's
    data, pass; the same file with one free-space size set to 0 (libhdf5 would loop) is refused."""
    import h5py
    from bad_inputs import _zero_free_space

    from hdtwd_cli.io._guard import check_global_heaps, open_hdf5

    p = tmp_path / "strings.h5"
    names = [f"feature-{i:06d}-" + "x" * (i % 37) for i in range(30_000)]
    with h5py.File(p, "w") as f:
        f["names"] = np.array(names, dtype=object)
        f["names"].attrs["encoding-type"] = "string-array"
        f["bytes"] = np.frombuffer(b"GCOL\x01\x00\x00\x00" + b"\xff" * 8 + b"GCOL\x01\x00\x00\x00" + bytes(8), np.uint8)
    assert p.read_bytes().count(b"GCOL\x01\x00\x00\x00") > 3  # several collections, and the decoys
    check_global_heaps(str(p))
    with open_hdf5(str(p)) as f:
        assert [s.decode() for s in f["names"][()]] == names
    _zero_free_space(p)
    with pytest.raises(InputError, match="would hang the HDF5 library"):
        check_global_heaps(str(p))
