r"""The public Python API: the method end to end on arrays and AnnData, shaped like scanpy.

Everything the ``hdtwd`` command does is one call here; the command line only reads files,
calls these functions and writes their results.

========================  ===================================================================
function                  what it gives
========================  ===================================================================
:func:`learn_tree`        the feature tree (diffusion -> hyperbolic embedding -> HD-LCA tree)
:func:`learn_joint`       a features' tree and a samples' tree that inform each other, and the distances
:func:`tree_vectors`      the L1 embedding of the samples: TWD = L1 distance between rows
:func:`distances`         the pairwise (or cross) TWD matrix
:func:`distance_vectors`  the same, as a reusable object (dense, blocked or kNN output)
:func:`knn_graph`         each sample's nearest neighbours under the TWD (scanpy's meaning)
:func:`neighbors`         writes the kNN graph into an AnnData exactly as ``sc.pp.neighbors``
:func:`sample_hierarchy`  writes the joint hierarchies' cells' order, clusters and distances into an AnnData
:func:`classify`          the paper's kNN-accuracy protocol against baselines (a report dict)
:func:`classify_methods`  the methods it compares, by family
:func:`competitor_trees`  the paper's competitor trees over the same features and histograms
:func:`embed`             the stages before the tree (``hdtwd embed``)
:func:`decode_tree`       the tree from a stored embedding (``hdtwd decode-tree``)
========================  ===================================================================

The TWD between histograms :math:`\mu, \nu` on the leaves of a tree with edge lengths
:math:`\alpha_v` is (paper Eq. 5; docs/method.md section 4)

.. math:: \mathrm{TWD}(\mu, \nu) = \sum_v \alpha_v \, |\mu(\Gamma_v) - \nu(\Gamma_v)|,

where :math:`\Gamma_v` is the set of leaves below node :math:`v`: the L1 distance between the
vectors :math:`y = (\alpha_v \mu(\Gamma_v))_v`, which :func:`tree_vectors` returns.

Errors are :class:`~hdtwd_cli.errors.HdtwdError` (a ``ValueError``) naming the argument or
the input; warnings are :class:`~hdtwd_cli.errors.HdtwdWarning`.
"""

from hdtwd_cli._api._classify import chosen_methods, classify, classify_methods, competitor_trees
from hdtwd_cli._api._distances import (
    VECTORS_MAX_BYTES,
    DistanceVectors,
    KnnGraph,
    check_k,
    distance_vectors,
    distances,
    knn_graph,
    mean_tree_histogram,
    tree_vectors,
)
from hdtwd_cli._api._door import at_the_door
from hdtwd_cli._api._joint import learn_joint
from hdtwd_cli._api._learn import FeatureEmbedding, decode_tree, embed, learn_tree
from hdtwd_cli._api._scanpy import feature_mask, neighbors, sample_hierarchy, write_graph
from hdtwd_cli.knn._dask import connect, write_zarr

# the door: the public functions check their object arguments' kinds before any work (._door)
classify = at_the_door(classify)
classify_methods = at_the_door(classify_methods)
competitor_trees = at_the_door(competitor_trees)
decode_tree = at_the_door(decode_tree)
distance_vectors = at_the_door(distance_vectors)
distances = at_the_door(distances)
embed = at_the_door(embed)
knn_graph = at_the_door(knn_graph)
learn_joint = at_the_door(learn_joint)
learn_tree = at_the_door(learn_tree)
neighbors = at_the_door(neighbors)
sample_hierarchy = at_the_door(sample_hierarchy)
tree_vectors = at_the_door(tree_vectors)

__all__ = [
    "learn_tree",
    "learn_joint",
    "tree_vectors",
    "distances",
    "distance_vectors",
    "DistanceVectors",
    "knn_graph",
    "KnnGraph",
    "neighbors",
    "sample_hierarchy",
    "write_graph",
    "classify",
    "classify_methods",
    "competitor_trees",
    "embed",
    "FeatureEmbedding",
    "decode_tree",
    "VECTORS_MAX_BYTES",
    # for the command line (its one way to the layers below)
    "check_k",
    "chosen_methods",
    "connect",
    "feature_mask",
    "mean_tree_histogram",
    "write_zarr",
]
