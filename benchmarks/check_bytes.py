"""Fingerprint hdtwd's outputs, so that two source trees can be shown to write the same bytes.

Made for a restructuring of the package (modules moved between subpackages), which must not
change one byte of what hdtwd writes or returns. The script touches hdtwd only through its stable
surfaces, never through internal module paths (those are what moves):

- the command line, ``python -m hdtwd_cli ...`` run as a subprocess;
- the documented top-level API (``import hdtwd_cli as hd``: ``learn_tree``, ``distances``,
  ``tree_vectors``, ``knn_graph``, ``neighbors``, ``classify``, ``embed``, ``decode_tree``,
  ``Tree``, ``TreeParams``), run in a subprocess of this same script (``--api-worker``).

Every subprocess gets ``PYTHONPATH=SOURCE`` (nothing else on it), runs in an empty temporary
folder (so neither the current directory nor the editable install can supply ``hdtwd_cli``), with
``PYTHONDONTWRITEBYTECODE=1`` and a fresh numba cache in that temporary folder (nothing is written
into the source trees, and no machine code compiled from another tree can be reused). Before
anything runs, the script checks that ``hdtwd_cli.__file__`` lies under SOURCE and prints it.

Usage (from the repository root; about 5 minutes on 2 cores with the shared text sets, 2 without)::

    .venv/bin/python benchmarks/check_bytes.py --source /work/baseline --out A.json
    .venv/bin/python benchmarks/check_bytes.py --source . --out B.json
    .venv/bin/python benchmarks/check_bytes.py --compare A.json B.json   # exit 1 on any difference

``benchmarks/bytes_891c1c9.json`` is the reference (commit 891c1c9). ``--only REGEX`` runs the
matching cases alone; ``--keep DIR`` keeps every output for inspection. Stability is checked the
same way: two runs of one tree, then ``--compare``. A command that fails is recorded as
``CASE:error`` (the run goes on, then exits 1); ``--compare`` counts it as a difference.

Cases (keys ``CASE:FILE``, ``CASE:stdout``/``stderr`` with ``#STEP`` in multi-step cases, and
``api/DATA/RESULT``). Inputs: ``sample_data/`` of this checkout (cells.h5ad, produce.csv,
corpus.npz, corpus.mtx: the same files for both trees) and the shared text sets BBCSPORT and
CLASSIC when ``--text-data`` holds them (skipped with a message otherwise):

- ``cli/<data>/distance`` (cells, produce, corpus.npz, bbcsport, classic): ``distance -o D.npy
  --save-tree tree.h5 --newick tree.nwk``; for bbcsport also ``--tree tree.h5 --knn 15`` into
  ``.npz`` and ``.h5ad``. CLASSIC has this case alone (60-80 s; its exact kNN search, a 2-split
  classify or the API would take about 2 minutes each);
- ``cli/<data>/knn`` (cells, produce, corpus.npz): ``distance --knn 15`` (learning the tree) into
  both documented graph formats, ``.npz`` and ``.h5ad``;
- ``cli/<data>/classify`` (cells: ``obs:cell_type``, produce: ``produce_labels.txt``, bbcsport:
  ``obs:label`` with ``--splits 2``): ``--json report.json`` and the table on stdout;
- ``cli/<data>/embed`` (cells, produce, corpus.npz): ``embed``, ``decode-tree --newick``,
  ``distance --tree tree.h5 -o D.h5``;
- options: ``--reference``, ``embed --preset paper --eps 2 --scales 7``, ``distance --preset
  paper``, ``--linkage average --denoise 10 --transform log1p`` with a Nexus tree, ``--learner
  average``, ``--dtype float32`` (from ``.mtx``), ``-o D.csv``, ``--landmarks 40 --landmark-method
  kmeans``, standard
  input to standard output, a classify ``--eps 0.1,1,5 --scales 3,7`` grid; ``--version``;
- ``api/<data>/...`` (cells, produce, corpus.npz): ``learn_tree`` (default, ``TreeParams`` with
  landmarks, denoise, single linkage, the paper preset), the tree's arrays, ``Tree.write`` and
  ``Tree.read``, ``distances`` (float64 on the tree, float32 learning it), ``tree_vectors``,
  ``knn_graph`` (``indices``, ``distances``, ``distance_matrix()``, ``connectivities()``),
  ``embed`` + ``FeatureEmbedding.write`` + ``decode_tree`` (its own and average linkage),
  ``neighbors`` written to ``.h5ad`` (cells), ``classify`` with 2 splits (cells, produce); on
  bbcsport the first five of these (``learn_tree`` to ``knn_graph``);
- ``input/<file>``: the inputs themselves, so that a change of data is not taken for a change of code.

Fingerprints (``sha256`` decides; ``parts`` only say where two fingerprints differ):

- files (``.npy``, ``.npz``, ``.csv``, ``.nwk``, ``.nex``, ``.h5``, ``.h5ad``, ``.json``) and the
  commands' stdout / stderr: SHA-256 of the raw bytes. HDF5 outputs (``tree.h5``, ``emb.h5``,
  ``D.h5``, ``.h5ad``) are raw bytes too: two runs of one tree, 7 minutes apart, gave the same
  bytes (hdtwd writes no timestamps, ``track_times=False``; anndata's files carried none either,
  and ``input_path`` holds the file's name only), so no field is excluded, ``hdtwd_version`` included (a restructuring keeps the version). Their ``parts`` are
  per-dataset and per-attribute digests, and ``content`` one digest of them all: ``--compare``
  says "bytes only" when the bytes differ but every dataset and attribute is equal;
- JSON reports: raw bytes, unless they hold timing fields (keys in ``fingerprints.TIMING_KEYS``; hdtwd's
  ``classify`` report has none today): these alone are dropped and the rest re-serialised;
- API results: arrays as dtype, shape and C-order bytes; sparse matrices as format, shape and
  their arrays as stored; trees as their documented fields (``parent``, ``length``,
  ``merge_height``, ``feature_weights``, ``leaf_names``, ``metadata``), ``to_newick()`` and the
  bytes of ``Tree.write``; dicts (``classify``'s report) as JSON in their own key order.

The bits are those of this machine's CPU kind (README: BLAS stages may round differently on
another one); compare runs of one machine (``--compare`` notes a different CPU).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fingerprints import Fingerprint, fingerprint_bytes, fingerprint_file, fingerprint_tree, fingerprint_value

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent / "sample_data"
DEFAULT_TEXT = Path("/work/shared/data/text")

#: Command-line flags whose value is a file the command writes (fingerprinted after the case).
OUTPUT_FLAGS = frozenset({"-o", "--output", "--save-tree", "--newick", "--json"})
#: Environment variables that would change what hdtwd does or where Python imports from.
SCRUBBED_ENV = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONSAFEPATH",
    "DASK_SCHEDULER_ADDRESS",
    "HDTWD_MEMORY_LIMIT",
)
K = "15"  # --knn / n_neighbors


# ---------------------------------------------------------------------------------------------
# cases


@dataclass(frozen=True)
class Dataset:
    name: str
    path: Path
    labels: str | Path | None = None  # --labels value: "obs:COLUMN" or a file
    heavy: bool = False  # large: the tree is learned once per case and reused with --tree


@dataclass(frozen=True)
class Step:
    args: tuple[str, ...]  # arguments of python -m hdtwd_cli
    stdin: Path | None = None

    @property
    def outputs(self) -> list[str]:
        return [v for flag, v in zip(self.args, self.args[1:]) if flag in OUTPUT_FLAGS and v != "-"]


def step(*parts: str | Path, stdin: Path | None = None) -> Step:
    """hdtwd's arguments: text split on spaces, paths kept whole (``step("distance", data, "-o D.npy")``)."""
    return Step(tuple(a for p in parts for a in ([str(p)] if isinstance(p, Path) else p.split())), stdin)


