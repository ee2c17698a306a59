"""``scipy.sparse`` on first use: its import is start-up time that a run on dense data never needs.

``from hdtwd_cli._runtime.sparse import sp`` stands for ``import scipy.sparse as sp``. Any attribute imports SciPy's
sparse package on first access, except :func:`issparse`, which answers ``False`` without importing
it while it is not loaded: no sparse matrix can exist before its class does. A dense ``.npy`` run
of ``hdtwd distance --tree`` therefore never imports it (tested; benchmarks/RESULTS.md, "Start-up").
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

__all__ = ["sp", "canonical_csr"]


class _LazySparse:
    """``scipy.sparse``, imported on the first attribute access other than :meth:`issparse`."""

    @staticmethod
    def issparse(x: Any) -> bool:
        """``scipy.sparse.issparse(x)``; ``False`` while scipy.sparse is not imported."""
        module = sys.modules.get("scipy.sparse")
        return module is not None and bool(module.issparse(x))

    def __getattr__(self, name: str) -> Any:
        import scipy.sparse

        return getattr(scipy.sparse, name)


if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = _LazySparse()


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
