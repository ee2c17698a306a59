r"""Exact optimal transport between histograms with a Euclidean ground cost (WMD / GMD).

The reference every tree-Wasserstein distance approximates (paper Table 1, rows WMD and GMD):

.. math::

    W(a, b) = \min_{P \ge 0,\; P\mathbf 1 = a,\; P^\top \mathbf 1 = b} \sum_{u,v} P_{uv}\, \lVert f_u - f_v \rVert_2,

with :math:`f_u` the vector of feature :math:`u` in hdtwd's features' space, scaled to unit length
(:func:`_competitors.feature_vectors`, the vectors the competitors' trees are built on; a feature
without a vector sits at the origin, at distance 1 from every placed feature). In ``classify``
:math:`a, b` are the split's histograms, the ones every tree of the split compares
(:func:`histograms`: the training rows' denoiser where the rule denoises, the feature weights);
denoised rows are dense, so their programs cost about ``m^2`` variables each. With word2vec
vectors this is the Word Mover's Distance (Kusner et al. 2015), with gene vectors the Gene Mover's
Distance (Bellazzi et al. 2021). Each pair is one linear program over the two histograms' supports,
solved exactly by POT's network simplex (``ot.emd2``; an optional dependency, ``hdtwd[ot]``).

Cost and budget
    The program of a pair has :math:`s_a s_b` variables (the supports' sizes) and its time grows
    about linearly with that count (benchmarks/RESULTS.md, "Speed against peers"): two documents
    of 100 words give :math:`10^4` variables, two cells with 2,000 expressed genes :math:`4 \cdot 10^6`.
    ``hdtwd classify --methods ot`` therefore computes, per split, the distances of a seeded random
    subset of the test rows to ALL training rows (the kNN classifier is unchanged; its accuracy is
    measured on fewer rows), the largest prefix of a permutation whose variables
    :math:`\sum_i s_i \sum_j s_j` stay within the budget (:func:`budget_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._defaults import OT_BUDGET
from hdtwd_cli.tree._denoise import DenoisedRows
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._histograms import normalize_rows, tree_histograms

__all__ = [
    "OT_BUDGET",
    "OT_MIN_TEST_ROWS",
    "UNION_COSTS",
    "exact_ot",
    "exact_ot_pairs",
    "OverBudget",
    "ground_of",
    "histograms",
    "supports",
    "ot_histograms",
    "budget_rows",
    "scored_rows",
    "require_pot",
]

#: Fewest test rows per split (all of them when a split has fewer) for which ``ot`` is run at all.
OT_MIN_TEST_ROWS = 20
#: Network-simplex iteration cap: far above what the programs need; reaching it is an error.
_MAX_ITER = 10**9
#: Most entries of the matrix of ground costs among the union of the pairs' supports
#: (:func:`exact_ot_pairs`; 2^25 float64: 256 MB, 5,792 features).
UNION_COSTS = 1 << 25


def require_pot():
    """POT's ``ot`` module, or an ImportError that says how to install it."""
    try:
        import ot
    except ImportError:
        raise ImportError("exact optimal transport needs POT: pip install 'hdtwd[ot]' (or pip install pot)") from None
    return ot


class OverBudget(ValueError):
    """A method whose transport programs do not fit ``--ot-budget``: ``classify`` reports it in the
    method's own row (``status: skipped: ...``) and runs the others."""


def ground_of(placed: list[str], V: np.ndarray, leaf_names: list[str]) -> np.ndarray:
    """The ground space in the order of ``leaf_names``: the unit vector of each placed feature (``V``'s rows,
    in the order of ``placed``; :func:`._competitors.feature_vectors`), zero (the origin, at distance 1 from
    every placed feature) for a feature without one."""
    index = {n: i for i, n in enumerate(placed)}
    full = np.zeros((len(leaf_names), V.shape[1]))
    at = np.array([index.get(n, -1) for n in leaf_names], dtype=np.int64)
    full[at >= 0] = V[at[at >= 0]]
    return full


def histograms(X: np.ndarray | sp.spmatrix, names: list[str], tree: Tree) -> sp.csr_matrix:
    r"""The rows of ``X`` (columns ``names``) as the histograms the TWD on ``tree`` compares, sparse.

    :func:`~hdtwd_cli.twd._histograms.tree_histograms` (the tree's map: denoiser, feature weights,
    :meth:`~hdtwd_cli.tree._learn.Prepared.finish`; every row normalised to mass 1), stored sparse;
    columns in the order of ``tree.leaf_names``, zeros not stored. Every row is computed alone: the
    same bits for any subset of rows.
    """
    H = sp.csr_matrix(tree_histograms(X, names, tree), dtype=np.float64)
    H.eliminate_zeros()
    return H


