"""The ``hdtwd`` command line: a thin typer layer over the numerical stages and the I/O layer.

Each command reads its inputs through :mod:`hdtwd_cli.io`, calls pure functions, and writes
results atomically. Errors a user can cause print one line ``hdtwd: error: FILE: problem`` and
exit with the code documented in :mod:`hdtwd_cli.errors`.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
import warnings
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import numpy as np
import typer

from . import __version__
from .distance import (
    TreeVectors,
    check_histograms,
    dense_output_bytes,
    distance_blocks,
    nearest_neighbours,
    pairwise_l1,
    twd_vectors,
)
from .errors import HdtwdError, InputError, OutputError, ResourceError
from .evaluation import BASELINES, DEFAULT_K, evaluate, is_count_data, summarise
from .io import (
    atomic_path,
    check_output_path,
    fingerprint,
    read_embedding,
    read_matrix,
    read_stdin_matrix,
    read_tree_file,
    write_distances,
    write_embedding,
    write_newick_file,
    write_tree,
)
from .io.output import KNN_SUFFIXES, distance_suffix, write_distances_blocked, write_knn
from .neighbors import knn_distance_matrix, scanpy_neighbors_uns, umap_connectivities
from .pipeline import (
    DEFAULT_EPS,
    DEFAULT_SCALES,
    PRESETS,
    TRANSFORMS,
    apply_transform,
    resolve_params,
    TreeParams,
    align_to_tree,
    check_tree_memory,
    FeatureSpace,
    decode_from_embedding,
    embed as embed_features,
    extend_tree,
    feature_space,
    finish_tree,
    learn_tree,
)
from .features import FEATURE_SPACES, WEIGHTINGS
from .io.vectors import read_feature_embedding
from .landmarks import AUTO_LANDMARKS_ABOVE, DEFAULT_LANDMARKS, LANDMARK_METHODS
from .progress import Reporter
from .tree import EDGE_WEIGHTS, LINKAGES

app = typer.Typer(
    name="hdtwd",
    help=(
        "Learn the hidden hierarchy of a data set's FEATURES and turn it into a tree-Wasserstein "
        "distance between SAMPLES (Lin, Coifman, Mishne & Talmon, ICLR 2025). "
        "Input matrices have one row per sample (use --transpose otherwise)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _choices(name: str, values: tuple[str, ...]) -> type[Enum]:
    """A str Enum whose members are the allowed values of an option (typer shows them as choices)."""
    return Enum(name, {v: v for v in values}, type=str)  # type: ignore[return-value]


Metric = _choices("Metric", ("cosine", "euclidean"))
Linkage = _choices("Linkage", LINKAGES)
EdgeWeights = _choices("EdgeWeights", EDGE_WEIGHTS)
Bandwidth = _choices("Bandwidth", ("median", "knn"))
Transform = _choices("Transform", TRANSFORMS)
Preset = _choices("Preset", tuple(PRESETS))
DType = _choices("DType", ("float64", "float32"))
LandmarkMethod = _choices("LandmarkMethod", LANDMARK_METHODS)
FeatureSpaceChoice = _choices("FeatureSpaceChoice", FEATURE_SPACES)
WeightingChoice = _choices("WeightingChoice", WEIGHTINGS)
Unseen = _choices("Unseen", ("error", "root"))
InputFormat = _choices("InputFormat", ("npy", "csv", "tsv", "npz", "mtx", "h5ad"))
OutputFormat = _choices("OutputFormat", ("npy", "csv", "tsv", "h5"))


# ---------------------------------------------------------------- shared options
DataArg = Annotated[Path, typer.Argument(
    help="Data matrix, rows = samples: .npy .csv .tsv .npz .mtx .h5ad, or - for standard input.",
    show_default=False)]
FormatOpt = Annotated[Optional[InputFormat], typer.Option(
    "--format", help="Format of DATA read from standard input (-) [default: sniffed from its bytes].",
    show_default=False)]
TransposeOpt = Annotated[bool, typer.Option("--transpose", help="The file stores features x samples.")]
LayerOpt = Annotated[Optional[str], typer.Option("--layer", help=".h5ad: read layers[NAME] instead of X.",
                                                 metavar="NAME")]
UseRawOpt = Annotated[bool, typer.Option("--use-raw", help=".h5ad: read raw.X instead of X.")]
EpsOpt = Annotated[Optional[float], typer.Option(
    "--eps", help=f"Kernel scale multiplier c: eps = c x median feature distance [default: {DEFAULT_EPS:g}; "
                  f"{PRESETS['default']['landmark_eps']:g} on the landmark path].",
    min=0.0, show_default=False)]
ScalesOpt = Annotated[Optional[int], typer.Option(
    "--scales", help=f"Largest diffusion scale K (K+1 dyadic scales) [default: {DEFAULT_SCALES}].",
    min=0, show_default=False)]
MetricOpt = Annotated[Optional[Metric], typer.Option(
    "--metric", help="Initial distance between feature columns [default: cosine].", show_default=False)]
LinkageOpt = Annotated[Optional[Linkage], typer.Option(
    "--linkage", help="Agglomeration rule on the HD-LCA values (single = the paper's Alg. 1) "
                      f"[default: {PRESETS['default']['linkage']}].", show_default=False)]
EdgeWeightsOpt = Annotated[Optional[EdgeWeights], typer.Option(
    "--edge-weights", help="midpoint: geodesic-midpoint weights (the paper); lca: hyperbolic distance between "
                           f"the HD-LCA points of child and parent [default: {PRESETS['default']['edge_weights']}].",
    show_default=False)]
BandwidthOpt = Annotated[Optional[Bandwidth], typer.Option(
    "--bandwidth", help="Kernel bandwidth: median (eps = c x median, the paper) or knn (self-tuning) "
                        f"[default: {PRESETS['default']['bandwidth']}].", show_default=False)]
TransformOpt = Annotated[Optional[Transform], typer.Option(
    "--transform", help="Element-wise transform of the data before everything "
                        f"[default: {PRESETS['default']['transform']}; with --tree: the tree's].",
    show_default=False)]
LandmarksOpt = Annotated[Optional[int], typer.Option(
    "--landmarks", help=f"Diffusion landmarks m' for large feature counts; 0 = the exact m x m operator "
                        f"[default: exact up to {AUTO_LANDMARKS_ABOVE} features, then {DEFAULT_LANDMARKS}].",
    min=0, metavar="N", show_default=False)]
LandmarkMethodOpt = Annotated[LandmarkMethod, typer.Option(
    "--landmark-method", help="random: feature columns drawn with --seed; kmeans: k-means centroids of the "
                              "feature columns (slower, closer to the exact operator).")]
FeatureSpaceOpt = Annotated[Optional[FeatureSpaceChoice], typer.Option(
    "--feature-space", help="The features' ambient space for the initial distance: data (their columns), svd "
                            "(latent vectors: truncated SVD of the idf-weighted samples) or auto (svd when most "
                            "pairs of features never share a sample, as words do; else data) "
                            f"[default: {PRESETS['default']['feature_space']}].", show_default=False)]
FeatureDimsOpt = Annotated[Optional[int], typer.Option(
    "--feature-dims", help=f"Dimensions of the svd feature space [default: {PRESETS['default']['feature_dims']}].",
    min=1, show_default=False)]
FeatureEmbeddingOpt = Annotated[Optional[Path], typer.Option(
    "--feature-embedding", help="The features' vectors (word2vec/GloVe .txt/.vec, .npz with vectors+names, .npy "
                                "with a .txt of names, .h5ad with features as rows), matched by name; "
                                "overrides --feature-space.", show_default=False)]
WeightingOpt = Annotated[Optional[WeightingChoice], typer.Option(
    "--weighting", help="Feature weights applied before samples become histograms: none or idf "
                        f"[default: {PRESETS['default']['weighting']}].", show_default=False)]
LeafLengthOpt = Annotated[Optional[float], typer.Option(
    "--leaf-length", help="Lengthen every leaf edge by LAMBDA x the tree's mean leaf depth (adds LAMBDA x depth "
                          "x L1 to the TWD) [default: automatic, (1 - e) / e with e the fraction of the data's "
                          "energy in --feature-dims latent dimensions].",
    min=0.0, metavar="LAMBDA", show_default=False)]
MinDfOpt = Annotated[Optional[int], typer.Option(
    "--min-df", help="Features non-zero in fewer than N samples are not placed by the diffusion: they hang from "
                     f"the tree's root [default: {PRESETS['default']['min_df']}].", min=1, metavar="N",
    show_default=False)]
MaxFeaturesOpt = Annotated[Optional[int], typer.Option(
    "--max-features", help="Place at most N features (the most frequent) by the diffusion; the rest hang from the "
                           f"root; 0 = no cap [default: {PRESETS['default']['max_features']}].", min=0, metavar="N",
    show_default=False)]
PresetOpt = Annotated[Preset, typer.Option(
    "--preset", help="Named configuration: 'paper' reproduces the paper exactly; explicit options override it.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed (recorded; used where randomness enters).")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or messages on stderr.")]
VerboseOpt = Annotated[int, typer.Option("--verbose", "-v", count=True, help="More detail on stderr.")]


def _warn_to_stderr(message: Any, category: type, filename: str, lineno: int, file: Any = None,
                    line: Any = None) -> None:
    sys.stderr.write(f"hdtwd: warning: {message}\n")


F = TypeVar("F", bound=Callable[..., Any])


def _handle_errors(fn: F) -> F:
    """Turn user errors into one stderr line and an exit code; never a traceback for them."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        verbose = kwargs.get("verbose", 0)
        old = warnings.showwarning
        warnings.showwarning = _warn_to_stderr
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always")
                warnings.filterwarnings("ignore", category=DeprecationWarning)
                warnings.filterwarnings("ignore", category=FutureWarning)
                warnings.showwarning = _warn_to_stderr
                return fn(*args, **kwargs)
        except HdtwdError as e:
            sys.stderr.write(f"hdtwd: error: {e}\n")
            raise typer.Exit(e.exit_code) from None
        except BrokenPipeError:  # the reader of our stdout went away (e.g. `| head`): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(141) from None
        except KeyboardInterrupt:
            sys.stderr.write("hdtwd: interrupted; no output written\n")
            raise typer.Exit(130) from None
        except MemoryError:
            sys.stderr.write("hdtwd: error: out of memory; try fewer features or a smaller --scales\n")
            raise typer.Exit(4) from None
        except (typer.Exit, typer.Abort):
            raise
        except Exception as e:  # a bug: say so in one line, traceback on -v
            if verbose:
                traceback.print_exc()
            sys.stderr.write(f"hdtwd: internal error: {type(e).__name__}: {e} (run with -v for the traceback)\n")
            raise typer.Exit(1) from None
        finally:
            warnings.showwarning = old

    return wrapper  # type: ignore[return-value]


