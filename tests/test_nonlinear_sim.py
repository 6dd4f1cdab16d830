import numpy as np
import pytest
from numpy.testing import assert_allclose

import fdaimpute as fi
from fdaimpute.simulate import (
    FourierProcess,
    MonteCarloProcess,
    PhaseProcess,
    WarpedProcess,
    sample,
)


class _SampledFourier(MonteCarloProcess):
    """A Gaussian Fourier process seen only through draws (Monte Carlo moments)."""

    def __init__(self, noise_sd, n_mc=20_000):
        super().__init__(noise_sd, (0.0, 1.0), n_mc, 201, 0)
        self.inner = FourierProcess(n_harmonics=3, scores="gauss", noise_sd=noise_sd)

    def _draw(self, n, rng):
        return self.inner.sample_scores(n, rng)

    def _values(self, params, t):
        return (self.inner.basis(t) * params[:, None, :]).sum(axis=-1)


def _mse(truth, pred):
    return fi.metrics.mse(truth, pred, scale=1000)


def test_warps_are_increasing_fixed_at_the_ends_and_define_the_curves():
    proc = WarpedProcess(warp_sd=2.0, domain=(2.0, 5.0))
    params = proc.sample_scores(500, random_state=0)
    t = np.linspace(2.0, 5.0, 301)
    h = proc.warp(params, t)
    assert_allclose(h[:, [0, -1]], np.tile([2.0, 5.0], (500, 1)), atol=1e-12)
    assert (np.diff(h, axis=1) > 0).all()
    assert np.abs(h - t).max() > 0.5  # the warps really move time
    expected = params[:, :1] * proc.template((h - 2.0) / 3.0)
    assert_allclose(proc.curves(params, t), expected, atol=1e-12)
    assert_allclose(params[:, 0].mean(), 1.0, atol=0.05)
    assert_allclose(params[:, 1].std(), 2.0, rtol=0.1)
    # a zero warp is the identity, without 0 / 0
    assert_allclose(proc.warp([[1.0, 0.0]], t)[0], t, atol=1e-12)


def test_bumps_lie_in_their_ranges_and_inside_the_domain():
    proc = PhaseProcess(centres=(0.25, 0.75), shift=0.2, width=(0.03, 0.05))
    params = proc.sample_scores(2000, random_state=1)
    loc, wid, hgt = params[:, :2], params[:, 2:4], params[:, 4:6]
    assert (np.abs(loc - [0.25, 0.75]) <= 0.2).all()
    assert loc.min() >= 0 and loc.max() <= 1
    assert np.abs(loc - [0.25, 0.75]).max() > 0.19  # the whole range is used
    assert wid.min() >= 0.03 and wid.max() <= 0.05
    assert hgt.min() >= 0.6 and hgt.max() <= 1.4
    assert_allclose(params[:, 6:], 0.0)  # no baseline by default
    # each curve peaks where its taller bump is
    grid = np.linspace(0, 1, 1001)
    top = grid[np.argmax(proc.curves(params, grid), axis=1)]
    taller = loc[np.arange(2000), np.argmax(hgt, axis=1)]
    assert np.median(np.abs(top - taller)) < 0.002


@pytest.mark.parametrize("make", [PhaseProcess, WarpedProcess])
def test_same_seed_same_curves_and_noise_sd_is_applied(make):
    a = sample(make(), 3000, 30, snr=4.0, split=(1, 0, 0), random_state=3)
    b = sample(make(), 3000, 30, snr=4.0, split=(1, 0, 0), random_state=3)
    c = sample(make(), 3000, 30, snr=4.0, split=(1, 0, 0), random_state=4)
    assert a.train.data == b.train.data and a.train.data != c.train.data
    truth = a.train.truth
    assert_allclose(a.noise_sd, truth.std(axis=0, ddof=1).mean() / 4)
    data = a.train.data
    col = np.rint(data.times * 100).astype(int)
    resid = data.values - truth[data.subject_index, col]
    assert_allclose(resid.std(), a.noise_sd, rtol=0.03)
    assert_allclose(a.process.curves(a.train.scores, a.grid), truth, atol=1e-12)
    off = sample(make(), 50, "3-5", off_grid=True, random_state=0)
    t, y = off.train.data[0]
    assert_allclose(
        y, off.process.evaluate(np.tile(off.train.scores[0], (t.size, 1)), t)
    )


@pytest.mark.parametrize("make", [PhaseProcess, WarpedProcess])
def test_monte_carlo_moments_agree_with_an_independent_larger_sample(make):
    proc = make(n_mc=5000, mc_seed=0)
    grid = np.linspace(0, 1, 201)
    # on its grid the covariance is exactly the sample covariance of its draws
    own = proc.curves(proc.sample_scores(5000, 0), grid)
    assert_allclose(proc.covariance(grid, grid), np.cov(own.T), atol=1e-8)
    assert_allclose(proc.mean(grid), own.mean(axis=0), atol=1e-12)
    assert_allclose(proc.variance(grid), np.diag(np.cov(own.T)), atol=1e-8)
    big = proc.curves(proc.sample_scores(40_000, 99), grid)
    scale = big.var(axis=0).max()
    t = np.linspace(0, 1, 37)  # between the grid points too
    ref_cov = np.cov(proc.curves(proc.sample_scores(40_000, 99), t).T)
    # 5,000 draws: covariance errors of a few % of the largest variance
    assert np.abs(proc.mean(grid) - big.mean(axis=0)).max() < 0.05 * np.sqrt(scale)
    assert np.abs(proc.covariance(t, t) - ref_cov).max() < 0.08 * scale


