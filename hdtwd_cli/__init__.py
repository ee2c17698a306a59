"""hdtwd: tree-Wasserstein distance for high-dimensional data with a latent feature hierarchy.

Lin, Coifman, Mishne & Talmon (ICLR 2025): learn the hidden hierarchy of a data set's FEATURES
(genes, words) and turn it into a distance between SAMPLES (cells, documents)::

    import hdtwd_cli as hd
    tree = hd.learn_tree(X, gene_names)             # the feature tree
    D = hd.distances(X, tree)                        # pairwise TWD
    hd.neighbors(adata, n_neighbors=15)              # like sc.pp.neighbors, on the TWD
    hd.pl.tree(tree)                                 # pictures

This module is the whole public surface (docs/api.rst); the subpackages hold the method's
stages and are private:

- :mod:`hdtwd_cli.tree` -- learning the features' tree: features' space, diffusion operator
  (Eq. 1), multi-scale hyperbolic embedding (Sec. 3.2), HD-LCA and the binary tree (Alg. 1)
- :mod:`hdtwd_cli.twd` -- the tree-Wasserstein distance on that tree (Eq. 5)
- :mod:`hdtwd_cli.knn` -- k nearest neighbours under the TWD, exact and approximate
- :mod:`hdtwd_cli.evaluate` -- the paper's kNN protocol, baselines, competitors, exact OT
- :mod:`hdtwd_cli.io` -- every file format (the bottom layer)
- :mod:`hdtwd_cli.pl` -- pictures; :mod:`hdtwd_cli.datasets` -- data with a planted feature hierarchy and
  how well a tree recovers it; :mod:`hdtwd_cli.cli` -- the ``hdtwd`` command
"""

from typing import TYPE_CHECKING, Any

from hdtwd_cli._version import __version__
from hdtwd_cli.errors import (
    ClusterError,
    HdtwdError,
    HdtwdWarning,
    InputError,
    OutputError,
    ParameterError,
    ResourceError,
)

#: Public names and the module each comes from: imported on first use (PEP 562), so that
#: ``import hdtwd_cli`` and ``hdtwd --version`` do not pay for numba, scipy and anndata.
_LAZY = {
    **dict.fromkeys(
        (
            "DistanceVectors",
            "FeatureEmbedding",
            "KnnGraph",
            "classify",
            "classify_methods",
            "competitor_trees",
            "decode_tree",
            "distance_vectors",
            "distances",
            "embed",
            "knn_graph",
            "learn_joint",
            "learn_tree",
            "neighbors",
            "sample_hierarchy",
            "tree_vectors",
        ),
        "hdtwd_cli._api",
    ),
    "TreeParams": "hdtwd_cli.tree._params",
    "Tree": "hdtwd_cli.tree._tree",
    "JointParams": "hdtwd_cli.joint._alternate",
    "JointHierarchy": "hdtwd_cli.joint._alternate",
}

#: Submodules reached as attributes, scanpy's way (``hd.pl.tree(...)``), also imported on first use.
_SUBMODULES = ("pl", "datasets")

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from hdtwd_cli import datasets, pl
    from hdtwd_cli._api import (
        DistanceVectors,
        FeatureEmbedding,
        KnnGraph,
        classify,
        classify_methods,
        competitor_trees,
        decode_tree,
        distance_vectors,
        distances,
        embed,
        knn_graph,
        learn_joint,
        learn_tree,
        neighbors,
        sample_hierarchy,
        tree_vectors,
    )
    from hdtwd_cli.joint._alternate import JointHierarchy, JointParams
    from hdtwd_cli.tree._params import TreeParams
    from hdtwd_cli.tree._tree import Tree


def __getattr__(name: str) -> Any:
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hdtwd_cli' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(__all__))


__all__ = [
    "__version__",
    # the method
    "learn_tree",
    "Tree",
    "TreeParams",
    "distances",
    "tree_vectors",
    "distance_vectors",
    "DistanceVectors",
    "knn_graph",
    "KnnGraph",
    "neighbors",
    "classify",
    "classify_methods",
    "competitor_trees",
    "embed",
    "FeatureEmbedding",
    "decode_tree",
    "learn_joint",
    "JointParams",
    "JointHierarchy",
    "sample_hierarchy",
    "pl",
    "datasets",
    # errors and warnings
    "HdtwdError",
    "InputError",
    "ParameterError",
    "OutputError",
    "ResourceError",
    "ClusterError",
    "HdtwdWarning",
]