def _params(preset: "Preset", eps: float | None, scales: int | None, metric: "Metric | None",
            linkage: "Linkage | None", bandwidth: "Bandwidth | None", transform: "Transform | None",
            seed: int, edge_weights: "EdgeWeights | None" = None, landmarks: int | None = None,
            landmark_method: "LandmarkMethod | None" = None, feature_space: Any = None,
            feature_dims: int | None = None, weighting: Any = None,
            leaf_length: float | None = None, min_df: int | None = None,
            max_features: int | None = None) -> tuple[TreeParams, str]:
    def val(e: Any) -> Any:
        return None if e is None else e.value

    return resolve_params(
        preset.value, seed, eps=None if eps is None else float(eps), scales=scales, metric=val(metric),
        linkage=val(linkage), bandwidth=val(bandwidth), transform=val(transform), edge_weights=val(edge_weights),
        landmarks=landmarks, landmark_method=val(landmark_method), feature_space=val(feature_space),
        feature_dims=feature_dims, weighting=val(weighting),
        leaf_length=None if leaf_length is None else float(leaf_length), min_df=min_df, max_features=max_features)


def _feature_embedding(path: Path | None) -> tuple[np.ndarray, list[str]] | None:
    return None if path is None else read_feature_embedding(str(path))


def _read(data: Path, transpose: bool, layer: str | None, use_raw: bool, rep: Reporter,
          fmt: "InputFormat | None" = None, obs_keys: tuple[str, ...] = ()):
    with rep.stage(f"reading {data.name or 'standard input'}"):
        if str(data) == "-":
            md = read_stdin_matrix(sys.stdin.buffer, None if fmt is None else fmt.value, transpose=transpose,
                                   layer=layer, use_raw=use_raw, obs_keys=obs_keys)
        else:
            if fmt is not None:
                raise InputError("--format applies to standard input ('-') only; files are read by suffix", data)
            md = read_matrix(data, transpose=transpose, layer=layer, use_raw=use_raw, obs_keys=obs_keys)
    rep.info(f"{data}: {md.shape[0]} samples x {md.shape[1]} features"
             + (" (sparse)" if md.is_sparse else ""))
    return md


