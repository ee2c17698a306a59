r"""Algorithms 1 and 2 of the joint hierarchies: a samples' tree and a features' tree that inform each other.

Round 0 is hdtwd's features' tree :math:`T_c^0` with its histograms :math:`H` (the defaults: value
scale, denoising, idf weights; :func:`hdtwd_cli.tree._learn.learn_trees`). Round :math:`l \ge 1`
alternates (each tree from the other's newest, docs/method.md section 13):

1. samples' histograms :math:`\tilde H = \Phi_c(H)` filtered in the Haar basis of :math:`T_c^{l-1}`
   (Algorithm 2; Algorithm 1: :math:`\tilde H = H`), samples' tree
   :math:`T_r^l = T(W_r)`, :math:`W_r = \mathrm{TW}(\tilde H; T_c^{l-1}) + \gamma s \zeta`;
2. features' histograms :math:`G` (the columns of :math:`H`, each normalised over the samples),
   :math:`\tilde G = \Phi_r(G)` filtered in the Haar basis of :math:`T_r^l`, features' tree
   :math:`T_c^l = T(W_c)`, :math:`W_c = \mathrm{TW}(\tilde G; T_r^l) + \gamma s \zeta`, finished as
   every features' tree (features without mass hang from the root, leaf term, weights, denoiser).

The rounds stop when the samples' informed distances :math:`W_r` moved by at most ``tol`` (relative
Frobenius norm) since the previous round, or after ``max_rounds``; each round also records the share
of the features' tree's clusters that are new. The output features' tree carries its filter
(:attr:`hdtwd_cli.tree._tree.Tree.haar_keep`, the vectors kept on the rows it was learned from), so the
samples' distances are the package's exact TWD of the filtered histograms on it by every route; the
output samples' tree is :math:`T(W_r)` of those distances.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import JOINT_GAMMA, JOINT_ROUNDS, JOINT_SHARE, JOINT_TOL
from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli.errors import ParameterError
from hdtwd_cli.joint._informed import filtered, in_leaf_order, items_tree
from hdtwd_cli.tree._learn import Prepared, learn_trees, prepare
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree, cut, leaf_order
from hdtwd_cli.twd._histograms import haar_selection, tree_histograms

__all__ = ["ALGORITHMS", "JointParams", "JointRound", "JointHierarchy", "alternate_hierarchies", "cluster_change"]

#: ``filtered``: Algorithm 2 (alternation with Haar filtering); ``alternating``: Algorithm 1.
ALGORITHMS = ("filtered", "alternating")


@dataclass(frozen=True)
class JointParams:
    r"""The joint learning's own choices (docs/method.md section 13); the trees' stages read :class:`TreeParams`.

    Attributes
    ----------
    algorithm : {"filtered", "alternating"}
        Algorithm 2 (Haar filtering every round) or Algorithm 1 (none).
    share : float
        :math:`\theta`: the share of the Haar coefficients' total score the kept vectors carry, in
        ``[0, 1]`` (both axes, every round).
    gamma : float
        Weight of the snowflake regulariser, as a share of the TWD's median (0: the TWD alone).
    max_rounds : int
        Cap on the rounds after round 0 (at least 1).
    tol : float
        Stop when the samples' informed distances moved by at most this share since the last round,
        :math:`\lVert W_r^{l} - W_r^{l-1}\rVert_F \le \mathrm{tol}\, \lVert W_r^{l}\rVert_F`.
    """

    algorithm: Literal["filtered", "alternating"] = "filtered"
    share: float = JOINT_SHARE
    gamma: float = JOINT_GAMMA
    max_rounds: int = JOINT_ROUNDS
    tol: float = JOINT_TOL

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ParameterError(f"must be one of {', '.join(ALGORITHMS)}, not {self.algorithm!r}", "algorithm")
        if not 0.0 <= self.share <= 1.0:
            raise ParameterError("must be between 0 and 1", "share")
        if not self.gamma >= 0.0:
            raise ParameterError("must be >= 0", "gamma")
        if int(self.max_rounds) < 1:
            raise ParameterError("must be at least 1", "max_rounds")
        if not 0.0 <= self.tol < 1.0:
            raise ParameterError("must be in [0, 1)", "tol")

    def as_dict(self) -> dict[str, object]:
        return {f"joint_{k}": v for k, v in dataclasses.asdict(self).items()}


@dataclass(frozen=True)
class JointRound:
    """One round: its number, seconds, the share of new clusters in the features' tree (``change``), the
    relative change of the samples' informed distances since the last round (``moved``; 1 in round 1),
    the Haar vectors kept on each axis."""

    index: int
    seconds: float
    change: float
    moved: float
    kept_features: int
    kept_samples: int
    #: The round's features' tree with its filter, kept only when asked (``trace=True``: benchmarks).
    features_tree: Tree | None = None


@dataclass
class JointHierarchy:
    """What :func:`alternate_hierarchies` returns.

    Attributes
    ----------
    features_tree : Tree
        The final features' tree, with the map of the defaults (denoiser, weights) and, for
        Algorithm 2, its Haar filter: the TWD on it is the samples' distance.
    samples_tree : Tree
        The samples' tree, one leaf per sample (named by ``sample_names``).
    rounds : list of JointRound
    converged : bool
        Whether the stopping rule ended the rounds (else the cap did).
    """

    features_tree: Tree
    samples_tree: Tree
    rounds: list[JointRound] = field(default_factory=list)
    converged: bool = False
    distances: np.ndarray | None = None

    def _rows(self) -> np.ndarray:
        """Row (sample) index of each leaf of the samples' tree."""
        row = {n: i for i, n in enumerate(self.samples_tree.metadata["sample_names"])}
        return np.array([row[n] for n in self.samples_tree.leaf_names], dtype=np.int64)

    def sample_order(self) -> np.ndarray:
        """The samples' row indices in the order a drawing of the samples' tree lists them."""
        return self._rows()[leaf_order(self.samples_tree)]

    def sample_clusters(self, n_clusters: int) -> np.ndarray:
        """Cluster label of every sample (row order): the samples' tree cut into ``n_clusters``
        (:func:`hdtwd_cli.tree._tree.cut`)."""
        out = np.empty(self.samples_tree.n_leaves, dtype=np.int64)
        out[self._rows()] = cut(self.samples_tree, n_clusters)
        return out


