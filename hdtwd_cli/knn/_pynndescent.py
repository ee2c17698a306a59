r"""pynndescent as the candidate search of the approximate kNN graph (``--knn-method pynndescent``).

The backend scanpy users have: ``pynndescent.NNDescent`` under ``metric="manhattan"`` on the
samples' tree vectors (the TWD is the L1 distance between them, Eq. 5) proposes each sample's
candidates; hdtwd's exact re-ranking (:func:`hdtwd_cli.knn._search.rerank`) then keeps the ``k``
nearest by the exact TWD, so every distance in the graph is exact and only the recall depends on
the backend. One job and a fixed ``random_state``: the same candidates for the same seed. The
whole float32 matrix of tree vectors is held in memory (``n x d x 4`` bytes), as pynndescent
needs it; hdtwd's own NN-descent (``--knn-method nndescent``, :mod:`._nndescent`) partitions
what does not fit and is the default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hdtwd_cli._runtime.memory import available_memory, human_bytes
from hdtwd_cli.errors import InputError, ResourceError

if TYPE_CHECKING:  # pragma: no cover
    from hdtwd_cli.twd._distance import TreeVectors

__all__ = ["pynndescent_candidates"]


def pynndescent_candidates(tv: TreeVectors, c: int, seed: int) -> np.ndarray:
    """Each sample's ``c`` nearest other samples by pynndescent (n x c indices; ``-1``: none found).

    Raises
    ------
    InputError
        pynndescent is not installed (``pip install pynndescent``).
    ResourceError
        The float32 tree vectors would take more than half the available memory.
    """
    try:
        from pynndescent import NNDescent
    except ImportError:  # an optional dependency, as for scanpy
        raise InputError("--knn-method pynndescent needs the 'pynndescent' package: pip install pynndescent") from None
    need = tv.n * tv.dim * 4
    have = available_memory()
    if need > have // 2:
        raise ResourceError(
            f"pynndescent needs the {tv.n} x {tv.dim} tree vectors in memory ({human_bytes(need)}; "
            f"{human_bytes(have)} available): use --knn-method nndescent, which partitions them"
        )
    Y = np.empty((tv.n, tv.dim), dtype=np.float32)
    step = max(1, (1 << 26) // max(tv.dim, 1))
    for i0 in range(0, tv.n, step):
        Y[i0 : i0 + step] = tv.rows(i0, min(i0 + step, tv.n))
    index = NNDescent(Y, metric="manhattan", n_neighbors=c + 1, random_state=seed, n_jobs=1, low_memory=True)
    idx, _ = index.neighbor_graph
    out = np.full((tv.n, c), -1, dtype=np.int64)
    for i in range(tv.n):  # drop the sample itself (and pynndescent's -1 for lists it could not fill)
        row = idx[i][(idx[i] != i) & (idx[i] >= 0)][:c]
        out[i, : row.size] = row
    return out
