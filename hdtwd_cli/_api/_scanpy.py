"""scanpy's face: ``neighbors`` writes the TWD kNN graph where ``sc.pp.neighbors`` writes its graph;
``sample_hierarchy`` writes the joint hierarchies' samples' tree (its order, its clusters) and distances."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from hdtwd_cli._api._common import Unseen
from hdtwd_cli._api._distances import KnnGraph, distance_vectors
from hdtwd_cli._api._joint import learn_joint
from hdtwd_cli._runtime.progress import Reporter
from hdtwd_cli.errors import (
    ParameterError,
)
from hdtwd_cli.joint._alternate import JointHierarchy, JointParams
from hdtwd_cli.knn._graph import (
    scanpy_keys,
    scanpy_neighbors_uns,
)
from hdtwd_cli.tree._params import TreeParams
from hdtwd_cli.tree._tree import Tree

if TYPE_CHECKING:  # pragma: no cover
    import anndata


def _adata_matrix(adata: anndata.AnnData, layer: str | None, use_raw: bool | None) -> tuple[Any, list[str], str]:
    """The matrix ``neighbors`` reads: ``layers[layer]``, ``raw.X`` or ``X`` (see :func:`neighbors`)."""
    if layer is not None and use_raw:
        raise ParameterError("{arg} and {b} exclude each other", "layer", b="use_raw")
    if layer is not None:
        if layer not in adata.layers:
            raise ParameterError(f"{layer!r} is not in adata.layers ({', '.join(adata.layers) or 'none'})", "layer")
        return adata.layers[layer], [str(v) for v in adata.var_names], f"layers[{layer!r}]"
    if use_raw is None:
        X = adata.X
        negative = X is not None and (X.min() < 0 if not sp.issparse(X) else (X.data < 0).any())
        use_raw = bool(negative and adata.raw is not None)
    if use_raw:
        if adata.raw is None:
            raise ParameterError("is set but adata has no .raw", "use_raw")
        return adata.raw.X, [str(v) for v in adata.raw.var_names], "raw.X"
    return adata.X, [str(v) for v in adata.var_names], "X"


#: ``mask_var``'s default: ``var["highly_variable"]`` when ``adata.var`` has it (``sc.pp.pca``'s rule).
HVG = "highly_variable"


def feature_mask(
    names: Sequence[str],
    var_names: Sequence[str],
    values: Any,
    *,
    label: str = HVG,
) -> np.ndarray:
    """The columns kept by a ``var`` mask: ``values`` (one bool per ``var_names``) matched by name to
    ``names``, the columns read (``var_names`` themselves, or ``raw.var_names`` with ``use_raw``).

    Parameters
    ----------
    names : sequence of str
        The names of the matrix's columns.
    var_names : sequence of str
        ``adata.var_names``, in the order of ``values``.
    values : array-like of bool
        The mask over ``var_names`` (``var[label]``).
    label : str
        What the mask is called in messages.

    Returns
    -------
    ndarray of bool
        One entry per column of the matrix: kept or not.
    """
    v = np.asarray(values)
    if v.dtype != bool and not (v.dtype == object and all(isinstance(x, (bool, np.bool_)) for x in v)):
        raise ParameterError(f"var[{label!r}] holds {v.dtype} values, not booleans", "mask_var")
    if v.shape != (len(var_names),):
        raise ParameterError(f"has {v.size} values for {len(var_names)} features", "mask_var")
    v = v.astype(bool)
    names = [str(n) for n in names]
    if list(names) == [str(n) for n in var_names]:
        keep = v
    else:  # raw.X: its columns are a superset of var's; the mask is matched by name
        kept = {str(n) for n, k in zip(var_names, v) if k}
        keep = np.fromiter((n in kept for n in names), dtype=bool, count=len(names))
    if not keep.any():
        raise ParameterError(f"var[{label!r}] keeps none of the {len(names)} features read", "mask_var")
    return keep


def _masked(
    adata: anndata.AnnData, X: Any, names: list[str], mask_var: str | np.ndarray | None
) -> tuple[Any, list[str], dict[str, Any]]:
    """``X`` and ``names`` restricted to ``mask_var``'s features, and the record of it (``mask_var``,
    ``n_features``, ``n_features_read``); ``sc.pp.pca``'s rule: a string names a bool column of
    ``adata.var`` (``"highly_variable"`` only where present), an array is the mask, ``None`` keeps all."""
    record: dict[str, Any] = {"mask_var": None, "n_features": len(names), "n_features_read": len(names)}
    if mask_var is None:
        return X, names, record
    if isinstance(mask_var, str):
        if mask_var not in adata.var.columns:
            if mask_var == HVG:
                return X, names, record
            raise ParameterError(
                f"{mask_var!r} is not a column of adata.var ({', '.join(map(str, adata.var.columns)) or 'none'})",
                "mask_var",
            )
        values, label = adata.var[mask_var].to_numpy(), mask_var
    else:
        values, label = np.asarray(mask_var), "mask"
    keep = feature_mask(names, [str(v) for v in adata.var_names], values, label=label)
    if keep.all():
        return X, names, dict(record, mask_var=label)
    index = np.flatnonzero(keep)
    X = X[:, index]
    return X, [names[i] for i in index], dict(record, mask_var=label, n_features=int(index.size))


def neighbors(
    adata: anndata.AnnData,
    n_neighbors: int = 15,
    *,
    tree: Tree | None = None,
    params: TreeParams | None = None,
    layer: str | None = None,
    use_raw: bool | None = None,
    mask_var: str | np.ndarray | None = HVG,
    key_added: str | None = None,
    copy: bool = False,
    store_vectors: bool | None = None,
    feature_embedding: tuple[np.ndarray, Sequence[str]] | None = None,
    unseen: Unseen = "error",
    method: str = "auto",
    seed: int = 0,
    client: Any = None,
    progress: Reporter | bool | None = None,
) -> anndata.AnnData | None:
    """The TWD kNN graph of the cells, written into ``adata`` exactly as ``sc.pp.neighbors`` writes its graph.

    Afterwards ``sc.tl.umap``, ``sc.tl.leiden``, ``sc.tl.paga``, ``sc.tl.diffmap`` ... run on the
    TWD graph unchanged (with ``neighbors_key=key_added`` when a key is given).

    Parameters
    ----------
    adata : AnnData
        Cells x genes; the values must be non-negative (counts or normalised counts).
    n_neighbors : int
        Size of each cell's neighbourhood, the cell itself included (scanpy's meaning).
    tree : Tree, optional
        A tree learned before (e.g. on a reference atlas); default: learn one from this data.
    params : TreeParams, optional
        Configuration of the learned tree.
    layer : str, optional
        Read ``adata.layers[layer]``.
    use_raw : bool, optional
        Read ``adata.raw.X``. ``None``: ``raw`` when ``X`` holds negative values (scaled data) and
        ``adata.raw`` exists, else ``X``.
    mask_var : str, array of bool or None
        The features used, as ``sc.pp.pca``'s ``mask_var``: the default reads ``var["highly_variable"]``
        when ``adata.var`` has it (after ``sc.pp.highly_variable_genes``) and every feature otherwise;
        another column name or a boolean array over ``var_names`` selects those features; ``None``: every
        feature. Matched by name with ``use_raw``. The graph is the one of ``adata[:, mask]``.
    key_added : str, optional
        ``None``: ``obsp["distances"]``, ``obsp["connectivities"]``, ``uns["neighbors"]``; else
        ``obsp[key_added + "_distances"]``, ``obsp[key_added + "_connectivities"]``, ``uns[key_added]``.
    copy : bool
        Return a modified copy instead of writing into ``adata``.
    method, seed, client
        The neighbour search (:func:`knn_graph`).
    store_vectors : bool, optional
        Store the TWD vectors (:func:`tree_vectors`) as ``obsm["X_hdtwd"]`` and record
        ``use_rep="X_hdtwd"``, ``metric="manhattan"`` so that scanpy's tools that recompute distances
        get the TWD. ``None``: store them when they take at most :data:`VECTORS_MAX_BYTES`.

    Returns
    -------
    AnnData or None
        The copy with ``copy=True``, else ``None``. Written fields:

        - ``obsp["distances"]``: CSR float64, the ``n_neighbors - 1`` exact TWDs of each row;
        - ``obsp["connectivities"]``: CSR float32, UMAP's fuzzy simplicial set;
        - ``uns["neighbors"]``: ``connectivities_key``, ``distances_key``, ``params`` (``n_neighbors``,
          ``method="umap"``, ``random_state``, ``metric="manhattan"``, ``use_rep``, ``mask_var`` (the
          column used, ``"mask"`` for an array; absent: every feature) and ``hdtwd``: a JSON record of the tree, the
          input and the features used, ``n_features`` of ``n_features_read``);
        - ``obsm["X_hdtwd"]``: the TWD vectors (see ``store_vectors``).

    Examples
    --------
    >>> import anndata, numpy as np, hdtwd_cli as hd
    >>> adata = anndata.AnnData(np.random.default_rng(0).poisson(1.0, size=(50, 20)).astype(np.float32))
    >>> hd.neighbors(adata, n_neighbors=10)
    >>> int(adata.obsp["distances"].getnnz(axis=1).max()), adata.uns["neighbors"]["params"]["metric"]
    (9, 'manhattan')
    """
    ad = adata.copy() if copy else adata
    X, names, source = _adata_matrix(ad, layer, use_raw)
    if X is None:
        raise ParameterError("adata has no X", "adata")
    X, names, used = _masked(ad, X, names, mask_var)
    dv = distance_vectors(
        X,
        tree,
        feature_names=names,
        params=params,
        feature_embedding=feature_embedding,
        unseen=unseen,
        n_neighbors=n_neighbors,
        progress=progress,
    )
    graph = dv.knn(n_neighbors, method, seed, client)
    write_graph(ad, graph, key_added, dv.vectors_for_obsm(store_vectors), dict(graph.params, input=source, **used))
    return ad if copy else None


def write_graph(
    adata: anndata.AnnData, graph: KnnGraph, key_added: str | None, vectors: np.ndarray | None, record: dict[str, Any]
) -> None:
    """Put ``graph`` into ``adata`` in ``sc.pp.neighbors``' layout (see :func:`neighbors`)."""
    key, dkey, ckey = scanpy_keys(key_added)
    if vectors is not None:
        adata.obsm["X_hdtwd"] = vectors
    adata.obsp[dkey] = graph.distance_matrix()
    adata.obsp[ckey] = graph.connectivities()
    adata.uns[key] = scanpy_neighbors_uns(
        key_added,
        graph.n_neighbors,
        int(record.get("seed", 0)),
        use_rep="X_hdtwd" if vectors is not None else None,
        extra={
            "hdtwd": json.dumps(record, default=str, sort_keys=True),
            **({"mask_var": str(record["mask_var"])} if record.get("mask_var") is not None else {}),
        },
    )


