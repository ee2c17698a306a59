r"""Data with a known (planted) feature hierarchy, for tests, examples and benchmarks.

- :func:`produce_documents` -- the paper's produce model (Sec. 5.1, App. D.1): 8 words whose
  presence follows a two-level category tree.
- :func:`gaussian_tree_samples` -- the paper's App. E toy: a balanced binary tree with 15 nodes,
  :math:`x \sim \mathcal N(5\cdot\mathbf 1, L^\dagger)` with ``L`` the tree's graph Laplacian,
  negative draws rejected; every tree node is a feature.
- :func:`planted_counts` -- Poisson counts from Brownian motion on a random feature tree.
- :func:`planted_hierarchy` -- Poisson counts from Brownian motion on a planted tree of a given
  shape (random, balanced, deep) at a given depth (deep bulk-like counts to sparse UMI-like ones),
  with the tree and each sample's heaviest top clade (the recovery benchmark's families).
- :func:`planted_corpus` -- sparse word counts with a planted topic hierarchy over the words and
  Zipf word frequencies (large-vocabulary benchmarks).
- :func:`balanced_tree` and :func:`tree_twd` -- the ground-truth tree and its TWD with mass on
  every node (leaves and internal nodes alike).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = [
    "PRODUCE_WORDS",
    "PRODUCE_CLADES",
    "produce_documents",
    "balanced_tree",
    "gaussian_tree_samples",
    "tree_twd",
    "random_binary_tree",
    "brownian_on_tree",
    "planted_counts",
    "planted_corpus",
    "TREE_SHAPES",
    "shaped_binary_tree",
    "planted_hierarchy",
    "top_clades",
]

PRODUCE_WORDS = ["apple", "orange", "banana", "carrot", "beetroot", "kale", "spinach", "lettuce"]
#: The latent categories of the produce model: name -> words.
PRODUCE_CLADES = {
    "fruits": ["apple", "orange", "banana"],
    "root vegetables": ["carrot", "beetroot"],
    "leaf vegetables": ["kale", "spinach", "lettuce"],
    "vegetables": ["carrot", "beetroot", "kale", "spinach", "lettuce"],
}


def produce_documents(n: int = 100, seed: int = 0, drop_empty: bool = True) -> np.ndarray:
    """Binary word-presence documents from the produce model (paper App. D.1).

    Fruits and vegetables are each chosen with probability 1/2; a chosen fruit category picks
    each fruit with probability 1/2; chosen vegetables pick each of the sub-categories (root,
    leaf) with probability 1/2, and a chosen sub-category picks each of its items with
    probability 1/2.

    Parameters
    ----------
    n : int
        Number of documents returned.
    seed : int
    drop_empty : bool
        Redraw documents that contain no word (they have no histogram).

    Returns
    -------
    ndarray, shape (n, 8), values 0/1, columns in :data:`PRODUCE_WORDS` order
    """
    rng = np.random.default_rng(seed)
    rows: list[np.ndarray] = []
    while len(rows) < n:
        x = np.zeros(8)
        if rng.random() < 0.5:
            x[0:3] = rng.random(3) < 0.5
        if rng.random() < 0.5:
            if rng.random() < 0.5:
                x[3:5] = rng.random(2) < 0.5
            if rng.random() < 0.5:
                x[5:8] = rng.random(3) < 0.5
        if drop_empty and not x.any():
            continue
        rows.append(x)
    return np.array(rows)


def balanced_tree(levels: int = 4) -> np.ndarray:
    """Parent array of a balanced binary tree with ``2**levels - 1`` nodes in heap order.

    Node 0 is the root; node ``v``'s parent is ``(v - 1) // 2``.
    """
    n = 2**levels - 1
    parent = (np.arange(n) - 1) // 2
    parent[0] = -1
    return parent


def gaussian_tree_samples(n: int, seed: int = 0, levels: int = 4, mean: float = 5.0) -> tuple[np.ndarray, np.ndarray]:
    r"""Samples :math:`x \sim \mathcal N(\mu\mathbf 1, L^\dagger)` on a balanced tree, negatives rejected.

    Drawn along the tree's edges, with no factorisation of the covariance: a Gaussian free field
    :math:`z_{root} = 0`, :math:`z_v = z_{parent(v)} + \xi_v`, :math:`\xi_v \sim \mathcal N(0, 1)`
    has the density :math:`\propto \exp(-\tfrac12 z^\top L z)` along the differences, so its
    centred version :math:`z - \bar z \mathbf 1` is exactly :math:`\mathcal N(0, L^\dagger)` (unit
    edge weights). Only additions of the generator's draws, in a fixed order: the same seed gives
    the same samples, bit for bit, on every CPU. (``multivariate_normal(method="eigh")`` did not:
    ``L`` has repeated eigenvalues, so the eigenvector basis, and every sample, depended on the
    BLAS kernels.)

    Returns
    -------
    X : ndarray, shape (n, 2**levels - 1)
        One column per tree node (heap order).
    parent : ndarray
        The tree (see :func:`balanced_tree`).
    """
    parent = balanced_tree(levels)
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    m = parent.shape[0]
    while sum(len(b) for b in out) < n:
        k = max(n, 16)
        xi = rng.standard_normal((k, m))
        z = np.zeros((k, m))
        for v in range(1, m):  # heap order: a parent precedes its children
            z[:, v] = z[:, parent[v]] + xi[:, v]
        total = np.zeros(k)
        for v in range(m):  # a sequential sum: no order that depends on the CPU's vector width
            total += z[:, v]
        draw = mean + (z - (total / m)[:, None])
        out.append(draw[(draw >= 0).all(axis=1)])
    return np.concatenate(out)[:n], parent


def tree_twd(X: np.ndarray, parent: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
    r"""Exact TWD with mass on every node: :math:`\sum_v w_v |\sum_{u \in \mathrm{sub}(v)} (x_i - x_{i'})_u|`.

    Rows of ``X`` are normalised to histograms; ``parent[v] < v`` is not required.
    """
    x = X / X.sum(axis=1, keepdims=True)
    n, m = x.shape
    w = np.ones(m) if weight is None else np.asarray(weight, dtype=np.float64)
    # subtree indicator: S[v, u] = 1 iff v is u or an ancestor of u
    S = np.eye(m)
    for u in range(m):
        v = parent[u]
        while v >= 0:
            S[v, u] = 1.0
            v = parent[v]
    Y = (x @ S.T)[:, parent >= 0] * w[parent >= 0]
    return np.abs(Y[:, None, :] - Y[None, :, :]).sum(axis=2)


def random_binary_tree(m: int, seed: int = 0) -> np.ndarray:
    """Parent array of a random rooted binary tree with ``m`` leaves (random agglomeration).

    Leaves are ``0..m-1``, internal node ``m + i`` is created by the i-th merge; the root is last.
    """
    rng = np.random.default_rng(seed)
    parent = np.full(2 * m - 1, -1, dtype=np.int64)
    active = list(range(m))
    for i in range(m - 1):
        a, b = rng.choice(len(active), size=2, replace=False)
        na, nb = active[a], active[b]
        parent[na] = parent[nb] = m + i
        for idx in sorted((a, b), reverse=True):
            active.pop(idx)
        active.append(m + i)
    return parent


def brownian_on_tree(parent: np.ndarray, length: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    r"""``n`` draws of Brownian motion down a tree:
    :math:`z_{root} = 0`, :math:`z_v = z_{parent} + \sqrt{\ell_v}\,\xi_v`.

    Two leaves co-vary by the length of their shared path from the root. Nodes must precede their
    parents (root last). Returns an ``(n, n_nodes)`` array.
    """
    z = np.zeros((n, parent.shape[0]))
    for v in range(parent.shape[0] - 2, -1, -1):
        z[:, v] = z[:, parent[v]] + np.sqrt(length[v]) * rng.standard_normal(n)
    return z


def planted_counts(
    n_samples: int = 300,
    n_features: int = 64,
    n_classes: int = 4,
    seed: int = 0,
    depth: float = 2000.0,
    noise: float = 1.0,
    edge: float = 0.3,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Poisson counts whose log-rates follow Brownian motion on a planted random feature tree.

    Each class draws a profile by Brownian motion down the tree (edge variance ``edge``); each
    sample adds a Brownian draw of its own scaled by ``noise``, so features that share a long path
    from the root co-vary across samples; counts are
    :math:`\mathrm{Poisson}(\mathrm{depth}\cdot\mathrm{softmax}(z)_j)` on the leaves.

    Returns
    -------
    X : ndarray, shape (n_samples, n_features), integer counts
    labels : ndarray of int, shape (n_samples,)
    parent : ndarray, shape (2 n_features - 1,)
        The planted tree (see :func:`random_binary_tree`); all edges have variance ``edge``.
    """
    rng = np.random.default_rng(seed)
    parent = random_binary_tree(n_features, seed)
    length = np.full(parent.shape[0], edge)
    profiles = brownian_on_tree(parent, length, n_classes, rng)[:, :n_features]
    labels = rng.integers(0, n_classes, size=n_samples)
    z = profiles[labels] + noise * brownian_on_tree(parent, length, n_samples, rng)[:, :n_features]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    X = rng.poisson(depth * p).astype(np.float64)
    return X, labels, parent


