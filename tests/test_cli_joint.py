"""``hdtwd distance --joint`` (the joint hierarchies on the command line) and ``hd.sample_hierarchy``."""

import numpy as np
import pytest
from conftest import run_hdtwd

import hdtwd_cli as hd

N, M = 60, 15


def _data(seed=0):
    X = np.random.default_rng(seed).poisson(2.0, size=(N, M)).astype(np.float64)
    return X, [f"c{i}" for i in range(N)], [f"gene{j}" for j in range(M)]


def _csv(tmp_path, name="x.csv"):
    X, cells, genes = _data()
    p = tmp_path / name
    with open(p, "w") as fh:
        fh.write(",".join(["cell"] + genes) + "\n")
        for c, row in zip(cells, X):
            fh.write(",".join([c] + [str(int(v)) for v in row]) + "\n")
    return p


def test_joint_distance_is_learn_joint_and_its_stored_tree(tmp_path):
    x = _csv(tmp_path)
    run_hdtwd(
        "distance", x, "--joint", "-o", tmp_path / "D.npy", "--save-tree", tmp_path / "T.h5",
        "--samples-tree", tmp_path / "S.nwk",
    )  # fmt: skip
    X, cells, genes = _data()
    J = hd.learn_joint(X, genes, sample_names=cells)
    D = np.load(tmp_path / "D.npy")
    assert D.shape == (N, N) and D.max() > 0
    assert np.array_equal(D, J.distances)
    # the stored features' tree carries its Haar filter: --tree gives the same bytes
    T = hd.Tree.read(str(tmp_path / "T.h5"))
    assert T.haar_keep is not None
    run_hdtwd("distance", x, "--tree", tmp_path / "T.h5", "-o", tmp_path / "D2.npy")
    assert (tmp_path / "D.npy").read_bytes() == (tmp_path / "D2.npy").read_bytes()
    S = hd.Tree.read(str(tmp_path / "S.nwk"))
    assert S.n_leaves == N and sorted(S.leaf_names) == sorted(cells)


def test_joint_alternating_writes_a_tree_without_filter(tmp_path):
    x = _csv(tmp_path)
    run_hdtwd(
        "distance", x, "--joint", "--joint-algorithm", "alternating", "--joint-rounds", "2", "-o",
        tmp_path / "D.npy", "--save-tree", tmp_path / "T.h5", "--samples-tree", tmp_path / "S.h5",
    )  # fmt: skip
    assert hd.Tree.read(str(tmp_path / "T.h5")).haar_keep is None
    X, cells, genes = _data()
    J = hd.learn_joint(X, genes, sample_names=cells, joint=hd.JointParams(algorithm="alternating", max_rounds=2))
    assert np.array_equal(np.load(tmp_path / "D.npy"), J.distances)
    assert hd.Tree.read(str(tmp_path / "S.h5")).n_leaves == N