@dataclass(frozen=True)
class CliCase:
    """Commands run one after the other in one empty folder; their files, stdout and stderr fingerprinted."""

    name: str
    steps: tuple[Step, ...]

    def run(self, runner: Runner, cwd: Path) -> dict[str, Fingerprint]:
        out: dict[str, Fingerprint] = {}
        for i, s in enumerate(self.steps):
            proc = runner.run(["-m", "hdtwd_cli", *s.args], cwd, stdin=s.stdin)
            tag = f"#{i}" if len(self.steps) > 1 else ""
            for stream, data in (("stdout", proc.stdout), ("stderr", proc.stderr)):
                if data:
                    out[f"{self.name}:{stream}{tag}"] = fingerprint_bytes(data)
            if proc.returncode != 0:
                raise CaseError(f"hdtwd {' '.join(s.args)} exited {proc.returncode}: {last_line(proc.stderr)}")
        for name in dict.fromkeys(o for s in self.steps for o in s.outputs):
            out[f"{self.name}:{name}"] = fingerprint_file(cwd / name)
        return out


@dataclass(frozen=True)
class ApiCase:
    """The Python API on one data set, in a subprocess of this script (``--api-worker``)."""

    name: str
    data: Dataset

    def run(self, runner: Runner, cwd: Path) -> dict[str, Fingerprint]:
        args = [
            str(Path(__file__).resolve()),
            "--api-worker",
            str(self.data.path),
            "--source",
            str(runner.source),
            "--out",
            "api.json",
            *(["--labels", str(self.data.labels)] if self.data.labels else []),
            *(["--heavy"] if self.data.heavy else []),
        ]
        proc = runner.run(args, cwd)
        if proc.returncode != 0:
            raise CaseError(f"API worker exited {proc.returncode}: {last_line(proc.stderr)}")
        found = json.loads((cwd / "api.json").read_text())
        return {f"{self.name}/{key}": fp for key, fp in found.items()}


