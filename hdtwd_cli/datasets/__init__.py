r"""Data with a planted feature hierarchy, and how well a learned tree recovers it (``hd.datasets``).

scanpy's ``sc.datasets`` way: generators of samples x features matrices whose features follow a known
(planted) tree, for trying the method where the answer is known, and the measure of how much of that
tree a learned one recovers (benchmarks/RESULTS.md section 15 reports it for every family and size)::

    import hdtwd_cli as hd
    X, labels, planted = hd.datasets.planted_hierarchy(600, 300, shape="balanced", seed=0)
    tree = hd.learn_tree(X, params=hd.TreeParams(learner="average"))
    hd.datasets.recovery(tree, planted)   # Recovery(triplets=..., spearman=...): 1 is the planted tree

The generators (their columns are the features ``f0, f1, ...``, the names :func:`hdtwd_cli.learn_tree`
gives a matrix without names, and leaf ``j`` of a planted tree is feature ``j``):

- :func:`planted_hierarchy` -- Poisson counts whose log-rates are Brownian motion down a planted tree of a
  given shape (random, balanced, deep) at a given depth (bulk-like to sparse UMI-like), with each sample's
  heaviest top clade as its label;
- :func:`planted_counts` -- Poisson counts from Brownian motion on a random feature tree, classes by profile;
- :func:`planted_corpus` -- sparse word counts with a planted topic hierarchy and Zipf word frequencies;
- :func:`produce_documents` -- the paper's produce model (Sec. 5.1, App. D.1: :data:`PRODUCE_WORDS`, whose
  categories are :data:`PRODUCE_CLADES`);
- :func:`gaussian_tree_samples` -- the paper's App. E toy: every node of a balanced tree is a feature.

The measure, :func:`recovery`: over random triples of the shared leaves, the share whose learned tree joins
the same pair first as the planted tree (rooted-triplet agreement; chance 1/3, a star tree 1/3), and the
Spearman correlation of the two trees' leaf-to-leaf path lengths over random pairs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hdtwd_cli._api._door import at_the_door
from hdtwd_cli.errors import ParameterError
from hdtwd_cli.evaluate._recovery import Recovery
from hdtwd_cli.evaluate._recovery import recovery as _parent_recovery
from hdtwd_cli.evaluate._synthetic import (
    PRODUCE_CLADES,
    PRODUCE_WORDS,
    TREE_SHAPES,
    gaussian_tree_samples,
    planted_corpus,
    planted_counts,
    planted_hierarchy,
    produce_documents,
)
from hdtwd_cli.tree._tree import Tree

__all__ = [
    "planted_hierarchy",
    "planted_counts",
    "planted_corpus",
    "produce_documents",
    "gaussian_tree_samples",
    "PRODUCE_WORDS",
    "PRODUCE_CLADES",
    "TREE_SHAPES",
    "recovery",
    "Recovery",
]


@at_the_door  # the tree's kind checked as every public function checks it
def recovery(
    tree: Tree,
    planted: np.ndarray,
    *,
    planted_names: Sequence[str] | None = None,
    n_triples: int = 20000,
    seed: int = 0,
) -> Recovery:
    r"""How much of a planted hierarchy a learned tree recovers.

    Over random triples :math:`\{i, j, k\}` of the leaves both trees have (matched by name), the
    rooted-triplet agreement is the share of triples whose learned tree joins first the pair the planted
    tree joins first (its lowest common ancestor strictly below the other pairs'; a triple the learned
    tree leaves unresolved counts 1/3, so chance and the star tree score about 1/3); the path-length
    correlation is the Spearman correlation over random pairs of leaves of
    :math:`d(i, j) = r_i + r_j - 2 r_{\mathrm{lca}(i, j)}` in each tree (``r``: the distance from the root;
    the planted tree's edges of length 1). Neither depends on the leaves' order.

    Parameters
    ----------
    tree : Tree
        The learned tree (:func:`hdtwd_cli.learn_tree`), its lengths as learned.
    planted : ndarray of int
        The planted tree's parent array (``-1`` at the root; leaves ``0..m-1`` first), as the generators
        return it.
    planted_names : sequence of str, optional
        The planted tree's leaf names, leaf ``j`` first [default: ``f0, f1, ...``, the names of the
        generators' columns when no feature names are given].
    n_triples : int
        Random triples (and pairs) drawn from ``seed``.

    Returns
    -------
    Recovery
        ``triplets`` (rooted-triplet agreement, 1: every triple as planted) and ``spearman``.
    """
    parent = np.asarray(planted, dtype=np.int64)
    m = (parent.shape[0] + 1) // 2 if planted_names is None else len(planted_names)
    names = [f"f{j}" for j in range(m)] if planted_names is None else [str(s) for s in planted_names]
    try:
        return _parent_recovery(
            tree.parent,
            list(tree.leaf_names),
            parent,
            names,
            learned_length=tree.length,
            n_triples=n_triples,
            seed=seed,
        )
    except ValueError as e:
        raise ParameterError(str(e), "planted") from None