def sample_hierarchy(
    adata: anndata.AnnData,
    *,
    n_clusters: int | None = None,
    key_added: str = "hdtwd_joint",
    layer: str | None = None,
    use_raw: bool | None = None,
    mask_var: str | np.ndarray | None = HVG,
    params: TreeParams | None = None,
    joint: JointParams | None = None,
    copy: bool = False,
    progress: bool | None = None,
) -> JointHierarchy | anndata.AnnData:
    """The joint hierarchies of the genes and the cells (:func:`learn_joint`), written into ``adata``.

    The cells' tree orders the cells (a heatmap's rows, ``adata[adata.obs[KEY_order].argsort()]``)
    and cut into ``n_clusters`` clusters groups them; its distances are the TWD on the genes' tree
    learned jointly with it.

    Parameters
    ----------
    adata : AnnData
        Cells x genes; the values must be non-negative (counts or normalised counts).
    n_clusters : int, optional
        Cut the cells' tree into this many clusters (``obs[KEY_cluster]``); ``None``: no clusters.
    key_added : str
        Prefix of the written fields (``KEY`` below).
    layer, use_raw, mask_var
        The matrix read and the features used, as :func:`neighbors` reads them (by default the highly
        variable genes where ``var["highly_variable"]`` exists).
    params : TreeParams, optional
        The trees' stages.
    joint : JointParams, optional
        The joint learning's choices (default ``JointParams()``).
    copy : bool
        Write into a copy of ``adata`` and return it, instead of writing into ``adata``.
    progress : bool, optional
        Progress bars on stderr.

    Returns
    -------
    JointHierarchy or AnnData
        The copy with ``copy=True``, else the :class:`JointHierarchy` (both trees). Written fields:

        - ``obs[KEY_order]``: int, each cell's position in the drawing order of the cells' tree;
        - ``obs[KEY_cluster]``: categorical, the cells' tree cut into ``n_clusters`` (when given);
        - ``obsp[KEY_distances]``: the ``n x n`` distances (float64, dense);
        - ``uns[KEY]``: ``samples_tree`` and ``features_tree`` (Newick), ``rounds`` (per round: ``change``, ``moved``,
          ``seconds``, ``kept_features``, ``kept_samples``), ``converged``, ``params`` (the trees' and the
          joint learning's; options left to their automatic choice are left out), ``input`` (the matrix read),
          ``mask_var`` (the ``var`` column used, ``"mask"`` for an array; absent: every feature), ``n_features``.

    Examples
    --------
    >>> import anndata, numpy as np, hdtwd_cli as hd
    >>> adata = anndata.AnnData(np.random.default_rng(0).poisson(1.0, size=(40, 12)).astype(np.float32))
    >>> J = hd.sample_hierarchy(adata, n_clusters=3)
    >>> sorted(adata.obs["hdtwd_joint_order"]) == list(range(40)), adata.obs["hdtwd_joint_cluster"].nunique()
    (True, 3)
    """
    import pandas as pd

    ad = adata.copy() if copy else adata
    X, names, source = _adata_matrix(ad, layer, use_raw)
    if X is None:
        raise ParameterError("adata has no X", "adata")
    X, names, used = _masked(ad, X, names, mask_var)
    n = int(X.shape[0])
    if n_clusters is not None and not (isinstance(n_clusters, (int, np.integer)) and 1 <= n_clusters <= n):
        raise ParameterError(
            f"must be an integer between 1 and the number of cells ({n}), not {n_clusters!r}", "n_clusters"
        )
    params, joint = params or TreeParams(), joint or JointParams()
    J = learn_joint(
        X, names, sample_names=[str(v) for v in ad.obs_names], params=params, joint=joint, progress=progress
    )
    position = np.empty(n, dtype=np.int64)
    position[J.sample_order()] = np.arange(n, dtype=np.int64)
    ad.obs[f"{key_added}_order"] = position
    if n_clusters is not None:
        labels = J.sample_clusters(int(n_clusters)).astype(str)
        ad.obs[f"{key_added}_cluster"] = pd.Categorical(labels, categories=sorted(set(labels), key=int))
    ad.obsp[f"{key_added}_distances"] = J.distances
    chosen = {**params.as_dict(), **joint.as_dict()}
    ad.uns[key_added] = {
        "samples_tree": J.samples_tree.to_newick(),
        "features_tree": J.features_tree.to_newick(),
        "rounds": {
            "change": np.array([r.change for r in J.rounds], dtype=np.float64),
            "moved": np.array([r.moved for r in J.rounds], dtype=np.float64),
            "seconds": np.array([r.seconds for r in J.rounds], dtype=np.float64),
            "kept_features": np.array([r.kept_features for r in J.rounds], dtype=np.int64),
            "kept_samples": np.array([r.kept_samples for r in J.rounds], dtype=np.int64),
        },
        "converged": bool(J.converged),
        "params": {k: v for k, v in chosen.items() if v is not None},
        "input": source,
        "n_features": used["n_features"],
    }
    if used["mask_var"] is not None:
        ad.uns[key_added]["mask_var"] = used["mask_var"]
    return ad if copy else J
