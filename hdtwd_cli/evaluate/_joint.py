r"""The ``joint`` family of ``classify``: the features' tree of the joint hierarchies of a split.

Lin, Coifman, Mishne & Talmon (NeurIPS 2025); :func:`hdtwd_cli.joint._alternate.alternate_hierarchies`. The
inductive methods (``joint``: Algorithm 2, ``joint-alt``: Algorithm 1) learn both trees from the
split's TRAINING rows, sharing the split's first stage of the chain (its denoiser and weights), so
no test row shapes a tree: the final features' tree carries that map and, for Algorithm 2, the Haar
filter of the training rows, and the protocol places the test rows on it as on any tree
(:func:`hdtwd_cli.twd._histograms.tree_histograms`). ``joint-transductive`` learns them from every row
of the split, training and test (their labels unseen), with the first stage of those rows.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hdtwd_cli.evaluate._methods import METHODS
from hdtwd_cli.joint._alternate import JointHierarchy, JointParams, alternate_hierarchies
from hdtwd_cli.tree._learn import Prepared, prepare
from hdtwd_cli.tree._params import TreeParams

__all__ = ["method_joint_params", "joint_hierarchy", "joint_report"]


def method_joint_params(method: str) -> JointParams:
    """The joint learning of ``method`` (a ``joint`` method of the registry): the defaults, its algorithm."""
    spec = METHODS[method]
    if spec.family != "joint" or spec.algorithm is None:
        raise ValueError(f"{method!r} is not a joint method")
    return JointParams(algorithm=spec.algorithm)  # type: ignore[arg-type]


def joint_hierarchy(
    method: str,
    X: np.ndarray | sp.spmatrix,
    names: list[str],
    train: np.ndarray,
    test: np.ndarray,
    params: TreeParams,
    *,
    prepared: Prepared,
    embedding: tuple[np.ndarray, list[str]] | None = None,
) -> JointHierarchy:
    """Both trees of the split for ``method``: learned from ``X[train]`` (``prepared``: their first stage
    of the chain) or, transductive, from ``X[union(train, test)]`` (a first stage of those rows).

    Sample ``i`` of ``X`` is named ``s{i}`` in the samples' tree.
    """
    spec = METHODS[method]
    rows = np.union1d(train, test) if spec.transductive else np.asarray(train)
    if spec.transductive:
        prepared = prepare(X[rows], names, params, embedding=embedding)
    return alternate_hierarchies(
        X[rows], names, [f"s{i}" for i in rows], params, method_joint_params(method), prepared=prepared
    )


def joint_report(method: str, params: TreeParams, notes: dict[str, list]) -> dict[str, object]:
    """The report's ``params`` of a joint method beyond every TWD method's: the trees' stages, the joint
    learning's choices, the rows it learned from and per split the rank of the final tree's denoiser (the
    transductive tree's is of all the rows), the rounds run and whether they converged."""
    spec = METHODS[method]
    return {
        "eps": params.eps,
        "scales": params.scales,
        "metric": params.metric,
        "linkage": params.linkage,
        "edge_weights": params.edge_weights,
        "bandwidth": params.bandwidth,
        "leaf_length": params.leaf_length,
        **method_joint_params(method).as_dict(),
        "denoised_rank": notes.get("denoised_rank", []),  # per split: the rank of the final tree's denoiser
        "learned_from": "all rows, training and test (labels unseen)" if spec.transductive else "training rows",
        "rounds": notes.get("rounds", []),
        "converged": notes.get("converged", []),
    }
