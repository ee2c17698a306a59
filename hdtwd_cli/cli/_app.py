"""The ``hdtwd`` command line: a thin shell over the Python API (:mod:`hdtwd_cli._api`).

Each command reads its inputs through :mod:`hdtwd_cli.io`, makes one API call and writes the
result atomically. Shared options and the error policy live in :mod:`hdtwd_cli.cli._options`:
errors a user can cause print one line ``hdtwd: error: FILE: problem`` and exit with the code
documented in :mod:`hdtwd_cli.errors`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

import hdtwd_cli.cli._help as _help
from hdtwd_cli._defaults import DEFAULT_K, OT_BUDGET
from hdtwd_cli._runtime.memory import keep_freed_memory, without_huge_pages
from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli._version import __version__
from hdtwd_cli.cli._help import HelpCommand, HelpGroup, epilog
from hdtwd_cli.cli._options import (
    DEFAULTS,
    EDGE_WEIGHTS_CHOICE,
    INPUT,
    JOINT,
    LINKAGE,
    OUTPUT,
    THREADS,
    TREE,
    Choice,
    Options,
    command,
    feature_vectors,
    joint_params,
    read_input,
    set_threads,
    stopped,
    tree_params,
)
from hdtwd_cli.errors import OutputError, ParameterError, Terminated
from hdtwd_cli.evaluate import methods_help

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
    rich_markup_mode="rich",
    cls=HelpGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)

DataArg = Annotated[
    Path,
    typer.Argument(
        help="Data matrix, rows = samples: .npy, .csv/.tsv (also .gz), .npz, .mtx (also .gz), .h5ad, .biom, a 10x "
        "directory (matrix.mtx.gz, features.tsv.gz, barcodes.tsv.gz) or Cell Ranger .h5, or - for standard input.",
        show_default=False,
    ),
]


def _out(help: str) -> Any:
    return typer.Option("--output", "-o", help=help, show_default=False, rich_help_panel=_help.OUTPUT)


def _in(panel: str, *names: str, **kw: Any) -> Any:
    """A command's own option, in the ``--help`` panel ``panel``."""
    return typer.Option(*names, rich_help_panel=panel, **kw)


@app.command(cls=HelpCommand, epilog=epilog("embed"))
@command(TREE, INPUT, OUTPUT)
def embed(
    data: DataArg, output: Annotated[Path, _out("Embedding file to write (.h5).")], o: Options = DEFAULTS
) -> None:
    """Feature diffusion operator -> multi-scale hyperbolic embedding, saved as HDF5."""
    from hdtwd_cli._api import embed as api_embed
    from hdtwd_cli.io import check_output_path

    rep = Reporter(o.quiet, o.verbose)
    check_output_path(output, [data])
    if str(output) == "-":
        raise OutputError("the embedding is HDF5: give a file name with -o")
    params = tree_params(o)
    md = read_input(data, o, rep)
    fe = api_embed(md.X, md.feature_names, params=params, feature_embedding=feature_vectors(o), progress=rep)
    with rep.stage(f"writing {output.name}"):
        fe.write(str(output), md.record(), {"preset": o.preset})
    rep.info(f"wrote {output}")


