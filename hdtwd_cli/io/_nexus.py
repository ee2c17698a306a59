r"""Nexus tree files with per-node annotations, for FigTree, DendroPy, Bio.Phylo and iTOL.

Newick carries the topology, names and branch lengths; a Nexus file (``.nex``, ``.nexus``) carries
the same tree plus what the TWD uses, as the ``[&key=value,...]`` comments FigTree shows (colour,
label or width by annotation) and DendroPy reads (``extract_comment_metadata=True``):

- every leaf: ``weight``, the feature's weight :math:`u_j` (idf) when the tree has weights;
- every node, when the samples' mass is given: ``mass``, the share of the samples' mean
  histogram below it (weights applied: the mass the TWD moves), and ``size``, its number of leaves.

Layout::

    #NEXUS
    begin taxa;
      dimensions ntax=3;
      taxlabels a b 'c d';
    end;
    begin trees;
      tree hdtwd = [&R] ((a[&weight=1.2,mass=0.1]:0.5,b[...]:0.5)[&mass=0.4,size=2]:1.0,...);
    end;

Written with an explicit stack (single-linkage trees are chains thousands deep); read back by
:func:`read_nexus` (the first ``tree`` of the ``trees`` block; the leaves' weights are kept).
"""

from __future__ import annotations

import re

import numpy as np

from hdtwd_cli.io._newick import NewickError, format_label, read_newick, write_newick
from hdtwd_cli.io._records import TreeLike, TreeRecord

__all__ = ["write_nexus", "read_nexus", "NEXUS_SUFFIXES"]

NEXUS_SUFFIXES = (".nex", ".nexus")


def _annotation(pairs: list[tuple[str, float]]) -> str:
    return "[&" + ",".join(f"{k}={v!r}" for k, v in pairs) + "]" if pairs else ""


def write_nexus(tree: TreeLike, mass: np.ndarray | None = None, size: np.ndarray | None = None) -> str:
    """The tree as a Nexus file's text, nodes annotated (module docstring).

    ``mass`` and ``size``: per node, the samples' mass below it and its number of leaves (both or
    neither; the method computes them, :meth:`hdtwd_cli.Tree.write`).
    """
    n, L = tree.parent.shape[0], len(tree.leaf_names)
    notes: list[list[tuple[str, float]]] = [[] for _ in range(n)]
    if tree.feature_weights is not None:
        for j, w in enumerate(tree.feature_weights.tolist()):
            notes[j].append(("weight", float(w)))
    if mass is not None and size is not None:
        for v in range(n):
            notes[v].append(("mass", float(mass[v])))
            if v >= L:
                notes[v].append(("size", int(size[v])))
    labels = [format_label(s) for s in tree.leaf_names]
    body = write_newick(tree, [_annotation(pairs) for pairs in notes]).rstrip()
    taxa = "\n".join(f"    {s}" for s in labels)
    return (
        f"#NEXUS\nbegin taxa;\n  dimensions ntax={L};\n  taxlabels\n{taxa}\n  ;\nend;\n"
        f"begin trees;\n  tree hdtwd = [&R] {body}\nend;\n"
    )


_LEAF_NOTE = re.compile(r"(?<=[(,])\s*('(?:[^']|'')*'|[^\s(),:;\[\]']+)\[&([^\]]*)\]")
_TREE = re.compile(r"^\s*tree\s+(?:'(?:[^']|'')*'|[^\s=]+)\s*=\s*(.*)$", re.I | re.S | re.M)


def read_nexus(text: str) -> TreeRecord:
    """The first tree of a Nexus file's ``trees`` block (a ``translate`` table is not supported).

    The leaves' ``weight`` annotations, when every leaf has one, become the feature weights, so a
    tree written by :func:`write_nexus` gives the same distances as the ``.h5`` tree (without a
    denoiser, which only ``.h5`` keeps).

    Raises
    ------
    NewickError
        No ``#NEXUS`` header, no tree, a translate table, or a malformed tree.
    """
    if not text.lstrip().upper().startswith("#NEXUS"):
        raise NewickError("no #NEXUS header")
    block = re.search(r"begin\s+trees\s*;(.*?)end\s*;", text, re.I | re.S)
    if block is None:
        raise NewickError("no 'begin trees;' block")
    if re.search(r"^\s*translate\b", block.group(1), re.I | re.M):
        raise NewickError("a 'translate' table is not supported: write the taxon names in the tree")
    mt = _TREE.search(block.group(1))
    if mt is None:
        raise NewickError("no 'tree NAME = ...;' statement")
    body = mt.group(1)
    body = body[: _statement_end(body) + 1]
    tree = read_newick(body)
    tree.format = "Nexus"
    weights = {}
    for label, note in _LEAF_NOTE.findall(body):
        name = label[1:-1].replace("''", "'") if label.startswith("'") else label
        w = re.search(r"(?:^|,)weight=([^,]+)", note)
        if w is not None:
            try:
                weights[name] = float(w.group(1))
            except ValueError:
                raise NewickError(f"leaf {name!r} has the weight {w.group(1)!r}, not a number") from None
    if weights and len(weights) == len(tree.leaf_names) and set(weights) == set(tree.leaf_names):
        tree.feature_weights = np.array([weights[n] for n in tree.leaf_names])
    return tree


def _statement_end(text: str) -> int:
    """Offset of the ';' ending a tree statement (outside quotes and comments)."""
    depth, quoted = 0, False
    for i, ch in enumerate(text):
        if quoted:
            quoted = ch != "'"
        elif ch == "'":
            quoted = True
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == ";" and depth == 0:
            return i
    raise NewickError("the tree statement has no closing ';'")
