import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _configs import inside_intervals
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline

import fdaimpute as fi
from fdaimpute import IrregularData, KernelImputer


def _lines(n=30, seed=0, n_obs=(3, 8)):
    rng = np.random.default_rng(seed)
    times, values, slopes = [], [], []
    for _ in range(n):
        t = np.sort(
            rng.choice(np.linspace(0, 1, 41), rng.integers(*n_obs), replace=False)
        )
        a, b = rng.normal(size=2)
        times.append(t)
        values.append(a + b * t)
        slopes.append((a, b))
    return IrregularData.from_lists(times, values), np.array(slopes)


@pytest.mark.parametrize(
    "kernel, bandwidth",
    [
        ("gaussian", 0.2),
        ("gaussian", 0.5),
        ("gaussian", "cv"),
        ("gaussian", "gcv"),
        # Epanechnikov windows must hold two points everywhere to be exact.
        ("epanechnikov", 1.0),
        ("epanechnikov", 3.0),
    ],
)
def test_exact_on_noise_free_straight_lines(kernel, bandwidth):
    data, coef = _lines()
    grid = np.linspace(0, 1, 21)
    imp = KernelImputer(grid=grid, kernel=kernel, bandwidth=bandwidth, shrinkage=0.0)
    curves = imp.fit(data).transform(data)
    assert_allclose(curves, coef[:, :1] + coef[:, 1:] * grid, atol=1e-6)
    assert_allclose(imp.derivative(data), np.repeat(coef[:, 1:], 21, axis=1), atol=1e-5)


def test_auto_shrinkage_picks_zero_on_noise_free_lines():
    data, coef = _lines(n_obs=(4, 8))
    imp = KernelImputer(grid=np.linspace(0, 1, 11)).fit(data)
    assert imp.shrinkage_ == 0.0
    assert_allclose(
        imp.transform(data), coef[:, :1] + coef[:, 1:] * imp.grid_, atol=1e-6
    )


def test_tiny_bandwidth_interpolates_the_observations():
    sim = fi.simulate.sand_paper(n=40, n_obs="8-12", random_state=0)
    imp = KernelImputer(bandwidth=1e-3, shrinkage=0.0).fit(sim.train.data)
    at_obs = imp.predict_at(sim.test.data)
    assert_allclose(at_obs.values, sim.test.data.values, atol=1e-8)


def test_error_shrinks_with_bandwidth_on_dense_noise_free_curves():
    proc = fi.simulate.FourierProcess(n_harmonics=3, scores="gauss")
    sim = fi.simulate.sample(proc, 60, 60, random_state=0)
    errors = []
    for h in [0.1, 0.05, 0.02]:
        imp = KernelImputer(grid=sim.grid, bandwidth=h, shrinkage=0.0)
        errors.append(
            fi.metrics.mse(
                sim.test.truth, imp.fit(sim.train.data).transform(sim.test.data)
            )
        )
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 1e-3


def test_single_observation_subject_gets_a_finite_curve_near_the_mean():
    sim = fi.simulate.sand_paper(n=200, n_obs="8-12", random_state=0)
    imp = KernelImputer(grid=sim.grid).fit(sim.train.data)
    lonely = IrregularData.from_lists([[0.5]], [[3.0]], ids=["solo"])
    for selection in ("pooled", "subject"):
        imp.set_params(selection=selection).fit(sim.train.data)
        curve = imp.transform(lonely)[0]
        assert np.isfinite(curve).all()
        # Far from its one point the subject falls back to the pooled mean.
        assert abs(curve[0] - imp.mean_[0]) < 0.05
        assert curve[50] > imp.mean_[50] + 0.5


def test_shrinkage_beats_plain_smoothing_on_sparse_data():
    sim = fi.simulate.sand_paper(n=1000, n_obs="3-5", random_state=0)
    plain = KernelImputer(grid=sim.grid, shrinkage=0.0).fit(sim.train.data)
    shrunk = KernelImputer(grid=sim.grid).fit(sim.train.data)
    err_plain = fi.metrics.mse(sim.test.truth, plain.transform(sim.test.data))
    err_shrunk = fi.metrics.mse(sim.test.truth, shrunk.transform(sim.test.data))
    assert err_shrunk < 0.85 * err_plain


