"""The annotated Nexus tree (``.nex``) for FigTree, DendroPy and Bio.Phylo.

DendroPy (the reader that parses FigTree's ``[&key=value]`` comments) and Bio.Phylo read what
hdtwd writes: the same leaves, branch lengths, feature weights and masses; hdtwd reads it back
with its weights, so ``--tree T.nex`` gives the distances of the ``.h5`` tree; a 3,000-deep chain
is written and read without recursion.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import caterpillar, run_hdtwd

from hdtwd_cli import learn_tree
from hdtwd_cli.io._nexus import read_nexus, write_nexus
from hdtwd_cli.tree._tree import Tree, root_distances, subtree_sums
from hdtwd_cli.twd._distance import tree_wasserstein
from hdtwd_cli.twd._histograms import align_to_tree, mean_histogram


def _data(seed: int = 0, n: int = 40, m: int = 12):
    rng = np.random.default_rng(seed)
    X = rng.poisson(1.0, size=(n, m)).astype(float)
    X[: n // 2, : m // 2] += rng.poisson(3.0, size=(n // 2, m // 2))
    names = [f"g{j}" for j in range(m - 2)] + ["two words", "it's"]
    return X, names


def test_dendropy_and_biopython_read_the_annotated_tree(tmp_path):
    dendropy = pytest.importorskip("dendropy")
    Phylo = pytest.importorskip("Bio.Phylo")
    X, names = _data()
    tree = learn_tree(X, names)
    mass = mean_histogram(tree, X, names)
    assert mass.sum() == pytest.approx(1.0) and np.all(mass > 0)
    path = tmp_path / "t.nex"
    tree.write(str(path), leaf_mass=mass)
    d = dendropy.Tree.get(path=str(path), schema="nexus", extract_comment_metadata=True, preserve_underscores=True)
    leaves = {nd.taxon.label: nd for nd in d.leaf_node_iter()}
    assert set(leaves) == set(names)
    for j, name in enumerate(tree.leaf_names):
        notes = {a.name: float(a.value) for a in leaves[name].annotations}
        assert notes["weight"] == tree.feature_weights[j] and notes["mass"] == mass[j]
        assert leaves[name].edge_length == tree.length[j]
    root_notes = {a.name: float(a.value) for a in d.seed_node.annotations}
    assert root_notes["mass"] == pytest.approx(1.0) and root_notes["size"] == len(names)
    # a clade's mass is the sum of its leaves' (every internal node checked)
    for nd in d.postorder_internal_node_iter():
        below = sum(float(next(a.value for a in lf.annotations if a.name == "mass")) for lf in nd.leaf_iter())
        assert float(next(a.value for a in nd.annotations if a.name == "mass")) == pytest.approx(below, rel=1e-12)
    b = Phylo.read(str(path), "nexus")

    def unquote(name: str) -> str:  # Bio.Phylo keeps a quoted label's quotes
        return name[1:-1].replace("''", "'") if name.startswith("'") else name

    assert sorted(unquote(t.name) for t in b.get_terminals()) == sorted(names)
    assert all("weight=" in t.comment for t in b.get_terminals())
    depth = dict(zip(tree.leaf_names, root_distances(tree)[: tree.n_leaves]))
    for t in b.get_terminals():
        assert b.distance(t) == pytest.approx(depth[unquote(t.name)], rel=1e-12)


def test_hdtwd_reads_its_nexus_back_with_the_weights(tmp_path):
    X, names = _data(1)
    tree = learn_tree(X, names)
    tree.write(str(tmp_path / "t.nex"))
    back = Tree.read(str(tmp_path / "t.nex"))
    assert sorted(back.leaf_names) == sorted(tree.leaf_names)
    assert back.feature_weights is not None
    D = tree_wasserstein(tree, align_to_tree(X, names, tree))
    D2 = tree_wasserstein(back, align_to_tree(X, names, back))
    np.testing.assert_allclose(D2, D, rtol=1e-12, atol=1e-15)
    assert np.abs(D).max() > 0


def test_a_chain_thousands_deep_is_written_and_read_without_recursion():
    m = 3000
    chain = caterpillar(m)
    chain.feature_weights = np.linspace(1, 2, m)
    mass, size = subtree_sums(chain, np.column_stack([np.full(m, 1.0 / m), np.ones(m)])).T
    back = Tree.from_record(read_nexus(write_nexus(chain, mass, size)))
    assert back.n_leaves == m and int(back.depth().max()) == m - 1
    order = [back.leaf_names.index(f"t{j}") for j in range(m)]
    np.testing.assert_array_equal(back.feature_weights[order], chain.feature_weights)


def test_cli_save_tree_nexus_carries_the_samples_mass(tmp_path):
    X, names = _data(2)
    np.save(tmp_path / "x.npy", X)
    run_hdtwd("distance", tmp_path / "x.npy", "-o", tmp_path / "D.npy", "--save-tree", tmp_path / "t.nex", "-q")
    text = (tmp_path / "t.nex").read_text()
    assert text.startswith("#NEXUS") and "mass=" in text and "weight=" in text
    run_hdtwd("distance", tmp_path / "x.npy", "--tree", tmp_path / "t.nex", "-o", tmp_path / "D2.npy", "-q")
    np.testing.assert_allclose(np.load(tmp_path / "D2.npy"), np.load(tmp_path / "D.npy"), rtol=1e-12, atol=1e-15)
    (tmp_path / "bad.nex").write_text("#NEXUS\nbegin trees;\n translate 1 a;\n tree t = (1:1,2:1);\nend;\n")
    proc = run_hdtwd(
        "distance", tmp_path / "x.npy", "--tree", tmp_path / "bad.nex", "-o", tmp_path / "D3.npy", check=False
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "translate" in err and len(err.strip().splitlines()) == 1
