"""Synthetic atlas data and recall helpers, shared by the scale benchmarks (support; measures nothing).

- :data:`WD`: the cache folder of the scale records and the synthetic cells (``scale-issue13``);
- :func:`synth`: UMI-like synthetic cells from a planted hierarchy of types (``SYNTH_<n>.npz``);
- :func:`synth_genes`: the same kind of cells over all genes, with a realistic long tail of rarely
  detected genes (``GENES_<n>_<m>.npz``);
- :func:`recall`: the mean share of one neighbour list found in the other, row by row;
- :func:`exact_rows`, :func:`sampled_exact`: the exact neighbours of sampled rows by brute force
  (the reference of every recall figure at 10^5 / 10^6 cells; cached in ``recall-issue28``);
- :func:`vm_hwm_mb`: peak resident memory of the calling process (run on Dask workers too).

Imported by ``bench_scale.py``, ``bench_atlas.py``, ``recall_real.py`` and
``compare_speed.py``; it imports nothing from this folder but :mod:`harness`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

__all__ = ["EXACT_DIR", "WD", "exact_rows", "recall", "sampled_exact", "synth", "synth_genes", "vm_hwm_mb"]

#: The scale benchmarks' records and the synthetic cells (``SYNTH_<n>.npz``).
WD = harness.work_dir("scale-issue13")
#: The cached exact neighbours of sampled rows (``exact_<n>_<k>.npy``) and the recall probes' records.
EXACT_DIR = harness.work_dir("recall-issue28")


def synth(n: int, m: int = 2000, seed: int = 0, folder: Path | None = None) -> Path:
    """``SYNTH_<n>.npz`` in ``folder`` (default :data:`WD`): UMI-like sparse counts of cells from a planted
    two-level hierarchy of types.

    10 lineages x 10 cell types; every type has a gene program (a Dirichlet mixture of its lineage's
    program, its own and a shared background over ``m`` genes); each cell draws 150-450 UMIs from
    its type's program (multinomial), which leaves about 5 % of the entries non-zero, as in UMI data.
    Structured data, as real cells are: on structureless data no neighbour index finds neighbours.
    The cell types go to ``SYNTH_<n>_types.npy`` beside it.
    """
    wd = WD if folder is None else folder
    p = wd / (f"SYNTH_{n}.npz" if m == 2000 else f"SYNTH_{n}_{m}.npz")
    if p.exists():
        return p
    rng = np.random.default_rng(seed)
    background = rng.dirichlet(np.full(m, 0.5))
    lineage = rng.dirichlet(np.full(m, 0.05), size=10)
    types = np.stack(
        [0.3 * background + 0.4 * lineage[t // 10] + 0.3 * rng.dirichlet(np.full(m, 0.05)) for t in range(100)]
    )
    cell_type = rng.integers(0, 100, size=n)
    umis = rng.integers(150, 451, size=n)
    blocks, step = [], max(1, 10**8 // m)  # 50,000 rows of 2,000 genes: 800 MB of counts per block
    for s0 in range(0, n, step):
        e = min(s0 + step, n)
        counts = np.stack([rng.multinomial(umis[i], types[cell_type[i]]) for i in range(s0, e)])
        blocks.append(sp.csr_matrix(counts.astype(np.float64)))
        del counts
    X = sp.vstack(blocks, format="csr")
    del blocks
    sp.save_npz(p, X, compressed=False)
    np.save(p.with_name(p.stem + "_types.npy"), cell_type)
    return p


def synth_genes(n: int, m: int, seed: int = 0, folder: Path | None = None) -> Path:
    """``GENES_<n>_<m>.npz`` in ``folder`` (default :data:`WD`): UMI counts of ``n`` cells over ``m`` genes
    with the detection rates of an all-genes matrix.

    Genes' baseline expression is log-normal (sigma 1.8), so a long tail of genes is seen in a handful of
    cells (about 30 % of the genes in under 1 % of the cells, as in 10x data, where :func:`synth`'s
    Dirichlet programs detect almost every gene); 10 lineages x 10 cell types multiply the baseline by
    log-normal factors on 10 % of the genes each (sigma 1.5), and every cell draws a log-normal number
    of UMIs (median 2,750). The UMIs are sampled gene by gene from the cumulative program, in blocks of
    cells, so the matrix is never dense. The cell types go to ``GENES_<n>_<m>_types.npy`` beside it.
    """
    wd = WD if folder is None else folder
    p = wd / f"GENES_{n}_{m}.npz"
    if p.exists():
        return p
    rng = np.random.default_rng(seed)
    base = rng.lognormal(0.0, 1.8, size=m)
    lineage = np.exp(rng.normal(0.0, 1.5, size=(10, m)) * (rng.random((10, m)) < 0.1))
    programs = np.empty((100, m))
    for t in range(100):
        own = np.exp(rng.normal(0.0, 1.5, size=m) * (rng.random(m) < 0.1))
        w = base * lineage[t // 10] * own
        programs[t] = w / w.sum()
    cum = np.cumsum(programs, axis=1)
    cum[:, -1] = 1.0
    cell_type = rng.integers(0, 100, size=n)
    umis = np.maximum(200, rng.lognormal(np.log(2750.0), 0.4, size=n)).astype(np.int64)
    blocks = []
    for s0 in range(0, n, 5000):
        e = min(s0 + 5000, n)
        rows = np.repeat(np.arange(e - s0), umis[s0:e])
        genes = np.empty(rows.size, dtype=np.int64)
        at = 0
        for i in range(s0, e):
            u = int(umis[i])
            genes[at : at + u] = np.searchsorted(cum[cell_type[i]], rng.random(u), side="right")
            at += u
        block = sp.csr_matrix((np.ones(rows.size), (rows, genes)), shape=(e - s0, m))
        block.sum_duplicates()
        blocks.append(block)
    X = sp.vstack(blocks, format="csr")
    sp.save_npz(p, X, compressed=False)
    np.save(p.with_name(p.stem + "_types.npy"), cell_type)
    return p


def recall(a: Any, b: Any) -> float:
    """Mean over rows of the share of ``a``'s neighbours that ``b`` holds too (``a`` the exact lists)."""
    return float(np.mean([len(set(x) & set(y)) / len(x) for x, y in zip(a, b)]))


