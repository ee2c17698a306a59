"""Argument checks shared by the public functions: the input matrix, names, progress, data errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli.errors import (
    HdtwdError,
    InputError,
    ParameterError,
)
from hdtwd_cli.tree._params import apply_transform
from hdtwd_cli.twd._histograms import check_histograms

if TYPE_CHECKING:  # pragma: no cover
    pass


DType = Literal["float64", "float32"]
Unseen = Literal["error", "root"]
Matrix = Any  # ndarray, scipy sparse matrix or anything np.asarray accepts


def as_reporter(progress: Reporter | bool | None) -> Reporter:
    if isinstance(progress, Reporter):
        return progress
    return Reporter(quiet=not progress)


def checked_matrix(X: Matrix, argument: str = "X") -> np.ndarray | sp.csr_matrix:
    """``X`` as float64 (CSR when sparse), checked: 2-D, non-empty, finite, non-negative.

    A NumPy array, a SciPy sparse matrix or array, or what ``np.asarray`` makes a numeric array of (nested
    lists, a pandas DataFrame); anything else is a :class:`ParameterError` naming ``argument``."""
    from hdtwd_cli.io._matrix import check_values

    if not (isinstance(X, np.ndarray) or sp.issparse(X)):
        given = type(X).__name__
        try:
            X = np.asarray(X)
        except (TypeError, ValueError):  # ragged nesting
            X = None
        if X is None or X.dtype.kind not in "biuf":
            read = "no array" if X is None else f"{X.dtype} values"
            raise ParameterError(
                "must be a numeric samples x features matrix (NumPy array, SciPy sparse matrix or array-like), "
                f"not a {given} that NumPy reads as {read}",
                argument,
            )
    return check_values(X, argument)


def checked_names(names: Sequence[str] | None, m: int, argument: str = "feature_names") -> list[str]:
    if names is None:
        return [f"f{j}" for j in range(m)]
    out = [str(s) for s in names]
    if len(out) != m:
        raise ParameterError(f"has {len(out)} names for {m} columns", argument)
    if len(set(out)) != m:
        raise ParameterError("holds duplicate names", argument)
    return out


def checked_histograms(
    X: Matrix, feature_names: Sequence[str] | None, transform: str
) -> tuple[np.ndarray | sp.csr_matrix, list[str]]:
    """The door of a function that learns from ``X``'s histograms: the matrix checked and transformed
    (``transform``, the tree parameters' value transform), its feature names, and the histograms' check."""
    Xm = apply_transform(checked_matrix(X), transform)
    names = checked_names(feature_names, Xm.shape[1])
    data_errors(lambda: check_histograms(Xm))
    return Xm, names


def data_errors(fn: Callable[[], Any]) -> Any:
    """Run a numerical stage; a plain ValueError from it is a problem of the input data."""
    try:
        return fn()
    except HdtwdError:
        raise
    except ValueError as e:
        raise InputError(str(e)) from None


def embedding_pair(feature_embedding: tuple[np.ndarray, Sequence[str]] | None) -> tuple[np.ndarray, list[str]] | None:
    """``feature_embedding`` as the stages take it: ``(vectors as an array, names as a list)``, or ``None``."""
    return None if feature_embedding is None else (np.asarray(feature_embedding[0]), list(feature_embedding[1]))