T_ = TypeVar("T_")


def _stage(fn: Callable[[], T_], path: Any) -> T_:
    """Run a numerical stage; its ValueErrors are problems of the input data, named with the file."""
    try:
        return fn()
    except ValueError as e:
        raise InputError(str(e), path) from None


def _meta(md: Any, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {
        "hdtwd_version": __version__,
        "input_path": os.path.basename(md.path),
        "input_fingerprint": fingerprint(md.X, md.feature_names),
        "n_samples": md.shape[0],
        "n_features": md.shape[1],
    }
    meta.update(extra or {})
    return meta


# ---------------------------------------------------------------- commands
@app.command()
@_handle_errors
def embed(
    data: DataArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="Embedding file to write (.h5).",
                                         show_default=False)],
    preset: PresetOpt = Preset.default,
    eps: EpsOpt = None,
    scales: ScalesOpt = None,
    metric: MetricOpt = None,
    bandwidth: BandwidthOpt = None,
    transform: TransformOpt = None,
    landmarks: LandmarksOpt = None,
    landmark_method: LandmarkMethodOpt = LandmarkMethod.random,
    feature_space_: FeatureSpaceOpt = None,
    feature_dims: FeatureDimsOpt = None,
    feature_embedding: FeatureEmbeddingOpt = None,
    weighting: WeightingOpt = None,
    leaf_length: LeafLengthOpt = None,
    min_df: MinDfOpt = None,
    max_features: MaxFeaturesOpt = None,
    seed: SeedOpt = 0,
    transpose: TransposeOpt = False,
    layer: LayerOpt = None,
    use_raw: UseRawOpt = False,
    fmt: FormatOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = 0,
) -> None:
    """Feature diffusion operator -> multi-scale hyperbolic embedding, saved as HDF5."""
    rep = Reporter(quiet, verbose)
    check_output_path(output, [data])
    params, tf = _params(preset, eps, scales, metric, None, bandwidth, transform, seed,
                         landmarks=landmarks, landmark_method=landmark_method, feature_space=feature_space_,
                         feature_dims=feature_dims, weighting=weighting, leaf_length=leaf_length, min_df=min_df,
                         max_features=max_features)
    if str(output) == "-":
        raise InputError("the embedding is HDF5: give a file name with -o")
    vectors = _feature_embedding(feature_embedding)
    md = _read(data, transpose, layer, use_raw, rep, fmt)
    space = _stage(lambda: feature_space(apply_transform(md.X, tf), md.feature_names, params, vectors), data)
    X, names, dropped = space.matrix, space.names, space.unplaced
    if len(names) < 2:
        raise InputError("fewer than two features can be placed (non-zero columns, or vectors in the feature "
                         "embedding): nothing to embed", data)
    have = available_memory()
    need = _stage(lambda: check_tree_memory(X.shape[0], X.shape[1], getattr(X, "nnz", None),
                                            params, have, str(data), ("diffusion", "embedding")), data)
    rep.note(f"the embedding needs about {need / 1e9:.2f} GB (estimate; {have / 1e9:.1f} GB available)")
    op, emb = _stage(lambda: embed_features(X, params, rep), data)
    with rep.stage(f"writing {output.name}"), atomic_path(output) as tmp:
        weights = None if space.weights is None else [space.weights[n] for n in names + dropped]
        write_embedding(tmp, emb, op, names, dropped, {**params.as_dict(), "transform": tf, "preset": preset.value,
                                                       "feature_source": space.source, "latent_energy": space.shared},
                        _meta(md), weights)
    rep.info(f"wrote {output}")


