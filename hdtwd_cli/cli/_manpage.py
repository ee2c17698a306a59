"""Generate the roff manual pages in ``man/`` and the site's command-line reference from the CLI itself.

``python -m hdtwd_cli.cli._manpage man/ docs/usage.md`` rewrites ``man/hdtwd.1`` and ``man/hdtwd-COMMAND.1`` (and
the usage page's list of the ``--help`` panels); a test
checks that every option of every command appears in its page, so the pages cannot drift.
:func:`cli_reference` writes the same content as reStructuredText for the Sphinx site (docs/conf.py
calls it at every build).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from hdtwd_cli._version import __version__
from hdtwd_cli.cli._app import app
from hdtwd_cli.cli._help import BEGIN, END, EXAMPLES
from hdtwd_cli.cli._help import ORDER as PANEL_ORDER
from hdtwd_cli.cli._help import panels as _panels

__all__ = ["render_pages", "cli_reference", "panel_section"]

_DATE = "2026-11-26"

_EXIT = """.SH EXIT STATUS
.TP
.B 0
success
.TP
.B 1
internal error (a bug; \\fB\\-v\\fR prints the traceback)
.TP
.B 2
bad usage or bad input (the message names the file and the problem)
.TP
.B 3
output cannot be written
.TP
.B 4
not enough memory for the requested computation
.TP
.B 5
the Dask cluster failed the work (\\fB\\-\\-scheduler\\fR)
.TP
.B 129
hung up (SIGHUP); no partial output is left behind
.TP
.B 130
interrupted (Ctrl\\-C); no partial output is left behind
.TP
.B 141
the reader of standard output went away (\\fB| head\\fR); the run stops quietly
.TP
.B 143
terminated (SIGTERM); no partial output is left behind
"""


def _esc(text: str) -> str:
    """Escape text for roff; a line may not start with a control character."""
    text = text.replace("\\", "\\\\").replace("-", "\\-").replace("'", "\\(aq")
    return "\n".join("\\&" + ln if ln.startswith(".") else ln for ln in text.splitlines())


def _metavar(p, ctx) -> str:
    """The option's value placeholder, across typer versions."""
    if getattr(p, "metavar", None):
        return str(p.metavar)
    for attempt in (lambda: p.display_type(ctx), lambda: p.make_metavar(ctx), lambda: p.make_metavar()):
        try:
            text = str(attempt())
        except Exception:
            continue
        if text and "<" not in text:
            return text
    return (p.name or "VALUE").upper()


def _option_lines(cmd) -> list[str]:
    out: list[str] = []
    ctx = cmd.context_class(cmd)
    for p in cmd.params:
        if p.param_type_name == "argument":
            out += [".TP", f"\\fI{_esc((p.name or '').upper())}\\fR"]
            out.append(_esc(getattr(p, "help", None) or ""))
            continue
        if p.param_type_name != "option" or p.hidden:
            continue
        names = ", ".join(f"\\fB{_esc(o)}\\fR" for o in p.opts + p.secondary_opts)
        meta = (
            "" if getattr(p, "is_flag", False) or getattr(p, "count", False) else f" \\fI{_esc(_metavar(p, ctx))}\\fR"
        )
        out += [".TP", names + meta, _esc(p.help or "")]
    return out


def _commands(group: Any) -> list[tuple[str, Any]]:
    """(name, command) of every command, a group's subcommands as ``group sub`` (iteratively)."""
    out, todo = [], [("", group)]
    while todo:
        prefix, g = todo.pop(0)
        ctx = g.context_class(g)
        for name in g.list_commands(ctx):
            cmd = g.get_command(ctx, name)
            full = f"{prefix} {name}".strip()
            if hasattr(cmd, "list_commands"):
                todo.append((full, cmd))
            else:
                out.append((full, cmd))
    return out


