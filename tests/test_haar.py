"""The Haar basis of a tree's leaves: orthonormality, the fast transforms against the explicit matrix,
sparsity of piecewise-constant signals, coefficient selection and filtering, deep chains."""

import numpy as np
import pytest

from hdtwd_cli.tree._haar import haar_basis, haar_filter, kept_coefficients
from hdtwd_cli.tree._tree import Tree


def random_tree(L, seed, arities=(2,), stop_at=1):
    """Random agglomeration: merge a random group of ``arity`` active clusters until ``stop_at`` remain,
    then hang the remaining clusters from one root (arity 1 gives a unary node)."""
    rng = np.random.default_rng(seed)
    active = list(range(L))
    parent = [-1] * L
    while len(active) > stop_at:
        k = int(rng.choice(arities))
        k = min(k, len(active))
        if k == 1 and len(active) == 1:
            break
        picked = sorted(rng.choice(len(active), size=k, replace=False).tolist(), reverse=True)
        new = len(parent)
        parent.append(-1)
        for i in picked:
            parent[active.pop(i)] = new
        active.append(new)
    if len(active) > 1:
        new = len(parent)
        parent.append(-1)
        for v in active:
            parent[v] = new
    n = len(parent)
    return Tree(parent=np.array(parent), length=np.ones(n), leaf_names=[f"f{j}" for j in range(L)])


def chain_tree(L):
    """Caterpillar: internal node L merges leaves 0 and 1, internal node L+i merges node L+i-1 and leaf i+1."""
    parent = np.empty(2 * L - 1, dtype=np.int64)
    parent[0] = L
    parent[1:L] = np.arange(L, 2 * L - 1)
    parent[L : 2 * L - 2] = np.arange(L + 1, 2 * L - 1)
    parent[-1] = -1
    return Tree(parent=parent, length=np.ones(2 * L - 1), leaf_names=[f"f{j}" for j in range(L)])


def leaves_under(tree, v):
    below = np.zeros(tree.n_nodes, dtype=bool)
    below[v] = True
    for c in range(tree.n_nodes - 2, -1, -1):
        below[c] |= below[tree.parent[c]]
    return below[: tree.n_leaves]


def unary_tree():
    # leaves 0..3; node 4 = (0, 1); node 5 = (4) unary; node 6 = (2, 3); node 7 = (5,) unary; root 8 = (6, 7)
    parent = np.array([4, 4, 6, 6, 5, 7, 8, 8, -1])
    return Tree(parent=parent, length=np.ones(9), leaf_names=list("abcd"))


TREES = {
    "binary": lambda: random_tree(40, 0),
    "wide_root": lambda: random_tree(60, 1, stop_at=25),
    "unary": unary_tree,
    "mixed_arity": lambda: random_tree(50, 2, arities=(1, 2, 3, 4)),
}


@pytest.mark.parametrize("name", sorted(TREES))
def test_orthonormal_with_l_vectors(name):
    tree = TREES[name]()
    tree.validate()
    basis = haar_basis(tree)
    B = basis.matrix().toarray()
    L = tree.n_leaves
    assert B.shape == (L, L)
    assert np.abs(B.T @ B - np.eye(L)).max() < 1e-12
    assert np.allclose(B[:, 0], 1 / np.sqrt(L))
    assert np.abs(B[:, 1:].sum(axis=0)).max() < 1e-12  # every split vector sums to zero


def test_wide_root_has_many_splits_at_the_root():
    tree = random_tree(60, 1, stop_at=25)
    basis = haar_basis(tree)
    assert np.sum(basis.node == tree.root) == 24
    assert basis.node.shape == (59,)


