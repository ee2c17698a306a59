r"""Nearest-neighbour graphs of the TWD exactly as ``sc.pp.neighbors`` stores them.

scanpy's ``n_neighbors`` counts the sample itself: with ``n_neighbors = k`` each sample's
neighbour list is itself (distance 0) followed by its ``k - 1`` nearest other samples, and

- ``obsp["distances"]`` (or ``obsp[key + "_distances"]``): CSR, the ``k - 1`` distances of each
  row (the self column removed);
- ``obsp["connectivities"]`` (or ``obsp[key + "_connectivities"]``): CSR float32, UMAP's fuzzy
  simplicial set of the ``k``-lists (McInnes et al. 2018), as ``umap.fuzzy_simplicial_set``
  computes it;
- ``uns["neighbors"]`` (or ``uns[key]``): ``{"connectivities_key", "distances_key", "params":
  {"n_neighbors", "method": "umap", "random_state", "metric", "use_rep"}}``.

UMAP's memberships: with :math:`\rho_i` the smallest non-zero distance of row ``i`` and
:math:`\sigma_i` found by bisection (64 steps, tolerance 1e-5; float32 bounds, float64 sums) so that
:math:`\sum_{j \ge 1} \exp(-\max(d_{ij} - \rho_i, 0)/\sigma_i) = \log_2 k` (the sum skips the
self column), floored at :math:`10^{-3}` times the row's (or, when :math:`\rho_i = 0`, all rows')
mean distance, :math:`p_{ij} = \exp(-(d_{ij} - \rho_i)/\sigma_i)` (1 when
:math:`d_{ij} \le \rho_i`, 0 for the sample itself), symmetrised by the fuzzy union
:math:`P + P^\top - P \circ P^\top`. The bisection is vectorised over rows here; it takes the
same steps as UMAP's per-row loop (tests/test_api.py compares the two to 1e-6).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["with_self", "knn_distance_matrix", "umap_connectivities", "scanpy_keys", "scanpy_neighbors_uns"]

_TOLERANCE = 1e-5  # UMAP's SMOOTH_K_TOLERANCE
_MIN_SCALE = 1e-3  # UMAP's MIN_K_DIST_SCALE
_FLOAT_MAX = np.float32(np.finfo(np.float32).max)


def with_self(indices: np.ndarray, distances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prepend each row's own index (distance 0) to its list of nearest OTHER samples.

    The result is the ``n x k`` neighbour list that scanpy's ``n_neighbors = k`` means.
    """
    n = indices.shape[0]
    idx = np.concatenate([np.arange(n, dtype=np.int64)[:, None], np.asarray(indices, dtype=np.int64)], axis=1)
    dist = np.concatenate([np.zeros((n, 1)), np.asarray(distances, dtype=np.float64)], axis=1)
    return idx, dist


def knn_distance_matrix(indices: np.ndarray, distances: np.ndarray, keep_self: bool = False) -> sp.csr_matrix:
    """The n x n CSR matrix with row ``i`` holding ``distances[i]`` at columns ``indices[i]``.

    Without ``keep_self`` the first column (the sample itself, :func:`with_self`) is left out,
    as scanpy stores ``obsp["distances"]``. Columns stay in neighbour order, as in scanpy. The
    arrays are copied: the CSR constructor may share them.
    """
    if not keep_self:
        indices, distances = indices[:, 1:], distances[:, 1:]
    n, k = indices.shape
    indptr = np.arange(0, n * k + 1, k, dtype=np.int64)
    cols = np.array(indices, dtype=np.int64, copy=True).ravel()
    vals = np.array(distances, dtype=np.float64, copy=True).ravel()
    return sp.csr_matrix((vals, cols, indptr), shape=(n, n))


