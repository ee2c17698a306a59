r"""Nearest-neighbour graphs of the TWD in scanpy's layout, so UMAP and Leiden run on them unchanged.

scanpy stores a neighbour graph under a key (``sc.pp.neighbors(..., key_added="hdtwd")``) as

- ``obsp["hdtwd_distances"]``: CSR, each row holding the distances to its k nearest neighbours;
- ``obsp["hdtwd_connectivities"]``: CSR, symmetric fuzzy-set memberships (UMAP's rule);
- ``uns["hdtwd"]``: ``{"connectivities_key", "distances_key", "params": {"n_neighbors", "method",
  "metric", ...}}``, where ``n_neighbors`` counts the sample itself, as in scanpy.

Connectivities follow UMAP's fuzzy simplicial set (McInnes et al. 2018): with
:math:`\rho_i` the distance to the nearest neighbour and :math:`\sigma_i` solving
:math:`\sum_j \exp(-(d_{ij} - \rho_i)/\sigma_i) = \log_2 k`, the directed weights
:math:`p_{ij} = \exp(-(d_{ij} - \rho_i)/\sigma_i)` are symmetrised as :math:`P + P^\top - P \circ P^\top`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["knn_distance_matrix", "umap_connectivities", "scanpy_neighbors_uns"]


def knn_distance_matrix(indices: np.ndarray, distances: np.ndarray) -> sp.csr_matrix:
    """The n x n CSR matrix with row ``i`` holding ``distances[i]`` at columns ``indices[i]``.

    The arrays are copied: the CSR constructor may share them, and sorting the column indices
    would then reorder the caller's arrays in place.
    """
    n, k = indices.shape
    indptr = np.arange(0, n * k + 1, k, dtype=np.int64)
    cols = np.array(indices, dtype=np.int64, copy=True).ravel()
    vals = np.array(distances, dtype=np.float64, copy=True).ravel()
    M = sp.csr_matrix((vals, cols, indptr), shape=(n, n))
    M.sort_indices()
    return M


def umap_connectivities(indices: np.ndarray, distances: np.ndarray, n_iter: int = 64) -> sp.csr_matrix:
    """UMAP's symmetric fuzzy connectivities from a kNN graph (vectorised bisection over all rows)."""
    n, k = indices.shape
    target = np.log2(k) if k > 1 else 1.0
    positive = np.where(distances > 0, distances, np.inf)
    rho = np.min(positive, axis=1)
    rho[~np.isfinite(rho)] = 0.0
    excess = np.maximum(distances - rho[:, None], 0.0)
    lo = np.zeros(n)
    hi = np.full(n, np.inf)
    sigma = np.ones(n)
    for _ in range(n_iter):
        total = np.exp(-excess / sigma[:, None]).sum(axis=1)
        too_big = total > target
        hi = np.where(too_big, sigma, hi)
        lo = np.where(too_big, lo, sigma)
        sigma = np.where(np.isfinite(hi), (lo + hi) / 2, sigma * 2)
    mean_d = distances.mean()
    sigma = np.maximum(sigma, 1e-3 * np.where(excess.mean(axis=1) > 0, excess.mean(axis=1), mean_d))
    W = np.exp(-excess / sigma[:, None])
    P = knn_distance_matrix(indices, W)
    PT = P.T.tocsr()
    C = (P + PT - P.multiply(PT)).tocsr()
    C.eliminate_zeros()
    C.sort_indices()
    return C


def scanpy_neighbors_uns(key: str, k: int, extra: dict | None = None) -> dict:
    """The ``uns[key]`` entry scanpy's tools look up with ``neighbors_key=key``."""
    params = {"n_neighbors": int(k) + 1, "method": "umap", "metric": "hdtwd", "random_state": 0}
    params.update(extra or {})
    return {"connectivities_key": f"{key}_connectivities", "distances_key": f"{key}_distances", "params": params}
