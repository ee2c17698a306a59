"""The ``hdtwd`` command: a thin shell over the public API (typer).

``_app`` holds the commands, ``_options`` the shared options and the error policy (exit codes),
``_plot`` the ``hdtwd plot`` commands, ``_output`` the writing of results by suffix and
``_manpage`` the manual pages generated from the commands themselves.
"""

from hdtwd_cli.cli._app import main

__all__ = ["main"]
