"""Sparse matrices in one canonical form, without writing into the caller's matrix."""

from __future__ import annotations

from typing import Any

import scipy.sparse as sp

__all__ = ["canonical_csr"]


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
    import numpy as np

    Y = sp.csr_matrix(X, dtype=np.float64)
    if not Y.has_canonical_format:
        Y = sp.csr_matrix((Y.data.copy(), Y.indices.copy(), Y.indptr.copy()), shape=Y.shape)
        Y.sum_duplicates()  # sorts the indices too
    return Y
