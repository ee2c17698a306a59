"""Sparse matrices in one canonical form: made once at the door, required (never re-made) by the stages.

The samples' matrix is converted once, where it enters (:func:`hdtwd_cli.io._matrix.check_values`, which
every reader and the API's door call): float64 CSR with sorted, duplicate-free indices. Every sparse matrix
derived from it row for row (row blocks, the tree's leaf order, weights, ``log1p``) keeps that form, so the
stages take it as it is: :func:`require_canonical` reads SciPy's ``has_canonical_format`` flag and refuses
anything else as an internal error. It never converts: a stage that re-canonicalised would hide a caller
that broke the contract, and would copy the matrix each time it did.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["canonical_csr", "require_canonical"]


def canonical_csr(X: Any) -> Any:
    """``X`` as a float64 CSR matrix with sorted, duplicate-free indices, ``X`` itself left untouched.

    ``scipy.sparse.csr_matrix(X, dtype=np.float64)`` shares ``X``'s index arrays whenever the
    format is already CSR (and its values too when the dtype is already float64); sorting or
    summing duplicates in place then rewrites the CALLER's matrix. For a float32 CSR matrix with
    unsorted indices (scanpy's ``pbmc68k_reduced().raw.X``) that sorted the caller's indices but
    not its values (the float32 values had been copied): the caller's matrix was silently
    corrupted, and every later call on it gave wrong distances. Here a matrix that is
    not canonical is copied before it is canonicalised; a canonical one is returned as it is
    (sharing memory with ``X``: callers never write into it).
    """
    Y = sp.csr_matrix(X, dtype=np.float64)
    if not Y.has_canonical_format:
        Y = sp.csr_matrix((Y.data.copy(), Y.indices.copy(), Y.indptr.copy()), shape=Y.shape)
        Y.sum_duplicates()  # sorts the indices too
    return Y


def require_canonical(X: Any) -> Any:
    """``X`` itself, after checking that it is what :func:`canonical_csr` makes (float64 CSR, sorted indices,
    no duplicates); anything else raises :class:`TypeError`, an internal error (exit 1), never a conversion.

    The stages' kernels sum each row's or column's stored values in index order and count stored entries:
    on another form their answers would differ from the dense storage's (duplicates counted twice, sums in
    another order), silently. The check reads SciPy's cached flag (one pass over the indices the first time
    it is asked of a new matrix object), never copies.
    """
    if not (sp.issparse(X) and X.format == "csr" and X.dtype == np.float64 and X.has_canonical_format):
        kind = f"{X.format} {X.dtype}" if sp.issparse(X) else type(X).__name__
        raise TypeError(f"internal: a stage was given a {kind} matrix, not the door's canonical float64 CSR")
    return X
