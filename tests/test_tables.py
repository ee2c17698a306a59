"""Where a table's names are (header, first column), which way round it is, and the microbiome formats.

Every layout of docs/usage.md's inputs table is read here; the cases that cannot be told apart are
errors naming the option that settles them; BIOM 2.1 / 1.0 and QIIME's classic OTU table read as
samples x OTUs, and on a given Newick tree the TWD equals scikit-bio's unnormalised weighted UniFrac.
"""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import run_hdtwd

from hdtwd_cli.errors import InputError, ParameterError
from hdtwd_cli.io import read_matrix

# ---------------------------------------------------------------------------------------------- headers


@pytest.mark.parametrize(
    "text, samples, features",
    [
        ("g1,g2,g3\n1,2,3\n4,5,6\n", ["s0", "s1"], ["g1", "g2", "g3"]),  # header of names only
        ("cell,g1,g2\na,1,2\nb,3,4\n", ["a", "b"], ["g1", "g2"]),  # a name in the corner and every row
        (",g1,g2\n1,1,2\n2,3,4\n", ["1", "2"], ["g1", "g2"]),  # empty corner: the first column is names
        ("g1,g2\na,1,2\nb,3,4\n", ["a", "b"], ["g1", "g2"]),  # one name fewer than fields (R)
        ("1,2,3\n4,5,6\n", ["s0", "s1"], ["f0", "f1", "f2"]),  # numbers only (np.savetxt)
        # numeric feature ids (Entrez, Greengenes) under an empty corner: names, not a sample
        (
            ",7157,672,1956\ncellA,1,0,3\ncellB,0,2,1\ncellC,4,1,0\n",
            ["cellA", "cellB", "cellC"],
            ["7157", "672", "1956"],
        ),
        ("7157,672\ncellA,1,0\ncellB,0,2\n", ["cellA", "cellB"], ["7157", "672"]),  # numeric ids, one fewer (R)
        (",1,2\n3,1,2\n4,3,4\n", ["3", "4"], ["1", "2"]),  # numeric names on both axes
        ("g1\tg2\n1\t2\n3\t4\n", ["s0", "s1"], ["g1", "g2"]),  # tab-separated (.tsv)
    ],
)
def test_every_table_layout_is_read_with_its_names(tmp_path, text, samples, features):
    p = tmp_path / ("t.tsv" if "\t" in text else "t.csv")
    p.write_text(text)
    md = read_matrix(p)
    assert md.sample_names == samples and md.feature_names == features
    assert md.shape == (len(samples), len(features))


def test_numeric_header_values_are_not_a_sample(tmp_path):
    """The issue's table: 3 samples x 3 genes, the counts exactly those of the rows below the header."""
    p = tmp_path / "e.csv"
    p.write_text(",7157,672,1956\ncellA,1,0,3\ncellB,0,2,1\ncellC,4,1,0\n")
    md = read_matrix(p)
    assert np.array_equal(md.X, [[1, 0, 3], [0, 2, 1], [4, 1, 0]])


@pytest.mark.parametrize(
    "text, shown",
    [
        ("gene,7157,672,1956\ncellA,1,0,3\ncellB,0,2,1\n", "('gene', then 7157, 672, 1956)"),  # a word in the corner
        ("s1,1,2\ns2,3,4\n", "('s1', then 1, 2)"),  # a sample named s1, or a header?
        ("0,7157,672\ncellA,1,0\ncellB,2,1\n", "('0', then 7157, 672)"),  # numbers over named rows
        ("gene,1,2\n1,2,3\n4,5,6\n", "('gene', then 1, 2)"),  # a word over a column of numbers
        ("7157,672,1956\n0.5,1.25,0\n2,0.75,1\n", "distinct integers (7157, 672, 1956) above non-integer"),
    ],
)
def test_a_first_row_that_cannot_be_told_from_data_is_an_error_naming_header(tmp_path, text, shown):
    p = tmp_path / "t.csv"
    p.write_text(text)
    with pytest.raises(InputError, match="say which with header") as e:
        read_matrix(p)
    assert shown in str(e.value) and str(p) in str(e.value)


