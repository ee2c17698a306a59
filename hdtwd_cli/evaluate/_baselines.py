r"""The baselines of ``classify``: distances between the samples' values as they are (docs/method.md section 5).

``cosine``, ``euclidean`` and ``l1`` compare the row-normalised histograms; ``tfidf-l1`` and
``tfidf-cosine`` the tf-idf rows (scikit-learn's ``TfidfTransformer(smooth_idf=True)`` fitted on the
training rows); ``pca`` the Euclidean distance in 50 principal components fitted on the training
rows, on the scale a scanpy user gives them (:func:`pca_representation`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hdtwd_cli.tree._denoise import is_count_data, log_cp10k, principal_axes
from hdtwd_cli.tree._features import idf_weights, weight_features
from hdtwd_cli.twd._distance import SPARSE_KERNEL_DENSITY
from hdtwd_cli.twd._histograms import normalize_rows
from hdtwd_cli.twd._kernels import l1_distances, l1_distances_sparse

__all__ = ["PCA_COMPONENTS", "SCALE_CLIP", "scaled_features", "pca_representation", "baseline_distances"]

#: Principal components of the ``pca`` baseline (scanpy's default ``n_comps``).
PCA_COMPONENTS = 50
#: ``sc.pp.scale(max_value=10)`` of scanpy's tutorial: scaled values are clipped to [-10, 10].
SCALE_CLIP = 10.0


def _dense(X: np.ndarray | sp.spmatrix) -> np.ndarray:
    return X.toarray() if sp.issparse(X) else np.asarray(X)  # type: ignore[union-attr]


def scaled_features(
    X_test: np.ndarray | sp.spmatrix, X_train: np.ndarray | sp.spmatrix, *, clip: float = SCALE_CLIP
) -> tuple[np.ndarray, np.ndarray]:
    r"""Scanpy's ``sc.pp.scale(max_value=clip)`` with its statistics from the TRAINING rows.

    Each feature :math:`j` becomes :math:`z_{ij} = \operatorname{clip}((x_{ij} - \mu_j) / s_j, -c, c)`
    with :math:`\mu_j` the mean and :math:`s_j` the standard deviation (``ddof=1``, scanpy's) of the
    training rows; both sets of rows use the training rows' :math:`\mu, s`, so the test rows never
    inform the scale. A feature constant on the training rows (:math:`s_j = 0`) carries no
    information the training rows could scale: it is 0 in both sets (scanpy's division by 1 would
    leave the test rows' :math:`x - \mu` unscaled). The variance is the centred sum of squares (not
    :math:`E[x^2] - \mu^2`, which leaves rounding residue on constant features). Returns
    ``(Z_test, Z_train)``, dense float64.
    """
    A = _dense(X_train).astype(np.float64)
    B = _dense(X_test).astype(np.float64)
    mu = A.mean(axis=0)
    A -= mu
    B -= mu
    n = A.shape[0]
    s = np.sqrt(np.einsum("ij,ij->j", A, A) / max(n - 1, 1))
    live = s > 0
    inv = np.where(live, 1.0 / np.where(live, s, 1.0), 0.0)
    A *= inv
    B *= inv
    np.clip(A, -clip, clip, out=A)
    np.clip(B, -clip, clip, out=B)
    return B, A


def pca_representation(
    X_test: np.ndarray | sp.spmatrix, X_train: np.ndarray | sp.spmatrix, n_components: int = PCA_COMPONENTS
) -> tuple[np.ndarray, np.ndarray]:
    r"""Scanpy's default representation: principal components fitted on the TRAINING rows.

    As a scanpy user gets it from what they hold:

    - counts (every value whole): :math:`\log(1 + 10^4 X_{ij} / \sum_j X_{ij})` (``normalize_total`` +
      ``log1p``), then the components;
    - any other values (scanpy's log-normalised ``X``, a subset of highly variable genes): the
      tutorial's ``sc.pp.scale(max_value=10)`` first (:func:`scaled_features`: unit variance on the
      training rows, clipped at 10), then the components. Unscaled, a few high-variance features
      decide the components alone.

    The training rows are centred by their mean and the leading ``n_components`` principal axes
    :math:`V` come from :func:`hdtwd_cli.tree._denoise.principal_axes`; both sets of rows are
    projected, :math:`Z = (X - \mu) V` (distances do not depend on the axes' signs).
    Returns ``(Z_test, Z_train)``.
    """
    if is_count_data(X_train) and is_count_data(X_test):
        A = _dense(log_cp10k(X_train)).astype(np.float64)
        B = _dense(log_cp10k(X_test)).astype(np.float64)
    else:
        B, A = scaled_features(X_test, X_train)
    mu = A.mean(axis=0)
    A -= mu
    B -= mu
    V, _ = principal_axes(A, int(min(n_components, min(A.shape) - 1)))
    return B @ V, A @ V


def _gram_and_norms(
    A: np.ndarray | sp.spmatrix, B: np.ndarray | sp.spmatrix
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A B^T`` (dense) and the rows' Euclidean norms, by sparse products when the rows are sparse."""

    def norms(M: np.ndarray | sp.spmatrix) -> np.ndarray:
        sq = M.multiply(M).sum(axis=1) if sp.issparse(M) else np.einsum("ij,ij->i", M, M)  # type: ignore[union-attr]
        return np.sqrt(np.asarray(sq).ravel())

    return _dense(A @ B.T), norms(A), norms(B)


def _euclidean_cross(A: np.ndarray | sp.spmatrix, B: np.ndarray | sp.spmatrix) -> np.ndarray:
    G, na, nb = _gram_and_norms(A, B)
    return np.sqrt(np.maximum(na[:, None] ** 2 + nb[None, :] ** 2 - 2 * G, 0))


def baseline_distances(name: str, X_test: np.ndarray | sp.spmatrix, X_train: np.ndarray | sp.spmatrix) -> np.ndarray:
    r"""Distances (test x train) of a baseline method, from the raw values of the two sets of rows.

    ``cosine``, ``euclidean``, ``l1``: on the row-normalised histograms. ``tfidf-l1``,
    ``tfidf-cosine``: on the rows of :math:`X \odot u` with the smoothed idf ``u`` of the TRAINING
    rows (:func:`hdtwd_cli.tree._features.idf_weights`, scikit-learn's ``TfidfTransformer(smooth_idf=True)``),
    L1-normalised. ``pca``: Euclidean distances in the principal components of
    :func:`pca_representation`.
    """
    if name == "pca":
        return _euclidean_cross(*pca_representation(X_test, X_train))
    if name.startswith("tfidf-"):
        u = idf_weights(X_train)
        X_test, X_train = weight_features(X_test, u), weight_features(X_train, u)
        name = name[len("tfidf-") :]
    A, B = normalize_rows(X_test), normalize_rows(X_train)
    sparse = sp.issparse(A) and sp.issparse(B) and B.nnz < SPARSE_KERNEL_DENSITY * B.shape[0] * B.shape[1]  # type: ignore[union-attr]
    if not sparse:
        A, B = _dense(A), _dense(B)
    if name == "l1":
        return l1_distances_sparse(A, B) if sparse else l1_distances(A, B)
    if name == "euclidean":
        return _euclidean_cross(A, B)
    if name == "cosine":
        G, na, nb = _gram_and_norms(A, B)
        return 1.0 - G / np.outer(na, nb)
    raise ValueError(f"unknown baseline {name!r}")
