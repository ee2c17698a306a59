"""The public Python API: scanpy's semantics field by field, the README's Python example,
one result whatever the face (API, CLI), and the defects found by using hdtwd as a scanpy client."""

import doctest
import json
import os
import re
import subprocess
import sys

import anndata
import h5py
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import REPO, SAMPLE, run_hdtwd

import hdtwd_cli as hd

sc = pytest.importorskip("scanpy")


def cells():
    return anndata.read_h5ad(SAMPLE / "cells.h5ad")


def clustered(n_groups=6, per_group=30, genes_per_group=8, seed=0):
    """Cells of ``n_groups`` types with disjoint marker genes: a kNN graph of ``n_groups`` components."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n_groups * per_group, n_groups * genes_per_group), dtype=np.float32)
    for g in range(n_groups):
        X[g * per_group : (g + 1) * per_group, g * genes_per_group : (g + 1) * genes_per_group] = (
            rng.poisson(4.0, size=(per_group, genes_per_group)) + 1
        )
    ad = anndata.AnnData(X)
    ad.obs["group"] = np.repeat([f"t{g}" for g in range(n_groups)], per_group)
    return ad


# ------------------------------------------------------------------ the API's shape
def test_public_names_and_doctests():
    assert set(hd.__all__) >= {
        "TreeParams",
        "Tree",
        "learn_tree",
        "tree_vectors",
        "distances",
        "neighbors",
        "classify",
        "HdtwdError",
        "HdtwdWarning",
    }
    for name in hd.__all__:
        assert getattr(hd, name) is not None
    from hdtwd_cli._api import _classify, _distances, _learn, _scanpy
    from hdtwd_cli.tree import _params, _tree

    for mod in (_classify, _distances, _learn, _scanpy, _params, _tree):
        res = doctest.testmod(mod)
        assert res.failed == 0 and res.attempted > 0, mod.__name__


def test_bare_params_are_the_library_default_and_presets_differ():
    assert hd.TreeParams() == hd.TreeParams.from_preset("default")
    paper = hd.TreeParams.from_preset("paper")
    assert (paper.linkage, paper.edge_weights, paper.weighting) == ("single", "midpoint", "none")
    assert hd.TreeParams.from_preset("paper", scales=3).scales == 3
    assert hd.TreeParams.from_preset("default", eps=2.0).landmark_eps is None  # explicit eps: both paths


@pytest.mark.parametrize(
    "bad, argument",
    [
        ({"eps": 0.0}, "eps"),
        ({"scales": -1}, "scales"),
        ({"linkage": "ward"}, "linkage"),
        ({"landmarks": 1}, "landmarks"),
        ({"leaf_length": -1.0}, "leaf_length"),
        ({"transform": "log"}, "transform"),
    ],
)
def test_invalid_params_raise_a_value_error_naming_the_argument(bad, argument):
    with pytest.raises(ValueError) as e:
        hd.TreeParams(**bad)
    assert isinstance(e.value, hd.ParameterError) and e.value.argument == argument
    assert str(e.value).startswith(argument) and "--" not in str(e.value)


def test_library_errors_name_python_arguments_and_the_cli_words_them_as_flags(tmp_path):
    X = cells().X
    with pytest.raises(hd.ParameterError, match=r"^n_neighbors must be"):
        hd.knn_graph(X, n_neighbors=X.shape[0] + 1)
    with pytest.raises(hd.InputError, match="negative"):
        hd.distances(-np.ones((3, 3)))
    with pytest.raises(hd.ParameterError, match="reference maps both sets onto one given tree: give tree"):
        hd.distances(X, reference=X)
    proc = run_hdtwd("distance", SAMPLE / "cells.h5ad", "--knn", "301", "-o", tmp_path / "g.npz", check=False)
    assert (
        proc.returncode == 2 and "--knn must be" in proc.stderr.decode() and "n_neighbors" not in proc.stderr.decode()
    )


def test_one_warning_category(tmp_path):
    tree = hd.learn_tree(cells().X)
    with pytest.warns(hd.HdtwdWarning, match="feature weights"):
        from hdtwd_cli.io._output import write_newick_file

        write_newick_file(str(tmp_path / "t.nwk"), tree)


def test_a_device_or_a_fifo_is_never_replaced_by_an_output(tmp_path):
    """Every writer renames a finished temporary file over its target; over ``/dev/null`` (as root) that made
    /dev/null a regular file. A device or FIFO target is refused before anything is written, as on the
    command line, and stays what it was."""
    import stat

    from hdtwd_cli.io._output import write_newick_file

    tree = hd.learn_tree(cells().X, params=hd.TreeParams(denoise=0))
    fifo = tmp_path / "pipe.nwk"
    os.mkfifo(fifo)
    for target, kind, write in (
        (os.devnull, stat.S_ISCHR, lambda p: write_newick_file(p, tree)),
        (str(fifo), stat.S_ISFIFO, tree.write),
    ):
        assert kind(os.stat(target).st_mode)
        with pytest.raises(hd.OutputError, match="is not a regular file"):
            write(target)
        assert kind(os.stat(target).st_mode), f"{target} was replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe.nwk"]  # no temporary file left


def test_tree_read_write_newick_round_trip(tmp_path):
    ad = cells()
    tree = hd.learn_tree(ad.X, list(ad.var_names), params=hd.TreeParams.from_preset("paper"))
    tree.write(str(tmp_path / "t.h5"))
    tree.write(str(tmp_path / "t.nwk"))
    back_h5, back_nwk = hd.Tree.read(str(tmp_path / "t.h5")), hd.Tree.read(str(tmp_path / "t.nwk"))
    assert tree.to_newick() == (tmp_path / "t.nwk").read_text()
    D = hd.distances(ad.X, tree, feature_names=ad.var_names)
    assert np.array_equal(D, hd.distances(ad.X, back_h5, feature_names=ad.var_names))
    assert np.allclose(D, hd.distances(ad.X, back_nwk, feature_names=ad.var_names), rtol=1e-12, atol=0)


def test_tree_vectors_are_the_l1_embedding_of_the_twd():
    ad = cells()
    tree = hd.learn_tree(ad.X, ad.var_names)
    Y = hd.tree_vectors(tree, ad.X, ad.var_names)
    D = hd.distances(ad.X, tree, feature_names=ad.var_names)
    L1 = np.abs(Y[:40, None, :] - Y[None, :40, :]).sum(-1)
    assert np.allclose(L1, D[:40, :40], rtol=1e-12, atol=1e-15)


# ------------------------------------------------------------------ scanpy, field by field
def test_neighbors_writes_what_sc_pp_neighbors_writes():
    ad = cells()
    before = ad.X.copy()
    assert hd.neighbors(ad, n_neighbors=15) is None
    assert np.array_equal(ad.X, before)
    ref = ad.copy()
    del ref.uns["neighbors"], ref.obsp["distances"], ref.obsp["connectivities"]
    sc.pp.neighbors(ref, n_neighbors=15, use_rep="X_hdtwd", metric="manhattan")  # scanpy on the TWD vectors
    assert set(ad.obsp.keys()) == set(ref.obsp.keys()) == {"distances", "connectivities"}
    for key in ("distances", "connectivities"):
        A, B = ad.obsp[key], ref.obsp[key]
        assert type(A) is type(B) and A.dtype == B.dtype and A.shape == B.shape
        assert ((A != 0) != (B != 0)).nnz == 0  # the same neighbour sets
        assert abs(A - B).max() <= (1e-12 * abs(B).max() if key == "distances" else 1e-6)
    assert np.all(ad.obsp["distances"].getnnz(axis=1) == 14)  # n_neighbors counts the cell itself
    mine, theirs = ad.uns["neighbors"], ref.uns["neighbors"]
    assert {k: v for k, v in mine.items() if k != "params"} == {k: v for k, v in theirs.items() if k != "params"}
    assert {k: v for k, v in mine["params"].items() if k != "hdtwd"} == dict(theirs["params"])
    assert json.loads(mine["params"]["hdtwd"])["tree_source"] == "learned"


def test_connectivities_equal_umaps_fuzzy_simplicial_set():
    from umap.umap_ import fuzzy_simplicial_set

    for k in (2, 5, 15, 40):
        g = hd.knn_graph(cells().X, n_neighbors=k)
        assert np.array_equal(g.indices[:, 0], np.arange(300)) and np.all(g.distances[:, 0] == 0)
        C = g.connectivities()
        R = fuzzy_simplicial_set(sp.coo_matrix((300, 1)), k, None, None, knn_indices=g.indices, knn_dists=g.distances)[
            0
        ].tocsr()
        assert C.dtype == np.float32 == R.dtype
        assert ((C != 0) != (R != 0)).nnz == 0 and abs(C - R).max() <= 1e-6, k


def test_key_added_follows_scanpy():
    ad = cells()
    hd.neighbors(ad, 10, key_added="twd")
    assert {"twd_distances", "twd_connectivities"} <= set(ad.obsp.keys()) and "twd" in ad.uns
    assert ad.uns["twd"]["distances_key"] == "twd_distances"
    hd.neighbors(ad, 10, key_added="neighbors")  # scanpy's tools read obsp['distances'] for this key
    assert ad.uns["neighbors"]["connectivities_key"] == "connectivities" and "connectivities" in ad.obsp
    view = sc.Neighbors(ad, neighbors_key="neighbors")
    assert (view.connectivities != ad.obsp["connectivities"]).nnz == 0


def test_umap_and_leiden_run_on_a_six_component_graph():
    ad = clustered()
    hd.neighbors(ad, n_neighbors=10)
    from scipy.sparse.csgraph import connected_components

    assert connected_components(ad.obsp["connectivities"])[0] == 6
    sc.tl.umap(ad, random_state=0)  # more than 4 components: UMAP's initialisation reads params['metric']
    assert ad.obsm["X_umap"].shape == (180, 2) and np.all(np.isfinite(ad.obsm["X_umap"]))
    pytest.importorskip("igraph")
    sc.tl.leiden(ad, flavor="igraph", n_iterations=2, random_state=0)
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(ad.obs["group"], ad.obs["leiden"]) == 1.0


# ------------------------------------------------------------------ one result whatever the face
def test_api_and_cli_give_identical_bits(tmp_path):
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "-o", tmp_path / "D.npy", "--save-tree", tmp_path / "T.h5")
    run_hdtwd("distance", SAMPLE / "cells.h5ad", "--knn", "15", "-o", tmp_path / "G.h5ad")
    ad = cells()
    assert np.array_equal(np.load(tmp_path / "D.npy"), hd.distances(ad.X, feature_names=ad.var_names))
    tree = hd.learn_tree(ad.X, ad.var_names)
    stored = hd.Tree.read(str(tmp_path / "T.h5"))
    assert np.array_equal(tree.parent, stored.parent) and np.array_equal(tree.length, stored.length)
    hd.neighbors(ad, 15)
    out = anndata.read_h5ad(tmp_path / "G.h5ad")
    for key in ("distances", "connectivities"):
        A, B = ad.obsp[key], out.obsp[key]
        assert np.array_equal(A.indptr, B.indptr) and np.array_equal(A.indices, B.indices)
        assert np.array_equal(A.data, B.data) and A.dtype == B.dtype
    assert np.array_equal(ad.obsm["X_hdtwd"], out.obsm["X_hdtwd"])


def test_docs_python_example_runs(tmp_path):
    text = (REPO / "docs" / "python.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "docs/python.md has Python examples"
    code = "import matplotlib\nmatplotlib.use('Agg')\n" + "\n".join(blocks)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert (tmp_path / "pbmc68k_umap.png").stat().st_size > 10_000


# ------------------------------------------------- defects found by using hdtwd as a scanpy client, each a test
def test_transpose_with_an_h5ad_output(tmp_path):
    ad = cells()
    genes_x_cells = anndata.AnnData(ad.X.T.copy(), obs=ad.var.copy(), var=ad.obs.copy())
    genes_x_cells.write_h5ad(tmp_path / "gxc.h5ad")
    run_hdtwd("distance", tmp_path / "gxc.h5ad", "--transpose", "--knn", "10", "-o", tmp_path / "G.h5ad")
    out = anndata.read_h5ad(tmp_path / "G.h5ad")
    assert out.shape == (300, 64) and list(out.obs_names) == list(ad.obs_names) and "cell_type" in out.obs
    hd.neighbors(ad, 10)
    assert (out.obsp["distances"] != ad.obsp["distances"]).nnz == 0
    assert json.loads(out.uns["neighbors"]["params"]["hdtwd"])["transpose"] is True


def test_h5ad_from_standard_input_keeps_every_field(tmp_path):
    ad = cells()
    ad.layers["counts"] = ad.X.copy()
    ad.var["symbol"] = [f"S{j}" for j in range(ad.n_vars)]
    ad.write_h5ad(tmp_path / "in.h5ad")
    with open(tmp_path / "in.h5ad", "rb") as fh:
        proc = subprocess.run(
            [sys.executable, "-m", "hdtwd_cli", "distance", "-", "--knn", "10", "-o", str(tmp_path / "G.h5ad")],
            stdin=fh,
            capture_output=True,
        )
    assert proc.returncode == 0, proc.stderr.decode()
    out = anndata.read_h5ad(tmp_path / "G.h5ad")
    assert "cell_type" in out.obs and "symbol" in out.var and "counts" in out.layers


def test_knn_beyond_n_is_refused_before_the_tree_is_learned(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import hdtwd_cli._api._learn as api
    import hdtwd_cli.cli._app as cli

    def never(*a, **k):
        raise AssertionError("a tree was learned before --knn was checked")

    monkeypatch.setattr(api, "learn_trees", never)
    for k in ("300", "301", "1"):
        res = CliRunner().invoke(
            cli.app, ["distance", str(SAMPLE / "cells.h5ad"), "--knn", k, "-o", str(tmp_path / "g.npz")]
        )
        if k == "300":
            assert "AssertionError" in str(res.exception) or "a tree was learned" in res.output
        else:
            assert res.exit_code == 2 and "--knn must be an integer between 2 and" in res.output, res.output
    assert not (tmp_path / "g.npz").exists()


def test_outputs_record_how_the_input_was_read(tmp_path):
    ad = cells()
    ad.layers["counts"] = ad.X.copy()
    ad.raw = ad.copy()
    ad.write_h5ad(tmp_path / "in.h5ad")
    run_hdtwd("distance", tmp_path / "in.h5ad", "--use-raw", "-o", tmp_path / "D.h5", "--save-tree", tmp_path / "T.h5")
    run_hdtwd("distance", tmp_path / "in.h5ad", "--layer", "counts", "--knn", "5", "-o", tmp_path / "G.h5ad")
    for f in ("D.h5", "T.h5"):
        with h5py.File(tmp_path / f) as h:
            assert bool(h.attrs["use_raw"]) is True and bool(h.attrs["transpose"]) is False, f
    rec = json.loads(anndata.read_h5ad(tmp_path / "G.h5ad").uns["neighbors"]["params"]["hdtwd"])
    assert rec["layer"] == "counts" and rec["use_raw"] is False


def test_negative_values_error_points_to_raw_and_layers(tmp_path):
    ad = cells()
    ad.raw = ad.copy()
    ad.layers["counts"] = ad.X.copy()
    ad.X = ad.X - ad.X.mean(axis=0)  # scaled, as after sc.pp.scale
    ad.write_h5ad(tmp_path / "scaled.h5ad")
    proc = run_hdtwd("distance", tmp_path / "scaled.h5ad", "-o", tmp_path / "D.npy", check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1
    assert "negative values" in err and "--use-raw" in err and "--layer NAME" in err and "'counts'" in err
    assert not (tmp_path / "D.npy").exists()
    hd.neighbors(ad, 10)  # the API's use_raw=None reads raw.X when X is scaled
    assert json.loads(ad.uns["neighbors"]["params"]["hdtwd"])["input"] == "raw.X"


def test_a_named_tree_without_feature_names_points_to_feature_names_first():
    """hd.distances(X, tree=T) for a tree learned with gene names must say what to pass."""
    X = np.asarray(cells().X)
    names = [f"GENE{j:02d}" for j in range(X.shape[1])]
    T = hd.learn_tree(X, names)
    with pytest.raises(hd.InputError) as e:
        hd.distances(X, tree=T)
    msg = str(e.value)
    assert msg.index("give feature_names") < msg.index("unseen root"), msg
    assert "'f0'" in msg and "'GENE" in msg
    # a partial mismatch with real names keeps the message that names the unknown features
    X2, names2 = np.c_[X, np.ones(X.shape[0])], names + ["EXTRA"]
    with pytest.raises(hd.InputError, match="1 feature\\(s\\) with mass are not leaves of the tree: 'EXTRA'"):
        hd.distances(X2, tree=T, feature_names=names2)


# --- the door: object arguments of the wrong kind -----------------------------------------------------


def _door_cases():
    X = np.random.default_rng(0).random((12, 5))
    names = [f"g{i}" for i in range(5)]
    return (
        X,
        names,
        [
            ("learn_tree", lambda T: hd.learn_tree(X, names, params={"eps": 1.0}), "params"),
            ("embed", lambda T: hd.embed(X, names, params="paper"), "params"),
            ("decode_tree", lambda T: hd.decode_tree("embedding.h5"), "stored"),
            ("distances", lambda T: hd.distances(X, names), "tree"),  # names given where the tree goes
            ("distances", lambda T: hd.distances(X, T, T), "reference"),
            ("distance_vectors", lambda T: hd.distance_vectors(X, params="default"), "params"),
            ("tree_vectors", lambda T: hd.tree_vectors(X, T), "tree"),  # the arguments swapped
            ("knn_graph", lambda T: hd.knn_graph(X, 3, tree="tree.h5"), "tree"),
            ("neighbors", lambda T: hd.neighbors(X), "adata"),
            ("sample_hierarchy", lambda T: hd.sample_hierarchy(X), "adata"),
            ("classify", lambda T: hd.classify(X, [0] * 6 + [1] * 6, params="paper"), "params"),
            ("classify_methods", lambda T: hd.classify_methods(family="trees"), "family"),
            ("competitor_trees", lambda T: hd.competitor_trees(X, names, method="mst", params="paper"), "params"),
            ("competitor_trees", lambda T: hd.competitor_trees(X, names, method="hdtwd"), "method"),
            ("competitor_trees", lambda T: hd.competitor_trees(X, names, method="wqtwd"), "method"),  # fitted
            ("learn_joint", lambda T: hd.learn_joint(X, names, joint="filtered"), "joint"),
            ("distances", lambda T: hd.distances([[1.0, 2.0], [3.0]]), "X"),
            ("distances", lambda T: hd.distances([["a", "b"], ["c", "d"]]), "X"),
        ],
    )


def test_an_argument_of_the_wrong_kind_is_one_parameter_error_naming_it_before_any_work():
    """Every public function: a swapped or mistyped object argument (a list for the tree, a string for the
    parameters, an array for the AnnData) is a ParameterError naming that argument and what it must be,
    never an AttributeError from inside a stage."""
    X, names, cases = _door_cases()
    tree = hd.learn_tree(X, names)
    covered = set()
    for function, call, argument in cases:
        with pytest.raises(hd.ParameterError) as e:
            call(tree)
        assert e.value.argument == argument and str(e.value).startswith(f"{argument} must be "), (function, e.value)
        covered.add(function)
    public = {n for n in hd.__all__ if callable(getattr(hd, n)) and not isinstance(getattr(hd, n), type)}
    assert covered == public - {"pl"}


def test_every_public_function_passes_the_door_and_the_door_knows_every_object_argument():
    """The door (``_api._door.at_the_door``) wraps each public function, keeps its signature and
    documentation, and every parameter that takes one of hdtwd's objects is one it checks."""
    import inspect

    from hdtwd_cli._api._door import KINDS

    objects = {"tree", "params", "joint", "stored", "adata"}
    assert set(KINDS) == objects
    for name in hd.__all__:
        fn = getattr(hd, name)
        if not inspect.isfunction(fn):
            continue
        assert fn.__wrapped__.__doc__ == fn.__doc__ and fn.__doc__, name
        assert inspect.signature(fn) == inspect.signature(fn.__wrapped__), name
        assert set(inspect.signature(fn).parameters) & objects <= set(KINDS), name


