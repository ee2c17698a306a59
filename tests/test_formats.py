"""Inputs people receive: 10x directories and .h5 files, gzip-compressed tables, and the CSV name rules.

The 10x readers are checked against scanpy's (``read_10x_mtx``, ``read_10x_h5``) on fixtures written
here, and every form of the same counts must give the bit-identical distance matrix.
"""

import gzip
import os

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from conftest import run_hdtwd

from hdtwd_cli.errors import InputError, ParameterError
from hdtwd_cli.io import read_matrix

N_CELLS, N_GENES, N_AB = 30, 12, 2


def _counts() -> np.ndarray:
    """Cells x (genes + antibody features) integer counts; every cell and gene has mass."""
    rng = np.random.default_rng(7)
    X = rng.poisson(1.2, size=(N_CELLS, N_GENES + N_AB)) * (rng.random((N_CELLS, N_GENES + N_AB)) < 0.5)
    X[np.arange(N_CELLS), np.arange(N_CELLS) % N_GENES] += 1
    return X.astype(np.int64)


def _features():
    ids = [f"ENSG{j:05d}" for j in range(N_GENES)] + [f"AB{j}" for j in range(N_AB)]
    symbols = [f"GENE{j}" for j in range(N_GENES)] + [f"CD{j}" for j in range(N_AB)]
    symbols[5] = "GENE3"  # a duplicated symbol, as real annotations have
    types = ["Gene Expression"] * N_GENES + ["Antibody Capture"] * N_AB
    return ids, symbols, types


def _gz_text(path, lines):
    with gzip.open(path, "wt") as fh:
        fh.write("".join(ln + "\n" for ln in lines))


def write_10x_dir(folder, prefix="", v2=False):
    """A Cell Ranger matrix directory (v3: gzipped, feature types; v2: plain genes.tsv, no antibodies)."""
    os.makedirs(folder, exist_ok=True)
    X = _counts()
    ids, symbols, types = _features()
    barcodes = [f"AAAC{i:04d}-1" for i in range(N_CELLS)]
    if v2:
        X, ids, symbols = X[:, :N_GENES], ids[:N_GENES], symbols[:N_GENES]
        scipy.io.mmwrite(os.path.join(folder, prefix + "matrix.mtx"), sp.coo_matrix(X.T))
        with open(os.path.join(folder, prefix + "genes.tsv"), "w") as fh:
            fh.write("".join(f"{i}\t{s}\n" for i, s in zip(ids, symbols)))
        with open(os.path.join(folder, prefix + "barcodes.tsv"), "w") as fh:
            fh.write("".join(b + "\n" for b in barcodes))
        return folder
    mtx = os.path.join(folder, prefix + "matrix.mtx")
    scipy.io.mmwrite(mtx, sp.coo_matrix(X.T), field="integer")
    with open(mtx, "rb") as src, gzip.open(mtx + ".gz", "wb") as dst:
        dst.write(src.read())
    os.unlink(mtx)
    _gz_text(
        os.path.join(folder, prefix + "features.tsv.gz"), [f"{i}\t{s}\t{t}" for i, s, t in zip(ids, symbols, types)]
    )
    _gz_text(os.path.join(folder, prefix + "barcodes.tsv.gz"), barcodes)
    return folder


def write_10x_h5(path):
    import h5py

    X = sp.csr_matrix(_counts())  # cells x features = 10x's CSC of features x cells
    ids, symbols, types = _features()
    with h5py.File(path, "w") as f:
        g = f.create_group("matrix")
        g["data"] = X.data.astype(np.int32)
        g["indices"] = X.indices.astype(np.int64)
        g["indptr"] = X.indptr.astype(np.int64)
        g["shape"] = np.array([N_GENES + N_AB, N_CELLS], dtype=np.int32)
        g["barcodes"] = np.array([f"AAAC{i:04d}-1".encode() for i in range(N_CELLS)])
        ft = g.create_group("features")
        ft["id"] = np.array([s.encode() for s in ids])
        ft["name"] = np.array([s.encode() for s in symbols])
        ft["feature_type"] = np.array([s.encode() for s in types])
        ft["genome"] = np.array([b"GRCh38"] * len(ids))
        ft["_all_tag_keys"] = np.array([b"genome"])
    return path


