r"""The methods ``classify`` compares: one registry that validation, the help, the report and the protocol read.

Each :class:`Method` names its family (how :func:`._protocol.evaluate` scores it), what it compares
(the report's ``params.on``), whether it needs POT, whether ``classify`` runs it by default, and for
the tree families the shape it builds (:class:`Shape`, built by :func:`._competitors.shape_trees`).
A method of an existing family is one entry here; a new competitor tree is its module and one entry
whose :class:`Shape` names the builder (:attr:`Shape.source`): the builders (:data:`BUILDER_SOURCES`), the
contract test of every tree and docs/classify.md's table (:func:`methods_table`) follow from it. A new
family is one :class:`Family` entry of :data:`FAMILIES` whose ``route`` names its
:class:`hdtwd_cli.evaluate._families.Route` (how its distances are computed, what it reports).

What the TWD methods compare
    ``hdtwd``, ``star``, the competitors' trees (fitted or not), ``flowtree`` and ``ot`` all compare
    the same histograms of a split: the samples' values under the map the split's training rows
    define (:func:`hdtwd_cli.tree._learn.prepare`: the denoiser where the rule denoises, the idf
    weights), normalised to mass 1. Only the tree (or the ground cost) differs between them. The
    baselines compare the values as they are (:mod:`._baselines`).

The joint hierarchies (not run by default)
    ``joint`` and ``joint-alt`` learn a samples' and a features' tree of the training rows
    (:func:`hdtwd_cli.joint._alternate.alternate_hierarchies`, Algorithms 2 and 1) and compare the same
    histograms on the final features' tree, ``joint`` filtered in its Haar basis (the vectors the
    training rows keep: no test row shapes a tree). ``joint-transductive`` learns them from every row,
    test rows included (their labels unseen), as the paper's transductive variant.

The module holds data only (the standard library): the command line reads it at start-up, before
NumPy is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Shape",
    "Family",
    "Method",
    "FAMILIES",
    "METHODS",
    "COMPETITOR_FAMILIES",
    "of_family",
    "method_names",
    "methods_help",
    "BASELINES",
    "BUILDER_SOURCES",
    "methods_table",
    "with_methods_table",
    "TREE_METHODS",
    "FITTED_METHODS",
]


@dataclass(frozen=True)
class Shape:
    """How a tree method builds its tree(s) from the split's unit feature vectors.

    Attributes
    ----------
    builder : str
        The tree's name (a key of :data:`BUILDER_SOURCES` and of :data:`._competitors.BUILDERS`).
    source : str, optional
        ``"module:function"`` of the builder, on the entry that introduces it (one per builder):
        ``function(vectors, names, seed)`` (or without ``seed`` where it draws nothing, or
        ``function(names)`` where it reads no vectors) returns the tree. A new competitor tree is its
        module and one :class:`Method` entry whose shape gives its source; the contract every tree
        keeps is checked for each (tests/test_tree_contract.py).
    count : int
        Trees averaged (the sliced methods: the mean of the TWDs on ``count`` trees).
    seed : str
        ``split``: ``seed + split`` (a new tree per split); ``fixed``: ``seed`` (one tree for every
        split); ``slices``: tree ``t`` of split ``s`` from ``default_rng([seed, s, t])``; ``none``: the
        builder draws nothing.
    """

    builder: str
    count: int = 1
    seed: str = "none"
    source: str | None = None


@dataclass(frozen=True)
class Family:
    """One family of methods: how the protocol scores them and what the help and the docs say of them.

    Attributes
    ----------
    name : str
        The family's key (:attr:`Method.family`).
    help : str
        What ``--methods``' help says of it.
    doc : str
        What docs/classify.md's table says it compares (:func:`methods_table`).
    route : str
        ``"module:Class"`` of its :class:`hdtwd_cli.evaluate._families.Route`: how a method's distances are
        computed on a split and what the report says of it.
    competitor : bool
        A competitor's tree: hdtwd's margin over the best of these is reported.
    """

    name: str
    help: str
    doc: str
    route: str
    competitor: bool = False


@dataclass(frozen=True)
class Method:
    """One method of ``classify``.

    Attributes
    ----------
    name : str
        The name ``--methods`` takes and the report's key.
    family : str
        A key of :data:`FAMILIES`: how the protocol scores it.
    input : str
        What it compares (the report's ``params.on``; docs/classify.md).
    needs_pot : bool
        It solves exact transport programs (POT, ``hdtwd[ot]``).
    default : str
        When ``classify`` runs it without ``--methods``: ``always``, ``counts`` (every value a whole
        number), ``cooccur`` (unless most pairs of features never share a sample), ``never``.
    shape : Shape, optional
        The tree families' trees.
    fit : str, optional
        ``fitted``: ``edges`` (edge weights fitted to exact OT) or ``heights`` (an ultrametric's merge
        heights).
    algorithm : str, optional
        ``joint``: the joint hierarchies' algorithm (``filtered``: Algorithm 2, ``alternating``:
        Algorithm 1; :class:`hdtwd_cli.joint._alternate.JointParams`).
    transductive : bool
        ``joint``: the trees are learned from ALL the rows (training and test; labels unseen), not
        from the training rows only.
    learner : str, optional
        ``learner``: hdtwd's other learner of the features' tree (:attr:`TreeParams.learner
        <hdtwd_cli.tree._params.TreeParams>`), from the split's same prepared stage.
    """

    name: str
    family: str
    input: str
    needs_pot: bool = False
    default: str = "never"
    shape: Shape | None = None
    fit: str | None = None
    algorithm: str | None = None
    transductive: bool = False
    learner: str | None = None


_R = "hdtwd_cli.evaluate._families:"

#: The families, in the order of ``--methods``' help and docs/classify.md's table.
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "hdtwd",
            "the TWD on the tree learned from the training rows",
            "the TWD on the tree learned from the training rows",
            _R + "Learned",
        ),
        Family(
            "star",
            "the TWD on the star tree (every leaf on one edge from the root): the same histograms without a hierarchy",
            "the TWD on the star tree (every leaf on one edge of length 1 from the root): the weighted L1 "
            "distance between the SAME histograms as hdtwd's, without a hierarchy",
            _R + "Star",
        ),
        Family(
            "baseline",
            "distances between the samples' values",
            "the samples' values as they are (table below)",
            _R + "Baseline",
        ),
        Family(
            "tree",
            "the paper's competitor trees of the same features",
            "the TWD on the paper's competitor trees of the same features",
            _R + "Competitor",
            competitor=True,
        ),
        Family(
            "fitted",
            "competitor trees whose weights (an ultrametric's heights) are fitted to exact transport, needs POT",
            "competitor trees whose edge weights (an ultrametric's heights) are fitted to exact transport on "
            "sampled training pairs (the report's `params` give the pairs and the fit's `rho` per split); needs "
            "POT",
            _R + "Fitted",
            competitor=True,
        ),
        Family(
            "flow",
            "the quadtree's flow costed in the ground metric, on ot's test rows",
            "the quadtree's flow costed in the ground metric, on `ot`'s test rows",
            _R + "Flow",
        ),
        Family(
            "ot",
            "exact optimal transport, Euclidean ground cost, needs POT",
            "exact optimal transport, the Euclidean distance between the features' unit vectors as ground cost "
            "(WMD; GMD with `--feature-embedding` gene vectors); needs POT",
            _R + "ExactOT",
        ),
        Family(
            "joint",
            "the TWD on the features' tree of joint hierarchies of samples and features (Lin et al. 2025); "
            "not run by default",
            "the TWD on the final features' tree of the joint hierarchies of samples and features (Lin, Coifman, "
            "Mishne & Talmon 2025; `hd.learn_joint`): Algorithm 2 (Haar filtering) and Algorithm 1 learned from "
            "the training rows, and Algorithm 2 learned from all the rows (the paper's transductive variant); not"
            " run by default",
            _R + "Joint",
        ),
        Family(
            "learner",
            "the TWD on the tree hdtwd's other learner learns from the training rows (the same histograms)",
            "the TWD on the tree of hdtwd's other learner (`--learner average`: average linkage on the features' "
            "correlations) from the same histograms; not run by default",
            _R + "OtherLearner",
        ),
    )
}
#: The competitors' trees: hdtwd's margin over the best of them is reported.
COMPETITOR_FAMILIES = tuple(f.name for f in FAMILIES.values() if f.competitor)

_HIST = "the split's histograms (training rows' denoiser where the rule denoises, idf weights)"
_UNIT = "the unit feature vectors"

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("hdtwd", "hdtwd", f"the TWD on the tree learned from the training rows, {_HIST}", default="always"),
        Method(
            "star",
            "star",
            f"the TWD on the star tree (equal edges from the root: weighted L1), {_HIST}",
            default="always",
            shape=Shape("star", source="hdtwd_cli.evaluate._competitors:star_tree"),
        ),
        Method("cosine", "baseline", "row-normalised histograms", default="always"),
        Method("euclidean", "baseline", "row-normalised histograms", default="always"),
        Method("l1", "baseline", "row-normalised histograms", default="always"),
        Method("tfidf-l1", "baseline", "tf-idf (idf from the training rows), rows L1-normalised", default="counts"),
        Method("tfidf-cosine", "baseline", "tf-idf (idf from the training rows), rows L1-normalised", default="counts"),
        Method(
            "pca",
            "baseline",
            "50 principal components fitted on the training rows (counts: log1p counts-per-10k; other values: "
            "each feature scaled to unit variance on the training rows, clipped at 10)",
            default="cooccur",
        ),
        Method(
            "quadtree",
            "tree",
            f"Indyk & Thaper's randomly shifted quadtree of {_UNIT} (cell diameters as edges)",
            shape=Shape("quadtree", seed="split", source="hdtwd_cli.evaluate._competitors:quadtree"),
        ),
        Method(
            "mst",
            "tree",
            f"Euclidean minimum spanning tree of {_UNIT}",
            shape=Shape("mst", source="hdtwd_cli.evaluate._competitors:mst_tree"),
        ),
        Method(
            "cluster-tree",
            "tree",
            f"hierarchical k-means tree (Le et al. 2019) of {_UNIT}, one fixed seed",
            shape=Shape("cluster-tree", seed="fixed", source="hdtwd_cli.evaluate._competitors:cluster_tree"),
        ),
        *(
            Method(
                f"tswd-{n}",
                "tree",
                f"tree-sliced: mean TWD over {n} random hierarchical k-means trees",
                shape=Shape("cluster-tree", n, "slices"),
            )
            for n in (1, 5, 10)
        ),
        Method(
            "ultrafit",
            "tree",
            f"the ultrametric closest to {_UNIT}' Euclidean distances (Chierchia & Perret 2019)",
            shape=Shape("ultrafit", source="hdtwd_cli.evaluate._ultrametric:ultrafit_tree"),
        ),
        Method(
            "treerep",
            "tree",
            f"TreeRep's tree (Steiner nodes) of {_UNIT}' distances (Sonthalia & Gilbert 2020)",
            shape=Shape("treerep", seed="split", source="hdtwd_cli.evaluate._treerep:treerep_tree"),
        ),
        Method(
            "hhc",
            "tree",
            f"hyperbolic hierarchical clustering of {_UNIT}' cosine similarities (Chami et al. 2020)",
            shape=Shape("hhc", seed="split", source="hdtwd_cli.evaluate._hyperbolic_hc:hhc_tree"),
        ),
        Method(
            "ghhc",
            "tree",
            f"gradient-based hyperbolic hierarchical clustering of {_UNIT} (Monath et al. 2019)",
            shape=Shape("ghhc", seed="split", source="hdtwd_cli.evaluate._ghhc:ghhc_tree"),
        ),
        Method(
            "wqtwd",
            "fitted",
            "the quadtree, edge weights fitted to exact OT (Yamada et al. 2022)",
            needs_pot=True,
            shape=Shape("quadtree", seed="split"),
            fit="edges",
        ),
        Method(
            "wctwd",
            "fitted",
            "the hierarchical k-means tree, edge weights fitted to exact OT (Yamada et al. 2022)",
            needs_pot=True,
            shape=Shape("cluster-tree", seed="fixed"),
            fit="edges",
        ),
        Method(
            "swqtwd",
            "fitted",
            "sliced: mean TWD over 5 quadtrees, each with weights fitted to exact OT",
            needs_pot=True,
            shape=Shape("quadtree", 5, "slices"),
            fit="edges",
        ),
        Method(
            "swctwd",
            "fitted",
            "sliced: mean TWD over 5 hierarchical k-means trees, each with weights fitted to exact OT",
            needs_pot=True,
            shape=Shape("cluster-tree", 5, "slices"),
            fit="edges",
        ),
        Method(
            "ultratree",
            "fitted",
            "UltraFit's tree, its merge heights fitted to exact OT as an ultrametric (Chen et al. 2024)",
            needs_pot=True,
            shape=Shape("ultrafit"),
            fit="heights",
        ),
        Method(
            "flowtree",
            "flow",
            f"the quadtree of quadtree (seed + split), one tree-optimal flow (greedy bottom-up, leaves in index "
            f"order) costed by the Euclidean distance between {_UNIT} (none: the origin); {_HIST}",
            shape=Shape("quadtree", seed="split"),
        ),
        Method(
            "ot",
            "ot",
            f"exact optimal transport (POT's network simplex), ground cost the Euclidean distance between {_UNIT} "
            f"(none: the origin); {_HIST}",
            needs_pot=True,
        ),
        Method(
            "joint",
            "joint",
            f"the TWD on the final features' tree of Algorithm 2 (alternating samples' and features' trees with "
            f"Haar filtering; Lin et al. 2025) learned from the training rows, {_HIST}, filtered in the tree's Haar "
            "basis (the vectors the training rows keep)",
            algorithm="filtered",
        ),
        Method(
            "joint-alt",
            "joint",
            f"the TWD on the final features' tree of Algorithm 1 (alternating samples' and features' trees, no "
            f"filtering; Lin et al. 2025) learned from the training rows, {_HIST}",
            algorithm="alternating",
        ),
        Method(
            "joint-transductive",
            "joint",
            "joint's Algorithm 2 learned from ALL the rows, training and test (labels unseen: the paper's "
            "transductive variant), the histograms of the map all the rows define (denoiser, idf weights), "
            "filtered in the tree's Haar basis (the vectors all the rows keep)",
            algorithm="filtered",
            transductive=True,
        ),
        Method(
            "average",
            "learner",
            f"the TWD on the average learner's tree (UPGMA on the features' correlations, hdtwd --learner average) "
            f"learned from the training rows, {_HIST}",
            learner="average",
        ),
    )
}


def of_family(*families: str) -> tuple[str, ...]:
    """The methods of ``families``, in registry order."""
    return tuple(n for n, m in METHODS.items() if m.family in families)


def method_names() -> tuple[str, ...]:
    """Every method, in registry order (the order of ``--methods``' help)."""
    return tuple(METHODS)


#: Each tree builder's ``"module:function"`` (:attr:`Shape.source`), from the entry that introduces it.
BUILDER_SOURCES: dict[str, str] = {
    m.shape.builder: m.shape.source for m in METHODS.values() if m.shape is not None and m.shape.source is not None
}

#: The baselines, the competitors' trees, the trees fitted to exact OT (registry order).
BASELINES = of_family("baseline")
TREE_METHODS = of_family("tree")
FITTED_METHODS = of_family("fitted")


def methods_help() -> str:
    """``--methods``' help: every name, then what each family is."""
    groups = []
    for family in FAMILIES.values():
        names, what = of_family(family.name), family.help
        shown = names[0] if len(names) == 1 else f"{names[0]} ... {names[-1]}"
        groups.append(f"{shown}: {what}")
    return f"Comma-separated subset of {','.join(METHODS)} ({'; '.join(groups)})"


#: The markers around the generated table in docs/classify.md.
TABLE_BEGIN = (
    "<!-- the methods by family: generated by `python -m hdtwd_cli.cli._manpage man docs/usage.md docs/classify.md` -->"
)
TABLE_END = "<!-- end of the generated table -->"


def methods_table() -> str:
    """docs/classify.md's table of the methods by family, from the registry (a new method appears by itself)."""
    lines = [TABLE_BEGIN, "", "| family | methods | what it compares |", "|---|---|---|"]
    lines += [f"| {f.name} | `{', '.join(of_family(f.name))}` | {f.doc} |" for f in FAMILIES.values()]
    return "\n".join([*lines, "", TABLE_END])


def with_methods_table(page: str) -> str:
    """The text of docs/classify.md with its generated table (between the markers) made from the registry."""
    head, rest = page.split(TABLE_BEGIN, 1)
    return head + methods_table() + rest.split(TABLE_END, 1)[1]
