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
    needs a length. A large text in the plain form hdtwd writes (no quotes, comments or inner
    white space) is scanned by a compiled pass (:func:`_scan_plain`) with the same rules; anything
    it does not accept is parsed by the general reader, whose messages name the problem.
"""

from __future__ import annotations

import re

import numpy as np

from hdtwd_cli._runtime.jit import njit
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


#: Characters of Newick text above which the plain form is scanned by the compiled pass.
PLAIN_SCAN_CHARS = 1 << 20
_SPACE_OR_QUOTE = re.compile(r"[\s'\[\]]")
#: Bytes of the delimiters, and the scan's status codes.
_OPEN, _CLOSE, _COMMA, _COLON, _END = (ord(c) for c in "(),:;")
_OK = 0


_TOKEN = re.compile(r"\s*(?:(\[[^\]]*\])|('(?:[^']|'')*')|([(),:;])|([^\s(),:;\[\]']+))", re.S)


def read_newick(text: str) -> TreeRecord:
    """Parse one Newick tree into a :class:`TreeRecord` (leaves first, postorder; validated by the
    method's :meth:`hdtwd_cli.Tree.read`).

    Raises
    ------
    NewickError
        Malformed text, a missing branch length, an empty or duplicate leaf name.
    """
    text = text.strip()
    if len(text) >= PLAIN_SCAN_CHARS and _SPACE_OR_QUOTE.search(text) is None:
        record = read_plain_newick(text)
        if record is not None:
            return record
    return _read_general(text)


def read_plain_newick(text: str) -> TreeRecord | None:
    """:func:`read_newick` of text without quotes, comments or white space, by one compiled scan.

    The same record as the general reader, or ``None`` where that reader would raise (or the text
    is not in the plain form): the caller then lets the general reader name the problem.
    """
    text = text.strip()
    if _SPACE_OR_QUOTE.search(text) is not None or not text.isascii():
        return None
    b = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    cap = int(np.count_nonzero((b == _OPEN) | (b == _CLOSE) | (b == _COMMA) | (b == _COLON))) + 2
    parent = np.empty(cap, dtype=np.int64)
    leaf = np.empty(cap, dtype=np.bool_)
    spans = np.full((cap, 4), -1, dtype=np.int64)  # label start, end; length start, end
    closing = np.empty(cap, dtype=np.int64)
    counts = np.zeros(2, dtype=np.int64)  # nodes, internal nodes closed
    if _scan_plain(b, parent, leaf, spans, closing, counts) != _OK:
        return None
    n, n_closed = int(counts[0]), int(counts[1])
    if n_closed == 0:
        return None
    is_leaf = leaf[:n]
    leaves = np.flatnonzero(is_leaf)
    order = np.concatenate([leaves, closing[:n_closed]])
    if order.size != n:
        return None
    sp_ = spans[:n]
    if (sp_[leaves, 0] < 0).any():
        return None
    names = _spans_text(b, sp_[leaves, 0], sp_[leaves, 1])
    if len(set(names)) != len(names):
        return None
    edges = order[:-1]  # every node but the root (the last to close)
    r0, r1 = (int(v) for v in sp_[order[-1], 2:])
    if (sp_[edges, 2] < 0).any():
        return None
    try:
        values = np.array(list(map(float, _spans_text(b, sp_[edges, 2], sp_[edges, 3]))), dtype=np.float64)
        if r0 >= 0:  # the root's length is not used, but must be a number
            float(text[r0:r1])
    except ValueError:
        return None
    new_id = np.empty(n, dtype=np.int64)
    new_id[order] = np.arange(n)
    par = np.full(n, -1, dtype=np.int64)
    par[: n - 1] = new_id[parent[edges]]
    lens = np.zeros(n, dtype=np.float64)
    lens[: n - 1] = values
    return TreeRecord(parent=par, length=lens, leaf_names=names, format="Newick")


def _spans_text(b: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[str]:
    """The strings ``b[starts[i]:ends[i]]`` (ASCII), cut out by one compiled copy and one split."""
    if starts.size == 0:
        return []
    out = np.empty(int((ends - starts).sum()) + starts.size - 1, dtype=np.uint8)
    _join_spans(b, starts, ends, out)
    return out.tobytes().decode("ascii").split("\n")


@njit(cache=True, nogil=True)
def _join_spans(b, starts, ends, out):  # pragma: no cover - compiled
    """The spans of ``b`` one after another, separated by newlines (which plain Newick text has none of)."""
    p = 0
    for i in range(starts.shape[0]):
        if i:
            out[p] = 10
            p += 1
        for q in range(starts[i], ends[i]):
            out[p] = b[q]
            p += 1


@njit(cache=True, nogil=True)
def _new_node(parent, leaf, stack, depth, n, is_leaf):  # pragma: no cover - compiled
    """Node ``n`` as a child of the innermost open ``(`` (the root's parent, -1, at depth 0); returns ``n + 1``."""
    parent[n] = stack[depth - 1] if depth else -1
    leaf[n] = is_leaf
    return n + 1


@njit(cache=True, nogil=True)
def _scan_plain(b, parent, leaf, spans, closing, counts):  # pragma: no cover - compiled
    """The general reader's state machine over the bytes of plain Newick text; 0, or 1 where it would raise.

    Fills per parsed node its parent (parse id, -1 for the root), whether it is a leaf and the
    spans of its label and length in ``b``; ``closing`` lists the internal nodes in the order
    their ``)`` closes (postorder); ``counts``: nodes, internal nodes closed.
    """
    stack = np.empty(parent.shape[0], dtype=np.int64)
    depth = 0
    n = 0
    closed = 0
    cur = -1
    expect_length = False
    done = False
    i = 0
    size = b.shape[0]
    while i < size:
        c = b[i]
        if done:
            return 1
        if c == 40:  # (
            if cur != -1 or expect_length:
                return 1
            stack[depth] = n
            n = _new_node(parent, leaf, stack, depth, n, False)
            depth += 1
            cur = -1
            i += 1
        elif c == 44:  # ,
            if depth == 0:
                return 1
            if cur == -1:
                n = _new_node(parent, leaf, stack, depth, n, True)
            cur = -1
            expect_length = False
            i += 1
        elif c == 41:  # )
            if depth == 0:
                return 1
            if cur == -1:
                n = _new_node(parent, leaf, stack, depth, n, True)
            depth -= 1
            cur = stack[depth]
            closing[closed] = cur
            closed += 1
            expect_length = False
            i += 1
        elif c == 58:  # :
            if cur == -1:
                cur = n
                n = _new_node(parent, leaf, stack, depth, n, True)
            expect_length = True
            i += 1
        elif c == 59:  # ;
            if depth != 0 or cur == -1:
                return 1
            done = True
            i += 1
        else:  # a word: up to the next delimiter
            j = i
            while j < size and b[j] != 40 and b[j] != 41 and b[j] != 44 and b[j] != 58 and b[j] != 59:
                j += 1
            if expect_length:
                if spans[cur, 2] != -1:  # a second length: the general reader decides
                    return 1
                spans[cur, 2] = i
                spans[cur, 3] = j
                expect_length = False
            else:
                if cur == -1:
                    cur = n
                    n = _new_node(parent, leaf, stack, depth, n, True)
                elif spans[cur, 0] != -1:
                    return 1
                spans[cur, 0] = i
                spans[cur, 1] = j
            i = j
    if not done:
        return 1
    counts[0] = n
    counts[1] = closed
    return 0


def _read_general(text: str) -> TreeRecord:
    """:func:`read_newick` token by token (quotes, comments, white space; every error named)."""
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
            if expect_length:
                raise NewickError(f"'(' where a branch length is expected at offset {mt.start()}")
            if cur is not None:
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