Case = CliCase | ApiCase


class CaseError(RuntimeError):
    """A command of a case failed: recorded as the case's result, the run goes on."""


def last_line(data: bytes) -> str:
    lines = data.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else "(no message)"


def sample_datasets(data_dir: Path) -> dict[str, Dataset]:
    return {
        "cells": Dataset("cells", data_dir / "cells.h5ad", "obs:cell_type"),
        "produce": Dataset("produce", data_dir / "produce.csv", data_dir / "produce_labels.txt"),
        "corpus.npz": Dataset("corpus.npz", data_dir / "corpus.npz"),
        "corpus.mtx": Dataset("corpus.mtx", data_dir / "corpus.mtx"),
    }


def text_datasets(text_dir: Path) -> tuple[list[Dataset], list[str]]:
    """BBCSPORT and CLASSIC where present, and a message for each one absent."""
    found, missing = [], []
    for name in ("bbcsport", "classic"):
        path = text_dir / f"{name}.h5ad"
        if path.is_file():
            found.append(Dataset(name, path, "obs:label", heavy=True))
        else:
            missing.append(f"{path} absent: the {name} cases are skipped")
    return found, missing


def learn_step(d: Dataset) -> Step:
    return step("distance", d.path, "-o D.npy --save-tree tree.h5 --newick tree.nwk")


