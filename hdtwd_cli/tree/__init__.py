"""Learning the features' tree (paper Sec. 3; docs/method.md sections 1-3, 6, 7). Private.

The stages, in the order the data flows through them:

- ``_features`` -- the features' ambient space and weights (idf, latent space; section 7)
- ``_diffusion`` -- the feature diffusion operator (Eq. 1; section 1)
- ``_landmarks`` -- landmark diffusion for many features (Roseland; section 6)
- ``_hyperbolic`` -- the multi-scale hyperbolic embedding (Sec. 3.2; section 2)
- ``_hd_lca`` -- HD-LCA and the binary tree it decodes (Props. 1 & 3, Alg. 1; section 3),
  with ``_linkage`` (complete linkage by nearest-neighbour chain)
- ``_forms`` -- the form of the samples' values (counts, their log1p, scanpy's log-normalised values)
- ``_values`` -- the chain's first stage: the denoising rule (by form) and the denoised rows
- ``_denoise`` -- the rank-r denoising of the samples' values
- ``_learn`` -- the stages composed (``learn_tree``); ``_params`` -- ``TreeParams``
- ``_tree`` -- the :class:`Tree` type the other layers share

``_kernels`` holds the stages' compiled kernels and ``_small`` their NumPy twins for small inputs.
"""
