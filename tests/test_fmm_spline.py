"""fmm_spline: R's default interpolating spline, on cases with a known answer."""

import numpy as np
import pytest
from scipy.interpolate import CubicSpline

from fdaimpute._numerics.interpolate import fmm_spline


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_reproduces_polynomials_up_to_cubic(degree):
    rng = np.random.default_rng(degree)
    x = np.sort(rng.uniform(0, 5, 11))
    coef = rng.normal(size=degree + 1)
    t = np.linspace(x[0], x[-1], 301)
    np.testing.assert_allclose(
        fmm_spline(x, np.polyval(coef, x), t), np.polyval(coef, t), atol=1e-11
    )


@pytest.mark.parametrize("m", [2, 3, 4])
def test_few_knots_give_the_interpolating_polynomial(m):
    rng = np.random.default_rng(m)
    x = np.sort(rng.uniform(0, 1, m))
    y = rng.normal(size=m)
    t = np.linspace(x[0], x[-1], 50)
    want = np.polyval(np.polyfit(x, y, m - 1), t)
    np.testing.assert_allclose(fmm_spline(x, y, t), want, atol=1e-10)


def test_interpolates_and_differs_from_not_a_knot_only_near_the_ends():
    x = np.arange(12.0)
    y = np.sin(x) + 0.1 * x**2
    np.testing.assert_allclose(fmm_spline(x, y, x), y, atol=1e-12)
    t = np.linspace(0, 11, 1101)
    gap = np.abs(fmm_spline(x, y, t) - CubicSpline(x, y)(t))
    assert gap[t < 1].max() > 1e-3  # the end conditions differ
    assert gap[(t > 4) & (t < 7)].max() < 0.05 * gap[t < 1].max()
