"""The package's layering (docs/architecture.md): no import circle, io at the bottom, a small public surface.

Every import counts, at module level or inside a function: a deferred import still ties the
modules together.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import scipy.sparse as sp

import hdtwd_cli as hd

PACKAGE = Path(hd.__file__).resolve().parent

#: Layers from the bottom up; a module may import its own layer and those below it.
LAYERS = [
    {"hdtwd_cli._version", "hdtwd_cli.errors", "hdtwd_cli._defaults", "hdtwd_cli._runtime"},
    {"hdtwd_cli.io"},
    {"hdtwd_cli.tree"},
    {"hdtwd_cli.twd"},
    {"hdtwd_cli.joint"},
    {"hdtwd_cli.knn"},
    {"hdtwd_cli.evaluate"},
    {"hdtwd_cli._api"},
    {"hdtwd_cli.pl", "hdtwd_cli.datasets"},
    {"hdtwd_cli.cli", "hdtwd_cli.__main__"},
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in its code, TYPE_CHECKING blocks excepted)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skip = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        out: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                assert node.level == 0, f"{name}: relative import"
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            out |= {t for t in targets if t in modules and t != name}
        graph[name] = out
    return graph


def _layer(module: str) -> int:
    for i, layer in enumerate(LAYERS):
        if any(module == top or module.startswith(top + ".") for top in layer):
            return i
    raise AssertionError(f"{module} is in no layer of docs/architecture.md")


def test_no_module_imports_a_layer_above_its_own():
    graph = _imports()
    upward = [
        f"{a} -> {b}"
        for a, deps in graph.items()
        if a != "hdtwd_cli"
        for b in deps
        if b != "hdtwd_cli" and _layer(b) > _layer(a)
    ]
    assert not upward, "\n".join(sorted(upward))


def test_io_imports_nothing_of_the_method():
    graph = _imports()
    for module, deps in graph.items():
        if module.startswith("hdtwd_cli.io"):
            assert all(_layer(d) <= 1 for d in deps), (module, deps)


#: The longest a module of the package may be: past it, a module holds more than one stage or idea.
MAX_LINES = 700


def test_no_module_is_longer_than_the_limit():
    """The package's modules and the benchmarks' scripts and support modules alike."""
    bench = Path(__file__).resolve().parent.parent / "benchmarks"  # the repository's, wherever the package is
    assert (bench / "harness.py").exists()
    long = {
        f"{p.parent.name}/{p.name}": n
        for p in [*PACKAGE.rglob("*.py"), *bench.rglob("*.py")]
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_import_circle():
    graph = _imports()
    graph.pop("hdtwd_cli")  # the public surface, imported lazily by name (PEP 562)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []
    counter = 0
    for root in graph:  # Tarjan's strongly connected components, iteratively
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        circles.append(sorted(comp))
    assert not circles, circles


def test_the_public_surface_is_the_top_level_and_pl_only():
    """Everything under a subpackage is private: its modules start with an underscore, or the
    subpackage itself is private (``_runtime``); the public names are ``hdtwd_cli.__all__`` (with ``pl``'s
    and ``datasets``' own)."""
    public = {
        _module_name(p)
        for p in PACKAGE.rglob("*.py")
        if not any(part.startswith("_") and part != "__init__.py" for part in p.relative_to(PACKAGE).parts)
    }
    assert public == {
        "hdtwd_cli",
        "hdtwd_cli.errors",
        "hdtwd_cli.io",
        "hdtwd_cli.tree",
        "hdtwd_cli.twd",
        "hdtwd_cli.joint",
        "hdtwd_cli.knn",
        "hdtwd_cli.evaluate",
        "hdtwd_cli.pl",
        "hdtwd_cli.datasets",
        "hdtwd_cli.cli",
    }
    for name in hd.__all__:
        assert getattr(hd, name) is not None, name
    # the features' tree, the distances, the neighbours, classify (its methods, the competitors' trees), the joint
    # hierarchies, pl and datasets
    assert len(hd.__all__) <= 30
    # the subpackages export nothing but what their docstrings describe
    import hdtwd_cli.evaluate
    import hdtwd_cli.knn
    import hdtwd_cli.tree
    import hdtwd_cli.twd

    exported = {"hdtwd_cli.evaluate": {"methods_help", "with_methods_table"}}  # the command line's texts
    for sub in (hdtwd_cli.tree, hdtwd_cli.twd, hdtwd_cli.knn, hdtwd_cli.evaluate):
        names = {n for n in vars(sub) if not n.startswith("_")}
        # a subpackage's own modules appear as attributes once imported
        names -= {n for n in names if f"{sub.__name__}.{n}" in {_module_name(p) for p in PACKAGE.rglob("*.py")}}
        assert names == exported.get(sub.__name__, set()), sub.__name__


def test_the_command_line_reaches_other_layers_only_through_their_interfaces():
    """cli/ imports the public API (and ``pl``), ``errors``, the io and API layers' package interfaces (their
    ``__init__``), the registry's help and the base layer -- never another layer's private module."""
    base = ("hdtwd_cli._version", "hdtwd_cli._defaults", "hdtwd_cli._runtime", "hdtwd_cli.errors")
    allowed = {"hdtwd_cli", "hdtwd_cli.io", "hdtwd_cli._api", "hdtwd_cli.evaluate", "hdtwd_cli.pl"}
    found = []
    for path in (PACKAGE / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hdtwd_cli"):
                mod = node.module
                if mod.startswith("hdtwd_cli.cli") or mod.startswith(base) or mod in allowed:
                    continue
                found.append(f"{path.name}: {mod}")
            elif isinstance(node, ast.Import):
                found += [
                    f"{path.name}: {a.name}"
                    for a in node.names
                    if a.name.startswith("hdtwd_cli.") and not a.name.startswith("hdtwd_cli.cli")
                ]
    assert not found, found


def test_no_module_imports_another_modules_private_name():
    """A name another module needs is that module's interface: no ``from x import _name``."""
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hdtwd_cli"):
                found += [
                    f"{_module_name(path)}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_")
                    and not a.name.startswith("__")
                    and f"{node.module}.{a.name}" not in modules
                ]
    assert not found, found


def _walk_module():
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "walk.py"  # the repository's, not site-packages'
    spec = importlib.util.spec_from_file_location("walk_layers", script)
    walk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(walk)
    return walk


def test_the_walk_benchmark_climbs_by_these_layers():
    """benchmarks/walk.py counts a climb against its own copy of the layers (it may import public names only):
    the same order as :data:`LAYERS`, from ``_runtime`` to ``_api``."""
    walk = _walk_module()
    assert walk.LAYERS[0] in LAYERS[0]
    assert [{top} for top in walk.LAYERS[1:]] == LAYERS[1 : len(walk.LAYERS)]


@pytest.mark.parametrize("storage", ["dense", "csr"])
def test_the_samples_are_checked_and_converted_once_at_the_door(storage):
    """The walk of a matrix through ``hd.distances`` (denoised counts, learned tree): its values checked once,
    a sparse one made canonical once (the stages require that form), few returns to a module already left."""
    X, _, _ = hd.datasets.planted_counts(120, 150, 3, seed=0)
    got = _walk_module().walk(sp.csr_matrix(X) if storage == "csr" else X, [f"g{j}" for j in range(150)])
    assert got["check_values"] == 1
    assert got["canonical_csr"] == (storage == "csr")
    assert got["returns"] <= 40, got
