"""The public function of the joint hierarchies: ``learn_joint`` (both trees and the samples' distances)."""

from __future__ import annotations

from collections.abc import Sequence

from hdtwd_cli._api._common import Matrix, as_reporter, checked_matrix, checked_names, data_errors
from hdtwd_cli._api._distances import distances
from hdtwd_cli._runtime.memory import available_memory, human_bytes
from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli.errors import ResourceError
from hdtwd_cli.joint._alternate import JointHierarchy, JointParams, alternate_hierarchies
from hdtwd_cli.tree._learn import prepare
from hdtwd_cli.tree._params import TreeParams, apply_transform
from hdtwd_cli.twd._histograms import check_histograms


def learn_joint(
    X: Matrix,
    feature_names: Sequence[str] | None = None,
    *,
    sample_names: Sequence[str] | None = None,
    params: TreeParams | None = None,
    joint: JointParams | None = None,
    check_memory: bool = True,
    with_distances: bool = True,
    progress: Reporter | bool | None = None,
) -> JointHierarchy:
    r"""Learn a tree of the FEATURES and a tree of the SAMPLES that inform each other, and the samples' distances.

    Lin, Coifman, Mishne & Talmon (NeurIPS 2025), Algorithm 2 by default (Algorithm 1 with
    ``JointParams(algorithm="alternating")``); docs/method.md section 13. Round 0 is
    :func:`learn_tree`'s tree; each round builds the samples' tree from the informed TWD

    .. math:: W_r(i, i') = \mathrm{TW}(\tilde h_i, \tilde h_{i'}; T_c) + \gamma s\, \zeta(\tilde h_i - \tilde h_{i'})

    between the samples' histograms filtered in the Haar basis of the features' tree :math:`T_c`,
    then the features' tree from the same distance between the features' histograms over the
    samples, filtered in the samples' tree's basis, until the samples' distances stop moving (or a cap
    on the rounds).

    Parameters
    ----------
    X : array-like or sparse matrix, shape (n_samples, n_features)
        Non-negative values, one row per sample.
    feature_names, sample_names : sequence of str, optional
        Leaf names of the two trees (default ``f0, f1, ...`` and ``s0, s1, ...``).
    params : TreeParams, optional
        The trees' stages (as :func:`learn_tree`; ``params.transform`` is applied to ``X`` first).
    joint : JointParams, optional
        The algorithm, the Haar share, the regulariser, the rounds (default ``JointParams()``).
    check_memory : bool
        Refuse round 0 when its tree would not fit in the available memory.
    with_distances : bool
        Compute ``distances`` (``False``: leave it ``None``, for callers that take the distances from
        ``features_tree`` in another layout, as ``hdtwd distance --joint`` does).
    progress : bool or Reporter, optional
        Progress bars on stderr.

    Returns
    -------
    JointHierarchy
        ``features_tree`` (with its Haar filter: ``hd.distances(X, tree=result.features_tree)`` gives
        ``result.distances`` bit for bit), ``samples_tree`` (leaves: the samples), ``distances``
        (``n x n``: the exact TWD of the filtered histograms on the final features' tree), ``rounds``.

    Examples
    --------
    >>> import numpy as np, hdtwd_cli as hd
    >>> X = np.random.default_rng(0).poisson(2.0, size=(40, 12))
    >>> J = hd.learn_joint(X)
    >>> J.distances.shape, J.samples_tree.n_leaves, J.features_tree.n_leaves
    ((40, 40), 40, 12)
    """
    params = params or TreeParams()
    joint = joint or JointParams()
    Xm = apply_transform(checked_matrix(X), params.transform)
    names = checked_names(feature_names, Xm.shape[1])
    samples = (
        [f"s{i}" for i in range(Xm.shape[0])]
        if sample_names is None
        else checked_names(sample_names, Xm.shape[0], "sample_names")
    )
    data_errors(lambda: check_histograms(Xm))
    rep = as_reporter(progress)
    have = available_memory() if check_memory else None
    if params.learner == "average" and have is not None:
        # UPGMA reads all pairs: the informed distances of the larger axis, their copy, the condensed pairs
        # and SciPy's copy of them (no landmark items, as the diffusion learner has)
        big = max(Xm.shape)
        need = 24 * big * big
        if need > have:
            raise ResourceError(
                f"the joint hierarchies under the average learner need all pairs of {big} items' informed "
                f"distances (about {human_bytes(need)}; {human_bytes(have)} available): give {{a}} diffusion, "
                "whose trees go through landmark items",
                a="learner",
            )
    prepared = data_errors(lambda: prepare(Xm, names, params, reporter=rep, available=have))
    result: JointHierarchy = data_errors(
        lambda: alternate_hierarchies(Xm, names, samples, params, joint, prepared=prepared, reporter=rep)
    )
    if with_distances:
        result.distances = distances(X, result.features_tree, feature_names=names)
    return result
