"""Behaviour of PACEImputer: known answers, extras, errors, the sklearn contract."""

import pickle

import numpy as np
import pytest
from _configs import fourier_basis3 as _basis
from sklearn.base import clone

import fdaimpute as fi
from fdaimpute import IrregularData
from fdaimpute.pace import PACEImputer
from fdaimpute.simulate import BasisProcess, sample


def _process(noise_sd=0.3):
    return BasisProcess(
        lambda t: 1.0 + t,
        _basis,
        [1.0, 0.5, 0.2],
        scores="gauss",
        noise_sd=noise_sd,
    )


@pytest.fixture(scope="module")
def smooth_sim():
    return sample(_process(), 1500, "4-8", random_state=0, split=(0.9, 0.0, 0.1))


@pytest.fixture(scope="module")
def fitted(smooth_sim):
    return PACEImputer(random_state=0).fit(smooth_sim.train.data)


def test_pace_recovers_known_eigenfunctions(fitted):
    grid = fitted.work_grid_
    inner = np.trapezoid(
        fitted.eigenfunctions_[:, :3, None] * _basis(grid)[:, None],
        grid,
        axis=0,
    )
    # each estimated eigenfunction matches one true one up to sign
    assert np.all(np.abs(inner).max(axis=1) > 0.97)
    # the third is the least certain: 0.135-0.185 over simulation seeds 0-4
    np.testing.assert_allclose(fitted.eigenvalues_[:3], [1.0, 0.5, 0.2], rtol=0.3)
    np.testing.assert_allclose(fitted.mean_work_, 1.0 + grid, atol=0.15)
    np.testing.assert_allclose(fitted.mean_, 1.0 + fitted.grid_, atol=0.15)
    assert fitted.n_components_ >= 3
    assert 0.5 * 0.09 < fitted.noise_variance_ < 2.5 * 0.09


def test_pace_accuracy_close_to_oracle(smooth_sim, fitted):
    test = smooth_sim.test
    oracle = fi.oracle.ConditionalMean(smooth_sim.process).transform(test.data)
    ours = fitted.transform(test.data)
    fdapace = PACEImputer.fdapace().fit(smooth_sim.train.data).transform(test.data)
    mse = [fi.metrics.mse(test.truth, c) for c in (ours, oracle, fdapace)]
    assert mse[0] < 1.3 * mse[1]
    assert mse[0] < mse[2]


def _legendre(t):
    t = np.asarray(t, dtype=float)
    return np.stack(
        [
            np.ones_like(t),
            np.sqrt(3) * (2 * t - 1),
            np.sqrt(5) * (6 * t * t - 6 * t + 1),
        ],
        axis=-1,
    )


@pytest.mark.parametrize("noise_sd", [0.0, 0.3])
def test_pace_noise_variance(noise_sd):
    # a covariance that local polynomials fit without bias: sigma^2 is consistent
    proc = BasisProcess(
        lambda t: np.sin(2 * np.pi * t),
        _legendre,
        [1.0, 0.5, 0.25],
        scores="gauss",
        noise_sd=noise_sd,
    )
    sim = sample(proc, 2000, "6-10", random_state=1)
    est = PACEImputer(random_state=0).fit(sim.train.data)
    if noise_sd == 0:
        assert est.noise_variance_ < 1e-3
    else:
        assert 0.6 * noise_sd**2 < est.noise_variance_ < 1.6 * noise_sd**2


def test_pace_return_std_coverage(smooth_sim, fitted):
    test = smooth_sim.test
    curves, std = fitted.transform(test.data, return_std=True)
    assert curves.shape == std.shape == test.truth.shape
    covered = np.mean(np.abs(curves - test.truth) <= 1.96 * std)
    assert 0.90 <= covered <= 0.99


def test_pace_derivative_matches_finite_differences(smooth_sim, fitted):
    data = smooth_sim.test.data[:20]
    grid = np.linspace(0.05, 0.95, 37)
    deriv = fitted.derivative(data, grid=grid)
    eps = 1e-5
    fd = (fitted.predict_at(data, grid + eps) - fitted.predict_at(data, grid - eps)) / (
        2 * eps
    )
    assert deriv.shape == (20, grid.size)
    assert np.max(np.abs(deriv - fd)) < 0.02 * np.max(np.abs(fd))


