"""Nearest neighbours under the TWD (docs/method.md section 9). Private.

- ``_choose`` -- the backends by name (``KNN_METHODS``), ``auto``, and the one entry that runs them
- ``_search`` -- the partitioned approximate search on byte-coded tree vectors whose candidates
  are re-ranked by the exact TWD, and the re-ranking itself
- ``_bounded`` -- the exact search pruned by lower bounds from grouped sums of the tree vectors
- ``_nndescent`` -- hdtwd's own NN-descent on byte-coded tree vectors (the default backend)
- ``_graph`` -- kNN graphs stored exactly as ``sc.pp.neighbors`` stores them
- ``_dask`` -- the exact search and the all-pairs matrix as tasks on a Dask cluster
"""
