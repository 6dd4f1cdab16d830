"""The multivariate Gaussian process, its sampler and its exact oracle."""

import numpy as np
import pytest

import fdaimpute as fi
from fdaimpute.multivariate import MultivariateIrregularData


def _only(data, j):
    """The same subjects with every variable but ``j`` hidden."""
    part, rows = data.variable_data(j)
    assert rows.tolist() == list(range(len(data)))
    return MultivariateIrregularData(
        part.times,
        part.values,
        np.full(part.times.size, j),
        part.offsets,
        data.variables,
        data.ids,
    )


def test_sampler_draws_each_variables_own_sparsity_and_truth():
    sim = fi.simulate.multivariate_gaussian(
        n=200, n_obs=["2-4", "8-12", 5], random_state=1
    )
    counts = sim.train.data.counts
    assert counts[:, 0].min() >= 2 and counts[:, 0].max() <= 4
    assert counts[:, 1].min() >= 8 and counts[:, 1].max() <= 12
    assert (counts[:, 2] == 5).all()
    proc = sim.process
    assert np.allclose(sim.train.truth, proc.curves(sim.train.scores, sim.grid))
    # observations are the truth plus noise of each variable's SD
    data, truth = sim.train.data, sim.train.truth
    col = np.searchsorted(sim.grid, data.times)
    noise = data.values - truth[data.subject_index, data.variable, col]
    for j in range(3):
        sd = noise[data.variable == j].std()
        assert sd == pytest.approx(proc.noise_sd[j], rel=0.15)
    # the noise follows snr: the curves' average SD (over all subjects) / 4
    sd_curves = truth.std(axis=0, ddof=1).mean(axis=1)
    assert np.allclose(proc.noise_sd, sd_curves / 4.0, rtol=0.05)


def test_oracle_error_matches_its_own_conditional_variance():
    sim = fi.simulate.multivariate_gaussian(
        n=3000, split=(0.0, 0.0, 1.0), random_state=2
    )
    oracle = fi.oracle.MultivariateConditionalMean(sim.process, grid=sim.grid)
    curves, std = oracle.transform(sim.test.data, return_std=True)
    n, p, g = sim.test.truth.shape
    err = (curves.reshape(n, p, g) - sim.test.truth) ** 2
    var = std.reshape(n, p, g) ** 2
    assert np.allclose(err.mean(axis=(0, 2)), var.mean(axis=(0, 2)), rtol=0.08)


def test_oracle_with_independent_variables_ignores_the_others():
    sim = fi.simulate.multivariate_gaussian(
        n=100, coupling="independent", split=(0.0, 0.0, 1.0), random_state=3
    )
    oracle = fi.oracle.MultivariateConditionalMean(sim.process, grid=sim.grid)
    both = oracle.transform(sim.test.data).reshape(100, 3, -1)
    alone = oracle.transform(_only(sim.test.data, 0)).reshape(100, 3, -1)
    assert np.allclose(both[:, 0], alone[:, 0], atol=1e-10)
    # the hidden variables fall back to their means
    assert np.allclose(alone[:, 1], sim.process.mean(1, sim.grid), atol=1e-10)


def test_shared_scores_let_dense_variables_fill_the_sparse_one():
    sim = fi.simulate.multivariate_gaussian(
        n=400, split=(0.0, 0.0, 1.0), random_state=4
    )
    oracle = fi.oracle.MultivariateConditionalMean(sim.process, grid=sim.grid)
    truth = sim.test.truth[:, 0]
    g = sim.grid.size
    joint = oracle.transform(sim.test.data)[:, :g]
    alone = oracle.transform(_only(sim.test.data, 0))[:, :g]
    mse_joint = np.mean((joint - truth) ** 2)
    mse_alone = np.mean((alone - truth) ** 2)
    assert mse_joint < mse_alone / 10


def test_oracle_refuses_noise_free_processes_and_other_inputs():
    proc = fi.simulate.shared_fourier_process(2)
    with pytest.raises(ValueError, match="positive noise"):
        fi.oracle.MultivariateConditionalMean(proc)
    sim = fi.simulate.multivariate_gaussian(n=20, random_state=0)
    oracle = fi.oracle.MultivariateConditionalMean(sim.process)
    with pytest.raises(TypeError, match="MultivariateIrregularData"):
        oracle.transform(sim.test.data.variable_data(0)[0])
