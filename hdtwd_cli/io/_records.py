"""What the file formats hold, as plain arrays: the I/O layer's side of the tree and the embedding.

The I/O layer knows no type of the method. A writer takes any object with the attributes of
:class:`TreeLike` (the method's :class:`~hdtwd_cli.Tree` is one); a reader returns a
:class:`TreeRecord`, which the method's layer turns into its own type and validates
(:meth:`hdtwd_cli.Tree.read`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = ["DenoiserRecord", "TreeLike", "TreeRecord", "EmbeddingRecord", "children_of"]


@dataclass
class DenoiserRecord:
    """The rank-r map a tree may carry: per-leaf ``mean``, ``axes`` (leaves x r), ``covered`` leaves,
    and whether it was fitted on ``log_counts``."""

    mean: np.ndarray
    axes: np.ndarray
    log_counts: bool
    covered: np.ndarray


class TreeLike(Protocol):
    """The attributes a tree writer reads (node numbering: leaves first, every parent after its children)."""

    parent: np.ndarray
    length: np.ndarray
    leaf_names: list[str]
    merge_height: np.ndarray | None
    feature_weights: np.ndarray | None
    denoiser: Any
    haar_keep: np.ndarray | None
    metadata: dict


@dataclass
class TreeRecord:
    """A tree as read from a file, not yet validated: the fields of :class:`TreeLike`."""

    parent: np.ndarray
    length: np.ndarray
    leaf_names: list[str]
    merge_height: np.ndarray | None = None
    feature_weights: np.ndarray | None = None
    denoiser: DenoiserRecord | None = None
    metadata: dict = field(default_factory=dict)
    #: The Haar vectors kept by the tree's filter (one flag per leaf), or ``None``.
    haar_keep: np.ndarray | None = None
    #: The file's format, for messages: ``"tree"`` (hdtwd's HDF5), ``"Newick"`` or ``"Nexus"``.
    format: str = "tree"


@dataclass
class EmbeddingRecord:
    """A stored multi-scale embedding: ``psi`` (scales x features x width), ``heights`` and
    ``negative_mass`` per scale, with the features' names and the recorded parameters."""

    psi: np.ndarray
    heights: np.ndarray
    negative_mass: np.ndarray
    feature_names: list[str]
    params: dict
    meta: dict
    diffusion: dict
    #: The map the tree's rows were denoised by (rows: ``feature_names``, then ``diffusion["dropped"]``).
    denoiser: DenoiserRecord | None = None


def children_of(parent: np.ndarray) -> list[list[int]]:
    """Children of every node of a parent array, in increasing index order (no recursion)."""
    out: list[list[int]] = [[] for _ in range(parent.shape[0])]
    for c, p in enumerate(parent[:-1].tolist()):
        out[p].append(c)
    return out