@pytest.mark.parametrize(
    "text, header, samples, features, first",
    [
        ("gene,7157,672\ncellA,1,0\ncellB,0,2\n", True, ["cellA", "cellB"], ["7157", "672"], [1, 0]),
        ("gene,7157,672\ncellA,1,0\ncellB,0,2\n", False, ["gene", "cellA", "cellB"], ["f0", "f1"], [7157, 672]),
        ("s1,1,2\ns2,3,4\n", False, ["s1", "s2"], ["f0", "f1"], [1, 2]),
        ("7157,672\n0.5,1.25\n2,0.75\n", True, ["s0", "s1"], ["7157", "672"], [0.5, 1.25]),
        ("7157,672\n0.5,1.25\n2,0.75\n", False, ["s0", "s1", "s2"], ["f0", "f1"], [7157, 672]),
        ("a,b\n1,2\n3,4\n", True, ["s0", "s1"], ["a", "b"], [1, 2]),  # what the rule says anyway
    ],
)
def test_header_option_settles_the_first_row(tmp_path, text, header, samples, features, first):
    p = tmp_path / "t.csv"
    p.write_text(text)
    md = read_matrix(p, header=header)
    assert md.sample_names == samples and md.feature_names == features
    assert np.array_equal(md.X[0], first)


def test_header_option_applies_to_tables_only(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((2, 2)))
    with pytest.raises(ParameterError, match="header applies to .csv and .tsv tables only"):
        read_matrix(tmp_path / "x.npy", header=True)


def test_cli_ambiguous_header_names_both_flags_and_writes_nothing(tmp_path):
    p = tmp_path / "g.csv"
    p.write_text("gene,7157,672,1956\ncellA,1,0,3\ncellB,0,2,1\ncellC,4,1,0\n")
    proc = run_hdtwd("distance", p, "-o", tmp_path / "D.csv", check=False)
    err = proc.stderr.decode().strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1 and "--header/--no-header" in err, err
    assert not (tmp_path / "D.csv").exists()
    run_hdtwd("distance", p, "--header", "-o", tmp_path / "D.csv")
    rows = list(csv.reader((tmp_path / "D.csv").open()))
    assert rows[0] == ["", "cellA", "cellB", "cellC"]


# ---------------------------------------------------------------------------------------------- orientation

BARCODES = ["AAACCTGAGAAGGCCT-1", "AAACCTGAGACAGACC-1", "AAACCTGAGGCATGGT-1", "AAACCTGCAAGCCGTC-1"]
ENSEMBL = ["ENSG00000141510", "ENSG00000146648", "ENSG00000012048.21", "ENSG00000139618", "ENSG00000171862"]


def _genes_by_cells(tmp_path, name="gc.csv"):
    rng = np.random.default_rng(3)
    X = rng.integers(0, 6, size=(len(ENSEMBL), len(BARCODES))) + 1
    p = tmp_path / name
    p.write_text(
        "," + ",".join(BARCODES) + "\n" + "".join(g + "," + ",".join(map(str, r)) + "\n" for g, r in zip(ENSEMBL, X))
    )
    return p, X


def test_genes_by_cells_is_refused_naming_transpose_and_read_with_it(tmp_path):
    p, X = _genes_by_cells(tmp_path)
    with pytest.raises(InputError, match=r"the file looks features x samples; add transpose") as e:
        read_matrix(p)
    assert "ENSG00000141510" in str(e.value) and "AAACCTGAGAAGGCCT-1" in str(e.value)
    md = read_matrix(p, transpose=True)
    assert md.sample_names == BARCODES and md.feature_names == ENSEMBL and np.array_equal(md.X, X.T)