# --- classify's methods and the competitors' trees --------------------------------------------------------


def test_classify_methods_lists_the_registry_by_family():
    """Every method is in exactly one family's list, in the same order as the whole list, and ``classify``
    accepts each tree family's methods by name."""
    every = hd.classify_methods()
    families = ["hdtwd", "star", "baseline", "tree", "fitted", "flow", "ot", "joint", "learner"]
    parts = {f: hd.classify_methods(family=f) for f in families}
    assert sorted(sum(parts.values(), [])) == sorted(every) and len(every) == len(set(every))
    for part in parts.values():
        assert part == [m for m in every if m in part]
    assert parts["star"] == ["star"] and "mst" in parts["tree"] and "cosine" in parts["baseline"]


def test_competitor_trees_read_hdtwds_histograms_on_their_own_tree():
    """``competitor_trees``: every column a leaf (an all-zero one from the root), the same bytes for the same
    seed; the star tree's TWD is the L1 distance between the samples' histograms (an independent formula)."""
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(3)
    X = rng.poisson(1.5, size=(30, 10)).astype(float)
    X[:, 4] = 0.0
    names = [f"g{j}" for j in range(10)]
    params = hd.TreeParams(weighting="none", denoise=0)
    (star,) = hd.competitor_trees(X, names, method="star", params=params)
    P = X / X.sum(axis=1, keepdims=True)
    assert np.allclose(hd.distances(X, star, feature_names=names), cdist(P, P, "cityblock"), atol=1e-12)
    for method in ("mst", "quadtree"):
        trees = hd.competitor_trees(X, names, method=method, params=params)
        again = hd.competitor_trees(X, names, method=method, params=params)
        for t, u in zip(trees, again, strict=True):
            assert sorted(t.leaf_names) == sorted(names)
            assert t.parent.tobytes() == u.parent.tobytes() and t.length.tobytes() == u.length.tobytes()
