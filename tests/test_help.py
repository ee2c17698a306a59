"""Every command's ``--help``, rendered as a user sees it, checked against docs/usage.md.

The options sit in panels (input, tree, distance, output, performance; evaluation for classify) in the
order the usage page lists them; each command shows an example that is a line of the usage page (where
the documentation test runs it); help text is drawn as written (no ``[default: ...]`` swallowed as
markup, no summary cut at an abbreviation); the manual pages list every exit code the page lists.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import typer
from conftest import REPO

from hdtwd_cli.cli._app import app
from hdtwd_cli.cli._help import BEGIN, END, EXAMPLES, ORDER
from hdtwd_cli.cli._manpage import _commands, panel_section, render_pages

USAGE = (REPO / "docs" / "usage.md").read_text()
COMMANDS = _commands(typer.main.get_command(app))
BOX = re.compile(r"[│╭╮╰╯─]")


def _help(*words: str, columns: int = 1000) -> str:
    """The help as drawn on a terminal ``columns`` wide (wide: each option's help on one line)."""
    env = dict(os.environ, COLUMNS=str(columns))
    proc = subprocess.run([sys.executable, "-m", "hdtwd_cli", *words, "--help"], capture_output=True, env=env)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return proc.stdout.decode()


def _flat(text: str) -> str:
    """The text without the boxes and white space (the words as one string, whatever the wrapping)."""
    return re.sub(r"\s+", "", BOX.sub("", text))


def _rendered_panels(text: str) -> dict[str, list[str]]:
    """Panel title -> the long flags at the start of its rows, read from the rendered help."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        title = re.match(r"\s*╭─ (.+?) ─", line)
        if title:
            current = title.group(1)
            out[current] = []
        elif line.lstrip().startswith("╰"):
            current = None
        elif current is not None:
            for cell in BOX.sub(" ", line).split():  # a row: [*] --flag [--no-flag] [-f] <metavar> help
                if cell != "*" and not cell.startswith("-"):
                    break
                if re.fullmatch(r"--[\w-]+", cell) and cell != "--help":
                    out[current].append(cell)
    return {k: v for k, v in out.items() if k not in ("Arguments", "Commands") and v}


@pytest.mark.parametrize("name,cmd", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_each_commands_help(name, cmd):
    text = _help(*name.split())
    flat = _flat(text)
    # every option, with its whole help text (nothing taken for markup), in the panel the usage page names
    for p in cmd.params:
        if p.param_type_name == "option" and p.help:
            assert _flat(p.help) in flat, (name, p.opts, p.help)
    listed = re.search(rf"^- `hdtwd {re.escape(name)}` -- (.*)$", USAGE, flags=re.M)
    assert listed, f"docs/usage.md lists no panels for hdtwd {name}"
    documented = {
        part.split(": ", 1)[0]: re.findall(r"`(--[\w-]+)`", part.split(": ", 1)[1])
        for part in listed.group(1).split("; ")
    }
    assert _rendered_panels(text) == documented, name
    assert list(documented) == sorted(documented, key=ORDER.index)
    # an example, runnable as the usage page runs its lines
    assert EXAMPLES[name]
    for example in EXAMPLES[name]:
        assert example in text
        assert re.search(rf"^{re.escape(example)}(\s|$)", USAGE + "\n" + (REPO / "docs" / "plots.md").read_text(), re.M)
    verbose = [line for line in text.splitlines() if "--verbose" in line]
    assert verbose and "[default" not in verbose[0]  # -v counts; its default is no detail


def test_distance_help_has_the_five_panels_and_names_every_input():
    text = _help("distance")
    panels = _rendered_panels(text)
    assert list(panels) == ["Input", "Tree", "Distance", "Output", "Performance"]
    assert list(_rendered_panels(_help("distance", columns=80))) == list(panels)  # the same on a narrow terminal
    assert text.count("DASK_SCHEDULER_ADDRESS") == 1
    data = next(p for p in dict(COMMANDS)["distance"].params if p.name == "data").help
    for form in (".npy", ".csv/.tsv (also .gz)", ".npz", ".mtx", ".h5ad", "10x directory", "Cell Ranger .h5", "-"):
        assert form in data, form
    eps = next(p for p in dict(COMMANDS)["distance"].params if p.name == "eps").help
    assert eps.index("--bandwidth median (the default") < eps.index("--bandwidth knn")


def test_the_top_level_help_shows_each_summary_whole():
    flat = _flat(_help())
    for name, cmd in typer.main.get_command(app).commands.items():
        first = (cmd.help or "").strip().split("\n\n")[0]
        assert _flat(first) in flat, name


def test_the_usage_pages_panel_list_is_current():
    section = USAGE.split(BEGIN, 1)[1].split(END, 1)[0]
    assert BEGIN + section + END == panel_section(), "run: python -m hdtwd_cli.cli._manpage man docs/usage.md"


def test_the_manual_pages_list_every_exit_code_of_the_usage_page():
    table = USAGE.split("| exit code | meaning |", 1)[1].split("\n\n", 1)[0]
    codes = re.findall(r"^\| (\d+) \|", table, flags=re.M)
    assert {"0", "2", "5", "130", "141", "143"} <= set(codes)
    pages = render_pages()
    for page in ("hdtwd.1", "hdtwd-distance.1"):
        status = pages[page].split(".SH EXIT STATUS", 1)[1].split(".SH", 1)[0]
        assert set(codes) <= set(re.findall(r"^\.B (\d+)$", status, flags=re.M)), page
    assert all(".SH EXAMPLES" in pages[f"hdtwd-{name.replace(' ', '-')}.1"] for name, _ in COMMANDS)


def test_the_typed_options_are_exactly_the_declared_groups_with_their_defaults():
    """A command body's ``o`` (``cli._options.Options``) has one typed field per option of the shared groups,
    with the option's default and a type its values fit (a choice: its string); nothing more, nothing less."""
    import dataclasses
    import typing
    from enum import Enum

    from hdtwd_cli.cli import _options

    groups = [_options.TREE, _options.INPUT, _options.OUTPUT, _options.THREADS, _options.JOINT]
    declared = {n: p for g in groups for n, p in g.items()}
    fields = {f.name: f for f in dataclasses.fields(_options.Options)}
    assert set(fields) == set(declared)
    hints = typing.get_type_hints(_options.Options)
    for name, p in declared.items():
        assert fields[name].default == p.default, name
        kind = typing.get_args(p.annotation)[0]
        kind = next((a for a in typing.get_args(kind) if a is not type(None)), kind)  # X | None -> X
        allowed = set(typing.get_args(hints[name])) or {hints[name]}
        want = str if isinstance(kind, type) and issubclass(kind, Enum) else kind
        assert want in allowed, (name, want, allowed)
