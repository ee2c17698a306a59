r"""Multi-scale hyperbolic diffusion embedding (paper Sec. 3.2; Lin et al., ICML 2023; docs/method.md section 2).

For scales :math:`k = 0, \dots, K` every feature ``j`` is embedded in the Poincare half-space
:math:`\mathbb{H}^{m+1}` as

.. math:: z_j^k = [\psi_j^k;\ 2^{k/2-2}], \qquad \psi_j^k = \sqrt{P^{2^{-k}} e_j}

(element-wise square root). Distances in the half-space are

.. math:: d_{\mathbb H}(x, y) = 2\,\operatorname{asinh}\frac{\lVert x - y\rVert}{2\sqrt{x_{m+1} y_{m+1}}}

and the product-manifold distance is :math:`d_{\mathcal M}(j,j') = \sum_k d_{\mathbb H}(z_j^k, z_{j'}^k)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import DTypeLike

__all__ = [
    "HyperbolicEmbedding",
    "scale_heights",
    "hyperbolic_embedding",
    "halfspace_distance",
    "geodesic_midpoint",
]


@dataclass(frozen=True)
class HyperbolicEmbedding:
    r"""The multi-scale embedding :math:`z_j^k = [\psi_j^k; h_k]`.

    Attributes
    ----------
    psi : ndarray, shape (K+1, m, m) or (K+1, m, m')
        ``psi[k, j]`` is :math:`\psi_j^k = \sqrt{P^{2^{-k}} e_j}` (over the ``m'`` landmarks
        on the landmark path).
    heights : ndarray, shape (K+1,)
        :math:`h_k = 2^{k/2-2}`, the last coordinate at scale ``k``.
    negative_mass : ndarray, shape (K+1,)
        Negative density mass clipped at each scale (fraction of the total mass).
    """

    psi: np.ndarray
    heights: np.ndarray
    negative_mass: np.ndarray

    @property
    def n_scales(self) -> int:
        """Number of scales ``K + 1``."""
        return int(self.psi.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.psi.shape[1])


def scale_heights(scales: int) -> np.ndarray:
    r"""Heights :math:`h_k = 2^{k/2-2}` for :math:`k = 0, \dots, K` (``scales`` = K)."""
    k = np.arange(scales + 1, dtype=np.float64)
    return 2.0 ** (k / 2.0 - 2.0)


class DensityOperator(Protocol):
    """What the embedding needs from an operator: its size and densities at time ``t``."""

    @property
    def n_features(self) -> int: ...

    @property
    def density_width(self) -> int:
        """Length of one feature's density vector (``m``; the number of landmarks on that path)."""
        ...

    def densities(self, t: float) -> tuple[np.ndarray, float]: ...

    def sqrt_densities(self, t: float, dtype: DTypeLike = np.float64) -> tuple[np.ndarray, float]: ...


def hyperbolic_embedding(
    op: DensityOperator,
    scales: int,
    progress: Callable[[int], None] | None = None,
    dtype: DTypeLike = np.float64,
) -> HyperbolicEmbedding:
    r"""Embed every feature at scales :math:`k = 0..K` with :math:`\psi_j^k = \sqrt{P^{2^{-k}} e_j}`.

    Parameters
    ----------
    op : DiffusionOperator or landmarks.LandmarkOperator
        Spectral form of ``P``. With landmarks the densities are the ``m'``-vectors
        :math:`\rho_j^{2^{-k}}` over the landmarks (docs/method.md section 6), so ``psi`` is ``(K+1, m, m')``.
    scales : int
        ``K``, the largest scale (the paper's :math:`K_c`); ``K + 1`` scales are computed.
    progress : callable, optional
        Called with ``1`` after each scale.
    dtype : float64 or float32
        Storage of ``psi``: computed in float64, rounded once (``psi`` in float32 is the float32
        rounding of the float64 embedding).

    Returns
    -------
    HyperbolicEmbedding
    """
    if scales < 0:
        raise ValueError("scales must be >= 0")
    psi: np.ndarray | None = None
    neg = np.empty(scales + 1, dtype=np.float64)
    for k in range(scales + 1):
        root, neg[k] = op.sqrt_densities(2.0**-k, dtype)
        if psi is None:
            psi = np.empty((scales + 1,) + root.shape, dtype=dtype)
        psi[k] = root
        del root
        if progress is not None:
            progress(1)
    assert psi is not None
    return HyperbolicEmbedding(psi=psi, heights=scale_heights(scales), negative_mass=neg)


def halfspace_distance(x: np.ndarray, hx: np.ndarray | float, y: np.ndarray, hy: np.ndarray | float) -> np.ndarray:
    r"""Poincare half-space distance between points ``[x; hx]`` and ``[y; hy]``.

    .. math:: d = 2\,\operatorname{asinh}\frac{\sqrt{\lVert x-y\rVert^2 + (h_x-h_y)^2}}{2\sqrt{h_x h_y}}

    The asinh form stays accurate for nearby points (arccosh of the Lorentz product does not).
    ``x`` and ``y`` broadcast over leading axes; the last axis is the coordinate axis.
    """
    hx = np.asarray(hx, dtype=np.float64)
    hy = np.asarray(hy, dtype=np.float64)
    sq = np.sum((x - y) ** 2, axis=-1) + (hx - hy) ** 2
    return 2.0 * np.arcsinh(np.sqrt(sq) / (2.0 * np.sqrt(hx * hy)))


def geodesic_midpoint(x: np.ndarray, hx: float, y: np.ndarray, hy: float) -> tuple[np.ndarray, float, float]:
    r"""Hyperbolic geodesic midpoint of ``[x; hx]`` and ``[y; hy]`` in the half-space.

    Mapped to the hyperboloid :math:`L(x,h) = \big(\tfrac{1+\lVert x\rVert^2+h^2}{2h},\ \tfrac{x}{h},\
    \tfrac{\lVert x\rVert^2+h^2-1}{2h}\big)`, the midpoint is :math:`(L_x + L_y)/\lVert L_x+L_y\rVert_{\mathcal L}`
    with :math:`\lVert L_x+L_y\rVert_{\mathcal L} = \sqrt{2 + 2\cosh d} = 2\cosh(d/2)`. Mapping back
    (:math:`h = 1/(L_0 - L_{m+1})`, :math:`x = h\,L_{1..m}`) gives the closed form

    .. math:: x_{mid} = \frac{x/h_x + y/h_y}{1/h_x + 1/h_y}, \qquad
              h_{mid} = \frac{2\cosh(d/2)}{1/h_x + 1/h_y}.

    For equal heights this is Prop. 1's LCA: :math:`[\tfrac{x+y}{2};\ \sqrt{\lVert x-y\rVert^2/4 + h^2}]`.

    Returns
    -------
    x_mid : ndarray
    h_mid : float
    d : float
        The distance :math:`d_{\mathbb H}` between the two points.
    """
    d = float(halfspace_distance(x, hx, y, hy))
    wx, wy = 1.0 / hx, 1.0 / hy
    x_mid = (x * wx + y * wy) / (wx + wy)
    h_mid = 2.0 * np.cosh(0.5 * d) / (wx + wy)
    return x_mid, float(h_mid), d