def test_linear_oracle_from_monte_carlo_moments_is_the_closed_form_one():
    proc = _SampledFourier(noise_sd=0.3)
    sim = sample(proc.inner, 300, "3-5", off_grid=True, random_state=0)
    exact = fi.oracle.ConditionalMean(proc.inner).transform(sim.test.data)
    generic = fi.oracle.ConditionalMean(proc).transform(sim.test.data)
    # 20,000 draws: the covariance is right to about 1%, so are the predictions
    assert np.abs(generic - exact).max() < 0.05 * np.abs(exact).max()
    # and the generic path is exactly the BLUP of the process's own covariance
    for (t, y), row in zip(sim.test.data, generic):
        sig = proc.covariance(t, t) + 0.09 * np.eye(t.size)
        blup = proc.mean(sim.grid) + proc.covariance(sim.grid, t) @ np.linalg.solve(
            sig, y - proc.mean(t)
        )
        assert_allclose(row, blup, atol=1e-8)


@pytest.mark.parametrize(
    "simulate", [fi.simulate.phase_variation, fi.simulate.time_warping]
)
def test_linear_oracle_is_the_best_linear_predictor(simulate):
    sim = simulate(n=2000, n_obs="8-12", split=(0.75, 0, 0.25), random_state=0)
    test = sim.test
    oracle = fi.oracle.ConditionalMean(sim.process)
    curves, sd = oracle.transform(test.data, return_std=True)
    per = fi.metrics.mse_per_subject(test.truth, curves)
    # the BLP's expected squared error is its conditional variance, Gaussian or not
    se = per.std() / np.sqrt(per.size)
    assert abs(per.mean() - np.mean(sd**2)) < 4 * se
    lin = _mse(test.truth, curves)
    mean = _mse(test.truth, np.broadcast_to(oracle.mean_, test.truth.shape))
    pace = _mse(test.truth, fi.PACEImputer().fit(sim.train.data).transform(test.data))
    assert lin < 0.4 * mean
    assert pace >= 0.97 * lin


@pytest.mark.parametrize(
    "simulate, most",
    [(fi.simulate.phase_variation, 0.85), (fi.simulate.time_warping, 0.5)],
)
def test_conditional_mean_beats_the_linear_oracle(simulate, most):
    sim = simulate(n=1000, n_obs="8-12", split=(0.5, 0, 0.5), random_state=1)
    lin = fi.oracle.ConditionalMean(sim.process).transform(sim.test.data)
    bayes = fi.oracle.posterior_mean(sim.process, sim.test.data)
    assert _mse(sim.test.truth, bayes) < most * _mse(sim.test.truth, lin)


def test_posterior_mean_is_the_linear_oracle_for_gaussian_scores():
    proc = FourierProcess(n_harmonics=2, scores="gauss", noise_sd=0.5)
    sim = sample(proc, 400, "3-5", split=(0, 0, 1), random_state=2)
    lin = fi.oracle.ConditionalMean(proc).transform(sim.test.data)
    bayes = fi.oracle.posterior_mean(proc, sim.test.data, n_draws=40_000)
    # importance sampling is loose only for the rare subjects far out in the tails
    err = np.mean((lin - sim.test.truth) ** 2)
    assert np.mean((bayes - lin) ** 2) < 0.02 * err
    assert np.median(np.abs(bayes - lin)) < 0.02


def test_bimodal_scores_have_unit_variance_and_two_clusters():
    z = FourierProcess(n_harmonics=1, scores="bimodal").sample_scores(20_000, 0)
    assert_allclose(z.var(axis=0), 1.0, rtol=0.03)
    assert np.mean(np.abs(z) < 0.3) < 0.02


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="domain"):
        PhaseProcess(centres=(0.1,), shift=0.2)
    with pytest.raises(ValueError, match="width"):
        PhaseProcess(width=(0.0, 0.1))
    with pytest.raises(ValueError, match="warp_sd"):
        WarpedProcess(warp_sd=-1)
    with pytest.raises(TypeError, match="template"):
        WarpedProcess(template=3)
    with pytest.raises(ValueError, match="n_mc"):
        WarpedProcess(n_mc=10)
    sim = fi.simulate.time_warping(n=40, noise=False, random_state=0)
    with pytest.raises(ValueError, match="noise_sd"):
        fi.oracle.posterior_mean(sim.process, sim.test.data)
    with pytest.raises(TypeError, match="IrregularData"):
        fi.oracle.posterior_mean(sim.process, [(0.1, 1.0)])
    with pytest.raises((TypeError, ValueError), match="process"):
        fi.oracle.ConditionalMean("warp").fit()