def standard_cases(
    d: Dataset, *, knn: bool = True, classify: bool = True, embed: bool = True, api: bool = True
) -> list[Case]:
    """distance (+ tree files), kNN graphs, classify, embed + decode-tree and the API on one data set."""
    p = f"cli/{d.name}"
    graphs = [f"--knn {K} -o knn.npz", f"--knn {K} -o knn.h5ad"]
    if d.heavy:  # learn once; the graphs come from the stored tree
        stored = [step("distance", d.path, "--tree tree.h5", g) for g in graphs] if knn else []
        cases: list[Case] = [CliCase(f"{p}/distance", (learn_step(d), *stored))]
    else:
        cases = [CliCase(f"{p}/distance", (learn_step(d),))]
        if knn:
            cases.append(CliCase(f"{p}/knn", tuple(step("distance", d.path, g) for g in graphs)))
    if classify and d.labels:
        splits = "--splits 2" if d.heavy else ""
        cases.append(
            CliCase(f"{p}/classify", (step("classify", d.path, "--labels", d.labels, "--json report.json", splits),))
        )
    if embed:
        embed_steps = (
            step("embed", d.path, "-o emb.h5"),
            step("decode-tree emb.h5 -o tree.h5 --newick tree.nwk"),
            step("distance", d.path, "--tree tree.h5 -o D.h5"),
        )
        cases.append(CliCase(f"{p}/embed", embed_steps))
    if api:
        cases.append(ApiCase(f"api/{d.name}", d))
    return cases


def build_cases(data_dir: Path, text: Sequence[Dataset]) -> list[Case]:
    s = sample_datasets(data_dir)
    cells, produce, npz, mtx = s["cells"], s["produce"], s["corpus.npz"], s["corpus.mtx"]
    cases: list[Case] = [CliCase("cli/version", (step("--version"),))]
    cases += standard_cases(cells) + standard_cases(produce) + standard_cases(npz)
    one = {  # single commands: name -> (data, options)
        "cli/cells/preset-paper": (cells, "-o D.npy --preset paper --newick tree.nwk"),
        "cli/cells/options": (cells, "-o D.npy --linkage average --denoise 10 --transform log1p --save-tree tree.nex"),
        "cli/cells/learner-average": (cells, "-o D.npy --learner average --save-tree tree.h5 --newick tree.nwk"),
        "cli/corpus.mtx/float32": (mtx, "-o D.npy --dtype float32 --save-tree tree.h5 --newick tree.nwk"),
        "cli/corpus.npz/csv": (npz, "-o D.csv --save-tree tree.nex"),
        "cli/corpus.npz/landmarks": (npz, "-o D.npy --landmarks 40 --landmark-method kmeans --newick tree.nwk"),
    }
    cases += [CliCase(name, (step("distance", d.path, options),)) for name, (d, options) in one.items()]
    cross = step("distance", cells.path, "--tree tree.h5 --reference", cells.path, "-o C.npy")
    paper = step("embed", cells.path, "-o emb.h5 --preset paper --eps 2 --scales 7")
    assert produce.labels is not None
    grid = step("classify", produce.path, "--labels", produce.labels, "--eps 0.1,1,5 --scales 3,7 --json report.json")
    cases += [
        CliCase("cli/cells/reference", (learn_step(cells), cross)),
        CliCase("cli/cells/embed-paper", (paper, step("decode-tree emb.h5 -o tree.h5 --newick tree.nwk"))),
        CliCase("cli/produce/stdin", (step("distance - -o -", stdin=produce.path),)),
        CliCase("cli/produce/classify-grid", (grid,)),
    ]
    for d in text:  # CLASSIC: the distance case alone (its kNN, classify or API would take 2 min each)
        small = d.name == "bbcsport"
        cases += standard_cases(d, knn=small, classify=small, embed=False, api=small)
    return cases


# ---------------------------------------------------------------------------------------------
# running one source tree


