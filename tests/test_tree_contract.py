"""The contract every competitor tree of ``classify`` keeps, checked on each tree of the registry
(``evaluate._competitors.BUILDERS``), in the manner of scikit-learn's ``check_estimator``: a tree added to
the registry is checked here without a test of its own.

For feature vectors ``V`` (one row per feature name) and a seed, a builder returns a valid tree whose
leaves are the features in their order; the TWD on it equals exact optimal transport on its path metric
(an independent linear program); the same seed gives the same bytes; one, two and three features give
valid trees; vectors that do not match the names, or are not finite, are a ``ValueError``. The method's
own properties (its loss, its decoding, what it recovers) stay in its own test file.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_twd_is_exact_ot, planted_groups

from hdtwd_cli.evaluate._competitors import BUILDERS

TREES = sorted(BUILDERS)


#: The contract holds for any training length: HypHC on 20,000 triplets (conftest.short_hyperbolic_training).
pytestmark = pytest.mark.usefixtures("short_hyperbolic_training")


def _vectors() -> tuple[np.ndarray, list[str]]:
    F, _ = planted_groups(7, 2, d=12)
    F[3] = F[2]  # identical vectors: a tree must still hold them (zero-length edges or one cell)
    return F, [f"g{j}" for j in range(F.shape[0])]


@pytest.mark.parametrize("method", TREES)
def test_a_valid_tree_over_the_features_whose_twd_is_exact_ot(method):
    F, names = _vectors()
    tree = BUILDERS[method](F, names, 3)
    tree.validate()
    assert tree.leaf_names == names
    assert np.all(np.isfinite(tree.length)) and np.all(tree.length >= 0)
    assert_twd_is_exact_ot(tree)


@pytest.mark.parametrize("method", TREES)
def test_the_same_seed_gives_the_same_bytes(method):
    F, names = _vectors()
    a, b = BUILDERS[method](F, names, 5), BUILDERS[method](F.copy(), list(names), 5)
    assert a.parent.tobytes() == b.parent.tobytes() and a.length.tobytes() == b.length.tobytes()


@pytest.mark.parametrize("method", TREES)
def test_one_two_and_three_features(method):
    rng = np.random.default_rng(0)
    for m in (1, 2, 3):
        names = [f"f{j}" for j in range(m)]
        tree = BUILDERS[method](rng.normal(size=(m, 4)), names, 0)
        tree.validate()
        assert tree.leaf_names == names and np.all(np.isfinite(tree.length)) and np.all(tree.length >= 0)


@pytest.mark.parametrize("method", [t for t in TREES if t != "star"])  # the star reads the names alone
def test_vectors_that_do_not_fit_the_names_are_a_value_error(method):
    with pytest.raises(ValueError):
        BUILDERS[method](np.ones((3, 2)), ["a", "b"], 0)
    with pytest.raises(ValueError):
        BUILDERS[method](np.array([[1.0, np.nan], [0.0, 1.0], [1.0, 1.0]]), ["a", "b", "c"], 0)


def test_every_tree_is_named_once_in_the_registry_and_the_docs_table_is_the_registry():
    from pathlib import Path

    from hdtwd_cli.evaluate._methods import BUILDER_SOURCES, METHODS, TABLE_BEGIN, TABLE_END, methods_table

    sources = [m.shape.source for m in METHODS.values() if m.shape is not None and m.shape.source is not None]
    assert len(sources) == len(set(sources)) == len(BUILDER_SOURCES) == len(BUILDERS)
    assert {m.shape.builder for m in METHODS.values() if m.shape is not None} == set(BUILDERS)
    page = (Path(__file__).resolve().parents[1] / "docs" / "classify.md").read_text()
    table = TABLE_BEGIN + page.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0] + TABLE_END
    assert table == methods_table(), "run: python -m hdtwd_cli.cli._manpage man docs/usage.md docs/classify.md"
