r"""The form of the samples' values: raw counts, their ``log1p``, scanpy's log-normalised values, or other.

Single-cell users pass one of three forms of the same count matrix, and denoising treats them
differently (docs/method.md section 11): raw counts ``k`` (whole numbers, stored as integers,
float32 or float64); their ``log1p``, :math:`\log(1 + k)` (Zeisel's published matrix); and
scanpy's log-normalised values, ``sc.pp.normalize_total`` then ``sc.pp.log1p``,

.. math:: v_{ij} = \log(1 + c_i k_{ij}),\qquad c_i = \text{target} / \textstyle\sum_j k_{ij},

with or without a subset of highly variable genes taken afterwards (the factor :math:`c_i` was
fixed on all genes). :func:`value_form` tells them apart from the stored values alone: a row of
log-normalised values has :math:`e^{v} - 1` at whole multiples of one per-row factor, the
smallest non-zero value usually being count 1; on all the genes the rows' :math:`\sum_j (e^{v_j} - 1)`
are one common total (``target_sum``), on a gene subset they differ.

Every test allows for values computed and stored in float32 (AnnData's usual type), so a
matrix and its float32 copy are recognised alike.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp

__all__ = ["FORMS", "ValueForm", "is_count_data", "is_log1p_counts", "decimal_grid", "is_log_normalised", "value_form"]

ValueForm = Literal["counts", "log1p_counts", "lognorm", "lognorm_subset", "other"]
#: The forms :func:`value_form` recognises, in the order it tests them.
FORMS: tuple[ValueForm, ...] = ("counts", "log1p_counts", "lognorm", "lognorm_subset", "other")

#: Relative error allowed on a stored :math:`v`, per unit of :math:`1 + v`: four float32 half-ulps, the
#: rounding of the product :math:`c_i k`, of ``log1p`` in float32 and of the storage, with room to spare.
FLOAT32_ROUNDING = 2.0**-22
#: Divisors of a row's smallest value tried as its factor :math:`c_i` (a row of a gene subset whose
#: smallest count is 2, 3 or 4 rather than 1).
FACTOR_DIVISORS = (1, 2, 3, 4)
#: Decimal places :func:`decimal_grid` tries (coarser roundings than float32's own).
DECIMALS = 4
#: A ratio checked to within this of a whole number counts as evidence (:func:`is_log_normalised`).
INFORMATIVE = 0.25
#: Rows per chunk of :func:`is_log_normalised` (bounded temporaries).
_CHUNK_ROWS = 4096


def _stored(X: np.ndarray | sp.spmatrix) -> np.ndarray:
    return np.asarray(X.data if sp.issparse(X) else X).ravel()


def is_count_data(X: np.ndarray | sp.spmatrix) -> bool:
    """True when every stored value is a whole number (raw counts rather than a log scale)."""
    v = _stored(X)
    return bool(np.all(v == np.rint(v)))


def is_log1p_counts(X: np.ndarray | sp.spmatrix) -> bool:
    r"""True when every stored value is :math:`v = \log(1 + k)` of a whole number ``k``: counts on
    scanpy's ``log1p`` scale without the per-cell normalisation (Zeisel's published matrix).

    The values may have been stored as float32 (AnnData's usual type), which rounds :math:`v` by up
    to :math:`2^{-24} v` and so moves :math:`k = e^v - 1` by up to :math:`(1 + k)\,v\,2^{-24}`: ``k``
    must be a whole number to twice that (or to 1e-9 of ``k``), so the rule decides alike for the
    float32 and float64 copies of a matrix. Log-normalised values (a per-cell factor before the
    ``log1p``) are not whole numbers on that scale.
    """
    v = np.asarray(_stored(X), dtype=np.float64)
    if v.size == 0 or np.any(v < 0) or np.all(v == np.rint(v)):
        return False
    k = np.expm1(v)
    tolerance = np.maximum(1e-9 * np.maximum(1.0, k), (1.0 + k) * v * 2.0**-23)
    return bool(np.all(np.abs(k - np.rint(k)) <= tolerance))


def _row_blocks(X: np.ndarray | sp.spmatrix) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(values, row of each value)`` of the non-zero entries, in chunks of rows (CSR order)."""
    out = []
    C = sp.csr_matrix(X) if sp.issparse(X) else None
    n = X.shape[0]
    for i0 in range(0, n, _CHUNK_ROWS):
        if C is not None:
            B = C[i0 : i0 + _CHUNK_ROWS]
            keep = B.data != 0
            rows = np.repeat(np.arange(B.shape[0]), np.diff(B.indptr))[keep]
            out.append((np.asarray(B.data[keep], dtype=np.float64), rows))
        else:
            A = np.asarray(X[i0 : i0 + _CHUNK_ROWS])
            rows, cols = np.nonzero(A)
            out.append((np.asarray(A[rows, cols], dtype=np.float64), rows))
    return out


def decimal_grid(X: np.ndarray | sp.spmatrix) -> float:
    r"""Half the step of the coarsest decimal grid :math:`10^{-p}` (``p`` = 1 .. :data:`DECIMALS`) that every
    stored value lies on to float32 rounding, else 0: values written rounded to ``p`` decimals
    (scanpy's ``pbmc68k_reduced`` keeps its log-normalised ``.raw`` to 3 decimals) are off by up to that
    much."""
    found = 0
    for v, _ in _row_blocks(X):
        if v.size == 0:
            continue
        for p in range(max(found, 1), DECIMALS + 2):
            if p > DECIMALS:
                return 0.0
            s = v * 10.0**p
            if np.all(np.abs(s - np.rint(s)) <= 10.0**p * np.abs(v) * 2.0**-22):
                found = p
                break
    return 0.5 * 10.0**-found if found else 0.0


def _smallest_gaps(y: np.ndarray, err: np.ndarray, at: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the smallest gap between two of its distinct values ``y`` (each known to ``err``; a gap counts
    when it exceeds four times the two errors) and that gap's relative error; ``inf`` where none."""
    order = np.lexsort((y, at))
    ys, es, rs = y[order], err[order], at[order]
    gap, gerr = np.diff(ys), es[1:] + es[:-1]
    ok = np.flatnonzero((rs[1:] == rs[:-1]) & (gap > 4.0 * gerr))
    g, eg = np.full(rows, np.inf), np.full(rows, np.inf)
    if ok.size:
        r = rs[1:][ok]
        o = np.lexsort((gap[ok], r))
        first = np.r_[True, r[o][1:] != r[o][:-1]]
        g[r[o][first]] = gap[ok][o][first]
        eg[r[o][first]] = gerr[ok][o][first] / gap[ok][o][first]
    return g, eg


def is_log_normalised(X: np.ndarray | sp.spmatrix) -> bool:
    r"""True when every row is :math:`v = \log(1 + c\,k)` of whole numbers ``k`` for one factor :math:`c > 0`
    per row: scanpy's ``normalize_total`` + ``log1p``, on all genes or a subset chosen afterwards.

    With :math:`y = e^{v} - 1` and :math:`y_0` the row's smallest non-zero :math:`y`, the row passes when,
    for some ``d`` in :data:`FACTOR_DIVISORS` (the row's smallest count: 1 on all genes, possibly more
    on a gene subset), or for :math:`y_0` the smallest gap between two of the row's distinct values
    (counts ``k`` and ``k + 1`` both present; then every tolerance below must be under
    :data:`INFORMATIVE`), every :math:`q = d\,y / y_0` is a whole number to within what the storage
    moves it. A stored :math:`v` is off by at most :math:`\Delta(v) = \delta (1 + v) + g` (:math:`\delta =
    2^{-22}`, :data:`FLOAT32_ROUNDING`: values computed and stored in float32; :math:`g`: half the
    decimal grid the values were rounded to, :func:`decimal_grid`), so :math:`y` by
    :math:`(1 + y)\,\Delta(v)` and ``q`` by :math:`q\,(\epsilon(y) + \epsilon(y_0))` with
    :math:`\epsilon(y) = (1 + y)\,\Delta(v) / y`. The matrix passes when every row does and the test
    says something: at least one stored value in a hundred is a multiple :math:`q \ge 1.5` (at
    ``d = 1``) checked to better than :data:`INFORMATIVE` (rows whose values are all equal fit any
    factor; values so small or so coarsely rounded that every ratio is within rounding of a whole
    number prove nothing). Negative values, whole numbers (counts) and an all-zero matrix do not pass.
    """
    return _log_normalised(X)[0]


def _log_normalised(X: np.ndarray | sp.spmatrix) -> tuple[bool, bool]:
    r""":func:`is_log_normalised`, and whether every row's :math:`\sum_j y_j` is one common total
    (:func:`value_form`'s ``lognorm`` against ``lognorm_subset``)."""
    if X.shape[0] == 0 or is_count_data(X):
        return False, False
    grid = decimal_grid(X)
    informative = total = 0
    totals, errors = [], []
    for v, rows in _row_blocks(X):
        if v.size == 0:
            continue
        if np.any(v < 0):
            return False, False
        y = np.expm1(v)
        eps = (1.0 + y) * (FLOAT32_ROUNDING * (1.0 + v) + grid) / y
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        at = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, y.size]))
        y0 = np.minimum.reduceat(y, starts)[at]
        eps0 = np.minimum.reduceat(np.where(y == y0, eps, np.inf), starts)[at]
        ok_row = np.zeros(starts.size, dtype=bool)
        for d in FACTOR_DIVISORS:
            q = d * y / y0
            tol = q * (eps + eps0)
            ok_row |= np.logical_and.reduceat(np.abs(q - np.rint(q)) <= tol, starts)
            if d == 1:
                informative += int(np.count_nonzero((q >= 1.5) & (tol < INFORMATIVE)))
            if ok_row.all():
                break
        if not ok_row.all():  # the factor from the smallest gap between the row's distinct values
            g, eg = _smallest_gaps(y, eps * y, at, starts.size)
            has = np.isfinite(g)
            q = y / np.where(has, g, 1.0)[at]  # rows without a gap: not tested (has)
            tol = q * (eps + np.where(has, eg, 0.0)[at])
            whole = (np.abs(q - np.rint(q)) <= tol) & (tol < INFORMATIVE)  # each value checked, none waved through
            ok_row |= has & np.logical_and.reduceat(np.where(has[at], whole, False), starts)
        if not ok_row.all():
            return False, False
        total += y.size
        totals.append(np.add.reduceat(y, starts))
        errors.append(np.add.reduceat(eps * y, starts))
    if not (total > 0 and informative >= 0.01 * total):
        return False, False
    T, E = np.concatenate(totals), np.concatenate(errors)
    mid = float(np.median(T))
    return True, bool(np.all(np.abs(T - mid) <= 2.0 * (E + float(np.median(E))) + 1e-9 * mid))


def value_form(X: np.ndarray | sp.spmatrix) -> ValueForm:
    r"""The form of ``X``'s values, tested in this order (:data:`FORMS`):

    - ``"counts"``: every value a whole number (:func:`is_count_data`), whatever its storage type;
    - ``"log1p_counts"``: :math:`\log(1 + k)` of counts (:func:`is_log1p_counts`);
    - ``"lognorm"``: scanpy's ``normalize_total`` + ``log1p`` on all the genes the totals were taken
      over (:func:`is_log_normalised`, and every row's :math:`\sum_j (e^{v_j} - 1)` is one common
      total, the ``target_sum``, to within the storage's rounding);
    - ``"lognorm_subset"``: the same values on a subset of those genes, chosen afterwards (the 2,000
      highly variable genes): the rows' totals differ;
    - ``"other"``: negative values (scaled or centred data), tf-idf, proportions, any other transform.
    """
    if is_count_data(X):
        return "counts"
    if is_log1p_counts(X):
        return "log1p_counts"
    lognorm, whole = _log_normalised(X)
    if lognorm:
        return "lognorm" if whole else "lognorm_subset"
    return "other"
