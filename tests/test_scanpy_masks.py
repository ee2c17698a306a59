"""scanpy's conventions: ``var["highly_variable"]`` selects the features, as ``sc.pp.pca``'s ``mask_var``.

``hd.neighbors`` and ``hd.sample_hierarchy`` after ``sc.pp.highly_variable_genes`` give what they give on
``adata[:, adata.var.highly_variable]`` (the same graph, bit for bit); ``mask_var=None`` uses every gene;
the choice is recorded in ``uns``. The command line does the same on an ``.h5ad`` input (``--mask-var``),
the usage page's scanpy example runs as written, and the Newick warning appears only where no ``.h5``
tree is written by the same command.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO, run_hdtwd

import hdtwd_cli as hd
from hdtwd_cli.errors import HdtwdError

anndata = pytest.importorskip("anndata")
sc = pytest.importorskip("scanpy")


def _hvg_adata(n: int = 90, m: int = 70, top: int = 25) -> anndata.AnnData:
    """Log-normalised counts of three groups, ``top`` genes marked highly variable, ``raw`` the same values."""
    rng = np.random.default_rng(7)
    rates = rng.gamma(1.0, 1.0, (3, m))
    X = rng.poisson(rates[np.arange(n) % 3] * 2.0).astype(np.float32)
    X[:, 0] += 1
    ad = anndata.AnnData(X)
    ad.obs_names = [f"c{i}" for i in range(n)]
    ad.var_names = [f"g{j}" for j in range(m)]
    sc.pp.normalize_total(ad)
    sc.pp.log1p(ad)
    ad.raw = ad.copy()
    sc.pp.highly_variable_genes(ad, n_top_genes=top)
    assert int(ad.var["highly_variable"].sum()) == top
    return ad


def _same_graph(a: anndata.AnnData, b: anndata.AnnData, key: str = "") -> None:
    for name in ("distances", "connectivities"):
        A, B = a.obsp[key + name], b.obsp[key + name]
        assert (A != B).nnz == 0 and A.dtype == B.dtype, name


def test_neighbors_after_hvg_is_neighbors_on_the_hvg_subset():
    ad = _hvg_adata()
    subset = ad[:, ad.var["highly_variable"]].copy()
    del subset.var["highly_variable"]
    hd.neighbors(ad, n_neighbors=10)
    hd.neighbors(subset, n_neighbors=10)
    _same_graph(ad, subset)
    assert (ad.obsm["X_hdtwd"] == subset.obsm["X_hdtwd"]).all()
    params = ad.uns["neighbors"]["params"]
    assert params["mask_var"] == "highly_variable" and "mask_var" not in subset.uns["neighbors"]["params"]
    record = json.loads(params["hdtwd"])
    assert (record["mask_var"], record["n_features"], record["n_features_read"]) == ("highly_variable", 25, 70)


def test_mask_var_none_uses_every_gene_and_differs():
    ad = _hvg_adata()
    every = ad.copy()
    del every.var["highly_variable"]
    hd.neighbors(ad, n_neighbors=10, mask_var=None, key_added="all")
    hd.neighbors(every, n_neighbors=10, key_added="all")
    _same_graph(ad, every, "all_")
    assert json.loads(ad.uns["all"]["params"]["hdtwd"])["n_features"] == 70
    hd.neighbors(ad, n_neighbors=10)
    assert (ad.obsp["distances"] != ad.obsp["all_distances"]).nnz > 0


def test_mask_var_column_array_raw_and_errors():
    ad = _hvg_adata()
    mask = ad.var["highly_variable"].to_numpy()
    ad.var["mine"] = mask
    a, b, c = ad.copy(), ad.copy(), ad.copy()
    hd.neighbors(a, n_neighbors=10)
    hd.neighbors(b, n_neighbors=10, mask_var="mine")
    hd.neighbors(c, n_neighbors=10, mask_var=mask)
    _same_graph(a, b)
    _same_graph(a, c)
    assert c.uns["neighbors"]["params"]["mask_var"] == "mask"
    # raw.X has every gene: the mask is matched by name, the values are raw's (here the same)
    d = ad.copy()
    hd.neighbors(d, n_neighbors=10, use_raw=True)
    _same_graph(a, d)
    with pytest.raises(HdtwdError, match="'nope' is not a column of adata.var"):
        hd.neighbors(ad.copy(), mask_var="nope")
    with pytest.raises(HdtwdError, match="keeps none"):
        hd.neighbors(ad.copy(), mask_var=np.zeros(ad.n_vars, dtype=bool))
    with pytest.raises(HdtwdError, match="not booleans"):
        hd.neighbors(ad.copy(), mask_var=np.arange(ad.n_vars))


def test_sample_hierarchy_uses_the_hvgs_and_records_them():
    ad = _hvg_adata(n=50, m=40, top=15)
    subset = ad[:, ad.var["highly_variable"]].copy()
    del subset.var["highly_variable"]
    hd.sample_hierarchy(ad, n_clusters=3)
    hd.sample_hierarchy(subset, n_clusters=3)
    assert np.array_equal(ad.obsp["hdtwd_joint_distances"], subset.obsp["hdtwd_joint_distances"])
    assert ad.uns["hdtwd_joint"]["mask_var"] == "highly_variable" and ad.uns["hdtwd_joint"]["n_features"] == 15
    assert "mask_var" not in subset.uns["hdtwd_joint"]
    hd.sample_hierarchy(ad, mask_var=None, key_added="every")
    assert ad.uns["every"]["n_features"] == 40 and "mask_var" not in ad.uns["every"]


def test_the_command_uses_the_hvgs_of_an_h5ad(tmp_path):
    ad = _hvg_adata()
    ad.write_h5ad(tmp_path / "hvg.h5ad")
    subset = ad[:, ad.var["highly_variable"]].copy()
    del subset.var["highly_variable"]
    subset.write_h5ad(tmp_path / "sub.h5ad")
    run_hdtwd("distance", tmp_path / "hvg.h5ad", "-o", tmp_path / "A.npy", "-q")
    run_hdtwd("distance", tmp_path / "sub.h5ad", "-o", tmp_path / "B.npy", "-q")
    run_hdtwd("distance", tmp_path / "hvg.h5ad", "-o", tmp_path / "C.npy", "-q", "--mask-var", "none")
    A, B, C = (np.load(tmp_path / f"{x}.npy") for x in "ABC")
    assert A.tobytes() == B.tobytes() and A.tobytes() != C.tobytes()
    # the kNN graph into the input .h5ad: the same graph as hd.neighbors, the choice recorded
    run_hdtwd("distance", tmp_path / "hvg.h5ad", "--knn", "10", "-o", tmp_path / "K.h5ad", "-q")
    k = anndata.read_h5ad(tmp_path / "K.h5ad")
    assert k.n_vars == 70 and k.uns["neighbors"]["params"]["mask_var"] == "highly_variable"
    hd.neighbors(ad, n_neighbors=10)
    assert (k.obsp["distances"] != ad.obsp["distances"]).nnz == 0
    bad = run_hdtwd("distance", tmp_path / "hvg.h5ad", "-o", tmp_path / "D.npy", "--mask-var", "nope", check=False)
    assert bad.returncode == 2 and "--mask-var nope" in bad.stderr.decode() and not (tmp_path / "D.npy").exists()
    np.save(tmp_path / "x.npy", np.ones((5, 4)))
    csv = run_hdtwd("distance", tmp_path / "x.npy", "-o", tmp_path / "E.npy", "--mask-var", "x", check=False)
    assert csv.returncode == 2 and "--mask-var selects features of an .h5ad input" in csv.stderr.decode()


def test_the_mask_is_read_without_anndata(tmp_path):
    ad = _hvg_adata(n=40, m=30, top=10)
    ad.write_h5ad(tmp_path / "a.h5ad")
    code = (
        "import atexit, sys\nfrom hdtwd_cli.cli._app import main\n"
        "sys.argv = ['hdtwd', 'distance', sys.argv[1], '-o', sys.argv[2], '-v']\n"
        "atexit.register(lambda: sys.stderr.write(repr([m for m in ('anndata', 'pandas') if m in sys.modules])))\n"
        "main()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "a.h5ad"), str(tmp_path / "D.npy")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "using the 10 of 30 features var['highly_variable'] marks" in r.stderr
    assert r.stderr.endswith("[]"), r.stderr


def test_the_usage_pages_scanpy_example_runs(tmp_path):
    usage = (REPO / "docs" / "usage.md").read_text()
    line = next(ln for ln in usage.splitlines() if "neighbors_key=" in ln and ln.startswith("hdtwd "))
    command, python = line.split("  # then ")
    key = re.search(r'neighbors_key="([^"]+)"', python).group(1)
    argv = command.split()[1:]
    argv = [
        str(REPO / a) if a.startswith("sample_data/") else str(tmp_path / a) if a.endswith(".h5ad") else a for a in argv
    ]
    run_hdtwd(*argv, "-q")
    out = anndata.read_h5ad(tmp_path / "cells_knn.h5ad")
    sc.tl.umap(out, neighbors_key=key, random_state=0)
    assert out.obsm["X_umap"].shape == (out.n_obs, 2) and np.isfinite(out.obsm["X_umap"]).all()


def test_the_newick_warning_only_without_an_h5_tree(tmp_path):
    cells = REPO / "sample_data" / "cells.h5ad"
    both = run_hdtwd(
        "distance", cells, "-o", tmp_path / "D.npy", "--save-tree", tmp_path / "t.h5", "--newick", tmp_path / "t.nwk"
    )
    assert "Newick" not in both.stderr.decode() and (tmp_path / "t.nwk").exists()
    alone = run_hdtwd("distance", cells, "-o", tmp_path / "D.npy", "--newick", tmp_path / "u.nwk")
    assert "the Newick file carries no feature weights" in alone.stderr.decode()
    nexus = run_hdtwd(
        "distance", cells, "-o", tmp_path / "D.npy", "--save-tree", tmp_path / "t.nex", "--newick", tmp_path / "v.nwk"
    )
    assert "the Newick file carries no feature weights" in nexus.stderr.decode()