def supports(X: np.ndarray | sp.spmatrix, names: list[str], tree: Tree) -> np.ndarray:
    """The support size of each row's histogram (:func:`histograms`), by row block: never all the rows at once."""
    A = tree_histograms(X, names, tree, normalised=False)
    if isinstance(A, DenoisedRows):
        out = np.zeros(A.shape[0], dtype=np.int64)
        for i0, R in A.blocks():
            out[i0 : i0 + R.shape[0]] = np.count_nonzero(R, axis=1)
        return out
    if sp.issparse(A):
        C = sp.csr_matrix(A)
        rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
        return np.bincount(rows[C.data != 0], minlength=C.shape[0]).astype(np.int64)
    return np.count_nonzero(A, axis=1).astype(np.int64)


def ot_histograms(X: np.ndarray | sp.spmatrix, weights: np.ndarray | None = None) -> sp.csr_matrix:
    r"""Rows of ``X`` (times the feature ``weights``) as sparse histograms, :math:`x_i / \lVert x_i \rVert_1`."""
    A = sp.csr_matrix(X, dtype=np.float64, copy=True)
    if weights is not None:
        A = sp.csr_matrix(A.multiply(weights[None, :]))
    A.eliminate_zeros()
    return sp.csr_matrix(normalize_rows(A))


def exact_ot(A: sp.csr_matrix, B: sp.csr_matrix, V: np.ndarray, threads: int | None = None) -> np.ndarray:
    r"""Exact transport cost :math:`W(a_i, b_j)` between every row of ``A`` and every row of ``B``.

    Parameters
    ----------
    A, B : sparse matrix, shape (p, m) and (q, m)
        Histograms (non-negative rows summing to 1) over the ``m`` features.
    V : ndarray, shape (m, d)
        Feature vectors; the ground cost is :math:`C_{uv} = \lVert V_u - V_v \rVert_2` (SciPy's
        ``cdist``, computed per row of ``A`` over its support).
    threads : int, optional
        Rows of ``A`` solved at once (POT releases the GIL); default: numba's thread count (the
        usable CPUs, ``--threads``, ``NUMBA_NUM_THREADS``). Every pair is solved alone, so the result
        does not depend on it.

    Returns
    -------
    ndarray, shape (p, q)

    Raises
    ------
    RuntimeError
        If a program is not solved to optimality (POT's result code), instead of a wrong value.
    """
    from scipy.spatial.distance import cdist

    A, B = sp.csr_matrix(A), sp.csr_matrix(B)
    V = np.asarray(V, dtype=np.float64)
    out = np.empty((A.shape[0], B.shape[0]))

    def row(i: int) -> None:
        sa, a = _support(A, i)
        Ci = cdist(V[sa], V)
        for j in range(B.shape[0]):
            sb, b = _support(B, j)
            out[i, j] = _emd(a, b, Ci[:, sb], f"rows {i} and {j}")

    _on_threads(row, A.shape[0], threads)
    return out


