import numpy as np
import pytest
from numpy.testing import assert_allclose

import fdaimpute as fi


def _brute_force_blup(process, t, y, s):
    """BLUP for one subject from the closed-form covariance, no basis involved."""
    sigma = process.covariance(t, t) + process.noise_sd**2 * np.eye(t.size)
    return process.mean(s) + process.covariance(s, t) @ np.linalg.solve(
        sigma, y - process.mean(t)
    )


def test_oracle_matches_brute_force_conditional_mean():
    sim = fi.simulate.sand_paper(n=60, n_obs="3-5", off_grid=True, random_state=0)
    oracle = fi.oracle.ConditionalMean(sim.process, grid=sim.grid)
    curves = oracle.transform(sim.test.data)
    for i, (t, y) in enumerate(sim.test.data):
        assert_allclose(
            curves[i], _brute_force_blup(sim.process, t, y, sim.grid), atol=1e-8
        )


@pytest.mark.parametrize("n_obs", [30, "8-12", "3-5"])
def test_oracle_error_matches_its_posterior_variance(n_obs):
    # With Gaussian scores the posterior variance is the expected squared error.
    sim = fi.simulate.sand_paper(
        n=6000, n_obs=n_obs, scores="gauss", split=(0, 0, 1), random_state=4
    )
    curves, sd = fi.oracle.ConditionalMean(sim.process).transform(
        sim.test.data, return_std=True
    )
    per = fi.metrics.mse_per_subject(sim.test.truth, curves)
    se = per.std() / np.sqrt(per.size)
    assert abs(per.mean() - np.mean(sd**2)) < 4 * se
    z = np.abs(curves - sim.test.truth) / sd
    assert abs(np.mean(z < 1.96) - 0.95) < 0.01


@pytest.mark.parametrize(
    "n_obs, low, high", [(30, 130, 160), ("8-12", 380, 450), ("3-5", 700, 840)]
)
def test_oracle_mse_on_500_test_subjects_of_the_paper_process(n_obs, low, high):
    # Exact expectations are 145 / 415 / 768 (x1000); 500 subjects vary by a few %.
    sim = fi.simulate.sand_paper(n=10_000, n_obs=n_obs, random_state=0)
    curves = fi.oracle.ConditionalMean(sim.process).transform(sim.test.data)
    assert low < fi.metrics.mse(sim.test.truth, curves, scale=1000) < high


def test_oracle_is_exact_without_noise_when_basis_is_observed():
    proc = fi.simulate.FourierProcess(n_harmonics=2, scores="gauss")
    sim = fi.simulate.sample(proc, 40, 12, random_state=0)
    curves = fi.oracle.ConditionalMean(proc).transform(sim.test.data)
    assert_allclose(curves, sim.test.truth, atol=1e-4)


def test_oracle_derivative_and_predict_at():
    sim = fi.simulate.sand_paper(n=40, n_obs="8-12", random_state=1)
    oracle = fi.oracle.ConditionalMean(sim.process)
    grid = np.linspace(0.1, 0.9, 801)
    curves = oracle.predict_at(sim.test.data, grid)
    deriv = oracle.derivative(sim.test.data, grid=grid)
    fd = np.gradient(curves, grid, axis=1)
    assert_allclose(deriv[:, 5:-5], fd[:, 5:-5], rtol=1e-3, atol=2e-2)
    at_obs = oracle.predict_at(sim.test.data)
    assert at_obs.times.size == sim.test.data.times.size
    full = oracle.transform(sim.test.data)
    col = np.rint(at_obs.times * 100).astype(int)
    assert_allclose(at_obs.values, full[at_obs.subject_index, col], atol=1e-10)


def test_oracle_shares_the_fitted_attributes_of_the_imputers():
    sim = fi.simulate.sand_paper(n=100, n_obs="8-12", random_state=0)
    oracle = fi.oracle.ConditionalMean(sim.process, grid=sim.grid)
    assert oracle.mean_.shape == oracle.grid_.shape
    # a subject observed exactly on the mean curve has zero scores
    t = sim.grid[::10]
    flat = oracle.transform([(t, sim.process.mean(t))])[0]
    np.testing.assert_allclose(flat, oracle.mean_, atol=1e-12)
    assert oracle.noise_variance_ == sim.process.noise_sd**2
