"""The non-linearly coupled process, its linear oracle and its posterior mean."""

import numpy as np
import pytest

import fdaimpute as fi
from fdaimpute.multivariate import MultivariateIrregularData


def _direct_curves(process, xi, t):
    """The process's two variables written out from the path, not the bases."""
    k = np.arange(1, process.n_harmonics + 1)
    arg = 2 * np.pi * np.multiply.outer(t, k)
    h = k.size
    z = (np.sin(arg) / k) @ xi[:, :h].T + (np.cos(arg) / k) @ xi[:, h:].T
    v = np.sum(1.0 / k**2)
    w = process.linear_weight
    s0, s1 = process.scales
    x0 = s0 * (np.sin(np.pi * t)[:, None] + z / np.sqrt(v))
    square = (z**2 - v) / (np.sqrt(2.0) * v)
    x1 = s1 * (0.5 * t[:, None] + w * z / np.sqrt(v) + np.sqrt(1 - w * w) * square)
    return np.stack([x0.T, x1.T], axis=1)


@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0])
def test_curves_are_the_path_and_its_centred_square(weight):
    process = fi.simulate.QuadraticCouplingProcess(2, weight, scales=(1.5, 3.0))
    xi = np.random.default_rng(0).standard_normal((7, process.n_latent))
    t = np.linspace(0, 1, 23)
    got = process.curves(process.scores_of_latent(xi), t)
    assert np.allclose(got, _direct_curves(process, xi, t), atol=1e-12)


def test_scores_are_uncorrelated_with_the_stated_variances():
    process = fi.simulate.QuadraticCouplingProcess(2, 0.5)
    scores = process.sample_scores(200_000, random_state=1)
    cov = np.cov(scores.T)
    assert np.allclose(np.diag(cov), process.score_var, rtol=0.03)
    off = cov - np.diag(np.diag(cov))
    assert np.abs(off).max() < 0.03


def test_without_linear_share_the_variables_are_uncorrelated():
    process = fi.simulate.QuadraticCouplingProcess(3, 0.0)
    t = np.linspace(0, 1, 11)
    assert np.all(process.cross_covariance(0, 1, t, t) == 0)
    # so the linear oracle of x1 ignores x0's observations
    sim = fi.simulate.nonlinear_coupling(
        n=40, linear_weight=0.0, split=(0.0, 0.0, 1.0), random_state=2
    )
    data = sim.test.data
    part, _ = data.variable_data(1)
    alone = MultivariateIrregularData(
        part.times,
        part.values,
        np.ones(part.times.size, dtype=int),
        part.offsets,
        data.variables,
        data.ids,
    )
    oracle = fi.oracle.MultivariateConditionalMean(sim.process, grid=sim.grid)
    both = oracle.transform(data).reshape(40, 2, -1)[:, 1]
    only = oracle.transform(alone).reshape(40, 2, -1)[:, 1]
    assert np.allclose(both, only, atol=1e-10)


def test_sampler_keeps_the_process_class_and_each_sparsity():
    sim = fi.simulate.nonlinear_coupling(n=200, random_state=3)
    assert isinstance(sim.process, fi.simulate.QuadraticCouplingProcess)
    assert np.all(sim.process.noise_sd > 0)
    counts = sim.train.data.counts
    assert counts[:, 0].min() >= 8 and counts[:, 1].max() <= 4
    assert np.allclose(
        sim.train.truth, sim.process.curves(sim.train.scores, sim.grid), atol=1e-12
    )
    again = fi.simulate.nonlinear_coupling(n=200, random_state=3)
    assert np.array_equal(again.train.data.values, sim.train.data.values)


def test_posterior_mean_of_a_gaussian_pair_is_the_linear_oracle():
    sim = fi.simulate.nonlinear_coupling(
        n=150, linear_weight=1.0, split=(0.0, 0.0, 1.0), random_state=4
    )
    test, truth = sim.test.data, sim.test.truth
    exact = fi.oracle.MultivariateConditionalMean(sim.process, grid=sim.grid)
    linear = exact.transform(test).reshape(truth.shape)
    sampled = fi.oracle.posterior_mean(
        sim.process, test, sim.grid, n_draws=4000, random_state=0
    ).reshape(truth.shape)
    # Monte Carlo error only: far below the oracle's own error
    gap = ((sampled - linear) ** 2).mean(axis=(0, 2))
    err = ((linear - truth) ** 2).mean(axis=(0, 2))
    assert np.all(gap < 0.02 * err)


def test_posterior_mean_fills_the_square_that_the_linear_oracle_cannot():
    sim = fi.simulate.nonlinear_coupling(
        n=300, linear_weight=0.0, split=(0.0, 0.0, 1.0), random_state=5
    )
    test, truth = sim.test.data, sim.test.truth
    linear = fi.oracle.MultivariateConditionalMean(sim.process, grid=sim.grid)
    lin = linear.transform(test).reshape(truth.shape)
    best = fi.oracle.posterior_mean(sim.process, test, sim.grid, n_draws=1000)
    best = best.reshape(truth.shape)
    err_lin = ((lin - truth) ** 2).mean(axis=(0, 2))
    err_best = ((best - truth) ** 2).mean(axis=(0, 2))
    assert err_best[1] < 0.3 * err_lin[1]
    assert err_best[0] < err_lin[0]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="linear_weight"):
        fi.simulate.QuadraticCouplingProcess(3, 1.5)
    with pytest.raises(ValueError, match="two sparsities"):
        fi.simulate.nonlinear_coupling(n=20, n_obs=["8-12"])
    sim = fi.simulate.nonlinear_coupling(n=20, random_state=0)
    part, _ = sim.test.data.variable_data(0)
    with pytest.raises(TypeError, match="MultivariateIrregularData"):
        fi.oracle.posterior_mean(sim.process, part)
    with pytest.raises(ValueError, match="n_draws"):
        fi.oracle.posterior_mean(sim.process, sim.test.data, n_draws=0)


def test_posterior_mean_of_a_subject_without_the_linear_variable():
    sim = fi.simulate.nonlinear_coupling(n=20, split=(0.0, 0.0, 1.0), random_state=6)
    data = sim.test.data
    drop = (data.subject_index == 0) & (data.variable == 0)
    keep = ~drop
    offsets = np.concatenate(
        [[0], np.cumsum(np.bincount(data.subject_index[keep], minlength=20))]
    )
    fewer = MultivariateIrregularData(
        data.times[keep],
        data.values[keep],
        data.variable[keep],
        offsets,
        data.variables,
        data.ids,
    )
    out = fi.oracle.posterior_mean(sim.process, fewer, sim.grid, n_draws=500)
    full = fi.oracle.posterior_mean(sim.process, data, sim.grid, n_draws=500)
    assert np.isfinite(out).all()
    # the others' draws and observations are the same
    assert np.allclose(out[1:], full[1:])
    assert not np.allclose(out[0], full[0])