def test_joint_knn_graph_comes_from_the_joint_tree(tmp_path):
    import scipy.sparse as sp

    x = _csv(tmp_path)
    run_hdtwd("distance", x, "--joint", "--knn", "5", "-o", tmp_path / "G.npz")
    G = sp.load_npz(tmp_path / "G.npz").tocsr()
    X, cells, genes = _data()
    D = hd.learn_joint(X, genes, sample_names=cells).distances
    assert (G.getnnz(axis=1) == 4).all()
    for i in range(N):
        row = G.getrow(i)
        assert np.array_equal(row.data, D[i, row.indices])
        others = np.delete(D[i], i)
        assert row.data.max() <= np.sort(others)[3] + 0.0


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--joint-share", "0.5"], 2, "--joint-share only applies to the joint hierarchies (--joint)"),
        (["--joint-gamma", "1", "--joint-rounds", "2"], 2, "--joint-gamma, --joint-rounds only apply to the joint"),
        (["--samples-tree", "S.nwk"], 2, "--samples-tree only applies to the joint hierarchies (--joint)"),
        (["--joint", "--tree", "T.nwk"], 2, "--joint learns both trees from DATA: not with --tree"),
        (["--joint", "--reference", "x.csv"], 2, "--joint learns both trees from DATA: not with --reference"),
        (["--joint", "--feature-embedding", "x.csv"], 2, "not with --feature-embedding"),
        (["--joint", "--unseen", "root"], 2, "--joint learns both trees from DATA: not with --unseen"),
        (["--joint", "--joint-share", "1.5"], 2, "--joint-share must be between 0 and 1"),
        (["--joint", "--joint-algorithm", "both"], 2, "Invalid value for '--joint-algorithm'"),
        (["--joint", "--samples-tree", "S.txt"], 3, "a tree is written as .h5"),  # an output it cannot write
    ],
)
def test_joint_usage_errors(tmp_path, args, code, needle):
    x = _csv(tmp_path)
    (tmp_path / "T.nwk").write_text("(gene0:1,gene1:1);\n")
    argv = [str(tmp_path / a) if a in ("S.nwk", "T.nwk", "x.csv", "S.txt") else a for a in args]
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = run_hdtwd("distance", x, "-o", tmp_path / "D.npy", *argv, check=False)
    err = proc.stderr.decode()
    assert proc.returncode == code, err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_cli_algorithms_are_the_joint_algorithms():
    from hdtwd_cli.cli._options import JOINT_ALGORITHMS
    from hdtwd_cli.joint._alternate import ALGORITHMS

    assert JOINT_ALGORITHMS == ALGORITHMS


def test_sample_hierarchy_writes_order_clusters_distances_and_round_trips(tmp_path):
    import anndata
    import pandas as pd

    X, cells, genes = _data(1)
    adata = anndata.AnnData(X.astype(np.float32), obs=pd.DataFrame(index=cells), var=pd.DataFrame(index=genes))
    J = hd.sample_hierarchy(adata, n_clusters=4, key_added="jh")
    assert isinstance(J, hd.JointHierarchy)
    order = adata.obs["jh_order"].to_numpy()
    assert order.dtype.kind == "i" and sorted(order.tolist()) == list(range(N))
    assert np.array_equal(np.argsort(order), J.sample_order())
    clusters = adata.obs["jh_cluster"]
    assert isinstance(clusters.dtype, pd.CategoricalDtype) and clusters.nunique() == 4
    ref = hd.learn_joint(X.astype(np.float32), genes, sample_names=cells)
    assert np.array_equal(adata.obsp["jh_distances"], ref.distances)
    uns = adata.uns["jh"]
    (tmp_path / "s.nwk").write_text(uns["samples_tree"])
    assert sorted(hd.Tree.read(str(tmp_path / "s.nwk")).leaf_names) == sorted(cells)
    assert len(uns["rounds"]["change"]) == len(J.rounds) and uns["params"]["joint_algorithm"] == "filtered"
    adata.write_h5ad(tmp_path / "a.h5ad")
    back = anndata.read_h5ad(tmp_path / "a.h5ad")
    assert np.array_equal(back.obs["jh_order"].to_numpy(), order)
    assert back.obs["jh_cluster"].tolist() == clusters.tolist()
    assert np.array_equal(back.obsp["jh_distances"], ref.distances)
    assert back.uns["jh"]["features_tree"] == uns["features_tree"]


def test_sample_hierarchy_copy_without_clusters_and_bad_n_clusters():
    import anndata

    X, _, _ = _data(2)
    adata = anndata.AnnData(X)
    out = hd.sample_hierarchy(adata, copy=True)
    assert isinstance(out, anndata.AnnData) and "hdtwd_joint_order" in out.obs
    assert "hdtwd_joint_cluster" not in out.obs and "hdtwd_joint_order" not in adata.obs
    with pytest.raises(hd.ParameterError, match="n_clusters"):
        hd.sample_hierarchy(adata, n_clusters=N + 1)