def test_per_subject_selection_runs_and_differs_by_subject():
    sim = fi.simulate.sand_paper(n=100, n_obs="8-12", random_state=0)
    imp = KernelImputer(selection="subject", grid=sim.grid).fit(sim.train.data)
    h, lam = imp._bandwidths(sim.test.data)
    assert h.shape == (len(sim.test.data),) and np.unique(h).size > 1
    assert np.isfinite(imp.transform(sim.test.data)).all()


def test_output_rows_follow_input_order_and_ids():
    sim = fi.simulate.sand_paper(n=100, n_obs="3-5", random_state=0)
    imp = KernelImputer(grid=sim.grid).fit(sim.train.data)
    data = sim.test.data
    order = np.array([3, 0, 4, 1, 2])
    assert_allclose(imp.transform(data[order]), imp.transform(data)[order])
    imp.set_output(transform="pandas")
    frame = imp.transform(data)
    assert isinstance(frame, pd.DataFrame)
    assert_array_equal(frame.index, data.ids)
    assert frame.columns[1] == "t=0.01"


def test_accepts_every_input_format():
    data, _ = _lines(n=8)
    imp = KernelImputer(grid=np.linspace(0, 1, 5), bandwidth=0.3).fit(data)
    ref = imp.transform(data)
    assert_allclose(imp.transform(data.to_long()), ref)
    pairs = list(zip(*data.to_lists()))
    assert_allclose(imp.transform(pairs), ref)


def test_dense_matrix_input_fills_in_the_matrix():
    rng = np.random.default_rng(0)
    X = np.add.outer(rng.normal(size=30), np.linspace(0, 1, 8))
    X_missing = X.copy()
    X_missing[rng.random(X.shape) < 0.3] = np.nan
    imp = KernelImputer(shrinkage=0.0, bandwidth=0.5)
    filled = imp.fit_transform(X_missing)
    assert filled.shape == X.shape
    assert_allclose(filled, X, atol=1e-6)
    with pytest.raises(ValueError, match="features"):
        imp.transform(X[:, :5])


def test_pipeline_cross_val_score_and_grid_search():
    sim = fi.simulate.sand_paper(n=300, n_obs="8-12", random_state=0)
    data = sim.train.data
    y = sim.train.truth[:, 40:60].mean(axis=1)
    pipe = make_pipeline(KernelImputer(grid=np.linspace(0, 1, 21)), RidgeCV())
    scores = cross_val_score(pipe, data, y, cv=3)
    assert scores.shape == (3,) and np.all(scores > 0.3)
    search = GridSearchCV(pipe, {"kernelimputer__bandwidth": [0.02, 0.06]}, cv=3)
    search.fit(data, y)
    assert search.best_params_["kernelimputer__bandwidth"] in (0.02, 0.06)
    assert search.predict(sim.test.data).shape == (len(sim.test.data),)


def test_clone_get_params_and_pickle_round_trip():
    imp = KernelImputer(bandwidth=0.1, kernel="epanechnikov", grid=11)
    cloned = clone(imp)
    assert cloned.get_params() == imp.get_params()
    data, _ = _lines()
    imp.fit(data)
    again = pickle.loads(pickle.dumps(imp))
    assert_allclose(again.transform(data), imp.transform(data))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"bandwidth": -1.0}, "bandwidth"),
        ({"bandwidth": "silverman"}, "bandwidth"),
        ({"kernel": "box"}, "kernel"),
        ({"selection": "both"}, "selection"),
        ({"shrinkage": -0.5}, "shrinkage"),
        ({"n_bandwidths": 0}, "n_bandwidths"),
        ({"grid": 1}, "at least 2"),
        ({"grid": [0.5, 0.2]}, "increasing"),
        ({"grid": [0.0, 2.0]}, "extrapolate"),
    ],
)
def test_bad_parameters_raise(params, match):
    data, _ = _lines()
    with pytest.raises(ValueError, match=match):
        KernelImputer(**params).fit(data)


def test_times_outside_training_range_need_extrapolate():
    data, _ = _lines()
    imp = KernelImputer(bandwidth=0.3).fit(data)
    late = IrregularData.from_lists([[0.5, 1.5]], [[0.0, 1.0]], ids=["late"])
    with pytest.raises(ValueError, match=r"subject 'late'.*outside the training range"):
        imp.transform(late)
    imp.set_params(extrapolate=True).fit(data)
    assert np.isfinite(imp.transform(late)).all()


