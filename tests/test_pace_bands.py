"""PACE's bands: left-out components, the noise-variance floor, small data."""

import warnings

import numpy as np
import pytest
from scipy.stats import norm

import fdaimpute as fi
from fdaimpute._fpca.heldout import (
    band_profile,
    calibrate_bands,
    one_standard_error_k,
)
from fdaimpute._fpca.scores import posterior_scores, truncated_error_variance
from fdaimpute.simulate import BasisProcess, sample


def _legendre(t):
    u = 2 * np.asarray(t, dtype=float) - 1
    return np.column_stack(
        [
            np.ones_like(u),
            np.sqrt(3) * u,
            np.sqrt(5) * (1.5 * u**2 - 0.5),
            np.sqrt(7) * (2.5 * u**3 - 1.5 * u),
        ]
    )


def test_truncated_error_variance_matches_the_joint_gaussian():
    # Predict X(t) with K of p components; the error variance from the full
    # joint covariance of (X(t), y) must equal the formula's.
    rng = np.random.default_rng(0)
    lam_all, k, sigma2 = np.array([2.0, 1.0, 0.5, 0.3]), 2, 0.1
    t_obs = np.array([0.1, 0.35, 0.6, 0.9])
    grid = np.linspace(0, 1, 7)
    b_obs, b_grid = _legendre(t_obs), _legendre(grid)
    y = rng.normal(size=t_obs.size)
    _, cov, cross = posterior_scores(
        y,
        b_obs[:, :k],
        np.array([0, t_obs.size]),
        lam_all[:k],
        sigma2,
        with_cov=True,
        rest_basis=b_obs[:, k:],
    )
    ours = truncated_error_variance(
        b_grid[:, :k], b_grid[:, k:], cov, cross, lam_all[k:]
    )[0]
    # direct: weights of the K-component predictor, error under the full model
    sigma_k = (b_obs[:, :k] * lam_all[:k]) @ b_obs[:, :k].T + sigma2 * np.eye(4)
    weights = np.linalg.solve(sigma_k, b_obs[:, :k] * lam_all[:k]) @ b_grid[:, :k].T
    cov_y = (b_obs * lam_all) @ b_obs.T + sigma2 * np.eye(4)
    cov_xy = (b_grid * lam_all) @ b_obs.T
    var_x = (b_grid**2) @ lam_all
    direct = (
        var_x
        - 2 * np.einsum("gm,mg->g", cov_xy, weights)
        + np.einsum("mg,mn,ng->g", weights, cov_y, weights)
    )
    np.testing.assert_allclose(ours, direct, rtol=1e-10)
    # and it exceeds the K-component posterior variance alone
    assert np.all(ours > np.einsum("gk,kl,gl->g", b_grid[:, :k], cov[0], b_grid[:, :k]))


def test_woodbury_and_direct_paths_agree_on_the_cross_term():
    rng = np.random.default_rng(1)
    t = np.sort(rng.random(9))
    b = _legendre(t)
    args = (rng.normal(size=9), b[:, :2], np.array([0, 9]), np.array([1.5, 0.4]), 0.2)
    kw = dict(with_cov=True, rest_basis=b[:, 2:])
    fast = posterior_scores(*args, **kw)
    slow = posterior_scores(*args, woodbury=False, **kw)
    for a, c in zip(fast, slow):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-12)


def test_calibrate_bands_recovers_a_missing_variance():
    # Hidden residuals with variance 0.5 beyond what the model claims:
    # the likelihood puts it in the misfit term.
    rng = np.random.default_rng(2)
    n, lam = 400, np.array([1.0])
    t_fit = rng.random(3 * n)
    t_new = rng.random(n)
    basis = lambda t: np.ones((t.size, 1))  # noqa: E731  (a random intercept)
    xi = rng.normal(size=n)
    r_fit = np.repeat(xi, 3) + rng.normal(scale=0.3, size=3 * n)
    r_new = xi + rng.normal(scale=np.sqrt(0.09 + 0.5), size=n)
    offsets = np.arange(0, 3 * n + 1, 3)
    weight, misfit = calibrate_bands(
        (r_fit, basis(t_fit), offsets),
        (r_new, basis(t_new), np.arange(n + 1)),
        lam,
        0.09,
        1,
    )
    assert weight == 1.0  # nothing left out
    assert 0.35 < misfit < 0.7


def _profile_of(counts, true_factor, seed):
    """``band_profile``'s factor for standard normal z scaled by ``true_factor``
    in each third of [0, 3] (``counts`` hidden points there)."""
    rng = np.random.default_rng(seed)
    third = np.repeat(np.arange(3), counts)
    times = third + rng.uniform(size=third.size)
    resid = rng.normal(size=third.size) * np.sqrt(np.asarray(true_factor)[third])
    return band_profile(times, resid, np.ones(third.size), (0.0, 3.0))[1]


def test_band_profile_follows_a_variance_that_grows_over_time():
    factors = np.array(
        [_profile_of([300, 200, 100], [0.25, 1.0, 4.0], s) for s in range(8)]
    )
    early, mid, late = np.exp(np.log(factors).mean(axis=0))
    assert 0.2 < early < 0.32 and 0.8 < mid < 1.25 and 3.2 < late < 5.0


def test_band_profile_covers_a_new_point_at_the_level_with_few_points():
    # 30 hidden points a third: the 95% interval the factor gives a new
    # point of that third covers it with probability 0.95 on average over
    # draws (a plain sample quantile gives about 0.92, and pulling each
    # third's factor towards 1 less still where the variance grows)
    true = np.array([0.5, 1.0, 2.0])
    factors = np.array([_profile_of([30, 30, 30], true, s) for s in range(400)])
    coverage = 2 * norm.cdf(1.959964 * np.sqrt(factors / true)) - 1
    assert np.all(np.abs(coverage.mean(axis=0) - 0.95) < 0.008)


