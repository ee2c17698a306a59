"""``hdtwd plot tree|heatmap|report``: the pictures of :mod:`hdtwd_cli.pl`, one library call each.

The picture's format is the suffix of ``-o`` (.png, .svg, .pdf), checked before anything is read;
the file is written atomically (matplotlib, a dependency).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

import hdtwd_cli.cli._help as _help
from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli.cli._help import HelpCommand, HelpGroup, epilog
from hdtwd_cli.cli._options import DEFAULTS, INPUT, OUTPUT, Options, command, read_input
from hdtwd_cli.errors import InputError, ParameterError

plot_app = typer.Typer(
    name="plot",
    help="Pictures: the feature tree, a distance heatmap, a classify report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    cls=HelpGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)

PictureOut = Annotated[
    Path,
    typer.Option(
        "--output", "-o", help="Picture to write: .png, .svg or .pdf.", show_default=False, rich_help_panel=_help.OUTPUT
    ),
]


def check_picture(output: Path, inputs: list[Any], argument: str = "output") -> Any:
    """The ``pl`` module once the picture's format and matplotlib are known to be there."""
    from hdtwd_cli.io import check_output_path

    check_output_path(output, inputs)
    try:
        from hdtwd_cli.pl import _pictures as pl

        pl.check_plot_path(str(output))
        pl.require_matplotlib()
    except (ValueError, ImportError) as e:
        raise ParameterError(str(e), argument, output) from None
    return pl


@plot_app.command("tree", cls=HelpCommand, epilog=epilog("plot tree"))
@command(INPUT, OUTPUT)
def plot_tree(
    tree: Annotated[Path, typer.Argument(help="Tree file (.h5 from hdtwd, or Newick).", show_default=False)],
    output: PictureOut,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            rich_help_panel=_help.INPUT,
            help="Samples whose mean histogram weighs the features [default: equal weights].",
            show_default=False,
        ),
    ] = None,
    tips: Annotated[
        int,
        typer.Option("--tips", min=2, rich_help_panel=_help.OUTPUT, help="Tips shown: leaves and collapsed clades."),
    ] = 40,
    o: Options = DEFAULTS,
) -> None:
    """Dendrogram of the feature tree's heaviest clades, edge lengths to scale."""
    from hdtwd_cli import Tree

    rep = Reporter(o.quiet, o.verbose)
    pl = check_picture(output, [tree, data])
    T = Tree.read(str(tree))
    md = None if data is None else read_input(data, o, rep)
    fig = pl.tree(T, None if md is None else md.X, None if md is None else md.feature_names, tips=tips)
    pl.save(fig, str(output))
    rep.info(f"wrote {output}")


@plot_app.command("heatmap", cls=HelpCommand, epilog=epilog("plot heatmap"))
@command(INPUT, OUTPUT)
def plot_heatmap(
    distances: Annotated[
        Path,
        typer.Argument(
            help="Square distance matrix (.npy, .h5, .csv, .tsv from 'hdtwd distance').", show_default=False
        ),
    ],
    output: PictureOut,
    labels: Annotated[
        str | None,
        typer.Option(
            "--labels",
            rich_help_panel=_help.INPUT,
            help="A file with one label per sample, or obs:COLUMN of the .h5ad given with --data.",
            metavar="FILE|obs:COLUMN",
            show_default=False,
        ),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data", help="The .h5ad whose obs holds the labels.", show_default=False, rich_help_panel=_help.INPUT
        ),
    ] = None,
    o: Options = DEFAULTS,
) -> None:
    """Heatmap of a distance matrix, samples ordered by average linkage, with a label strip."""
    from hdtwd_cli.io import read_labels, read_matrix

    rep = Reporter(o.quiet, o.verbose)
    pl = check_picture(output, [distances, data])
    D = read_matrix(distances, False, None, False).X
    D = D.toarray() if hasattr(D, "toarray") else D
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise InputError(f"is not a square distance matrix ({D.shape[0]} x {D.shape[1]})", distances)
    y = None
    if labels is not None:
        if labels.startswith("obs:") and data is None:
            raise ParameterError("obs:COLUMN needs the .h5ad: give it with --data", "labels")
        md = (
            read_input(data, o, rep, (labels[4:],) if labels.startswith("obs:") else ())
            if data is not None
            else _rows(D.shape[0], distances)
        )
        y = read_labels(labels, md)
        if len(y) != D.shape[0]:
            raise InputError(
                f"{len(y)} labels for {D.shape[0]} samples", labels if not labels.startswith("obs:") else data
            )
    pl.save(pl.distance_heatmap(D, y), str(output))
    rep.info(f"wrote {output}")


@plot_app.command("report", cls=HelpCommand, epilog=epilog("plot report"))
@command(OUTPUT)
def plot_report(
    report: Annotated[Path, typer.Argument(help="The JSON report of 'hdtwd classify --json'.", show_default=False)],
    output: PictureOut,
    o: Options = DEFAULTS,
) -> None:
    """Accuracy against k per method of a classify report, +- one std over splits."""
    rep = Reporter(o.quiet, o.verbose)
    pl = check_picture(output, [report])
    try:
        r = json.loads(report.read_text())
        r["methods"], r["k"]
    except FileNotFoundError:
        raise InputError("no such file", report) from None
    except (ValueError, KeyError, TypeError):
        raise InputError("is not the JSON report of 'hdtwd classify --json'", report) from None
    pl.save(pl.classify_report(r), str(output))
    rep.info(f"wrote {output}")


def _rows(n: int, path: Path) -> Any:
    """What :func:`read_labels` needs of a matrix without obs: its row count."""
    from types import SimpleNamespace

    return SimpleNamespace(n_samples=n, shape=(n, n), obs={}, path=path, X=None)
