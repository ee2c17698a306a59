"""The form of the values (tree/_forms.value_form): the forms users pass, recognised from the stored values.

Scanpy's own output is the reference for the log-normalised form (``normalize_total`` + ``log1p``,
float32 and float64, all genes and a highly-variable subset); transforms that are not that form
(tf-idf, scaled values, CP10k without the log, proportions, random floats) must not pass.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from hdtwd_cli.tree._forms import decimal_grid, is_log_normalised, value_form

sc = pytest.importorskip("scanpy")
anndata = pytest.importorskip("anndata")


def _umi(n: int = 300, m: int = 2500, seed: int = 0) -> np.ndarray:
    """UMI-like counts: cells of 5 types with depths varying 5-fold, most entries 0 or 1."""
    rng = np.random.default_rng(seed)
    base = rng.gamma(0.3, 1.0, size=(5, m))
    depth = rng.uniform(0.4, 2.0, size=(n, 1))
    return rng.poisson(base[rng.integers(0, 5, n)] * depth).astype(np.float64)


def _scanpy(counts: np.ndarray, dtype: type, *, hvg: bool = False, target: float | None = 1e4) -> sp.csr_matrix:
    a = anndata.AnnData(X=sp.csr_matrix(counts.astype(dtype)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sc.pp.normalize_total(a, target_sum=target)
        sc.pp.log1p(a)
        if hvg:
            sc.pp.highly_variable_genes(a, flavor="seurat", n_top_genes=500)
            a = a[:, a.var["highly_variable"]].copy()
    assert a.X.dtype == dtype
    return sp.csr_matrix(a.X)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hvg", [False, True])
@pytest.mark.parametrize("target", [1e4, None])
def test_scanpys_log_normalised_values_are_recognised(dtype, hvg, target):
    X = _scanpy(_umi(), dtype, hvg=hvg, target=target)
    want = "lognorm_subset" if hvg else "lognorm"  # a gene subset: the rows' totals differ
    assert is_log_normalised(X)
    assert value_form(X) == want
    assert value_form(X.toarray()) == want  # dense storage alike
    assert value_form(sp.csr_matrix(X, dtype=np.float64) if dtype == np.float32 else X.astype(np.float32)) == want


def test_all_genes_and_a_subset_are_told_apart_by_the_rows_totals():
    C = _umi(seed=4)
    X = _scanpy(C, np.float32)
    assert value_form(X) == "lognorm"
    assert value_form(X[:, : C.shape[1] - 1]) == "lognorm_subset"  # one gene fewer: the totals differ
    assert value_form(X[:20]) == "lognorm"  # a subset of the cells keeps the form


def test_the_other_forms_of_the_same_counts():
    C = _umi()
    assert value_form(C) == value_form(C.astype(np.float32)) == value_form(C.astype(np.int32)) == "counts"
    assert value_form(sp.csr_matrix(C)) == "counts"
    assert value_form(np.log1p(C)) == value_form(np.log1p(C).astype(np.float32)) == "log1p_counts"
    # log1p counts are log-normalised with every factor 1: the more specific form wins
    assert is_log_normalised(np.log1p(C))


def test_pbmc68k_reduced_raw_is_log_normalised_and_its_scaled_x_is_not():
    """scanpy's bundled set: ``.raw`` holds log-normalised values rounded to 3 decimals, ``.X`` the scaled ones."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = sc.datasets.pbmc68k_reduced()
    assert decimal_grid(a.raw.X) == pytest.approx(5e-4)
    assert value_form(a.raw.X) == "lognorm_subset"  # 765 genes of the 68k set's
    assert decimal_grid(np.log1p(_umi())) == 0.0
    assert value_form(a.X) == "other"


def _tfidf(C: np.ndarray) -> np.ndarray:
    idf = np.log((1 + C.shape[0]) / (1 + (C > 0).sum(axis=0))) + 1
    T = C * idf
    return T / np.maximum(np.linalg.norm(T, axis=1, keepdims=True), 1e-300)


@pytest.mark.parametrize(
    "kind",
    ["tf-idf", "tf-idf, no norm", "scaled", "cp10k without log", "proportions", "log2", "random", "random float32"],
)
def test_values_of_another_form_are_not_recognised(kind):
    C = _umi(seed=1)
    rng = np.random.default_rng(2)
    cp = C * (1e4 / C.sum(axis=1, keepdims=True))
    X = {
        "tf-idf": _tfidf(C),
        "tf-idf, no norm": C * (np.log((1 + C.shape[0]) / (1 + (C > 0).sum(axis=0))) + 1),
        "scaled": (np.log1p(cp) - np.log1p(cp).mean(axis=0)) / (np.log1p(cp).std(axis=0) + 1e-12),
        "cp10k without log": cp,
        "proportions": C / C.sum(axis=1, keepdims=True),
        "log2": np.log2(1 + cp),
        "random": rng.random((200, 300)),
        "random float32": rng.random((200, 300)).astype(np.float32),
    }[kind]
    assert value_form(X) == "other"
    assert not is_log_normalised(sp.csr_matrix(X))


def test_rows_that_prove_nothing_do_not_make_a_form():
    """Every row constant (each fits any factor): no evidence of log-normalisation. Empty: no form either."""
    X = np.zeros((50, 20))
    X[np.arange(50), np.arange(50) % 20] = np.linspace(0.3, 2.1, 50)
    assert not is_log_normalised(X)
    assert not is_log_normalised(np.zeros((0, 5)))


def test_a_gene_subset_whose_smallest_count_is_not_one_still_passes():
    """A row of a gene subset may hold only counts 2, 4, 6 (factor c, smallest value 2c)."""
    rng = np.random.default_rng(3)
    k = rng.integers(1, 30, size=(40, 60)) * (rng.random((40, 60)) < 0.5)
    k[0] = np.where(k[0] > 0, 2 * k[0], 0)  # one row: every count even
    c = rng.uniform(0.5, 3.0, size=(40, 1))
    X = np.log1p(c * k).astype(np.float32)
    assert value_form(X) == "lognorm_subset"
    assert value_form(X[:, :30]) == "lognorm_subset" and value_form(X[:, 30:]) == "lognorm_subset"
