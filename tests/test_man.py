"""The manual pages in man/ cover every option of every command and match the CLI."""

import re

import typer
from conftest import REPO

from hdtwd_cli.cli._app import app
from hdtwd_cli.cli._manpage import _commands, render_pages


def test_committed_pages_are_current():
    for name, text in render_pages().items():
        path = REPO / "man" / name
        assert path.exists(), f"man/{name} is missing: run python -m hdtwd_cli.cli._manpage man"
        assert path.read_text() == text, f"man/{name} is stale: run python -m hdtwd_cli.cli._manpage man"


def test_every_option_appears_in_its_page():
    commands = _commands(typer.main.get_command(app))
    assert {"classify", "plot tree", "plot heatmap", "plot report"} <= {n for n, _ in commands}
    for name, cmd in commands:
        name = name.replace(" ", "-")
        page = (REPO / "man" / f"hdtwd-{name}.1").read_text().replace("\\-", "-")
        opts = [o for p in cmd.params if p.param_type_name == "option" for o in p.opts]
        assert opts, name
        for opt in opts:
            assert re.search(rf"\\fB{re.escape(opt)}\\fR", page), f"{opt} missing from hdtwd-{name}.1"