def _cluster_keys(tree: Tree, code: dict[str, int]) -> set[int]:
    """Every internal node's cluster as a 64-bit sum of its leaves' codes (one pass, children first)."""
    mask = (1 << 64) - 1
    acc = [0] * tree.n_nodes
    for j, n in enumerate(tree.leaf_names):
        acc[j] = code[n]
    parent = tree.parent.tolist()
    for c in range(tree.n_nodes - 1):
        acc[parent[c]] = (acc[parent[c]] + acc[c]) & mask
    return set(acc[tree.n_leaves :])


def cluster_change(old: Tree, new: Tree) -> float:
    """Share of ``new``'s clusters (sets of leaves under an internal node) that are not clusters of ``old``."""
    names = sorted(set(old.leaf_names) | set(new.leaf_names))
    draws = np.random.default_rng(0).integers(0, 1 << 63, size=len(names), dtype=np.int64).tolist()
    code = {n: (2 * d + 1) for n, d in zip(names, draws)}
    a, b = _cluster_keys(old, code), _cluster_keys(new, code)
    return 1.0 - len(a & b) / max(len(b), 1)


def _histograms(X: np.ndarray | sp.spmatrix, names: list[str], tree: Tree) -> np.ndarray:
    """The samples' histograms on ``tree``'s leaves as every route makes them, dense."""
    H = tree_histograms(X, names, tree, haar=False)
    return sp.csr_matrix(H).toarray() if sp.issparse(H) else np.asarray(H)


def _with_filter(T: Tree, X: np.ndarray | sp.spmatrix, names: list[str], share: float) -> Tree:
    """``T`` with the filter the output carries: the Haar vectors that ``share`` of the rows' coefficients need."""
    if share < 1.0:
        _, T.haar_keep = haar_selection(T, _histograms(X, names, T), share)
    return T