@pytest.mark.parametrize("var_names", ["gene_symbols", "gene_ids"])
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_10x_directory_matches_scanpy(tmp_path, var_names):
    sc = pytest.importorskip("scanpy")
    folder = write_10x_dir(str(tmp_path / "filtered_feature_bc_matrix"))
    ref = sc.read_10x_mtx(folder, var_names=var_names)
    for path in (folder, os.path.join(folder, "matrix.mtx.gz")):  # the directory, or its matrix file
        md = read_matrix(path, var_names=var_names)
        assert md.is_sparse and md.shape == (N_CELLS, N_GENES)  # antibody capture dropped, as scanpy does
        assert np.array_equal(md.X.toarray(), ref.X.toarray())
        assert md.sample_names == list(ref.obs_names)
        assert md.feature_names == list(ref.var_names)  # duplicates made unique the same way (GENE3-1)
    assert ("GENE3-1" in md.feature_names) == (var_names == "gene_symbols")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_10x_prefixed_and_v2_directories(tmp_path):
    sc = pytest.importorskip("scanpy")
    geo = write_10x_dir(str(tmp_path / "geo"), prefix="GSM1_")
    md = read_matrix(geo)
    ref = sc.read_10x_mtx(geo, prefix="GSM1_")
    assert np.array_equal(md.X.toarray(), ref.X.toarray()) and md.feature_names == list(ref.var_names)
    v2 = write_10x_dir(str(tmp_path / "v2"), v2=True)
    md2 = read_matrix(v2)
    ref2 = sc.read_10x_mtx(v2)
    assert np.array_equal(md2.X.toarray(), ref2.X.toarray()) and md2.feature_names == list(ref2.var_names)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_10x_h5_matches_scanpy(tmp_path):
    sc = pytest.importorskip("scanpy")
    path = write_10x_h5(str(tmp_path / "filtered_feature_bc_matrix.h5"))
    ref = sc.read_10x_h5(path)
    ref.var_names_make_unique()  # read_10x_h5 leaves duplicates (with a warning); hdtwd makes them unique
    md = read_matrix(path)
    assert md.is_sparse and np.array_equal(md.X.toarray(), ref.X.toarray())
    assert md.sample_names == list(ref.obs_names) and md.feature_names == list(ref.var_names)
    ids = read_matrix(path, var_names="gene_ids").feature_names
    assert ids == [f"ENSG{j:05d}" for j in range(N_GENES)]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_10x_h5_v2_matches_scanpy(tmp_path):
    """Cell Ranger 2's layout: one group per genome with genes / gene_names, no feature types."""
    sc = pytest.importorskip("scanpy")
    import h5py

    X = sp.csr_matrix(_counts()[:, :N_GENES])
    ids, symbols, _ = _features()
    path = str(tmp_path / "v2.h5")
    with h5py.File(path, "w") as f:
        g = f.create_group("GRCh38")
        g["data"] = X.data.astype(np.int32)
        g["indices"] = X.indices.astype(np.int64)
        g["indptr"] = X.indptr.astype(np.int64)
        g["shape"] = np.array([N_GENES, N_CELLS], dtype=np.int32)
        g["barcodes"] = np.array([f"AAAC{i:04d}-1".encode() for i in range(N_CELLS)])
        g["genes"] = np.array([s.encode() for s in ids[:N_GENES]])
        g["gene_names"] = np.array([s.encode() for s in symbols[:N_GENES]])
    ref = sc.read_10x_h5(path)
    ref.var_names_make_unique()
    md = read_matrix(path)
    assert md.is_sparse and np.array_equal(md.X.toarray(), ref.X.toarray())
    assert md.sample_names == list(ref.obs_names) and md.feature_names == list(ref.var_names)
    assert read_matrix(path, var_names="gene_ids").feature_names == ids[:N_GENES]


