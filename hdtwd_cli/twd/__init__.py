"""The tree-Wasserstein distance on a learned tree (paper Eq. 5; docs/method.md section 4). Private.

TWD(mu, nu) = sum_v alpha_v |mu(Gamma_v) - nu(Gamma_v)| is the L1 distance between the samples'
tree vectors y = (alpha_v mu(Gamma_v))_v:

- ``_histograms`` -- histograms on the tree's leaves (``tree_histograms``: the one composition every route
  calls: names to leaves, the tree's map, normalisation, the Haar filter) and the Haar selection
- ``_distance`` -- tree vectors, the choice of kernel, blocks
- ``_kernels`` -- the compiled kernels: tiled dense L1, sparse overlap L1, tree vectors, row sums
- ``_pruned`` -- all-pairs L1 between sparse tree vectors, pruned per pair of row blocks
- ``_small`` -- NumPy twins of the kernels for small inputs (the same bits, no compilation)
"""