@dataclass
class Runner:
    """Runs the interpreter on the source tree: PYTHONPATH=source, private numba cache, no bytecode."""

    python: str
    source: Path
    numba_cache: Path

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
        env.update(
            PYTHONPATH=str(self.source),
            PYTHONDONTWRITEBYTECODE="1",
            NUMBA_CACHE_DIR=str(self.numba_cache),
            COLUMNS="100",
            NO_COLOR="1",
        )
        return env

    def run(self, args: Sequence[str], cwd: Path, stdin: Path | None = None) -> subprocess.CompletedProcess[bytes]:
        with open(stdin or os.devnull, "rb") as f:
            return subprocess.run([self.python, *args], cwd=cwd, env=self.env, stdin=f, capture_output=True)

    def identify(self, cwd: Path) -> dict[str, str]:
        """Where ``hdtwd_cli`` is imported from (must be under the source) and its version."""
        code = "import json, hdtwd_cli as h; print(json.dumps({'file': h.__file__, 'version': h.__version__}))"
        proc = self.run(["-c", code], cwd)
        if proc.returncode != 0:
            raise SystemExit(f"hdtwd_cli does not import from {self.source}:\n{proc.stderr.decode(errors='replace')}")
        found = json.loads(proc.stdout)
        if not Path(found["file"]).resolve().is_relative_to(self.source):
            raise SystemExit(f"PYTHONPATH={self.source} lost: hdtwd_cli was imported from {found['file']}")
        return found


def git_describe(source: Path) -> dict[str, Any]:
    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD") or None, "modified_files": len(status.splitlines())}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@contextmanager