@app.command("decode-tree", cls=HelpCommand, epilog=epilog("decode-tree"))
@command(OUTPUT)
def decode_tree(
    embedding: Annotated[
        Path,
        typer.Argument(help="Embedding file written by 'hdtwd embed'.", show_default=False),
    ],
    output: Annotated[Path, _out("Tree file to write (.h5).")],
    newick: Annotated[
        Path | None, _in(_help.OUTPUT, "--newick", help="Also write the tree as Newick.", show_default=False)
    ] = None,
    linkage: Annotated[
        LINKAGE | None,  # type: ignore[valid-type]
        _in(
            _help.TREE,
            "--linkage",
            help="Agglomeration rule on the HD-LCA values [default: the embedding's].",
            show_default=False,
        ),
    ] = None,
    edge_weights: Annotated[
        EDGE_WEIGHTS_CHOICE | None,  # type: ignore[valid-type]
        _in(
            _help.TREE,
            "--edge-weights",
            help="midpoint (the paper) or lca (HD-LCA heights) [default: the embedding's].",
            show_default=False,
        ),
    ] = None,
    o: Options = DEFAULTS,
) -> None:
    """The HD-LCA binary tree of a stored embedding (the paper's Algorithm 1), saved as HDF5 and optionally Newick."""
    from hdtwd_cli._api import decode_tree as api_decode
    from hdtwd_cli.cli._output import kept_elsewhere
    from hdtwd_cli.io import check_output_path, read_embedding

    rep = Reporter(o.quiet, o.verbose)
    check_output_path(output, [embedding])
    if newick is not None:
        check_output_path(newick, [embedding, output])
    with rep.stage(f"reading {embedding.name}"):
        stored = read_embedding(str(embedding))
    rule = linkage and linkage.value  # type: ignore[attr-defined]
    weights = edge_weights and edge_weights.value  # type: ignore[attr-defined]
    tree = api_decode(stored, linkage=rule, edge_weights=weights, progress=rep)
    meta = {k: (v.item() if hasattr(v, "item") else v) for k, v in stored.meta.items()}
    tree.write(str(output), meta)
    if newick is not None:
        with kept_elsewhere(output):
            tree.write(str(newick))
    rep.info(f"tree with {tree.n_leaves} leaves, depth {int(tree.depth().max())}; wrote {output}")


