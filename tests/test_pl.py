"""The pictures (``hdtwd_cli.pl``, ``hdtwd plot``, ``classify --plot``).

Each picture function writes a non-empty image for small trees and a 20,000-leaf chain (no
recursion); the clades of the tree picture partition the leaves and expand the heaviest first;
the heatmap's order groups planted clusters; the same figure gives the same bytes; the command
line refuses a bad suffix (and a missing matplotlib) with one line and writes nothing.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from conftest import caterpillar, run_hdtwd

from hdtwd_cli.tree._tree import Tree

pl = pytest.importorskip("hdtwd_cli.pl._pictures")
pytest.importorskip("matplotlib")


def _planted() -> Tree:
    """((a,b),(c,(d,e))) with leaf lengths 1, internal 2."""
    parent = np.array([5, 5, 7, 6, 6, 8, 7, 8, -1])
    length = np.array([1, 1, 1, 1, 1, 2, 2, 2, 0], dtype=float)
    return Tree(parent=parent, length=length, leaf_names=list("abcde"))


def test_tree_clades_partition_the_leaves_and_expand_the_heaviest_first():
    t = _planted()
    mass = np.array([0.05, 0.05, 0.1, 0.4, 0.4])
    expanded, tips = pl.tree_clades(t, mass, tips=3)
    assert tips.tolist() == [2, 5, 6]  # root split, then the heavy (d,e) clade's parent: c, (a,b), (d,e)
    assert expanded.tolist() == [7, 8]
    expanded, tips = pl.tree_clades(t, mass, tips=2)
    assert tips.tolist() == [5, 7] and expanded.tolist() == [8]
    expanded, tips = pl.tree_clades(t, mass, tips=100)
    assert tips.tolist() == [0, 1, 2, 3, 4]  # every leaf once the budget allows
    big = caterpillar(20000)
    m = np.random.default_rng(0).random(20000)
    expanded, tips = pl.tree_clades(big, m, tips=40)
    assert len(tips) <= 40
    # the tips partition the leaves: every leaf has exactly one tip among its ancestors (or is one)
    owner = np.zeros(big.n_nodes, dtype=np.int64)
    owner[tips] = 1
    for v in range(big.n_nodes - 2, -1, -1):
        owner[v] += owner[big.parent[v]]
    assert np.all(owner[:20000] == 1)


@pytest.mark.parametrize("m", [5, 20000])
def test_tree_picture_is_written_for_small_and_20000_leaf_trees(tmp_path, m):
    t = _planted() if m == 5 else caterpillar(m)
    X = np.random.default_rng(1).poisson(0.5, size=(30, m)).astype(np.float32)
    X[:, 0] += 1
    fig = pl.tree(t, X, t.leaf_names, tips=40)
    labels = [txt.get_text() for txt in fig.axes[0].texts]
    assert len(labels) == (5 if m == 5 else 40)
    assert any("%" in s for s in labels)
    for suffix in (".png", ".svg", ".pdf"):
        pl.save(fig, str(tmp_path / f"t{suffix}"))
        assert (tmp_path / f"t{suffix}").stat().st_size > 1000
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "t.pdf").read_bytes()[:5] == b"%PDF-"


def test_same_figure_same_bytes(tmp_path):
    t = _planted()
    for name in ("a", "b"):
        for suffix in (".png", ".svg", ".pdf"):
            pl.save(pl.tree(t), str(tmp_path / f"{name}{suffix}"))
    for suffix in (".png", ".svg", ".pdf"):
        assert (tmp_path / f"a{suffix}").read_bytes() == (tmp_path / f"b{suffix}").read_bytes()


def test_the_tree_picture_reads_any_storage_of_the_samples_through_the_door():
    """The picture's masses are the same for dense float64, float32 CSR with unsorted indices (scanpy's) and CSC
    storage of the same counts, and a matrix that is not numbers is one clear ParameterError."""
    import scipy.sparse as sp

    import hdtwd_cli as hd

    t = _planted()
    X = np.random.default_rng(2).poisson(1.5, size=(40, 5)).astype(np.float64) + np.eye(5)[np.arange(40) % 5]
    C = sp.csr_matrix(X.astype(np.float32))
    rev = np.concatenate([np.arange(b - 1, a - 1, -1) for a, b in zip(C.indptr[:-1], C.indptr[1:])])
    unsorted = sp.csr_matrix((C.data[rev], C.indices[rev], C.indptr), shape=C.shape)
    unsorted.has_sorted_indices = False

    def shown(M):
        fig = pl.tree(t, M, t.leaf_names)
        return sorted(txt.get_text() for txt in fig.axes[0].texts)

    want = shown(X)
    assert any("%" in s for s in want)
    assert shown(unsorted) == want and shown(sp.csc_matrix(X)) == want
    with pytest.raises(hd.ParameterError):
        pl.tree(t, [["a", "b", "c", "d", "e"]], t.leaf_names)


def test_heatmap_orders_planted_clusters_together(tmp_path):
    rng = np.random.default_rng(2)
    y = np.repeat(["x", "y", "z"], 20)
    centre = {"x": 0.0, "y": 5.0, "z": 10.0}
    pts = np.array([centre[c] for c in y]) + rng.normal(scale=0.3, size=60)
    perm = rng.permutation(60)
    pts, y = pts[perm], y[perm]
    D = np.abs(pts[:, None] - pts[None, :])
    fig = pl.distance_heatmap(D, y)
    shown = fig.axes[0].images[0].get_array()
    # the drawn matrix is D in an order where each cluster is one block: 2 jumps between blocks
    jumps = np.sum(np.abs(np.diff(shown[0])) > 2.5)
    assert jumps <= 2 and shown.shape == (60, 60)
    pl.save(fig, str(tmp_path / "h.png"))
    assert (tmp_path / "h.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="square"):
        pl.distance_heatmap(D[:3])
    with pytest.raises(ValueError, match="labels"):
        pl.distance_heatmap(D, y[:5])
    big = pl.distance_heatmap(np.abs(np.arange(3000.0)[:, None] - np.arange(3000.0)[None, :]), max_samples=1000)
    assert big.axes[0].images[0].get_array().shape == (1000, 1000)
    assert "3,000 samples" in big.axes[0].get_title() and "1 in 3 drawn" in big.axes[0].get_title()


def test_cli_pictures_and_bad_suffix(tmp_path):
    data = tmp_path / "x.npy"
    rng = np.random.default_rng(3)
    X = rng.poisson(1.0, size=(40, 12)).astype(float)
    y = np.repeat([0, 1], 20)
    X[y == 0, :6] += 3
    np.save(data, X)
    (tmp_path / "y.txt").write_text("\n".join(map(str, y)) + "\n")
    run_hdtwd("distance", data, "-o", tmp_path / "D.npy", "--save-tree", tmp_path / "T.h5", "-q")
    run_hdtwd("plot", "tree", tmp_path / "T.h5", "--data", data, "-o", tmp_path / "tree.svg", "-q")
    run_hdtwd("plot", "heatmap", tmp_path / "D.npy", "--labels", tmp_path / "y.txt", "-o", tmp_path / "h.png", "-q")
    run_hdtwd(
        "classify",
        data,
        "--labels",
        tmp_path / "y.txt",
        "--splits",
        "2",
        "--json",
        tmp_path / "r.json",
        "--plot",
        tmp_path / "r.pdf",
        "-q",
    )
    run_hdtwd("plot", "report", tmp_path / "r.json", "-o", tmp_path / "r.png", "-q")
    for f in ("tree.svg", "h.png", "r.pdf", "r.png"):
        assert (tmp_path / f).stat().st_size > 1000
    rep = json.loads((tmp_path / "r.json").read_text())
    assert set(rep["methods"]["hdtwd"]["per_k_std"]) == set(rep["methods"]["hdtwd"]["per_k"])
    for args, name in [
        (("plot", "tree", tmp_path / "T.h5", "-o", tmp_path / "t.jpg"), "t.jpg"),
        (("classify", data, "--labels", tmp_path / "y.txt", "--plot", tmp_path / "r.gif"), "r.gif"),
        (("plot", "report", tmp_path / "T.h5", "-o", tmp_path / "bad.png"), "bad.png"),
    ]:
        proc = run_hdtwd(*args, check=False)
        err = proc.stderr.decode()
        assert proc.returncode == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not (tmp_path / name).exists()
    proc = run_hdtwd(
        "plot", "heatmap", tmp_path / "D.npy", "--labels", tmp_path / "y.txt", "-o", tmp_path / "h.jpg", check=False
    )
    assert "must end in .png, .svg or .pdf" in proc.stderr.decode()


def test_missing_matplotlib_is_one_clear_error(monkeypatch, tmp_path):
    from hdtwd_cli.cli._plot import check_picture
    from hdtwd_cli.errors import ParameterError

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ParameterError, match=r"pip install matplotlib"):
        check_picture(tmp_path / "x.png", [])
