"""The ``hdtwd`` command through real subprocesses: round trips, output formats, errors."""

import hashlib

import h5py
import numpy as np
import pytest
from conftest import SAMPLE, run_hdtwd


def planted_csv(tmp_path, perm=None, name="x.csv"):
    from hdtwd_cli.evaluate._synthetic import planted_counts

    X, _, _ = planted_counts(60, 20, 3, seed=4)
    features = [f"gene{j}" for j in range(X.shape[1])]
    if perm is not None:
        X, features = X[:, perm], [features[j] for j in perm]
    p = tmp_path / name
    with open(p, "w") as fh:
        fh.write(",".join(["cell"] + features) + "\n")
        for i, row in enumerate(X):
            fh.write(",".join([f"c{i}"] + [str(int(v)) for v in row]) + "\n")
    return p


def test_save_tree_then_reuse_gives_identical_distances(tmp_path):
    x = planted_csv(tmp_path)
    run_hdtwd("distance", x, "--save-tree", tmp_path / "T.h5", "-o", tmp_path / "D1.npy")
    run_hdtwd("distance", x, "--tree", tmp_path / "T.h5", "-o", tmp_path / "D2.npy")
    D1, D2 = np.load(tmp_path / "D1.npy"), np.load(tmp_path / "D2.npy")
    assert D1.shape == (60, 60) and D1.max() > 0
    assert np.array_equal(D1, D2)
    # same data with the feature columns shuffled: mapped onto the tree by name
    perm = np.random.default_rng(0).permutation(20)
    xs = planted_csv(tmp_path, perm, "shuffled.csv")
    run_hdtwd("distance", xs, "--tree", tmp_path / "T.h5", "-o", tmp_path / "D3.npy")
    assert np.array_equal(D1, np.load(tmp_path / "D3.npy"))


def test_embed_decode_distance_chain_equals_one_shot(tmp_path):
    x = SAMPLE / "produce.csv"
    # a Newick file carries no feature weights: the chain is unweighted here (weighted below)
    run_hdtwd("embed", x, "-o", tmp_path / "E.h5", "--eps", "0.5", "--scales", "4", "--weighting", "none")
    run_hdtwd("decode-tree", tmp_path / "E.h5", "-o", tmp_path / "T.h5", "--newick", tmp_path / "T.nwk")
    run_hdtwd("distance", x, "--tree", tmp_path / "T.h5", "-o", tmp_path / "D1.npy")
    run_hdtwd("distance", x, "--tree", tmp_path / "T.nwk", "-o", tmp_path / "D2.npy")
    run_hdtwd("distance", x, "--eps", "0.5", "--scales", "4", "--weighting", "none", "-o", tmp_path / "D3.npy")
    D1 = np.load(tmp_path / "D1.npy")
    assert np.array_equal(D1, np.load(tmp_path / "D3.npy"))
    # with the default (idf) weights, the .h5 chain still equals the one-shot command
    run_hdtwd("embed", x, "-o", tmp_path / "Ew.h5", "--eps", "0.5", "--scales", "4", "--weighting", "idf")
    run_hdtwd("decode-tree", tmp_path / "Ew.h5", "-o", tmp_path / "Tw.h5")
    run_hdtwd("distance", x, "--tree", tmp_path / "Tw.h5", "-o", tmp_path / "D4.npy")
    run_hdtwd("distance", x, "--eps", "0.5", "--scales", "4", "--weighting", "idf", "-o", tmp_path / "D5.npy")
    assert np.array_equal(np.load(tmp_path / "D4.npy"), np.load(tmp_path / "D5.npy"))
    assert not np.allclose(np.load(tmp_path / "D4.npy"), D1)
    # Newick keeps 17 significant digits: equal to rounding
    assert np.allclose(D1, np.load(tmp_path / "D2.npy"), rtol=1e-13, atol=0)
    with h5py.File(tmp_path / "E.h5") as f:
        assert f.attrs["encoding-type"] == "hdtwd-embedding"
        assert f["embedding/psi"].shape == (5, 8, 8)
        assert f["params"].attrs["scales"] == 4
        assert f["diffusion"].attrs["eps"] > 0
        assert f.attrs["input_fingerprint"].startswith("sha256:")
        for g in ("params", "features", "diffusion", "embedding"):
            assert "encoding-version" in f[g].attrs
    with h5py.File(tmp_path / "T.h5") as f:
        assert f["tree/parent"].shape == (15,) and f["tree/children"].shape == (7, 2)
        assert [s.decode() for s in f["tree/leaf_names"][()]][0] == "apple"


