"""The table of malformed inputs users really produce, and what hdtwd answers to each.

Shared by ``test_bad_input.py`` (every row through a real subprocess) and by
``python tests/bad_inputs.py > docs/bad-inputs.md`` (the documented table).
Each case: (id, what the user did, setup(tmp) -> argv, expected exit code, expected stderr text).
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
OK_CSV = "w1,w2,w3\n1,2,0\n0,1,3\n2,0,1\n"


def _w(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text)
    return p


def _npy(tmp: Path, name: str, arr: np.ndarray) -> Path:
    p = tmp / name
    np.save(p, arr, allow_pickle=True)
    return p


def _genomes(tmp: Path) -> Path:
    from test_formats import write_10x_h5_genomes

    return Path(write_10x_h5_genomes(str(tmp / "multiple_genomes.h5")))


def _tree(tmp: Path) -> Path:
    from conftest import run_hdtwd

    t = tmp / "T.h5"
    run_hdtwd("distance", SAMPLE / "produce.csv", "--save-tree", t, "-o", tmp / "ignore.npy")
    (tmp / "ignore.npy").unlink()
    return t


def _truncated(tmp: Path) -> Path:
    data = (SAMPLE / "cells.h5ad").read_bytes()
    p = tmp / "cut.h5ad"
    p.write_bytes(data[: len(data) // 3])
    return p


def _tree_edit(tmp: Path, node: int, parent: int) -> Path:
    """hdtwd's HDF5 tree with one parent index changed."""
    import h5py

    t = _tree(tmp)
    with h5py.File(t, "r+") as f:
        f["tree/parent"][node] = parent
    return t


def _denoiser_edit(tmp: Path) -> Path:
    """A --denoise tree whose stored axes lost a row (one fewer than its leaves)."""
    import h5py
    from conftest import run_hdtwd

    t = tmp / "D.h5"
    run_hdtwd("distance", SAMPLE / "produce.csv", "--denoise", "3", "--save-tree", t, "-o", tmp / "ignore.npy")
    (tmp / "ignore.npy").unlink()
    with h5py.File(t, "r+") as f:
        axes = f["tree/denoise/axes"][()]
        del f["tree/denoise/axes"]
        f["tree/denoise/axes"] = axes[:-1]
    return t


def _truncated_embedding(tmp: Path) -> Path:
    from conftest import run_hdtwd

    e = tmp / "E.h5"
    run_hdtwd("embed", SAMPLE / "produce.csv", "-o", e)
    data = e.read_bytes()
    e.write_bytes(data[: len(data) // 2])
    return e


def _string_h5ad(tmp: Path) -> Path:
    import anndata

    p = tmp / "s.h5ad"
    anndata.AnnData(np.array([["1", "2"], ["3", "x"]], dtype=object)).write_h5ad(p)
    return p


def _gz(tmp: Path, name: str, raw: bytes) -> Path:
    p = tmp / name
    p.write_bytes(raw)
    return p


def _ten_x(tmp: Path, drop: str | None = None) -> Path:
    import gzip

    d = tmp / "filtered_feature_bc_matrix"
    d.mkdir()
    with gzip.open(d / "matrix.mtx.gz", "wt") as fh:
        fh.write("%%MatrixMarket matrix coordinate integer general\n3 2 3\n1 1 4\n2 2 1\n3 1 2\n")
    with gzip.open(d / "features.tsv.gz", "wt") as fh:
        fh.write("E1\tA\tGene Expression\nE2\tB\tGene Expression\nE3\tC\tGene Expression\n")
    with gzip.open(d / "barcodes.tsv.gz", "wt") as fh:
        fh.write("c1\nc2\n")
    if drop:
        (d / drop).unlink()
    return d


def _npy_variant(tmp: Path, name: str, kind: str) -> Path:
    X = np.array([[1, 2, 0, 3], [0, 3, 1, 1], [2, 2, 2, 0], [1, 0, 4, 1]], dtype=np.float64)
    arr = {
        "f16": X.astype(np.float16),
        "be": X.astype(">f8"),
        "fortran": np.asfortranarray(X),
        "big-int": (X * 2**54).astype(np.int64),
    }[kind]
    p = tmp / name
    np.save(p, arr)
    return p


def _damaged(tmp: Path, name: str) -> Path:
    """Damaged files of the classes the fuzz run found (tests/_fuzz.py), one per class."""
    import gzip
    import zlib

    import anndata
    import h5py
    import scipy.sparse as sp

    X = np.array([[1, 2, 0, 3], [0, 3, 1, 1], [2, 2, 2, 0], [1, 0, 4, 1]], dtype=np.float64)
    p = tmp / name
    if name == "deflate.csv.gz":  # a valid gzip header, then a deflate stream that zlib rejects
        raw = gzip.compress(("a,b,c,d\n" + "1,2,0,3\n" * 200).encode(), mtime=0)
        for i in range(10, len(raw)):  # the first byte whose inversion breaks the stream (fixed data: fixed i)
            body = raw[:i] + bytes([raw[i] ^ 0xFF]) + raw[i + 1 :]
            try:
                gzip.decompress(body)
            except zlib.error:
                break
        p.write_bytes(body)
    elif name == "header.npy":  # a damaged header: an unclosed parenthesis
        np.save(p, X)
        raw = p.read_bytes()
        p.write_bytes(raw.replace(b"(4, 4)", b"((4, 4"))
    elif name == "nul.mtx":
        p.write_text("%%MatrixMarket matrix coordinate real general\n4 4 3\n1 1 1.0\n2 2 2.0\n3 3 1.0\n")
        raw = p.read_bytes()
        p.write_bytes(raw[:60] + b"\0" + raw[60:])
    elif name in ("indptr.h5ad", "index.h5ad"):
        anndata.AnnData(X=sp.csr_matrix(X)).write_h5ad(p)
        with h5py.File(p, "r+") as h:
            key = "X/indptr" if name == "indptr.h5ad" else "X/indices"
            v = h[key][()]
            v[1 if name == "indptr.h5ad" else 0] = -5 if name == "indptr.h5ad" else 10**6
            del h[key]
            h[key] = v
    elif name == "index.h5":
        p = _ten_x_h5(tmp)
        with h5py.File(p, "r+") as h:
            v = h["matrix/indices"][()]
            v[0] = 2**40
            del h["matrix/indices"]
            h["matrix/indices"] = v
    elif name == "types.h5":
        p = _ten_x_h5(tmp)
        with h5py.File(p, "r+") as h:
            del h["matrix/features/feature_type"]
            h["matrix/features/feature_type"] = np.array([b"Gene Expression"] * 5)
    elif name in ("heap.h5ad", "heap.h5"):  # the free space of a global heap given size 0 (libhdf5 loops)
        if name == "heap.h5ad":
            anndata.AnnData(X=X).write_h5ad(p)
        else:
            p = _tree(tmp)
        _zero_free_space(p)
    elif name == "claims.npy":
        with open(p, "wb") as fh:
            np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (10**9, 10**9)})
            fh.write(b"\0" * 64)
    return p


