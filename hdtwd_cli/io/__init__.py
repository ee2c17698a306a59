"""The I/O layer: every file format hdtwd reads or writes, and the HDF5 layouts.

- :mod:`.matrix` -- data matrices (.npy, .npz, .mtx, .csv, .tsv, .h5ad)
- :mod:`.hdf5` -- embedding, tree and distance files (documented layouts)
- :mod:`.newick` -- Newick trees (iterative reader and writer)
- :mod:`.output` -- distance matrices by suffix (.npy, .h5, .csv, .tsv)
- :mod:`.atomic` -- atomic writes (temporary file + rename)
"""

from .atomic import atomic_path, check_output_path
from .hdf5 import read_embedding, read_tree, write_embedding, write_tree
from ..errors import HdtwdWarning
from .matrix import MatrixData, fingerprint, read_labels, read_matrix, read_stdin_matrix
from .newick import NewickError, read_newick, write_newick
from .output import read_tree_file, write_distances, write_newick_file

__all__ = [
    "atomic_path",
    "check_output_path",
    "read_embedding",
    "read_tree",
    "write_embedding",
    "write_tree",
    "HdtwdWarning",
    "MatrixData",
    "fingerprint",
    "read_matrix",
    "read_labels",
    "read_stdin_matrix",
    "NewickError",
    "read_newick",
    "write_newick",
    "read_tree_file",
    "write_distances",
    "write_newick_file",
]
