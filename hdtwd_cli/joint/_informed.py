r"""The informed tree-Wasserstein distance between items (samples or features) and the tree it gives.

For items with histograms :math:`h_i` over the leaves of a tree :math:`T` (the other axis' tree):

.. math:: W(i, i') = \mathrm{TW}(h_i, h_{i'}; T) + \gamma\, s\, \zeta(\lVert h_i - h_{i'} \rVert_2),
   \qquad \zeta(d) = \sqrt d - \vartheta \ln(1 + \sqrt d / \vartheta),

the regulariser :math:`\zeta` being the snowflake of co-manifold learning (Mishne, Chi & Coifman
2019), :math:`\zeta(d) = \int_0^d \mathrm d\xi / (2(\sqrt\xi + \vartheta))`, and
:math:`s = \operatorname{median} \mathrm{TW} / \operatorname{median} \zeta` over the pairs, so that
``gamma`` is a share of the TWD's scale whatever the units (docs/method.md section 13). The tree of
the items is :math:`T(W)` (:func:`hdtwd_cli.tree._learn.tree_from_distances`): exact up to
:data:`~hdtwd_cli._defaults.AUTO_LANDMARKS_ABOVE` items, else from the distances to
:data:`~hdtwd_cli._defaults.DEFAULT_LANDMARKS` items drawn with the seed.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hdtwd_cli._runtime.blas import serial_blas
from hdtwd_cli.errors import InputError
from hdtwd_cli.tree._diffusion import kernel_scale
from hdtwd_cli.tree._landmarks import effective_landmarks
from hdtwd_cli.tree._learn import tree_from_distances
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._distance import TreeVectors, tree_distances
from hdtwd_cli.twd._histograms import haar_selection

__all__ = ["SNOWFLAKE_THETA", "snowflake", "informed_distances", "items_tree", "filtered", "in_leaf_order"]

#: :math:`\vartheta` of the snowflake :math:`\zeta` (the authors' co-manifold code).
SNOWFLAKE_THETA = 1e-6


def snowflake(d: np.ndarray, theta: float = SNOWFLAKE_THETA) -> np.ndarray:
    r""":math:`\zeta(d) = \sqrt d - \vartheta \ln(1 + \sqrt d / \vartheta)`: grows like :math:`\sqrt d`
    for :math:`d \gg \vartheta^2`, like :math:`d / (2\vartheta)` near 0; increasing, :math:`\zeta(0) = 0`."""
    r = np.sqrt(np.maximum(d, 0.0))
    return r - theta * np.log1p(r / theta)


def _euclidean_rows(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Euclidean distances between the rows of ``A`` and ``B`` (one BLAS thread: the same bits anywhere)."""
    with serial_blas():
        G = A @ B.T
    sa, sb = (A * A).sum(axis=1)[:, None], (B * B).sum(axis=1)[None, :]
    d2 = sa + sb - 2.0 * G
    d2[d2 <= 1e-12 * (sa + sb)] = 0.0  # at the formula's rounding error: equal rows are at distance 0
    if A is B:  # exactly symmetric, as the operator's distances must be
        d2 = np.triu(d2, 1)
        d2 += d2.T
    return np.sqrt(d2)


def in_leaf_order(tree: Tree, names: list[str]) -> np.ndarray:
    """Column of each of ``tree``'s leaves among ``names`` (histograms in ``names``' order -> leaf order)."""
    index = {n: j for j, n in enumerate(names)}
    return np.array([index[n] for n in tree.leaf_names], dtype=np.int64)


def informed_distances(H: np.ndarray, tree: Tree, gamma: float, landmarks: np.ndarray | None = None) -> np.ndarray:
    r"""The informed TWD :math:`W` between the rows of ``H`` (histograms in ``tree``'s leaf order).

    All pairs (``n x n``), or every row against the rows ``landmarks`` (``n x n'``). The TWD is the
    package's exact one (:func:`hdtwd_cli.twd._distance.tree_distances`) on ``tree``'s edge lengths.
    """
    bare = dataclasses.replace(tree, feature_weights=None, denoiser=None, haar_keep=None)
    if landmarks is None:
        W = tree_distances(TreeVectors(bare, H))
        ref = H
    else:
        ref = H[landmarks]
        W = tree_distances(TreeVectors(bare, ref, extra=H), H)
    if gamma > 0:
        Z = snowflake(_euclidean_rows(H, ref))
        mz = float(np.median(Z))
        if mz > 0:
            W += (gamma * float(np.median(W)) / mz) * Z
    return W


def items_tree(
    H: np.ndarray, names: list[str], tree: Tree, params: TreeParams, gamma: float, what: str = "items"
) -> tuple[Tree, np.ndarray]:
    r"""The tree :math:`T(W)` of the items (rows of ``H``, named ``names``) from their informed TWD on
    ``tree``, and those distances (all pairs, or to the landmark items drawn with the seed).

    Raises :class:`~hdtwd_cli.errors.InputError` when at least half of the distances are 0 (``what``
    names the items): the kernel's scale, their median, would be 0.
    """
    n = H.shape[0]
    nl = effective_landmarks(None, n) if params.learner != "average" else 0  # UPGMA reads all pairs
    landmarks = None
    if nl:
        landmarks = np.sort(np.random.default_rng([params.seed, n]).choice(n, size=nl, replace=False))
    W = informed_distances(H, tree, gamma, landmarks)
    scale = kernel_scale(W) if landmarks is None else float(np.median(W))  # the operator's own median, no index arrays
    if not scale > 0:
        raise InputError(
            f"at least half of the pairs of {what} have the same histograms on the other axis' tree (median "
            "distance 0): the joint hierarchies have no scale for their tree"
        )
    return tree_from_distances(W.copy(), list(names), params, landmarks=landmarks), W


def filtered(H: np.ndarray, tree: Tree, share: float) -> tuple[np.ndarray, np.ndarray]:
    r"""Rows of ``H`` (leaf order) filtered in the Haar basis of ``tree``, keeping the vectors that carry
    ``share`` of the coefficients' mass over these rows (:func:`hdtwd_cli.tree._haar.kept_coefficients`);
    the projection is clipped and normalised as every route does it
    (:func:`hdtwd_cli.twd._histograms.haar_selection`). Returns the rows and the kept vectors."""
    return haar_selection(tree, H, share)
