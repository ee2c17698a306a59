"""The HDF5 layouts of hdtwd's files (embedding, tree, distance matrix).

Every group carries ``encoding-type`` and ``encoding-version`` attributes (as AnnData's do), every
file records the tool version, the parameters and the input fingerprint. Strings are UTF-8
variable-length; no timestamps are stored, so the same input and parameters give the same bytes.

Embedding file (``hdtwd embed``), ``encoding-type = "hdtwd-embedding"``::

    /                      attrs: hdtwd_version, input_fingerprint, input_path, n_samples, n_features
    /params                attrs: eps (multiplier c), scales (K), metric, seed, eigenvalue_floor, alpha
    /features/names        (m,) str     feature (leaf) names, in embedding order
    /features/dropped      (d,) str     features without a vector (no mass, or absent from the given
                                        feature embedding): they hang from the tree's root
    /features/weights      (m+d,) f8    optional: feature weight (idf) of names, then dropped
    /features/denoise      optional: the rank-r map the tree's rows were denoised by (the layout of
                           /tree/denoise below, one entry per feature of names, then dropped)
    /diffusion             attrs: eps (c * sigma, the scale actually used), sigma, clipped_spectral_mass
    /diffusion/eigenvalues (m,) f8      eigenvalues of S after clipping to [floor, 1], descending
                                        (landmarks: (m',), the eigenvalues sigma^2 of S R)
    /diffusion/raw_eigenvalues (m,) f8  before clipping
    /diffusion/sqrt_degree (m,) f8      Dh^(1/2) (landmarks: dt^(1/2))
    /diffusion/landmarks   (m',) i8     landmark path only: feature index of each landmark (kmeans:
                                        the feature nearest each centroid); attrs n_landmarks,
                                        landmark_method, min_affinity (smallest row sum of W)
    /embedding/psi         (K+1, m, m) f8   psi[k, j] = sqrt(P^(2^-k) e_j); (K+1, m, m') with
                                        landmarks: psi[k, j] = sqrt(rho_j^(2^-k)) over the landmarks
    /embedding/heights     (K+1,) f8    2^(k/2-2), the last half-space coordinate per scale
    /embedding/negative_mass (K+1,) f8  clipped negative density mass per scale (fraction)

Tree file (``hdtwd decode-tree``, ``hdtwd distance --save-tree``), ``encoding-type = "hdtwd-tree"``::

    /                      attrs: hdtwd_version, input_fingerprint, n_leaves
    /params                attrs: the parameters of the embedding it was decoded from
    /tree/parent           (2m-1,) i8   parent node (-1 for the root); leaves are 0..m-1 and
                                        every node precedes its parent
    /tree/length           (2m-1,) f8   edge length to the parent (0 for the root)
    /tree/leaf_names       (m,) str     feature name of each leaf
    /tree/children         (m-1, 2) i8  children of internal node m+i (binary trees)
    /tree/merge_height     (m-1,) f8    HD-LCA value a(j, j') of the merge creating node m+i
    /tree/feature_weights  (m,) f8      optional: weight of each leaf's feature (e.g. idf), applied
                                        to the samples' values before they become histograms
    /tree/denoise          optional (``denoise=r``): the rank-r map applied to the samples'
                           values before the weights; attrs log_counts (values are log1p(CP10k)
                           first), encoding-type "hdtwd-denoiser"
    /tree/denoise/mean     (m,) f8      mean of the fitted rows' values
    /tree/denoise/axes     (m, r) f8    orthonormal principal axes
    /tree/denoise/covered  (m,) u1      leaves the axes were fitted on (others keep their values)
    /tree/haar_keep        (m,) u1      optional: the tree's Haar vectors a histogram is projected
                                        onto before the TWD (joint hierarchies' filter; vector 0,
                                        the constant, always kept)

Distance file (``hdtwd distance -o D.h5``), ``encoding-type = "hdtwd-distances"``::

    /distances             (q, n) f8 or f4
    /row_names, /col_names (q,), (n,) str    sample names
    /                      attrs: hdtwd_version, parameters, input fingerprint(s)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hdtwd_cli._version import __version__
from hdtwd_cli.errors import InputError
from hdtwd_cli.io._atomic import atomic_path
from hdtwd_cli.io._guard import numeric, open_hdf5, reading
from hdtwd_cli.io._records import DenoiserRecord, EmbeddingRecord, TreeLike, TreeRecord, children_of

if TYPE_CHECKING:
    import h5py

__all__ = [
    "EMBEDDING_TYPE",
    "TREE_TYPE",
    "DISTANCES_TYPE",
    "ENCODING_VERSION",
    "write_embedding",
    "read_embedding",
    "write_tree",
    "read_tree",
    "write_distances_h5",
    "write_distances_blocked",
]

EMBEDDING_TYPE = "hdtwd-embedding"
TREE_TYPE = "hdtwd-tree"
DISTANCES_TYPE = "hdtwd-distances"
ENCODING_VERSION = "0.1.0"


def _h5py() -> Any:
    """h5py, imported on first use (start-up time that a run writing ``.npy`` never needs)."""
    import h5py

    return h5py


def _mark(obj: h5py.Group, kind: str) -> None:
    obj.attrs["encoding-type"] = kind
    obj.attrs["encoding-version"] = ENCODING_VERSION


def _attrs(obj: h5py.Group, values: Mapping[str, Any]) -> None:
    for k, v in values.items():
        if v is None:
            continue
        if isinstance(v, (dict, list, tuple)):
            v = json.dumps(v, sort_keys=True)
        elif isinstance(v, (np.floating, np.integer)):
            v = v.item()
        obj.attrs[k] = v


def _strings(group: h5py.Group, name: str, values: list[str]) -> None:
    group.create_dataset(
        name, data=np.array(values, dtype=object), dtype=_h5py().string_dtype("utf-8"), track_times=False
    )


def _array(group: h5py.Group, name: str, values: np.ndarray, **kw: Any) -> None:
    group.create_dataset(name, data=values, track_times=False, **kw)


def _root(f: h5py.File, kind: str, meta: Mapping[str, Any]) -> None:
    _mark(f, kind)
    f.attrs["hdtwd_version"] = __version__
    _attrs(f, meta)


def _open(path: str, kind: str) -> h5py.File:
    f = open_hdf5(path)
    with reading(path, "HDF5 file"):
        found = f.attrs.get("encoding-type")
    if found != kind:
        f.close()
        what = f"an {found!r} file" if found else "not an hdtwd file"
        raise InputError(f"expected an hdtwd {kind!r} file, found {what}", path)
    return f


def _read_strings(ds: h5py.Dataset) -> list[str]:
    return [s.decode("utf-8") if isinstance(s, bytes) else str(s) for s in ds[()]]


def write_embedding(
    path: str,
    emb: Any,
    op: Any,
    feature_names: list[str],
    dropped: list[str],
    params: Mapping[str, Any],
    meta: Mapping[str, Any],
    weights: np.ndarray | Sequence[float] | None = None,
    denoiser: Any = None,
) -> None:
    """Write the multi-scale embedding in the documented layout (see the module docstring).

    ``denoiser`` (attributes ``mean``, ``axes``, ``covered``, ``log_counts``; rows in the order of
    ``feature_names`` then ``dropped``): the map the tree decoded from this file applies to samples.

    ``emb`` has the arrays ``psi``, ``heights`` and ``negative_mass``; ``op``, the diffusion
    operator, has ``eps``, ``sigma``, ``clipped_spectral_mass``, ``eigenvalues``,
    ``raw_eigenvalues`` and ``sqrt_degree``, and a landmark operator also ``landmarks``,
    ``n_landmarks``, ``method`` and ``min_affinity``.
    """
    m = int(emb.psi.shape[1])
    with _h5py().File(path, "w") as f:
        _root(f, EMBEDDING_TYPE, meta)
        g = f.create_group("params")
        _mark(g, "hdtwd-params")
        _attrs(g, params)
        g = f.create_group("features")
        _mark(g, "hdtwd-features")
        _strings(g, "names", feature_names)
        _strings(g, "dropped", dropped)
        if weights is not None:
            _array(g, "weights", np.asarray(weights, dtype=np.float64))
        if denoiser is not None:
            _write_denoiser(g, denoiser)
        g = f.create_group("diffusion")
        _mark(g, "hdtwd-diffusion-operator")
        _attrs(g, {"eps": op.eps, "sigma": op.sigma, "clipped_spectral_mass": op.clipped_spectral_mass})
        _array(g, "eigenvalues", op.eigenvalues)
        _array(g, "raw_eigenvalues", op.raw_eigenvalues)
        _array(g, "sqrt_degree", op.sqrt_degree)
        if getattr(op, "landmarks", None) is not None:
            _attrs(g, {"n_landmarks": op.n_landmarks, "landmark_method": op.method, "min_affinity": op.min_affinity})
            _array(g, "landmarks", op.landmarks)
        g = f.create_group("embedding")
        _mark(g, "hdtwd-hyperbolic-embedding")
        w = int(emb.psi.shape[2])
        _array(g, "psi", emb.psi, chunks=(1, min(m, max(1, 2**20 // max(w, 1))), w))
        _array(g, "heights", emb.heights)
        _array(g, "negative_mass", emb.negative_mass)


def read_embedding(path: str) -> EmbeddingRecord:
    """Read an embedding file written by :func:`write_embedding`."""
    with _open(path, EMBEDDING_TYPE) as f, reading(path, "hdtwd embedding file"):
        try:
            psi = numeric(f["embedding/psi"][()], path, "embedding/psi", kinds="f", ndim=3)
            heights = numeric(f["embedding/heights"][()], path, "embedding/heights", kinds="f", ndim=1)
            negative_mass = numeric(f["embedding/negative_mass"][()], path, "embedding/negative_mass", kinds="f")
            names = _read_strings(f["features/names"])
            params = dict(f["params"].attrs)
            meta = {k: v for k, v in f.attrs.items() if k not in ("encoding-type", "encoding-version")}
            diffusion = dict(f["diffusion"].attrs)
            diffusion.pop("encoding-type", None)
            diffusion.pop("encoding-version", None)
            params.pop("encoding-type", None)
            params.pop("encoding-version", None)
            diffusion["dropped"] = _read_strings(f["features/dropped"])
            if "features/weights" in f:
                diffusion["feature_weights"] = numeric(f["features/weights"][()], path, "features/weights", ndim=1)
            denoiser = _read_denoiser(f["features/denoise"], path) if "features/denoise" in f else None
        except KeyError as e:
            raise InputError(f"embedding file lacks {e}", path) from None
    width = int(diffusion.get("n_landmarks", 0)) or len(names)
    if psi.ndim != 3 or psi.shape[1] != len(names) or psi.shape[2] != width:
        raise InputError("embedding file is inconsistent (psi shape vs feature names)", path)
    if heights.shape != (psi.shape[0],) or negative_mass.shape != (psi.shape[0],):
        raise InputError("embedding file is inconsistent (one height and one negative mass per scale)", path)
    for name, values in (("psi", psi), ("heights", heights), ("negative_mass", negative_mass)):
        if not np.all(np.isfinite(values)):
            raise InputError(f"embedding/{name} holds NaN or infinite values", path)
    dropped = diffusion["dropped"]
    if len(set(names) | set(dropped)) != len(names) + len(dropped):
        raise InputError("embedding file names a feature twice (features/names and features/dropped)", path)
    weights = diffusion.get("feature_weights")
    if weights is not None and (weights.size != len(names) + len(dropped) or not np.all(np.isfinite(weights))):
        raise InputError(
            f"features/weights holds {weights.size} values for {len(names) + len(dropped)} features, "
            "or non-finite ones",
            path,
        )
    if psi.size and (psi.min() < 0 or psi.max() > 1 + 1e-6):  # square roots of diffusion densities
        raise InputError(f"embedding/psi holds values outside [0, 1] ({psi.min():.3g}..{psi.max():.3g})", path)
    if np.any(heights <= 0) or np.any(np.diff(heights) <= 0):
        raise InputError("embedding/heights are not positive and increasing from scale to scale", path)
    if denoiser is not None:
        _check_denoiser(denoiser, len(names) + len(dropped), path, "features/denoise")
    return EmbeddingRecord(psi, heights, negative_mass, names, params, meta, diffusion, denoiser)


def write_tree(path: str, tree: TreeLike, params: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
    """Write a tree in the documented layout (see the module docstring)."""
    with _h5py().File(path, "w") as f:
        _root(f, TREE_TYPE, meta)
        L = len(tree.leaf_names)
        f.attrs["n_leaves"] = L
        g = f.create_group("params")
        _mark(g, "hdtwd-params")
        _attrs(g, params)
        g = f.create_group("tree")
        _mark(g, "hdtwd-rooted-tree")
        _array(g, "parent", tree.parent)
        _array(g, "length", tree.length)
        _strings(g, "leaf_names", tree.leaf_names)
        if tree.parent.shape[0] == 2 * L - 1:
            ch = np.array(children_of(tree.parent)[L:], dtype=np.int64).reshape(-1, 2)
            _array(g, "children", ch)
        if tree.merge_height is not None:
            _array(g, "merge_height", tree.merge_height)
        if tree.feature_weights is not None:
            _array(g, "feature_weights", tree.feature_weights)
        if tree.denoiser is not None:
            _write_denoiser(g, tree.denoiser)
        if tree.haar_keep is not None:
            _array(g, "haar_keep", np.asarray(tree.haar_keep).astype(np.uint8))


def _write_denoiser(g: h5py.Group, denoiser: Any) -> None:
    d = g.create_group("denoise")
    _mark(d, "hdtwd-denoiser")
    d.attrs["log_counts"] = bool(denoiser.log_counts)
    _array(d, "mean", denoiser.mean)
    _array(d, "axes", denoiser.axes)
    _array(d, "covered", denoiser.covered.astype(np.uint8))


def read_tree(path: str) -> TreeRecord:
    """Read a tree file written by :func:`write_tree` (validated by :meth:`hdtwd_cli.Tree.read`)."""
    with _open(path, TREE_TYPE) as f, reading(path, "hdtwd tree file"):
        try:
            g = f["tree"]

            def field(name: str, kinds: str = "iuf") -> np.ndarray | None:
                return numeric(g[name][()], path, f"tree/{name}", kinds=kinds, ndim=1) if name in g else None

            return TreeRecord(
                parent=numeric(g["parent"][()], path, "tree/parent", kinds="iu", ndim=1),
                length=numeric(g["length"][()], path, "tree/length", ndim=1),
                leaf_names=_read_strings(g["leaf_names"]),
                merge_height=field("merge_height"),
                feature_weights=field("feature_weights"),
                denoiser=_read_denoiser(g["denoise"], path) if "denoise" in g else None,
                haar_keep=field("haar_keep", "iub"),
                metadata={k: v for k, v in f["params"].attrs.items() if not k.startswith("encoding")},
            )
        except KeyError as e:
            raise InputError(f"tree file lacks {e}", path) from None


def _read_denoiser(g: h5py.Group, path: str) -> DenoiserRecord:
    at = g.name.lstrip("/")
    return DenoiserRecord(
        mean=numeric(g["mean"][()], path, f"{at}/mean", ndim=1).astype(np.float64),
        axes=numeric(g["axes"][()], path, f"{at}/axes", ndim=2).astype(np.float64),
        log_counts=bool(g.attrs["log_counts"]),
        covered=numeric(g["covered"][()], path, f"{at}/covered", kinds="biu", ndim=1).astype(bool),
    )


def _check_denoiser(d: DenoiserRecord, m: int, path: str, at: str) -> None:
    """One finite mean and axis row per feature, or one line naming the file and the group."""
    ok = d.mean.shape == (m,) and d.axes.shape[0] == m and d.covered.shape == (m,)
    if not ok or not (np.all(np.isfinite(d.mean)) and np.all(np.isfinite(d.axes))):
        raise InputError(f"{at} must hold one finite mean and axis row for each of the {m} features", path)


def write_distances_h5(
    path: str,
    D: np.ndarray,
    row_names: list[str],
    col_names: list[str],
    meta: Mapping[str, Any],
) -> None:
    """Write a distance matrix with its sample names (see the module docstring)."""
    with _h5py().File(path, "w") as f:
        _root(f, DISTANCES_TYPE, meta)
        _array(f, "distances", D)
        _strings(f, "row_names", row_names)
        _strings(f, "col_names", col_names)


def write_distances_blocked(
    path: str,
    blocks: Iterable[tuple[int, np.ndarray]],
    shape: tuple[int, int],
    row_names: list[str],
    col_names: list[str],
    meta: Mapping[str, Any],
    dtype: str = "float64",
    progress: Callable[[int], None] | None = None,
) -> None:
    """Stream row blocks of a distance matrix into a chunked HDF5 dataset (memory: one block)."""
    with atomic_path(path) as tmp:
        with _h5py().File(tmp, "w") as f:
            _root(f, DISTANCES_TYPE, meta)
            ds = f.create_dataset(
                "distances",
                shape=shape,
                dtype=dtype,
                track_times=False,
                chunks=(min(shape[0], max(1, 2**20 // max(shape[1], 1))), shape[1]),
            )
            for i0, block in blocks:
                ds[i0 : i0 + block.shape[0]] = block
                if progress is not None:
                    progress(block.shape[0])
            _strings(f, "row_names", row_names)
            _strings(f, "col_names", col_names)
