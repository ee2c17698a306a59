"""Nearest neighbours under the TWD (docs/method.md section 9). Private.

- ``_search`` -- exact search in blocks, and the partitioned approximate search whose candidates
  are re-ranked by the exact TWD; the backends are chosen by name (``KNN_METHODS``)
- ``_nndescent`` -- hdtwd's own NN-descent on byte-coded tree vectors (the default backend)
- ``_graph`` -- kNN graphs stored exactly as ``sc.pp.neighbors`` stores them
- ``_dask`` -- the exact search and the all-pairs matrix as tasks on a Dask cluster
"""
