r"""Hyperbolic hierarchical clustering (HypHC; Chami, Gu, Chatziafratis & Ré, NeurIPS 2020), as a tree.

The tree of HHC-TWD: the features are embedded in the Poincaré disk :math:`\mathbb{B}^2` by
minimising a continuous relaxation of Dasgupta's cost over triplets, and the embedding is decoded
into a binary tree (Chami et al., "From Trees to Continuous Embeddings and Back: Hyperbolic
Hierarchical Clustering", NeurIPS 2020, arXiv:2010.00402, Sec. 4).

Similarities. As in HypHC's experiments, :math:`w_{ij} = \tfrac12 \big(1 + \cos(f_i, f_j)\big) \in
[0, 1]` for the feature vectors :math:`f_i` (the rows of ``F``, scaled to unit length here).

Hyperbolic LCA. A point of the disk is at distance :math:`d_o(z) = 2 \operatorname{artanh}
\lVert z\rVert` from the origin :math:`o`. The relaxed lowest common ancestor of two leaves is the
point of the geodesic between them closest to the origin,

.. math:: z_i \vee z_j = \operatorname*{arg\,min}_{z \in z_i \rightsquigarrow z_j} d_o(z) .

As in HypHC, the leaves are normalised to one learned radius :math:`r`: leaf :math:`i` is
:math:`z_i = r\, p_i / \lVert p_i\rVert` for an optimised point :math:`p_i \in \mathbb{B}^2`, at angle
:math:`\theta_i`. With :math:`L = d_o(z_i) = 2 \operatorname{artanh} r` and :math:`\Delta_{ij} \in
[0, \pi]` the angle between :math:`z_i` and :math:`z_j`, the right-angled hyperbolic triangle
:math:`(o,\ z_i \vee z_j,\ z_i)` gives the closed form

.. math:: d_o(z_i \vee z_j) = \operatorname{artanh}\!\big(\tanh(L) \cos(\Delta_{ij}/2)\big),
          \qquad \tanh L = \frac{2r}{1 + r^2},

from :math:`L` (:math:`\Delta = 0`) down to 0 (:math:`\Delta = \pi`: the geodesic is a diameter).

Loss. For a triplet :math:`(i, j, k)` with pairs :math:`p \in \{ij, ik, jk\}` and LCA depths
:math:`d_p = d_o(z_\cdot \vee z_\cdot)`, the softmax :math:`\sigma_\tau(d)_p = e^{d_p/\tau} /
\sum_q e^{d_q/\tau}` is a soft choice of the pair whose LCA is deepest (the pair a tree joins
first), and the hyperbolic Dasgupta cost (HypHC's Eq. for :math:`C_{\text{HypHC}}`) is

.. math:: C_\tau(Z) = \frac1{|\mathcal T|} \sum_{(i,j,k) \in \mathcal T}
          \Big( w_{ij} + w_{ik} + w_{jk} - \sum_p w_p\, \sigma_\tau(d)_p \Big),

which tends, as :math:`\tau \to 0`, to Dasgupta's cost of the decoded tree on the triplets
:math:`\mathcal T`. Its gradient, with :math:`\bar w = \sum_p w_p \sigma_p`, is
:math:`\partial \ell / \partial d_p = -\sigma_p (w_p - \bar w)/\tau`; with
:math:`x_p = \tanh(L) \lvert\cos(\phi_p/2)\rvert` (:math:`\phi_{ij} = \theta_i - \theta_j`),
:math:`\partial d_p/\partial x_p = 1/(1 - x_p^2)`,
:math:`\partial x_{ij}/\partial \theta_i = -\tfrac12 \tanh(L)\, \operatorname{sign}(\sin\phi_{ij})
\lvert\sin(\phi_{ij}/2)\rvert = -\partial x_{ij}/\partial \theta_j`,
:math:`\partial \theta_i / \partial p_i = (-p_{i,2},\ p_{i,1}) / \lVert p_i\rVert^2` and
:math:`\partial x_p/\partial r = \lvert\cos(\phi_p/2)\rvert\, 2(1 - r^2)/(1 + r^2)^2`. The half-angle
terms are computed without trigonometry, :math:`\lvert\cos(\phi/2)\rvert = \tfrac12 \lVert u_i +
u_j\rVert` and :math:`\lvert\sin(\phi/2)\rvert = \tfrac12 \lVert u_i - u_j\rVert` for the unit
directions :math:`u`.

Decoding. The tree merges greedily the two clusters holding the pair whose LCA is farthest from
the origin: single linkage on :math:`-d_o(z_i \vee z_j)`. On one circle :math:`d_o(z_i \vee z_j)`
decreases with :math:`\Delta_{ij}`, so this is single linkage on the angles (HypHC decodes with the
inner product of the normalised leaves: the same order). The minimum spanning tree of points on a
circle joins neighbours in angular order, all but across the largest gap, so the decoding is a sort
and Kruskal's merges over those ``m - 1`` gaps: :math:`O(m \log m)` time, :math:`O(m)` memory, no
recursion and no ``m x m`` matrix. Ties go to the earlier gap in angular order (equal angles by
feature index).

Heights. A merge :math:`c` created by the gap :math:`\Delta_c` between leaves :math:`i, j` sits at

.. math:: h_c = L - d_o(z_i \vee z_j) = L - \operatorname{artanh}\!\big(\tanh(L) \cos(\Delta_c/2)\big),

the hyperbolic distance from the leaves' circle down to the level of their LCA (computed without
cancellation, :func:`merge_height`); leaves are at height 0 and each edge is the difference of its
ends' heights. Merges come in increasing
:math:`\Delta`, so :math:`h` never decreases towards the root and every length is :math:`\ge 0`.
The tree is ultrametric. By hyperbolic Pythagoras, :math:`\cosh L = \cosh d_o(z_i \vee z_j)
\cosh\big(d_{\mathbb B}(z_i, z_j)/2\big)`, so the creating pair's path length is their hyperbolic
distance up to a constant, :math:`2h_c \le d_{\mathbb B}(z_i, z_j) \le 2h_c + 2\log 2`, and every
pair's path length is at most its hyperbolic distance (single linkage: the subdominant ultrametric).

What departs from the paper:

- Optimiser: Adam (Kingma & Ba; :math:`\beta = (0.9, 0.999)`, constant step :data:`HHC_LEARNING_RATE`
  = HypHC's 1e-3) on the points :math:`p_i` with Euclidean gradients, each point projected into the
  disk (norm at most :math:`1 - 10^{-3}`, HypHC's ``project``) after its step; HypHC takes
  Riemannian Adam steps. The points start uniform in :math:`[-0.05, 0.05]^2` and the radius at
  0.05 (HypHC's ``init_size`` of its zoo example); the radius takes Adam steps of the same rate and
  is clamped to :math:`[10^{-2}, 1 - 10^{-3}]` after each (HypHC clamps its scale to this interval
  in the loss).
- Triplets: :data:`HHC_TRIPLETS` triplets of distinct features, uniform with replacement, drawn
  once (HypHC draws pairs and a third point, which may repeat one of the pair). When every triplet
  fits (:math:`\binom m3 \le` ``triplets``) each one is taken equally often and the remainder is
  drawn without replacement, as HypHC's "superset" of pairs.
- :data:`HHC_EPOCHS` passes over the triplets in minibatches of :data:`HHC_BATCH`, no early stopping
  (HypHC: 50 epochs, batches of 256 to 512, patience on the discrete Dasgupta cost); a fixed
  temperature :data:`HHC_TEMPERATURE` (HypHC: 0.05 to 0.1, optionally annealed).
- Rank 2 (HypHC's default) always; the heights above (HypHC's decoded dendrogram has no lengths).

Everything is seeded by ``numpy.random.default_rng`` and every sum runs in a fixed order in one
thread, so the same ``F`` and ``seed`` give the same bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hdtwd_cli._runtime.jit import njit
from hdtwd_cli.evaluate._ultrametric import dendrogram_tree
from hdtwd_cli.tree._tree import Tree

__all__ = [
    "HHC_BATCH",
    "HHC_EPOCHS",
    "HHC_LEARNING_RATE",
    "HHC_TEMPERATURE",
    "HHC_TRIPLETS",
    "HHCEmbedding",
    "decode_circle",
    "hhc_embedding",
    "hhc_loss",
    "hhc_tree",
    "lca_depth",
    "merge_height",
    "sample_triplets",
    "triplet_similarities",
]

#: Passes over the triplets.
HHC_EPOCHS = 20
#: Triplets drawn per tree.
HHC_TRIPLETS = 1_000_000
#: Softmax temperature :math:`\tau` of the relaxed cost (HypHC's zoo example).
HHC_TEMPERATURE = 0.1
#: Triplets per Adam step.
HHC_BATCH = 512
#: Adam's step, for the points and the radius (HypHC's learning rate).
HHC_LEARNING_RATE = 1e-3

#: Bounds of the leaves' radius (HypHC's clamp of its scale); the radius starts at ``INIT_SIZE`` and the
#: points uniform in ``[-INIT_SIZE, INIT_SIZE]^2`` (HypHC's ``init_size`` of its zoo example).
RADIUS_MIN, RADIUS_MAX, INIT_SIZE = 1e-2, 1.0 - 1e-3, 5e-2
_BETA1, _BETA2, _EPS = 0.9, 0.999, 1e-8


def _half_angle_terms(angle: np.ndarray | float, radius: float) -> tuple[np.ndarray, np.ndarray, float]:
    """``x = tanh(L) cos(Delta/2)``, ``tanh(L) - x`` and ``1 - tanh L``, the differences formed without
    cancellation (``1 - cos(Delta/2) = 2 sin^2(Delta/4)``, ``1 - tanh L = (1 - r)^2 / (1 + r^2)``)."""
    a = np.mod(np.abs(np.asarray(angle, dtype=np.float64)), 2.0 * np.pi)
    a = np.minimum(a, 2.0 * np.pi - a)
    t = 2.0 * radius / (1.0 + radius * radius)
    one_minus_t = (1.0 - radius) ** 2 / (1.0 + radius * radius)
    t_gap = t * 2.0 * np.sin(0.25 * a) ** 2  # t - x
    return t * np.cos(0.5 * a), t_gap, one_minus_t


def lca_depth(angle: np.ndarray | float, radius: float) -> np.ndarray:
    r""":math:`d_o(z_i \vee z_j) = \operatorname{artanh}(\tanh(L) \cos(\Delta/2))`, :math:`\tanh L = 2r/(1+r^2)`.

    The distance to the origin of the hyperbolic LCA of two points of Euclidean norm ``radius`` at
    angle ``angle`` (radians; folded into :math:`\Delta \in [0, \pi]`). Accurate near the boundary:
    :math:`1 - x` is formed without cancellation.
    """
    x, t_gap, one_minus_t = _half_angle_terms(angle, radius)
    return np.asarray(0.5 * (np.log1p(x) - np.log(one_minus_t + t_gap)))


def merge_height(angle: np.ndarray | float, radius: float) -> np.ndarray:
    r""":math:`L - d_o(z_i \vee z_j)` for two points of norm ``radius`` at angle ``angle``, without cancellation.

    With :math:`t = \tanh L` and :math:`x = t \cos(\Delta/2)`, :math:`L - d_o = \tfrac12 \big(
    \log(1 + \tfrac{t - x}{1 + x}) + \log(1 + \tfrac{t - x}{1 - t})\big)`: accurate for tiny gaps.
    """
    x, t_gap, one_minus_t = _half_angle_terms(angle, radius)
    return np.asarray(0.5 * (np.log1p(t_gap / (1.0 + x)) + np.log1p(t_gap / one_minus_t)))


def sample_triplets(m: int, count: int, seed: int | Sequence[int] = 0) -> np.ndarray:
    r"""``count`` triplets ``(i, j, k)`` of distinct features among ``m``, an ``(count, 3)`` int64 array.

    Uniform with replacement; when :math:`\binom m3 \le` ``count``, every triplet ``i < j < k`` is
    taken :math:`\lfloor \text{count} / \binom m3 \rfloor` times and the remainder drawn without
    replacement. Seeded by ``numpy.random.default_rng(seed)``; no triplet when ``m < 3``.
    """
    rng = np.random.default_rng(seed)
    if m < 3 or count <= 0:
        return np.empty((0, 3), dtype=np.int64)
    total = m * (m - 1) * (m - 2) // 6
    if total <= count:
        i, j = np.triu_indices(m, 1)
        per = m - 1 - j  # the third indices k > j of each pair
        start = np.cumsum(per) - per
        a, b = np.repeat(i, per), np.repeat(j, per)
        c = np.arange(a.size) - np.repeat(start, per) + b + 1
        every = np.column_stack([a, b, c]).astype(np.int64)
        reps, rest = divmod(count, total)
        extra = every[np.sort(rng.choice(total, size=rest, replace=False))]
        return np.concatenate([np.tile(every, (reps, 1)), extra])
    i = rng.integers(m, size=count)
    j = rng.integers(m - 1, size=count)
    j += j >= i
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    k = rng.integers(m - 2, size=count)
    k += k >= lo
    k += k >= hi
    return np.column_stack([i, j, k]).astype(np.int64)


@njit(cache=True, nogil=True)
def _similarities(U, trip):  # pragma: no cover - compiled
    n, d = trip.shape[0], U.shape[1]
    w = np.empty((n, 3))
    for t in range(n):
        for p in range(3):
            a = trip[t, 0] if p < 2 else trip[t, 1]
            b = trip[t, 1] if p == 0 else trip[t, 2]
            s = 0.0
            for e in range(d):
                s += U[a, e] * U[b, e]
            w[t, p] = min(max(0.5 * (1.0 + s), 0.0), 1.0)
    return w


def triplet_similarities(F: np.ndarray, triplets: np.ndarray) -> np.ndarray:
    r"""The similarities :math:`(w_{ij}, w_{ik}, w_{jk})` of each triplet, ``(n, 3)``.

    :math:`w = \tfrac12 (1 + \cos)` of the rows of ``F`` (scaled to unit length; a zero row has
    cosine 0 with every row), clipped to :math:`[0, 1]`; dot products summed in coordinate order.
    """
    U = np.asarray(F, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", U, U))
    U = np.ascontiguousarray(U / np.where(norms > 0, norms, 1.0)[:, None])
    trip = np.ascontiguousarray(triplets, dtype=np.int64)
    if trip.shape[0] == 0:
        return np.empty((0, 3))
    return np.asarray(_similarities(U, trip))


@njit(cache=True, nogil=True)
def _pass(P, radius, trip, w, order, lo, hi, inv_tau, grad):  # pragma: no cover - compiled
    """Sum over the triplets ``order[lo:hi]`` of the loss of leaves in the directions of the rows of
    ``P`` (``m x 2``); adds its gradient in ``P`` to ``grad`` and returns ``(loss, d loss / d radius)``."""
    t_l = 2.0 * radius / (1.0 + radius * radius)
    dt_dr = 2.0 * (1.0 - radius * radius) / ((1.0 + radius * radius) * (1.0 + radius * radius))
    u = np.empty((3, 2))
    tang = np.empty((3, 2))  # d theta / d p of the triplet's three points
    d = np.empty(3)
    dd_dx = np.empty(3)
    dx_da = np.empty(3)
    absc = np.empty(3)
    sig = np.empty(3)
    node = np.empty(3, dtype=np.int64)
    loss = 0.0
    g_r = 0.0
    for q in range(lo, hi):
        t = order[q]
        for v in range(3):
            node[v] = trip[t, v]
            x, y = P[node[v], 0], P[node[v], 1]
            rho2 = max(x * x + y * y, 1e-300)
            rho = math.sqrt(rho2)
            u[v, 0], u[v, 1] = x / rho, y / rho
            tang[v, 0], tang[v, 1] = -y / rho2, x / rho2
        top = -1.0
        for p in range(3):
            a = 0 if p < 2 else 1
            b = 1 if p == 0 else 2
            sx, sy = u[a, 0] + u[b, 0], u[a, 1] + u[b, 1]
            ex, ey = u[a, 0] - u[b, 0], u[a, 1] - u[b, 1]
            absc[p] = min(0.5 * math.sqrt(sx * sx + sy * sy), 1.0)  # |cos(phi / 2)|
            cross = u[a, 1] * u[b, 0] - u[a, 0] * u[b, 1]  # sin(phi), phi = theta_a - theta_b
            sgn = 1.0 if cross > 0.0 else (-1.0 if cross < 0.0 else 0.0)
            xp = t_l * absc[p]
            d[p] = 0.5 * math.log((1.0 + xp) / (1.0 - xp))
            dd_dx[p] = 1.0 / (1.0 - xp * xp)
            dx_da[p] = -0.25 * t_l * sgn * math.sqrt(ex * ex + ey * ey)
            if d[p] > top:
                top = d[p]
        z = 0.0
        for p in range(3):
            sig[p] = math.exp((d[p] - top) * inv_tau)
            z += sig[p]
        wsum = 0.0
        wbar = 0.0
        for p in range(3):
            sig[p] /= z
            wsum += w[t, p]
            wbar += w[t, p] * sig[p]
        loss += wsum - wbar
        for p in range(3):
            a = 0 if p < 2 else 1
            b = 1 if p == 0 else 2
            g = -sig[p] * (w[t, p] - wbar) * inv_tau * dd_dx[p]
            ga = g * dx_da[p]
            grad[node[a], 0] += ga * tang[a, 0]
            grad[node[a], 1] += ga * tang[a, 1]
            grad[node[b], 0] -= ga * tang[b, 0]
            grad[node[b], 1] -= ga * tang[b, 1]
            g_r += g * absc[p] * dt_dr
    return loss, g_r


def hhc_loss(
    points: np.ndarray, radius: float, triplets: np.ndarray, weights: np.ndarray, temperature: float
) -> tuple[float, np.ndarray, float]:
    r"""The relaxed Dasgupta cost :math:`C_\tau` (the mean over ``triplets``) and its gradients.

    The leaves lie on the circle of Euclidean radius ``radius`` in the directions of the rows of
    ``points`` (``m x 2``, non-zero); ``weights`` are the triplets' similarities
    (:func:`triplet_similarities`). Returns the cost, its gradient in ``points`` and in ``radius``,
    from the same compiled pass as the training (:func:`hhc_embedding`); 0 without triplets.
    """
    P = np.ascontiguousarray(points, dtype=np.float64)
    trip = np.ascontiguousarray(triplets, dtype=np.int64)
    n = trip.shape[0]
    grad = np.zeros_like(P)
    if n == 0:
        return 0.0, grad, 0.0
    order = np.arange(n, dtype=np.int64)
    W = np.ascontiguousarray(weights, dtype=np.float64)
    loss, g_r = _pass(P, float(radius), trip, W, order, 0, n, 1.0 / float(temperature), grad)
    return float(loss) / n, grad / n, float(g_r) / n


@njit(cache=True, nogil=True)
def _epoch(P, state, trip, w, order, batch, inv_tau, lr, step, mom, vel, grad):  # pragma: no cover - compiled
    """One pass of Adam steps over the triplets ``order`` in minibatches of ``batch``.

    ``state`` is ``[r, m_r, v_r]`` (the radius and its moments), ``mom`` and ``vel`` the points'
    moments, ``step`` the steps taken before. Returns the sum of the minibatches' losses (each
    before its step) and the steps taken after the pass.
    """
    n = order.shape[0]
    m = P.shape[0]
    total = 0.0
    for lo in range(0, n, batch):
        hi = min(lo + batch, n)
        size = hi - lo
        loss, g_r = _pass(P, state[0], trip, w, order, lo, hi, inv_tau, grad)
        total += loss
        step += 1
        c1 = 1.0 - _BETA1**step
        c2 = 1.0 - _BETA2**step
        for i in range(m):
            for e in range(2):
                g = grad[i, e] / size
                grad[i, e] = 0.0
                mom[i, e] = _BETA1 * mom[i, e] + (1.0 - _BETA1) * g
                vel[i, e] = _BETA2 * vel[i, e] + (1.0 - _BETA2) * g * g
                P[i, e] -= lr * (mom[i, e] / c1) / (math.sqrt(vel[i, e] / c2) + _EPS)
            norm = math.sqrt(P[i, 0] * P[i, 0] + P[i, 1] * P[i, 1])
            if norm > RADIUS_MAX:  # into the disk, as HypHC's project
                P[i, 0] *= RADIUS_MAX / norm
                P[i, 1] *= RADIUS_MAX / norm
        g = g_r / size
        state[1] = _BETA1 * state[1] + (1.0 - _BETA1) * g
        state[2] = _BETA2 * state[2] + (1.0 - _BETA2) * g * g
        r = state[0] - lr * (state[1] / c1) / (math.sqrt(state[2] / c2) + _EPS)
        state[0] = min(max(r, RADIUS_MIN), RADIUS_MAX)
    return total, step


@dataclass(frozen=True)
class HHCEmbedding:
    r"""Leaves on a circle of the Poincaré disk, as :func:`hhc_embedding` learned them.

    Attributes
    ----------
    points : ndarray, shape (m, 2)
        The optimised points :math:`p_i`; leaf ``i`` is :math:`r\, p_i / \lVert p_i\rVert`.
    radius : float
        The leaves' Euclidean radius :math:`r`.
    epoch_loss : ndarray, shape (epochs,)
        Mean minibatch loss of each epoch (each minibatch's before its step); empty without triplets.
    loss_first, loss : float
        The relaxed cost on all the triplets before and after training.
    triplets : int
        Number of triplets (0 when ``m < 3``).
    """

    points: np.ndarray
    radius: float
    epoch_loss: np.ndarray
    loss_first: float
    loss: float
    triplets: int

    @property
    def angles(self) -> np.ndarray:
        r"""The leaves' angles :math:`\theta_i`, in :math:`(-\pi, \pi]`."""
        return np.arctan2(self.points[:, 1], self.points[:, 0])


def hhc_embedding(
    F: np.ndarray,
    seed: int = 0,
    *,
    epochs: int = HHC_EPOCHS,
    triplets: int = HHC_TRIPLETS,
    temperature: float = HHC_TEMPERATURE,
    batch: int = HHC_BATCH,
    learning_rate: float = HHC_LEARNING_RATE,
) -> HHCEmbedding:
    """HypHC's embedding of the rows of ``F`` (module docstring): leaves on a circle of the Poincaré disk.

    The triplets are drawn from ``default_rng([seed, 0])``, the start from ``default_rng([seed, 1])``
    and epoch ``e``'s order of the triplets from ``default_rng([seed, 2, e])``.
    """
    F = np.asarray(F, dtype=np.float64)
    if F.ndim != 2 or not np.all(np.isfinite(F)):
        raise ValueError("the feature vectors must be a finite 2-D array")
    if epochs < 0 or batch < 1 or not temperature > 0 or not learning_rate >= 0:
        raise ValueError("epochs >= 0, batch >= 1, temperature > 0 and learning_rate >= 0 are needed")
    m = F.shape[0]
    seed = int(seed)
    trip = sample_triplets(m, int(triplets), [seed, 0])
    w = triplet_similarities(F, trip)
    P = np.random.default_rng([seed, 1]).uniform(-INIT_SIZE, INIT_SIZE, size=(m, 2))
    state = np.array([INIT_SIZE, 0.0, 0.0])
    n = trip.shape[0]
    first, _, _ = hhc_loss(P, state[0], trip, w, temperature)
    epoch_loss = np.zeros(epochs if n else 0)
    if n:
        mom, vel, grad = np.zeros((m, 2)), np.zeros((m, 2)), np.zeros((m, 2))
        step = 0
        for e in range(epochs):
            order = np.random.default_rng([seed, 2, e]).permutation(n).astype(np.int64)
            total, step = _epoch(
                P, state, trip, w, order, int(batch), 1.0 / temperature, float(learning_rate), step, mom, vel, grad
            )
            epoch_loss[e] = total / n
    last, _, _ = hhc_loss(P, state[0], trip, w, temperature)
    return HHCEmbedding(
        points=P, radius=float(state[0]), epoch_loss=epoch_loss, loss_first=first, loss=last, triplets=n
    )


def decode_circle(angles: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    r"""HypHC's decoding of leaves on one circle: single linkage on :math:`-d_o(z_i \vee z_j)`.

    Returns the merges' children ``(m - 1, 2)`` (merge ``c`` is node ``m + c``, the leaves ``0..m-1``)
    and their heights :math:`L - d_o(z_i \vee z_j)` (non-decreasing), from the gaps between neighbours
    in angular order, all but the largest (the minimum spanning tree on a circle), in Kruskal's order.
    """
    theta = np.mod(np.asarray(angles, dtype=np.float64), 2.0 * np.pi)
    m = theta.shape[0]
    if m < 2:
        return np.empty((0, 2), dtype=np.int64), np.empty(0)
    order = np.lexsort((np.arange(m), theta))
    a = theta[order]
    gap = np.empty(m)
    gap[:-1] = np.diff(a)
    gap[-1] = a[0] + 2.0 * np.pi - a[-1]
    gap = np.clip(np.minimum(gap, 2.0 * np.pi - gap), 0.0, np.pi)
    cut = int(np.argmax(gap))  # the largest gap (the first of equal ones) is no edge of the tree
    edges = np.delete(np.arange(m), cut)
    edges = edges[np.argsort(gap[edges], kind="stable")]
    heights = np.maximum.accumulate(merge_height(gap[edges], radius))  # monotone in the gap: rounding aside
    root = np.arange(m)  # union-find over the leaves; the cluster node of each root
    cluster = np.arange(m)

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = int(root[x])
        return x

    children = np.empty((m - 1, 2), dtype=np.int64)
    for c, k in enumerate(edges.tolist()):
        x, y = find(int(order[k])), find(int(order[(k + 1) % m]))
        children[c] = (cluster[x], cluster[y])
        root[y] = x
        cluster[x] = m + c
    return children, heights


def hhc_tree(
    F: np.ndarray,
    names: Sequence[str],
    seed: int = 0,
    *,
    epochs: int = HHC_EPOCHS,
    triplets: int = HHC_TRIPLETS,
    temperature: float = HHC_TEMPERATURE,
) -> Tree:
    r"""HypHC's tree of the feature vectors ``F`` (``m x d``, one row per feature; cosine similarities).

    :func:`hhc_embedding` places the features on a circle of the Poincaré disk, :func:`decode_circle`
    merges them greedily by the depth of their hyperbolic LCAs, and merge :math:`c` sits at height
    :math:`h_c = L - d_o(z_i \vee z_j)` (module docstring), the leaves at 0.

    Returns
    -------
    Tree
        Binary, leaves in the order of ``names``, every parent after its children, the root last;
        ``metadata`` records ``method`` (``"hhc"``), ``seed``, ``epochs``, ``triplets``,
        ``temperature``, the learned ``radius`` and the relaxed cost before (``loss_first``) and after
        (``loss``) training.
    """
    F = np.asarray(F, dtype=np.float64)
    m = F.shape[0] if F.ndim == 2 else -1
    if m < 1 or len(names) != m:
        raise ValueError("one vector per feature name is needed")
    emb = hhc_embedding(F, seed, epochs=epochs, triplets=triplets, temperature=temperature)
    children, heights = decode_circle(emb.angles, emb.radius)
    return dendrogram_tree(
        children,
        heights,
        names,
        {
            "method": "hhc",
            "seed": int(seed),
            "epochs": int(epochs),
            "triplets": emb.triplets,
            "temperature": float(temperature),
            "radius": emb.radius,
            "loss_first": emb.loss_first,
            "loss": emb.loss,
        },
    )