def test_output_formats(tmp_path):
    x = SAMPLE / "produce.csv"
    run_hdtwd("distance", x, "-o", tmp_path / "D.npy")
    run_hdtwd("distance", x, "-o", tmp_path / "D.h5")
    run_hdtwd("distance", x, "-o", tmp_path / "D.csv")
    run_hdtwd("distance", x, "-o", tmp_path / "D32.npy", "--dtype", "float32")
    D = np.load(tmp_path / "D.npy")
    with h5py.File(tmp_path / "D.h5") as f:
        assert np.array_equal(f["distances"][()], D)
        assert f["row_names"][0].decode() == "doc000"
    rows = (tmp_path / "D.csv").read_text().splitlines()
    assert rows[0].split(",")[1] == "doc000" and len(rows) == D.shape[0] + 1
    Dc = np.array([[float(v) for v in r.split(",")[1:]] for r in rows[1:]])
    assert np.array_equal(Dc, D)
    D32 = np.load(tmp_path / "D32.npy")
    assert D32.dtype == np.float32 and np.allclose(D32, D, rtol=1e-6)


def test_same_input_gives_same_bytes(tmp_path):
    x = SAMPLE / "cells.h5ad"
    digests = []
    for k in range(2):
        run_hdtwd(
            "distance",
            x,
            "-o",
            tmp_path / f"D{k}.npy",
            "--save-tree",
            tmp_path / f"T{k}.h5",
            "--newick",
            tmp_path / f"T{k}.nwk",
        )
        digests.append(
            [
                hashlib.sha256((tmp_path / f"{s}{k}.{e}").read_bytes()).hexdigest()
                for s, e in (("D", "npy"), ("T", "h5"), ("T", "nwk"))
            ]
        )
    assert digests[0] == digests[1]
    for k in range(2):
        run_hdtwd("embed", x, "-o", tmp_path / f"E{k}.h5", "--scales", "3")
    assert (tmp_path / "E0.h5").read_bytes() == (tmp_path / "E1.h5").read_bytes()


def test_sparse_sample_data_runs(tmp_path):
    run_hdtwd("distance", SAMPLE / "corpus.npz", "-o", tmp_path / "D.npy")
    run_hdtwd("distance", SAMPLE / "corpus.mtx", "-o", tmp_path / "D2.npy")
    assert np.array_equal(np.load(tmp_path / "D.npy"), np.load(tmp_path / "D2.npy"))


def test_tree_missing_features_is_an_error_naming_them(tmp_path):
    x = planted_csv(tmp_path)
    run_hdtwd("distance", SAMPLE / "produce.csv", "--save-tree", tmp_path / "T.h5", "-o", tmp_path / "D.npy")
    out = tmp_path / "D2.npy"
    proc = run_hdtwd("distance", x, "--tree", tmp_path / "T.h5", "-o", out, check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 2
    assert "gene0" in err and "are not the tree's leaf names" in err and str(x) in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["distance", "missing.csv", "-o", "{tmp}/D.npy"], "no such file"),
        (["distance", "{tmp}", "-o", "{tmp}/D.npy"], "is a directory"),
        (["distance", "{sample}/produce.csv", "-o", "{tmp}/D.txt"], "unknown output type"),
        (["distance", "{sample}/produce.csv", "-o", "{sample}/produce.csv"], "overwrite the input"),
        (["distance", "{sample}/produce.csv", "-o", "{tmp}/nodir/D.npy"], "does not exist"),
        (["distance", "{zero}", "-o", "{tmp}/D.npy"], "row 1 sums to zero"),
        (["distance", "{sample}/cells.h5ad", "--layer", "counts", "-o", "{tmp}/D.npy"], "no layer 'counts'"),
        (["decode-tree", "{sample}/produce.csv", "-o", "{tmp}/T.h5"], "not an HDF5 file"),
        (
            ["distance", "{sample}/produce.csv", "--tree", "{sample}/cells.h5ad", "-o", "{tmp}/D.npy"],
            "unknown tree file type",
        ),
        (
            ["distance", "{sample}/produce.csv", "--tree", "{notree}", "-o", "{tmp}/D.npy"],
            "expected an hdtwd 'hdtwd-tree' file",
        ),
    ],
)
def test_bad_input_gives_one_line_and_no_output(tmp_path, args, needle):
    zero = tmp_path / "zero.csv"
    zero.write_text("a,b,c\n1,2,3\n0,0,0\n4,5,6\n")
    notree = tmp_path / "cells.h5"
    notree.write_bytes((SAMPLE / "cells.h5ad").read_bytes())
    args = [a.format(tmp=tmp_path, sample=SAMPLE, zero=zero, notree=notree) for a in args]
    proc = run_hdtwd(*args, check=False)
    err = proc.stderr.decode()
    assert proc.returncode in (2, 3), err
    assert needle in err, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "D.npy").exists() and not (tmp_path / "T.h5").exists()
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())


def test_tree_options_conflict_with_given_tree(tmp_path):
    run_hdtwd("distance", SAMPLE / "produce.csv", "--save-tree", tmp_path / "T.h5", "-o", tmp_path / "D.npy")
    proc = run_hdtwd(
        "distance",
        SAMPLE / "produce.csv",
        "--tree",
        tmp_path / "T.h5",
        "--eps",
        "2",
        "-o",
        tmp_path / "D2.npy",
        check=False,
    )
    assert proc.returncode == 2 and "--eps" in proc.stderr.decode()