def _zero_free_space(path: Path) -> None:
    """Set the size of the free-space object (index 0) of the file's first global heap to 0.

    The heap's layout (HDF5 file format, "Global Heap"; 8-byte lengths): ``GCOL``, version,
    3 reserved bytes, the collection's size; then objects of index (2 bytes), reference count (2),
    reserved (4), size (8), data padded to 8 bytes.
    """
    raw = bytearray(path.read_bytes())
    at = raw.index(b"GCOL\x01\x00\x00\x00")
    p = at + 16
    while int.from_bytes(raw[p : p + 2], "little"):
        p += 16 + (int.from_bytes(raw[p + 8 : p + 16], "little") + 7) // 8 * 8
    raw[p + 8 : p + 16] = bytes(8)
    path.write_bytes(bytes(raw))


def _ten_x_h5(tmp: Path) -> Path:
    import h5py
    import scipy.sparse as sp

    X = sp.csr_matrix(np.array([[4, 0, 2], [0, 1, 0]], dtype=np.int32))
    p = tmp / "tenx.h5"
    with h5py.File(p, "w") as f:
        g = f.create_group("matrix")
        g["data"], g["indices"], g["indptr"] = X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64)
        g["shape"] = np.array([3, 2], dtype=np.int32)
        g["barcodes"] = np.array([b"c1", b"c2"])
        ft = g.create_group("features")
        ft["id"], ft["name"] = np.array([b"E1", b"E2", b"E3"]), np.array([b"A", b"B", b"C"])
        ft["feature_type"] = np.array([b"Gene Expression"] * 3)
    return p


def _tree_field(tmp: Path, field: str, value: np.ndarray) -> Path:
    import h5py

    p = _tree(tmp)
    with h5py.File(p, "r+") as h:
        del h[f"tree/{field}"]
        h[f"tree/{field}"] = value
    return p


def _embedding_edit(tmp: Path, key: str) -> Path:
    """``hdtwd embed``'s file with ``key`` damaged: a NaN height, or one feature weight (or denoiser row) too few."""
    import h5py
    from conftest import run_hdtwd

    p = tmp / "E.h5"
    run_hdtwd("embed", SAMPLE / "produce.csv", "-o", p, *(["--denoise", "3"] if "denoise" in key else []))
    with h5py.File(p, "r+") as h:
        v = h[key][()]
        if key == "embedding/heights":
            v[1] = np.nan
        else:
            v = v[:-1]
        del h[key]
        h[key] = v
    return p


def _nexus_weight(tmp: Path) -> Path:
    import re as _re

    from conftest import run_hdtwd

    t = tmp / "T.nex"
    run_hdtwd("distance", SAMPLE / "produce.csv", "--save-tree", t, "-o", tmp / "ignore.npy")
    (tmp / "ignore.npy").unlink()
    t.write_text(_re.sub(r"weight=[0-9.e+-]+", "weight=)", t.read_text(), count=1))
    return t


OTU_TSV = "# Constructed from biom file\n#OTU ID\tS1\tS2\tS3\ttaxonomy\n1001\t3\t0\t1\tk__A\n1002\t0\t2\t4\tk__B\n"
BIOM_BAD_SHAPE = (
    '{"rows": [{"id": "o1"}, {"id": "o2"}], "columns": [{"id": "S1"}, {"id": "S2"}], "shape": [3, 2], '
    '"matrix_type": "dense", "matrix_element_type": "int", "data": [[1, 0], [2, 3]]}'
)


def _genes_by_cells(tmp: Path, cells_first: bool = False) -> Path:
    """10x barcodes and Ensembl gene ids: genes x cells (or cells x genes)."""
    cells = ["AAACCTGAGAAGGCCT-1", "AAACCTGAGACAGACC-1", "AAACCTGAGGCATGGT-1"]
    genes = ["ENSG00000141510", "ENSG00000146648", "ENSG00000012048", "ENSG00000139618"]
    rows, cols = (cells, genes) if cells_first else (genes, cells)
    text = (
        ","
        + ",".join(cols)
        + "\n"
        + "".join(
            r + "," + ",".join(str(1 + (i * 7 + j) % 5) for j in range(len(cols))) + "\n" for i, r in enumerate(rows)
        )
    )
    return _w(tmp, "x.csv", text)


