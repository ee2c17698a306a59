"""Sphinx configuration of hdtwd's documentation site: ``sphinx-build -W -b html docs docs/_build/html``.

Markdown pages through MyST, the API reference from the docstrings (autodoc + autosummary,
NumPy style through napoleon), the command-line reference generated from the typer app
(:func:`hdtwd_cli.cli._manpage.cli_reference`, the same source as the manual pages), and the
tutorials in ``tutorials/`` executed at build time by sphinx-gallery. No network: no
intersphinx, no link checks.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))
os.environ.setdefault("MPLBACKEND", "Agg")

import hdtwd_cli
from hdtwd_cli.cli._manpage import cli_reference

project = "hdtwd"
author = "the hdtwd developers"
copyright = "2026, the hdtwd developers"
release = version = hdtwd_cli.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "tutorials/*.py", "tutorials/README.rst", "pictures.py", "Thumbs.db", ".DS_Store"]
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]
suppress_warnings = ["myst.xref_missing", "config.cache"]

autosummary_generate = True
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False

html_theme = "furo"
html_title = f"hdtwd {release}"
html_static_path: list[str] = []

sphinx_gallery_conf = {
    "examples_dirs": ["tutorials"],
    "gallery_dirs": ["auto_tutorials"],
    "filename_pattern": r"/tutorial_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "within_subsection_order": "FileNameSortKey",
    "image_scrapers": ("matplotlib",),
    "show_signature": False,
    "capture_repr": (),
}

# the command-line reference, generated from the CLI itself at every build
(DOCS / "_generated").mkdir(exist_ok=True)
(DOCS / "_generated" / "cli.rst").write_text(cli_reference())