@app.command(cls=HelpCommand, epilog=epilog("distance"))
@command(TREE, INPUT, THREADS, OUTPUT, JOINT)
def distance(
    data: DataArg,
    output: Annotated[Path, _out("Distance matrix to write: .npy, .h5, .csv or .tsv (-o - : standard output).")],
    tree: Annotated[
        Path | None,
        _in(
            _help.TREE,
            "--tree",
            help="Use this tree (.h5 from hdtwd, or Newick) instead of learning one.",
            show_default=False,
        ),
    ] = None,
    save_tree: Annotated[
        Path | None,
        _in(
            _help.OUTPUT,
            "--save-tree",
            help="Also save the learned tree (with --joint: the joint features' tree): .h5 (everything), or "
            ".nex (Nexus for FigTree / DendroPy: feature weights and the samples' mass on every node).",
            show_default=False,
        ),
    ] = None,
    newick: Annotated[
        Path | None, _in(_help.OUTPUT, "--newick", help="Also save the learned tree as Newick.", show_default=False)
    ] = None,
    dtype: Annotated[
        Choice("DType", ("float64", "float32")),  # type: ignore[valid-type]
        _in(_help.OUTPUT, "--dtype", help="Storage type of the result."),
    ] = "float64",
    reference: Annotated[
        Path | None,
        _in(
            _help.INPUT,
            "--reference",
            help="Cross distances: DATA (queries, rows) against these reference samples (columns); needs --tree.",
            show_default=False,
        ),
    ] = None,
    knn: Annotated[
        int | None,
        _in(
            _help.DISTANCE,
            "--knn",
            help="Keep each sample's K nearest neighbours, the sample itself included (scanpy's n_neighbors), "
            "as a sparse graph (-o .npz, or .h5ad in sc.pp.neighbors' layout); memory O(n K).",
            metavar="K",
            show_default=False,
        ),
    ] = None,
    key_added: Annotated[
        str | None,
        _in(
            _help.OUTPUT,
            "--key-added",
            help="With --knn into .h5ad: obsp[KEY_distances], obsp[KEY_connectivities], uns[KEY] "
            "[default: obsp['distances'], obsp['connectivities'], uns['neighbors'], as scanpy].",
            show_default=False,
        ),
    ] = None,
    store_vectors: Annotated[
        bool | None,
        _in(
            _help.OUTPUT,
            "--store-vectors/--no-store-vectors",
            help="With --knn into .h5ad: store the TWD vectors as obsm['X_hdtwd'] "
            "[default: when they take at most 1 GB].",
            show_default=False,
        ),
    ] = None,
    output_format: Annotated[
        Choice("OutputFormat", ("npy", "csv", "tsv", "h5")) | None,  # type: ignore[valid-type]
        _in(
            _help.OUTPUT,
            "--output-format",
            help="Format of the result [default: from the suffix of -o; tsv for -o -].",
            show_default=False,
        ),
    ] = None,
    knn_method: Annotated[
        Choice("KnnMethod", ("exact", "nndescent", "pynndescent", "auto")),  # type: ignore[valid-type]
        _in(
            _help.DISTANCE,
            "--knn-method",
            help="With --knn: exact search, nndescent (hdtwd's NN-descent candidates re-ranked by the exact "
            "TWD: exact distances, approximate neighbour sets; the same for --seed at any thread count "
            "or cluster), pynndescent (pynndescent's candidates, the same re-ranking; needs pynndescent "
            "and the tree vectors in memory), or auto: nndescent above 20,000 samples, exact below "
            "[default: auto].",
            show_default=False,
        ),
    ] = None,
    scheduler: Annotated[
        str | None,
        _in(
            _help.PERFORMANCE,
            "--scheduler",
            envvar="DASK_SCHEDULER_ADDRESS",
            metavar="ADDRESS",
            help="Run the --knn search (exact or nndescent), or all pairs into -o FILE.zarr, as tasks on this "
            "dask.distributed scheduler (e.g. tcp://10.0.0.1:8786), waiting for it as long as Dask's "
            "distributed.comm.timeouts.connect (30 s unless set).",
            show_envvar=True,
            show_default=False,
        ),
    ] = None,
    unseen: Annotated[
        Choice("Unseen", ("error", "root")),  # type: ignore[valid-type]
        _in(
            _help.TREE,
            "--unseen",
            help="With --tree: data features with mass that are not leaves of the tree are an error, or "
            "hang from the tree's root (edge = its mean leaf depth, plus the leaf lengthening).",
        ),
    ] = "error",
    o: Options = DEFAULTS,
) -> None:
    """Pairwise tree-Wasserstein distances between samples (learns the tree unless --tree).

    --joint learns the features' tree together with a tree of the samples (the joint hierarchies)."""
    from hdtwd_cli._api import connect, distance_vectors
    from hdtwd_cli.cli._mask import apply_mask
    from hdtwd_cli.cli._output import DistanceOutputs
    from hdtwd_cli.io import read_matrix

    rep = Reporter(o.quiet, o.verbose)
    set_threads(o.threads)
    outs = DistanceOutputs(
        output,
        output_format and output_format.value,
        knn,
        knn_method and knn_method.value,
        key_added,
        store_vectors,
        scheduler,
        save_tree,
        newick,
        o.samples_tree,
    ).checked(data, tree, reference)
    joint = joint_params(o, tree, reference, unseen.value)
    params = tree_params(o, tree_given=tree is not None)
    md = read_input(data, o, rep, keep_adata=outs.h5ad)
    ref = None if reference is None else read_matrix(reference, o.transpose, o.layer, o.use_raw, header=o.header)
    if ref is not None:
        apply_mask(ref, o.mask_var, str(reference))
    client = connect(scheduler)
    given, hierarchy = _given_tree(tree, joint, md, params, knn, rep)
    dv = distance_vectors(
        md.X,
        given,
        None if ref is None else ref.X,
        feature_names=md.feature_names,
        reference_feature_names=None if ref is None else ref.feature_names,
        params=None if joint else params,
        feature_embedding=feature_vectors(o),
        transform=None if joint else o.transform,
        unseen=unseen.value,
        n_neighbors=knn,
        dtype=dtype.value,
        progress=rep,
    )
    samples = None if hierarchy is None else hierarchy.samples_tree
    rep.info(outs.write(dv, md, ref, preset=o.preset, seed=o.seed, client=client, reporter=rep, samples=samples))


