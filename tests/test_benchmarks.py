"""benchmarks/ cannot rot unseen: every script imports, every name it takes from the package exists (at module
level or inside a function, where a rename would only show on the next long run), benchmarks/README.md
lists exactly the scripts there are, no script takes a private name, and the studies that run on
generated data run at a tiny size."""

from __future__ import annotations

import ast
import functools
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def _private_imports(name: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse((BENCH / name).read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hdtwd_cli"):
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("hdtwd_cli")]
        else:
            continue
        found |= {n for n in names if any(p.startswith("_") and not p.startswith("__") for p in n.split("."))}
    return found


def test_no_benchmark_takes_a_private_name():
    """The benchmarks reach the package through its public names only (``hdtwd_cli``, ``hdtwd_cli.datasets``,
    ``hdtwd_cli.io``, ``hdtwd_cli.pl``): a study that needs an inside makes it public or measures through the API."""
    taken = {s: sorted(_private_imports(s)) for s in SCRIPTS}
    assert not {s: v for s, v in taken.items() if v}, taken


#: Studies run at a tiny size on generated data, each with what its output must show: the scripts run, not
#: only import (the cache goes to a temporary folder, ``HDTWD_BENCH_CACHE``).
TINY_RUNS = {
    "bench_toy": (["bench_toy.py", "--seeds", "5", "--json", "{tmp}/toy.json"], "| default |"),
    "bench_recovery": (
        [
            "bench_recovery.py",
            "run",
            "--families",
            "random,produce,toy",
            "--sizes",
            "60",
            "--depths",
            "bulk",
            "--seeds",
            "0",
            "--peers",
            "scipy-average",
            "--competitors",
            "star",
        ],
        '"learner": "star"',
    ),
    "check_bytes": (
        ["check_bytes.py", "--source", str(REPO), "--only", "cli/produce/distance", "--out", "{tmp}/b.json"],
        " ok",
    ),
    "soak": (["soak.py", "--processes", "2", "--rounds", "1"], "final outputs valid | True"),
    "bench_scale": (["bench_scale.py", "stages", "--sizes", "1500", "--markdown"], "| whole process (peak"),
    "walk": (["walk.py", "--samples", "60", "--features", "40"], '"storage": "csr"'),
    "bench_table1": (
        ["bench_table1.py", "--sets", "planted", "--rows", "hdtwd defaults,star,l1"],
        "| hdtwd defaults - star (same histograms) |",
    ),
    "bench_joint": (
        ["bench_joint.py", "table", "--sets", "planted", "--splits", "2", "--methods", "hdtwd,star,joint"],
        "planted {'hdtwd'",
    ),
    "bench_atlas": (["bench_atlas.py", "single", "1500", "--max-wait", "0"], '"recall": '),
    "fuzz_readers": (
        ["fuzz_readers.py", "--per-seed", "2", "--seeds", "1"],
        "| input | cases | exit 0 | exit 2 | failures |",
    ),
    "bench_end_to_end": (
        ["bench_end_to_end.py", "--stages-only", "sample_data/cells.h5ad", "--stages-out", "{tmp}/D.npy"],
        '"group": "tree decode"',
    ),
    "pdist_pipeline": (["pdist_pipeline.py", "sample_data/cells.h5ad", "-o", "{tmp}/D.npy"], "pdist_pipeline: n=300"),
    "bench_pairwise": (
        ["bench_pairwise.py", "--small", "40", "--parts", "corpus", "--reps", "1", "--max-wait", "0"],
        "| all 40 | **hdtwd** `hd.distances` |",
    ),
    "bench_classify_time": (
        ["bench_classify_time.py", "--workloads", "sample-cells", "--max-wait", "0"],
        "| sample-cells | 300 x 64 |",
    ),
    "bench_large_m": (
        ["bench_large_m.py", "--parts", "corpus", "--corpora", "300 x 1,200", "--max-wait", "0"],
        "| 300 x 1,200 | 16,706 |",
    ),
    "bench_unifrac": (["bench_unifrac.py", "startup"], "'produce': {'wall_s'"),  # the part that needs no ssu
    "limits": (["limits.py", "--small"], "| .npy header claiming 10^9 x 10^9 | 2 |"),
    "bench_parity": (["bench_parity.py", "--out", "{tmp}/parity.json", "--only", "sample"], "| sample | 300 | yes |"),
    # scanpy's bundled pbmc68k_reduced (offline): the studies on real cells at their smallest
    "recall_real": (["recall_real.py", "pbmc"], '"recall": '),
    "bench_classify": (["bench_classify.py", "--sets", "pbmc"], "| pbmc | 700 x 765 | 10 |"),
    "bench_leiden": (["bench_leiden.py", "--sets", "pbmc"], "Leiden: resolution 1"),
    "bench_corpora": (["bench_corpora.py", "run", "--cpus", "native", "--only", "pbmc"], "pbmc native: ok=True"),
    "bench_forms": (
        ["bench_forms.py", "run", "--sets", "pbmc", "--forms", "lognorm", "--variants", "0", "--splits", "2"],
        "pbmc lognorm 0: hdtwd",
    ),
}


@pytest.mark.parametrize("name", sorted(TINY_RUNS))
def test_a_study_runs_at_a_tiny_size(name, tmp_path):
    argv, shows = TINY_RUNS[name]
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    env = dict(os.environ, HDTWD_BENCH_CACHE=str(tmp_path / "cache"))
    r = subprocess.run(
        [sys.executable, str(BENCH / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert shows in r.stdout + r.stderr, (r.stdout[-1000:], r.stderr[-1000:])
    if name == "bench_toy":  # the same table again from the values it recorded, nothing computed
        again = subprocess.run(
            [sys.executable, str(BENCH / argv[0]), "--from-json", str(tmp_path / "toy.json")],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
        )
        assert again.returncode == 0, again.stderr[-2000:]
        assert again.stdout.split("\n")[:4] == r.stdout.split("\n")[:4]
    if name == "limits":  # every input refused with its documented code, never an internal error (exit 1)
        codes = [line.split("|")[2].strip() for line in r.stdout.splitlines() if line.startswith("| .")]
        assert codes and "1" not in codes and "0" not in codes, codes
    if name == "bench_recovery":  # its table from the records just written
        md = subprocess.run(
            [sys.executable, str(BENCH / argv[0]), "markdown"], capture_output=True, text=True, cwd=REPO, env=env
        )
        assert md.returncode == 0 and "| random |" in md.stdout, md.stderr[-2000:]


@functools.cache
def _speed_suite() -> list[type]:
    """The classes of the airspeed velocity suite (benchmarks/speed/), loaded as asv loads them, once: loading a
    module again would leave the collected classes reading the first module's globals."""
    import importlib.util

    found = []
    for path in sorted((BENCH / "speed").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"speed_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        classes = [v for k, v in vars(module).items() if isinstance(v, type) and not k.startswith("_")]
        found += [v for v in classes if v.__module__ == module.__name__]
    return found


def test_the_speed_suite_takes_public_names_only_and_is_configured():
    import json

    suite = BENCH / "speed"
    for path in suite.glob("*.py"):
        private = _private_imports(str(path.relative_to(BENCH)))
        assert not private, (path.name, private)
    text = (BENCH / "asv.conf.json").read_text()
    conf = json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))
    assert (BENCH / conf["benchmark_dir"]) == suite and conf["version"] == 1
    assert len(_speed_suite()) >= 4


@pytest.mark.parametrize("cls", _speed_suite(), ids=lambda c: c.__name__)
def test_every_speed_benchmark_runs_once_at_its_smallest_size(cls, monkeypatch):
    """As ``asv run --quick`` would, without asv: ``setup_cache`` (for the smallest size only), ``setup`` then every
    ``time_`` / ``peakmem_`` / ``track_`` method at the first parameter set; a tracked value is a share."""
    bench = cls()
    p = cls.params[0][0]  # one parameter, its first value
    module = sys.modules[cls.__module__]
    monkeypatch.setattr(module, "CELLS", [p])  # what setup_cache prepares
    if hasattr(cls, "setup_cache"):  # the globals it reads are the patched module's
        assert cls.setup_cache.__globals__ is vars(module)
    cached = (bench.setup_cache(),) if hasattr(cls, "setup_cache") else ()
    bench.setup(*cached, p)
    methods = [m for m in dir(cls) if m.startswith(("time_", "peakmem_", "track_"))]
    assert methods
    for name in methods:
        value = getattr(bench, name)(*cached, p)
        if name.startswith("track_"):
            assert 0.0 <= value <= 1.0, (name, value)
