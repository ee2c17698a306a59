r"""Gradient-based hyperbolic hierarchical clustering (gHHC; Monath et al., KDD 2019), as a tree.

The tree of gHHC-TWD: a fixed number :math:`N` of internal nodes :math:`z_1, \dots, z_N` are points
of the Poincaré ball :math:`\mathbb{B}^k` learned by stochastic gradient descent on a triplet loss
built on a differentiable lowest common ancestor; the tree is read off the points: a node's parent
is the closest node nearer the origin, and each feature hangs from its closest node (N. Monath, M.
Zaheer, D. Silva, A. McCallum and A. Ahmed, "Gradient-based Hierarchical Clustering using Continuous
Representations of Trees in Hyperbolic Space", KDD 2019, doi:10.1145/3292500.3330997).

Leaves. The features are fixed points of the ball, not learned: feature :math:`i` is
:math:`x_i = \rho\, v_i / \lVert v_i\rVert` with :math:`\rho` = :data:`LEAF_NORM` (the reference
code's ``max_norm``), :math:`v_i` the row :math:`f_i` of ``F`` when ``F`` has at most ``dim``
columns and otherwise its Gaussian random projection to ``dim`` coordinates (the reference code's
``random_projection``); a zero vector goes to :math:`\rho e_1`. Distances are the ball's,

.. math:: d(x, z) = \operatorname{arcosh}\!\Big(1 + \frac{2 \lVert x - z\rVert^2}
          {(1 - \lVert x\rVert^2)(1 - \lVert z\rVert^2)}\Big) ,

and the internal nodes stay within the Euclidean radius :data:`NODE_NORM` :math:`< \rho` (the
reference's clip), so :math:`d(x_i, z_n) > 0` and every term below is smooth in :math:`z`.

Triplets. :data:`GHHC_TRIPLETS` triplets of distinct features are drawn uniformly
(:func:`~hdtwd_cli.evaluate._hyperbolic_hc.sample_triplets`) and each is ordered so that
:math:`(i, j)` is its most similar pair, :math:`w_{ij} \ge \max(w_{ik}, w_{jk})`, with
:math:`w = \tfrac12 (1 + \cos(f_i, f_j))` as for HHC (:func:`order_triplets`; the reference code's
``order_triple``, ties to the pair drawn first).

Differentiable LCA. With the scores :math:`s_{a n} = d(x_a, z_n)`, the LCA of :math:`i` and
:math:`j` is the node closest to both, :math:`\operatorname{arg\,min}_n \max(s_{in}, s_{jn})`,
relaxed to the softmax

.. math:: \sigma_n = \operatorname{softmax}_n\big(-\max(s_{in}, s_{jn}) + g_n\big),

and the LCA of all three, *conditional* on being another node than :math:`a^* = \operatorname{arg\,min}_n
\max(s_{in}, s_{jn})`, is

.. math:: \tau_n = \operatorname{softmax}_{n \ne a^*}\big(-\max(s_{in}, s_{jn}, s_{kn}) + g'_n\big),
          \qquad \tau_{a^*} = 0 ,

where :math:`g, g'` are perturbations :math:`\log(-\log U)`, :math:`U` uniform on :math:`(0, 1)`
(the reference's Gumbel noise, its sign included; ``gumbel=False``: none).
The reference's scores are :math:`d(x_a, z_n)` times the penalty :math:`1 + \max(0, \lVert
z_n\rVert_{\mathbb H} - \lVert x_a\rVert_{\mathbb H} + \gamma)` of the decoding below, which is
1 for every leaf and node here (:math:`\lVert x\rVert_{\mathbb H} - \lVert z\rVert_{\mathbb H} \ge
2 \operatorname{artanh} 0.9 - 2 \operatorname{artanh} 0.8 \approx 0.75 > \gamma`), so it is left out.

Loss. The expected distance of a leaf to a soft LCA is :math:`E_\sigma[s_a] = \sum_n \sigma_n s_{an}`.
In a tree where :math:`i, j` join below :math:`k`, :math:`i` and :math:`j` are closer to
:math:`\operatorname{lca}(i, j)` than to :math:`\operatorname{lca}(i, j, k)`, and :math:`k` is closer
to the latter; the loss of a triplet is the logistic ("sigmoid") loss of these three comparisons,

.. math:: \ell = \operatorname{softplus}(A_i) + \operatorname{softplus}(A_j) + \operatorname{softplus}(A_k),
          \quad A_i = \sum_n (\sigma_n - \tau_n) s_{in},\ A_j = \sum_n (\sigma_n - \tau_n) s_{jn},\
          A_k = \sum_n (\tau_n - \sigma_n) s_{kn} ,

:math:`\operatorname{softplus}(a) = \log(1 + e^a)`. Its gradient (:func:`ghhc_loss`), with
:math:`c_a = \operatorname{sigmoid}(A_a)` and :math:`v_n = c_i s_{in} + c_j s_{jn} - c_k s_{kn}`:
:math:`\partial \ell / \partial s_{an} = \pm c_a (\sigma_n - \tau_n)` directly; through the
softmaxes, :math:`\partial \ell / \partial \max(s_{in}, s_{jn}) = -\sigma_n (v_n - \sum_q \sigma_q v_q)`
and :math:`\partial \ell / \partial \max(s_{in}, s_{jn}, s_{kn}) = \tau_n (v_n - \sum_q \tau_q v_q)`,
each routed to the score that attains the max (the arg min :math:`a^*` is piecewise constant); and
with :math:`\alpha = 1 - \lVert z\rVert^2`, :math:`\beta = 1 - \lVert x\rVert^2`, :math:`\delta =
\lVert x - z\rVert^2` and :math:`t = 1 + 2\delta/(\alpha\beta)`,

.. math:: \nabla_z d(x, z) = \frac{4}{\alpha \beta \sqrt{t^2 - 1}}
          \Big( z - x + \frac{\delta}{\alpha} z \Big) .

Structure prior. The reference's "parent-child norm" prior :math:`\sum_{(c, p)} \max(0, \lVert
z_p\rVert_{\mathbb H} - \lVert z_c\rVert_{\mathbb H} + \gamma)` over the decoded pairs of a node
:math:`c` and its parent :math:`p`, :math:`\lVert z\rVert_{\mathbb H} = 2 \operatorname{artanh}
\lVert z\rVert` (:func:`structure_loss`), pushes parents towards the origin.

Optimisation. Riemannian SGD as the reference's: the Euclidean gradient of the minibatch's summed
loss scaled by the inverse metric :math:`(1 - \lVert z\rVert^2)^2 / 4`, a step of
:data:`GHHC_LEARNING_RATE`, then every node clipped to the radius :data:`NODE_NORM`. After each
minibatch step, :data:`GHHC_PRIOR_STEPS` such steps on the structure prior, its pairs decoded at the
start of each epoch. The nodes start at :data:`INIT_SCALE` times the leaves of :math:`N` distinct
features drawn at random (the reference's ``randompts``).

Decoding. Nodes sorted by decreasing norm (ties by index); node :math:`c`'s parent is, among the
nodes after it (norm not larger), the one of least :math:`d(z_c, z_p)\,(1 + \max(0, \lVert
z_p\rVert_{\mathbb H} - \lVert z_c\rVert_{\mathbb H} + \gamma))` (the reference's penalised
distance, :func:`node_parents`); the last node, nearest the origin, is the root. Parents come after
their children, so the order numbers the tree children first, with no recursion. Feature :math:`i`
hangs from its closest node :math:`\operatorname{arg\,min}_n d(x_i, z_n)` (the penalty is 1 there,
as in the loss; :func:`assign_leaves`). Nodes with
no feature below them are dropped and nodes left with one child are contracted (their edges
summed), so every internal node of the :class:`~hdtwd_cli.tree._tree.Tree` has at least two
children (multifurcating). Edge lengths are hyperbolic distances: :math:`d(z_c, z_p)` between a
node and its parent, :math:`d(x_i, z_n)` between a feature and its node: finite and :math:`\ge 0`
(every feature's is at least :math:`2 \operatorname{artanh}\rho - 2 \operatorname{artanh}` NODE_NORM).
Memory is :math:`O(mk + Nk + \text{triplets})` plus blocks of at most :data:`BLOCK` distances, never
:math:`m \times m`; time :math:`O(\text{epochs} \cdot \text{triplets} \cdot N k + m N k + N^2 k)`.

What departs from the paper and its reference code (github.com/nmonath/hyperbolic_hierarchical_clustering):

- Not reproduced: the paper's own statement of the loss (its text was not at hand); the loss above
  follows the reference code, except that the code applies the logistic loss to each node's term
  :math:`(\sigma_n - \tau_n) s_{in}` separately and sums, where here it is applied to their sum, the
  expected distances to the soft LCAs (the three comparisons as stated above).
- Not reproduced: the reference draws 90% of its triplets among 5 nearest neighbours (10% uniform);
  here all are uniform, as for HHC, which needs no neighbour search over the features.
- Not reproduced: the reference's data preprocessing centres the vectors (``zero_mean``); here the
  raw feature vectors are used, as the cosine similarities of HHC and hdtwd are.
- Dimension: the reference embeds in the data's dimension (or a random projection); here
  :math:`k = \min(d, \text{dim})`, ``dim`` = :data:`GHHC_DIM`, which bounds the time per triplet.
- Schedule: :data:`GHHC_EPOCHS` shuffled passes over the triplets in minibatches of
  :data:`GHHC_BATCH` (the reference: 10 passes over one episode of 5000 of its 50000 triplets,
  batches of 500 or 100); the reference takes 100 prior steps before a minibatch step (every one in
  its default configuration) with the pairs decoded at each development evaluation; here
  :data:`GHHC_PRIOR_STEPS` after each, the pairs decoded at the start of each epoch.
- Start: always ``randompts`` (the reference's default); its large-data configurations start from
  average linkage on a sample (``randhac``), which would need a clustering library here.
- :math:`N = \min(m - 1, \text{GHHC\_NODES})` (a binary tree's count, capped; the reference sets
  :math:`N` by hand, about a third of the points); the reference hangs each point from a copy
  ("best") of its node, a sibling of the node, which adds a level but no other structure; here it
  hangs from the node itself, and the edge lengths (the reference's tree has none) are the
  hyperbolic distances above.

Everything is seeded by ``numpy.random.default_rng`` and every sum runs in a fixed order in one
thread, so the same ``F`` and ``seed`` give the same bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from hdtwd_cli._runtime.jit import njit
from hdtwd_cli.evaluate._hyperbolic_hc import sample_triplets, triplet_similarities
from hdtwd_cli.tree._tree import Tree

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "GHHC_BATCH",
    "GHHC_DIM",
    "GHHC_EPOCHS",
    "GHHC_GAMMA",
    "GHHC_LEARNING_RATE",
    "GHHC_NODES",
    "GHHC_PRIOR_STEPS",
    "GHHC_TRIPLETS",
    "GHHCEmbedding",
    "GHHCOptions",
    "assign_leaves",
    "ghhc_embedding",
    "ghhc_loss",
    "ghhc_tree",
    "leaf_points",
    "node_parents",
    "order_triplets",
    "poincare_distance",
    "structure_loss",
]

#: Most internal nodes :math:`N` (``m - 1`` below it).
GHHC_NODES = 256
#: Largest dimension of the ball; wider feature vectors are randomly projected to it.
GHHC_DIM = 32
#: Triplets drawn per tree (the reference's ``num_samples``).
GHHC_TRIPLETS = 50_000
#: Passes over the triplets.
GHHC_EPOCHS = 2
#: Triplets per Riemannian SGD step (the reference's ``batch_size``).
GHHC_BATCH = 500
#: Step of Riemannian SGD on the minibatch's summed loss (the reference's ``tree_learning_rate``).
GHHC_LEARNING_RATE = 0.01
#: Margin :math:`\gamma` of the parent-child norm prior and of the decoding's penalty (the reference
#: model's default).
GHHC_GAMMA = 0.25
#: Steps on the structure prior after each minibatch step.
GHHC_PRIOR_STEPS = 100

#: Euclidean norm of the leaves (the reference's ``max_norm``), bound of the nodes' (its clip) and the
#: scale of the nodes' start (its ``random_pts_scale``).
LEAF_NORM, NODE_NORM, INIT_SCALE = 0.9, 0.8, 1e-3
#: Triplets (the first drawn) on which the loss before and after training is reported.
LOSS_TRIPLETS = 10_000
#: Most distances held at once by the decoding.
BLOCK = 1 << 20


def _arcosh1p(u: np.ndarray) -> np.ndarray:
    """:math:`\\operatorname{arcosh}(1 + u)` for :math:`u \\ge 0`, without cancellation near 0."""
    return np.asarray(np.log1p(u + np.sqrt(u * (u + 2.0))))


def poincare_distance(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Poincaré-ball distances between the rows of ``A`` (``a x k``) and of ``B`` (``b x k``): ``a x b``."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    a2 = np.einsum("ij,ij->i", A, A)
    b2 = np.einsum("ij,ij->i", B, B)
    sq = np.maximum(a2[:, None] + b2[None, :] - 2.0 * (A @ B.T), 0.0)
    return _arcosh1p(2.0 * sq / np.outer(1.0 - a2, 1.0 - b2))


def leaf_points(F: np.ndarray, dim: int = GHHC_DIM, seed: int | Sequence[int] = 0) -> np.ndarray:
    r"""The features' fixed points in the ball: ``m x k``, :math:`k = \min(d, \text{dim})`, norm :data:`LEAF_NORM`.

    Rows of ``F`` in their own coordinates when ``d <= dim``, else projected by a ``d x dim`` matrix of
    standard normals from ``default_rng(seed)``; then scaled to the norm :data:`LEAF_NORM` (a zero row
    to :data:`LEAF_NORM` times the first axis).
    """
    V = np.asarray(F, dtype=np.float64)
    if V.shape[1] > dim:
        V = V @ np.random.default_rng(seed).standard_normal((V.shape[1], dim))
    V = np.array(V, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", V, V))
    zero = ~(norms > 0)
    V[zero] = 0.0
    if V.shape[1]:
        V[zero, 0] = 1.0
    norms[zero] = 1.0
    return np.ascontiguousarray(LEAF_NORM * V / norms[:, None])


def order_triplets(triplets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    r"""Each triplet reordered so that its first two are its most similar pair.

    ``weights`` are :math:`(w_{ij}, w_{ik}, w_{jk})` (:func:`~hdtwd_cli.evaluate._hyperbolic_hc.triplet_similarities`);
    :math:`(i, j, k)` stays when :math:`w_{ij}` is the largest, else :math:`(j, k, i)` when :math:`w_{jk}`
    is, else :math:`(i, k, j)` (the reference's ``order_triple``).
    """
    t = np.asarray(triplets, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    out = t.copy()
    jk = (w[:, 2] > w[:, 0]) & (w[:, 2] >= w[:, 1])
    ik = ~jk & (w[:, 1] > w[:, 0])
    out[jk] = t[jk][:, [1, 2, 0]]
    out[ik] = t[ik][:, [0, 2, 1]]
    return out


@njit(cache=True, nogil=True)
def _pass(Z, X, trip, order, lo, hi, noise, grad):  # pragma: no cover - compiled
    """Sum over the triplets ``order[lo:hi]`` of the loss of the nodes ``Z`` (``N x k``) and the leaves
    ``X``; adds its gradient in ``Z`` to ``grad`` and returns the loss. ``noise`` is ``(hi - lo, 2, N)``
    uniform draws in (0, 1), or has no rows (no perturbation)."""
    N, k = Z.shape
    alpha = np.empty(N)
    for n in range(N):
        s2 = 0.0
        for e in range(k):
            s2 += Z[n, e] * Z[n, e]
        alpha[n] = 1.0 - s2
    s = np.empty((3, N))
    u = np.empty((3, N))
    dl = np.empty((3, N))
    sig = np.empty(N)
    tau = np.empty(N)
    v = np.empty(N)
    beta = np.empty(3)
    node = np.empty(3, dtype=np.int64)
    use_noise = noise.shape[0] > 0
    total = 0.0
    for q in range(lo, hi):
        t = order[q]
        for a in range(3):
            node[a] = trip[t, a]
            x2 = 0.0
            for e in range(k):
                x2 += X[node[a], e] * X[node[a], e]
            beta[a] = 1.0 - x2
        for a in range(3):
            for n in range(N):
                dd = 0.0
                for e in range(k):
                    diff = X[node[a], e] - Z[n, e]
                    dd += diff * diff
                u[a, n] = 2.0 * dd / (alpha[n] * beta[a])
                s[a, n] = math.log1p(u[a, n] + math.sqrt(u[a, n] * (u[a, n] + 2.0)))
        # the soft LCA of i and j, and of i, j and k without the hard LCA of i and j
        best = 0
        top = -np.inf
        for n in range(N):
            sig[n] = -max(s[0, n], s[1, n])
            if use_noise:
                sig[n] += math.log(-math.log(noise[q - lo, 0, n]))
            if -max(s[0, n], s[1, n]) > -max(s[0, best], s[1, best]):
                best = n
            top = max(top, sig[n])
        z = 0.0
        for n in range(N):
            sig[n] = math.exp(sig[n] - top)
            z += sig[n]
        for n in range(N):
            sig[n] /= z
        top = -np.inf
        for n in range(N):
            if n == best:
                continue
            tau[n] = -max(max(s[0, n], s[1, n]), s[2, n])
            if use_noise:
                tau[n] += math.log(-math.log(noise[q - lo, 1, n]))
            top = max(top, tau[n])
        z = 0.0
        for n in range(N):
            if n == best:
                tau[n] = 0.0
            else:
                tau[n] = math.exp(tau[n] - top)
                z += tau[n]
        for n in range(N):
            tau[n] /= z
        ai = 0.0
        aj = 0.0
        ak = 0.0
        for n in range(N):
            ai += (sig[n] - tau[n]) * s[0, n]
            aj += (sig[n] - tau[n]) * s[1, n]
            ak += (tau[n] - sig[n]) * s[2, n]
        for a in range(3):
            x = ai if a == 0 else (aj if a == 1 else ak)
            total += max(x, 0.0) + math.log1p(math.exp(-abs(x)))
        ci = 1.0 / (1.0 + math.exp(-ai))
        cj = 1.0 / (1.0 + math.exp(-aj))
        ck = 1.0 / (1.0 + math.exp(-ak))
        vs = 0.0
        vt = 0.0
        for n in range(N):
            v[n] = ci * s[0, n] + cj * s[1, n] - ck * s[2, n]
            vs += sig[n] * v[n]
            vt += tau[n] * v[n]
        for n in range(N):
            dl[0, n] = ci * (sig[n] - tau[n])
            dl[1, n] = cj * (sig[n] - tau[n])
            dl[2, n] = ck * (tau[n] - sig[n])
            g = -sig[n] * (v[n] - vs)  # d loss / d max(s_i, s_j)
            if s[0, n] >= s[1, n]:
                dl[0, n] += g
            else:
                dl[1, n] += g
            if n != best:
                g = tau[n] * (v[n] - vt)  # d loss / d max(s_i, s_j, s_k)
                if s[2, n] > max(s[0, n], s[1, n]):
                    dl[2, n] += g
                elif s[0, n] >= s[1, n]:
                    dl[0, n] += g
                else:
                    dl[1, n] += g
        for a in range(3):
            for n in range(N):
                if dl[a, n] == 0.0:
                    continue
                ua = u[a, n]
                dd = 0.5 * ua * alpha[n] * beta[a]
                c = dl[a, n] * 4.0 / (alpha[n] * beta[a] * math.sqrt(ua * (ua + 2.0)))
                cz = c * (1.0 + dd / alpha[n])
                for e in range(k):
                    grad[n, e] += cz * Z[n, e] - c * X[node[a], e]
    return total


def ghhc_loss(
    nodes: np.ndarray, leaves: np.ndarray, triplets: np.ndarray, noise: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    r"""The triplet loss :math:`\ell` (module docstring), its mean over ``triplets`` and gradient in ``nodes``.

    ``nodes``: ``N x k`` (:math:`N \ge 2`, norms below those of the ``leaves``, ``m x k``);
    ``triplets``: ``(n, 3)``, each ordered so its first pair is its most similar (:func:`order_triplets`);
    ``noise``: ``(n, 2, N)`` uniform draws in (0, 1) for the perturbations :math:`g, g'`, or ``None``
    for none. From the same compiled pass as the training; 0 without triplets.
    """
    Z = np.ascontiguousarray(nodes, dtype=np.float64)
    X = np.ascontiguousarray(leaves, dtype=np.float64)
    trip = np.ascontiguousarray(triplets, dtype=np.int64)
    n = trip.shape[0]
    grad = np.zeros_like(Z)
    if n == 0:
        return 0.0, grad
    U = np.empty((0, 2, Z.shape[0])) if noise is None else np.ascontiguousarray(noise, dtype=np.float64)
    order = np.arange(n, dtype=np.int64)
    loss = _pass(Z, X, trip, order, 0, n, U, grad)
    return float(loss) / n, grad / n


def _hyperbolic_norm(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``2 artanh |z|`` of each row and its gradient ``2 / (1 - |z|^2) z / |z|`` (0 at the origin)."""
    r = np.sqrt(np.einsum("ij,ij->i", Z, Z))
    safe = np.where(r > 0, r, 1.0)
    return 2.0 * np.arctanh(r), (2.0 / ((1.0 - r * r) * safe))[:, None] * Z


def structure_loss(nodes: np.ndarray, pairs: np.ndarray, gamma: float = GHHC_GAMMA) -> tuple[float, np.ndarray]:
    r"""The structure prior :math:`\sum_{(c, p)} \max(0, \lVert z_p\rVert_{\mathbb H} - \lVert z_c\rVert_{\mathbb H}
    + \gamma)` and its gradient.

    ``pairs``: ``(n, 2)`` rows (child, parent) of node indices; :math:`\lVert z\rVert_{\mathbb H} =
    2 \operatorname{artanh} \lVert z\rVert`. The hinge's gradient is taken as 0 at its kink.
    """
    Z = np.asarray(nodes, dtype=np.float64)
    P = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    h, dh = _hyperbolic_norm(Z)
    gap = h[P[:, 1]] - h[P[:, 0]] + gamma
    on = gap > 0
    grad = np.zeros_like(Z)
    np.add.at(grad, P[on, 1], dh[P[on, 1]])
    np.add.at(grad, P[on, 0], -dh[P[on, 0]])
    return float(np.sum(gap[on])), grad


def _rsgd_step(Z: np.ndarray, grad: np.ndarray, lr: float) -> None:
    """Riemannian SGD in the ball, in place: ``z -= lr (1 - |z|^2)^2 / 4 grad``, then clipped to NODE_NORM."""
    z2 = np.einsum("ij,ij->i", Z, Z)
    Z -= (lr * (1.0 - z2) ** 2 / 4.0)[:, None] * grad
    norms = np.sqrt(np.einsum("ij,ij->i", Z, Z))
    over = norms > NODE_NORM
    Z[over] *= (NODE_NORM / norms[over])[:, None]


def node_parents(nodes: np.ndarray, gamma: float = GHHC_GAMMA) -> tuple[np.ndarray, np.ndarray]:
    r"""The decoded parent of each node (``-1``: the root) and the nodes' order, children first.

    Nodes in decreasing norm (ties by index); the parent of a node is the node after it of least
    :math:`d(z_c, z_p)\,(1 + \max(0, \lVert z_p\rVert_{\mathbb H} - \lVert z_c\rVert_{\mathbb H} + \gamma))`
    (the first of equal ones). Distances in blocks of at most :data:`BLOCK`.
    """
    Z = np.asarray(nodes, dtype=np.float64)
    N = Z.shape[0]
    h, _ = _hyperbolic_norm(Z)
    order = np.lexsort((np.arange(N), -h))
    Zs, hs = Z[order], h[order]
    parent_pos = np.full(N, -1, dtype=np.int64)
    step = max(1, BLOCK // max(N, 1))
    for lo in range(0, N - 1, step):
        hi = min(lo + step, N - 1)
        D = poincare_distance(Zs[lo:hi], Zs)
        D *= 1.0 + np.maximum(hs[None, :] - hs[lo:hi, None] + gamma, 0.0)
        D[np.arange(hi - lo)[:, None] >= np.arange(N)[None, :] - lo] = np.inf  # only the nodes after each
        parent_pos[lo:hi] = np.argmin(D, axis=1)
    parent = np.full(N, -1, dtype=np.int64)
    has = parent_pos >= 0
    parent[order[has]] = order[parent_pos[has]]
    return parent, order


def assign_leaves(leaves: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Each leaf's closest node, :math:`\\operatorname{arg\\,min}_n d(x_i, z_n)` (the first of equal ones).

    Distances in blocks of at most :data:`BLOCK`.
    """
    X = np.asarray(leaves, dtype=np.float64)
    Z = np.asarray(nodes, dtype=np.float64)
    m, N = X.shape[0], Z.shape[0]
    out = np.empty(m, dtype=np.int64)
    step = max(1, BLOCK // max(N, 1))
    for lo in range(0, m, step):
        out[lo : lo + step] = np.argmin(poincare_distance(X[lo : lo + step], Z), axis=1)
    return out


@dataclass(frozen=True)
class GHHCEmbedding:
    """Internal nodes and leaves in the Poincaré ball, as :func:`ghhc_embedding` learned them.

    Attributes
    ----------
    nodes : ndarray, shape (N, k)
        The learned internal nodes :math:`z_n`.
    leaves : ndarray, shape (m, k)
        The features' fixed points :math:`x_i` (:func:`leaf_points`).
    epoch_loss : ndarray, shape (epochs,)
        Mean triplet loss of each epoch (each minibatch's before its step, with its noise); empty
        without triplets.
    loss_first, loss : float
        The triplet loss without noise before and after training, on the first :data:`LOSS_TRIPLETS`
        triplets (they are drawn at random).
    triplets : int
        Number of triplets (0 when ``m < 3``).
    """

    nodes: np.ndarray
    leaves: np.ndarray
    epoch_loss: np.ndarray
    loss_first: float
    loss: float
    triplets: int


class GHHCOptions(TypedDict, total=False):
    """The keywords of :func:`ghhc_embedding` that :func:`ghhc_tree` passes on (defaults there)."""

    nodes: int | None
    dim: int
    epochs: int
    triplets: int
    batch: int
    learning_rate: float
    gamma: float
    prior_steps: int
    gumbel: bool
    init_scale: float


def ghhc_embedding(
    F: np.ndarray,
    seed: int = 0,
    *,
    nodes: int | None = None,
    dim: int = GHHC_DIM,
    epochs: int = GHHC_EPOCHS,
    triplets: int = GHHC_TRIPLETS,
    batch: int = GHHC_BATCH,
    learning_rate: float = GHHC_LEARNING_RATE,
    gamma: float = GHHC_GAMMA,
    prior_steps: int = GHHC_PRIOR_STEPS,
    gumbel: bool = True,
    init_scale: float = INIT_SCALE,
) -> GHHCEmbedding:
    """gHHC's internal nodes for the rows of ``F`` (module docstring); ``nodes`` defaults to ``min(m - 1, GHHC_NODES)``.

    The triplets are drawn from ``default_rng([seed, 0])``, the projection from ``default_rng([seed, 1])``,
    the start (``init_scale`` times the points of ``N`` features) from ``default_rng([seed, 2])``, epoch
    ``e``'s order of the triplets from ``default_rng([seed, 3, e])`` and its perturbations from
    ``default_rng([seed, 4, e])``.
    """
    F = np.asarray(F, dtype=np.float64)
    if F.ndim != 2 or not np.all(np.isfinite(F)):
        raise ValueError("the feature vectors must be a finite 2-D array")
    if epochs < 0 or batch < 1 or dim < 1 or prior_steps < 0 or not learning_rate >= 0 or not gamma >= 0:
        raise ValueError(
            "epochs >= 0, batch >= 1, dim >= 1, prior_steps >= 0, learning_rate >= 0 and gamma >= 0 are needed"
        )
    m = F.shape[0]
    seed = int(seed)
    N = min(m - 1, GHHC_NODES) if nodes is None else int(nodes)
    if not 1 <= N <= max(m - 1, 1):
        raise ValueError("between 1 and m - 1 internal nodes are needed")
    X = leaf_points(F, dim, [seed, 1])
    Z = init_scale * X[np.sort(np.random.default_rng([seed, 2]).choice(m, size=N, replace=False))]
    trip = sample_triplets(m, int(triplets), [seed, 0]) if N >= 2 else np.empty((0, 3), dtype=np.int64)
    trip = np.ascontiguousarray(order_triplets(trip, triplet_similarities(F, trip)))
    n = trip.shape[0]
    first, _ = ghhc_loss(Z, X, trip[:LOSS_TRIPLETS])
    epoch_loss = np.zeros(epochs if n else 0)
    grad = np.zeros_like(Z)
    for e in range(epochs if n else 0):
        perm = np.random.default_rng([seed, 3, e]).permutation(n).astype(np.int64)
        noise_rng = np.random.default_rng([seed, 4, e])
        parent, _ = node_parents(Z, gamma)
        pairs = np.column_stack([np.flatnonzero(parent >= 0), parent[parent >= 0]])
        total = 0.0
        for lo in range(0, n, batch):
            hi = min(lo + batch, n)
            noise = noise_rng.random((hi - lo, 2, N)) if gumbel else np.empty((0, 2, N))
            noise = np.maximum(noise, 1e-300) if gumbel else noise  # log(-log U) needs 0 < U < 1
            grad[:] = 0.0
            total += _pass(Z, X, trip, perm, lo, hi, noise, grad)
            _rsgd_step(Z, grad, learning_rate)
            for _ in range(prior_steps if pairs.shape[0] else 0):
                _, g = structure_loss(Z, pairs, gamma)
                _rsgd_step(Z, g, learning_rate)
        epoch_loss[e] = total / n
    last, _ = ghhc_loss(Z, X, trip[:LOSS_TRIPLETS])
    return GHHCEmbedding(nodes=Z, leaves=X, epoch_loss=epoch_loss, loss_first=first, loss=last, triplets=n)


def ghhc_tree(F: np.ndarray, names: Sequence[str], seed: int = 0, **options: Unpack[GHHCOptions]) -> Tree:
    r"""gHHC's tree of the feature vectors ``F`` (``m x d``, one row per feature; cosine similarities).

    :func:`ghhc_embedding` learns the internal nodes (``options``: its keywords), :func:`node_parents`
    links them, each feature hangs from its closest node (:func:`assign_leaves`), nodes without
    features below are dropped and nodes with one child contracted; edges are hyperbolic distances
    (module docstring).

    Returns
    -------
    Tree
        Leaves in the order of ``names``, every internal node with at least two children, every parent
        after its children, the root last; ``metadata`` records ``method`` (``"ghhc"``), ``seed``,
        ``nodes`` (:math:`N`), ``nodes_used`` (internal nodes of the tree), ``dim`` (:math:`k`),
        ``epochs``, ``triplets``, ``gamma`` and the triplet loss before (``loss_first``) and after
        (``loss``) training.
    """
    F = np.asarray(F, dtype=np.float64)
    m = F.shape[0] if F.ndim == 2 else -1
    if m < 1 or len(names) != m:
        raise ValueError("one vector per feature name is needed")
    meta = {"method": "ghhc", "seed": int(seed)}
    gamma = options.get("gamma", GHHC_GAMMA)
    epochs = options.get("epochs", GHHC_EPOCHS)
    if m == 1:
        if not np.all(np.isfinite(F)):
            raise ValueError("the feature vectors must be a finite 2-D array")
        dim = min(F.shape[1], int(options.get("dim", GHHC_DIM)))
        meta.update({"nodes": 0, "nodes_used": 0, "dim": dim, "epochs": int(epochs)})
        meta.update({"triplets": 0, "gamma": float(gamma), "loss_first": 0.0, "loss": 0.0})
        return Tree(parent=np.array([-1]), length=np.zeros(1), leaf_names=list(names), metadata=meta)
    emb = ghhc_embedding(F, seed, **options)
    Z, X = emb.nodes, emb.leaves
    N = Z.shape[0]
    up, order = node_parents(Z, gamma)
    home = assign_leaves(X, Z)
    # features below each node, children first; nodes without any are dropped
    below = np.bincount(home, minlength=N)
    for c in order[:-1].tolist():
        below[up[c]] += below[c]
    kept = below > 0
    kids = np.bincount(home, minlength=N) + np.bincount(up[kept & (up >= 0)], minlength=N)
    stays = kept & (kids >= 2)
    # each kept node's nearest staying ancestor (-1: none, it is the root) and the path length to it,
    # top-down; a node with one child is contracted into the edge through it
    has_up = up >= 0
    d_up = np.zeros(N)
    if np.any(has_up):
        idx = np.flatnonzero(has_up)
        d_up[idx] = _pair_distance(Z[idx], Z[up[idx]])
    anc = np.full(N, -1, dtype=np.int64)
    dist = np.zeros(N)
    for c in order[::-1].tolist():
        p = int(up[c])
        if p < 0 or not kept[c]:
            continue
        if stays[p]:
            anc[c], dist[c] = p, d_up[c]
        else:
            anc[c], dist[c] = anc[p], d_up[c] + dist[p]
    leaf_anc = np.where(stays[home], home, anc[home])
    leaf_len = _pair_distance(X, Z[home]) + np.where(stays[home], 0.0, dist[home])
    inner = order[stays[order]]  # staying nodes, children first: the root (no staying ancestor) last
    number = np.full(N, -1, dtype=np.int64)
    number[inner] = m + np.arange(inner.size)
    parent = np.concatenate([number[leaf_anc], np.where(anc[inner] >= 0, number[np.maximum(anc[inner], 0)], -1)])
    length = np.concatenate([leaf_len, np.where(anc[inner] >= 0, dist[inner], 0.0)])
    meta.update(
        {
            "nodes": int(N),
            "nodes_used": int(inner.size),
            "dim": int(X.shape[1]),
            "epochs": int(epochs),
            "triplets": emb.triplets,
            "gamma": float(gamma),
            "loss_first": emb.loss_first,
            "loss": emb.loss,
        }
    )
    tree = Tree(parent=parent, length=np.maximum(length, 0.0), leaf_names=list(names), metadata=meta)
    tree.validate()
    return tree


def _pair_distance(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Poincaré-ball distance between corresponding rows of ``A`` and ``B``."""
    a2 = np.einsum("ij,ij->i", A, A)
    b2 = np.einsum("ij,ij->i", B, B)
    diff = A - B
    return _arcosh1p(2.0 * np.einsum("ij,ij->i", diff, diff) / ((1.0 - a2) * (1.0 - b2)))