def _given_tree(tree: Path | None, joint: Any, md: Any, params: Any, knn: int | None, rep: Reporter) -> tuple:
    """The tree ``distance`` maps the samples onto, and the joint hierarchy: ``--tree`` read; with ``--joint``
    (``joint``: its :class:`JointParams`), :func:`hdtwd_cli.learn_joint`'s features' tree, whose Haar filter the
    standard route applies (its distances, bit for bit: every output, the kNN graph included, is computed
    from it); else ``None`` (learned by :func:`hdtwd_cli.distance_vectors`)."""
    from hdtwd_cli import Tree
    from hdtwd_cli._api import check_k, learn_joint

    if joint is None:
        return (None if tree is None else Tree.read(str(tree))), None
    if knn is not None:
        check_k(knn, md.X.shape[0])  # before the rounds, not after
    hierarchy = learn_joint(
        md.X,
        md.feature_names,
        sample_names=md.sample_names,
        params=params,
        joint=joint,
        with_distances=False,  # they come from the features' tree below, in -o's layout
        progress=rep,
    )
    return hierarchy.features_tree, hierarchy


def _parse_list(text: str | None, kind: type, argument: str) -> list | None:
    if text is None:
        return None
    try:
        vals = [kind(v) for v in text.replace(" ", "").split(",") if v != ""]
    except ValueError:
        raise ParameterError(f"expects a comma-separated list of {kind.__name__}s, got {text!r}", argument) from None
    if not vals:
        raise ParameterError("is empty", argument)
    return vals


@app.command(cls=HelpCommand, epilog=epilog("classify"))
@command(TREE, INPUT, THREADS, OUTPUT, exclude=("eps", "scales"))
def classify(
    data: DataArg,
    labels: Annotated[
        str,
        _in(
            _help.INPUT,
            "--labels",
            help="obs:COLUMN of an .h5ad, or a file with one label per line.",
            metavar="obs:COLUMN|FILE",
            show_default=False,
        ),
    ],
    splits: Annotated[int, _in(_help.EVALUATION, "--splits", help="Number of random train/test splits.")] = 5,
    test_size: Annotated[
        float, _in(_help.EVALUATION, "--test-size", help="Fraction of samples in each test set, in (0, 1).")
    ] = 0.3,
    k: Annotated[str, _in(_help.EVALUATION, "--k", help="Comma-separated k of the kNN classifier.")] = ",".join(
        map(str, DEFAULT_K)
    ),
    eps: Annotated[
        str | None,
        _in(
            _help.TREE,
            "--eps",
            help="Kernel scale multiplier c, or a comma-separated grid chosen by inner CV on the training rows "
            "[default: 1].",
            show_default=False,
        ),
    ] = None,
    scales: Annotated[
        str | None,
        _in(
            _help.TREE, "--scales", help="Largest scale K, or a comma-separated grid [default: 7].", show_default=False
        ),
    ] = None,
    methods: Annotated[
        str | None,
        _in(
            _help.EVALUATION,
            "--methods",
            help=methods_help() + " [default: hdtwd, star, cosine, euclidean, l1, then tfidf-l1,tfidf-cosine "
            "for counts, pca unless the features rarely co-occur].",
            show_default=False,
        ),
    ] = None,
    ot_budget: Annotated[
        int,
        _in(
            _help.EVALUATION,
            "--ot-budget",
            help="Transport variables (support pairs) of the exact-OT programs per split: ot and flowtree "
            "are scored on the seeded test rows that fit, the fitted trees on the training pairs that fit "
            "(listed in the JSON report; about 1e-7 s each); a method that fits too few is skipped, its row "
            "says why.",
        ),
    ] = OT_BUDGET,
    json_out: Annotated[
        Path | None, _in(_help.OUTPUT, "--json", help="Write the full report as JSON.", show_default=False)
    ] = None,
    per_k: Annotated[bool, _in(_help.OUTPUT, "--per-k", help="Show the mean accuracy for every k.")] = False,
    plot: Annotated[
        Path | None,
        _in(
            _help.OUTPUT,
            "--plot",
            help="Also draw accuracy against k per method (.png, .svg, .pdf; needs matplotlib).",
            show_default=False,
        ),
    ] = None,
    o: Options = DEFAULTS,
) -> None:
    """kNN accuracy of hdtwd and baselines on the same train/test splits (the paper's protocol)."""
    from hdtwd_cli._api import chosen_methods
    from hdtwd_cli._api import classify as api_classify
    from hdtwd_cli.io import atomic_path, read_labels

    rep = Reporter(o.quiet, o.verbose)
    opts = _classify_options(data, json_out, plot, k=k, eps=eps, scales=scales, methods=methods)
    params = tree_params(o)
    set_threads(o.threads)
    md = read_input(data, o, rep, (labels[4:],) if labels.startswith("obs:") else ())
    y = read_labels(labels, md)
    chosen = chosen_methods(md.X, opts.methods)
    grid = len(opts.eps or [1]) * len(opts.scales or [1])
    with rep.stage("splits x methods", splits * len(chosen) + (splits * grid * 3 if grid > 1 else 0)) as adv:
        report = api_classify(
            md.X,
            y,
            md.feature_names,
            methods=chosen,
            k=opts.k,
            splits=splits,
            test_size=test_size,
            eps=opts.eps,
            scales=opts.scales,
            params=params,
            feature_embedding=feature_vectors(o),
            seed=o.seed,
            progress=adv,
            ot_budget=ot_budget,
        )
    report.update({"preset": o.preset, "input_fingerprint": md.record()["input_fingerprint"]})
    _print_report(report, per_k)
    if json_out is not None:
        with atomic_path(json_out) as tmp:
            Path(tmp).write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    if opts.picture is not None:
        opts.picture.save(opts.picture.classify_report(report), str(plot))