def test_split_vectors_follow_the_definition():
    tree = random_tree(30, 3, arities=(1, 2, 3))
    basis = haar_basis(tree)
    B = basis.matrix().toarray()
    children = tree.children()
    q = 1
    for v in range(tree.n_nodes):
        kids = children[v]
        for s in range(1, len(kids)):
            A_side = np.zeros(tree.n_leaves, dtype=bool)
            for c in kids[:s]:
                A_side |= leaves_under(tree, c)
            B_side = leaves_under(tree, kids[s])
            a, b = A_side.sum(), B_side.sum()
            expected = np.zeros(tree.n_leaves)
            expected[A_side] = np.sqrt(b / (a * (a + b)))
            expected[B_side] = -np.sqrt(a / (b * (a + b)))
            assert basis.node[q - 1] == v and basis.child[q - 1] == kids[s]
            assert np.allclose(B[:, q], expected, atol=1e-15, rtol=1e-14)
            q += 1
    assert q == tree.n_leaves


@pytest.mark.parametrize("name", sorted(TREES))
def test_transforms_match_the_matrix_and_reconstruct(name):
    tree = TREES[name]()
    basis = haar_basis(tree)
    B = basis.matrix().toarray()
    rng = np.random.default_rng(5)
    X = rng.normal(size=(7, tree.n_leaves))
    A = basis.analysis(X)
    assert A.shape == X.shape
    assert np.abs(A - X @ B).max() < 1e-12
    C = rng.normal(size=(7, tree.n_leaves))
    assert np.abs(basis.synthesis(C) - C @ B.T).max() < 1e-12
    assert np.abs(basis.synthesis(A) - X).max() < 1e-12
    # one row as a vector, and the same bits on every call and for any subset of rows
    assert np.allclose(basis.analysis(X[2]), A[2], rtol=0, atol=0)
    assert np.array_equal(basis.analysis(X), A)
    assert np.array_equal(basis.analysis(X[3:5]), A[3:5])


def test_single_leaf_tree():
    basis = haar_basis(Tree(parent=np.array([-1]), length=np.zeros(1), leaf_names=["x"]))
    assert basis.matrix().toarray().tolist() == [[1.0]]
    X = np.array([[2.5], [-1.0]])
    assert np.array_equal(basis.analysis(X), X)
    assert np.array_equal(basis.synthesis(X), X)


def test_bad_shapes_are_refused():
    basis = haar_basis(unary_tree())
    with pytest.raises(ValueError, match="shape"):
        basis.analysis(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="shape"):
        basis.synthesis(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="keep"):
        haar_filter(basis, np.zeros((2, 4)), np.ones(3, dtype=bool))
    with pytest.raises(ValueError):
        haar_basis(Tree(parent=np.array([2, 2, -1, 1]), length=np.ones(4), leaf_names=["a", "b"]))


def test_constant_on_the_root_children_has_two_coefficients():
    tree = random_tree(64, 7)
    basis = haar_basis(tree)
    left, right = tree.children()[tree.root]
    x = np.where(leaves_under(tree, left), 3.0, 0.0) + np.where(leaves_under(tree, right), -1.25, 0.0)
    A = basis.analysis(x)
    nonzero = np.flatnonzero(np.abs(A) > 1e-12)
    root_split = int(basis.split_of[right])
    assert nonzero.tolist() == sorted([0, root_split])
    assert basis.node[root_split - 1] == tree.root


@pytest.mark.parametrize("k", [2, 3, 5, 9])
def test_piecewise_constant_on_k_subtrees_has_k_coefficients(k):
    tree = random_tree(120, 11 + k)
    basis = haar_basis(tree)
    children = tree.children()
    rng = np.random.default_rng(k)
    pieces = [tree.root]
    while len(pieces) < k:  # refine a random internal piece into its children: still a partition
        internal = [i for i, v in enumerate(pieces) if children[v]]
        v = pieces.pop(internal[int(rng.integers(len(internal)))])
        pieces.extend(children[v])
    x = np.zeros(tree.n_leaves)
    covered = np.zeros(tree.n_leaves, dtype=int)
    for v in pieces:
        under = leaves_under(tree, v)
        x[under] = rng.uniform(1.0, 2.0)
        covered += under
    assert np.all(covered == 1)
    A = basis.analysis(x)
    # at most one non-zero per split above the pieces (k - 1 of them) plus the constant; generically all
    assert np.sum(np.abs(A) > 1e-10) == k
    assert np.sum(np.abs(A) > 1e-10) < tree.n_leaves // 4