def exact_rows(X: Any, tree: Any, rows: np.ndarray, k: int) -> np.ndarray:
    """The exact k nearest other samples of ``rows`` under the TWD on ``tree``, by brute force through the
    public API: the cross distances from the sampled rows to every row (``hd.distance_vectors(X[rows], tree,
    reference=X)``, in row blocks of 256 MB), the row itself left out, the k smallest by (distance, index)."""
    import hdtwd_cli as hd

    dv = hd.distance_vectors(X[rows], tree, reference=X, progress=False)
    out = np.empty((rows.size, k), dtype=np.int64)
    for start, D in dv.blocks():
        for i, d in enumerate(D):
            d[rows[start + i]] = np.inf  # not its own neighbour
            near = np.flatnonzero(d <= np.partition(d, k - 1)[k - 1])  # the k smallest and their ties
            out[start + i] = near[np.lexsort((near, d[near]))][:k]
    return out


def sampled_exact(n: int, k: int = 14, denoise: str = "0") -> tuple[np.ndarray, np.ndarray]:
    """1,000 sampled rows of ``synth(n)`` (seed 1, sorted) and their exact k neighbours on the tree learned
    with ``denoise`` (``"0"``: the undenoised tree of the earlier defaults; ``"auto"``: today's default).

    The tree is learned here by the public API (the command's tree: one answer) and the neighbours are cached
    as ``EXACT_DIR/exact_<n>_<k>[_d<denoise>]_<tree>.npy``, ``<tree>`` a digest of the tree's parents and edge
    lengths: a change of the defaults' tree computes them anew instead of reading another tree's neighbours.
    """
    import hashlib

    import hdtwd_cli as hd

    rows = np.sort(np.random.default_rng(1).choice(n, 1000, replace=False))
    X = sp.load_npz(synth(n)).tocsr()
    tree = hd.learn_tree(X, params=hd.TreeParams(denoise=denoise if denoise == "auto" else int(denoise)))
    digest = hashlib.sha1(np.asarray(tree.parent).tobytes() + np.asarray(tree.length).tobytes()).hexdigest()[:12]
    tag = "" if denoise == "0" else f"_d{denoise}"
    cache = EXACT_DIR / f"exact_{n}_{k}{tag}_{digest}.npy"
    if cache.exists():
        return rows, np.load(cache)
    exact = exact_rows(X, tree, rows, k)
    np.save(cache, exact)
    return rows, exact


def vm_hwm_mb() -> float:
    """Peak resident memory of this process (``VmHWM``), MB.

    Run on Dask workers by ``client.run``: ``ru_maxrss`` would carry the spawning process's peak over
    ``execve``.
    """
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")