def test_band_profile_is_flat_without_a_trend():
    factors = np.array([_profile_of([300, 200, 30], [1, 1, 1], s) for s in range(8)])
    assert np.all(np.abs(np.log(factors).mean(axis=0)) < 0.15)


def test_band_profile_needs_points_in_every_third():
    assert np.all(_profile_of([300, 200, 10], [0.25, 1.0, 4.0], 0) == 1.0)


def test_one_standard_error_rule_prefers_the_smaller_k_within_noise():
    rng = np.random.default_rng(3)
    owner = np.repeat(np.arange(200), 2)
    base = rng.exponential(size=400)
    # K=2 is clearly better than K=1; K=3 is better than K=2 only by noise
    errors = np.column_stack(
        [base + 1.0, base, base - 0.0001 + 0.01 * rng.normal(size=400)]
    )
    assert one_standard_error_k(errors, owner) == 2
    errors[:, 2] -= 0.5  # now K=3 is far better
    assert one_standard_error_k(errors, owner) == 3


def test_one_standard_error_rule_with_one_validation_subject():
    # no spread across subjects to measure: the best K, without a warning
    errors = np.array([[2.0, 1.0, 1.5], [2.0, 0.5, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert one_standard_error_k(errors, np.zeros(2, dtype=int)) == 2


@pytest.mark.parametrize("seed", [0, 1])
def test_k_is_the_least_held_out_error_on_one_large_draw(seed):
    # the whole UK table at 3-5 readings: one random draw of held-out points,
    # whose heavy-tailed errors made the one-standard-error rule keep 3 and 1
    # components where 7 and 17 predict them best
    data = fi.datasets.load_uk_electricity("ssparse").data
    pace = fi.PACEImputer(random_state=seed).fit(data)
    results = pace.cv_results_
    assert results["n_folds"] == 1
    assert pace.n_components_ == int(np.argmin(results["scores_by_k"])) + 1
    assert pace.n_components_ > 3


def _growth_process():
    """Heights-like curves: a trend, four smooth components, almost no noise."""
    return BasisProcess(
        lambda t: 80 + 90 * t - 20 * t**2,
        _legendre,
        [36.0, 9.0, 2.0, 0.5],
        noise_sd=0.05,
    )


@pytest.mark.parametrize("noise_variance", ["auto", "moment"])
def test_bands_cover_on_small_nearly_noise_free_data(noise_variance):
    # Issue 17's case: 90 subjects, 4-7 visits. Before the misfit term the
    # posterior SD went to ~0 with K observations and covered 1-10 %.
    covered = []
    for seed in range(4):
        sim = sample(
            _growth_process(),
            590,
            "4-7",
            random_state=seed,
            split=(90 / 590, 0, 500 / 590),
        )
        est = fi.PACEImputer(random_state=seed, noise_variance=noise_variance)
        curves, sd = est.fit(sim.train.data).transform(sim.test.data, return_std=True)
        covered.append(np.mean(np.abs(curves - sim.test.truth) <= 1.96 * sd))
    assert np.mean(covered) >= 0.90 and min(covered) >= 0.85


def test_predictor_noise_is_never_below_the_measurement_noise():
    sim = sample(_growth_process(), 90, "4-7", random_state=9, split=(1.0, 0.0, 0.0))
    est = fi.PACEImputer(random_state=9).fit(sim.train.data)
    assert est.predictor_noise_variance_ >= est.noise_variance_ > 0
    floors = est.cv_results_["noise_variance"], est.cv_results_["noise_floor"]
    assert est.predictor_noise_variance_ >= max(floors)


def test_noise_floor_keeps_the_moment_estimate_where_it_is_right():
    process = BasisProcess(
        lambda t: 0 * t, _legendre, [1.0, 0.5, 0.2, 0.1], noise_sd=0.3
    )
    sim = sample(process, 800, "5-10", random_state=4, split=(1.0, 0.0, 0.0))
    auto = fi.PACEImputer(random_state=0).fit(sim.train.data)
    moment = fi.PACEImputer(random_state=0, noise_variance="moment").fit(sim.train.data)
    assert auto.noise_variance_ == pytest.approx(moment.noise_variance_)
    assert auto.predictor_noise_variance_ == pytest.approx(auto.noise_variance_)
    assert 0.6 * 0.09 < auto.noise_variance_ < 1.6 * 0.09
    assert "noise_candidates" in auto.cv_results_
    assert "noise_candidates" not in moment.cv_results_


def test_curve_bands_carry_variance_too_fine_for_the_covariance():
    # 20 harmonics: the smoothed surface misses the finest, the moment
    # estimate books them as noise (1.6x the truth), the curve bands must not
    sim = fi.simulate.sand_paper(n=800, n_obs=30, random_state=0, split=(0.75, 0, 0.25))
    est = fi.PACEImputer(random_state=0).fit(sim.train.data)
    curves, sd = est.transform(sim.test.data, return_std=True)
    coverage = np.mean(np.abs(curves - sim.test.truth) <= 1.96 * sd)
    assert 0.93 <= coverage <= 0.97
    truth = sim.process.noise_sd**2
    assert 0.8 * truth < est.noise_variance_ < 1.25 * truth
    assert est.predictor_noise_variance_ > 1.3 * truth


def test_fdapace_reproduction_keeps_the_moment_estimate():
    assert fi.PACEImputer.fdapace().noise_variance == "moment"
