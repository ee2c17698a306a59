"""Evaluation: the paper's kNN protocol and what it compares against (App. C; docs/method.md section 5). Private.

- ``_protocol`` -- stratified splits, kNN accuracy, baselines, parameter selection
- ``_competitors`` -- the trees of the paper's competitors (Table 1), one registry (``trees_in``)
- ``_ultrametric`` -- UltraFit's ultrametric tree
- ``_treerep`` -- TreeRep's tree (TR-TWD)
- ``_hyperbolic_hc`` -- hyperbolic hierarchical clustering (HHC-TWD)
- ``_weighted`` -- competitors' trees fitted to exact OT (WQTWD, WCTWD, sliced, UltraTree)
- ``_flowtree`` -- the quadtree's tree-optimal flow costed in the ground metric (Flowtree)
- ``_exact_ot`` -- exact optimal transport (WMD / GMD), the oracle the TWD is checked against
- ``_synthetic`` -- data with a planted feature hierarchy (tests, examples, benchmarks)
"""
