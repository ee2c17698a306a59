r"""Memory estimates of learning the features' tree, and the refusal before a stage that would not fit.

:func:`tree_memory_bytes` estimates each heavy stage's peak (the diffusion operator, the embedding,
the HD-LCA tree), :func:`check_tree_memory` refuses (:class:`~hdtwd_cli.errors.ResourceError`)
with a message that names what would fit. Pure arithmetic over the shapes and the parameters.
"""

from __future__ import annotations

from typing import Any

from hdtwd_cli._runtime.memory import allowance, human_bytes
from hdtwd_cli.errors import ResourceError
from hdtwd_cli.tree._landmarks import effective_landmarks
from hdtwd_cli.tree._linkage import square_bytes, square_fits
from hdtwd_cli.tree._params import TreeParams

#: Share of the available memory that learning the tree may take (the rest stays free for the
#: interpreter, the libraries' buffers and estimates that run short).
TREE_SHARE = 0.85


def tree_memory_bytes(
    n: int,
    m: int,
    nnz: int | None,
    params: TreeParams,
    store_embedding: bool | None = None,
    available: int | None = None,
) -> dict[str, int]:
    """Estimated peak bytes of each heavy stage of learning a tree over ``m`` features.

    ``nnz`` is the number of stored entries of a sparse ``X`` (``None``: dense). The estimate
    covers the arrays the stages allocate, not the input itself (already in memory).
    ``store_embedding`` (default: unless the edge weights are ``lca``): the float64 embedding is
    kept (``hdtwd embed``, ``midpoint`` weights); otherwise the tree comes straight from the
    operator (:func:`_hd_lca.hd_lca_products`). ``available``: complete linkage's square matrix is
    counted where it will be used (at most half of ``available``; otherwise the chain runs on the
    condensed values in place, with the same merges, and needs nothing more).
    ``learner="average"``: the ``m x m`` Gram matrix with the condensed distances, then those and SciPy's copy.
    Exact path: the ``m x m`` distance, kernel and eigenvector matrices (4 of them); then either
    ``psi`` of ``(K+1) m^2`` values, or per scale the eigenvectors, ``W``, the densities and their
    float32 square root next to the condensed product; then 3 condensed ``m^2/2`` vectors (values,
    order, ranks), and for complete linkage its square ``m x m`` matrix where it fits.
    Landmark path (``m'`` landmarks): the ``m x m'`` distances/affinities (4 of them) and the
    n x m' landmark vectors, then ``psi`` of ``(K+1) m m'`` values (float32 for the tree, or
    float64 stored and its float32 copy) next to the condensed HD-LCA product (SciPy's copy of it
    for average and weighted linkage), or, for complete linkage with ``lca`` weights, the square
    matrix alone (the product is written into it).
    """
    K1 = params.scales + 1
    pairs = m * (m - 1) // 2
    if params.learner == "average":  # the Gram matrix beside the condensed distances; then those beside SciPy's copy
        return {"diffusion": 8 * m * m + 8 * pairs, "embedding": 0, "tree": 16 * pairs}
    nl = effective_landmarks(params.landmarks, m)
    store = params.edge_weights != "lca" if store_embedding is None else store_embedding
    fits = available is None or square_fits(m, available)
    square = square_bytes(m) if params.linkage == "complete" and fits else 0  # complete linkage's m x m matrix
    if nl == 0:
        if store:
            return {
                "diffusion": 8 * 4 * m * m,
                "embedding": 8 * (K1 + 2) * m * m,
                "tree": 8 * (K1 * m * m + 3 * pairs) + square,
            }
        return {"diffusion": 8 * 4 * m * m, "embedding": 28 * m * m + 8 * pairs, "tree": 24 * pairs + square}
    sparse_side = 8 * n * nl if nnz is None else 12 * min(nnz, n * nl)
    # the condensed product, and SciPy's copy of it for average and weighted linkage (complete linkage
    # works on it in place where no square matrix); none at all where the product is written straight
    # into the square matrix (lca weights, one K: hd_lca_products(square=True))
    copies = 0 if square and not store else 1 if params.linkage in ("single", "complete") else 2
    psi = (12 if store else 4) * K1 * m * nl
    return {
        "diffusion": 8 * 4 * m * nl + sparse_side,
        "embedding": psi + 8 * 2 * m * nl + 8 * pairs,
        "tree": psi + 8 * copies * pairs + square + (1 << 23),
    }


def check_tree_memory(
    n: int,
    m: int,
    nnz: int | None,
    params: TreeParams,
    available: int,
    path: str | None = None,
    stages: tuple[str, ...] = ("diffusion", "embedding", "tree"),
    store_embedding: bool | None = None,
) -> int:
    """Refuse (:class:`errors.ResourceError`) before a stage would not fit in ``available`` bytes.

    The message names what would fit: landmarks instead of the exact operator, fewer landmarks,
    or single linkage (which needs no copy of the condensed HD-LCA values). Returns the estimate.
    """

    def peak(p: TreeParams) -> int:
        est = tree_memory_bytes(n, m, nnz, p, store_embedding, available)
        return max(est[s] for s in stages)

    need = peak(params)
    if need <= TREE_SHARE * available:
        return need

    def fits(p: TreeParams) -> bool:
        return peak(p) <= TREE_SHARE * available

    nl = effective_landmarks(params.landmarks, m)
    tries: list[dict[str, Any]] = []
    for n_l in (500, 200, 100):
        if n_l < (nl or m):
            tries.append({"landmarks": n_l})
    tries = ([{"linkage": "single"}] if params.linkage != "single" else []) + tries
    if params.linkage != "single":
        tries += [dict(t, linkage="single") for t in tries if "landmarks" in t]
    way = next((t for t in tries if fits(params.replace(**t))), None)
    names = {f"h{i}": k for i, k in enumerate(way or {})}
    hint = (
        "use " + " ".join(f"{{h{i}}} {v}" for i, v in enumerate((way or {}).values()))
        if way is not None
        else "keep fewer features (e.g. drop rare ones) or use a bigger machine"
    )
    raise ResourceError(
        f"{'learning the tree' if 'tree' in stages else 'the embedding'} over {m} features needs about "
        f"{human_bytes(need)}, more than hdtwd allows itself: {allowance(TREE_SHARE, available)}; {hint}",
        path,
        **names,
    )