def _smooth_knn(d: np.ndarray, n_iter: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """UMAP's ``sigma`` and ``rho`` of each row of the float32 ``n x k`` distances (self column first).

    The arithmetic is that of UMAP's compiled loop: float32 distances and ``rho``, the bisection
    and the sums in float64 (its parallel loop widens them), ``sigma`` stored as float32.
    """
    n, k = d.shape
    target = float(np.log2(k))
    masked = np.where(d > 0, d, np.inf)
    rho = masked.min(axis=1).astype(np.float32)
    rho[~np.isfinite(rho)] = 0
    excess = (d[:, 1:] - rho[:, None]).astype(np.float64)  # float32 difference, as UMAP's d
    lo = np.zeros(n)
    hi = np.full(n, float(_FLOAT_MAX))
    mid = np.ones(n)
    active = np.ones(n, dtype=bool)
    for _ in range(n_iter):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        e, m = excess[rows], mid[rows]
        with np.errstate(over="ignore"):
            terms = np.where(e > 0, np.exp(-(e / m[:, None])), 1.0)
        psum = np.zeros(rows.size)
        for j in range(terms.shape[1]):  # sequential sum, UMAP's order
            psum += terms[:, j]
        done = np.abs(psum - target) < _TOLERANCE
        big = psum > target
        h = hi[rows]
        new_hi = np.where(big, m, h)
        new_lo = np.where(big, lo[rows], m)
        new_mid = np.where((~big) & (h >= _FLOAT_MAX), m * 2, (new_lo + new_hi) / 2.0)
        upd = rows[~done]
        lo[upd], hi[upd], mid[upd] = new_lo[~done], new_hi[~done], new_mid[~done]
        active[rows[done]] = False
    sigma = mid.astype(np.float32)
    row_mean = d.mean(axis=1, dtype=np.float64)
    floor = np.where(rho > 0, float(_MIN_SCALE) * row_mean, float(_MIN_SCALE) * d.mean(dtype=np.float64))
    low = sigma < floor
    sigma[low] = floor[low]
    return sigma, rho


def umap_connectivities(indices: np.ndarray, distances: np.ndarray) -> sp.csr_matrix:
    """UMAP's symmetric fuzzy connectivities (float32 CSR) of an ``n x k`` neighbour list with self first.

    ``indices[:, 0]`` must be the row itself (:func:`with_self`); ``k`` is scanpy's ``n_neighbors``.
    """
    n, k = indices.shape
    d = np.asarray(distances, dtype=np.float32)
    sigma, rho = _smooth_knn(d)
    excess = d - rho[:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        w = np.exp(-(excess / sigma[:, None])).astype(np.float32)
    w = np.where((excess <= 0) | (sigma[:, None] == 0), np.float32(1.0), w)
    w[indices == np.arange(n)[:, None]] = 0.0
    P = sp.coo_matrix(
        (w.ravel(), (np.repeat(np.arange(n, dtype=np.int32), k), indices.ravel().astype(np.int32))), shape=(n, n)
    )
    P.eliminate_zeros()
    PT = P.transpose()
    C = P + PT - P.multiply(PT)
    C.eliminate_zeros()
    return sp.csr_matrix(C)


def scanpy_keys(key_added: str | None) -> tuple[str, str, str]:
    """``(uns key, distances key, connectivities key)`` where scanpy's tools look for them.

    ``None`` and ``"neighbors"`` are scanpy's default graph: its tools read ``obsp["distances"]``
    and ``obsp["connectivities"]`` for the key ``"neighbors"`` whatever ``uns`` says; any other
    key ``K`` is ``sc.pp.neighbors(key_added=K)``'s ``obsp[K + "_distances"]``, ``obsp[K + "_connectivities"]``.
    """
    if key_added is None or key_added == "neighbors":
        return "neighbors", "distances", "connectivities"
    return key_added, f"{key_added}_distances", f"{key_added}_connectivities"


def scanpy_neighbors_uns(
    key_added: str | None,
    n_neighbors: int,
    random_state: int = 0,
    use_rep: str | None = "X_hdtwd",
    extra: dict | None = None,
) -> dict:
    """The ``uns`` entry scanpy's tools read: keys of the two graphs and the parameters.

    ``metric`` is ``manhattan`` with ``use_rep`` naming the TWD vectors (``obsm["X_hdtwd"]``):
    the TWD is the L1 distance between them, so scanpy's own tools that recompute distances
    (UMAP's initialisation of a graph with many components) get the TWD.
    """
    _, dkey, ckey = scanpy_keys(key_added)
    params: dict = {
        "n_neighbors": int(n_neighbors),
        "method": "umap",
        "random_state": int(random_state),
        "metric": "manhattan",
    }
    if use_rep is not None:
        params["use_rep"] = use_rep
    params.update(extra or {})
    return {"connectivities_key": ckey, "distances_key": dkey, "params": params}