@dataclass(frozen=True)
class _ClassifyOptions:
    """``classify``'s own options, parsed and checked."""

    picture: Any
    k: list[int]
    eps: list[float] | None
    scales: list[int] | None
    methods: list[str] | None


def _classify_options(
    data: Path,
    json_out: Path | None,
    plot: Path | None,
    *,
    k: str,
    eps: str | None,
    scales: str | None,
    methods: str | None,
) -> _ClassifyOptions:
    """``classify``'s option checks, before any input is read: the outputs' paths (not the input, not each
    other; a picture's format and matplotlib) and the comma-separated lists (``k``, ``eps``, ``scales``,
    ``methods``; names are checked against the registry by :func:`hdtwd_cli._api.chosen_methods`)."""
    from hdtwd_cli.cli._plot import check_picture
    from hdtwd_cli.io import check_output_path

    if json_out is not None:
        check_output_path(json_out, [data])
    return _ClassifyOptions(
        picture=None if plot is None else check_picture(plot, [data, json_out], "plot"),
        k=_parse_list(k, int, "k") or [],  # never empty: a given text holds a value or is refused
        eps=_parse_list(eps, float, "eps"),
        scales=_parse_list(scales, int, "scales"),
        methods=_parse_list(methods, str, "methods"),
    )


def _print_report(report: dict, per_k: bool) -> None:
    """The report as a table on stdout: per method its best k and mean +- std, or why it was skipped; the
    caption gives the rows ot / flowtree scored and hdtwd's margins over star and the best competitor tree."""
    from rich.console import Console
    from rich.table import Table

    ks = report["k"]
    table = Table(
        title=f"kNN accuracy (%), {report['splits']} x {1 - report['test_size']:.0%}/"
        f"{report['test_size']:.0%} splits, {report['n_samples']} samples, {report['n_classes']} classes"
    )
    for name, justify in (("method", "left"), ("best k", "right"), ("accuracy", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for kk in ks if per_k else []:
        table.add_column(f"k={kk}", justify="right")
    notes = []
    for name, res in report["methods"].items():
        if res.get("status", "ok") != "ok":
            table.add_row(name, "-", res["status"], *(["-"] * len(ks) if per_k else []))
            continue
        table.add_row(
            name,
            str(res["best_k"]),
            f"{res['mean']:.1f} ± {res['std']:.1f}",
            *([f"{res['per_k'][str(kk)]:.1f}" for kk in ks] if per_k else []),
        )
        rows, of = res["params"].get("test_rows"), res["params"].get("test_rows_of")
        if rows is not None and sum(rows) < sum(of):
            paired = res["params"].get("same_rows", {}).get("hdtwd")
            notes.append(
                f"{name}: scored on {sum(rows)} of the {sum(of)} test rows (--ot-budget {res['params']['budget']})"
                + (f", where hdtwd scores {paired['mean']:.1f} ± {paired['std']:.1f}" if paired else "")
            )
    gain = report.get("margins", {})
    if "over_star" in gain:
        notes.append(f"hdtwd - star: {gain['over_star']:+.1f} points")
    if "over_best_competitor_tree" in gain:
        notes.append(
            f"hdtwd - best competitor tree ({gain['best_competitor_tree']}): "
            f"{gain['over_best_competitor_tree']:+.1f} points"
        )
    if notes:
        table.caption = "; ".join(notes)
    Console(file=sys.stdout, highlight=False, width=None if sys.stdout.isatty() else 160).print(table)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"hdtwd {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """hdtwd: tree-Wasserstein distances with a latent feature hierarchy."""


from hdtwd_cli.cli._plot import plot_app  # noqa: E402 - the plot commands, one module

app.add_typer(plot_app)
_COMMANDS = ("embed", "decode-tree", "distance", "classify", "plot")


def _install_signal_handlers() -> None:
    import signal

    from hdtwd_cli.errors import terminated_by, termination_received

    def terminate(signum: int, frame: Any) -> None:
        raise terminated_by(signum)

    def unraisable(info: Any) -> None:  # a Terminated dropped inside a C callback: check_terminated re-raises it
        # once a signal has arrived, objects it cut short (an LLVM engine numba was compiling) may fail in
        # their __del__: noise after the one-line message, not the user's business
        if not isinstance(info.exc_value, Terminated) and not termination_received():
            sys.__unraisablehook__(info)

    sys.unraisablehook = unraisable
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, terminate)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _exit(code: int) -> None:
    """End the process with ``code`` once its work is done, without tearing the interpreter down.

    The ``atexit`` handlers run and standard output and error are flushed, as at a normal exit;
    what is skipped is the final garbage collection of every module (numba, LLVM, SciPy), work of
    no use once the result is written. Every
    output file is closed and renamed before this point. Where a flush fails (a closed pipe), the
    normal exit reports it; under a profiler or a tracer (cProfile, a debugger) the exit is the
    normal one, so that they can report.
    """
    import atexit
    import os

    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)  # CPython's; absent elsewhere: the normal exit
    if run_exitfuncs is None or sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        sys.exit(code)
    os._exit(code)


def main() -> None:
    """Console entry point: usage errors become one line on stderr, like every other error.

    SIGTERM and SIGHUP raise :class:`~hdtwd_cli.errors.Terminated` (temporary files are removed,
    exit 143 / 129); SIGXFSZ is ignored so that a file-size limit makes the write fail cleanly
    (an OutputError, the earlier output kept) instead of killing the process. The allocator keeps the
    memory the command frees for its next blocks (:func:`~hdtwd_cli._runtime.memory.keep_freed_memory`) and
    NumPy's arrays stay in base pages (:func:`~hdtwd_cli._runtime.memory.without_huge_pages`).
    The process ends through :func:`_exit`.
    """
    _install_signal_handlers()
    keep_freed_memory()
    without_huge_pages()
    try:
        rc = app(standalone_mode=False)
    except (KeyboardInterrupt, Terminated) as e:
        _exit(stopped(e))
    except Exception as e:  # typer's bundled click raises its usage errors here
        if not (hasattr(e, "exit_code") and hasattr(e, "format_message")):
            raise
        if type(e).__name__ == "NoArgsIsHelpError":  # bare `hdtwd`: the help, not an error
            sys.stdout.write(e.format_message().rstrip() + "\n")
            _exit(0)
        sub = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
        hint = f"hdtwd {sub} --help" if sub in _COMMANDS else "hdtwd --help"
        sys.stderr.write(f"hdtwd: error: {e.format_message()} (see '{hint}')\n")
        _exit(int(e.exit_code))
    _exit(rc if isinstance(rc, int) else 0)