def test_cells_by_genes_with_transpose_is_refused(tmp_path):
    p, X = _genes_by_cells(tmp_path)
    q = tmp_path / "cg.csv"
    md = read_matrix(p, transpose=True)
    q.write_text(
        "," + ",".join(ENSEMBL) + "\n" + "".join(c + "," + ",".join(map(str, r)) + "\n" for c, r in zip(BARCODES, X.T))
    )
    assert read_matrix(q).feature_names == md.feature_names
    with pytest.raises(InputError, match="samples x features already; drop transpose"):
        read_matrix(q, transpose=True)


@pytest.mark.parametrize("names", [["ENSG00000141510", "TP53"], ["AAACCTGAGAAGGCCT-1"]])
def test_one_or_mixed_names_are_no_sign(tmp_path, names):
    """Fewer than two names, or fewer than nine in ten matching, do not count: the file is read as it is."""
    p = tmp_path / "t.csv"
    p.write_text("".join(f"{n},1,2\n" for n in names))
    assert read_matrix(p, header=False).sample_names == names


def test_h5ad_with_barcodes_as_features_is_refused(tmp_path):
    import anndata

    a = anndata.AnnData(np.ones((3, 4)))
    a.var_names = BARCODES
    a.obs_names = ["TP53", "EGFR", "BRCA2"]
    a.write_h5ad(tmp_path / "t.h5ad")
    with pytest.raises(InputError, match="add transpose"):
        read_matrix(tmp_path / "t.h5ad")


def test_cli_genes_by_cells_exit_2_naming_transpose(tmp_path):
    p, _ = _genes_by_cells(tmp_path)
    proc = run_hdtwd("distance", p, "-o", tmp_path / "D.npy", check=False)
    err = proc.stderr.decode().strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1 and "add --transpose" in err, err
    assert not (tmp_path / "D.npy").exists()


# ---------------------------------------------------------------------------------------------- microbiome


def otu_case(seed: int, n_samples: int = 9, n_otus: int = 14):
    """Integer counts (samples x OTUs, numeric Greengenes-like ids), sample ids, and a Newick tree over the OTUs
    plus two OTUs absent from the table: support values as internal labels, zero-length branches, a root edge."""
    rng = np.random.default_rng(seed)
    otus = [str(4479944 + 37 * j) for j in range(n_otus + 2)]
    X = rng.poisson(3.0, size=(n_samples, n_otus)) * (rng.random((n_samples, n_otus)) < 0.6)
    X[X.sum(axis=1) == 0, 0] = 5
    nodes = [f"{o}:{float(rng.choice([0.0, rng.uniform(0.01, 1.0)]))!r}" for o in otus]
    while len(nodes) > 1:
        k = 2 if len(nodes) <= 3 else int(rng.integers(2, 4))  # multifurcations; a bifurcating root (scikit-bio)
        picked = [nodes.pop(int(rng.integers(len(nodes)))) for _ in range(k)]
        length = 0.0 if rng.random() < 0.25 else float(rng.uniform(0.01, 1.0))
        nodes.append(f"({','.join(picked)}){int(rng.integers(50, 101))}:{length!r}")
    newick = nodes[0].rsplit(":", 1)[0] + ":0.37;\n"  # a root edge
    return X.astype(np.int64), [f"S{i}.{seed}" for i in range(n_samples)], otus[:n_otus], newick


def unifrac(X, samples, otus, newick):
    skbio = pytest.importorskip("skbio")
    from skbio.diversity import beta_diversity

    tree = skbio.TreeNode.read(io.StringIO(newick), format="newick", convert_underscores=False)
    dm = beta_diversity(
        "weighted_unifrac", X, ids=samples, taxa=otus, tree=tree, normalized=False, validate=True
    )  # integer counts: scikit-bio 0.7 casts weighted UniFrac's counts to int64
    return dm.data


