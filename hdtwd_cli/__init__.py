"""hdtwd: tree-Wasserstein distance for high-dimensional data with a latent feature hierarchy.

The package is a thin command-line layer (:mod:`hdtwd_cli.cli`) over pure numerical stages,
one module per stage of Lin, Coifman, Mishne & Talmon (ICLR 2025):

- :mod:`hdtwd_cli.diffusion` -- feature diffusion operator (Sec. 3.2, Eq. 1; spec section 1)
- :mod:`hdtwd_cli.hyperbolic` -- multi-scale hyperbolic embedding (Sec. 3.2; spec section 2)
- :mod:`hdtwd_cli.tree` -- HD-LCA and binary tree decoding (Sec. 3.3-3.4, Alg. 1; spec section 3)
- :mod:`hdtwd_cli.distance` -- the tree-Wasserstein distance (Eq. 5; spec section 4)
- :mod:`hdtwd_cli.evaluation` -- kNN evaluation protocol (App. C; spec section 5)

and an I/O layer (:mod:`hdtwd_cli.io`) that owns every file format and the HDF5 layout.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