def workspace(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep.resolve()
        return
    root = Path(tempfile.mkdtemp(prefix="hdtwd-check-bytes-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_source(
    source: Path, python: str, data_dir: Path, text_dir: Path, out: Path, only: str | None, keep: Path | None
) -> int:
    text, skipped = text_datasets(text_dir)
    for message in skipped:
        print(f"check_bytes: {message}", file=sys.stderr)
    cases = [c for c in build_cases(data_dir, text) if only is None or re.search(only, c.name)]
    results: dict[str, Fingerprint] = {}
    inputs = [*sample_datasets(data_dir).values(), *text]
    for path in sorted({d.path for d in inputs} | {data_dir / "produce_labels.txt"}):
        results[f"input/{path.name}"] = fingerprint_bytes(path.read_bytes())
    timings: dict[str, float] = {}
    failures = 0
    start = time.perf_counter()
    with workspace(keep) as root:
        runner = Runner(python, source.resolve(), root / "numba-cache")
        found = runner.identify(root)
        print(f"check_bytes: hdtwd_cli {found['version']} from {found['file']}", file=sys.stderr)
        for case in cases:
            cwd = root / re.sub(r"[^A-Za-z0-9.-]+", "_", case.name)
            cwd.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            status = "ok"
            try:
                results.update(case.run(runner, cwd))
            except (CaseError, OSError) as e:
                failures += 1
                status = f"FAILED: {e}"
                results[f"{case.name}:error"] = {"sha256": None, "error": str(e)}
            timings[case.name] = round(time.perf_counter() - t0, 2)
            print(f"check_bytes: {timings[case.name]:7.1f} s  {case.name}  {status}", file=sys.stderr)
    total = round(time.perf_counter() - start, 1)
    meta = {
        "source": str(source.resolve()),
        "hdtwd_cli": found,
        "git": git_describe(source.resolve()),
        "python": python,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "skipped": skipped,
        "total_s": total,
        "case_s": timings,
    }
    out.write_text(json.dumps({"meta": meta, "cases": dict(sorted(results.items()))}, indent=1) + "\n")
    print(
        f"check_bytes: {len(results)} fingerprints of {len(cases)} cases in {total} s -> {out}"
        + (f"; {failures} case(s) FAILED" if failures else ""),
        file=sys.stderr,
    )
    return 1 if failures else 0


# ---------------------------------------------------------------------------------------------
# the API worker (a subprocess with PYTHONPATH=SOURCE)


def load_data(path: Path, labels: str | None) -> tuple[Any, list[str] | None, Any, list[str] | None]:
    """Matrix, feature names, AnnData (``.h5ad`` only) and labels, read without hdtwd."""
    adata = None
    if path.suffix == ".h5ad":
        import anndata

        adata = anndata.read_h5ad(path)
        X, names = adata.X, list(map(str, adata.var_names))
    elif path.suffix == ".npz":
        import scipy.sparse

        X, names = scipy.sparse.load_npz(path), None
    elif path.suffix == ".csv":
        with open(path, newline="") as f:
            header, *rows = list(csv.reader(f))
        X, names = np.array([[float(v) for v in r[1:]] for r in rows]), header[1:]
    else:
        raise SystemExit(f"the API worker reads .h5ad, .npz and .csv, not {path}")
    y = None
    if labels and labels.startswith("obs:"):
        y = list(map(str, adata.obs[labels[4:]])) if adata is not None else None
    elif labels:
        y = Path(labels).read_text().splitlines()
    return X, names, adata, y


def api_fingerprints(path: Path, labels: str | None, heavy: bool, work: Path) -> dict[str, Fingerprint]:
    import hdtwd_cli as hd

    X, names, adata, y = load_data(path, labels)
    out: dict[str, Fingerprint] = {}
    tree = hd.learn_tree(X, names)
    out["learn_tree"] = fingerprint_tree(tree, work / "tree.h5")
    out["Tree.read"] = fingerprint_tree(hd.Tree.read(str(work / "tree.h5")), work / "tree-read.h5")
    out["distances"] = fingerprint_value(hd.distances(X, tree, feature_names=names))
    out["tree_vectors"] = fingerprint_value(hd.tree_vectors(tree, X, names))
    graph = hd.knn_graph(X, int(K), tree=tree, feature_names=names)
    out |= {
        "knn_graph.indices": fingerprint_value(graph.indices),
        "knn_graph.distances": fingerprint_value(graph.distances),
        "knn_graph.distance_matrix": fingerprint_value(graph.distance_matrix()),
        "knn_graph.connectivities": fingerprint_value(graph.connectivities()),
    }
    if heavy:
        return out
    m = X.shape[1]
    variants = {
        "landmarks": hd.TreeParams(landmarks=min(40, m // 2)),
        "denoise": hd.TreeParams(denoise=min(10, m // 2)),
        "single": hd.TreeParams(linkage="single"),
        "paper": hd.TreeParams.from_preset("paper"),
    }
    for label, params in variants.items():
        out[f"learn_tree[{label}]"] = fingerprint_tree(hd.learn_tree(X, names, params=params), work / f"{label}.h5")
    out["distances[learned,float32]"] = fingerprint_value(hd.distances(X, feature_names=names, dtype="float32"))
    emb = hd.embed(X, names)
    emb.write(str(work / "emb.h5"))
    out["embed.write"] = fingerprint_file(work / "emb.h5")
    out["decode_tree"] = fingerprint_tree(hd.decode_tree(emb), work / "decoded.h5")
    out["decode_tree[average]"] = fingerprint_tree(hd.decode_tree(emb, linkage="average"), work / "average.h5")
    if adata is not None:
        hd.neighbors(adata, int(K))
        adata.write_h5ad(work / "neighbors.h5ad")
        out["neighbors"] = fingerprint_file(work / "neighbors.h5ad")
    if y is not None:
        out["classify"] = fingerprint_value(hd.classify(X, y, names, splits=2))
    return out


def api_worker(path: Path, labels: str | None, heavy: bool, source: Path, out: Path) -> int:
    if sys.path and Path(sys.path[0] or ".").resolve() == HERE:
        del sys.path[0]  # benchmarks/ holds scripts whose names could shadow modules
    import hdtwd_cli

    if not Path(hdtwd_cli.__file__).resolve().is_relative_to(source.resolve()):
        raise SystemExit(f"API worker: hdtwd_cli imported from {hdtwd_cli.__file__}, not from {source}")
    out.write_text(json.dumps(api_fingerprints(path, labels, heavy, out.resolve().parent)))
    return 0


# ---------------------------------------------------------------------------------------------
# comparing two runs


def verdict(a: Fingerprint | None, b: Fingerprint | None) -> tuple[bool, str]:
    """(same, detail) for one case of two runs."""
    if a is None or b is None:
        return False, f"only in {'B' if a is None else 'A'}"
    if a.get("error") or b.get("error"):
        return False, "; ".join(f"{w} failed: {f['error']}" for w, f in (("A", a), ("B", b)) if f.get("error"))
    if a["sha256"] == b["sha256"]:
        return True, ""
    pa, pb = a.get("parts", {}), b.get("parts", {})
    changed = sorted(k for k in pa.keys() | pb.keys() if pa.get(k) != pb.get(k))
    if pa and not changed:
        return False, "bytes only: every part equal"
    if changed:
        more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
        return False, "parts: " + ", ".join(changed[:4]) + more
    sizes = f"size {a.get('size')} vs {b.get('size')}" if a.get("size") != b.get("size") else ""
    shapes = f"shape {a.get('shape')} vs {b.get('shape')}" if a.get("shape") != b.get("shape") else ""
    return False, sizes or shapes


def compare(path_a: Path, path_b: Path) -> int:
    runs = [json.loads(p.read_text()) for p in (path_a, path_b)]
    for tag, path, run in zip("AB", (path_a, path_b), runs):
        m = run["meta"]
        print(
            f"{tag}: {path}  source {m['source']} ({m['git']['commit'] or 'no git'}, "
            f"{m['git']['modified_files']} modified files), hdtwd_cli from {m['hdtwd_cli']['file']}, "
            f"{m['total_s']} s"
        )
    if runs[0]["meta"]["cpu"] != runs[1]["meta"]["cpu"]:
        print(f"note: other CPUs ({runs[0]['meta']['cpu']} / {runs[1]['meta']['cpu']}): BLAS bits may differ")
    a, b = runs[0]["cases"], runs[1]["cases"]
    rows = [(key, *verdict(a.get(key), b.get(key))) for key in sorted(a.keys() | b.keys())]
    width = max(len(key) for key, _, _ in rows)
    print(f"\n{'case':<{width}}  result   detail")
    for key, same, detail in rows:
        print(f"{key:<{width}}  {'same' if same else 'DIFFERS':<7}  {detail}".rstrip())
    differ = sum(not same for _, same, _ in rows)
    print(f"\n{len(rows) - differ} same, {differ} differ")
    return 1 if differ else 0


# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="See the module docstring for the cases and the fingerprints.",
    )
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--source", type=Path, help="source tree to test (run with PYTHONPATH=SOURCE)")
    mode.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("A.json", "B.json"),
        help="compare two fingerprint files; exit 1 on any difference",
    )
    ap.add_argument("--out", type=Path, help="fingerprint file to write (JSON)")
    ap.add_argument("--python", default=sys.executable, help="interpreter to run hdtwd with [default: this one]")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="sample data [default: %(default)s]")
    ap.add_argument(
        "--text-data",
        type=Path,
        default=DEFAULT_TEXT,
        help="folder of bbcsport.h5ad / classic.h5ad, skipped if absent [default: %(default)s]",
    )
    ap.add_argument("--only", metavar="REGEX", help="run only the cases whose name matches")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="write the outputs here and keep them")
    ap.add_argument("--api-worker", type=Path, metavar="DATA", help=argparse.SUPPRESS)  # with --source, --out
    ap.add_argument("--labels", help=argparse.SUPPRESS)
    ap.add_argument("--heavy", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        ap.error("--out is required with --source")
    if args.api_worker:
        return api_worker(args.api_worker, args.labels, args.heavy, args.source, args.out)
    return run_source(args.source, args.python, args.data.resolve(), args.text_data, args.out, args.only, args.keep)


if __name__ == "__main__":
    sys.exit(main())
