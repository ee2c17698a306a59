"""The I/O layer: every file format hdtwd reads or writes, and the HDF5 layouts. Private.

The bottom layer: it imports nothing of the method. Writers take plain arrays or objects with
the attributes of :class:`TreeLike`; readers return plain records (:class:`TreeRecord`,
:class:`EmbeddingRecord`) that the method's layers turn into their own types.

- ``_matrix`` -- data matrices (.npy, .npz, .mtx, .csv, .tsv, .h5ad, .biom; ``_tenx``: 10x outputs,
  ``_table``: delimited tables and their names, ``_biom``: BIOM 2.1 / 1.0, ``_orient``: features x
  samples refused)
- ``_hdf5`` -- embedding, tree and distance files (documented layouts)
- ``_newick``, ``_nexus`` -- Newick and annotated Nexus trees (iterative reader and writer)
- ``_output`` -- distance matrices and trees by suffix
- ``_atomic`` -- atomic writes (temporary file + rename)
- ``_vectors`` -- the features' own vectors (``--feature-embedding``)
"""

from hdtwd_cli.io._atomic import atomic_path, check_output_path
from hdtwd_cli.io._hdf5 import read_embedding, write_distances_blocked, write_embedding
from hdtwd_cli.io._matrix import MatrixData, fingerprint, read_labels, read_matrix, read_stdin_matrix
from hdtwd_cli.io._nexus import NEXUS_SUFFIXES
from hdtwd_cli.io._output import (
    TREE_SUFFIXES,
    distance_suffix,
    read_tree_file,
    stores_metadata,
    write_distances,
    write_newick_file,
    write_npy_in_place,
    write_tree_file,
)
from hdtwd_cli.io._records import DenoiserRecord, EmbeddingRecord, TreeLike, TreeRecord
from hdtwd_cli.io._vectors import read_feature_embedding

__all__ = [
    "atomic_path",
    "check_output_path",
    "read_embedding",
    "write_embedding",
    "MatrixData",
    "fingerprint",
    "read_matrix",
    "read_labels",
    "read_stdin_matrix",
    "read_tree_file",
    "write_tree_file",
    "write_distances",
    "write_newick_file",
    "DenoiserRecord",
    "EmbeddingRecord",
    "TreeLike",
    "TreeRecord",
    "NEXUS_SUFFIXES",
    "TREE_SUFFIXES",
    "distance_suffix",
    "read_feature_embedding",
    "stores_metadata",
    "write_distances_blocked",
    "write_npy_in_place",
]
