"""Evaluation: the paper's kNN protocol and what it compares against (App. C; docs/method.md section 5). Private.

- ``_protocol`` -- stratified splits, kNN accuracy, baselines, parameter selection
- ``_competitors`` -- the trees of the paper's competitors (Table 1)
- ``_weighted`` -- competitors' trees with edge weights fitted to exact OT (WQTWD, WCTWD, sliced)
- ``_exact_ot`` -- exact optimal transport (WMD / GMD), the oracle the TWD is checked against
- ``_synthetic`` -- data with a planted feature hierarchy (tests, examples, benchmarks)
"""
