"""Evaluation: the paper's kNN protocol and what it compares against (App. C; docs/method.md section 5). Private.

- ``_methods`` -- the registry of classify's methods (name, family, input, POT, default, tree shape) and
  of their families (help, docs, route)
- ``_splits`` -- stratified splits and the kNN rule
- ``_families`` -- each family's route: its distances on a split (one prepared stage per split, hdtwd's
  parameter selection) and its settings in the report
- ``_protocol`` -- the protocol: the splits, every method's route on each, the report (margins, skipped
  methods)
- ``_baselines`` -- distances on the values as they are (cosine, L1, tf-idf, PCA as scanpy's users get it)
- ``_competitors`` -- the trees of the paper's competitors (Table 1) and the star tree, finished with
  the split's map (denoiser, weights)
- ``_ultrametric`` -- UltraFit's ultrametric tree
- ``_treerep`` -- TreeRep's tree (TR-TWD)
- ``_hyperbolic_hc`` -- hyperbolic hierarchical clustering (HHC-TWD)
- ``_weighted`` -- competitors' trees fitted to exact OT (WQTWD, WCTWD, sliced, UltraTree)
- ``_flowtree`` -- the quadtree's tree-optimal flow costed in the ground metric (Flowtree)
- ``_exact_ot`` -- exact optimal transport (WMD / GMD), the oracle the TWD is checked against
- ``_synthetic`` -- data with a planted feature hierarchy (tests, examples, benchmarks)

Its exported names are the registry's texts for the command line: ``methods_help`` (``--methods``' help,
read at start-up: the registry holds data only, no NumPy) and ``with_methods_table`` (docs/classify.md's
table, for the manual pages' generator).
"""

from hdtwd_cli.evaluate._methods import methods_help, with_methods_table

__all__ = ["methods_help", "with_methods_table"]