def exact_ot_pairs(A: sp.csr_matrix, B: sp.csr_matrix, V: np.ndarray, threads: int | None = None) -> np.ndarray:
    r""":math:`W(a_p, b_p)` for each row ``p`` of ``A`` and the same row of ``B`` (:func:`exact_ot` pair by pair).

    The ground costs :math:`\lVert V_u - V_v \rVert_2` are SciPy's ``cdist`` of the pair's supports,
    or, where the pairs' supports overlap so much that computing each pair's block costs more than
    all distances among the union of the supports once (Zeisel's cells: about 2,600 of 4,000 genes
    per row, 138 pairs' blocks 60 times the union's entries), blocks of that one matrix (at most
    :data:`UNION_COSTS` entries). ``cdist`` computes every entry alone, so both give the same bits
    (tested).

    Returns
    -------
    ndarray, shape (P,)
    """
    from scipy.spatial.distance import cdist

    A, B = sp.csr_matrix(A), sp.csr_matrix(B)
    if A.shape != B.shape:
        raise ValueError("exact_ot_pairs needs as many rows in A as in B")
    V = np.asarray(V, dtype=np.float64)
    out = np.empty(A.shape[0])
    union = np.union1d(A.indices, B.indices)
    blocks = int(np.sum(np.diff(A.indptr).astype(np.int64) * np.diff(B.indptr)))
    if union.size**2 <= min(UNION_COSTS, blocks):
        at = np.full(A.shape[1], -1, dtype=np.int64)
        at[union] = np.arange(union.size)
        Cu = cdist(V[union], V[union])

        def cost(sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
            return Cu[np.ix_(at[sa], at[sb])]
    else:

        def cost(sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
            return cdist(V[sa], V[sb])

    def pair(p: int) -> None:
        (sa, a), (sb, b) = _support(A, p), _support(B, p)
        out[p] = _emd(a, b, cost(sa, sb), f"pair {p}")

    _on_threads(pair, A.shape[0], threads)
    return out


def _support(H: sp.csr_matrix, i: int) -> tuple[np.ndarray, np.ndarray]:
    """The feature indices and masses of row ``i``."""
    return H.indices[H.indptr[i] : H.indptr[i + 1]], H.data[H.indptr[i] : H.indptr[i + 1]]


def _emd(a: np.ndarray, b: np.ndarray, C: np.ndarray, what: str) -> float:
    """POT's exact cost of moving ``a`` to ``b`` at cost ``C``; RuntimeError unless optimal."""
    ot = require_pot()
    cost, log = ot.emd2(a, b, np.ascontiguousarray(C), numItermax=_MAX_ITER, log=True, check_marginals=False)
    if log["result_code"] != 1:
        raise RuntimeError(
            f"exact OT between {what}: POT's network simplex did not reach the optimum ({log['warning']})"
        )
    return float(cost)


def _on_threads(work: Callable[[int], None], count: int, threads: int | None) -> None:
    """``work(i)`` for ``i < count`` on ``threads`` threads (default: numba's thread count); POT
    releases the GIL, and every call writes its own entries, so the result does not depend on it."""
    if threads is None:
        import numba

        threads = numba.get_num_threads()
    n_threads = max(1, min(threads, count))
    if n_threads == 1:
        for i in range(count):
            work(i)
    else:
        with ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(work, range(count)))


def budget_rows(
    test_support: Sequence[int] | np.ndarray,
    train_support: Sequence[int] | np.ndarray,
    budget: int = OT_BUDGET,
    seed: Sequence[int] | int = 0,
) -> np.ndarray:
    r"""Positions of the test rows whose transport to every training row fits ``budget``.

    A permutation of the test rows drawn from ``numpy.random.default_rng(seed)``; its longest prefix
    with :math:`\sum_i s_i \cdot \sum_j s_j \le` ``budget`` (:math:`s` the number of non-zero values of
    a row: the size of its support), returned sorted.
    """
    s_test = np.asarray(test_support, dtype=np.int64)
    total_train = int(np.sum(np.asarray(train_support, dtype=np.int64)))
    order = np.random.default_rng(seed).permutation(s_test.size)
    cost = np.cumsum(s_test[order] * total_train)
    return np.sort(order[: int(np.searchsorted(cost, budget, side="right"))])


def scored_rows(
    test_support: np.ndarray,
    train_support: np.ndarray,
    *,
    budget: int = OT_BUDGET,
    seed: Sequence[int] | int = 0,
    method: str = "ot",
) -> np.ndarray:
    """:func:`budget_rows`, refused when fewer than :data:`OT_MIN_TEST_ROWS` rows fit (all of them when
    there are fewer): :class:`OverBudget`, before any program is solved, naming the budget that fits them.

    ``method`` names who is refused in the message (``flowtree`` is scored on the rows of ``ot``).
    """
    rows = budget_rows(test_support, train_support, budget, seed)
    need = min(OT_MIN_TEST_ROWS, int(np.asarray(test_support).size))
    if rows.size >= need:
        return rows
    worst = int(np.sort(np.asarray(test_support, dtype=np.int64))[::-1][:need].sum()) * int(np.sum(train_support))
    secs = worst * 1e-7
    when = f"{secs:.0f} CPU-seconds" if secs < 120 else f"{secs / 60:.0f} CPU-minutes"
    whose = "exact OT ('ot')" if method == "ot" else f"{method} (scored on exact OT's test rows)"
    raise OverBudget(
        f"{whose}: a budget of {budget:,} transport variables per split fits only {rows.size} test rows "
        f"({need} needed); --ot-budget {worst} fits them (about {when} per split)"
    )