def write_10x_h5_genomes(path, genomes=("hg19_chr21", "mm10_chr21")):
    """Cell Ranger 2 with one group per genome (scanpy's legacy ``multiple_genomes.h5`` layout)."""
    import h5py

    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        for k, gname in enumerate(genomes):
            n_genes = N_GENES + 3 * k
            X = sp.csr_matrix(rng.poisson(1.0, size=(N_CELLS, n_genes)) + (np.arange(n_genes) == k))
            g = f.create_group(gname)
            g["data"] = X.data.astype(np.int32)
            g["indices"] = X.indices.astype(np.int64)
            g["indptr"] = X.indptr.astype(np.int64)
            g["shape"] = np.array([n_genes, N_CELLS], dtype=np.int32)
            g["barcodes"] = np.array([f"AAAC{i:04d}-1".encode() for i in range(N_CELLS)])
            g["genes"] = np.array([f"{gname}_ENS{j}".encode() for j in range(n_genes)])
            g["gene_names"] = np.array([f"{gname}_G{j}".encode() for j in range(n_genes)])
    return path


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_10x_h5_genomes_as_scanpy(tmp_path):
    """A Cell Ranger 2 file with two genomes is a 10x file; --genome picks one as scanpy's genome=."""
    sc = pytest.importorskip("scanpy")
    path = write_10x_h5_genomes(str(tmp_path / "multiple_genomes.h5"))
    with pytest.raises(InputError, match=r"holds 2 genomes \(hg19_chr21, mm10_chr21\)") as e:
        read_matrix(path)
    from hdtwd_cli.cli._options import flag

    assert "choose one with --genome NAME" in e.value.worded(flag)
    for genome in ("hg19_chr21", "mm10_chr21"):
        ref = sc.read_10x_h5(path, genome=genome)
        md = read_matrix(path, genome=genome)
        assert np.array_equal(md.X.toarray(), ref.X.toarray())
        assert md.feature_names == list(ref.var_names) and md.sample_names == list(ref.obs_names)
    with pytest.raises(InputError, match="no genome 'GRCh38'"):
        read_matrix(path, genome="GRCh38")
    # Cell Ranger 3+: every feature by default, a genome's own with --genome (as scanpy)
    v3 = write_10x_h5(str(tmp_path / "v3.h5"))
    assert read_matrix(v3, genome="GRCh38").shape == read_matrix(v3).shape
    with pytest.raises(InputError, match="no features of genome 'mm10'"):
        read_matrix(v3, genome="mm10")
    with pytest.raises(ParameterError, match="applies to Cell Ranger .h5 files only"):
        read_matrix(write_10x_dir(str(tmp_path / "d")), genome="GRCh38")
    # the command line
    out = tmp_path / "D.npy"
    run_hdtwd("distance", path, "--genome", "mm10_chr21", "-o", out)
    assert np.load(out).shape == (N_CELLS, N_CELLS)
    proc = run_hdtwd("distance", path, "-o", out.with_name("E.npy"), check=False)
    assert proc.returncode == 2 and "choose one with --genome NAME" in proc.stderr.decode()


def test_10x_errors_name_the_problem(tmp_path):
    folder = write_10x_dir(str(tmp_path / "m"))
    os.unlink(os.path.join(folder, "barcodes.tsv.gz"))
    with pytest.raises(InputError, match="without barcodes.tsv"):
        read_matrix(folder)
    np.save(tmp_path / "x.npy", np.ones((3, 3)))
    with pytest.raises(ParameterError, match="10x inputs only"):
        read_matrix(tmp_path / "x.npy", var_names="gene_ids")
    import h5py

    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["parent"] = np.arange(3)
    with pytest.raises(InputError, match="not a 10x .h5"):
        read_matrix(tmp_path / "other.h5")


def test_every_10x_and_gzip_form_gives_the_identical_distance_matrix(tmp_path):
    X = _counts()[:, :N_GENES].astype(np.float64)
    np.save(tmp_path / "x.npy", X)
    paths = {
        "npy": tmp_path / "x.npy",
        "10x dir": write_10x_dir(str(tmp_path / "filtered_feature_bc_matrix")),
        "10x h5": write_10x_h5(str(tmp_path / "raw.h5")),
    }
    header = ",".join(["cell"] + [f"g{j}" for j in range(N_GENES)])
    body = [",".join([f"c{i}"] + [str(int(v)) for v in row]) for i, row in enumerate(X)]
    _gz_text(tmp_path / "x.csv.gz", [header] + body)
    _gz_text(tmp_path / "x.tsv.gz", [ln.replace(",", "\t") for ln in [header] + body])
    scipy.io.mmwrite(str(tmp_path / "x.mtx"), sp.coo_matrix(X))
    with open(tmp_path / "x.mtx", "rb") as src, gzip.open(tmp_path / "x.mtx.gz", "wb") as dst:
        dst.write(src.read())
    paths.update({"csv.gz": tmp_path / "x.csv.gz", "tsv.gz": tmp_path / "x.tsv.gz", "mtx.gz": tmp_path / "x.mtx.gz"})
    out = {}
    for name, p in paths.items():
        o = tmp_path / f"D_{name.replace(' ', '_').replace('.', '_')}.npy"
        run_hdtwd("distance", p, "-o", o, "-q")
        out[name] = np.load(o)
    assert out["npy"].shape == (N_CELLS, N_CELLS) and out["npy"][0, 1] > 0
    for name, D in out.items():
        assert np.array_equal(D, out["npy"]), name
    # gzip through standard input is sniffed too
    piped = run_hdtwd("distance", "-", "-o", tmp_path / "D_pipe.npy", "-q", input=(tmp_path / "x.csv.gz").read_bytes())
    assert piped.returncode == 0 and np.array_equal(np.load(tmp_path / "D_pipe.npy"), out["npy"])


