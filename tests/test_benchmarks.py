"""benchmarks/ cannot rot unseen: every script imports, every name it takes from the package exists (at module
level or inside a function, where a rename would only show on the next long run), and benchmarks/README.md
lists exactly the scripts there are."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py"))


def _has(module: object, name: str) -> bool:
    """``module`` has ``name``, or ``name`` is one of its submodules."""
    if hasattr(module, name):
        return True
    try:
        importlib.import_module(f"{module.__name__}.{name}")  # type: ignore[attr-defined]
    except ImportError:
        return False
    return True


def test_every_name_a_benchmark_takes_from_the_package_exists():
    missing = []
    for name in SCRIPTS:
        for node in ast.walk(ast.parse((BENCH / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hdtwd_cli"):
                module = importlib.import_module(node.module)
                missing += [f"{name}: {node.module}.{a.name}" for a in node.names if not _has(module, a.name)]
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("hdtwd_cli"):
                        importlib.import_module(a.name)
    assert not missing, missing


def test_every_benchmark_script_imports():
    """Each script loaded as a module (its ``main`` not run), in one child process: their imports of each other,
    of the package and of the extras all resolve."""
    code = (
        "import importlib.util, sys\n"
        f"folder = {str(BENCH)!r}\n"
        "sys.path.insert(0, folder)\n"
        f"for name in {SCRIPTS!r}:\n"
        "    spec = importlib.util.spec_from_file_location('bench_' + name[:-3], folder + '/' + name)\n"
        "    module = importlib.util.module_from_spec(spec)\n"
        "    sys.modules[spec.name] = module\n"
        "    spec.loader.exec_module(module)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


def test_the_readme_lists_exactly_the_scripts():
    readme = (BENCH / "README.md").read_text()
    table = readme.split("## Every script", 1)[1].split("\n## ", 1)[0]
    listed = sorted(
        line.split("`")[1]
        for line in table.splitlines()
        if line.startswith("| `") and line.split("`")[1].endswith(".py")
    )
    assert listed == SCRIPTS