def test_unfitted_transform_raises():
    from sklearn.exceptions import NotFittedError

    data, _ = _lines()
    with pytest.raises(NotFittedError):
        KernelImputer().transform(data)


def test_predict_at_per_subject_times_of_different_lengths():
    data, coef = _lines(n=2)
    imp = KernelImputer(bandwidth=0.5, shrinkage=0.0).fit(data)
    lo, hi = imp.time_range_
    times = [np.linspace(lo, hi, 2), np.linspace(lo, hi, 3)]
    out = imp.predict_at(data, times)
    assert [o.shape for o in out] == [(2,), (3,)]
    for i in range(2):
        assert_allclose(out[i], coef[i, 0] + coef[i, 1] * times[i], atol=1e-6)


# ---------------------------------------------------------------------- #
# bands


def test_noise_variance_is_close_to_the_simulated_noise():
    sim = fi.simulate.sand_paper(n=150, n_obs=20, n_harmonics=3, random_state=1)
    imp = KernelImputer(grid=sim.grid).fit(sim.train.data)
    assert imp.noise_variance_ == pytest.approx(sim.process.noise_sd**2, rel=0.2)
    assert_allclose(
        np.mean(imp.noise_variance_at(sim.train.data.times)), imp.noise_variance_
    )


def test_prediction_intervals_cover_held_out_points():
    sim = fi.simulate.sand_paper(n=300, n_obs="3-5", n_harmonics=3, random_state=0)
    visible, hidden, rows = fi.metrics.split_held_out(
        sim.train.data, 0.2, min_keep=2, random_state=0
    )
    imp = KernelImputer().fit(visible)
    assert 0.92 <= np.mean(inside_intervals(imp, visible, hidden, rows)) <= 0.98


def _two_point_noise_late(seed, n=150):
    """Curves ``sin(2 pi t) + a + b t`` seen 20-30 times on [0, 1] with
    Gaussian noise of SD 0.5, except in the last third, where the noise is
    +-0.5 (the same variance, but never beyond 0.5)."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(20, 31, size=n)
    subject = np.repeat(np.arange(n), counts)
    times = np.concatenate([np.sort(rng.uniform(0, 1, c)) for c in counts])
    a, b = rng.normal(size=(2, n))
    noise = 0.5 * rng.normal(size=times.size)
    late = times > 2 / 3
    noise[late] = 0.5 * rng.choice([-1.0, 1.0], size=late.sum())
    values = np.sin(2 * np.pi * times) + a[subject] + b[subject] * times + noise
    return IrregularData(times, values, np.concatenate([[0], np.cumsum(counts)]))


def test_interval_coverage_is_calibrated_per_third_of_the_range():
    # a Gaussian likelihood sees the same variance in every third, and its
    # 95% intervals cover 0.99 of the late third's held-out points, whose
    # noise never leaves +-0.5; the left-out points' quantile narrows them
    data = _two_point_noise_late(0)
    visible, hidden, rows = fi.metrics.split_held_out(
        data, 0.2, min_keep=2, random_state=0
    )
    imp = KernelImputer().fit(visible)
    knots, factor = imp._bands.calibration
    assert factor[2] < 0.8 and np.all(np.abs(np.log(factor[:2])) < 0.2)
    inside = inside_intervals(imp, visible, hidden, rows)
    third = np.clip((hidden.times * 3).astype(int), 0, 2)
    for j in range(3):
        assert 0.93 <= inside[third == j].mean() <= 0.975, j


def test_sd_grows_away_from_the_observations():
    sim = fi.simulate.sand_paper(n=150, n_obs="8-12", n_harmonics=3, random_state=0)
    imp = KernelImputer(grid=sim.grid).fit(sim.train.data)
    near = IrregularData.from_lists([[0.1, 0.15, 0.2]], [[0.0, 0.1, 0.2]])
    grid = [0.15, 0.3, 0.5]
    curves, sd = imp.transform(near, return_std=True, grid=grid)
    assert sd[0, 0] < sd[0, 1] < sd[0, 2]
    # at the same time, a subject observed only far away has the wider band
    far = IrregularData.from_lists([[0.9]], [[0.0]])
    assert (
        sd[0, 0]
        < 2 * sd[0, 0]
        < imp.transform(far, return_std=True, grid=grid)[1][0, 0]
    )
    # the plain curves are those of transform without return_std
    assert_array_equal(curves, imp.transform(near, grid=grid))


def test_bands_are_zero_on_noise_free_lines_and_scale_with_the_values():
    data, _ = _lines(n_obs=(4, 8))
    imp = KernelImputer(grid=np.linspace(0, 1, 11)).fit(data)
    _, sd = imp.transform(data, return_std=True)
    assert_allclose(sd, 0.0, atol=1e-6)
    assert imp.noise_variance_ == pytest.approx(0.0, abs=1e-12)
    sim = fi.simulate.sand_paper(n=60, n_obs="3-5", random_state=0)
    scaled = IrregularData(
        sim.train.data.times, 10.0 * sim.train.data.values, sim.train.data.offsets
    )
    one = KernelImputer(grid=sim.grid).fit(sim.train.data)
    ten = KernelImputer(grid=sim.grid).fit(scaled)
    assert_allclose(
        ten.transform(scaled, return_std=True)[1],
        10.0 * one.transform(sim.train.data, return_std=True)[1],
        rtol=1e-5,
    )
    assert ten.noise_variance_ == pytest.approx(100.0 * one.noise_variance_, rel=1e-5)


def _blackmore():
    frame = pd.read_csv(Path(__file__).resolve().parent / "data" / "Blackmore.csv")
    frame["subject"] = frame["subject"].astype(str)
    return IrregularData.from_long(frame, id="subject", time="age", value="exercise")


def _slope_of_curves(imp, data, grid):
    """Slope of ``transform``'s curves by central differences on a fine grid."""
    step = 1e-4
    up = np.asarray(imp.transform(data, grid=grid + step))
    down = np.asarray(imp.transform(data, grid=grid - step))
    return (up - down) / (2 * step)


