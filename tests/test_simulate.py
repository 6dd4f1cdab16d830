import numpy as np
import pytest
from numpy.testing import assert_allclose

import fdaimpute as fi
from fdaimpute.simulate import BasisProcess, FourierProcess, parse_n_obs


def test_fourier_covariance_closed_form_matches_basis_expansion():
    proc = FourierProcess(n_harmonics=7)
    s, t = np.linspace(0, 1, 9), np.linspace(0, 1, 5)
    expanded = BasisProcess.covariance(proc, s, t)
    assert_allclose(proc.covariance(s, t), expanded, atol=1e-12)
    assert_allclose(proc.variance(s), np.sum(1.0 / np.arange(1, 8) ** 2))


@pytest.mark.parametrize("scores", ["exp", "gauss", "t5"])
def test_simulated_curves_have_the_known_mean_and_covariance(scores):
    sim = fi.simulate.sand_paper(
        n=20_000, n_harmonics=5, scores=scores, split=(1, 0, 0), random_state=1
    )
    curves = sim.train.truth
    grid = sim.grid
    cov = np.cov(curves[:, ::10].T)
    true = sim.process.covariance(grid[::10], grid[::10])
    # Monte Carlo error of a covariance with 20,000 draws is about 0.01-0.03.
    assert np.abs(curves.mean(axis=0)).max() < 0.06
    assert np.abs(cov - true).max() < 0.1
    assert_allclose(np.diag(cov).mean(), np.trace(true) / true.shape[0], rtol=0.03)


def test_noise_sd_follows_the_snr_rule_and_noise_is_added():
    sim = fi.simulate.sand_paper(n=4000, n_obs=30, split=(1, 0, 0), random_state=2)
    sd_curves = sim.train.truth.std(axis=0, ddof=1).mean()
    assert_allclose(sim.noise_sd, sd_curves / 4)
    data = sim.train.data
    col = np.rint(data.times * 100).astype(int)
    resid = data.values - sim.train.truth[data.subject_index, col]
    assert_allclose(resid.std(), sim.noise_sd, rtol=0.02)
    clean = fi.simulate.sand_paper(n=50, noise=False, random_state=2)
    assert clean.noise_sd == 0


@pytest.mark.parametrize(
    "n_obs, lo, hi", [(30, 30, 30), ("8-12", 8, 12), ("3-5", 3, 5)]
)
def test_sparsity_levels_and_times_on_grid_without_replacement(n_obs, lo, hi):
    sim = fi.simulate.sand_paper(n=500, n_obs=n_obs, random_state=0)
    for part in (sim.train, sim.validation, sim.test):
        counts = part.data.n_obs
        assert counts.min() >= lo and counts.max() <= hi
        idx = part.data.times * 100
        assert_allclose(idx, np.rint(idx), atol=1e-9)
    counts = sim.train.data.n_obs
    assert set(np.unique(counts)) == set(range(lo, hi + 1))
    assert (len(sim.train.data), len(sim.validation.data), len(sim.test.data)) == (
        450,
        25,
        25,
    )
    assert sim.test.data.ids[0] == 475


def test_uniform_times_cover_the_grid_evenly():
    sim = fi.simulate.sand_paper(n=5000, n_obs="3-5", split=(1, 0, 0), random_state=3)
    freq = np.bincount(np.rint(sim.train.data.times * 100).astype(int), minlength=101)
    expected = sim.train.data.times.size / 101
    assert np.abs(freq / expected - 1).max() < 0.25


def test_clustered_times_are_more_concentrated_than_uniform():
    kw = dict(n=2000, n_obs="8-12", split=(1, 0, 0), random_state=0)
    uni = fi.simulate.sand_paper(times="uniform", **kw).train.data
    clu = fi.simulate.sand_paper(times="clustered", **kw).train.data

    def spread(d):
        return np.mean([np.ptp(t) for t, _ in d])

    assert spread(clu) < 0.75 * spread(uni)


def test_off_grid_times_are_continuous_and_truth_matches_scores():
    sim = fi.simulate.sand_paper(n=300, n_obs="3-5", off_grid=True, random_state=0)
    t = sim.train.data.times
    assert np.mean(np.abs(t * 100 - np.rint(t * 100)) > 1e-6) > 0.9
    assert_allclose(
        sim.process.curves(sim.test.scores, sim.grid), sim.test.truth, atol=1e-12
    )
    clustered = fi.simulate.sand_paper(
        n=300, n_obs="8-12", off_grid=True, times="clustered", random_state=0
    )
    assert (
        clustered.train.data.times.min() >= 0 and clustered.train.data.times.max() <= 1
    )


def test_same_seed_same_data_different_seed_different_data():
    a = fi.simulate.sand_paper(n=100, n_obs="3-5", random_state=5)
    b = fi.simulate.sand_paper(n=100, n_obs="3-5", random_state=5)
    c = fi.simulate.sand_paper(n=100, n_obs="3-5", random_state=6)
    assert a.train.data == b.train.data
    assert a.train.data != c.train.data


@pytest.mark.parametrize("bad", ["12-8", "x", 0, (5,), "1-2-3"])
def test_parse_n_obs_rejects_bad_specs(bad):
    with pytest.raises(ValueError, match="n_obs"):
        parse_n_obs(bad)


def test_parse_n_obs_names():
    assert parse_n_obs("dense") == (30, 30)
    assert parse_n_obs("sparse") == (8, 12)
    assert parse_n_obs("ssparse") == (3, 5)


def test_bad_simulation_settings():
    with pytest.raises(ValueError, match="distinct times"):
        fi.simulate.sand_paper(n=10, n_obs=200)
    with pytest.raises(ValueError, match="split"):
        fi.simulate.sand_paper(n=10, split=(0.5, 0.1, 0.1))
    with pytest.raises(ValueError, match="scores"):
        FourierProcess(scores="cauchy")


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"n": 1}, ValueError, "n must be at least 2"),
        ({"n": 10.0}, TypeError, "n must be an int"),
        ({"n": 20, "snr": 0}, ValueError, "snr must be a positive"),
        ({"n": 20, "snr": -1.0}, ValueError, "snr must be a positive"),
    ],
)
def test_sizes_that_cannot_make_a_simulation_are_refused(kwargs, error, match):
    # n = 1 failed later on a NaN noise SD (an SD across one curve), snr = -1
    # gave a negative noise SD
    with pytest.raises(error, match=match):
        fi.simulate.sand_paper(n_obs="3-5", random_state=0, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_obs": 5}, "one sparsity per variable"),
        ({"n_obs": "2-2"}, "one sparsity per variable"),
        ({"scales": [1.0, 2.0]}, "one value per variable"),
        ({"scales": [1.0, -1.0, 2.0]}, "scales must be positive"),
        ({"n_variables": 0}, "n_variables must be 1 to 5"),
    ],
)
def test_multivariate_arguments_are_checked(kwargs, match):
    # a string was read a character per variable, an int crashed on len()
    with pytest.raises(ValueError, match=match):
        fi.simulate.multivariate_gaussian(n=20, random_state=0, **kwargs)


def test_a_pair_of_sparsities_must_be_integers():
    with pytest.raises(ValueError, match="n_obs must be"):
        fi.simulate.parse_n_obs((2.5, 4))
    assert fi.simulate.parse_n_obs((2, 4)) == (2, 4)
