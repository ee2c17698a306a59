"""When a problem is small enough for the NumPy twins of the compiled kernels.

The first call of any compiled function has a fixed cost (numba sets up its typing context and
loads the machine code from its cache), more than the whole work on a matrix of a few hundred
samples. Below :data:`SMALL_WORK` elementary operations the callers use the twins instead
(``tree/_small.py``, ``twd/_small.py``), which give the compiled kernels' bits (tested). The
thresholds live here, in one place, so that a test can move every caller to one path at once.
"""

#: Problems up to this many elementary operations take the NumPy path.
SMALL_WORK = 2_000_000
#: The per-node loop of the tree-vector twin runs in Python: at most this many nodes.
SMALL_NODES = 4096
