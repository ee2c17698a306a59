"""Half-space geometry: Prop. 1's LCA and the geodesic midpoint of points at different heights."""

import numpy as np

from hdtwd_cli.tree._hyperbolic import geodesic_midpoint, halfspace_distance, scale_heights


def test_heights_are_dyadic():
    assert np.allclose(scale_heights(3), [0.25, 2**-1.5, 0.5, 2**-0.5])


def test_midpoint_of_equal_heights_is_prop1_lca():
    rng = np.random.default_rng(0)
    x, y = rng.random(7), rng.random(7)
    h = 0.25
    xm, hm, d = geodesic_midpoint(x, h, y, h)
    assert np.allclose(xm, (x + y) / 2)
    assert np.isclose(hm, np.sqrt(np.sum((x - y) ** 2) / 4 + h**2))


def test_midpoint_is_halfway_for_different_heights():
    rng = np.random.default_rng(1)
    for _ in range(20):
        x, y = rng.random(5), rng.random(5)
        hx, hy = rng.uniform(0.1, 3), rng.uniform(0.1, 3)
        xm, hm, d = geodesic_midpoint(x, hx, y, hy)
        d1 = halfspace_distance(x, hx, xm, hm)
        d2 = halfspace_distance(y, hy, xm, hm)
        assert np.isclose(d1, d / 2, rtol=1e-9) and np.isclose(d2, d / 2, rtol=1e-9)


def test_distance_matches_cosh_formula():
    x, y = np.array([0.1, 0.2]), np.array([0.4, -0.3])
    hx, hy = 0.5, 2.0
    cosh = 1 + (np.sum((x - y) ** 2) + (hx - hy) ** 2) / (2 * hx * hy)
    assert np.isclose(halfspace_distance(x, hx, y, hy), np.arccosh(cosh))
