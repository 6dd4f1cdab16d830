"""The rotated covariance smoother and its batched small solves."""

import numpy as np
import pytest

from fdaimpute._pace.binning import CovMoments
from fdaimpute._pace.surface import RotatedSmoother, _intercepts


def _spd_batch(n, k, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, k + 3, k))
    mat = np.swapaxes(x, 1, 2) @ x * rng.uniform(0.1, 1e3, size=(n, 1, 1))
    return mat, rng.normal(size=(n, k))


@pytest.mark.parametrize("k", [3, 4])
def test_intercepts_and_hat_are_those_of_a_direct_solve(k):
    mat, rhs = _spd_batch(200, k)
    fit, hat = _intercepts(mat, rhs, "test", 1.0, return_hat=True)
    np.testing.assert_allclose(fit, np.linalg.solve(mat, rhs[..., None])[:, 0, 0])
    np.testing.assert_allclose(hat, np.linalg.inv(mat)[:, 0, 0])
    assert _intercepts(mat, rhs, "test", 1.0)[1] is None


def test_intercepts_of_an_empty_batch_are_empty():
    fit, hat = _intercepts(np.zeros((0, 3, 3)), np.zeros((0, 3)), "t", 1.0, True)
    assert fit.shape == hat.shape == (0,)


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda m: m.__setitem__((5, 0, 0), 0.0), "no raw covariances"),
        # two equal rows: singular
        (lambda m: m.__setitem__(5, np.ones((3, 3))), "too few distinct"),
    ],
)
def test_intercepts_refuse_an_empty_or_singular_system(bad, message):
    mat, rhs = _spd_batch(10, 3)
    bad(mat)
    with pytest.raises(ValueError, match=rf"smoothing: {message}.*bandwidth 0\.25"):
        _intercepts(mat, rhs, "smoothing", 0.25)


def _moments(n_b, surface, seed=0):
    """Symmetric binned raw covariances: counts, and totals count * surface."""
    rng = np.random.default_rng(seed)
    centres = np.linspace(0.0, 1.0, n_b)
    count = rng.poisson(3.0, size=(n_b, n_b)).astype(float)
    count = count + count.T
    np.fill_diagonal(count, 0.0)
    s, t = np.meshgrid(centres, centres, indexing="ij")
    noise = rng.normal(scale=0.3, size=(n_b, n_b))
    total = count * (surface(s, t) + noise + noise.T)
    zeros = np.zeros(n_b)
    return CovMoments(centres, count, total, count * 0.0, zeros, zeros, zeros)


@pytest.mark.parametrize("ridge", [True, False])
def test_symmetric_fit_mirrors_the_fit_below_the_diagonal(ridge):
    moments = _moments(21, lambda s, t: np.cos(3 * (s - t)) + s * t)
    smoother = RotatedSmoother(moments, np.linspace(0.0, 1.0, 31))
    full, full_hat = smoother(0.3, 0.1, ridge=ridge, return_hat=True, symmetric=False)
    fit, hat = smoother(0.3, 0.1, ridge=ridge, return_hat=True)
    np.testing.assert_array_equal(fit, fit.T)
    np.testing.assert_allclose(fit, 0.5 * (full + full.T), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hat, full_hat, rtol=1e-8)


@pytest.mark.parametrize("ridge", [True, False])
@pytest.mark.parametrize("symmetric", [True, False])
def test_a_plane_is_reproduced(ridge, symmetric):
    # local fits linear in u and v (and quadratic in v) reproduce a plane
    # exactly; a covariance's plane is symmetric in s and t
    slope = 0.0 if symmetric else 0.7

    def plane(s, t):
        return 2.0 + 0.5 * (s + t) + slope * (s - t)

    moments = _moments(21, plane)
    moments.total[:] = moments.count * plane(
        *np.meshgrid(*[moments.centres] * 2, indexing="ij")
    )
    grid = np.linspace(0.0, 1.0, 31)
    fit = RotatedSmoother(moments, grid)(0.2, 0.15, ridge=ridge, symmetric=symmetric)
    want = plane(*np.meshgrid(grid, grid, indexing="ij"))
    np.testing.assert_allclose(fit, want, atol=1e-8)
