"""Damaged inputs for every file hdtwd reads, and a fork server that runs the command on each.

Shared by ``tests/test_fuzz.py`` (a few hundred cases in the suite) and
``benchmarks/fuzz_readers.py`` (the long run). Nothing in the package knows about it.

- :func:`seed_files` writes small valid files in every input format hdtwd takes (matrices, 10x
  directories and Cell Ranger ``.h5``, ``.h5ad`` with ``X`` / layers / ``raw``, trees as ``.h5`` /
  Newick / Nexus, feature embeddings, label files, the embedding ``hdtwd embed`` writes) with the
  command that reads each;
- :func:`mutate` damages one file at random (seeded): bytes flipped, cut, inserted, deleted or
  repeated, number tokens replaced by ``nan`` / ``-1`` / ``1e999`` / ``0x1f`` / quotes /
  parentheses, gzip members damaged before or after compression, and HDF5 datasets deleted,
  reshaped, retyped, or given NaN, negative or huge values;
- :class:`Server` runs ``hdtwd`` in a forked child of one warm interpreter per case (a crash or a
  hang ends the child, not the run; every case starts from the same process state), and
  :func:`verdict` checks what a case must show: a documented exit code (never 1 or a signal), no
  traceback, one ``hdtwd: error:`` line on failure, no output and no temporary file after a
  failure, a valid matrix after a success.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: The exit codes hdtwd documents for a run that did not succeed (docs/usage.md); 1 is a bug.
DOCUMENTED_FAILURES = {2, 3, 4}
#: Seconds after which a case counts as hung (a safety net far above any case's work).
HANG_S = 120

N_SAMPLES, N_FEATURES = 24, 14


@dataclass(frozen=True)
class Seed:
    """A valid input (``path``: a file, or a directory whose files are damaged one at a time) and the
    command that reads it (``argv``, with ``{F}`` for the input and ``{OUT}`` for the output folder)."""

    name: str
    path: Path
    argv: tuple[str, ...]
    output: str = "D.npy"
    #: The result is a symmetric matrix with a zero diagonal (False: cross distances to a reference).
    symmetric: bool = True


def _counts() -> np.ndarray:
    rng = np.random.default_rng(11)
    X = rng.poisson(1.5, size=(N_SAMPLES, N_FEATURES)) * (rng.random((N_SAMPLES, N_FEATURES)) < 0.6)
    X[np.arange(N_SAMPLES), np.arange(N_SAMPLES) % N_FEATURES] += 1
    return X.astype(np.int64)


def _names() -> list[str]:
    return [f"g{j}" for j in range(N_FEATURES)]


def _hdtwd(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "hdtwd_cli", *args, "-q"], check=True)


def seed_files(folder: Path) -> list[Seed]:
    """Write one small valid file per input format into ``folder``; the seeds in a fixed order."""
    import anndata
    import scipy.io
    import scipy.sparse as sp

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_formats import write_10x_dir, write_10x_h5

    f = Path(folder)
    X = _counts()
    names = _names()
    dist = ("distance", "{F}", "-o", "{OUT}/D.npy")
    seeds: list[Seed] = []

    def add(name: str, path: Path, argv: tuple[str, ...] = dist, output: str = "D.npy", symmetric: bool = True) -> None:
        seeds.append(Seed(name, path, argv, output, symmetric))

    np.save(f / "m.npy", X.astype(np.float64))
    add("npy", f / "m.npy")
    header = ",".join(["cell", *names])
    rows = [f"c{i}," + ",".join(str(v) for v in X[i]) for i in range(N_SAMPLES)]
    (f / "m.csv").write_text("\n".join([header, *rows]) + "\n")
    add("csv", f / "m.csv")
    (f / "m.tsv").write_text("\n".join(r.replace(",", "\t") for r in [header, *rows]) + "\n")
    add("tsv", f / "m.tsv")
    with gzip.open(f / "m.csv.gz", "wt") as fh:
        fh.write("\n".join([header, *rows]) + "\n")
    add("csv.gz", f / "m.csv.gz")
    sp.save_npz(f / "m.npz", sp.csr_matrix(X.astype(np.float64)))
    add("npz", f / "m.npz")
    np.savez(f / "dense.npz", X.astype(np.float64))
    add("npz-dense", f / "dense.npz")
    scipy.io.mmwrite(f / "m.mtx", sp.coo_matrix(X), field="integer")
    add("mtx", f / "m.mtx")
    with open(f / "m.mtx", "rb") as src, gzip.open(f / "m.mtx.gz", "wb") as dst:
        dst.write(src.read())
    add("mtx.gz", f / "m.mtx.gz")
    ad = anndata.AnnData(X=sp.csr_matrix(np.log1p(X).astype(np.float32)), layers={"counts": X.astype(np.float32)})
    ad.obs_names = [f"c{i}" for i in range(N_SAMPLES)]
    ad.var_names = names
    ad.obs["type"] = [f"t{i % 3}" for i in range(N_SAMPLES)]
    ad.raw = anndata.AnnData(X=sp.csr_matrix(X.astype(np.float32)), var=ad.var.copy())
    ad.write_h5ad(f / "m.h5ad")
    add("h5ad", f / "m.h5ad")
    add("h5ad-layer", f / "m.h5ad", ("distance", "{F}", "--layer", "counts", "-o", "{OUT}/D.npy"))
    add("h5ad-raw", f / "m.h5ad", ("distance", "{F}", "--use-raw", "-o", "{OUT}/D.npy"))
    write_10x_h5(str(f / "tenx.h5"))
    add("10x-h5", f / "tenx.h5")
    write_10x_dir(str(f / "tenx"))
    add("10x-dir", f / "tenx")
    write_10x_dir(str(f / "tenx2"), v2=True)
    add("10x-dir-v2", f / "tenx2")
    data = str(f / "m.csv")
    _hdtwd("distance", data, "--save-tree", str(f / "t.h5"), "--newick", str(f / "t.nwk"), "-o", str(f / "_D.npy"))
    _hdtwd("distance", data, "--save-tree", str(f / "t.nex"), "-o", str(f / "_D.npy"))
    on_tree = ("distance", data, "--tree", "{F}", "-o", "{OUT}/D.npy")
    add("tree-h5", f / "t.h5", on_tree)
    add("tree-newick", f / "t.nwk", on_tree)
    add("tree-nexus", f / "t.nex", on_tree)
    rng = np.random.default_rng(3)
    V = rng.normal(size=(N_FEATURES, 4))
    (f / "vec.txt").write_text("".join(f"{n} " + " ".join(f"{v:.5f}" for v in row) + "\n" for n, row in zip(names, V)))
    emb = ("distance", data, "--feature-embedding", "{F}", "-o", "{OUT}/D.npy")
    add("embedding-txt", f / "vec.txt", emb)
    np.savez(f / "vec.npz", vectors=V, names=np.array(names))
    add("embedding-npz", f / "vec.npz", emb)
    (f / "labels.txt").write_text("".join(f"t{i % 3}\n" for i in range(N_SAMPLES)))
    add(
        "labels",
        f / "labels.txt",
        (
            "classify",
            data,
            "--labels",
            "{F}",
            "--splits",
            "2",
            "--k",
            "1,3",
            "--methods",
            "hdtwd,l1",
            "--json",
            "{OUT}/r.json",
        ),
        "r.json",
    )
    reference = ("distance", data, "--tree", str(f / "t.h5"), "--reference", "{F}", "-o", "{OUT}/D.npy")
    add("reference", f / "m.csv", reference, symmetric=False)
    _hdtwd("embed", data, "-o", str(f / "e.h5"))
    add("embedding-h5", f / "e.h5", ("decode-tree", "{F}", "-o", "{OUT}/T.h5"), "T.h5")
    for p in f.glob("_D.npy"):
        p.unlink()
    return seeds


# --------------------------------------------------------------------------------------------
# mutations

_NUMBER = re.compile(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?")
_REPLACEMENTS = (b"nan", b"-1", b"1e999", b"0x1f", b'"', b"(", b")", b"", b"-0", b"inf", b"1e-320", b"\x00")


def _mutate_bytes(data: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    """One byte-level damage of ``data``."""
    n = len(data)
    kind = str(rng.choice(["flip", "truncate", "insert", "delete", "duplicate", "nul", "token", "token"]))
    if n == 0:
        return bytes(rng.integers(0, 256, 16, dtype=np.uint8)), "random"
    if kind == "token":
        hits = list(_NUMBER.finditer(data))
        if hits:
            m = hits[int(rng.integers(len(hits)))]
            new = _REPLACEMENTS[int(rng.integers(len(_REPLACEMENTS)))]
            return data[: m.start()] + new + data[m.end() :], f"token {m.group()!r}->{new!r}"
        kind = "flip"
    i = int(rng.integers(n))
    if kind == "flip":
        b = bytearray(data)
        for _ in range(int(rng.integers(1, 9))):
            j = int(rng.integers(n))
            b[j] ^= 1 << int(rng.integers(8))
        return bytes(b), "flip"
    if kind == "truncate":
        return data[:i], f"truncate at {i}"
    if kind == "insert":
        return data[:i] + bytes(rng.integers(0, 256, int(rng.integers(1, 64)), dtype=np.uint8)) + data[i:], "insert"
    if kind == "delete":
        return data[:i] + data[i + int(rng.integers(1, 64)) :], "delete"
    if kind == "nul":
        return data[:i] + b"\x00" * int(rng.integers(1, 16)) + data[i:], "nul"
    j = min(n, i + int(rng.integers(1, 256)))
    return data[:j] + data[i:j] + data[j:], "duplicate"


def _hdf5_datasets(path: Path) -> list[str]:
    import h5py

    found: list[str] = []
    with h5py.File(path, "r") as h:
        h.visititems(lambda name, obj: found.append(name) if isinstance(obj, h5py.Dataset) else None)
    return sorted(found)


def _mutate_hdf5(path: Path, rng: np.random.Generator) -> str:
    """Damage one dataset of an HDF5 file in place (its structure, not its bytes)."""
    import h5py

    names = _hdf5_datasets(path)
    if not names:
        return "no dataset"
    name = names[int(rng.integers(len(names)))]
    kind = str(
        rng.choice(["delete", "reshape", "retype", "nan", "negative", "huge", "shorten", "lengthen", "attr", "scalar"])
    )
    with h5py.File(path, "r+") as h:
        d = h[name]
        value = d[()]
        attrs = dict(d.attrs)
        if kind == "attr":
            if attrs:
                key = sorted(attrs)[int(rng.integers(len(attrs)))]
                d.attrs[key] = np.int64(-(10**12))
                return f"{name}: attribute {key} = -10^12"
            kind = "delete"
        del h[name]
        if kind == "delete":
            return f"{name}: deleted"
        arr = np.asarray(value)
        if kind == "reshape":
            new = arr.reshape(-1, 1) if arr.ndim == 1 else arr.reshape(-1)
        elif kind == "retype":
            new = np.array([b"x0"] * max(arr.size, 1)) if arr.dtype.kind != "S" else np.arange(max(arr.size, 1))
        elif kind == "scalar":
            new = np.array(7)
        elif kind == "shorten":
            new = arr.reshape(-1)[: max(arr.size // 2, 0)]
        elif kind == "lengthen":
            flat = arr.reshape(-1)
            new = np.concatenate([flat, flat[: max(1, flat.size // 3)]]) if flat.size else flat
        elif arr.dtype.kind in "iuf" and arr.size:
            new = arr.astype(np.float64 if kind == "nan" else np.int64 if arr.dtype.kind in "iu" else arr.dtype).copy()
            flat = new.reshape(-1)
            j = int(rng.integers(flat.size))
            with np.errstate(over="ignore"):  # 1e300 becomes inf in a float32 dataset: one more damage
                flat[j] = {"nan": np.nan, "negative": -5, "huge": 2**40 if flat.dtype.kind in "iu" else 1e300}[kind]
        else:
            new = arr
        h.create_dataset(name, data=new)
        for k, v in attrs.items():
            h[name].attrs[k] = v
    return f"{name}: {kind}"


def mutate(src: Path, dst: Path, rng: np.random.Generator) -> str:
    """Copy the seed ``src`` (a file or a 10x directory) to ``dst`` with one damage; what was done."""
    if src.is_dir():
        shutil.copytree(src, dst)
        files = sorted(p for p in dst.iterdir() if p.is_file())
        target = files[int(rng.integers(len(files)))]
        return f"{target.name}: " + mutate_file(target, rng)
    shutil.copyfile(src, dst)
    return mutate_file(dst, rng)


def mutate_file(path: Path, rng: np.random.Generator) -> str:
    """Damage one file in place: HDF5 by structure or bytes, gzip before or after compression."""
    data = path.read_bytes()
    if data[:8] == b"\x89HDF\r\n\x1a\n" and rng.random() < 0.7:
        return _mutate_hdf5(path, rng)
    if data[:2] == b"\x1f\x8b" and rng.random() < 0.5:
        inner, what = _mutate_bytes(gzip.decompress(data), rng)
        path.write_bytes(gzip.compress(inner, mtime=0))
        return "inside gzip: " + what
    new, what = _mutate_bytes(data, rng)
    path.write_bytes(new)
    return what


# --------------------------------------------------------------------------------------------
# running and judging


_SERVE = r"""
import json, os, signal, sys, traceback
import hdtwd_cli.cli._app as app
import anndata, h5py, scipy.io, scipy.sparse  # the readers' imports, loaded once before the forks
import scipy.linalg, scipy.sparse.linalg, threadpoolctl  # and the method's (imported on first use)
import hdtwd_cli._api, hdtwd_cli.cli._output, hdtwd_cli.evaluate._protocol, hdtwd_cli.knn._search
import hdtwd_cli.tree._learn, hdtwd_cli.twd._distance
print("ready", flush=True)
for line in sys.stdin:
    job = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # an empty standard input, never the jobs' pipe,
            sys.stdin = sys.__stdin__ = open(0, closefd=False)  # nor what the server's reader holds of it
            fd = os.open(job["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 2)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            os.chdir(job["cwd"])
            sys.argv = ["hdtwd", *job["argv"]]
            signal.alarm(job["hang_s"])
            app.main()
            os._exit(0)
        except SystemExit as e:
            os._exit(e.code if isinstance(e.code, int) else 0 if e.code is None else 99)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)
"""


class Server:
    """One warm interpreter that forks a child per command: a crash or a hang ends the child only.

    A child that runs past :data:`HANG_S` is ended by its own alarm (exit -14: a hang). Its standard input
    is empty; ``env`` is the server's environment, so the children's (default: this process's, one thread).
    """

    def __init__(self, env: dict[str, str] | None = None) -> None:
        if env is None:
            env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def run(self, argv: list[str], cwd: Path, stderr: Path) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        job = {"argv": argv, "cwd": str(cwd), "stderr": str(stderr), "hang_s": HANG_S}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return int(json.loads(self.proc.stdout.readline())["rc"])

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait()


def _valid_output(path: Path, symmetric: bool = True) -> str | None:
    """Why the output of a successful run is not valid (``None``: it is)."""
    if path.suffix == ".npy":
        try:
            D = np.load(path)
        except Exception as e:
            return f"unreadable output ({e})"
        if D.ndim != 2 or not np.all(np.isfinite(D)) or (D.size and D.min() < 0):
            return "output is not a finite non-negative matrix"
        if symmetric and not (D.shape[0] == D.shape[1] and np.allclose(D, D.T) and np.all(np.diag(D) == 0)):
            return "square output is not a symmetric matrix with a zero diagonal"
        return None
    if path.suffix == ".json":
        try:
            json.loads(path.read_text())
        except Exception as e:
            return f"unreadable JSON ({e})"
        return None
    import h5py

    try:
        with h5py.File(path, "r"):
            pass
    except Exception as e:
        return f"unreadable HDF5 ({e})"
    return None


def verdict(rc: int, stderr: str, out: Path, output: str, symmetric: bool = True) -> str | None:
    """What is wrong with a case (``None``: nothing)."""
    if rc == -14:
        return "hang"
    if rc < 0:
        return f"crash (signal {-rc})"
    if "Traceback" in stderr:
        return "traceback"
    if rc == 1 or "internal error" in stderr:
        return "internal error: " + stderr.strip().splitlines()[-1][:200] if stderr.strip() else "exit 1"
    left = sorted(p.name for p in out.iterdir())
    if rc == 0:
        if left != [output]:
            return f"success, but the output folder holds {left}"
        return _valid_output(out / output, symmetric)
    if rc not in DOCUMENTED_FAILURES and rc != 99:
        return f"undocumented exit code {rc}"
    if rc == 99:
        return "an exception escaped the command"
    errors = [ln for ln in stderr.splitlines() if ln.startswith("hdtwd: error:")]
    others = [ln for ln in stderr.splitlines() if ln and not ln.startswith("hdtwd: warning:")]
    if len(errors) != 1 or len(others) != 1:
        return f"expected one error line, got: {stderr.strip()[:300]!r}"
    if left:
        return f"exit {rc}, but the output folder holds {left}"
    return None


@dataclass
class Case:
    seed: str
    index: int
    damage: str
    rc: int
    problem: str | None
    message: str


def cases(
    seeds: list[Seed], work: Path, per_seed: int, rng_seed: int, server: Server, interleave: bool = False
) -> Iterator[Case]:
    """Run ``per_seed`` damaged copies of every seed; yield each case's outcome.

    ``interleave``: one case of every format in turn (a run stopped early has covered every format
    alike) instead of all of one format's cases first; each format's cases are the same either way."""
    # each format's damage depends on its name only: a subset of formats repeats its cases
    rngs = {seed.name: np.random.default_rng([rng_seed, zlib.crc32(seed.name.encode())]) for seed in seeds}
    order = (
        [(seed, i) for i in range(per_seed) for seed in seeds]
        if interleave
        else [(seed, i) for seed in seeds for i in range(per_seed)]
    )
    for seed, i in order:
        rng = rngs[seed.name]
        case = work / f"{seed.name}-{i}"
        case.mkdir()
        target = case / ("in" + ("" if seed.path.is_dir() else "".join(seed.path.suffixes)))
        damage = mutate(seed.path, target, rng)
        out = case / "out"
        out.mkdir()
        argv = [a.replace("{F}", str(target)).replace("{OUT}", str(out)) for a in seed.argv]
        err = case / "stderr.txt"
        rc = Server.run(server, argv, case, err)
        text = err.read_text(errors="replace")
        problem = verdict(rc, text, out, seed.output, seed.symmetric)
        yield Case(seed.name, i, damage, rc, problem, text.strip()[-300:])
        shutil.rmtree(case)


# --------------------------------------------------------------------------------------------
# limits: inputs that claim (or unpack to) far more than memory


@dataclass(frozen=True)
class Limit:
    """An input that must be refused quickly (``argv`` with ``{OUT}``; ``env``: extra variables)."""

    name: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


def limit_files(folder: Path, *, big: bool = False) -> list[Limit]:
    """Write the limit inputs into ``folder``; ``big`` adds the slow ones (a 10^7-node tree, a 2 GB
    gzip bomb) that the benchmark runs and the suite leaves out."""
    import h5py

    f = Path(folder)
    out = ("-o", "{OUT}/D.npy")
    found: list[Limit] = []
    with open(f / "claims.npy", "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (10**9, 10**9)})
        fh.write(b"\0" * 64)
    found.append(Limit(".npy header claiming 10^9 x 10^9", ("distance", str(f / "claims.npy"), *out)))
    header = "%%MatrixMarket matrix coordinate real general\n1000000000 1000000000 1000000000000\n1 1 1.0\n"
    (f / "claims.mtx").write_text(header)
    found.append(Limit(".mtx header claiming 10^9 x 10^9, 10^12 entries", ("distance", str(f / "claims.mtx"), *out)))
    with gzip.open(f / "claims.mtx.gz", "wt") as fh:
        fh.write(header)
    found.append(Limit(".mtx.gz, the same header", ("distance", str(f / "claims.mtx.gz"), *out)))
    (f / "dense.mtx").write_text("%%MatrixMarket matrix array real general\n100000 100000\n1.0\n")
    found.append(Limit(".mtx dense array header 10^5 x 10^5 (80 GB)", ("distance", str(f / "dense.mtx"), *out)))
    import anndata

    anndata.AnnData(X=np.ones((5, 4), dtype=np.float32)).write_h5ad(f / "claims.h5ad")
    with h5py.File(f / "claims.h5ad", "r+") as h:
        attrs = dict(h["X"].attrs)
        del h["X"]
        d = h.create_dataset("X", shape=(10**6, 10**6), dtype="f4", chunks=(256, 256))  # nothing stored
        for k, v in attrs.items():
            d.attrs[k] = v
    found.append(Limit(".h5ad whose X is declared 10^6 x 10^6 (4 TB)", ("distance", str(f / "claims.h5ad"), *out)))
    ad = anndata.AnnData(X=__import__("scipy.sparse").sparse.random(5, 4, density=0.5, format="csr", random_state=0))
    ad.write_h5ad(f / "nnz.h5ad")
    with h5py.File(f / "nnz.h5ad", "r+") as h:
        del h["X/data"], h["X/indices"]
        h.create_dataset("X/data", shape=(10**11,), dtype="f4", chunks=(1 << 16,))
        h.create_dataset("X/indices", shape=(10**11,), dtype="i4", chunks=(1 << 16,))
    found.append(Limit(".h5ad sparse X with 10^11 stored entries declared", ("distance", str(f / "nnz.h5ad"), *out)))
    with h5py.File(f / "claims10x.h5", "w") as h:
        g = h.create_group("matrix")
        g["data"], g["indices"], g["indptr"] = np.array([1], np.int32), np.array([0], np.int64), np.array([0, 1])
        g["shape"] = np.array([10**9, 10**9], np.int64)
        g["barcodes"] = np.array([b"a"])
        ft = g.create_group("features")
        ft["id"], ft["name"], ft["feature_type"] = np.array([b"x"]), np.array([b"x"]), np.array([b"Gene Expression"])
    found.append(Limit("Cell Ranger .h5 shape 10^9 x 10^9", ("distance", str(f / "claims10x.h5"), *out)))
    data = f / "one.csv"
    data.write_text("a,b\n1,2\n3,4\n")
    depth = 10**6
    (f / "deep.nwk").write_text("(" * depth + "a:1" + "):1" * depth + ";\n")
    found.append(Limit("Newick nested 10^6 deep", ("distance", str(data), "--tree", str(f / "deep.nwk"), *out)))
    line = ("0," * 999 + "0\n").encode()
    with gzip.open(f / "bomb.csv.gz", "wb", compresslevel=9) as fh:
        for _ in range((2 * 10**9 if big else 5 * 10**7) // len(line)):
            fh.write(line)
    size = "2 GB" if big else "50 MB"
    env = () if big else (("HDTWD_MEMORY_LIMIT", "2e8"),)
    found.append(Limit(f"gzip bomb (.csv.gz unpacking to {size})", ("distance", str(f / "bomb.csv.gz"), *out), env))
    if big:
        # a caterpillar of 10^7 nodes: leaves 0..n-1; inner node n + i joins node n + i - 1 and leaf i + 1
        n = 5 * 10**6
        parent = np.empty(2 * n - 1, dtype=np.int64)
        parent[0] = n
        parent[1:n] = n + np.arange(n - 1)
        parent[n : 2 * n - 2] = np.arange(n + 1, 2 * n - 1)
        parent[2 * n - 2] = -1
        with h5py.File(f / "huge_tree.h5", "w") as h:
            h.attrs["encoding-type"], h.attrs["encoding-version"] = "hdtwd-tree", "0.1.0"
            h.attrs["n_leaves"] = n
            h.create_group("params").attrs["encoding-type"] = "hdtwd-params"
            g = h.create_group("tree")
            g.attrs["encoding-type"] = "hdtwd-rooted-tree"
            g["parent"], g["length"] = parent, np.ones(2 * n - 1)
            g["leaf_names"] = np.array([f"f{i}".encode() for i in range(n)])
        found.append(Limit("tree .h5 of 10^7 nodes", ("distance", str(data), "--tree", str(f / "huge_tree.h5"), *out)))
    return found