@app.command("decode-tree")
@_handle_errors
def decode_tree_cmd(
    embedding: Annotated[Path, typer.Argument(help="Embedding file written by 'hdtwd embed'.",
                                              show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="Tree file to write (.h5).",
                                         show_default=False)],
    newick: Annotated[Optional[Path], typer.Option("--newick", help="Also write the tree as Newick.",
                                                   show_default=False)] = None,
    linkage: Annotated[Optional[Linkage], typer.Option(
        "--linkage", help="Agglomeration rule on the HD-LCA values (single = the paper's Alg. 1) "
                          "[default: the embedding's preset].", show_default=False)] = None,
    edge_weights: Annotated[Optional[EdgeWeights], typer.Option(
        "--edge-weights", help="midpoint (the paper) or lca (HD-LCA heights) [default: the embedding's preset].",
        show_default=False)] = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = 0,
) -> None:
    """HD-LCA binary tree (Alg. 1), saved as HDF5 and optionally Newick."""
    rep = Reporter(quiet, verbose)
    check_output_path(output, [embedding])
    if newick is not None:
        check_output_path(newick, [embedding, output])
    with rep.stage(f"reading {embedding.name}"):
        stored = read_embedding(str(embedding))
    preset = str(stored.params.get("preset", "default"))
    cfg = PRESETS.get(preset, PRESETS["default"])
    rule = linkage.value if linkage is not None else cfg["linkage"]
    weights = edge_weights.value if edge_weights is not None else cfg["edge_weights"]
    n_landmarks = int(stored.diffusion.get("n_landmarks", 0))
    tp = TreeParams(scales=stored.embedding.n_scales - 1, linkage=rule, landmarks=n_landmarks)
    have = available_memory()
    need = check_tree_memory(0, len(stored.feature_names), None, tp, have, str(embedding), ("tree",))
    rep.note(f"decoding the tree needs about {need / 1e9:.2f} GB (estimate; {have / 1e9:.1f} GB available)")
    tree = decode_from_embedding(stored.embedding, stored.feature_names, rep, rule, weights,
                                 tie_ranks=n_landmarks == 0)
    dropped = list(stored.diffusion.get("dropped", []))
    fw = stored.diffusion.get("feature_weights")
    space = FeatureSpace(None, stored.feature_names, dropped,  # type: ignore[arg-type]
                         None if fw is None else dict(zip(stored.feature_names + dropped, np.asarray(fw).tolist())),
                         str(stored.params.get("feature_source", "data")),
                         float(stored.params.get("latent_energy", 1.0)))
    lam = stored.params.get("leaf_length")  # absent: the automatic rule, from the stored energy
    tree = finish_tree(tree, space, TreeParams(leaf_length=None if lam is None else float(lam)))
    meta = {k: (v.item() if hasattr(v, "item") else v) for k, v in stored.meta.items()}
    params = dict(stored.params)
    params.update({"linkage": rule, "edge_weights": weights, "eps_used": stored.diffusion.get("eps"),
                   "sigma": stored.diffusion.get("sigma"), "unplaced_features": len(dropped),
                   "mean_leaf_depth": tree.metadata["mean_leaf_depth"]})
    with atomic_path(output) as tmp:
        write_tree(tmp, tree, params, meta)
    if newick is not None:
        write_newick_file(str(newick), tree)
    rep.info(f"tree with {tree.n_leaves} leaves, depth {int(tree.depth().max())}; wrote {output}")