def _biom_without_sample_ids(tmp: Path) -> Path:
    import h5py

    p = tmp / "x.biom"
    with h5py.File(p, "w") as f:
        f["observation/ids"] = np.array([b"o1", b"o2"])
    return p


Case = tuple[str, str, Callable[[Path], list], int, str]


def _scaled_h5ad(t):
    import anndata

    a = anndata.AnnData(np.arange(12, dtype=np.float64).reshape(4, 3))
    a.raw = a.copy()
    a.X = a.X - a.X.mean(axis=0)
    a.write_h5ad(t / "scaled.h5ad")
    return t / "scaled.h5ad"


CASES: list[Case] = [
    (
        "negative",
        "a negative value",
        lambda t: ["distance", _w(t, "x.csv", "a,b\n1,-2\n3,4\n"), "-o", t / "D.npy"],
        2,
        "negative values",
    ),
    (
        "nan",
        "a NaN in a .npy",
        lambda t: ["distance", _npy(t, "x.npy", np.array([[1.0, np.nan], [1, 2]])), "-o", t / "D.npy"],
        2,
        "NaN or infinite",
    ),
    (
        "inf",
        "'inf' in a CSV",
        lambda t: ["distance", _w(t, "x.csv", "a,b\n1,inf\n3,4\n"), "-o", t / "D.npy"],
        2,
        "NaN or infinite",
    ),
    (
        "na-text",
        "'NA' in a CSV",
        lambda t: ["distance", _w(t, "x.csv", "a,b\n1,NA\n3,4\n"), "-o", t / "D.npy"],
        2,
        "'NA' is not a number",
    ),
    (
        "zero-row",
        "an all-zero sample",
        lambda t: ["distance", _w(t, "x.csv", "a,b,c\n1,2,3\n0,0,0\n4,5,6\n"), "-o", t / "D.npy"],
        2,
        "row 1 sums to zero",
    ),
    (
        "zero-col",
        "an all-zero feature column (a leaf hung from the root; -v says so)",
        lambda t: ["distance", _w(t, "x.csv", "a,b,c\n1,0,3\n2,0,1\n4,0,6\n"), "-o", t / "D.npy", "-v"],
        0,
        "1 feature(s) without a vector hang from the root",
    ),
    (
        "one-sample",
        "one sample",
        lambda t: ["distance", _w(t, "x.csv", "a,b,c\n1,2,3\n"), "-o", t / "D.npy"],
        2,
        "too few samples?",
    ),
    (
        "one-feature",
        "one feature",
        lambda t: ["distance", _w(t, "x.csv", "a\n1\n2\n"), "-o", t / "D.npy"],
        2,
        "fewer than two features can be placed",
    ),
    (
        "text-cell",
        "a word among the numbers",
        lambda t: ["distance", _w(t, "x.csv", "a,b\n1,2\n3,four\n"), "-o", t / "D.npy"],
        2,
        "line 3, column 2: 'four' is not a number",
    ),
    (
        "ragged",
        "a ragged CSV",
        lambda t: ["distance", _w(t, "x.csv", "a,b,c\n1,2,3\n4,5\n"), "-o", t / "D.npy"],
        2,
        "line 3 has 2 fields, expected 3",
    ),
    ("empty", "an empty file", lambda t: ["distance", _w(t, "x.csv", ""), "-o", t / "D.npy"], 2, "file is empty"),
    (
        "header-only",
        "a header and no rows",
        lambda t: ["distance", _w(t, "x.csv", "a,b\n"), "-o", t / "D.npy"],
        2,
        "no data rows",
    ),
    (
        "truncated-h5ad",
        "a truncated .h5ad",
        lambda t: ["distance", _truncated(t), "-o", t / "D.npy"],
        2,
        "not an HDF5 file",
    ),
    (
        "text-h5ad",
        "a text file named .h5ad",
        lambda t: ["distance", _w(t, "x.h5ad", OK_CSV), "-o", t / "D.npy"],
        2,
        "not an HDF5 file",
    ),
    (
        "no-layer",
        "an .h5ad without the requested layer",
        lambda t: ["distance", SAMPLE / "cells.h5ad", "--layer", "counts", "-o", t / "D.npy"],
        2,
        "no layer 'counts'",
    ),
    (
        "no-raw",
        "--use-raw on an .h5ad without .raw",
        lambda t: ["distance", SAMPLE / "cells.h5ad", "--use-raw", "-o", t / "D.npy"],
        2,
        "AnnData has no .raw",
    ),
    (
        "no-obs",
        "classify with a missing obs column",
        lambda t: ["classify", SAMPLE / "cells.h5ad", "--labels", "obs:tissue"],
        2,
        "obs has no column 'tissue'",
    ),
    (
        "tree-mismatch",
        "a tree whose features do not match the data",
        lambda t: ["distance", SAMPLE / "cells.h5ad", "--tree", _tree(t), "-o", t / "D.npy"],
        2,
        "are not the tree's leaf names",
    ),
    (
        "labels-count",
        "a labels file with the wrong count",
        lambda t: ["classify", SAMPLE / "produce.csv", "--labels", _w(t, "y.txt", "a\nb\n")],
        2,
        "2 labels for 100 samples",
    ),
    (
        "labels-blank",
        "a blank line inside the labels file",
        lambda t: ["classify", _w(t, "x.csv", OK_CSV), "--labels", _w(t, "y.txt", "a\n\nb\n"), "--k", "1"],
        2,
        "empty label on line 2",
    ),
    ("directory", "a directory as input", lambda t: ["distance", t, "-o", t / "D.npy"], 2, "is a directory"),
    (
        "missing",
        "a path that does not exist",
        lambda t: ["distance", t / "nope.csv", "-o", t / "D.npy"],
        2,
        "no such file",
    ),
    (
        "unwritable",
        "an output where nothing can be written",
        lambda t: ["distance", SAMPLE / "produce.csv", "-o", "/proc/hdtwd-D.npy"],
        3,
        "cannot write",
    ),
    (
        "no-dir",
        "an output in a missing directory",
        lambda t: ["distance", SAMPLE / "produce.csv", "-o", t / "no" / "D.npy"],
        3,
        "does not exist",
    ),
    (
        "out-is-in",
        "the output path equal to the input",
        lambda t: ["distance", _w(t, "x.csv", OK_CSV), "-o", t / "x.csv"],
        3,
        "output would overwrite the input",
    ),
    (
        "unknown-in",
        "an unknown input extension",
        lambda t: ["distance", _w(t, "x.xlsx", OK_CSV), "-o", t / "D.npy"],
        2,
        "unknown file type '.xlsx'",
    ),
    (
        "unknown-out",
        "an unknown output extension",
        lambda t: ["distance", SAMPLE / "produce.csv", "-o", t / "D.txt"],
        3,
        "unknown output type '.txt'",
    ),
    (
        "dup-names",
        "duplicate feature names (warned, made unique)",
        lambda t: ["distance", _w(t, "x.csv", "g,g,h\n1,2,3\n2,1,1\n0,4,1\n"), "-o", t / "D.npy"],
        0,
        "1 duplicate feature names made unique",
    ),
    (
        "huge",
        "counts too large for float32 (and near float64's limit)",
        lambda t: [
            "distance",
            _w(t, "x.csv", "a,b,c\n1e300,2e300,1e299\n3e300,1e300,5e299\n1e300,1e300,1e300\n"),
            "-o",
            t / "D.npy",
            "--dtype",
            "float32",
        ],
        0,
        "",
    ),
    (
        "overflow",
        "values whose row sum overflows float64",
        lambda t: ["distance", _w(t, "x.csv", "a,b,c\n1e308,1.7e308,1\n1,2,5\n3,1,1\n"), "-o", t / "D.npy"],
        2,
        "row 0 sums to infinity",
    ),
    (
        "integers",
        "an integer matrix",
        lambda t: ["distance", _npy(t, "x.npy", np.array([[1, 2, 0], [0, 3, 1], [2, 2, 2]])), "-o", t / "D.npy"],
        0,
        "",
    ),
    (
        "pickle",
        "a .npy of Python objects",
        lambda t: ["distance", _npy(t, "x.npy", np.array([[1, "a"]], dtype=object)), "-o", t / "D.npy"],
        2,
        "Python objects",
    ),
    (
        "3d",
        "a 3-D array",
        lambda t: ["distance", _npy(t, "x.npy", np.ones((2, 2, 2))), "-o", t / "D.npy"],
        2,
        "expected a 2-D matrix",
    ),
    (
        "bad-mtx",
        "a malformed Matrix Market file",
        lambda t: ["distance", _w(t, "x.mtx", "%%MatrixMarket nonsense\n1 2\n"), "-o", t / "D.npy"],
        2,
        "not a readable Matrix Market file",
    ),
    (
        "bad-newick",
        "a malformed Newick tree",
        lambda t: [
            "distance",
            SAMPLE / "produce.csv",
            "--tree",
            _w(t, "t.nwk", "(apple:1,orange:2"),
            "-o",
            t / "D.npy",
        ],
        2,
        "missing the closing ';'",
    ),
    (
        "dup-newick",
        "a Newick tree with a repeated leaf",
        lambda t: [
            "distance",
            SAMPLE / "produce.csv",
            "--tree",
            _w(t, "t.nwk", "(apple:1,apple:2);"),
            "-o",
            t / "D.npy",
        ],
        2,
        "occurs more than once",
    ),
    (
        "emb-as-tree",
        "an embedding file given as a tree",
        lambda t: ["decode-tree", _tree(t), "-o", t / "T2.h5"],
        2,
        "expected an hdtwd 'hdtwd-embedding' file, found an 'hdtwd-tree' file",
    ),
    (
        "eps-zero",
        "--eps 0",
        lambda t: ["distance", SAMPLE / "produce.csv", "--eps", "0", "-o", t / "D.npy"],
        2,
        "--eps (the kernel scale multiplier) must be positive",
    ),
    (
        "scales-negative",
        "--scales -1 (a bound the library holds: one per option, the same for the API)",
        lambda t: ["distance", SAMPLE / "produce.csv", "--scales", "-1", "-o", t / "D.npy"],
        2,
        "--scales must be an integer >= 0",
    ),
    (
        "splits-zero",
        "classify --splits 0",
        lambda t: ["classify", SAMPLE / "produce.csv", "--labels", SAMPLE / "produce_labels.txt", "--splits", "0"],
        2,
        "--splits must be a whole number >= 1",
    ),
    (
        "joint-rounds-zero",
        "--joint-rounds 0",
        lambda t: ["distance", SAMPLE / "produce.csv", "--joint", "--joint-rounds", "0", "-o", t / "D.npy"],
        2,
        "--joint-rounds must be at least 1",
    ),
    (
        "joint-share",
        "--joint-share outside [0, 1]",
        lambda t: ["distance", SAMPLE / "produce.csv", "--joint", "--joint-share", "1.5", "-o", t / "D.npy"],
        2,
        "--joint-share must be between 0 and 1",
    ),
    (
        "joint-same-samples",
        "--joint where most samples have the same histogram (the samples' tree has no scale)",
        lambda t: [
            "distance",
            _w(t, "x.csv", "a,b,c,d\n" + "1,2,0,1\n" * 7 + "0,1,3,2\n3,0,1,0\n"),
            "--joint",
            "-o",
            t / "D.npy",
        ],
        2,
        "at least half of the pairs of samples have the same histograms",
    ),
    (
        "k-too-big",
        "classify with k larger than the training set",
        lambda t: ["classify", _w(t, "x.csv", OK_CSV), "--labels", _w(t, "y.txt", "a\nb\na\n"), "--k", "5"],
        2,
        "exceeds the 2 training samples",
    ),
    (
        "bad-option",
        "a misspelt option value",
        lambda t: ["distance", SAMPLE / "produce.csv", "-o", t / "D.npy", "--linkage", "ward"],
        2,
        "Invalid value for '--linkage'",
    ),
    ("missing-output", "no -o", lambda t: ["distance", SAMPLE / "produce.csv"], 2, "Missing option '--output'"),
    (
        "empty-stdin",
        "'-' with nothing on standard input",
        lambda t: ["distance", "-", "-o", t / "D.npy"],
        2,
        "standard input is empty",
    ),
    (
        "unseen-feature",
        "a stored tree that lacks a feature of the data",
        lambda t: ["distance", _w(t, "x.csv", "apple,kiwi\n1,2\n3,1\n"), "--tree", _tree(t), "-o", t / "D.npy"],
        2,
        "--unseen root hangs them from the tree's root",
    ),
    (
        "unseen-no-tree",
        "--unseen without --tree",
        lambda t: ["distance", SAMPLE / "produce.csv", "--unseen", "root", "-o", t / "D.npy"],
        2,
        "--unseen applies to a stored tree only (--tree)",
    ),
    (
        "emb-ragged",
        "a word2vec file with a short line",
        lambda t: [
            "distance",
            SAMPLE / "produce.csv",
            "--feature-embedding",
            _w(t, "v.txt", "apple 1 2\nkiwi 3\n"),
            "-o",
            t / "D.npy",
        ],
        2,
        "line 2: 1 values where line 1 has 2",
    ),
    (
        "emb-format",
        "a feature embedding of unknown format",
        lambda t: ["distance", SAMPLE / "produce.csv", "--feature-embedding", _w(t, "v.json", "{}"), "-o", t / "D.npy"],
        2,
        "unknown feature-embedding format",
    ),
    (
        "emb-npy-names",
        "an .npy feature embedding without its names",
        lambda t: [
            "distance",
            SAMPLE / "produce.csv",
            "--feature-embedding",
            _npy(t, "v.npy", np.ones((3, 2))),
            "-o",
            t / "D.npy",
        ],
        2,
        "needs its names, one per line",
    ),
    (
        "tree-with-learning-option",
        "--leaf-length with --tree",
        lambda t: ["distance", SAMPLE / "produce.csv", "--tree", _tree(t), "--leaf-length", "2", "-o", t / "D.npy"],
        2,
        "--leaf-length only apply when the tree is learned",
    ),
    (
        "tree-denoiser-shape",
        "a stored tree whose denoiser has one axis row fewer than its leaves",
        lambda t: ["distance", SAMPLE / "produce.csv", "--tree", _denoiser_edit(t), "-o", t / "D.npy"],
        2,
        "invalid tree: the denoiser must have one finite mean and axis row per leaf",
    ),
    (
        "knn-beyond-n",
        "--knn larger than the number of samples",
        lambda t: ["distance", SAMPLE / "produce.csv", "--knn", "101", "-o", t / "G.npz"],
        2,
        "--knn must be an integer between 2 and the number of samples (100)",
    ),
    (
        "knn-method-without-knn",
        "--knn-method without --knn",
        lambda t: ["distance", SAMPLE / "produce.csv", "--knn-method", "nndescent", "-o", t / "D.npy"],
        2,
        "--knn-method applies to the kNN graph (--knn)",
    ),
    (
        "scheduler-unreachable",
        "a Dask scheduler address nobody listens on",
        lambda t: ["distance", SAMPLE / "produce.csv", "--scheduler", "tcp://127.0.0.1:9", "-o", t / "D.zarr"],
        2,
        "cannot reach the Dask scheduler at tcp://127.0.0.1:9",
    ),
    (
        "scheduler-h5",
        "--scheduler with an in-memory output",
        lambda t: ["distance", SAMPLE / "produce.csv", "--scheduler", "tcp://127.0.0.1:9", "-o", t / "D.npy"],
        2,
        "--scheduler runs the kNN search (--knn) or writes all pairs into a Zarr store",
    ),
    (
        "neg-h5ad-hint",
        "an .h5ad with negative (scaled) X and raw counts",
        lambda t: ["distance", _scaled_h5ad(t), "-o", t / "D.npy"],
        2,
        "the file also holds raw.X (--use-raw)",
    ),
    # --- trees, embeddings, matrix files and names that real users hand over -----------
    (
        "nwk-no-length",
        "a Newick tree without branch lengths",
        lambda t: ["distance", SAMPLE / "produce.csv", "--tree", _w(t, "t.nwk", "(apple,orange);"), "-o", t / "D.npy"],
        2,
        "leaf 'apple' has no branch length",
    ),
    (
        "nwk-negative",
        "a Newick tree with a negative branch length",
        lambda t: [
            "distance",
            SAMPLE / "produce.csv",
            "--tree",
            _w(t, "t.nwk", "(apple:1,orange:-2);"),
            "-o",
            t / "D.npy",
        ],
        2,
        "edge lengths must be finite and non-negative",
    ),
    (
        "nwk-nan",
        "a Newick tree with a NaN branch length",
        lambda t: [
            "distance",
            SAMPLE / "produce.csv",
            "--tree",
            _w(t, "t.nwk", "(apple:1,orange:nan);"),
            "-o",
            t / "D.npy",
        ],
        2,
        "edge lengths must be finite and non-negative",
    ),
    (
        "nwk-empty-tip",
        "a Newick tree with an empty tip name",
        lambda t: ["distance", SAMPLE / "produce.csv", "--tree", _w(t, "t.nwk", "(apple:1,:2);"), "-o", t / "D.npy"],
        2,
        "leaf 2 has no name",
    ),
    (
        "nwk-unbalanced",
        "a Newick tree with one ')' too many",
        lambda t: [
            "distance",
            SAMPLE / "produce.csv",
            "--tree",
            _w(t, "t.nwk", "(apple:1,orange:2)):1;"),
            "-o",
            t / "D.npy",
        ],
        2,
        "unbalanced ')'",
    ),
    (
        "nwk-subtree-as-length",
        "a Newick tree with a subtree where a branch length belongs",
        lambda t: [
            "distance",
            SAMPLE / "produce.csv",
            "--tree",
            _w(t, "t.nwk", "(apple:(orange:1,pear:1):1,kiwi:2);"),
            "-o",
            t / "D.npy",
        ],
        2,
        "where a branch length is expected",
    ),
    (
        "nwk-huge",
        "a 200 MB single-line file given as a Newick tree",
        lambda t: [
            "distance",
            SAMPLE / "produce.csv",
            "--tree",
            _w(t, "t.nwk", "(" + "a" * (200 << 20)),
            "-o",
            t / "D.npy",
        ],
        2,
        "missing the closing ';'",
    ),
    (
        "h5-cycle",
        "an HDF5 tree whose parent array has a cycle",
        lambda t: ["distance", SAMPLE / "produce.csv", "--tree", _tree_edit(t, 9, 2), "-o", t / "D.npy"],
        2,
        "node 9 has parent 2, which does not come after it",
    ),
    (
        "h5-parent-range",
        "an HDF5 tree with a parent index out of range",
        lambda t: ["distance", SAMPLE / "produce.csv", "--tree", _tree_edit(t, 5, 10**6), "-o", t / "D.npy"],
        2,
        "node 5 has parent 1000000, outside the",
    ),
    (
        "emb-truncated",
        "a truncated embedding file",
        lambda t: ["decode-tree", _truncated_embedding(t), "-o", t / "T.h5"],
        2,
        "not an HDF5 file",
    ),
    (
        "h5ad-strings",
        "an .h5ad whose X holds strings",
        lambda t: ["distance", _string_h5ad(t), "-o", t / "D.npy"],
        2,
        "non-numeric",
    ),
    (
        "mtx-range",
        "a Matrix Market entry beyond the declared size",
        lambda t: [
            "distance",
            _w(t, "x.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n3 2 1\n"),
            "-o",
            t / "D.npy",
        ],
        2,
        "not a readable Matrix Market file",
    ),
    (
        "mtx-nnz",
        "a Matrix Market file with fewer entries than declared",
        lambda t: [
            "distance",
            _w(t, "x.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 5\n1 1 1\n2 2 1\n"),
            "-o",
            t / "D.npy",
        ],
        2,
        "not a readable Matrix Market file",
    ),
    (
        "int-2-53",
        "int64 counts above 2^53 (not exact in float64)",
        lambda t: ["distance", _npy_variant(t, "x.npy", "big-int"), "-o", t / "D.npy"],
        2,
        "integer values above 2^53",
    ),
    (
        "f16",
        "a float16 .npy (read as float64)",
        lambda t: ["distance", _npy_variant(t, "x.npy", "f16"), "-o", t / "D.npy", "-q"],
        0,
        "",
    ),
    (
        "big-endian",
        "a big-endian .npy (read as float64)",
        lambda t: ["distance", _npy_variant(t, "x.npy", "be"), "-o", t / "D.npy", "-q"],
        0,
        "",
    ),
    (
        "fortran",
        "a Fortran-order .npy",
        lambda t: ["distance", _npy_variant(t, "x.npy", "fortran"), "-o", t / "D.npy", "-q"],
        0,
        "",
    ),
    (
        "latin1",
        "feature names in Latin-1, not UTF-8",
        lambda t: ["distance", _gz(t, "x.csv", "caf\xe9,b\n1,2\n3,4\n".encode("latin-1")), "-o", t / "D.npy"],
        2,
        "not a readable ','-delimited text file",
    ),
    (
        "csv-typo-col1",
        "a typo in the first column of a table with a full header",
        lambda t: ["distance", _w(t, "x.csv", "a,b,c\n1,2,3\nx,1,2\n4,1,1\n"), "-o", t / "D.npy"],
        2,
        "line 3, column 1: 'x' is not a number, but the column holds numbers in 2 of 3 rows",
    ),
    (
        "csv-typo-row1",
        "a typo in the first row of a table without header",
        lambda t: ["distance", _w(t, "x.csv", "1,2,x,4\n1,2,3,4\n"), "-o", t / "D.npy"],
        2,
        "line 1, column 3: 'x' is not a number",
    ),
    (
        "csv-number-name",
        "a number among the header's names",
        lambda t: ["distance", _w(t, "x.csv", "a,b,3\n1,2,3\n"), "-o", t / "D.npy"],
        2,
        "'3' is a number among the header's 2 names",
    ),
    (
        "csv-numeric-header",
        "numeric feature ids in a header whose corner cell is empty (read as names, not as a sample)",
        lambda t: [
            "distance",
            _w(t, "x.csv", ",7157,672,1956\ncellA,1,0,3\ncellB,0,2,1\ncellC,4,1,0\n"),
            "-o",
            t / "D.csv",
        ],
        0,
        "",
    ),
    (
        "csv-header-ambiguous",
        "a word in the corner, numeric ids after it, names in every row (a header, or a sample named 'gene'?)",
        lambda t: ["distance", _w(t, "x.csv", "gene,7157,672,1956\ncellA,1,0,3\ncellB,0,2,1\n"), "-o", t / "D.npy"],
        2,
        "say which with --header/--no-header",
    ),
    (
        "csv-header-ids-over-decimals",
        "distinct integers in the first row of a table of decimals (numeric ids, or a data row?)",
        lambda t: ["distance", _w(t, "x.csv", "7157,672,1956\n0.5,1.25,0\n2,0.75,1\n"), "-o", t / "D.npy"],
        2,
        "above non-integer values: numeric ids? say which with --header/--no-header",
    ),
    (
        "header-not-a-table",
        "--header with a .npy",
        lambda t: ["distance", _npy(t, "x.npy", np.ones((3, 3))), "--header", "-o", t / "D.npy"],
        2,
        "--header/--no-header applies to .csv and .tsv tables only",
    ),
    (
        "genes-by-cells",
        "genes x cells (10x barcodes as columns, Ensembl ids as rows) without --transpose",
        lambda t: ["distance", _genes_by_cells(t), "-o", t / "D.npy"],
        2,
        "the file looks features x samples; add --transpose",
    ),
    (
        "cells-by-genes-transposed",
        "cells x genes with --transpose",
        lambda t: ["distance", _genes_by_cells(t, cells_first=True), "--transpose", "-o", t / "D.npy"],
        2,
        "the file is samples x features already; drop --transpose",
    ),
    (
        "otu-transpose",
        "QIIME's classic OTU table (#OTU ID) with --transpose (it is read as samples x OTUs already)",
        lambda t: ["distance", _w(t, "otu.tsv", OTU_TSV), "--transpose", "-o", t / "D.npy"],
        2,
        "--transpose does not apply: a QIIME OTU table says which ids are the samples",
    ),
    (
        "biom-not-biom",
        "a CSV named .biom",
        lambda t: ["distance", _w(t, "x.biom", OK_CSV), "-o", t / "D.npy"],
        2,
        "not a BIOM file: neither HDF5 (BIOM 2) nor JSON (BIOM 1.0)",
    ),
    (
        "biom-shape",
        "a BIOM 1.0 table whose shape disagrees with its ids",
        lambda t: ["distance", _w(t, "x.biom", BIOM_BAD_SHAPE), "-o", t / "D.npy"],
        2,
        "BIOM shape [3, 2] does not match its 2 rows and 2 columns",
    ),
    (
        "biom-no-ids",
        "an HDF5 .biom without sample ids",
        lambda t: ["distance", _biom_without_sample_ids(t), "-o", t / "D.npy"],
        2,
        "not a BIOM 2 file: no sample/ids",
    ),
    (
        "gz-not-gzip",
        "a .csv.gz that is not gzip-compressed",
        lambda t: ["distance", _w(t, "x.csv.gz", OK_CSV), "-o", t / "D.npy"],
        2,
        "not a readable compressed file",
    ),
    (
        "10x-no-barcodes",
        "a 10x directory without barcodes.tsv.gz",
        lambda t: ["distance", _ten_x(t, "barcodes.tsv.gz"), "-o", t / "D.npy"],
        2,
        "10x matrix directory without barcodes.tsv[.gz]",
    ),
    (
        "var-names-npy",
        "--var-names on a file that is not 10x",
        lambda t: ["distance", SAMPLE / "produce.csv", "--var-names", "gene_ids", "-o", t / "D.npy"],
        2,
        "--var-names applies to 10x inputs only",
    ),
    (
        "h5-not-10x",
        "an hdtwd tree .h5 given as the data",
        lambda t: ["distance", _tree(t), "-o", t / "D.npy"],
        2,
        "not a 10x .h5 file",
    ),
    (
        "h5-two-genomes",
        "a Cell Ranger 2 .h5 with two genomes and no --genome",
        lambda t: ["distance", _genomes(t), "-o", t / "D.npy"],
        2,
        "choose one with --genome NAME",
    ),
    (
        "out-fifo",
        "an output path that is a FIFO",
        lambda t: (__import__("os").mkfifo(t / "D.npy"), ["distance", SAMPLE / "produce.csv", "-o", t / "D.npy"])[1],
        3,
        "is not a regular file",
    ),
    (
        "gz-deflate",
        "a .csv.gz whose deflate stream is damaged",
        lambda t: ["distance", _damaged(t, "deflate.csv.gz"), "-o", t / "D.npy"],
        2,
        "not a readable compressed file",
    ),
    (
        "npy-header",
        "an .npy whose header is damaged",
        lambda t: ["distance", _damaged(t, "header.npy"), "-o", t / "D.npy"],
        2,
        "damaged or unreadable .npy file",
    ),
    (
        "npy-claims",
        "an .npy whose header claims 10^9 x 10^9 values",
        lambda t: ["distance", _damaged(t, "claims.npy"), "-o", t / "D.npy"],
        2,
        "header claims 1000000000 x 1000000000 float64 values",
    ),
    (
        "mtx-nul",
        "a NUL byte in a Matrix Market file (SciPy's reader crashes on one)",
        lambda t: ["distance", _damaged(t, "nul.mtx"), "-o", t / "D.npy"],
        2,
        "holds a NUL byte at byte 60",
    ),
    (
        "h5ad-indptr",
        "an .h5ad whose CSR row pointers hold a negative value",
        lambda t: ["distance", _damaged(t, "indptr.h5ad"), "-o", t / "D.npy"],
        2,
        "row pointers decrease",
    ),
    (
        "h5ad-index",
        "an .h5ad whose CSR column index is out of range",
        lambda t: ["distance", _damaged(t, "index.h5ad"), "-o", t / "D.npy"],
        2,
        "an index outside 0..3",
    ),
    (
        "h5-index",
        "a Cell Ranger .h5 whose gene index is out of range",
        lambda t: ["distance", _damaged(t, "index.h5"), "-o", t / "D.npy"],
        2,
        "an index outside 0..2",
    ),
    (
        "h5-feature-types",
        "a Cell Ranger .h5 with more feature types than features",
        lambda t: ["distance", _damaged(t, "types.h5"), "-o", t / "D.npy"],
        2,
        "features/feature_type has 5 entries for 3 features",
    ),
    (
        "h5ad-heap",
        "an .h5ad whose global heap (its strings) would loop libhdf5 forever",
        lambda t: ["distance", _damaged(t, "heap.h5ad"), "-o", t / "D.npy"],
        2,
        "would hang the HDF5 library",
    ),
    (
        "tree-heap",
        "a tree .h5 whose global heap (its strings) would loop libhdf5 forever",
        lambda t: ["distance", SAMPLE / "produce.csv", "--tree", _damaged(t, "heap.h5"), "-o", t / "D.npy"],
        2,
        "would hang the HDF5 library",
    ),
    (
        "tree-strings",
        "a tree .h5 whose branch lengths are strings",
        lambda t: [
            "distance",
            SAMPLE / "produce.csv",
            "--tree",
            _tree_field(t, "length", np.array([b"x0"] * 7)),
            "-o",
            t / "D.npy",
        ],
        2,
        "tree/length holds |S2 values, expected numbers",
    ),
    (
        "embedding-nan",
        "an embedding .h5 whose scale heights hold a NaN",
        lambda t: ["decode-tree", _embedding_edit(t, "embedding/heights"), "-o", t / "T.h5"],
        2,
        "embedding/heights holds NaN or infinite values",
    ),
    (
        "nexus-weight",
        "a Nexus tree whose leaf weight is not a number",
        lambda t: ["distance", SAMPLE / "produce.csv", "--tree", _nexus_weight(t), "-o", t / "D.npy"],
        2,
        "has the weight ')', not a number",
    ),
    (
        "embedding-weights",
        "an embedding .h5 with one feature weight too few",
        lambda t: ["decode-tree", _embedding_edit(t, "features/weights"), "-o", t / "T.h5"],
        2,
        "features/weights holds",
    ),
    (
        "embedding-denoiser",
        "an embedding .h5 whose stored denoiser has one axis row too few",
        lambda t: ["decode-tree", _embedding_edit(t, "features/denoise/axes"), "-o", t / "T.h5"],
        2,
        "features/denoise must hold one finite mean and axis row for each of the 8 features",
    ),
]


