r"""Pictures of what hdtwd learns (scanpy's ``pl`` naming; matplotlib draws them).

- :func:`tree`: the learned feature tree as a dendrogram of its heaviest clades, edge lengths to scale;
- :func:`distance_heatmap`: a distance matrix, samples ordered by their own average-linkage tree,
  with a label strip;
- :func:`classify_report`: the ``classify`` report, accuracy against k per method with the spread
  over splits;
- :func:`save`: a figure to ``.png``, ``.svg`` or ``.pdf`` (by the suffix), atomically, the same
  bytes for the same figure (no dates, a fixed SVG id salt).

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot (no global state:
nothing is shown or kept open), or draws into a given ``ax``.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hdtwd_cli.tree._tree import Tree, root_distances, subtree_sums

__all__ = ["PLOT_FORMATS", "require_matplotlib", "tree_clades", "tree", "distance_heatmap", "classify_report", "save"]

#: Picture formats, chosen by the output's suffix.
PLOT_FORMATS = (".png", ".svg", ".pdf")
#: Most samples a heatmap draws (every j-th of the ordered samples above it).
HEATMAP_MAX_SAMPLES = 2000


def require_matplotlib() -> Any:
    """The ``matplotlib.figure`` module, or an ImportError that says how to install it."""
    try:
        import matplotlib.figure
    except ImportError:
        raise ImportError("pictures need matplotlib, a dependency of hdtwd: pip install matplotlib") from None
    return matplotlib.figure


def check_plot_path(path: str) -> str:
    """The format of a picture file from its suffix; a ValueError naming the formats otherwise."""
    suffix = "." + str(path).rsplit(".", 1)[-1].lower() if "." in str(path) else ""
    if suffix not in PLOT_FORMATS:
        raise ValueError(f"must end in .png, .svg or .pdf (the picture's format), not {suffix or 'no suffix'!r}")
    return suffix[1:]


def save(fig: Any, path: str, dpi: int = 150) -> None:
    """Write ``fig`` to ``path`` (format from the suffix, :data:`PLOT_FORMATS`), atomically.

    Dates and random ids are left out, so the same figure gives the same bytes.
    """
    import matplotlib

    from hdtwd_cli.io import atomic_path

    fmt = check_plot_path(path)
    metadata = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}[fmt]
    with matplotlib.rc_context({"svg.hashsalt": "hdtwd", "pdf.compression": 6}), atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=dpi, metadata=metadata, bbox_inches="tight")


def _figure(ax: Any, size: tuple[float, float]) -> tuple[Any, Any]:
    if ax is not None:
        return ax.figure, ax
    fig = require_matplotlib().Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


def tree_clades(tr: Tree, mass: np.ndarray, tips: int = 40) -> tuple[np.ndarray, np.ndarray]:
    r"""The clades a dendrogram of ``tips`` tips shows: expand the heaviest node until ``tips`` are shown.

    Starting from the root, the shown internal node of largest subtree mass (ties: the lower
    index) is replaced by its children while the tips stay within ``tips``; leaves are never
    expanded. Every tip is a leaf (a feature) or a collapsed clade.

    Returns
    -------
    expanded : ndarray of int
        Internal nodes drawn with their children, parents after children (the tree's order).
    tips : ndarray of int
        The tips, in the tree's order.
    """
    n, L = tr.n_nodes, tr.n_leaves
    node_mass = subtree_sums(tr, mass)
    children = tr.children()
    root = n - 1
    shown = {root}
    expanded: list[int] = []
    heap = [(-node_mass[root], root)] if root >= L else []
    while heap:
        _, v = heap[0]
        if len(shown) - 1 + len(children[v]) > max(tips, 1):
            break
        heapq.heappop(heap)
        shown.discard(v)
        expanded.append(v)
        for c in children[v]:
            shown.add(c)
            if c >= L:
                heapq.heappush(heap, (-node_mass[c], c))
    return np.sort(np.array(expanded, dtype=np.int64)), np.sort(np.array(sorted(shown), dtype=np.int64))


def tree(
    tr: Tree,
    X: Any = None,
    feature_names: Sequence[str] | None = None,
    *,
    tips: int = 40,
    names_per_clade: int = 3,
    ax: Any = None,
    title: str | None = None,
) -> Any:
    r"""Dendrogram of the feature tree ``tr``: its heaviest ``tips`` clades, edge lengths to scale.

    The mass of a feature is its share of the samples' mean histogram (``X``, rows = samples,
    columns matched to the leaves by name, the tree's feature weights applied: the mass the TWD
    moves); without ``X`` every feature weighs the same. :func:`tree_clades` picks the tips; a
    leaf is labelled with its name, a collapsed clade with its ``names_per_clade`` heaviest
    features and how many more it holds, each with its share of the mass. The x axis is the
    path length from the root (the tree's edge lengths); a clade is drawn as a wedge reaching its
    deepest leaf. When the leaf edges are more than twice as long as the branching above them
    (hdtwd's trees, whose leaf edges carry most of the depth), the frame ends 15 % past the
    deepest branching shown: leaf edges are cut there (dotted), each wedge reaches its clade's
    deepest internal node, and the axis label says so. Readable whatever the tree's size: the
    work is linear in its nodes, with no recursion.
    """
    from hdtwd_cli._api._common import checked_matrix
    from hdtwd_cli.twd._histograms import mean_histogram

    # the samples checked and converted at the door, as by every public function (float64, canonical CSR)
    mass = np.full(tr.n_leaves, 1.0 / tr.n_leaves)
    if X is not None:
        mass = mean_histogram(tr, checked_matrix(X), feature_names)
    total = float(mass.sum()) or 1.0
    expanded, tip_nodes = tree_clades(tr, mass, tips)
    n, L = tr.n_nodes, tr.n_leaves
    x = root_distances(tr)
    deepest = x.copy()
    for c in range(n - 1):
        p = tr.parent[c]
        deepest[p] = max(deepest[p], deepest[c])
    node_mass, size = subtree_sums(tr, np.column_stack([mass, np.ones(L)])).T
    size = size.astype(np.int64)
    # the clade (tip) every leaf belongs to: top-down, parents have larger indices
    owner = np.full(n, -1, dtype=np.int64)
    owner[tip_nodes] = tip_nodes
    for v in range(n - 2, -1, -1):
        if owner[v] < 0:
            owner[v] = owner[tr.parent[v]]
    # tips in depth-first order (children in index order), iteratively
    is_expanded = np.zeros(n, dtype=bool)
    is_expanded[expanded] = True
    children = tr.children()
    order, stack = [], [n - 1]
    while stack:
        v = stack.pop()
        if is_expanded[v]:
            stack.extend(reversed(children[v]))
        else:
            order.append(v)
    y = np.zeros(n)
    y[order] = np.arange(len(order))[::-1]
    for v in expanded:  # children before parents
        y[v] = np.mean(y[children[v]])
    # leaf edges much longer than the branching above them (hdtwd's trees: the leaf term) are cut at the
    # frame, so that the branching is readable; the x axis stays to scale up to the frame
    inner = np.where(np.arange(n) >= L, x, -np.inf)  # deepest internal node below each node
    for c in range(n - 1):
        inner[tr.parent[c]] = max(inner[tr.parent[c]], inner[c])
    internal_tips = tip_nodes[tip_nodes >= L]
    branching = max(
        float(x[expanded].max()) if expanded.size else 0.0,
        float(inner[internal_tips].max()) if internal_tips.size else 0.0,
    )
    span = float(deepest.max()) or 1.0
    cut = 0.0 < branching and span > 2.0 * branching
    frame = 1.15 * branching if cut else span
    end = np.minimum(np.where(np.arange(n) < L, x, inner if cut else deepest), frame)
    fig, ax = _figure(ax, (9.0, 1.0 + 0.28 * len(order)))
    segs, dots = [], []
    for v in expanded:
        ys = y[children[v]]
        segs.append([(x[v], ys.min()), (x[v], ys.max())])
        segs.extend([(x[v], y[c]), (end[c] if c < L else x[c], y[c])] for c in children[v])
    from matplotlib.collections import LineCollection, PolyCollection

    wedges, labels = [], []
    leaf_pos = np.flatnonzero(owner[:L] >= 0)
    by_clade: dict[int, np.ndarray] = {}
    clade_leaves = leaf_pos[np.argsort(owner[leaf_pos], kind="stable")]
    bounds = np.searchsorted(owner[clade_leaves], tip_nodes)
    ends = np.append(bounds[1:], clade_leaves.size)
    for t, b, e in zip(tip_nodes.tolist(), bounds.tolist(), ends.tolist()):
        by_clade[t] = clade_leaves[b:e]
    for v in order:
        share = 100.0 * node_mass[v] / total
        if v < L:
            labels.append((v, f"{tr.leaf_names[v]} ({share:.1f}%)"))
            continue
        members = by_clade[v]
        top = members[np.lexsort((members, -mass[members]))][:names_per_clade]
        more = size[v] - top.size
        labels.append(
            (v, ", ".join(tr.leaf_names[j] for j in top) + (f" +{more}" if more else "") + f" ({share:.1f}%)")
        )
        tip_end = max(end[v], x[v] + 0.04 * frame)
        wedges.append([(x[v], y[v]), (tip_end, y[v] + 0.32), (tip_end, y[v] - 0.32)])
        if cut:
            dots.append([(tip_end, y[v]), (frame, y[v])])
    ax.add_collection(LineCollection(segs, colors="0.2", linewidths=0.9))
    ax.add_collection(LineCollection(dots, colors="0.5", linewidths=0.6, linestyles="dotted"))
    ax.add_collection(PolyCollection(wedges, facecolors="0.8", edgecolors="0.4", linewidths=0.6))
    for v, text in labels:
        ax.text((frame if cut else deepest[v]) + 0.01 * frame, y[v], text, va="center", fontsize=8)
    ax.set_xlim(-0.01 * frame, frame * 1.02)
    leaf_len = float(np.mean(x[:L] - x[tr.parent[:L]]))
    ax.set_xlabel(
        "path length from the root"
        + (
            f"; leaf edges (mean {leaf_len:.3g}) cut at the frame, wedges reach the clade's deepest branching"
            if cut
            else ""
        )
    )
    ax.set_ylim(-1, len(order))
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title(
        title
        or f"feature tree: {L:,} features, the {len(order)} heaviest clades"
        + ("" if X is not None else " (equal feature masses)"),
        fontsize=10,
    )
    return fig


def distance_heatmap(
    D: np.ndarray,
    labels: Sequence[Any] | None = None,
    *,
    ax: Any = None,
    title: str | None = None,
    max_samples: int = HEATMAP_MAX_SAMPLES,
) -> Any:
    """Heatmap of a square distance matrix, samples ordered by their average-linkage tree on ``D``.

    The order is SciPy's ``leaves_list`` of ``linkage(D, "average")``; above ``max_samples``
    samples every j-th of that order is drawn (the title says so). ``labels`` (one per sample)
    become a colour strip on the left with a legend.
    """
    from scipy.cluster.hierarchy import leaves_list, linkage
    from scipy.spatial.distance import squareform

    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"a heatmap needs a square distance matrix, not {D.shape}")
    n = D.shape[0]
    if labels is not None and len(labels) != n:
        raise ValueError(f"{len(labels)} labels for {n} samples")
    order = leaves_list(linkage(squareform(D, checks=False), "average")) if n > 1 else np.arange(n)
    step = max(1, -(-n // max_samples))
    order = order[::step]
    fig, ax = _figure(ax, (7.5, 6.5))
    im = ax.imshow(D[np.ix_(order, order)], cmap="viridis", interpolation="nearest", aspect="equal")
    fig.colorbar(im, ax=ax, shrink=0.6, label="distance", location="bottom", pad=0.02)
    ax.set_xticks([])
    ax.set_yticks([])
    note = f" (1 in {step} drawn)" if step > 1 else ""
    ax.set_title(title or f"{n:,} samples ordered by average linkage{note}", fontsize=10)
    if labels is not None:
        from matplotlib.patches import Patch

        lab = np.asarray([str(v) for v in labels], dtype=object)
        classes = sorted(set(lab.tolist()))
        import matplotlib

        colours = matplotlib.colormaps["tab20"].resampled(max(len(classes), 1))
        code = np.searchsorted(np.asarray(classes, dtype=object), lab[order])
        strip = ax.inset_axes((-0.05, 0.0, 0.03, 1.0))
        strip.imshow(
            code[:, None], cmap=colours, aspect="auto", interpolation="nearest", vmin=-0.5, vmax=len(classes) - 0.5
        )
        strip.set_xticks([])
        strip.set_yticks([])
        shown = classes[:20]
        ax.legend(
            handles=[Patch(color=colours(i), label=c) for i, c in enumerate(shown)],
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=7,
            frameon=False,
            title=None if len(classes) <= 20 else f"first 20 of {len(classes)} labels",
        )
    return fig


def classify_report(report: Mapping[str, Any], *, ax: Any = None, title: str | None = None) -> Any:
    """Accuracy against k for every method of a ``classify`` report, a band of +- one std over splits.

    ``report`` is :func:`hdtwd_cli.classify`'s result (or its ``--json`` file, loaded): per method
    ``per_k`` (mean over splits) and ``per_k_std``; the best k of each method is marked. A method the
    report skipped (``status`` other than ``ok``: no accuracy) is left out.
    """
    ks = [int(k) for k in report["k"]]
    fig, ax = _figure(ax, (9.0, 4.5))
    for name, res in report["methods"].items():
        if res.get("status", "ok") != "ok":
            continue
        mean = np.array([res["per_k"][str(k)] for k in ks])
        std = np.array([res.get("per_k_std", {}).get(str(k), 0.0) for k in ks])
        (line,) = ax.plot(ks, mean, marker="o", markersize=3, label=f"{name} ({res['mean']:.1f}, k={res['best_k']})")
        ax.fill_between(ks, mean - std, mean + std, color=line.get_color(), alpha=0.12, linewidth=0)
        ax.plot([res["best_k"]], [res["mean"]], marker="*", markersize=10, color=line.get_color())
    ax.set_xlabel("k (neighbours)")
    ax.set_ylabel("kNN accuracy (%)")
    ax.set_xticks(ks)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(
        title
        or f"{report['splits']} splits, {report['n_samples']:,} samples, {report['n_classes']} "
        "classes: mean +- std over splits",
        fontsize=10,
    )
    return fig