def write_biom_h5(path, X, samples, otus):
    """BIOM 2.1 as its specification lays it out, written with h5py (independent of hdtwd's reader)."""
    import h5py

    by_obs, by_sample = sp.csr_matrix(X.T), sp.csr_matrix(X)
    with h5py.File(path, "w") as f:
        f.attrs["id"], f.attrs["type"] = "No Table ID", "OTU table"
        f.attrs["format-url"] = "http://biom-format.org"
        f.attrs["format-version"] = np.array([2, 1], dtype=np.int32)
        f.attrs["generated-by"], f.attrs["creation-date"] = "tests", "2024-01-01T00:00:00"
        f.attrs["shape"] = np.array([len(otus), len(samples)], dtype=np.int32)
        f.attrs["nnz"] = by_obs.nnz
        for axis, ids, M in (("observation", otus, by_obs), ("sample", samples, by_sample)):
            g = f.create_group(axis)
            g.create_dataset("ids", data=np.array(ids, dtype=object), dtype=h5py.string_dtype())
            g.create_group("metadata")
            g.create_group("group-metadata")
            m = g.create_group("matrix")
            m["data"] = M.data.astype(np.float64)
            m["indices"], m["indptr"] = M.indices.astype(np.int32), M.indptr.astype(np.int32)


def write_biom_json(path, X, samples, otus, dense=False):
    """BIOM 1.0 (JSON) as its specification lays it out."""
    obs = X.T
    data = obs.tolist() if dense else [[int(r), int(c), int(obs[r, c])] for r, c in zip(*np.nonzero(obs))]
    doc = {
        "id": None,
        "format": "Biological Observation Matrix 1.0.0",
        "format_url": "http://biom-format.org",
        "type": "OTU table",
        "generated_by": "tests",
        "date": "2024-01-01T00:00:00",
        "rows": [{"id": o, "metadata": {"taxonomy": ["k__Bacteria"]}} for o in otus],
        "columns": [{"id": s, "metadata": None} for s in samples],
        "matrix_type": "dense" if dense else "sparse",
        "matrix_element_type": "int",
        "shape": [len(otus), len(samples)],
        "data": data,
    }
    path.write_text(json.dumps(doc))


def write_otu_tsv(path, X, samples, otus, taxonomy=True):
    """QIIME's classic OTU table (``biom convert --to-tsv``): comment, ``#OTU ID`` header, one row per OTU."""
    lines = ["# Constructed from biom file", "\t".join(["#OTU ID", *samples] + (["taxonomy"] if taxonomy else []))]
    for j, o in enumerate(otus):
        lines.append(
            "\t".join([o, *(f"{v:.1f}" for v in X[:, j])] + (["k__Bacteria; p__Firmicutes"] if taxonomy else []))
        )
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("kind", ["h5", "json-sparse", "json-dense", "tsv", "tsv-no-taxonomy", "biom-format"])
def test_microbiome_tables_read_as_samples_by_otus(tmp_path, kind):
    X, samples, otus, _ = otu_case(1)
    if kind == "biom-format":  # the reference implementation's own writer, where installed
        biom = pytest.importorskip("biom")
        import h5py

        p = tmp_path / "t.biom"
        with h5py.File(p, "w") as f:
            biom.Table(X.T.astype(float), otus, samples).to_hdf5(f, "tests")
    elif kind == "h5":
        write_biom_h5(p := tmp_path / "t.biom", X, samples, otus)
    elif kind.startswith("json"):
        write_biom_json(p := tmp_path / "t.biom", X, samples, otus, dense=kind == "json-dense")
    else:
        write_otu_tsv(p := tmp_path / "otu_table.tsv", X, samples, otus, taxonomy=kind == "tsv")
    md = read_matrix(p)
    assert md.sample_names == samples and md.feature_names == otus
    dense = md.X.toarray() if sp.issparse(md.X) else md.X
    assert np.array_equal(dense, X)
    with pytest.raises(ParameterError, match="transpose does not apply"):
        read_matrix(p, transpose=True)