@app.command()
@_handle_errors
def distance(
    data: DataArg,
    output: Annotated[Path, typer.Option("--output", "-o",
                                         help="Distance matrix to write: .npy, .h5, .csv or .tsv.",
                                         show_default=False)],
    tree: Annotated[Optional[Path], typer.Option(
        "--tree", help="Use this tree (.h5 from hdtwd, or Newick) instead of learning one.",
        show_default=False)] = None,
    save_tree: Annotated[Optional[Path], typer.Option(
        "--save-tree", help="Also save the learned tree (.h5).", show_default=False)] = None,
    newick: Annotated[Optional[Path], typer.Option(
        "--newick", help="Also save the learned tree as Newick.", show_default=False)] = None,
    dtype: Annotated[DType, typer.Option("--dtype", help="Storage type of the result.")] = DType.float64,
    reference: Annotated[Optional[Path], typer.Option(
        "--reference", help="Cross distances: DATA (queries, rows) against these reference samples (columns); "
                            "needs --tree.", show_default=False)] = None,
    knn: Annotated[Optional[int], typer.Option(
        "--knn", help="Keep only each sample's K nearest neighbours, as a sparse graph (-o .npz or .h5ad, "
                      "scanpy's neighbours layout); memory O(n K).", min=1, metavar="K", show_default=False)] = None,
    key_added: Annotated[str, typer.Option(
        "--key-added", help="With --knn into .h5ad: obsp[KEY_distances], obsp[KEY_connectivities], uns[KEY].")] =
        "hdtwd",
    threads: Annotated[Optional[int], typer.Option(
        "--threads", help="Threads for BLAS and the distance kernel [default: all cores].", min=1,
        show_default=False)] = None,
    output_format: Annotated[Optional[OutputFormat], typer.Option(
        "--output-format", help="Format of the result [default: from the suffix of -o; tsv for -o -].",
        show_default=False)] = None,
    preset: PresetOpt = Preset.default,
    eps: EpsOpt = None,
    scales: ScalesOpt = None,
    metric: MetricOpt = None,
    linkage: LinkageOpt = None,
    edge_weights: EdgeWeightsOpt = None,
    bandwidth: BandwidthOpt = None,
    transform: TransformOpt = None,
    landmarks: LandmarksOpt = None,
    landmark_method: LandmarkMethodOpt = LandmarkMethod.random,
    feature_space_: FeatureSpaceOpt = None,
    feature_dims: FeatureDimsOpt = None,
    feature_embedding: FeatureEmbeddingOpt = None,
    weighting: WeightingOpt = None,
    leaf_length: LeafLengthOpt = None,
    min_df: MinDfOpt = None,
    max_features: MaxFeaturesOpt = None,
    unseen: Annotated[Unseen, typer.Option(
        "--unseen", help="With --tree: data features with mass that are not leaves of the tree are an error, or "
                         "hang from the tree's root (edge = its mean leaf depth, plus the leaf lengthening).")] =
        Unseen.error,
    seed: SeedOpt = 0,
    transpose: TransposeOpt = False,
    layer: LayerOpt = None,
    use_raw: UseRawOpt = False,
    fmt: FormatOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = 0,
) -> None:
    """Pairwise tree-Wasserstein distances between samples (learns the tree unless --tree)."""
    rep = Reporter(quiet, verbose)
    _set_threads(threads)
    check_output_path(output, [data, tree, reference])
    if reference is not None and tree is None:
        raise InputError("--reference maps both sets onto one stored tree: give --tree too")
    if knn is not None:
        if reference is not None:
            raise InputError("--knn and --reference exclude each other")
        if str(output) == "-" or Path(str(output)).suffix.lower() not in KNN_SUFFIXES:
            raise OutputError("--knn writes a sparse graph: use -o FILE.npz or -o FILE.h5ad", output)
    elif str(output) != "-" and output_format is None:
        distance_suffix(str(output))
    for extra in (save_tree, newick):
        if extra is not None:
            check_output_path(extra, [data, tree, output])
    if tree is not None:
        given = [name for name, v in (("--eps", eps), ("--scales", scales), ("--metric", metric),
                                      ("--linkage", linkage), ("--bandwidth", bandwidth),
                                      ("--edge-weights", edge_weights), ("--landmarks", landmarks),
                                      ("--feature-space", feature_space_), ("--feature-dims", feature_dims),
                                      ("--feature-embedding", feature_embedding), ("--weighting", weighting),
                                      ("--leaf-length", leaf_length), ("--min-df", min_df),
                                      ("--max-features", max_features),
                                      ("--save-tree", save_tree), ("--newick", newick)) if v is not None]
        if given:
            raise InputError(f"{', '.join(given)} only apply when the tree is learned (no --tree)")
    elif unseen is not Unseen.error:
        raise InputError("--unseen applies to a stored tree (--tree)")
    vectors = _feature_embedding(feature_embedding)
    md = _read(data, transpose, layer, use_raw, rep, fmt)
    ref = None if reference is None else _read(reference, transpose, layer, use_raw, rep)
    if tree is not None:
        with rep.stage(f"reading {tree.name}"):
            T = read_tree_file(str(tree))
        stored_tf = str(T.metadata.get("transform", "none"))
        tf = stored_tf if transform is None else transform.value
        if tf != stored_tf:
            raise InputError(f"the tree was learned with --transform {stored_tf}, not {tf}", tree)
        tree_meta: dict[str, Any] = {"tree_source": os.path.basename(str(tree)), "transform": tf,
                                     "unseen": unseen.value}
        X = apply_transform(md.X, tf)
        if unseen is Unseen.root:
            T = extend_tree(T, list(md.feature_names) + ([] if ref is None else list(ref.feature_names)))
    else:
        params, tf = _params(preset, eps, scales, metric, linkage, bandwidth, transform, seed, edge_weights,
                             landmarks, landmark_method, feature_space_, feature_dims, weighting, leaf_length, min_df,
                             max_features)
        X = apply_transform(md.X, tf)
        _stage(lambda: check_histograms(X), data)  # before the tree is learned, not after
        T = _stage(lambda: learn_tree(X, md.feature_names, params, rep, str(data), available_memory(), vectors),
                   data)
        T.metadata.update({"transform": tf, "preset": preset.value})
        tree_meta = {"tree_source": "learned", "params": dict(T.metadata)}
    meta = _meta(md, tree_meta)
    if save_tree is not None:
        with atomic_path(save_tree) as tmp:
            write_tree(tmp, T, T.metadata, meta)
    if newick is not None:
        write_newick_file(str(newick), T)
    X = align_to_tree(X, md.feature_names, T, str(data))
    meta["dtype"] = dtype.value
    col_names = md.sample_names
    if ref is not None:
        Xr = align_to_tree(apply_transform(ref.X, tf), ref.feature_names, T, str(reference))
        Y, Yq = _stage(lambda: twd_vectors(T, Xr, X, dtype.value), reference)
        col_names = ref.sample_names
        meta["reference_fingerprint"] = fingerprint(ref.X, ref.feature_names)
    elif knn is not None:  # vectors computed block by block inside the search: memory O(n k)
        src = _stage(lambda: TreeVectors(T, X, dtype.value), data)
        _write_knn(output, src, knn, key_added, md, meta, rep)
        return
    else:
        Y, Yq = _stage(lambda: twd_vectors(T, X, None, dtype.value), data)
    n_rows = Y.shape[0] if Yq is None else Yq.shape[0]
    fmt = None if output_format is None else output_format.value
    suffix = "." + fmt if fmt else Path(str(output)).suffix.lower()
    block = max(1, min(n_rows, (256 << 20) // max(1, Y.shape[0] * 8)))
    if str(output) != "-" and suffix in (".h5", ".hdf5"):
        with rep.stage(f"tree-Wasserstein distances ({n_rows} x {Y.shape[0]}, blocked)", n_rows) as adv:
            write_distances_blocked(str(output), distance_blocks(Y, Yq, block, dtype.value),
                                    (n_rows, Y.shape[0]), md.sample_names, col_names, meta, dtype.value, adv)
        rep.info(f"wrote {output} ({n_rows} x {Y.shape[0]} {dtype.value}, in blocks of {block} rows)")
        return
    need = dense_output_bytes(n_rows, Y.shape[0], Y.shape[1], dtype.value)
    have = available_memory()
    if need > 0.8 * have:
        raise ResourceError(
            f"the {n_rows} x {Y.shape[0]} distance matrix needs about {_human_bytes(need)} but "
            f"{_human_bytes(have)} are available; write it in blocks with -o FILE.h5, or keep only "
            "each sample's nearest neighbours with --knn K -o FILE.npz|FILE.h5ad", output)
    with rep.stage(f"tree-Wasserstein distances ({n_rows} x {Y.shape[0]})"):
        D = pairwise_l1(Y, Yq, dtype.value)
    write_distances(str(output), D, md.sample_names, col_names, meta, fmt)
    rep.info(f"wrote {output} ({D.shape[0]} x {D.shape[1]} {D.dtype})")


def _human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def available_memory() -> int:
    """Bytes of memory available now (``HDTWD_MEMORY_LIMIT`` overrides, e.g. for tests)."""
    env = os.environ.get("HDTWD_MEMORY_LIMIT")
    if env:
        return int(float(env))
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def _write_knn(output: Path, Y: TreeVectors, k: int, key: str, md: Any, meta: dict, rep: Reporter) -> None:
    """kNN graph of the TWD into .npz or .h5ad (scanpy's neighbours layout)."""
    with rep.stage(f"{k} nearest neighbours of {Y.n} samples", Y.n) as adv:
        try:
            idx, dist = nearest_neighbours(Y, k, 2048, adv)
        except ValueError as e:
            raise InputError(str(e), md.path) from None
    Dk = knn_distance_matrix(idx, dist)
    conn = umap_connectivities(idx, dist)
    uns = scanpy_neighbors_uns(key, k, {"hdtwd_version": __version__, "hdtwd_params": json.dumps(meta, default=str)})
    adata = None
    if Path(str(output)).suffix.lower() == ".h5ad":
        import anndata

        if md.path.lower().endswith(".h5ad") and md.path != "<stdin>":
            adata = anndata.read_h5ad(md.path)
        else:
            import pandas as pd

            adata = anndata.AnnData(X=md.X, obs=pd.DataFrame(index=md.sample_names),
                                    var=pd.DataFrame(index=md.feature_names))
    write_knn(str(output), Dk, conn, uns, key, adata)
    rep.info(f"wrote {output}: {k} neighbours per sample, {Dk.nnz} distances")


def _parse_list(text: str, kind: type, option: str) -> list:
    try:
        vals = [kind(v) for v in text.replace(" ", "").split(",") if v != ""]
    except ValueError:
        raise InputError(f"{option} expects a comma-separated list of {kind.__name__}s, got {text!r}") from None
    if not vals:
        raise InputError(f"{option} is empty")
    return vals


def _read_labels(spec: str, md: Any, data: Path) -> np.ndarray:
    if spec.startswith("obs:"):
        col = spec[4:]
        if col not in md.obs:
            raise InputError(f"obs column {col!r} was not read", data)
        return np.asarray(md.obs[col])
    path = Path(spec)
    if not path.exists():
        raise InputError("no such labels file", path)
    if path.is_dir():
        raise InputError("is a directory, not a labels file", path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise InputError("labels file is not UTF-8 text", path) from None
    while lines and lines[-1].strip() == "":
        lines.pop()
    labels = np.array([ln.strip() for ln in lines])
    if labels.shape[0] != md.shape[0]:
        raise InputError(f"{labels.shape[0]} labels for {md.shape[0]} samples in {data}", path)
    if np.any(labels == ""):
        raise InputError(f"empty label on line {int(np.flatnonzero(labels == '')[0]) + 1}", path)
    return labels


def _set_threads(threads: int | None) -> None:
    if not threads:
        return
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    threadpool_limits(threads)


@app.command()
@_handle_errors
def classify(
    data: DataArg,
    labels: Annotated[str, typer.Option("--labels", help="obs:COLUMN of an .h5ad, or a file with one label per line.",
                                        metavar="obs:COLUMN|FILE", show_default=False)],
    splits: Annotated[int, typer.Option("--splits", help="Number of random train/test splits.", min=1)] = 5,
    test_size: Annotated[float, typer.Option("--test-size", help="Fraction of samples in each test set.",
                                             min=0.0, max=1.0)] = 0.3,
    k: Annotated[str, typer.Option("--k", help="Comma-separated k of the kNN classifier.")] =
        ",".join(map(str, DEFAULT_K)),
    eps: Annotated[Optional[str], typer.Option(
        "--eps", help=f"Kernel scale multiplier c, or a comma-separated grid chosen by inner CV on the training rows "
                      f"[default: {DEFAULT_EPS:g}].", show_default=False)] = None,
    scales: Annotated[Optional[str], typer.Option(
        "--scales", help=f"Largest scale K, or a comma-separated grid [default: {DEFAULT_SCALES}].",
        show_default=False)] = None,
    metric: MetricOpt = None,
    preset: PresetOpt = Preset.default,
    linkage: LinkageOpt = None,
    edge_weights: EdgeWeightsOpt = None,
    bandwidth: BandwidthOpt = None,
    transform: TransformOpt = None,
    landmarks: LandmarksOpt = None,
    landmark_method: LandmarkMethodOpt = LandmarkMethod.random,
    feature_space_: FeatureSpaceOpt = None,
    feature_dims: FeatureDimsOpt = None,
    feature_embedding: FeatureEmbeddingOpt = None,
    weighting: WeightingOpt = None,
    leaf_length: LeafLengthOpt = None,
    min_df: MinDfOpt = None,
    max_features: MaxFeaturesOpt = None,
    methods: Annotated[str, typer.Option(
        "--methods", help=f"Comma-separated subset of hdtwd,{','.join(BASELINES)} [default: hdtwd, cosine, "
                          "euclidean, l1, then tfidf-l1,tfidf-cosine for counts, pca for other values].",
        show_default=False)] = "",
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write the full report as JSON.",
                                                     show_default=False)] = None,
    per_k: Annotated[bool, typer.Option("--per-k", help="Show the mean accuracy for every k.")] = False,
    threads: Annotated[Optional[int], typer.Option("--threads", help="Threads for BLAS and the distance kernel.",
                                                   min=1, show_default=False)] = None,
    seed: SeedOpt = 0,
    transpose: TransposeOpt = False,
    layer: LayerOpt = None,
    use_raw: UseRawOpt = False,
    fmt: FormatOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = 0,
) -> None:
    """kNN accuracy of hdtwd and baselines on the same train/test splits (the paper's protocol)."""
    from rich.console import Console
    from rich.table import Table

    rep = Reporter(quiet, verbose)
    if json_out is not None:
        check_output_path(json_out, [data])
    ks = sorted(set(_parse_list(k, int, "--k")))
    if ks[0] < 1:
        raise InputError("--k values must be >= 1")
    base, tf = _params(preset, None, None, metric, linkage, bandwidth, transform, seed, edge_weights,
                       landmarks, landmark_method, feature_space_, feature_dims, weighting, leaf_length, min_df,
                       max_features)
    eps_grid = _parse_list(eps, float, "--eps") if eps else [base.eps]
    if eps:
        base = base.replace(landmark_eps=None)  # the grid applies to the landmark path too
    scales_grid = _parse_list(scales, int, "--scales") if scales else [base.scales]
    if min(eps_grid) <= 0 or min(scales_grid) < 0:
        raise InputError("--eps values must be > 0 and --scales values >= 0")
    chosen = _parse_list(methods, str, "--methods") if methods else []
    unknown = [m for m in chosen if m not in ("hdtwd",) + BASELINES]
    if unknown:
        raise InputError(f"unknown method(s) {', '.join(unknown)}; choose from hdtwd, {', '.join(BASELINES)}")
    if not 0 < test_size < 1:
        raise InputError("--test-size must be between 0 and 1")
    _set_threads(threads)
    obs_keys = (labels[4:],) if labels.startswith("obs:") else ()
    vectors = _feature_embedding(feature_embedding)
    md = _read(data, transpose, layer, use_raw, rep, fmt, obs_keys)
    y = _read_labels(labels, md, data)
    if not chosen:
        chosen = ["hdtwd", "cosine", "euclidean", "l1"] + (
            ["tfidf-l1", "tfidf-cosine"] if is_count_data(md.X) else ["pca"])
    n_classes = len(np.unique(y))
    n_train = md.shape[0] - int(round(test_size * md.shape[0]))
    if ks[-1] > n_train:
        raise InputError(f"k = {ks[-1]} exceeds the {n_train} training samples per split", data)
    grid = len(eps_grid) * len(scales_grid) > 1
    steps = splits * len(chosen) + (splits * len(eps_grid) * 3 if grid and "hdtwd" in chosen else 0)
    with rep.stage("splits x methods", steps) as adv:
        try:
            results = evaluate(apply_transform(md.X, tf), md.feature_names, y, chosen, eps_grid, scales_grid, base, ks,
                               splits, test_size, seed, progress=adv, embedding=vectors)
        except ValueError as e:
            raise InputError(str(e), data) from None
    report = summarise(results, {
        "n_samples": md.shape[0], "n_features": md.shape[1], "n_classes": n_classes, "splits": splits,
        "test_size": test_size, "seed": seed, "k": ks, "hdtwd_version": __version__, "transform": tf,
        "preset": preset.value,
        "input_fingerprint": fingerprint(md.X, md.feature_names),
    })
    table = Table(title=f"kNN accuracy (%), {splits} x {1 - test_size:.0%}/{test_size:.0%} splits, "
                        f"{md.shape[0]} samples, {n_classes} classes")
    table.add_column("method")
    table.add_column("best k", justify="right")
    table.add_column("accuracy", justify="right")
    if per_k:
        for kk in ks:
            table.add_column(f"k={kk}", justify="right")
    for name, res in report["methods"].items():
        row = [name, str(res["best_k"]), f"{res['mean']:.1f} ± {res['std']:.1f}"]
        if per_k:
            row += [f"{res['per_k'][str(kk)]:.1f}" for kk in ks]
        table.add_row(*row)
    Console(file=sys.stdout, highlight=False, width=None if sys.stdout.isatty() else 160).print(table)
    if json_out is not None:
        with atomic_path(json_out) as tmp:
            Path(tmp).write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"hdtwd {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version_callback, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """hdtwd: tree-Wasserstein distances with a latent feature hierarchy."""


def main() -> None:
    """Console entry point: usage errors become one line on stderr, like every other error."""
    try:
        rc = app(standalone_mode=False)
    except KeyboardInterrupt:
        sys.stderr.write("hdtwd: interrupted; no output written\n")
        sys.exit(130)
    except Exception as e:  # typer's bundled click raises its usage errors here
        if not (hasattr(e, "exit_code") and hasattr(e, "format_message")):
            raise
        if type(e).__name__ == "NoArgsIsHelpError":  # bare `hdtwd`: the help, not an error
            sys.stdout.write(e.format_message().rstrip() + "\n")
            sys.exit(0)
        sub = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
        hint = f"hdtwd {sub} --help" if sub in _COMMANDS else "hdtwd --help"
        sys.stderr.write(f"hdtwd: error: {e.format_message()} (see '{hint}')\n")
        sys.exit(int(e.exit_code))
    sys.exit(rc if isinstance(rc, int) else 0)


_COMMANDS = ("embed", "decode-tree", "distance", "classify")


if __name__ == "__main__":  # pragma: no cover
    main()
