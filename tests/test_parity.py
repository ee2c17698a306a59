"""One answer by every route: ``embed`` -> ``decode_tree`` -> distances on the tree equals the one-shot
distances, byte for byte, on a count matrix the defaults denoise (the exact and the landmark paths,
API and command line), with the options that act on the first stage (min_df, max_features)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from conftest import feature_names, run_hdtwd

import hdtwd_cli as hd
from hdtwd_cli.evaluate._synthetic import planted_counts


@pytest.fixture(scope="module")
def counts() -> np.ndarray:
    """Planted Poisson counts: 240 samples x 120 features, enough of both for the automatic denoiser."""
    X, _, _ = planted_counts(n_samples=240, n_features=120, n_classes=4, seed=5, depth=400.0)
    X[X.sum(axis=1) == 0, 0] = 1.0
    return X


#: Tree options that change the first stage (denoising, the features' space) or the decoding.
VARIANTS = {
    "defaults": {},
    "landmarks, rank 20": {"landmarks": 40, "denoise": 20},
    "min_df and max_features": {"min_df": 5, "max_features": 90},
    "complete linkage, midpoint": {"linkage": "complete", "edge_weights": "midpoint"},
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_api_embed_decode_equals_one_shot(counts, variant):
    names = feature_names(counts.shape[1])
    params = hd.TreeParams(**VARIANTS[variant])
    one_shot = hd.learn_tree(counts, names, params=params)
    emb = hd.embed(counts, names, params=params)
    chained = hd.decode_tree(emb)
    if variant == "defaults":  # the defaults denoise these counts: the chain must too
        assert one_shot.denoiser is not None and one_shot.metadata["denoise"] == 50
    assert (chained.denoiser is None) == (one_shot.denoiser is None)
    assert chained.metadata["denoise"] == one_shot.metadata["denoise"]
    assert chained.metadata["denoise_rule"] == one_shot.metadata["denoise_rule"]
    assert chained.leaf_names == one_shot.leaf_names
    assert np.array_equal(chained.parent, one_shot.parent) and np.array_equal(chained.length, one_shot.length)
    D1 = hd.distances(counts, feature_names=names, params=params)
    D2 = hd.distances(counts, tree=chained, feature_names=names)
    assert D1.max() > 0 and np.array_equal(D1, D2)


def test_denoised_chain_differs_from_the_undenoised_tree(counts):
    """The parity above is not vacuous: the denoised and the undenoised distances differ."""
    names = feature_names(counts.shape[1])
    D_on = hd.distances(counts, tree=hd.decode_tree(hd.embed(counts, names)), feature_names=names)
    D_off = hd.distances(counts, feature_names=names, params=hd.TreeParams(denoise=0))
    assert np.abs(D_on - D_off).max() > 0.05 * D_off.max()


@pytest.mark.parametrize("variant", ["defaults", "landmarks, rank 20"])
def test_cli_chain_equals_one_shot(tmp_path, counts, variant):
    np.save(tmp_path / "X.npy", counts)
    opts = [str(a) for k, v in VARIANTS[variant].items() for a in (f"--{k.replace('_', '-')}", v)]
    x = tmp_path / "X.npy"
    run_hdtwd("embed", x, "-o", tmp_path / "E.h5", "-q", *opts)
    run_hdtwd("decode-tree", tmp_path / "E.h5", "-o", tmp_path / "T.h5", "-q")
    run_hdtwd("distance", x, "--tree", tmp_path / "T.h5", "-o", tmp_path / "D1.npy", "-q")
    run_hdtwd("distance", x, "-o", tmp_path / "D2.npy", "-q", *opts)
    D1, D2 = np.load(tmp_path / "D1.npy"), np.load(tmp_path / "D2.npy")
    assert D1.max() > 0 and np.array_equal(D1, D2)
    with h5py.File(tmp_path / "E.h5") as f:  # the embedding file carries the map the tree applies
        assert "features/denoise" in f
        assert f["features/denoise/axes"].shape[0] == counts.shape[1]
    with h5py.File(tmp_path / "T.h5") as f:
        assert "tree/denoise" in f and f["params"].attrs["denoise"] > 0


def test_float32_counts_give_the_float64_answer_by_both_routes(counts):
    """Counts stored as float32 (AnnData's usual type) are the same values.

    The same bytes as float64, one-shot and chained.
    """
    names = feature_names(counts.shape[1])
    X32 = counts.astype(np.float32)
    D64 = hd.distances(counts, feature_names=names)
    assert np.array_equal(hd.distances(X32, feature_names=names), D64)
    assert np.array_equal(hd.distances(X32, tree=hd.decode_tree(hd.embed(X32, names)), feature_names=names), D64)