def test_help_and_version():
    out = run_hdtwd("--help").stdout.decode()
    for cmd in ("embed", "decode-tree", "distance"):
        assert cmd in out
    assert run_hdtwd("--version").stdout.decode().startswith("hdtwd ")


def test_start_up_imports_no_numerical_stack():
    """`hdtwd --version` loads neither numpy, scipy, numba, anndata nor rich (`--help` draws with rich).

    The command line declares its options from :mod:`hdtwd_cli._defaults`; the numerical modules are
    imported by the command bodies. Checked in a fresh interpreter, where nothing else imported them.
    """
    import subprocess
    import sys

    code = (
        "import atexit, sys\nfrom hdtwd_cli.cli._app import main\nsys.argv = ['hdtwd', '--version']\n"
        "atexit.register(lambda: sys.stderr.write(repr(sorted(m for m in ('numpy', 'scipy', 'numba', "
        "'anndata', 'h5py', 'rich') if m in sys.modules))))\n"
        "main()\n"
    )  # main() ends the process (cli._exit), after the atexit handlers
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.startswith("hdtwd "), r.stdout
    assert r.stderr == "[]", r.stderr


def test_small_problems_never_load_numba(tmp_path):
    """A small input takes the NumPy twins of the kernels, so numba is never imported (hdtwd_cli._runtime.jit),
    nor LLVM (hdtwd_cli._runtime.simd) nor scipy.cluster (complete linkage's twin); and the fast exit of
    `hdtwd` (no interpreter teardown) still runs the atexit handlers and flushes."""
    import subprocess
    import sys

    code = (
        "import atexit, sys\nfrom hdtwd_cli.cli._app import main\n"
        "sys.argv = ['hdtwd', 'distance', sys.argv[1], '-o', sys.argv[2], '-q']\n"
        "atexit.register(lambda: sys.stderr.write(repr(sorted(m for m in ('numba', 'llvmlite', "
        "'scipy.cluster') if m in sys.modules))))\n"
        "main()\n"
    )
    out = tmp_path / "D.npy"
    r = subprocess.run(
        [sys.executable, "-c", code, str(SAMPLE / "produce.csv"), str(out)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and r.stderr == "[]", r.stderr
    D = np.load(out)
    assert D.shape[0] == D.shape[1] > 2 and np.all(np.diag(D) == 0) and np.array_equal(D, D.T) and D.max() > 0


def test_dense_npy_run_on_a_given_tree_loads_no_hdf5_or_rich(tmp_path):
    """`hdtwd distance X.npy --tree T.nwk -q` on dense data imports neither h5py nor rich (nothing to
    print), and its kernels come from numba's cache without numba's lowering registries
    (hdtwd_cli._runtime.jit); the result equals the API's."""
    import subprocess
    import sys

    from hdtwd_cli import Tree, distances, learn_tree
    from hdtwd_cli.io import write_newick_file

    rng = np.random.default_rng(0)
    X = rng.poisson(1.0, (400, 60)).astype(float) + 0.5  # 400 x 60: large enough for numba's kernels
    np.save(tmp_path / "X.npy", X)
    tree = learn_tree(X, [f"f{j}" for j in range(60)])
    tree.feature_weights = None  # Newick holds none
    write_newick_file(str(tmp_path / "T.nwk"), tree)
    mods = "('h5py', 'rich', 'numba.np.linalg', 'numba')"
    code = (
        "import atexit, sys\nfrom hdtwd_cli.cli._app import main\n"
        "sys.argv = ['hdtwd', 'distance', sys.argv[1], '--tree', sys.argv[2], '-o', sys.argv[3], '-q']\n"
        f"atexit.register(lambda: sys.stderr.write(repr([m for m in {mods} if m in sys.modules])))\n"
        "main()\n"
    )
    out = tmp_path / "D.npy"
    for _ in range(2):  # the first run may compile (a cache miss loads numba's registries itself)
        r = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "X.npy"), str(tmp_path / "T.nwk"), str(out)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
    assert r.stderr == "['numba']", r.stderr
    np.testing.assert_array_equal(np.load(out), distances(X, Tree.read(str(tmp_path / "T.nwk"))))


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.2"])
def test_test_size_has_one_bound_and_one_line(value):
    """--test-size is checked once, by the API's bound (0 < test_size < 1), whatever the value."""
    r = run_hdtwd(
        "classify", SAMPLE / "produce.csv", "--labels", SAMPLE / "produce_labels.txt", "--test-size", value, check=False
    )
    assert r.returncode == 2
    assert r.stderr.decode() == "hdtwd: error: --test-size must be between 0 and 1\n"
