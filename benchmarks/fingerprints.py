"""Fingerprints of the outputs check_bytes.py compares: a SHA-256 of each file, array, sparse matrix, JSON report
(its timings dropped) or tree, and of each part of an HDF5 or .npz file, so that a difference names the part.

Support for ``check_bytes.py``; public names only.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

Fingerprint = dict[str, Any]

#: JSON keys that hold measured times (dropped from JSON reports before fingerprinting).
TIMING_KEYS = frozenset(
    {
        "time",
        "times",
        "timing",
        "timings",
        "seconds",
        "elapsed",
        "elapsed_s",
        "wall_s",
        "duration",
        "duration_s",
        "runtime",
    }
)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def short(data: bytes) -> str:
    """A part's digest: 16 hex digits are plenty to say which part differs."""
    return sha256(data)[:16]


def array_bytes(value: Any) -> bytes:
    """dtype, shape and C-order bytes of an array (objects and strings by their ``repr``)."""
    a = np.asarray(value)
    head = f"{a.dtype.str}|{a.shape}|".encode()
    if a.dtype.kind == "O":
        return head + repr(a.tolist()).encode()
    return head + np.ascontiguousarray(a).tobytes()


def sparse_bytes(m: Any) -> bytes:
    """A scipy sparse matrix as stored: its format, shape, dtype and arrays (not canonicalised)."""
    arrays = (m.row, m.col, m.data) if m.format == "coo" else (m.data, m.indices, m.indptr)
    return f"{m.format}|{m.shape}|".encode() + b"".join(array_bytes(a) for a in arrays)


def plain(obj: Any) -> Any:
    """``json.dumps`` default: NumPy scalars and arrays as Python values, anything else by ``repr``."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return f"<{type(obj).__name__}> {obj!r}"


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, default=plain, ensure_ascii=False, separators=(",", ":")).encode()


def drop_timing(obj: Any, path: str = "") -> tuple[Any, list[str]]:
    """``obj`` without the keys of :data:`TIMING_KEYS` (at any depth), and the paths dropped."""
    dropped: list[str] = []
    if isinstance(obj, dict):
        kept = {}
        for key, value in obj.items():
            if key in TIMING_KEYS:
                dropped.append(f"{path}/{key}")
                continue
            kept[key], sub = drop_timing(value, f"{path}/{key}")
            dropped += sub
        return kept, dropped
    if isinstance(obj, list):
        items = [drop_timing(v, f"{path}[{i}]") for i, v in enumerate(obj)]
        return [v for v, _ in items], [p for _, sub in items for p in sub]
    return obj, dropped


def json_parts(doc: Any, depth: int = 2, prefix: str = "") -> dict[str, str]:
    """Digests of a JSON document's members, ``depth`` levels down (``/methods/hdtwd``, ...)."""
    if depth == 0 or not isinstance(doc, dict) or not doc:
        return {prefix or "/": short(json_bytes(doc))}
    parts: dict[str, str] = {}
    for key, value in doc.items():
        parts.update(json_parts(value, depth - 1, f"{prefix}/{key}"))
    return parts


def hdf5_parts(path: Path) -> dict[str, str]:
    """Digests of every dataset and attribute of an HDF5 file (``name`` and ``name@attribute``)."""
    import h5py

    parts: dict[str, str] = {}

    def visit(name: str, obj: Any) -> None:
        for attr in sorted(obj.attrs):
            parts[f"/{name}@{attr}"] = short(array_bytes(obj.attrs[attr]))
        if isinstance(obj, h5py.Dataset):
            parts[f"/{name}"] = short(array_bytes(obj[()]))

    with h5py.File(path, "r") as f:
        visit("", f)
        f.visititems(visit)
    return dict(sorted(parts.items()))


def npz_parts(path: Path) -> dict[str, str]:
    with np.load(path, allow_pickle=False) as z:
        return {name: short(array_bytes(z[name])) for name in sorted(z.files)}


def digest_of_parts(parts: dict[str, str]) -> str:
    return sha256(json_bytes(sorted(parts.items())))


def fingerprint_bytes(data: bytes) -> Fingerprint:
    return {"sha256": sha256(data), "basis": "bytes", "size": len(data)}


def fingerprint_file(path: Path) -> Fingerprint:
    """Raw bytes, with per-part digests for HDF5, ``.npz`` and JSON (see the module docstring)."""
    raw = path.read_bytes()
    fp = fingerprint_bytes(raw)
    suffix = path.suffix.lower()
    if suffix in (".h5", ".h5ad"):
        fp["parts"] = hdf5_parts(path)
        fp["content"] = digest_of_parts(fp["parts"])
    elif suffix == ".npz":
        fp["parts"] = npz_parts(path)
    elif suffix == ".json":
        doc, dropped = drop_timing(json.loads(raw))
        if dropped:
            fp.update(sha256=sha256(json_bytes(doc)), basis="json without timing fields", dropped=dropped)
        fp["parts"] = json_parts(doc)
    return fp


def fingerprint_value(value: Any) -> Fingerprint:
    """An API result: an array, a sparse matrix, text, or a JSON-able object."""
    if hasattr(value, "tocsr") and hasattr(value, "format"):
        return {
            "sha256": sha256(sparse_bytes(value)),
            "basis": "sparse",
            "format": value.format,
            "shape": list(value.shape),
            "dtype": value.dtype.str,
        }
    if isinstance(value, np.ndarray):
        return {
            "sha256": sha256(array_bytes(value)),
            "basis": "array",
            "shape": list(value.shape),
            "dtype": value.dtype.str,
        }
    if isinstance(value, str):
        return fingerprint_bytes(value.encode())
    doc, dropped = drop_timing(value)
    fp = {"sha256": sha256(json_bytes(doc)), "basis": "json", "parts": json_parts(doc)}
    return fp | ({"dropped": dropped} if dropped else {})


def fingerprint_tree(tree: Any, path: Path) -> Fingerprint:
    """A ``hd.Tree`` by its documented fields, its Newick text and the bytes ``tree.write`` gives."""
    tree.write(str(path))
    fields = {name: getattr(tree, name) for name in ("parent", "length", "merge_height", "feature_weights")}
    parts = {name: short(array_bytes(v) if v is not None else b"None") for name, v in fields.items()}
    parts |= {
        "leaf_names": short(json_bytes(list(tree.leaf_names))),
        "metadata": short(json_bytes(tree.metadata)),
        "to_newick": short(tree.to_newick().encode()),
        "write(.h5)": short(path.read_bytes()),
    }
    return {"sha256": digest_of_parts(parts), "basis": "tree", "parts": parts}
