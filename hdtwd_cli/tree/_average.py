r"""The features' tree by average linkage on their correlation distances (docs/method.md section 14).

The features' vectors :math:`a_j` are the columns of the features' space the diffusion would read
(section 7: the denoised values for cells, the data columns, the latent SVD space for words, or a
given embedding). Their correlation distance

.. math:: d(j, j') = 1 - \frac{\langle a_j - \bar a_j, a_{j'} - \bar a_{j'}\rangle}
          {\lVert a_j - \bar a_j\rVert\,\lVert a_{j'} - \bar a_{j'}\rVert} \in [0, 2]

(``1 - r``, Pearson's ``r`` across the samples) is agglomerated by average linkage (UPGMA: the
distance between two clusters is the mean of the distances between their members). Every internal
node sits at the UPGMA height :math:`u(v) = \bar d(A, B)/2` raised to the height power ``p``
relative to the root's,

.. math:: h(v) = u_{\mathrm{root}} \left(\frac{u(v)}{u_{\mathrm{root}}}\right)^{p},

so an edge's length is :math:`h(\mathrm{parent}) - h(\mathrm{child})` (average linkage's merge
distances never decrease, so every length is >= 0). ``p = 1`` is the UPGMA ultrametric; ``p > 1``
(:data:`~hdtwd_cli._defaults.AVERAGE_HEIGHT_POWER`) shortens the fine levels against the coarse
ones. The transform is monotone: the merges, the rooted triplets and the ranks of leaf-to-leaf path
lengths are those of UPGMA; only the TWD's weights of the levels change.

Why: on counts generated from a planted feature hierarchy (Brownian log-rates down a tree), the
HD-LCA tree of the diffusion operator loses the coarse levels as the features grow (the kernel's
affinities between distant features saturate, and complete linkage on saturated values merges
them arbitrarily), while average linkage on correlations averages the noise of every pair between
two clusters (benchmarks/RESULTS.md, "Recovery of a planted hierarchy").

Determinism: the centred Gram matrix comes from the package's fixed-tile Gram products (the same
bits at any thread count) and the column sums from sums over rows in order; SciPy's average
linkage (the nearest-neighbour chain) depends only on the values. Memory: the ``m x m`` Gram
matrix beside the condensed distances, ``12 m^2`` bytes at the peak (4.8 GB at 20,000 features;
measured 5.4 GB for the whole command), then the distances and SciPy's copy of them.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import AVERAGE_HEIGHT_POWER
from hdtwd_cli.tree._denoise import DenoisedRows
from hdtwd_cli.tree._diffusion import correlation_gram
from hdtwd_cli.tree._hd_lca import linkage_parents
from hdtwd_cli.tree._tree import Tree

__all__ = ["correlation_distances", "average_linkage_from_distances", "average_linkage_tree", "tree_from_linkage"]


def correlation_distances(F: np.ndarray | sp.spmatrix | DenoisedRows) -> np.ndarray:
    r"""Condensed correlation distances :math:`1 - r_{jj'}` between the columns of ``F`` (``n x m``), clipped to [0, 2].

    From the centred Gram matrix of :func:`~._diffusion.correlation_gram`. A column with no spread
    (constant over the rows) has no correlation: it is at distance 1 from every other.
    """
    m = F.shape[1]
    G, inv = correlation_gram(F, release=True)
    d = np.empty(m * (m - 1) // 2)
    at = 0
    for j in range(m - 1):  # the upper triangle row by row (no m^2/2 index arrays), 1 - r clipped to [0, 2]
        row = G[j, j + 1 :] * (inv[j] * inv[j + 1 :])
        np.subtract(1.0, row, out=d[at : at + row.size])
        at += row.size
    del G
    np.clip(d, 0.0, 2.0, out=d)
    return d


def tree_from_linkage(Z: np.ndarray, names: list[str], *, height_power: int = 1) -> Tree:
    """The :class:`Tree` of a SciPy linkage matrix: leaves first, merge ``i`` is node ``m + i``, the root last
    (:func:`~._hd_lca.linkage_parents`); node heights half the merge distances (made non-decreasing), raised to
    the whole number ``height_power`` relative to the root's (module docstring), edges the differences of heights."""
    if height_power < 1:
        raise ValueError("the height power is a whole number >= 1")
    m = len(names)
    parent = linkage_parents(Z[:, :2].astype(np.int64))
    height = np.zeros(2 * m - 1)
    height[m:] = np.maximum.accumulate(Z[:, 2] / 2.0)
    top = height[-1]
    if height_power != 1 and top > 0:  # (u / top)^p by p - 1 products: IEEE multiplications, the same bits on
        ratio = height[m:] / top  # every CPU (a SIMD pow may round otherwise)
        power = ratio.copy()
        for _ in range(height_power - 1):
            power *= ratio
        height[m:] = top * power
    length = np.zeros(2 * m - 1)
    kids = parent >= 0
    length[kids] = height[parent[kids]] - height[kids]
    tree = Tree(parent=parent, length=length, leaf_names=list(names), merge_height=height[m:].copy())
    tree.validate()
    return tree


def average_linkage_from_distances(D: np.ndarray, names: list[str]) -> Tree:
    """The UPGMA tree of items given by their ``m x m`` symmetric distances ``D`` (zero diagonal): the joint
    hierarchies' trees from informed distances under the average learner (docs/method.md section 14)."""
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import squareform

    if D.shape[0] < 2:
        raise ValueError("at least two items are needed to build a tree")
    Z = linkage(squareform(D, checks=False), method="average")
    tree = tree_from_linkage(Z, names)
    tree.metadata.update({"learner": "average", "distance": "given"})
    return tree


def average_linkage_tree(
    F: np.ndarray | sp.spmatrix | DenoisedRows, names: list[str], *, height_power: int = AVERAGE_HEIGHT_POWER
) -> Tree:
    """The average-linkage tree of the columns of ``F`` under the correlation distance, node heights the UPGMA
    heights raised to ``height_power`` (module docstring)."""
    if F.shape[1] < 2:
        raise ValueError("at least two features are needed to build a tree")
    from scipy.cluster.hierarchy import linkage  # on first use: small inputs never load scipy.cluster

    d = correlation_distances(F)
    Z = linkage(d, method="average")
    del d
    tree = tree_from_linkage(Z, names, height_power=height_power)
    tree.metadata.update({"learner": "average", "distance": "correlation", "height_power": height_power})
    return tree
