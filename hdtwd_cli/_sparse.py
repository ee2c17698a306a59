"""``scipy.sparse`` on first use: its import is 0.17 s that a run on dense data never needs.

``from ._sparse import sp`` stands for ``import scipy.sparse as sp``. Any attribute imports SciPy's
sparse package on first access, except :func:`issparse`, which answers ``False`` without importing
it while it is not loaded: no sparse matrix can exist before its class does. A dense ``.npy`` run
of ``hdtwd distance --tree`` therefore never imports it (benchmarks/RESULTS.md, issue 14).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

__all__ = ["sp"]


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