@pytest.mark.parametrize(
    "params", [{}, {"selection": "subject"}, {"bandwidth": 2.0, "shrinkage": 0.0}]
)
def test_derivative_is_the_slope_of_the_returned_curve(params):
    # 80 of Blackmore's girls: the local slope b(s) of the per-subject fits
    # differed from the slope of the curve a(s) by 95% of it (opposite signs
    # in 15% of the grid cells); derivative is now the curve's own slope
    data = _blackmore().take(np.arange(80))
    imp = KernelImputer(**params).fit(data)
    lo, hi = imp.time_range_
    grid = np.linspace(lo + 0.01, hi - 0.01, 57)
    deriv = np.asarray(imp.derivative(data, grid=grid))
    slope = _slope_of_curves(imp, data, grid)
    scale = np.abs(slope).max(axis=1, keepdims=True)
    assert np.max(np.abs(deriv - slope) / scale) < 1e-3


def test_epanechnikov_derivative_integrates_to_the_curve():
    # with a kernel of bounded support the curve's slope jumps where a point
    # meets a window's edge, so compare the derivative's integral with the
    # curve's change over the range
    data = _blackmore().take(np.arange(80))
    imp = KernelImputer(kernel="epanechnikov").fit(data)
    grid = np.linspace(*imp.time_range_, 4001)
    curves = np.asarray(imp.transform(data, grid=grid))
    deriv = np.asarray(imp.derivative(data, grid=grid))
    change = curves[:, -1] - curves[:, 0]
    integral = np.trapezoid(deriv, grid, axis=1)
    spread = np.ptp(curves, axis=1)
    assert np.max(np.abs(integral - change) / spread) < 1e-3


def test_derivative_is_the_slope_of_each_variables_curve():
    # several variables, one of them never observed for some subjects (their
    # curve is that variable's pooled mean, and its slope the mean's)
    sim = fi.simulate.multivariate_gaussian(n=60, random_state=2)
    data = sim.train.data
    imp = KernelImputer().fit(data)
    frame = data.to_long()
    lost = (frame["variable"] == "x1") & frame["id"].isin(data.ids[:10])
    part = fi.MultivariateIrregularData.from_long(frame[~lost])
    lo, hi = imp.time_range_
    grid = np.linspace(lo + 0.01, hi - 0.01, 31)
    deriv = np.asarray(imp.derivative(part, grid=grid))
    slope = _slope_of_curves(imp, part, grid)
    scale = np.abs(slope).max()
    assert np.max(np.abs(deriv - slope)) / scale < 1e-3