def test_pace_curves_are_mean_plus_scores(smooth_sim, fitted):
    data = smooth_sim.test.data
    scores = fitted.scores(data)
    assert scores.shape == (len(data), fitted.n_components_)
    grid = fitted.work_grid_
    fitted_grid = clone(fitted).set_params(grid=grid).fit(smooth_sim.train.data)
    scores = fitted_grid.scores(data)
    expected = fitted_grid.mean_ + scores @ fitted_grid.eigenfunctions_.T
    np.testing.assert_allclose(fitted_grid.transform(data), expected, atol=1e-8)


def test_pace_predict_at_agrees_with_transform(smooth_sim, fitted):
    data = smooth_sim.test.data[:10]
    on_grid = fitted.predict_at(data, fitted.grid_)
    np.testing.assert_allclose(on_grid, fitted.transform(data), atol=1e-10)
    own = fitted.predict_at(data)
    assert isinstance(own, IrregularData) and own.times.size == data.times.size


def test_pace_fitted_attributes(fitted):
    k, g = fitted.n_components_, fitted.n_work_grid
    assert fitted.eigenfunctions_.shape == (g, k)
    assert fitted.eigenvalues_.shape == fitted.fve_.shape == (k,)
    assert np.all(np.diff(fitted.eigenvalues_) <= 0)
    assert np.all(np.diff(fitted.fve_) > 0) and fitted.fve_[-1] <= 1
    norms = np.trapezoid(fitted.eigenfunctions_**2, fitted.work_grid_, axis=0)
    np.testing.assert_allclose(norms, 1.0, rtol=1e-8)
    assert fitted.covariance_.shape == (g, g)
    along, across = fitted.bandwidth_cov_
    assert along > 0 and across > 0 and fitted.bandwidth_mean_ > 0
    assert np.isfinite(fitted.cv_results_["scores_by_k"]).any()


def test_pace_continuous_times_are_binned():
    sim = fi.simulate.sand_paper(n=3000, n_obs="3-5", off_grid=True, random_state=2)
    est = PACEImputer(random_state=0).fit(sim.train.data)
    assert est.n_bins_ == 2 * (est.n_work_grid - 1) + 1
    curves = est.transform(sim.test.data)
    assert np.isfinite(curves).all()
    oracle = fi.oracle.ConditionalMean(sim.process).transform(sim.test.data)
    assert fi.metrics.mse(sim.test.truth, curves) < 1.15 * fi.metrics.mse(
        sim.test.truth, oracle
    )


@pytest.mark.parametrize(
    "params",
    [
        dict(n_components="fve"),
        dict(n_components="aic"),
        dict(n_components="bic"),
        dict(n_components=2),
        dict(bandwidth_cov=0.1, n_components="cv"),
        dict(bandwidth_cov=(0.3, 0.1)),
        dict(bandwidth_cov="gcv", bandwidth_mean="cv"),
        dict(bandwidth_cov="fdapace", bandwidth_mean="fdapace"),
        dict(kernel="epanechnikov", bandwidth_cov=0.15, bandwidth_mean=0.1),
        dict(measurement_error=False),
        dict(binning=51),
    ],
)
def test_pace_options_give_finite_curves(smooth_sim, params):
    est = PACEImputer(random_state=0, **params).fit(smooth_sim.train.data[:400])
    curves = est.transform(smooth_sim.test.data)
    assert curves.shape == (len(smooth_sim.test.data), 101)
    assert np.isfinite(curves).all()
    if params.get("n_components") == 2:
        assert est.n_components_ == 2
    if not params.get("measurement_error", True):
        assert est.noise_variance_ == 0.0


def test_pace_fdapace_factory_and_clone():
    est = PACEImputer.fdapace(bandwidth_cov=0.05, n_components=12)
    params = est.get_params()
    assert params["fdapace_compat"] and params["n_work_grid"] == 51
    assert params["bandwidth_cov"] == 0.05 and params["n_components"] == 12
    assert clone(est).get_params() == params


def test_pace_pickle_roundtrip(smooth_sim, fitted):
    again = pickle.loads(pickle.dumps(fitted))
    data = smooth_sim.test.data
    np.testing.assert_array_equal(again.transform(data), fitted.transform(data))


def test_pace_reproducible_with_random_state(smooth_sim):
    train = smooth_sim.train.data[:300]
    a = PACEImputer(random_state=3).fit(train)
    b = PACEImputer(random_state=3).fit(train)
    assert a.bandwidth_cov_ == b.bandwidth_cov_ and a.n_components_ == b.n_components_
    np.testing.assert_array_equal(a.transform(train), b.transform(train))


