r"""Histograms on a tree: the samples' values as the tree-Wasserstein distance compares them.

One composition, used by every route (the distances, the tree vectors, classify, exact OT, the
fitted trees, the joint hierarchies, the CLI's outputs): the columns are matched to the tree's
leaves by name (:func:`align_to_tree`), the tree's map is applied -- its denoiser (the rank-``r``
reconstruction, docs/method.md section 11) and its feature weights ``w`` (idf) --, every row is
normalised to mass 1, and where the tree carries a Haar filter the rows are projected onto the kept
Haar vectors (docs/method.md section 13):

.. math:: x_i = \frac{\hat X_i \odot w}{\lVert \hat X_i \odot w \rVert_1},\qquad
          \tilde x_i = \frac{\max(B_K B_K^\top x_i, 0)}{\lVert \max(B_K B_K^\top x_i, 0) \rVert_1}.

:func:`tree_histograms` is the way in; :func:`haar_selection` chooses the kept Haar vectors ``K``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from hdtwd_cli.errors import InputError
from hdtwd_cli.tree._denoise import DenoisedRows
from hdtwd_cli.tree._haar import HaarBasis, haar_basis, haar_filter, kept_coefficients
from hdtwd_cli.tree._tree import Tree
from hdtwd_cli.twd._kernels import row_sums

__all__ = [
    "align_to_tree",
    "check_histograms",
    "haar_filtered",
    "haar_selection",
    "mean_histogram",
    "normalize_rows",
    "tree_histograms",
]


def normalize_rows(X: np.ndarray | sp.spmatrix | DenoisedRows, *, copy: bool = True) -> np.ndarray | sp.csr_matrix:
    r"""Histograms :math:`x_i = X_i / \lVert X_i \rVert_1` (sparse input stays sparse; denoised rows: dense).

    ``copy=False``: a float64 ndarray is divided in place and returned (the caller owns it: rows
    just computed), the same bits without a copy of a wide block.

    Raises
    ------
    ValueError
        If a row sums to zero (it has no histogram); the message names its index.
    """
    if isinstance(X, DenoisedRows):
        check_histograms(X)
        X = X.rows()
    with np.errstate(over="ignore"):  # an overflowing row sum is reported below
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=np.float64, copy=True)
            X.sum_duplicates()
        elif copy or not (isinstance(X, np.ndarray) and X.dtype == np.float64):
            X = np.array(X, dtype=np.float64, copy=True)
        s = row_sums(X)  # the same bits for dense and sparse storage of the same values
    _check_sums(s)
    if sp.issparse(X):
        X.data /= np.repeat(s, np.diff(X.indptr))  # type: ignore[misc,union-attr]
        return X
    X /= s[:, None]
    return X


def _check_sums(s: np.ndarray) -> None:
    if not np.all(np.isfinite(s)):
        i = int(np.flatnonzero(~np.isfinite(s))[0])
        raise ValueError(f"row {i} sums to infinity in float64 (values too large); rescale the data")
    bad = np.flatnonzero(~(s > 0))
    if bad.size:
        raise ValueError(
            f"row {int(bad[0])} sums to zero and has no histogram"
            + (f" ({bad.size} such rows)" if bad.size > 1 else "")
        )


def mean_histogram(tree: Tree, X: np.ndarray | sp.spmatrix, feature_names: Sequence[str] | None = None) -> np.ndarray:
    r"""The samples' mean histogram over the tree's leaves, :math:`\frac1n \sum_i x_i` (weights applied).

    Columns are matched to the leaves by name (``feature_names``; default: the leaves' own
    names), the tree's feature weights (and denoiser) applied as for the TWD; features of ``X``
    that are not leaves are dropped. Entry ``j`` is the share of the mass the TWD moves that sits
    on leaf ``j`` (the masses sum to 1).
    """
    names = list(feature_names) if feature_names is not None else list(tree.leaf_names)
    H = normalize_rows(align_to_tree(X, names, tree, drop_unknown=True))
    return np.asarray(H.mean(axis=0), dtype=np.float64).ravel()


def check_histograms(X: np.ndarray | sp.spmatrix | DenoisedRows) -> None:
    """Raise the error of :func:`normalize_rows` without copying ``X``: run it before any costly stage.

    Denoised rows are checked on the values they come from: a sample without values has no
    histogram (its reconstruction would be the fitted rows' mean, not data).
    """
    if isinstance(X, DenoisedRows):
        X = X.values
    with np.errstate(over="ignore"):
        _check_sums(row_sums(X))


def haar_filtered(tree: Tree, H: np.ndarray | sp.spmatrix, basis: HaarBasis | None = None) -> np.ndarray:
    r"""Histograms filtered in the tree's Haar basis: :math:`\tilde x = \max(B_K B_K^\top x, 0)`, normalised.

    :math:`B_K` holds the Haar vectors of ``tree`` that :attr:`Tree.haar_keep` marks
    (:func:`hdtwd_cli.tree._haar.haar_basis`; docs/method.md section 13). Every Haar vector but the
    kept constant one sums to 0, so the projection keeps the row's mass 1 and has a positive entry:
    the clipped row is a histogram again. Dense output (the projection spreads mass over the leaves).
    """
    if tree.haar_keep is None:
        raise ValueError("the tree carries no Haar filter")
    dense = sp.csr_matrix(H).toarray() if sp.issparse(H) else np.asarray(H, dtype=np.float64)
    F = haar_filter(basis if basis is not None else haar_basis(tree), dense, tree.haar_keep)
    np.maximum(F, 0.0, out=F)
    F /= F.sum(axis=1)[:, None]
    return F


def _default_names(names: list[str]) -> bool:
    """The names are ``f0, f1, ...``: what the API and unnamed files give when no names are known."""
    return all(n == f"f{j}" for j, n in enumerate(names))


def align_to_tree(
    X: np.ndarray | sp.spmatrix,
    feature_names: list[str],
    tree: Tree,
    path: str | None = None,
    drop_unknown: bool = False,
) -> np.ndarray | sp.csr_matrix | DenoisedRows:
    """Reorder the columns of ``X`` to the tree's leaves, matching by feature NAME.

    When the tree carries a denoiser (:attr:`Tree.denoiser`), the result is the rows' denoised
    values, computed on demand by row block (:class:`hdtwd_cli.tree._denoise.DenoisedRows`: what
    :class:`TreeVectors` and :func:`normalize_rows` take). When it carries feature weights
    (:attr:`Tree.feature_weights`), each column is multiplied by its leaf's weight, so the rows
    become the weighted values whose histograms the TWD compares.

    The result may be ``X`` itself (dense, already in leaf order, no weights): callers copy before
    writing (:func:`normalize_rows` does).

    Leaves absent from the data get zero mass. Data features absent from the tree are an
    error when they carry mass (the message names a few); all-zero ones are ignored. With
    ``drop_unknown`` their mass is dropped instead (evaluation: a feature that is all zero in
    the training rows has no leaf, whatever the test rows hold).
    """
    if tree.haar_keep is not None:  # the histograms, projected onto the kept Haar vectors
        unfiltered = align_to_tree(X, feature_names, dataclasses.replace(tree, haar_keep=None), path, drop_unknown)
        return haar_filtered(tree, normalize_rows(unfiltered))
    if tree.denoiser is not None:  # values -> denoised values -> weights, row blocks on demand
        bare = dataclasses.replace(tree, feature_weights=None, denoiser=None)
        values = align_to_tree(X, feature_names, bare, path, drop_unknown)
        return DenoisedRows(values, tree.denoiser, tree.feature_weights)
    index = {name: i for i, name in enumerate(tree.leaf_names)}
    dest = np.array([index.get(name, -1) for name in feature_names], dtype=np.int64)
    missing = np.flatnonzero(dest < 0)
    if missing.size and not drop_unknown:
        if sp.issparse(X):
            mass = np.asarray(abs(X[:, missing]).sum(axis=0)).ravel()
        else:
            mass = np.abs(X[:, missing]).sum(axis=0)
        bad = missing[mass > 0]
        if bad.size and (
            bad.size == len(feature_names) or (_default_names(feature_names) and not _default_names(tree.leaf_names))
        ):
            # nothing matches, or the data has the default names f0, f1, ... and the tree real ones:
            # the names were not given (hd.distances(X, tree=T) for a tree learned with gene names)
            ours = ", ".join(repr(n) for n in feature_names[:3]).replace("{", "{{").replace("}", "}}")
            leaves = ", ".join(repr(n) for n in tree.leaf_names[:3]).replace("{", "{{").replace("}", "}}")
            raise InputError(
                f"the data's feature names ({ours}, ...) are not the tree's leaf names ({leaves}, ...): "
                f"{bad.size} of {len(feature_names)} feature(s) with mass match no leaf; give {{a}} as the tree was "
                "learned with (or {b} root to hang unknown features from the root)",
                path,
                a="feature_names",
                b="unseen",
            )
        if bad.size:
            shown = ", ".join(repr(feature_names[j]) for j in bad[:5]).replace("{", "{{").replace("}", "}}")
            raise InputError(
                f"{bad.size} feature(s) with mass are not leaves of the tree: {shown}"
                + (" ..." if bad.size > 5 else "")
                + " ({a} root hangs them from the tree's root)",
                path,
                a="unseen",
            )
    n, L = X.shape[0], tree.n_leaves
    if len(set(dest[dest >= 0].tolist())) != int((dest >= 0).sum()):
        raise InputError("two data features map to the same tree leaf", path)
    w = tree.feature_weights
    if sp.issparse(X):
        C = sp.coo_matrix(X)
        new_col = dest[C.col]
        ok = new_col >= 0
        out = sp.csr_matrix((C.data[ok], (C.row[ok], new_col[ok])), shape=(n, L))
        out.sum_duplicates()
        out.sort_indices()
        if w is not None:
            out.data *= w[out.indices]
        return out
    if w is None and X.shape[1] == L and np.array_equal(dest, np.arange(L)):
        return np.asarray(X, dtype=np.float64)  # already in leaf order (e.g. the tree was learned from X): no copy
    # a gather along the rows (one pass, each output row written in order) rather than a scatter
    # into columns, whose writes are strided
    known = np.flatnonzero(dest >= 0)
    src = np.zeros(L, dtype=np.int64)  # the data column of each leaf (0 for absent leaves, zeroed below)
    src[dest[known]] = known
    Xd = np.asarray(X, dtype=np.float64)
    out = np.take(Xd, src, axis=1) if Xd.shape[1] else np.zeros((n, L))
    absent = np.ones(L, dtype=bool)
    absent[dest[known]] = False
    if absent.any():
        out[:, absent] = 0.0  # leaves absent from the data get zero mass
    if w is not None:
        out *= w[None, :]
    return out


def tree_histograms(
    X: np.ndarray | sp.spmatrix,
    feature_names: Sequence[str],
    tree: Tree,
    *,
    normalised: bool = True,
    haar: bool = True,
    drop_unknown: bool = False,
    path: str | None = None,
) -> np.ndarray | sp.csr_matrix | DenoisedRows:
    r"""The rows of ``X`` (columns ``feature_names``) as the histograms the TWD on ``tree`` compares.

    Columns in the order of ``tree.leaf_names`` (matched by name, :func:`align_to_tree`), the tree's
    denoiser and feature weights applied, every row normalised to mass 1 (:func:`normalize_rows`), then
    filtered in the tree's Haar basis where it carries one (:func:`haar_filtered`).

    Parameters
    ----------
    normalised : bool
        ``False``: the weighted values before the normalisation, for the tree vectors, which
        normalise them block by block (:class:`~hdtwd_cli.twd._distance.TreeVectors`): a
        ``DenoisedRows`` where the tree denoises (computed on demand), possibly ``X`` itself (do not
        write to it); where the tree carries a Haar filter, the filtered histograms all the same
        (the filter acts on histograms).
    haar : bool
        ``False``: the histograms before the tree's Haar filter (the joint hierarchies choose it from them).
    drop_unknown : bool
        Features that are not leaves lose their mass rather than raising.
    path : str, optional
        The file the rows came from, for the error messages.

    Returns
    -------
    ndarray or csr_matrix or DenoisedRows
        Sparse input stays sparse (dense once denoised or filtered).

    Raises
    ------
    InputError
        Features with mass that are not leaves (unless ``drop_unknown``), two features on one leaf.
    ValueError
        A row without mass (it has no histogram).
    """
    if not haar:
        tree = dataclasses.replace(tree, haar_keep=None)
    A = align_to_tree(X, list(feature_names), tree, path, drop_unknown)
    return normalize_rows(A) if normalised and tree.haar_keep is None else A


def haar_selection(tree: Tree, H: np.ndarray, share: float) -> tuple[np.ndarray, np.ndarray]:
    r"""The Haar vectors that carry ``share`` of the coefficients' mass over the histograms ``H`` (leaf
    order), and ``H`` filtered by them: :math:`K` of :func:`hdtwd_cli.tree._haar.kept_coefficients`, then
    :func:`haar_filtered` (one basis for both). Returns ``(filtered rows, kept mask)``."""
    basis = haar_basis(tree)
    keep = kept_coefficients(basis.analysis(H), share)
    return haar_filtered(dataclasses.replace(tree, haar_keep=keep), H, basis), keep
