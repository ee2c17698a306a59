""".h5ad inputs read with h5py in AnnData's on-disk layout (io/_h5ad.py) give what anndata gives.

Every variant a command can read (dense / CSR / CSC ``X``, ``raw.X``, a layer, string and
categorical obs columns with missing values) is read twice: by the h5py reader and by
``anndata.read_h5ad`` (``keep_adata=True`` takes anndata's path), and must agree in values, types
and names. Layouts the h5py reader does not know go to anndata; ``hdtwd distance`` on an ``.h5ad``
does not import anndata at all (its import is the second most of a distance command's start).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from hdtwd_cli.errors import InputError
from hdtwd_cli.io import read_matrix

anndata = pytest.importorskip("anndata")
pd = pytest.importorskip("pandas")


def _adata(kind: str) -> object:
    rng = np.random.default_rng(3)
    X = rng.poisson(1.5, (30, 12)).astype(np.float32)
    X[:, 0] += 1
    if kind == "csr":
        X = sp.csr_matrix(X.astype(np.int32))
    elif kind == "csc":
        X = sp.csc_matrix(X.astype(np.float64))
    labels = rng.choice(["alpha", "beta", "gamma"], 30).astype(object)
    labels[4] = None
    ad = anndata.AnnData(
        X=X,
        obs=pd.DataFrame(
            {
                "cat": pd.Categorical(labels),
                "text": [f"t{i % 4}" for i in range(30)],
                "number": np.arange(30) * 0.5,
            },
            index=[f"cell{i}" for i in range(30)],
        ),
        var=pd.DataFrame(index=[f"gene{j}" for j in range(12)]),
    )
    ad.layers["counts"] = sp.csr_matrix(rng.poisson(2.0, (30, 12)).astype(np.float64))
    ad.raw = anndata.AnnData(
        X=rng.random((30, 15)), obs=ad.obs[[]], var=pd.DataFrame(index=[f"raw{j}" for j in range(15)])
    )
    return ad


def _same(a, b) -> None:
    assert sp.issparse(a.X) == sp.issparse(b.X)
    A = a.X.toarray() if sp.issparse(a.X) else a.X
    B = b.X.toarray() if sp.issparse(b.X) else b.X
    assert A.dtype == B.dtype and A.tobytes() == B.tobytes()
    assert a.sample_names == b.sample_names and a.feature_names == b.feature_names
    assert sorted(a.obs) == sorted(b.obs)
    for k in a.obs:
        assert a.obs[k].tolist() == b.obs[k].tolist()


@pytest.mark.parametrize("kind", ["dense", "csr", "csc"])
@pytest.mark.parametrize("part", ["X", "raw", "layer"])
def test_the_h5py_reader_gives_anndatas_values_and_names(tmp_path, kind, part):
    p = tmp_path / "a.h5ad"
    _adata(kind).write_h5ad(p)
    kw = {"use_raw": part == "raw", "layer": "counts" if part == "layer" else None, "obs_keys": ("cat", "text")}
    direct = read_matrix(p, **kw)
    assert direct.adata is None
    _same(direct, read_matrix(p, keep_adata=True, **kw))
    assert "nan" in direct.obs["cat"].tolist()  # pandas' string of a missing category


def test_an_obs_column_the_h5py_reader_does_not_know_goes_to_anndata(tmp_path):
    p = tmp_path / "a.h5ad"
    _adata("csr").write_h5ad(p)
    md = read_matrix(p, obs_keys=("number",))  # a float column: anndata's (pandas') strings
    assert md.obs["number"].tolist() == [str(v) for v in np.arange(30) * 0.5]


def test_an_untagged_matrix_goes_to_anndata(tmp_path):
    import h5py

    p = tmp_path / "a.h5ad"
    _adata("dense").write_h5ad(p)
    with h5py.File(p, "r+") as f:  # the dense X of an anndata older than the encoding tags
        for k in ("encoding-type", "encoding-version"):
            del f["X"].attrs[k]
    try:
        expected = read_matrix(p, keep_adata=True)
    except InputError as e:
        with pytest.raises(InputError) as got:
            read_matrix(p)
        assert got.value.message == e.message
    else:
        _same(read_matrix(p), expected)


def test_missing_parts_are_named_as_before(tmp_path):
    p = tmp_path / "a.h5ad"
    ad = _adata("dense")
    ad.raw = None
    ad.write_h5ad(p)
    with pytest.raises(InputError, match="AnnData has no layer 'nope' \\(layers: counts\\)"):
        read_matrix(p, layer="nope")
    with pytest.raises(InputError, match="AnnData has no .raw"):
        read_matrix(p, use_raw=True)
    with pytest.raises(InputError, match="obs has no column 'nope'"):
        read_matrix(p, obs_keys=("nope",))


def test_negative_values_hint_where_else_the_file_holds_a_matrix(tmp_path):
    p = tmp_path / "a.h5ad"
    ad = _adata("dense")
    ad.X = ad.X - 5.0
    ad.write_h5ad(p)
    for keep in (False, True):
        with pytest.raises(InputError, match="negative values.*also holds raw.X .*and layers 'counts'"):
            read_matrix(p, keep_adata=keep)


def test_distance_on_an_h5ad_does_not_import_anndata(tmp_path):
    from hdtwd_cli import distances, learn_tree

    p = tmp_path / "a.h5ad"
    ad = _adata("csr")
    ad.write_h5ad(p)
    X = ad.X.toarray().astype(np.float64)
    tree = learn_tree(X, list(ad.var_names))
    tree.write(str(tmp_path / "T.h5"))
    code = (
        "import atexit, sys\nfrom hdtwd_cli.cli._app import main\n"
        "sys.argv = ['hdtwd', 'distance', sys.argv[1], '--tree', sys.argv[2], '-o', sys.argv[3], '-q']\n"
        "atexit.register(lambda: sys.stderr.write(repr([m for m in ('anndata', 'pandas') if m in sys.modules])))\n"
        "main()\n"
    )
    out = tmp_path / "D.npy"
    r = subprocess.run(
        [sys.executable, "-c", code, str(p), str(tmp_path / "T.h5"), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == "[]", r.stderr
    np.testing.assert_array_equal(np.load(out), distances(X, tree, feature_names=list(ad.var_names)))