def test_pace_one_row_per_subject_in_order(smooth_sim, fitted):
    # a single observation, a dense subject, and ids kept through pandas output
    data = IrregularData.from_lists(
        [[0.5], np.linspace(0.1, 0.9, 30), [0.2, 0.8]],
        [[2.0], 1.0 + np.linspace(0.1, 0.9, 30), [1.0, 2.0]],
        ids=["a", "b", "c"],
    )
    curves = fitted.transform(data)
    assert curves.shape == (3, 101) and np.isfinite(curves).all()
    # the single observation pulls its curve towards it
    at = np.argmin(np.abs(fitted.grid_ - 0.5))
    assert abs(curves[0, at] - 2.0) < abs(fitted.mean_[50] - 2.0)
    frame = clone(fitted).set_output(transform="pandas").fit(smooth_sim.train.data)
    out = frame.transform(data)
    assert list(out.index) == ["a", "b", "c"]
    np.testing.assert_allclose(out.to_numpy(), curves)


def test_pace_dense_matrix_input():
    rng = np.random.default_rng(0)
    grid = np.linspace(0, 1, 12)
    scores = rng.standard_normal((200, 3)) * [1.0, 0.7, 0.4]
    X = 1 + scores @ _basis(grid).T + 0.1 * rng.standard_normal((200, 12))
    X[rng.random(X.shape) < 0.6] = np.nan
    X[np.isnan(X).all(axis=1), 0] = 1.0
    est = PACEImputer(random_state=0)
    filled = est.fit_transform(X)
    assert filled.shape == X.shape and np.isfinite(filled).all()


def test_pace_error_single_observation_subjects():
    data = IrregularData.from_lists([[0.1], [0.5], [0.9]], [[1.0], [2.0], [3.0]])
    with pytest.raises(ValueError, match="single observation"):
        PACEImputer().fit(data)


def test_pace_error_zero_variance():
    t = [np.linspace(0, 1, 5)] * 10
    data = IrregularData.from_lists(t, [np.full(5, 2.0)] * 10)
    with pytest.raises(ValueError, match="zero variance"):
        PACEImputer().fit(data)


def test_pace_error_too_few_distinct_times():
    t = [[0.0, 1.0]] * 20
    y = np.random.default_rng(0).standard_normal((20, 2))
    with pytest.raises(ValueError, match="distinct observation time"):
        PACEImputer().fit(IrregularData.from_lists(t, list(y)))


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(kernel="box"), "kernel"),
        (dict(bandwidth_mean=-1.0), "bandwidth_mean"),
        (dict(bandwidth_cov="silverman"), "bandwidth_cov"),
        (dict(bandwidth_cov=(0.1, 0.2, 0.3)), "pair"),
        (dict(n_components=0), "n_components"),
        (dict(n_components="elbow"), "n_components"),
        (dict(fve_threshold=1.5), "fve_threshold"),
        (dict(n_work_grid=2), "n_work_grid"),
        (dict(binning="yes"), "binning"),
        (dict(fdapace_compat=True, bandwidth_cov=(0.3, 0.1)), "isotropic"),
        (dict(fdapace_compat=True), "rotated"),
    ],
)
def test_pace_bad_parameters(smooth_sim, params, match):
    with pytest.raises(ValueError, match=match):
        PACEImputer(**params).fit(smooth_sim.train.data[:50])


def test_pace_bandwidth_too_small_is_a_clear_error(smooth_sim):
    with pytest.raises(ValueError, match="bandwidth"):
        PACEImputer(bandwidth_cov=1e-4, n_components=2).fit(smooth_sim.train.data[:100])


def test_pace_transform_outside_range_needs_extrapolate(fitted):
    data = IrregularData.from_lists([[0.5, 1.5]], [[1.0, 2.0]])
    with pytest.raises(ValueError, match="extrapolate"):
        fitted.transform(data)


def test_pace_transform_in_blocks_matches(monkeypatch, smooth_sim, fitted):
    import fdaimpute._fpca.conditional as conditional

    data = smooth_sim.test.data
    whole, whole_std = fitted.transform(data, return_std=True)
    monkeypatch.setattr(conditional, "_CHUNK", 7)
    blocks, blocks_std = fitted.transform(data, return_std=True)
    np.testing.assert_allclose(blocks, whole, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(blocks_std, whole_std, rtol=1e-12, atol=1e-12)