def markdown() -> str:
    """Run every case and render the table (what the user did, exit code, the message)."""
    import tempfile

    from conftest import run_hdtwd

    lines = ["| what the user did | exit | stderr |", "|---|---|---|"]
    for _cid, what, setup, _code, _ in CASES:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            proc = run_hdtwd(*setup(tmp), input=b"", check=False)
            msg = proc.stderr.decode().strip().replace(str(tmp), "DIR").replace(str(SAMPLE), "sample_data")
            msg = re.sub(r"[0-9.]+ GB available", "N GB available", msg)  # the machine's free memory: not the doc's
            msg = re.sub(r"(?m)^hdtwd: .*: [0-9.]+ s$\n?", "", msg).strip()  # -v's stage times: not the doc's
            msg = re.sub(r"(?m)^hdtwd: compiling .*$\n?", "", msg).strip()  # a cold kernel cache: not the doc's
            msg = msg.replace("|", "\\|") or "(nothing)"
            lines.append(f"| {what} | {proc.returncode} | `{msg}` |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    print(
        "# What hdtwd says to malformed input\n\nGenerated by `python tests/bad_inputs.py`; every row is "
        "checked by `tests/test_bad_input.py` through a real subprocess. Exit codes: 0 success (warnings "
        "only), 2 bad input or usage, 3 output cannot be written. No row leaves an output file behind.\n"
    )
    print(
        "Names in .csv/.tsv tables: the first row is a header of feature names when its corner cell is empty "
        "(numeric names are names) or every cell after the corner is text; where the first row cannot be told "
        "apart from a data row (a word in the corner, then numbers, above rows that start with a name; distinct "
        "integers above non-integer values) it is an error naming --header/--no-header. A table of numbers only "
        "has no names. The first column holds sample names only when it can be nothing else: the header's "
        "corner cell is empty, or the header has one name fewer than the rows have fields, or every cell of the "
        "column is text. A first row or column mixing numbers and text is an error naming the line, the column "
        "and the cell, never a silently dropped feature. Names that say the file is features x samples (gene "
        "ids for the samples, cell barcodes for the features) are an error naming --transpose; BIOM tables and "
        "QIIME's #OTU ID table are read as samples x OTUs because the format says so.\n"
    )
    print(markdown())
    _ = shutil, sp
