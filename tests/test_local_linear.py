"""Known-answer tests of the local-linear engine (fdaimpute._numerics.local_linear)."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from fdaimpute._numerics import local_linear as ll
from fdaimpute.smoothing import (
    bandwidth_candidates,
    bin_data,
    local_linear,
    select_bandwidth,
)

KERNELS = ["gaussian", "epanechnikov"]


def _noisy_sine(noise, n=3000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    return x, np.sin(2 * np.pi * x) + noise * rng.normal(size=n)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("h", [0.05, 0.2, 3.0])
def test_a_straight_line_is_reproduced_by_every_bandwidth(kernel, h):
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0, 1, 60))
    y = 2.0 - 3.0 * x
    points = np.linspace(0.1, 0.9, 9)
    fit, slope = local_linear(x, y, points, h, kernel=kernel, derivative=True)
    assert_allclose(fit, 2.0 - 3.0 * points, atol=1e-12)
    assert_allclose(slope, -3.0, atol=1e-10)
    binned = ll.local_linear_binned(x, np.ones_like(x), y, points, h, kernel)
    assert_allclose(binned, 2.0 - 3.0 * points, atol=1e-12)


def test_per_subject_sums_match_pooled_sums_of_each_subject():
    rng = np.random.default_rng(2)
    counts = np.array([3, 7, 1, 5])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    times = rng.uniform(0, 1, offsets[-1])
    values = rng.normal(size=times.size)
    q_counts = np.array([4, 2, 3, 5])
    q_offsets = np.concatenate([[0], np.cumsum(q_counts)])
    q_times = rng.uniform(0, 1, q_offsets[-1])
    h = np.array([0.1, 0.3, 0.2, 0.5])
    sums = ll.subject_moment_sums(
        times, values, offsets, q_times, q_offsets, h, "gaussian"
    )
    for i in range(counts.size):
        obs, q = (
            slice(offsets[i], offsets[i + 1]),
            slice(q_offsets[i], q_offsets[i + 1]),
        )
        pooled = ll.moment_sums(
            times[obs], np.ones(counts[i]), values[obs], q_times[q], h[i], "gaussian"
        )
        assert_allclose(sums[:, q], pooled, rtol=1e-13, atol=1e-15)


def test_chunked_moment_sums_equal_one_block(monkeypatch):
    x, y = _noisy_sine(0.1, n=500)
    points = np.linspace(0, 1, 37)
    whole = ll.moment_sums(x, np.ones_like(x), y, points, 0.1, "gaussian")
    monkeypatch.setattr(ll, "_MAX_PAIRS", 1000)
    chunked = ll.moment_sums(x, np.ones_like(x), y, points, 0.1, "gaussian")
    assert_allclose(chunked, whole, rtol=1e-13, atol=1e-15)  # BLAS blocks differ


@pytest.mark.parametrize("kernel", KERNELS)
def test_binned_fit_of_data_on_the_centres_equals_the_raw_fit(kernel):
    rng = np.random.default_rng(3)
    x = rng.choice(np.linspace(0, 1, 21), 400)
    y = np.cos(3 * x) + 0.1 * rng.normal(size=x.size)
    centres, weight, total, _ = bin_data(x, y)
    points = np.linspace(0, 1, 31)
    raw = local_linear(x, y, points, 0.15, kernel=kernel)
    binned = ll.local_linear_binned(centres, weight, total, points, 0.15, kernel)
    assert_allclose(binned, raw, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("kernel", KERNELS)
def test_binned_derivative_matches_a_finite_difference(kernel):
    x, y = _noisy_sine(0.2, n=400)
    centres, weight, total, _ = bin_data(x, y, n_bins=50)
    points, step = np.linspace(0.2, 0.8, 7), 1e-6
    _, deriv = ll.local_linear_binned(
        centres, weight, total, points, 0.1, kernel, derivative=True
    )
    up, down = (
        ll.local_linear_binned(centres, weight, total, points + s, 0.1, kernel)
        for s in (step, -step)
    )
    assert_allclose(deriv, (up - down) / (2 * step), rtol=1e-5, atol=1e-6)


def test_a_huge_ridge_returns_the_prior():
    x, y = _noisy_sine(0.1, n=200)
    points = np.linspace(0, 1, 11)
    sums = ll.moment_sums(x, np.ones_like(x), y, points, 0.1, "gaussian")
    prior, prior_slope = np.linspace(-1, 1, 11), np.full(11, 4.0)
    fit, slope, hat = ll.solve_local_linear(
        sums, 0.1, ridge=1e12, prior=prior, prior_slope=prior_slope
    )
    assert_allclose(fit, prior, atol=1e-8)
    assert_allclose(slope, prior_slope, atol=1e-6)
    assert np.all(hat < 1e-11)


def test_an_empty_window_raises_naming_the_bandwidth_unless_floored():
    x = np.array([0.0, 0.1, 0.9, 1.0])
    sums = ll.moment_sums(x, np.ones(4), x, np.array([0.5]), 0.05, "epanechnikov")
    with pytest.raises(ll.UndefinedFitError, match="bandwidth 0.05"):
        ll.solve_local_linear(sums, 0.05, points=np.array([0.5]))
    with pytest.raises(ValueError, match="t=0.5 with bandwidth 0.05"):
        local_linear(x, x, [0.5], 0.05, kernel="epanechnikov")
    fit, _, _ = ll.solve_local_linear(sums, 0.05, prior=7.0, floor=1e-9)
    assert_allclose(fit, 7.0)


@pytest.mark.parametrize("kernel", KERNELS)
def test_loocv_score_is_the_brute_force_leave_one_out_error(kernel):
    x, y = _noisy_sine(0.3, n=80, seed=4)
    h = np.array([0.08, 0.2])
    _, scores = select_bandwidth(x, y, h, kernel=kernel, criterion="loocv")
    for hh, score in zip(h, scores):
        keep = ~np.eye(x.size, dtype=bool)
        loo = [
            local_linear(x[k], y[k], [x[i]], hh, kernel=kernel)[0]
            for i, k in enumerate(keep)
        ]
        assert_allclose(score, np.mean((y - np.array(loo)) ** 2), rtol=1e-10)


def test_gcv_chooses_a_larger_bandwidth_for_noisier_data():
    chosen = []
    for noise in (0.05, 1.0):
        x, y = _noisy_sine(noise)
        centres, weight, total, total_sq = bin_data(x, y, n_bins=100)
        cands = bandwidth_candidates(centres, 20)
        chosen.append(
            ll.gcv_mean_bandwidth(centres, weight, total, total_sq, cands, "gaussian")
        )
        # the public selector on bin means is the same criterion
        best, _ = select_bandwidth(
            centres,
            total / weight,
            cands,
            weights=weight,
            within_ss=total_sq - total**2 / weight,
        )
        assert best == chosen[-1]
    assert chosen[1] > chosen[0]


def test_bandwidth_grid_reproduces_both_rules():
    times = np.array([0.0, 0.1, 0.15, 0.5, 0.52, 1.0])
    # PACE: from half the widest gap to a quarter of the range
    assert_allclose(bandwidth_candidates(times, 5), np.geomspace(0.24, 0.36, 5))
    assert_allclose(
        bandwidth_candidates(times, 5, min_points=3), np.geomspace(0.25, 0.375, 5)
    )
    # kernel imputer: from the finest gap (x2 for the Gaussian) to half the range
    assert_allclose(
        ll.bandwidth_grid(
            times, 4, gap="finest", gap_factor=2.0, resolution=200, top=2, growth=2
        ),
        np.geomspace(0.04, 0.5, 4),
    )
    with pytest.raises(ValueError, match="equal"):
        ll.bandwidth_grid(np.ones(3), 4)


def _binned_design(rng, n_bins=150):
    """Uneven bins over [2, 9] with sparse, partly empty edges."""
    centres = np.sort(rng.uniform(2.0, 9.0, n_bins))
    weight = rng.poisson(np.where(np.abs(centres - 5.5) < 2.5, 30.0, 0.7)).astype(float)
    weight[[0, -1]] = [1.0, 2.0]
    total = weight * np.sin(centres) + rng.normal(size=n_bins) * np.sqrt(weight)
    return centres, weight, total


@pytest.fixture
def hermite_calls(monkeypatch):
    """The interpolants local_linear_at builds."""
    calls = []
    real = ll.CubicHermiteSpline

    def spy(x, y, dydx):
        calls.append(x.size)
        return real(x, y, dydx)

    monkeypatch.setattr(ll, "CubicHermiteSpline", spy)
    return calls


@pytest.mark.parametrize("bandwidth", [0.15, 0.6, 2.5])
def test_fit_at_many_points_is_the_exact_fit_to_rounding(bandwidth, hermite_calls):
    rng = np.random.default_rng(int(bandwidth * 100))
    centres, weight, total = _binned_design(rng)
    points = rng.uniform(2.0, 9.0, (400, 300))  # any shape
    exact = ll.local_linear_binned(
        centres, weight, total, points.ravel(), bandwidth, "gaussian"
    ).reshape(points.shape)
    fast = ll.local_linear_at(centres, weight, total, points, bandwidth, "gaussian")
    assert hermite_calls  # the interpolant was used
    scale = np.abs(exact).max()
    assert np.abs(fast - exact).max() <= 1e-12 * scale


def test_fit_at_few_points_or_other_kernels_is_evaluated_exactly(hermite_calls):
    rng = np.random.default_rng(5)
    centres, weight, total = _binned_design(rng)
    few = rng.uniform(2.0, 9.0, 500)
    many = rng.uniform(2.0, 9.0, 200_000)
    for points, kernel in [(few, "gaussian"), (many, "epanechnikov")]:
        exact = ll.local_linear_binned(
            centres, weight, total, np.unique(points), 1.0, kernel
        )[np.unique(points, return_inverse=True)[1]]
        np.testing.assert_array_equal(
            ll.local_linear_at(centres, weight, total, points, 1.0, kernel), exact
        )
    # distinct points in order (a grid) are taken as they are
    grid = np.unique(few)
    np.testing.assert_array_equal(
        ll.local_linear_at(centres, weight, total, grid, 1.0, "gaussian"),
        ll.local_linear_binned(centres, weight, total, grid, 1.0, "gaussian"),
    )
    assert not hermite_calls