@pytest.mark.parametrize("kind", ["h5", "json-sparse", "tsv"])
@pytest.mark.parametrize("seed", [2, 5])
def test_twd_on_a_given_newick_equals_scikit_bio_weighted_unifrac(tmp_path, kind, seed):
    """The round trip a QIIME user makes: table + tree in, sample-by-sample distances out, named by sample id."""
    X, samples, otus, newick = otu_case(seed)
    expected = unifrac(X, samples, otus, newick)
    (tmp_path / "T.nwk").write_text(newick)
    if kind == "h5":
        write_biom_h5(p := tmp_path / "t.biom", X, samples, otus)
    elif kind == "json-sparse":
        write_biom_json(p := tmp_path / "t.biom", X, samples, otus)
    else:
        write_otu_tsv(p := tmp_path / "otu.tsv", X, samples, otus)
    run_hdtwd("distance", p, "--tree", tmp_path / "T.nwk", "-o", tmp_path / "D.csv", "-q")
    rows = list(csv.reader((tmp_path / "D.csv").open()))
    assert rows[0][1:] == samples and [r[0] for r in rows[1:]] == samples
    D = np.array([[float(v) for v in r[1:]] for r in rows[1:]])
    assert np.abs(D - expected).max() <= 1e-12 * max(1.0, float(np.abs(expected).max()))
    assert np.abs(expected).max() > 0.1  # distances that could differ


def test_qiime_otu_table_refuses_no_header(tmp_path):
    X, samples, otus, _ = otu_case(3)
    write_otu_tsv(p := tmp_path / "otu.tsv", X, samples, otus)
    with pytest.raises(ParameterError, match="marks the header of a QIIME OTU table"):
        read_matrix(p, header=False)


@pytest.mark.parametrize(
    "doc, message",
    [
        ("not json", "not a BIOM file: neither HDF5"),
        ('{"a": 1}', "needs 'rows', 'columns', 'data', 'matrix_type'"),
        (
            '{"rows": [{"id": "o1"}], "columns": [{"id": "s1"}], "shape": [2, 1], "matrix_type": "sparse", "data": []}',
            "BIOM shape [2, 1] does not match its 1 rows and 1 columns",
        ),
        (
            '{"rows": [{"id": "o1"}], "columns": [{"id": "s1"}], "matrix_type": "sparse", "data": [[0, 3, 1]]}',
            "outside the 1 x 1 table",
        ),
        (
            '{"rows": [{"id": "o1"}], "columns": [{"id": "s1"}], "matrix_type": "sparse", '
            '"data": [[0, 0, 1], [0, 0, 2]]}',
            "one position twice",
        ),
        (
            '{"rows": [{"id": "o1"}], "columns": [{"id": "s1"}], "matrix_type": "dense", "data": [["x"]]}',
            "not a table of numbers",
        ),
    ],
)
def test_malformed_biom_json_is_one_error(tmp_path, doc, message):
    p = tmp_path / "t.biom"
    p.write_text(doc)
    with pytest.raises(InputError, match=re.escape(message)):
        read_matrix(p)


def test_biom_h5_with_wrong_shape_or_missing_ids_is_one_error(tmp_path):
    import h5py

    X, samples, otus, _ = otu_case(4)
    write_biom_h5(p := tmp_path / "t.biom", X, samples, otus)
    with h5py.File(p, "r+") as f:
        f.attrs["shape"] = np.array([len(otus) + 1, len(samples)], dtype=np.int32)
    with pytest.raises(InputError, match="does not match its 14 observation and 9 sample ids"):
        read_matrix(p)
    with h5py.File(p, "r+") as f:
        del f["sample/ids"]
    with pytest.raises(InputError, match="not a BIOM 2 file: no sample/ids"):
        read_matrix(p)


def test_biom_from_standard_input(tmp_path):
    X, samples, otus, _ = otu_case(6)
    write_biom_json(p := tmp_path / "t.biom", X, samples, otus)
    write_biom_h5(q := tmp_path / "t2.biom", X, samples, otus)
    run_hdtwd("distance", "-", "-o", tmp_path / "A.csv", "-q", input=p.read_bytes())  # JSON: sniffed
    run_hdtwd("distance", "-", "--format", "biom", "-o", tmp_path / "B.csv", "-q", input=q.read_bytes())
    assert (tmp_path / "A.csv").read_text() == (tmp_path / "B.csv").read_text()
    assert (tmp_path / "A.csv").read_text().splitlines()[0] == "," + ",".join(samples)