def test_kept_coefficients_by_score_with_ties():
    # scores of columns 1..4: 2, 4, 0, 2 (total 8); ranked 2, 1, 4, 3 (1 before 4: tie, lower index)
    A = np.array([[9.0, 1.0, -3.0, 0.0, 2.0], [-9.0, -1.0, 1.0, 0.0, 0.0]])

    def kept(share):
        return np.flatnonzero(kept_coefficients(A, share)).tolist()

    assert kept(0.0) == [0]
    assert kept(0.3) == [0, 2]
    assert kept(0.5) == [0, 2]  # reached exactly by column 2's 4
    assert kept(0.6) == [0, 1, 2]  # the tie: column 1 before column 4
    assert kept(0.75) == [0, 1, 2]
    assert kept(0.76) == [0, 1, 2, 4]
    assert kept(0.999) == [0, 1, 2, 4]  # column 3 has score 0: never needed
    assert kept(1.0) == [0, 1, 2, 3, 4]
    assert kept_coefficients(A, 0.5).dtype == bool


def test_kept_coefficients_edge_cases():
    Z = np.zeros((3, 6))
    assert np.flatnonzero(kept_coefficients(Z, 0.9)).tolist() == [0]
    assert kept_coefficients(Z, 1.0).all()
    rng = np.random.default_rng(0)
    A = rng.normal(size=(10, 30))
    assert kept_coefficients(A, 1.0).all()
    assert np.flatnonzero(kept_coefficients(A, 0.0)).tolist() == [0]
    counts = [int(kept_coefficients(A, s).sum()) for s in np.linspace(0, 1, 21)]
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] == 30
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="share"):
            kept_coefficients(A, bad)


def test_haar_filter():
    tree = random_tree(50, 4, arities=(1, 2, 3), stop_at=6)
    basis = haar_basis(tree)
    rng = np.random.default_rng(1)
    X = rng.gamma(1.0, size=(6, tree.n_leaves))
    L = tree.n_leaves
    assert np.abs(haar_filter(basis, X, np.ones(L, dtype=bool)) - X).max() < 1e-12
    only = np.zeros(L, dtype=bool)
    only[0] = True
    means = np.repeat(X.mean(axis=1, keepdims=True), L, axis=1)
    assert np.abs(haar_filter(basis, X, only) - means).max() < 1e-12
    # a projection: idempotent, and what it drops is the dropped coefficients' energy
    keep = kept_coefficients(basis.analysis(X), 0.6)
    assert 1 < keep.sum() < L
    F = haar_filter(basis, X, keep)
    assert np.abs(haar_filter(basis, F, keep) - F).max() < 1e-12
    dropped = basis.analysis(X)[:, ~keep]
    assert np.allclose(np.sum((X - F) ** 2, axis=1), np.sum(dropped**2, axis=1), rtol=1e-10)
    # mass is kept: the constant is always kept and the other vectors sum to zero
    assert np.allclose(F.sum(axis=1), X.sum(axis=1), rtol=1e-12)


def test_deep_chain_without_recursion():
    L = 5000
    tree = chain_tree(L)
    tree.validate()
    basis = haar_basis(tree)
    assert basis.node.shape == (L - 1,)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(3, L))
    A = basis.analysis(X)
    assert np.abs(basis.synthesis(A) - X).max() < 1e-10
    assert np.allclose(np.sum(A**2, axis=1), np.sum(X**2, axis=1), rtol=1e-12)  # Parseval
    # internal node L+i (i >= 1) has children leaf i+1 < node L+i-1: A = {i+1}, B = leaves 0..i
    i = 1234
    b = i + 1
    q = int(basis.split_of[L + i - 1])
    assert basis.node[q - 1] == L + i and basis.a[q - 1] == 1 and basis.b[q - 1] == b
    expected = np.sqrt(b / (b + 1)) * X[:, i + 1] - np.sqrt(1 / (b * (b + 1))) * X[:, : i + 1].sum(axis=1)
    assert np.allclose(A[:, q], expected, rtol=1e-12, atol=1e-12)