def planted_corpus(
    n_docs: int = 5000,
    n_words: int = 24000,
    branching: tuple[int, ...] = (8, 4, 4),
    mean_length: float = 100.0,
    level_weights: tuple[float, ...] = (0.6, 0.2, 0.1, 0.1),
    zipf: float = 1.07,
    seed: int = 0,
    length_range: tuple[int, int] | None = None,
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    r"""Sparse word counts with a planted topic hierarchy over the words and Zipf frequencies.

    The words are split into contiguous blocks by a topic tree with the given ``branching``
    (default 8 x 4 x 4 = 128 leaf topics; the word tree is root -> topics -> ... -> leaf topic
    -> words). Every word has a Zipf weight :math:`(r+1)^{-s}` for a random rank ``r``. A
    document picks a leaf topic; each of its :math:`L \sim \mathrm{Poisson}(\text{mean\_length})`
    tokens picks a level of the topic's ancestry with probabilities ``level_weights`` (root =
    the whole vocabulary, ..., leaf topic) and then a word of that level's subtree in
    proportion to the Zipf weights. Words that no document drew get one token in a document of
    their own leaf topic, so every word occurs (the vocabulary is the set of observed words).
    With ``length_range = (lo, hi)`` the lengths are log-uniform between ``lo`` and ``hi`` instead
    (tweets to essays in one corpus).

    Returns
    -------
    X : scipy.sparse.csr_matrix, shape (n_docs, n_words), float64 integer counts
    doc_topic : ndarray, shape (n_docs,)
        Leaf topic of each document; ``doc_topic // prod(branching[1:])`` is its top-level topic.
    leaf_topic : ndarray, shape (n_words,)
        Leaf topic of each word (topics are numbered so that each top-level topic is a
        contiguous range).
    """
    if len(level_weights) != len(branching) + 1:
        raise ValueError("one level weight per tree level (root + len(branching)) is needed")
    rng = np.random.default_rng(seed)
    n_leaf = int(np.prod(branching))
    if n_words < n_leaf:
        raise ValueError("need at least one word per leaf topic")
    bounds = np.linspace(0, n_words, n_leaf + 1).round().astype(np.int64)  # word range of each leaf topic
    leaf_topic = np.repeat(np.arange(n_leaf), np.diff(bounds))
    weight = (rng.permutation(n_words) + 1.0) ** -zipf
    cum = np.concatenate([[0.0], np.cumsum(weight)])
    doc_topic = rng.integers(0, n_leaf, size=n_docs)
    if length_range is None:
        lengths = np.maximum(1, rng.poisson(mean_length, size=n_docs))
    else:
        lo, hi = np.log(length_range[0]), np.log(length_range[1])
        lengths = np.maximum(1, np.round(np.exp(lo + (hi - lo) * rng.random(n_docs))).astype(np.int64))
    rows = np.repeat(np.arange(n_docs), lengths)
    level = rng.choice(len(level_weights), size=rows.size, p=np.asarray(level_weights) / np.sum(level_weights))
    # leaf topics under one level-l topic form a contiguous block of prod(branching[l:]) leaves
    span = np.array([int(np.prod(branching[lv:])) for lv in range(len(branching) + 1)])
    first_leaf = (doc_topic[rows] // span[level]) * span[level]
    lo = bounds[first_leaf]
    hi = bounds[first_leaf + span[level]]
    u = cum[lo] + rng.random(rows.size) * (cum[hi] - cum[lo])
    words = np.clip(np.searchsorted(cum, u, side="right") - 1, lo, hi - 1)
    seen = np.zeros(n_words, dtype=bool)
    seen[words] = True
    missing = np.flatnonzero(~seen)
    if missing.size:
        by_topic = [np.flatnonzero(doc_topic == t) for t in range(n_leaf)]
        extra_rows = np.array(
            [rng.choice(by_topic[t]) if by_topic[t].size else rng.integers(n_docs) for t in leaf_topic[missing]],
            dtype=np.int64,
        )
        rows = np.concatenate([rows, extra_rows])
        words = np.concatenate([words, missing])
    X = sp.csr_matrix((np.ones(rows.size), (rows, words)), shape=(n_docs, n_words))
    X.sum_duplicates()
    X.sort_indices()
    return X, doc_topic, leaf_topic


#: Shapes of :func:`shaped_binary_tree`.
TREE_SHAPES = ("random", "balanced", "deep")


def shaped_binary_tree(m: int, shape: str = "random", seed: int = 0) -> np.ndarray:
    """Parent array of a rooted binary tree with ``m`` leaves (leaves ``0..m-1``, root last).

    ``random``: two active clusters drawn uniformly merge (:func:`random_binary_tree`, the
    coalescent's shape); ``balanced``: clusters of equal size merge level by level (leaves in a
    random order); ``deep``: each merge joins the newest cluster with probability 3/4 (long,
    unbalanced chains: depth about m/4), else two clusters drawn uniformly.
    """
    if shape == "random":
        return random_binary_tree(m, seed)
    if shape not in TREE_SHAPES:
        raise ValueError(f"unknown tree shape {shape!r}; choose from {', '.join(TREE_SHAPES)}")
    rng = np.random.default_rng(seed)
    parent = np.full(2 * m - 1, -1, dtype=np.int64)
    nxt = m
    if shape == "balanced":
        level = list(rng.permutation(m))
        while len(level) > 1:
            merged = []
            for i in range(0, len(level) - 1, 2):
                parent[level[i]] = parent[level[i + 1]] = nxt
                merged.append(nxt)
                nxt += 1
            if len(level) % 2:
                merged.append(level[-1])
            level = merged
        return parent
    active = list(rng.permutation(m))
    newest = active.pop()
    while active:
        if rng.random() < 0.75:
            other = active.pop(int(rng.integers(len(active))))
            parent[newest] = parent[other] = nxt
        else:
            a, b = sorted(rng.choice(len(active), size=2, replace=False), reverse=True) if len(active) > 1 else (0, 0)
            if len(active) < 2:
                other = active.pop()
                parent[newest] = parent[other] = nxt
            else:
                na, nb = active.pop(a), active.pop(b)
                parent[na] = parent[nb] = nxt
                active.append(newest)
        newest = nxt
        nxt += 1
    return parent


def top_clades(parent: np.ndarray, n_clades: int = 4) -> np.ndarray:
    """Which of the tree's ``n_clades`` top clades each leaf falls in (``-1``: a leaf cut off above them).

    The clades are the subtrees left when the ``n_clades - 1`` highest internal nodes (by creation
    order: the root, then the merges before it) are removed.
    """
    n = parent.shape[0]
    m = (n + 1) // 2
    cut_nodes = set(range(n - n_clades + 1, n))
    label = np.full(n, -1, dtype=np.int64)
    roots = [v for v in range(n) if v not in cut_nodes and (parent[v] in cut_nodes)]
    for c, r in enumerate(sorted(roots)):
        label[r] = c
    for v in range(n - 1, -1, -1):  # parents after children: walk down from the top
        if label[v] < 0 and parent[v] >= 0 and v not in cut_nodes:
            label[v] = label[parent[v]]
    return label[:m]


def planted_hierarchy(
    n_samples: int,
    n_features: int,
    *,
    shape: str = "random",
    counts_per_feature: float = 20.0,
    variance: float = 4.0,
    n_clades: int = 4,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Poisson counts whose log-rates are Brownian motion down a planted tree over the features.

    Every sample draws :math:`z` by Brownian motion down the tree (:func:`brownian_on_tree`), every
    edge with variance ``variance / H`` (``H`` the tree's mean leaf depth in edges, so a leaf's
    log-rate has variance about ``variance`` whatever the shape): two features co-vary by the
    length of their shared path from the root. Counts are
    :math:`\mathrm{Poisson}(c\,m\,\mathrm{softmax}(z)_j)` with ``c = counts_per_feature`` (20:
    deep bulk-like counts; 0.1-0.2: sparse UMI-like cells, most entries 0). All-zero samples are
    drawn again.

    Returns
    -------
    X : ndarray, shape (n_samples, n_features), float64 integer counts
    labels : ndarray of int, shape (n_samples,)
        The top clade (:func:`top_clades`) holding the largest share of the sample's counts.
    parent : ndarray, shape (2 n_features - 1,)
        The planted tree.
    """
    rng = np.random.default_rng([seed, n_features, n_samples])
    m = n_features
    parent = shaped_binary_tree(m, shape, seed)
    depth = np.zeros(parent.shape[0])
    for v in range(parent.shape[0] - 2, -1, -1):
        depth[v] = depth[parent[v]] + 1
    length = np.full(parent.shape[0], variance / float(depth[:m].mean()))
    rows: list[np.ndarray] = []
    while sum(r.shape[0] for r in rows) < n_samples:
        k = n_samples - sum(r.shape[0] for r in rows)
        z = brownian_on_tree(parent, length, k, rng)[:, :m]
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        X = rng.poisson(counts_per_feature * m * p).astype(np.float64)
        rows.append(X[X.sum(axis=1) > 0])
    X = np.concatenate(rows)[:n_samples]
    clade = top_clades(parent, n_clades)
    mass = np.stack([X[:, clade == c].sum(axis=1) for c in range(n_clades)], axis=1)
    return X, np.argmax(mass, axis=1), parent
