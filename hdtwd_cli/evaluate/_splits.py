r"""The splits and the kNN rule of the evaluation protocol (paper App. C; docs/method.md section 5).

Repeated random train/test splits (70/30 by default, stratified when every class has at least two
members) and a k-nearest-neighbour classifier on precomputed distances, scored for every k.

kNN rule (deterministic)
    Neighbours are ordered by (distance, training-row index). The predicted class has the most
    votes among the k nearest; a tie between classes goes to the tied class whose nearest member
    comes first in that order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["stratified_splits", "knn_predict", "knn_accuracy"]


def stratified_splits(
    labels: np.ndarray, n_splits: int = 5, test_size: float = 0.3, seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random train/test index splits, stratified when every class has at least two members.

    Per class the test count is ``test_size * count`` rounded by largest remainders so that the
    total is ``round(test_size * n)``, and every class keeps at least one training member.
    Split ``s`` draws from ``numpy.random.default_rng([seed, s])``.

    Returns
    -------
    list of (train_idx, test_idx), each sorted
    """
    y = np.asarray(labels)
    n = y.shape[0]
    n_test = int(round(test_size * n))  # test_size is checked at the door (hd.classify: 0 < test_size < 1)
    if n_test < 1 or n_test >= n:
        raise ValueError(f"a test fraction of {test_size} leaves no train or no test rows of {n}")
    classes, y_idx, counts = np.unique(y, return_inverse=True, return_counts=True)
    stratify = bool(np.all(counts >= 2))
    out = []
    for s in range(n_splits):
        rng = np.random.default_rng([seed, s])
        if not stratify:
            perm = rng.permutation(n)
            out.append((np.sort(perm[n_test:]), np.sort(perm[:n_test])))
            continue
        exact = counts * (n_test / n)
        take = np.minimum(np.floor(exact).astype(np.int64), counts - 1)
        rest = n_test - int(take.sum())
        frac = exact - take
        for c in np.lexsort((np.arange(len(classes)), -frac)):
            if rest <= 0:
                break
            if take[c] < counts[c] - 1:
                take[c] += 1
                rest -= 1
        test = []
        for c in range(len(classes)):
            members = np.flatnonzero(y_idx == c)
            test.append(rng.permutation(members)[: take[c]])
        test_idx = np.sort(np.concatenate(test))
        mask = np.ones(n, dtype=bool)
        mask[test_idx] = False
        out.append((np.flatnonzero(mask), test_idx))
    return out


def knn_predict(D: np.ndarray, y_train: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """kNN predictions for every k from a (test x train) distance matrix.

    Parameters
    ----------
    D : ndarray, shape (n_test, n_train)
    y_train : ndarray of int, shape (n_train,)
        Class indices ``0..C-1``.
    ks : sequence of int

    Returns
    -------
    ndarray of int, shape (len(ks), n_test)
    """
    ks = [int(k) for k in ks]
    kmax = max(ks)
    n_test, n_train = D.shape
    if kmax > n_train:
        raise ValueError(f"k = {kmax} exceeds the {n_train} training samples")
    C = int(y_train.max()) + 1
    order = np.argsort(D, axis=1, kind="stable")[:, :kmax]
    nb = y_train[order]  # (n_test, kmax) neighbour classes, nearest first
    onehot = np.zeros((n_test, kmax, C), dtype=np.int32)
    np.put_along_axis(onehot, nb[:, :, None], 1, axis=2)
    votes = np.cumsum(onehot, axis=1)  # votes[:, k-1, c] = members of c among the k nearest
    first = np.full((n_test, C), kmax, dtype=np.int64)
    pos = np.broadcast_to(np.arange(kmax), nb.shape)
    np.minimum.at(first, (np.repeat(np.arange(n_test), kmax), nb.ravel()), pos.ravel())
    out = np.empty((len(ks), n_test), dtype=np.int64)
    for i, k in enumerate(ks):
        key = votes[:, k - 1, :].astype(np.int64) * (kmax + 1) + (kmax - first)
        out[i] = np.argmax(key, axis=1)
    return out


def knn_accuracy(D: np.ndarray, y_train: np.ndarray, y_test: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """Accuracy in percent for every k (labels of any type)."""
    _, codes = np.unique(np.concatenate([np.asarray(y_train), np.asarray(y_test)]), return_inverse=True)
    tr, te = codes[: len(y_train)], codes[len(y_train) :]
    pred = knn_predict(D, tr, ks)
    return 100.0 * (pred == te[None, :]).mean(axis=1)
