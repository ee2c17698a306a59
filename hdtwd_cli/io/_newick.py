"""Newick reading and writing, iterative throughout (single-linkage trees are chains thousands deep).

Writing
    Every label that does not match ``[A-Za-z0-9.-]+`` is quoted with ``'`` (inner quotes
    doubled), so underscores, spaces and punctuation survive every reader. Branch lengths are
    written with ``repr(float(x))`` (shortest round-trip form). Internal nodes are unlabelled.

Reading
    Quoted and unquoted labels, ``[...]`` comments, optional branch lengths on the root, any
    number of children per node. Unquoted underscores are kept as underscores (not turned into
    spaces) so that feature names such as ``HLA_DRA`` match the data. Internal labels (often
    support values) are ignored; leaf labels must be non-empty and unique; every non-root edge
    needs a length.
"""

from __future__ import annotations

import re

import numpy as np

from hdtwd_cli.io._records import TreeLike, TreeRecord, children_of

__all__ = ["format_label", "write_newick", "read_newick", "NewickError"]

_PLAIN = re.compile(r"^[A-Za-z0-9.\-]+$")


class NewickError(ValueError):
    """The text is not a Newick tree hdtwd can use."""


def format_label(name: str) -> str:
    """A Newick label: bare when it matches ``[A-Za-z0-9.-]+``, otherwise single-quoted."""
    if _PLAIN.match(name):
        return name
    return "'" + name.replace("'", "''") + "'"


def write_newick(tree: TreeLike, comments: list[str] | None = None) -> str:
    """The tree as one Newick line ending in ``;\\n`` (explicit stack, no recursion).

    ``comments``: one string per node (``""`` for none), written after the node's label or
    closing parenthesis, before its length (FigTree's ``[&key=value]`` annotations: :mod:`._nexus`).
    """
    children = children_of(tree.parent)
    labels = [format_label(s) for s in tree.leaf_names]
    lengths = [":" + repr(float(x)) for x in tree.length.tolist()]
    root = len(children) - 1
    notes = comments if comments is not None else [""] * len(children)
    parts: list[str] = []
    stack: list[tuple[int, int]] = [(root, 0)]
    while stack:
        v, i = stack.pop()
        ch = children[v]
        if ch and i < len(ch):
            parts.append("(" if i == 0 else ",")
            stack.append((v, i + 1))
            stack.append((ch[i], 0))
            continue
        parts.append(")" if ch else labels[v])
        parts.append(notes[v])
        if v != root:
            parts.append(lengths[v])
    parts.append(";\n")
    return "".join(parts)


_TOKEN = re.compile(r"\s*(?:(\[[^\]]*\])|('(?:[^']|'')*')|([(),:;])|([^\s(),:;\[\]']+))", re.S)


def read_newick(text: str) -> TreeRecord:
    """Parse one Newick tree into a :class:`TreeRecord` (leaves first, postorder; validated by the
    method's :meth:`hdtwd_cli.Tree.read`).

    Raises
    ------
    NewickError
        Malformed text, a missing branch length, an empty or duplicate leaf name.
    """
    # per parsed node: parent (parse id), label, length
    parent: list[int] = []
    label: list[str | None] = []
    length: list[float | None] = []
    is_leaf: list[bool] = []
    closing: list[int] = []  # internal nodes in the order their ')' closes: postorder
    stack: list[int] = []
    cur: int | None = None  # node whose label/length may follow
    expect_length = False
    pos = 0
    text = text.strip()
    if not text:
        raise NewickError("empty Newick text")
    done = False

    def new_node(leaf: bool) -> int:
        parent.append(stack[-1] if stack else -1)
        label.append(None)
        length.append(None)
        is_leaf.append(leaf)
        return len(parent) - 1

    while pos < len(text):
        mt = _TOKEN.match(text, pos)
        if mt is None or mt.end() == pos:
            if text[pos:].strip() == "":
                break
            raise NewickError(f"unexpected character {text[pos]!r} at offset {pos}")
        pos = mt.end()
        comment, quoted, punct, word = mt.groups()
        if comment is not None:
            continue
        if done:
            raise NewickError(f"text after the closing ';' at offset {mt.start()}")
        if punct == "(":
            if cur is not None and not expect_length:
                raise NewickError(f"'(' after a label at offset {mt.start()}")
            node = new_node(False)
            stack.append(node)
            cur = None
        elif punct == ",":
            if not stack:
                raise NewickError(f"',' outside parentheses at offset {mt.start()}")
            if cur is None:
                cur = new_node(True)  # empty leaf: reported below
            cur, expect_length = None, False
        elif punct == ")":
            if not stack:
                raise NewickError(f"unbalanced ')' at offset {mt.start()}")
            if cur is None:
                new_node(True)
            cur = stack.pop()
            closing.append(cur)
            expect_length = False
        elif punct == ":":
            if cur is None:
                cur = new_node(True)
            expect_length = True
        elif punct == ";":
            if stack:
                raise NewickError("unbalanced '(' before ';'")
            if cur is None:
                raise NewickError("no tree before ';'")
            done = True
        else:
            tok = word if word is not None else quoted[1:-1].replace("''", "'")
            if expect_length:
                try:
                    val = float(tok)
                except ValueError:
                    raise NewickError(f"branch length {tok!r} is not a number") from None
                length[cur] = val  # type: ignore[index]
                expect_length = False
            else:
                if cur is None:
                    cur = new_node(True)
                elif label[cur] is not None:
                    raise NewickError(f"two labels for one node at offset {mt.start()}")
                label[cur] = tok
    if not done:
        raise NewickError("missing the closing ';'")
    n = len(parent)
    leaves = [v for v in range(n) if is_leaf[v]]
    if not closing:  # a single leaf
        raise NewickError("a tree needs at least two leaves")
    order = leaves + closing
    new_id = np.empty(n, dtype=np.int64)
    new_id[order] = np.arange(n)
    names: list[str] = []
    for v in leaves:
        if label[v] is None or label[v] == "":
            raise NewickError(f"leaf {len(names) + 1} has no name")
        names.append(label[v])  # type: ignore[arg-type]
    if len(set(names)) != len(names):
        seen: set[str] = set()
        dup = next(s for s in names if s in seen or seen.add(s))  # type: ignore[func-returns-value]
        raise NewickError(f"leaf name {dup!r} occurs more than once")
    par = np.empty(n, dtype=np.int64)
    lens = np.zeros(n, dtype=np.float64)
    root = order[-1]
    for v in order:
        i = new_id[v]
        par[i] = -1 if v == root else new_id[parent[v]]
        if v != root:
            if length[v] is None:
                what = f"leaf {label[v]!r}" if is_leaf[v] else "an internal node"
                raise NewickError(f"{what} has no branch length")
            lens[i] = length[v]
    return TreeRecord(parent=par, length=lens, leaf_names=names, format="Newick")