def render_pages() -> dict[str, str]:
    """Page name -> roff text for ``hdtwd`` and each (sub)command (``hdtwd plot tree``: ``hdtwd-plot-tree.1``)."""
    group = typer.main.get_command(app)
    pages: dict[str, str] = {}
    commands = _commands(group)
    head = f'.TH {{name}} 1 "{_DATE}" "hdtwd {__version__}" "User Commands"\n'
    lines = [
        head.format(name="HDTWD"),
        ".SH NAME",
        "hdtwd \\- tree\\-Wasserstein distance with a latent feature hierarchy",
        ".SH SYNOPSIS",
        "\\fBhdtwd\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR]",
        ".SH DESCRIPTION",
        _esc(group.help or ""),
        ".SH COMMANDS",
    ]
    for name, cmd in commands:
        lines += [".TP", f"\\fBhdtwd {_esc(name)}\\fR(1)", _esc((cmd.help or "").splitlines()[0])]
    lines += [".SH OPTIONS"] + _option_lines(group)
    lines += [_EXIT, ".SH SEE ALSO", ", ".join(f"\\fBhdtwd\\-{_esc(n.replace(' ', '-'))}\\fR(1)" for n, _ in commands)]
    pages["hdtwd.1"] = "\n".join(lines) + "\n"
    for name, cmd in commands:
        args = [(p.name or "").upper() for p in cmd.params if p.param_type_name == "argument"]
        usage = " ".join(["[OPTIONS]"] + args)
        page = name.replace(" ", "-")
        lines = [
            head.format(name=f"HDTWD-{page.upper()}"),
            ".SH NAME",
            f"hdtwd\\-{_esc(page)} \\- {_esc((cmd.help or '').splitlines()[0])}",
            ".SH SYNOPSIS",
            f"\\fBhdtwd {_esc(name)}\\fR {_esc(usage)}",
            ".SH DESCRIPTION",
            _esc(cmd.help or ""),
            ".SH OPTIONS",
        ] + _option_lines(cmd)
        if name in EXAMPLES:
            lines += [".SH EXAMPLES"] + [f".PP\n.nf\n{_esc(e)}\n.fi" for e in EXAMPLES[name]]
        lines += [_EXIT, ".SH SEE ALSO", "\\fBhdtwd\\fR(1)"]
        pages[f"hdtwd-{page}.1"] = "\n".join(lines) + "\n"
    return pages


def _rst(text: str) -> str:
    """Plain help text as reStructuredText: inline markup characters escaped."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`").replace("|", "\\|")


def cli_reference() -> str:
    """The command-line reference as reStructuredText: every (sub)command, its usage, arguments and options."""
    group = typer.main.get_command(app)
    out = [
        "Command-line reference",
        "======================",
        "",
        "Generated from the ``hdtwd`` command's own definitions at every build (the same source as",
        "the manual pages in ``man/``).",
        "",
        _rst(group.help or ""),
        "",
        "Exit status: 0 success; 1 internal error (a bug; ``-v`` prints the traceback); 2 bad usage",
        "or bad input (the message names the file and the problem); 3 output cannot be written; 4 not",
        "enough memory for the requested computation; 5 the Dask cluster failed the work (``--scheduler``); 129",
        "hung up (SIGHUP), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM): no partial output is left behind;",
        "141 the reader of standard output went away (``| head``).",
        "",
    ]
    for name, cmd in _commands(group):
        title = f"hdtwd {name}"
        args = [(p.name or "").upper() for p in cmd.params if p.param_type_name == "argument"]
        out += [
            title,
            "-" * len(title),
            "",
            _rst(cmd.help or ""),
            "",
            "::",
            "",
            f"    hdtwd {name} [OPTIONS] {' '.join(args)}".rstrip(),
            "",
        ]
        ctx = cmd.context_class(cmd)
        for p in cmd.params:
            if p.param_type_name == "argument":
                out += [f"``{(p.name or '').upper()}``", f"    {_rst(getattr(p, 'help', None) or '')}", ""]
            elif p.param_type_name == "option" and not p.hidden:
                flag = getattr(p, "is_flag", False) or getattr(p, "count", False)
                names = ", ".join(p.opts + p.secondary_opts)
                meta = "" if flag else f" {_metavar(p, ctx)}"
                out += [f"``{names}{meta}``", f"    {_rst(p.help or '')}", ""]
        if name in EXAMPLES:
            out += ["Example::" if len(EXAMPLES[name]) == 1 else "Examples::", ""]
            out += [f"    {e}" for e in EXAMPLES[name]] + [""]
    return "\n".join(out) + "\n"


def panel_section() -> str:
    """docs/usage.md's list of every command's options, panel by panel, as ``--help`` shows them."""
    lines = [BEGIN, ""]
    for name, cmd in _commands(typer.main.get_command(app)):
        groups = _panels(cmd)
        ordered = sorted(groups, key=lambda g: PANEL_ORDER.index(g) if g in PANEL_ORDER else -1)
        text = "; ".join(f"{g}: " + ", ".join(f"`{f}`" for f in groups[g]) for g in ordered)
        lines.append(f"- `hdtwd {name}` -- {text}")
    return "\n".join(lines + ["", END])


def main(argv: list[str]) -> None:
    """Write the pages into ``argv[0]`` (``man``); with ``argv[1]`` (docs/usage.md), rewrite that page's list of
    the ``--help`` panels (:func:`panel_section`) too; with ``argv[2]`` (docs/classify.md), its table of
    classify's methods (:func:`hdtwd_cli.evaluate._methods.methods_table`)."""
    out = Path(argv[0] if argv else "man")
    out.mkdir(parents=True, exist_ok=True)
    for name, text in render_pages().items():
        (out / name).write_text(text)
    if len(argv) > 1:
        page = Path(argv[1])
        head, rest = page.read_text().split(BEGIN, 1)
        page.write_text(head + panel_section() + rest.split(END, 1)[1])
    if len(argv) > 2:  # docs/classify.md's table of classify's methods, from the registry
        from hdtwd_cli.evaluate import with_methods_table

        page = Path(argv[2])
        page.write_text(with_methods_table(page.read_text()))


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