# --- CSV name rules: a typo never turns a column or a row into names -------------------------------


@pytest.mark.parametrize(
    "text, shape, samples, features",
    [
        ("g1,g2,g3\n1,2,3\n4,5,6\n", (2, 3), ["s0", "s1"], ["g1", "g2", "g3"]),  # header only
        ("cell,g1,g2\na,1,2\nb,3,4\n", (2, 2), ["a", "b"], ["g1", "g2"]),  # names in every row
        (",g1,g2\n1,1,2\n2,3,4\n", (2, 2), ["1", "2"], ["g1", "g2"]),  # empty corner: numeric names
        ("g1,g2\na,1,2\nb,3,4\n", (2, 2), ["a", "b"], ["g1", "g2"]),  # one name fewer than fields
        ("1,2,3\n4,5,6\n", (2, 3), ["s0", "s1"], ["f0", "f1", "f2"]),  # numbers only
    ],
)
def test_csv_name_rules(tmp_path, text, shape, samples, features):
    p = tmp_path / "t.csv"
    p.write_text(text)
    md = read_matrix(p)
    assert md.shape == shape and md.sample_names == samples and md.feature_names == features


@pytest.mark.parametrize(
    "text, message",
    [
        # the case: 12 named features, one typo in column one, 32 rows
        (
            "".join(
                [",".join(f"g{j}" for j in range(12)) + "\n"]
                + [",".join(["x" if i == 4 else str(i)] + ["1"] * 11) + "\n" for i in range(32)]
            ),
            r"line 6, column 1: 'x' is not a number, but the column holds numbers in 31 of 32 rows",
        ),
        ("1,2,x,4\n1,2,3,4\n", r"line 1, column 3: 'x' is not a number, but 3 of the row's other cells are"),
        ("a,b,3\n1,2,3\n", r"line 1, column 3: '3' is a number among the header's 2 names"),
        ("g1,g2\n1,2\nx,3\n", r"line 3, column 1: 'x' is not a number"),
    ],
)
def test_csv_typos_are_errors_naming_the_cell(tmp_path, text, message):
    p = tmp_path / "t.csv"
    p.write_text(text)
    with pytest.raises(InputError, match=message):
        read_matrix(p)


@pytest.mark.parametrize("field", ["feature_type", "genome"])
def test_10x_h5_feature_lists_of_another_length_are_refused(tmp_path, field):
    """A features/feature_type (or genome) list longer than the features is named, not an IndexError."""
    import h5py

    path = write_10x_h5(str(tmp_path / "m.h5"))
    with h5py.File(path, "a") as f:
        ft = f["matrix/features"]
        longer = np.concatenate([ft[field][()], ft[field][()][:3]])
        del ft[field]
        ft[field] = longer
    with pytest.raises(InputError, match=f"features/{field} has {N_GENES + N_AB + 3} entries"):
        read_matrix(path, genome="GRCh38" if field == "genome" else None)


@pytest.mark.parametrize("tail", [b" ", b"\x02", b"x", b"\t"])
@pytest.mark.parametrize("gz", [False, True])
def test_matrix_market_with_junk_after_its_last_value_is_read_not_a_crash(tmp_path, tail, gz):
    """SciPy's compiled reader crashes (SIGSEGV) on a byte other than a digit or a newline after the
    last value of a file without a final newline; hdtwd adds the newline and reads the values."""
    import gzip

    rng = np.random.default_rng(4)
    X = rng.poisson(2.0, size=(9, 6)) + 1
    rows, cols = np.nonzero(X)
    body = "%%MatrixMarket matrix coordinate integer general\n9 6 54\n"
    body += "\n".join(f"{r + 1} {c + 1} {X[r, c]}" for r, c in zip(rows, cols))
    clean = tmp_path / "clean.mtx"
    clean.write_text(body + "\n")
    junk = tmp_path / ("junk.mtx.gz" if gz else "junk.mtx")
    raw = body.encode() + tail
    junk.write_bytes(gzip.compress(raw, mtime=0) if gz else raw)
    run_hdtwd("distance", clean, "-o", tmp_path / "A.npy", "-q")
    run_hdtwd("distance", junk, "-o", tmp_path / "B.npy", "-q")
    assert np.load(tmp_path / "A.npy").tobytes() == np.load(tmp_path / "B.npy").tobytes()
