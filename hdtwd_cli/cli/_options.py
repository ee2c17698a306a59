"""The command line's shared options, their translation into API arguments, and its error policy.

Option groups (tree learning, input reading, output verbosity) are declared once here and
attached to commands with :func:`command`; a command body receives them as one namespace
``o``. :func:`flag` is the only place where a Python argument becomes a flag in a message.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import hdtwd_cli.cli._help as _help
from hdtwd_cli._defaults import (
    AUTO_LANDMARKS_ABOVE,
    AVERAGE_LEAF_LENGTH,
    BANDWIDTHS,
    DEFAULT_EPS,
    DEFAULT_LANDMARKS,
    DEFAULT_SCALES,
    DIFFUSION_LEAF_LENGTH,
    EDGE_WEIGHTS,
    FEATURE_SPACES,
    JOINT_GAMMA,
    JOINT_ROUNDS,
    JOINT_SHARE,
    LANDMARK_METHODS,
    LEARNERS,
    LINKAGES,
    METRICS,
    PRESETS,
    TRANSFORMS,
    WEIGHTINGS,
)
from hdtwd_cli.errors import HdtwdError, InputError, ParameterError, Terminated

if TYPE_CHECKING:
    from hdtwd_cli import JointParams, TreeParams
    from hdtwd_cli._runtime.progress import Reporter

__all__ = [
    "command",
    "Options",
    "DEFAULTS",
    "flag",
    "tree_params",
    "joint_params",
    "stopped",
    "read_input",
    "feature_vectors",
    "set_threads",
    "Choice",
    "LINKAGE",
    "EDGE_WEIGHTS_CHOICE",
    "TREE",
    "INPUT",
    "OUTPUT",
    "THREADS",
    "JOINT",
]

_D = PRESETS["default"]


def Choice(name: str, values: tuple[str, ...]) -> type[Enum]:
    """A str Enum whose members are the allowed values of an option (typer shows them as choices)."""
    return Enum(name, {v: v for v in values}, type=str)  # type: ignore[return-value]


def _opt(kind: Any, *names: str, help: str, default: Any = None, **kw: Any) -> inspect.Parameter:
    """One keyword option, declared once for every command that has it."""
    annotation = Annotated[  # type: ignore[valid-type]
        kind | None if default is None else kind,
        typer.Option(
            *names, help=help, show_default=default is not None and default is not False and not kw.get("count"), **kw
        ),
    ]
    name = names[0].split("/")[0].lstrip("-").replace("-", "_")  # "--header/--no-header": header
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def _denoise_rank(value: str) -> str | int:
    """``--denoise``: ``auto`` or a rank >= 0."""
    if value == "auto":
        return value
    try:
        rank = int(value)
    except ValueError:
        rank = -1
    if rank < 0:
        raise typer.BadParameter(f"must be 'auto' or an integer >= 0, not {value!r}")
    return rank


LINKAGE = Choice("Linkage", LINKAGES)
EDGE_WEIGHTS_CHOICE = Choice("EdgeWeights", EDGE_WEIGHTS)

TREE = {
    p.name: p
    for p in (
        _opt(
            Choice("Preset", tuple(PRESETS)),
            "--preset",
            default="default",
            help="Named configuration: 'paper' reproduces the paper exactly; explicit options override it.",
        ),
        _opt(
            Choice("Learner", LEARNERS),
            "--learner",
            help="How the features' tree is learned: diffusion (the paper's operator, hyperbolic embedding and "
            "HD-LCA; the kernel, scale, linkage, edge-weight and landmark options) or average (average linkage on "
            f"the features' correlation distances) [default: {_D['learner']}].",
        ),
        _opt(
            float,
            "--eps",
            help="Kernel scale multiplier c. With --bandwidth median (the default and the paper) the kernel is "
            "exp(-d^2 / eps), eps = c x the median feature distance; with --bandwidth knn it is "
            "exp(-d^2 / (c s_j s_j')), s_j the distance from feature j to its k-th nearest feature "
            f"[default: {DEFAULT_EPS:g}; "
            f"{_D['landmark_eps']:g} on the landmark path].",
        ),
        _opt(int, "--scales", help=f"Largest diffusion scale K (K+1 dyadic scales) [default: {DEFAULT_SCALES}]."),
        _opt(
            Choice("Metric", METRICS),
            "--metric",
            help="Initial distance between feature columns: correlation (1 - Pearson's r across the samples), "
            f"cosine (the paper) or euclidean [default: {_D['metric']}].",
        ),
        _opt(
            LINKAGE,
            "--linkage",
            help=f"Agglomeration rule on the HD-LCA values (single = the paper's Alg. 1) [default: {_D['linkage']}].",
        ),
        _opt(
            EDGE_WEIGHTS_CHOICE,
            "--edge-weights",
            help="midpoint: geodesic-midpoint weights (the "
            f"paper); lca: hyperbolic distance between the HD-LCA points of child and parent [default: "
            f"{_D['edge_weights']}].",
        ),
        _opt(
            Choice("Bandwidth", BANDWIDTHS),
            "--bandwidth",
            help="Kernel bandwidth: median (eps = c x median, the "
            f"paper) or knn (self-tuning) [default: {_D['bandwidth']}].",
        ),
        _opt(
            Choice("Transform", TRANSFORMS),
            "--transform",
            help="Element-wise transform of the data before "
            f"everything [default: {_D['transform']}; with --tree: the tree's].",
        ),
        _opt(
            int,
            "--landmarks",
            metavar="N",
            help="Diffusion landmarks m' for large feature counts; 0 = the "
            f"exact m x m operator [default: exact up to {AUTO_LANDMARKS_ABOVE} features, then {DEFAULT_LANDMARKS}].",
        ),
        _opt(
            Choice("LandmarkMethod", LANDMARK_METHODS),
            "--landmark-method",
            help="random: feature columns drawn "
            "with --seed; kmeans: k-means centroids of the feature columns (slower, closer to the exact operator) "
            "[default: random].",
        ),
        _opt(
            Choice("FeatureSpace", FEATURE_SPACES),
            "--feature-space",
            help="The features' ambient space for the "
            "initial distance: data (their columns), svd (latent vectors: truncated SVD of the idf-weighted samples) "
            "or auto (svd when most pairs of features never share a sample, as words do; else data) "
            f"[default: {_D['feature_space']}].",
        ),
        _opt(int, "--feature-dims", help=f"Dimensions of the svd feature space [default: {_D['feature_dims']}]."),
        _opt(
            Path,
            "--feature-embedding",
            help="The features' vectors (word2vec/GloVe .txt/.vec, .npz with "
            "vectors+names, .npy with a .txt of names, .h5ad with features as rows), matched by name; overrides "
            "--feature-space.",
        ),
        _opt(
            Choice("Weighting", WEIGHTINGS),
            "--weighting",
            help=f"Feature weights applied before samples become histograms: none or idf [default: {_D['weighting']}].",
        ),
        _opt(
            float,
            "--leaf-length",
            metavar="LAMBDA",
            help="Lengthen every leaf edge by LAMBDA x the "
            "tree's mean leaf depth (adds LAMBDA x depth x L1 to the TWD) [default: automatic, (1 - e) / e with e the "
            f"fraction of the data's energy in --feature-dims latent dimensions (1 for the data columns), plus "
            f"{DIFFUSION_LEAF_LENGTH:g} (diffusion) or {AVERAGE_LEAF_LENGTH:g} (average)].",
        ),
        _opt(
            int,
            "--min-df",
            metavar="N",
            help="Features non-zero in fewer than N samples are not placed by "
            f"the diffusion: they hang from the tree's root [default: {_D['min_df']}].",
        ),
        _opt(
            int,
            "--max-features",
            metavar="N",
            help="Place at most N features (the most frequent) by the "
            f"diffusion; the rest hang from the root; 0 = no cap [default: {_D['max_features']}].",
        ),
        _opt(
            str,
            "--denoise",
            parser=_denoise_rank,
            metavar="auto|R",
            help="Replace each sample's values by their rank-R principal-"
            "component reconstruction (log1p(CP10k) for counts), clipped at 0, before they become histograms; fitted "
            "with the tree, stored in its .h5 and applied by --tree; 0 = off; auto = by the values' form where the "
            "features co-occur (cells): rank 50 for raw counts, their log1p and log-normalised values (scanpy's "
            "normalize_total + log1p), rank 20 for log-normalised values of a gene subset (highly variable genes), "
            "off otherwise (documents, scaled values); dense counts (under 30% zeros: bulk-like) learn the tree from "
            "the denoised rows and keep their own values; -v says what was chosen and why [default: auto].",
        ),
        _opt(int, "--seed", default=0, help="Random seed (recorded; used where randomness enters)."),
    )
}

INPUT = {
    p.name: p
    for p in (
        _opt(bool, "--transpose", default=False, help="The file stores features x samples."),
        _opt(
            bool,
            "--header/--no-header",
            help=".csv/.tsv: the first row is (is not) a header [default: by the layout; where the first row "
            "cannot be told apart from data, an error asks for one of them].",
        ),
        _opt(str, "--layer", metavar="NAME", help=".h5ad: read layers[NAME] instead of X."),
        _opt(bool, "--use-raw", default=False, help=".h5ad: read raw.X instead of X."),
        _opt(
            str,
            "--mask-var",
            metavar="COLUMN|none",
            help=".h5ad: use only the features the boolean column var[COLUMN] marks, as sc.pp.pca's mask_var "
            "(matched by name with --use-raw); none: every feature [default: highly_variable, where var has it].",
        ),
        _opt(
            Choice(
                "InputFormat", ("npy", "csv", "tsv", "npz", "mtx", "h5ad", "h5", "csv.gz", "tsv.gz", "mtx.gz", "biom")
            ),
            "--format",
            help="Format of DATA read from standard input (-) [default: sniffed from its bytes].",
        ),
        _opt(
            Choice("VarNames", ("gene_symbols", "gene_ids")),
            "--var-names",
            help="10x inputs (matrix directory, Cell Ranger .h5): feature names [default: gene_symbols].",
        ),
        _opt(
            str,
            "--genome",
            metavar="NAME",
            help="Cell Ranger .h5: read this genome (a Cell Ranger 2 file with several needs one; in a 3+ file, "
            "only its features) [default: all / the only one].",
        ),
    )
}

OUTPUT = {
    p.name: p
    for p in (
        _opt(bool, "--quiet", "-q", default=False, help="No progress bars or messages on stderr."),
        _opt(int, "--verbose", "-v", default=0, count=True, help="More detail on stderr."),
    )
}

THREADS = {
    p.name: p
    for p in (_opt(int, "--threads", min=1, help="Threads for BLAS and the distance kernel [default: all cores]."),)
}

#: The joint hierarchies' algorithms (``hdtwd_cli.joint._alternate.ALGORITHMS``, not imported at start-up).
JOINT_ALGORITHMS = ("filtered", "alternating")

JOINT = {
    p.name: p
    for p in (
        _opt(
            bool,
            "--joint",
            default=False,
            help="Learn the features' tree and a tree of the samples that inform each other (Lin, Coifman, "
            "Mishne & Talmon, NeurIPS 2025; docs/method.md section 13): the distances are the TWD on the joint "
            "features' tree, through its Haar filter (kept in its .h5 by --save-tree).",
        ),
        _opt(
            Choice("JointAlgorithm", JOINT_ALGORITHMS),
            "--joint-algorithm",
            help="With --joint: filtered (Algorithm 2, Haar filtering every round) or alternating (Algorithm 1, "
            "no filter) [default: filtered].",
        ),
        _opt(
            float,
            "--joint-share",
            metavar="THETA",
            help="With --joint: share of the Haar coefficients' total score the kept vectors carry "
            f"[default: {JOINT_SHARE:g}].",
        ),
        _opt(
            float,
            "--joint-gamma",
            metavar="GAMMA",
            help="With --joint: weight of the snowflake regulariser, a share of the TWD's median; 0 = the TWD "
            f"alone [default: {JOINT_GAMMA:g}].",
        ),
        _opt(
            int,
            "--joint-rounds",
            metavar="N",
            help=f"With --joint: at most N rounds after round 0 [default: {JOINT_ROUNDS}].",
        ),
        _opt(
            Path,
            "--samples-tree",
            metavar="PATH",
            help="With --joint: also save the samples' tree (leaves: the input's sample names, else s0, s1, ...): "
            ".h5, Newick (.nwk) or Nexus (.nex), by suffix.",
        ),
    )
}


@dataclass(frozen=True)
class Options:
    """The shared options as a command body receives them (``o``): typed, plain values (a choice is its
    string, not typer's Enum). The options of a group the command lacks keep these defaults. Each field is
    an option of :data:`TREE`, :data:`INPUT`, :data:`OUTPUT`, :data:`THREADS` or :data:`JOINT` (declared
    there, with its flag and help), with that option's default (tests/test_help.py checks both ways)."""

    # TREE: the tree learning
    preset: str = "default"
    learner: str | None = None
    eps: float | None = None
    scales: int | None = None
    metric: str | None = None
    linkage: str | None = None
    edge_weights: str | None = None
    bandwidth: str | None = None
    transform: str | None = None
    landmarks: int | None = None
    landmark_method: str | None = None
    feature_space: str | None = None
    feature_dims: int | None = None
    feature_embedding: Path | None = None
    weighting: str | None = None
    leaf_length: float | None = None
    min_df: int | None = None
    max_features: int | None = None
    denoise: str | int | None = None
    seed: int = 0
    # INPUT: reading DATA
    transpose: bool = False
    header: bool | None = None
    layer: str | None = None
    use_raw: bool = False
    mask_var: str | None = None
    format: str | None = None
    var_names: str | None = None
    genome: str | None = None
    # OUTPUT: what stderr shows
    quiet: bool = False
    verbose: int = 0
    # THREADS
    threads: int | None = None
    # JOINT: the joint hierarchies
    joint: bool = False
    joint_algorithm: str | None = None
    joint_share: float | None = None
    joint_gamma: float | None = None
    joint_rounds: int | None = None
    samples_tree: Path | None = None

    @classmethod
    def given(cls, values: dict[str, Any]) -> Options:
        """The options a command was called with (typer's values; an Enum becomes its string)."""
        return cls(**{name: _value(v) for name, v in values.items()})


#: Every option at its default: a body's ``o`` default, replaced by what :func:`command` passes.
DEFAULTS = Options()


def _panels(group: dict[str, inspect.Parameter], panel: str, **moved: str) -> dict[str, inspect.Parameter]:
    """Put the options of ``group`` in the ``--help`` panel ``panel`` (those named in ``moved`` in theirs)."""
    for name, p in group.items():
        p.annotation.__metadata__[0].rich_help_panel = moved.get(name, panel)
    return group


_panels(
    TREE, _help.TREE, landmarks=_help.PERFORMANCE, landmark_method=_help.PERFORMANCE, max_features=_help.PERFORMANCE
)
_panels(INPUT, _help.INPUT)
_panels(OUTPUT, _help.OUTPUT)
_panels(THREADS, _help.PERFORMANCE)
_panels(JOINT, _help.TREE, samples_tree=_help.OUTPUT)

#: Flags whose name is not the Python argument's (``--flag`` for ``flag``, ``_`` as ``-``, otherwise).
_FLAGS = {
    "n_neighbors": "--knn",
    "format": "--format",
    "var_names": "--var-names",
    "header": "--header/--no-header",
    "X": "DATA",
    "params": "the tree options",
    "feature_names": "the feature names",
    "reference_feature_names": "the reference's feature names",
    "adata": "DATA",
    "methods": "--methods",
    "sample_names": "the sample names",
    "algorithm": "--joint-algorithm",
    "share": "--joint-share",
    "gamma": "--joint-gamma",
    "max_rounds": "--joint-rounds",
}


def flag(argument: str) -> str:
    """The command line's name for a Python argument of the API."""
    return _FLAGS.get(argument, "--" + argument.replace("_", "-"))


def _value(v: Any) -> Any:
    return v.value if isinstance(v, Enum) else v


def tree_params(o: Options, tree_given: bool = False) -> TreeParams | None:
    """The tree options as :class:`TreeParams` (``None`` with ``--tree``, where none of them may be given)."""
    given = {
        n: getattr(o, n) for n in TREE if n not in ("preset", "seed", "feature_embedding") and getattr(o, n) is not None
    }
    if tree_given:
        learned_only = [flag(n) for n in given if n != "transform"] + (
            ["--feature-embedding"] if o.feature_embedding is not None else []
        )
        if learned_only:
            raise ParameterError(f"{', '.join(learned_only)} only apply when the tree is learned (no {{arg}})", "tree")
        return None
    from hdtwd_cli import TreeParams

    return TreeParams.from_preset(o.preset, seed=o.seed, **given)


def joint_params(o: Options, tree: Path | None, reference: Path | None, unseen: str) -> JointParams | None:
    """The joint options as :class:`JointParams` (``None`` without ``--joint``, where none of them may be
    given); ``--joint`` learns both trees, so it excludes a stored tree and what only applies to one."""
    given = [flag(n) for n in JOINT if n != "joint" and getattr(o, n) is not None]
    if not o.joint:
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise ParameterError(f"{', '.join(given)} only {verb} to the joint hierarchies ({{arg}})", "joint")
        return None
    clash = {"tree": tree, "reference": reference, "feature_embedding": o.feature_embedding}
    for name, value in {**clash, "unseen": None if unseen == "error" else unseen}.items():
        if value is not None:
            raise ParameterError("learns both trees from DATA: not with {b}", "joint", b=name)
    from hdtwd_cli import JointParams

    chosen: dict[str, Any] = {"algorithm": o.joint_algorithm, "share": o.joint_share, "gamma": o.joint_gamma}
    chosen["max_rounds"] = o.joint_rounds
    return JointParams(**{k: v for k, v in chosen.items() if v is not None})


def feature_vectors(o: Options) -> Any:
    """``--feature-embedding`` read (``None`` when not given)."""
    from hdtwd_cli.io import read_feature_embedding

    path = o.feature_embedding
    return None if path is None else read_feature_embedding(str(path))


def read_input(data: Path, o: Options, rep: Reporter, obs_keys: tuple[str, ...] = (), keep_adata: bool = False) -> Any:
    """Read DATA (a file or ``-``) with the input options."""
    from hdtwd_cli.io import read_matrix, read_stdin_matrix

    kw: dict[str, Any] = {
        "transpose": o.transpose,
        "layer": o.layer,
        "use_raw": o.use_raw,
        "obs_keys": obs_keys,
        "keep_adata": keep_adata,
        "var_names": o.var_names,
        "genome": o.genome,
        "header": o.header,
    }
    with rep.stage(f"reading {data.name or 'standard input'}"):
        if str(data) == "-":
            md = read_stdin_matrix(sys.stdin.buffer, o.format, **kw)
        elif o.format is not None:
            raise ParameterError("applies to standard input ('-') only; files are read by suffix", "format", data)
        else:
            md = read_matrix(data, **kw)
    rep.info(f"{data}: {md.shape[0]} samples x {md.shape[1]} features" + (" (sparse)" if md.is_sparse else ""))
    from hdtwd_cli.cli._mask import apply_mask

    masked = apply_mask(md, o.mask_var, str(data))
    if masked:
        rep.info(masked)
    return md


def set_threads(threads: int | None) -> None:
    """``--threads``: cap numba's and BLAS's threads."""
    if threads:
        import numba
        from threadpoolctl import threadpool_limits

        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
        threadpool_limits(threads)


#: The one line a run prints when numba compiles kernels it has not cached yet (its first run on this path).
COMPILING = "hdtwd: compiling the numba kernels once, about 10 s; later runs load them from the cache"


def _announce_compilation() -> None:
    """The first-run line, for a person at a terminal (as the progress bars): a pipeline's or a script's
    stderr keeps its one line per error."""
    if sys.stderr.isatty():
        sys.stderr.write(COMPILING + "\n")
        sys.stderr.flush()


def _warn_to_stderr(
    message: Any, category: type, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    sys.stderr.write(f"hdtwd: warning: {message}\n")


def _run(fn: Callable[..., Any], kwargs: dict[str, Any], verbose: int, default_path: Any) -> Any:
    """Run a command body; user errors become one stderr line and an exit code, never a traceback."""
    from hdtwd_cli._runtime.simd import prefer_wide_vectors_on_load

    prefer_wide_vectors_on_load()  # applied when numba is first imported (the process is ours)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            warnings.filterwarnings("ignore", category=FutureWarning)
            # Python's own default ignores these debugging aids; one surfaced when SIGTERM cut numba's
            # first compilation short (an import's .pyc left open): not the user's business
            warnings.filterwarnings("ignore", category=ResourceWarning)
            warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
            warnings.showwarning = _warn_to_stderr
            return fn(**kwargs)
    except HdtwdError as e:
        path = e.path or (str(default_path) if isinstance(e, InputError) and default_path is not None else None)
        text = e.worded(flag)
        sys.stderr.write(f"hdtwd: error: {path + ': ' if path else ''}{text}\n")
        raise typer.Exit(e.exit_code) from None
    except BrokenPipeError:  # the reader of our stdout went away (e.g. `| head`): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(141) from None
    except (KeyboardInterrupt, Terminated) as e:
        raise typer.Exit(stopped(e)) from None
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


def stopped(e: KeyboardInterrupt | Terminated) -> int:
    """Write the one line of an interrupt (Ctrl-C: exit 130) or a termination signal (SIGTERM 143, SIGHUP
    129) and return the exit code: inside a command and around the whole application alike."""
    if isinstance(e, Terminated):
        sys.stderr.write(f"hdtwd: terminated ({e}); no output written\n")
        return e.exit_code
    sys.stderr.write("hdtwd: interrupted; no output written\n")
    return 130


def command(*groups: dict[str, inspect.Parameter], exclude: tuple[str, ...] = ()) -> Callable[[Callable], Callable]:
    """Give a command the options of ``groups`` (as one namespace ``o``) and the error policy.

    The body is called as ``fn(<its own parameters>, o=Options(<group options>))`` (:class:`Options`); an
    :class:`~hdtwd_cli.errors.InputError` without a file is about the command's DATA argument.
    """

    def deco(fn: Callable) -> Callable:
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "o"]
        extra = [p for g in groups for n, p in g.items() if n not in exclude]

        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> Any:
            o = Options.given({p.name: kwargs.pop(p.name) for p in extra})
            if not o.quiet:
                from hdtwd_cli._runtime.jit import on_first_compile

                on_first_compile(_announce_compilation)
            default_path = kwargs.get("data", kwargs.get("embedding"))
            return _run(fn, dict(kwargs, o=o), o.verbose, default_path)

        # arguments first, in their order; then the options panel by panel (stable: as declared within one);
        # typer passes every parameter by name, so all are keyword-only and any order is a valid signature
        params = sorted(
            (p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own + extra),
            key=lambda p: (not _help.is_argument(p), _help.rank(p)),
        )
        wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        del wrapper.__wrapped__
        return wrapper

    return deco