def alternate_hierarchies(
    X: np.ndarray | sp.spmatrix,
    feature_names: list[str],
    sample_names: list[str],
    params: TreeParams,
    joint: JointParams,
    *,
    prepared: Prepared | None = None,
    reporter: Reporter | None = None,
    trace: bool = False,
) -> JointHierarchy:
    r"""Both trees of the rows of ``X`` (Algorithm 1 or 2; module docstring).

    ``prepared``: the chain's first stage for ``X`` and ``params``
    (:func:`hdtwd_cli.tree._learn.prepare`), shared with other trees of these rows. ``trace``: keep
    every round's features' tree, with its filter, in :attr:`JointRound.features_tree`.
    """
    rep = reporter or Reporter(quiet=True)
    if prepared is None:
        prepared = prepare(X, feature_names, params, reporter=rep)
    K, share = params.scales, joint.share if joint.algorithm == "filtered" else 1.0
    with rep.stage("round 0: the features' tree of the defaults"):
        T = learn_trees(X, feature_names, params, [K], reporter=rep, prepared=prepared)[K]
    cols = list(T.leaf_names)
    H = _histograms(X, feature_names, T)
    mass = H.sum(axis=0)
    placed = np.flatnonzero(mass > 0)
    G = np.ascontiguousarray((H[:, placed] / mass[placed][None, :]).T)  # features' histograms over the samples
    placed_names = [cols[j] for j in placed]
    space = dataclasses.replace(
        prepared.space, matrix=None, names=placed_names, unplaced=[cols[j] for j in np.flatnonzero(mass <= 0)]
    )
    finisher = dataclasses.replace(prepared, space=space)
    rounds: list[JointRound] = []
    converged = False
    W_prev: np.ndarray | None = None
    for r in range(1, int(joint.max_rounds) + 1):
        t0 = time.perf_counter()
        with rep.stage(f"round {r}: the samples' tree ({H.shape[0]} samples)"):
            Hl = H[:, in_leaf_order(T, cols)]
            Hf, keep_c = filtered(Hl, T, share) if share < 1.0 else (Hl, np.ones(Hl.shape[1], dtype=bool))
            Ts, W = items_tree(Hf, sample_names, T, params, joint.gamma, "samples")
        with rep.stage(f"round {r}: the features' tree ({len(placed_names)} features)"):
            Gl = G[:, in_leaf_order(Ts, sample_names)]
            Gf, keep_r = filtered(Gl, Ts, share) if share < 1.0 else (Gl, np.ones(Gl.shape[1], dtype=bool))
            Tc, _ = items_tree(Gf, placed_names, Ts, params, joint.gamma, "features")
            new = finisher.finish(Tc, params)
        change = cluster_change(T, new)
        moved = float(np.linalg.norm(W - W_prev) / max(np.linalg.norm(W), 1e-300)) if W_prev is not None else 1.0
        W_prev = W
        seconds = time.perf_counter() - t0
        kept = _with_filter(dataclasses.replace(new), X, feature_names, share) if trace else None
        rounds.append(JointRound(r, seconds, change, moved, int(keep_c.sum()), int(keep_r.sum()), kept))
        rep.info(
            f"round {r}: samples' distances moved {moved:.2%}; {change:.1%} of the features' clusters new; "
            f"Haar vectors kept {int(keep_c.sum())} features', {int(keep_r.sum())} samples'; {seconds:.1f} s"
        )
        T = new
        if moved <= joint.tol:
            converged = True
            break
    H_out = _histograms(X, feature_names, T)  # once: the filter's scores and the output's histograms
    if share < 1.0:
        H_out, T.haar_keep = haar_selection(T, H_out, share)
    with rep.stage("the samples' tree of the output distances"):
        samples, _ = items_tree(H_out, sample_names, T, params, joint.gamma, "samples")
    record = {**joint.as_dict(), "joint_rounds": len(rounds), "joint_converged": converged}
    T.metadata.update(record)
    samples.metadata.update({**params.as_dict(), **record, "tree_of": "samples", "sample_names": list(sample_names)})
    return JointHierarchy(T, samples, rounds, converged)
