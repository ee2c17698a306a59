"""The method's named choices and defaults, importable without the numerical stack.

The command line declares its options from these names at start-up (``hdtwd --version`` must
not pay for numpy, scipy or numba); the numerical modules take them from here too, so every
choice has one definition. Nothing in this module imports more than the standard library.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

__all__ = [
    "LEARNERS",
    "AVERAGE_LEAF_LENGTH",
    "DIFFUSION_LEAF_LENGTH",
    "AVERAGE_HEIGHT_POWER",
    "JOINT_SHARE",
    "JOINT_GAMMA",
    "JOINT_ROUNDS",
    "JOINT_TOL",
    "Metric",
    "Bandwidth",
    "METRICS",
    "BANDWIDTHS",
    "PRESETS",
    "TRANSFORMS",
    "DEFAULT_EPS",
    "DEFAULT_SCALES",
    "WEIGHTINGS",
    "FEATURE_SPACES",
    "LANDMARK_METHODS",
    "AUTO_LANDMARKS_ABOVE",
    "DEFAULT_LANDMARKS",
    "LINKAGES",
    "EDGE_WEIGHTS",
    "DEFAULT_K",
    "OT_BUDGET",
]

Metric = Literal["cosine", "correlation", "euclidean"]
Bandwidth = Literal["median", "knn"]
METRICS: tuple[str, ...] = get_args(Metric)
BANDWIDTHS: tuple[str, ...] = get_args(Bandwidth)

#: Named configurations. ``paper`` reproduces docs/method.md sections 1-4 exactly (the paper's Alg. 1 and
#: Eq. 5, with the paper's default grid point c = 1, K = 7); ``default`` is the library default,
#: chosen by an ablation across all the data sets (docs/defaults.md).
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {
        "learner": "diffusion",
        "eps": 1.0,
        "scales": 7,
        "metric": "cosine",
        "linkage": "single",
        "bandwidth": "median",
        "edge_weights": "midpoint",
        "transform": "none",
        "landmark_eps": None,
        "feature_space": "data",
        "feature_dims": 100,
        "weighting": "none",
        "leaf_length": 0.0,
        "min_df": 1,
        "max_features": 0,
        "denoise": 0,
    },
    "default": {
        "learner": "diffusion",
        "eps": 1.0,
        "scales": 7,
        "metric": "correlation",
        "linkage": "complete",
        "bandwidth": "median",
        "edge_weights": "lca",
        "transform": "none",
        "landmark_eps": 0.1,
        "feature_space": "auto",
        "feature_dims": 100,
        "weighting": "idf",
        "leaf_length": None,
        "min_df": 1,
        "max_features": 20000,
        "denoise": "auto",
    },
}
#: How the features' tree is learned: ``diffusion`` (the paper's operator, embedding and HD-LCA,
#: docs/method.md sections 1-3) or ``average`` (average linkage on the correlation distances of the
#: same features' vectors, section 14).
LEARNERS = ("diffusion", "average")
#: The automatic leaf term of the average learner, added to the features' space's own (docs/method.md section 14).
AVERAGE_LEAF_LENGTH = 2.0
#: The automatic leaf term of the diffusion learner, added to the features' space's own (docs/method.md section 7).
DIFFUSION_LEAF_LENGTH = 1.0
#: The average learner's node heights: the UPGMA heights raised to this whole power relative to the root's
#: (docs/method.md section 14; by products, the same bits on every CPU): the coarse levels weigh more in the TWD.
AVERAGE_HEIGHT_POWER = 4
#: Element-wise transforms of the data (:func:`hdtwd_cli.tree._params.apply_transform`).
TRANSFORMS = ("none", "log1p", "sqrt")
#: Default kernel-scale multiplier c (eps = c * median distance).
DEFAULT_EPS = float(PRESETS["default"]["eps"])
#: Default largest scale K (K + 1 scales).
DEFAULT_SCALES = int(PRESETS["default"]["scales"])

#: Feature weights applied before samples become histograms (:mod:`hdtwd_cli.tree._features`).
WEIGHTINGS = ("none", "idf")
#: The features' ambient space for their initial distance.
FEATURE_SPACES = ("auto", "data", "svd")

LANDMARK_METHODS = ("random", "kmeans")
#: Above this many features the tree is learned through landmarks unless ``--landmarks 0``.
AUTO_LANDMARKS_ABOVE = 5000
#: Landmarks used by the automatic switch.
DEFAULT_LANDMARKS = 500

#: Agglomeration rules on the HD-LCA values (:func:`hdtwd_cli.tree._hd_lca.hd_lca_merge_order`).
LINKAGES = ("single", "average", "complete", "weighted")
#: Edge-length rules (:func:`hdtwd_cli.tree._hd_lca.decode_tree`).
EDGE_WEIGHTS = ("midpoint", "lca")

#: Neighbour counts tried by the kNN evaluation (``classify``'s methods: :mod:`hdtwd_cli.evaluate._methods`).
DEFAULT_K = (1, 3, 5, 7, 9, 11, 13, 15, 17, 19)
#: Transport variables (support pairs) of the exact-OT programs of one split (``--ot-budget``).
OT_BUDGET = 10**9

#: The joint hierarchies (docs/method.md section 13): Algorithm 2's Haar share theta, the snowflake's
#: weight gamma (a share of the TWD's median), the cap on the rounds and the stopping tolerance (the
#: share of the features' tree's clusters that may still be new). Chosen in benchmarks/bench_joint.py.
JOINT_SHARE = 0.9
JOINT_GAMMA = 0.0
JOINT_ROUNDS = 4
JOINT_TOL = 0.02
