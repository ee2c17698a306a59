"""hdtwd: tree-Wasserstein distance for high-dimensional data with a latent feature hierarchy.

Lin, Coifman, Mishne & Talmon (ICLR 2025): learn the hidden hierarchy of a data set's FEATURES
(genes, words) and turn it into a distance between SAMPLES (cells, documents).

The public API (:mod:`hdtwd_cli.api`), for notebooks::

    import hdtwd_cli as hd
    tree = hd.learn_tree(X, gene_names)             # the feature tree
    D = hd.distances(X, tree)                        # pairwise TWD
    hd.neighbors(adata, n_neighbors=15)              # like sc.pp.neighbors, on the TWD

The stages, one module each (the method: docs/method.md):

- :mod:`hdtwd_cli.diffusion` -- feature diffusion operator (paper Sec. 3.2, Eq. 1; section 1)
- :mod:`hdtwd_cli.hyperbolic` -- multi-scale hyperbolic embedding (Sec. 3.2; section 2)
- :mod:`hdtwd_cli.tree` -- HD-LCA and binary tree decoding (Sec. 3.3-3.4, Alg. 1; section 3)
- :mod:`hdtwd_cli.distance` -- the tree-Wasserstein distance (Eq. 5; section 4)
- :mod:`hdtwd_cli.evaluation` -- kNN evaluation protocol (App. C; section 5)
- :mod:`hdtwd_cli.landmarks` -- landmark diffusion for many features (section 6)
- :mod:`hdtwd_cli.features` -- the features' space and weights (section 7)
- :mod:`hdtwd_cli.graph` -- kNN graphs in scanpy's layout
- :mod:`hdtwd_cli.competitors`, :mod:`hdtwd_cli.exact_ot` -- the paper's competitors (section 12)
- :mod:`hdtwd_cli.pl` -- pictures (``hd.pl.tree``, ``hd.pl.distance_heatmap``, ``hd.pl.classify_report``)

an I/O layer (:mod:`hdtwd_cli.io`) that owns every file format and the HDF5 layout, and the
command line (:mod:`hdtwd_cli.cli`), a thin shell over the API.
"""

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any  # noqa: E402

from .errors import (  # noqa: E402
    ClusterError, HdtwdError, HdtwdWarning, InputError, OutputError, ParameterError, ResourceError)

#: Public names and the module each comes from: imported on first use (PEP 562), so that
#: ``import hdtwd_cli`` and ``hdtwd --version`` do not pay for numba, scipy and anndata.
_LAZY = {**{name: "api" for name in ("DistanceVectors", "FeatureEmbedding", "KnnGraph", "classify", "decode_tree",
                                     "distance_vectors", "distances", "embed", "knn_graph", "learn_tree",
                                     "neighbors", "tree_vectors")},
         "PRESETS": "pipeline", "TreeParams": "pipeline", "Tree": "tree", "prefer_wide_vectors": "_simd"}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .api import (DistanceVectors, FeatureEmbedding, KnnGraph, classify, decode_tree, distance_vectors,
                      distances, embed, knn_graph, learn_tree, neighbors, tree_vectors)
    from ._simd import prefer_wide_vectors
    from .pipeline import PRESETS, TreeParams
    from .tree import Tree


#: Submodules reached as attributes, scanpy's way (``hd.pl.tree(...)``), also imported on first use.
_SUBMODULES = ("pl",)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hdtwd_cli' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


__all__ = [
    "__version__",
    "prefer_wide_vectors",
    "TreeParams",
    "PRESETS",
    "Tree",
    "learn_tree",
    "tree_vectors",
    "distances",
    "distance_vectors",
    "DistanceVectors",
    "knn_graph",
    "KnnGraph",
    "neighbors",
    "classify",
    "embed",
    "FeatureEmbedding",
    "decode_tree",
    "HdtwdError",
    "InputError",
    "ParameterError",
    "OutputError",
    "ResourceError",
    "ClusterError",
    "HdtwdWarning",
]
