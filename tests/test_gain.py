import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

import fdaimpute as fi
from fdaimpute import GAINImputer

pytest.importorskip("torch")

FAST = dict(max_iter=50, device="cpu", random_state=0)


@pytest.fixture(scope="module")
def sim():
    return fi.simulate.sand_paper(n=200, n_obs="8-12", random_state=0)


@pytest.fixture(scope="module")
def fitted(sim):
    return GAINImputer(grid=sim.grid, **FAST).fit(sim.train.data)


def _lines(n_subjects, times, rng, missing):
    """Curves a_i + b_i t on ``times``, each cell missing with this probability."""
    a, b = rng.normal(size=(2, n_subjects, 1))
    X = a + b * times
    hidden = rng.random(X.shape) < missing
    hidden[hidden.all(axis=1), 0] = False  # every subject keeps a point
    return X, np.where(hidden, np.nan, X)


def test_one_row_per_subject_in_input_order(sim, fitted):
    test = sim.test.data
    curves = fitted.transform(test)
    assert curves.shape == (len(test), sim.grid.size)
    assert np.isfinite(curves).all()
    order = np.arange(len(test))[::-1]
    assert_allclose(fitted.transform(test.take(order)), curves[order], rtol=1e-12)
    # the curves pass through the filled bins, which sit at the grid times
    assert_array_equal(fitted.bin_centres_, sim.grid)


def test_fixed_random_state_gives_identical_fits(sim, fitted):
    again = GAINImputer(grid=sim.grid, **FAST).fit(sim.train.data)
    test = sim.test.data
    assert_array_equal(again.transform(test), fitted.transform(test))
    assert_array_equal(fitted.transform(test), fitted.transform(test))
    other = GAINImputer(grid=sim.grid, **dict(FAST, random_state=1))
    assert not np.allclose(
        other.fit(sim.train.data).transform(test), again.transform(test)
    )


def test_fully_observed_bins_are_returned_exactly_with_keep_observed():
    rng = np.random.default_rng(0)
    times = np.linspace(0, 1, 11)
    X = rng.normal(size=(60, 1)) + np.sin(3 * times) * rng.normal(size=(60, 1))
    gain = GAINImputer(grid=times, keep_observed=True, **FAST)
    assert_array_equal(gain.fit_transform(X), X)
    # without it, the observed cells are the generator's reconstructions
    gain.set_params(keep_observed=False)
    assert not np.array_equal(gain.transform(X), X)


def test_beats_the_column_mean_on_a_low_rank_process():
    rng = np.random.default_rng(0)
    times = np.linspace(0, 1, 11)
    X, X_missing = _lines(300, times, rng, missing=0.5)
    hidden = np.isnan(X_missing)
    gain = GAINImputer(max_iter=1000, keep_observed=True, device="cpu", random_state=0)
    filled = gain.fit_transform(X_missing)
    column_mean = np.broadcast_to(np.nanmean(X_missing, axis=0), X.shape)
    mse_gain = np.mean((filled - X)[hidden] ** 2)
    mse_mean = np.mean((column_mean - X)[hidden] ** 2)
    assert mse_gain < 0.5 * mse_mean
    assert_array_equal(filled[~hidden], X[~hidden])


def test_training_lowers_the_reconstruction_error(sim):
    gain = GAINImputer(validation_fraction=0.0, **dict(FAST, max_iter=300))
    history = gain.fit(sim.train.data).history_
    assert history["iteration"] == list(range(25, 301, 25))
    assert "held_out" not in history
    assert gain.n_iter_ == gain.best_iter_ == 300
    assert history["reconstruction"][-1] < 0.5 * history["reconstruction"][0]


def test_early_stopping_keeps_the_best_generator():
    sim = fi.simulate.sand_paper(n=1000, n_obs="3-5", random_state=0)
    gain = GAINImputer(n_iter_no_change=200, **dict(FAST, max_iter=3000))
    gain.fit(sim.train.data)
    history = gain.history_
    # on so sparse a process the adversarial term soon degrades the imputations
    assert 0 < gain.best_iter_ and gain.n_iter_ == gain.best_iter_ + 200 < 3000
    best = history["iteration"].index(gain.best_iter_)
    assert history["held_out"][best] == min(history["held_out"])
    # the kept generator is the one a run stopped at best_iter_ ends with
    short = GAINImputer(n_iter_no_change=None, **dict(FAST, max_iter=gain.best_iter_))
    short.fit(sim.train.data)
    assert_array_equal(short.transform(sim.test.data), gain.transform(sim.test.data))


def test_subjects_with_one_bin_are_never_held_out():
    rng = np.random.default_rng(3)
    times = np.linspace(0, 1, 11)
    X = np.full((40, 11), np.nan)
    X[np.arange(40), rng.integers(0, 11, size=40)] = rng.normal(size=40)
    X[:, 0] = rng.normal(size=40)  # two bins each: one may be held out
    gain = GAINImputer(grid=times, validation_fraction=0.5, **FAST).fit(X)
    assert "held_out" in gain.history_
    X[:, 0] = np.nan
    X[np.isnan(X).all(axis=1), 0] = 1.0
    gain.fit(X)  # one bin per subject: nothing to hold out
    assert "held_out" not in gain.history_ and gain.n_iter_ == 50


def test_a_time_no_training_subject_observed_is_interpolated_across():
    rng = np.random.default_rng(1)
    times = np.linspace(0, 1, 11)
    _, X = _lines(80, times, rng, missing=0.3)
    X[:, 5] = np.nan  # t = 0.5: no bin
    gain = GAINImputer(grid=times, **FAST).fit(X)
    assert gain.bin_centres_.size == 10 and 0.5 not in gain.bin_centres_
    curves = gain.transform(X)
    assert_allclose(curves[:, 5], (curves[:, 4] + curves[:, 6]) / 2)


def test_equal_width_bins_merge_empty_ones(sim):
    # 30 bins over 101 grid times: every bin is observed, nothing merged
    gain = GAINImputer(n_bins=30, **FAST).fit(sim.train.data)
    assert gain.bin_centres_.size == 30
    assert gain.module_config_ == {"n_features": 30, "hidden_size": 30}
    assert gain.transform(sim.test.data).shape == (len(sim.test.data), 101)


def test_derivative_is_the_slope_between_bin_centres(sim, fitted):
    test = sim.test.data
    knots = fitted.bin_centres_
    values = fitted.predict_at(test, knots)
    mids = (knots[1:] + knots[:-1]) / 2
    assert_allclose(
        fitted.derivative(test, grid=mids), np.diff(values) / np.diff(knots)
    )


def test_mean_is_the_mean_training_curve(sim, fitted):
    assert_allclose(fitted.mean_, fitted.transform(sim.train.data).mean(axis=0))


def test_no_standard_deviation(sim, fitted):
    with pytest.raises(NotImplementedError, match="GAINImputer does not estimate"):
        fitted.transform(sim.test.data, return_std=True)


def test_a_subject_without_observations_is_refused(fitted):
    X = [(np.array([0.1, 0.5]), np.array([1.0, 2.0])), (np.array([]), np.array([]))]
    with pytest.raises(ValueError, match="subject at position 1 has no observations"):
        fitted.transform(X)


def test_save_load_round_trip_and_clone(sim, fitted, tmp_path):
    path = tmp_path / "gain.fdaimpute"
    fitted.save(path)
    loaded = GAINImputer.load(path)
    assert sorted(vars(loaded)) == sorted(vars(fitted))
    assert repr(loaded.get_params()) == repr(fitted.get_params())
    test = sim.test.data
    assert_array_equal(loaded.transform(test), fitted.transform(test))
    assert_array_equal(loaded.derivative(test), fitted.derivative(test))
    copy = clone(fitted)
    assert repr(copy.get_params()) == repr(fitted.get_params())
    assert not hasattr(copy, "module_")


@pytest.mark.parametrize(
    "param, value, error, match",
    [
        ("alpha", -1.0, ValueError, "'alpha' parameter of GAINImputer must be"),
        ("hint_rate", 1.5, ValueError, r"'hint_rate' .* in \[0, 1\]"),
        ("hint_rate", -0.1, ValueError, "'hint_rate'"),
        ("hint_rate", "high", TypeError, "'hint_rate'"),
        ("max_iter", 0, ValueError, "'max_iter'"),
        ("max_iter", 10.0, TypeError, "'max_iter'"),
        ("batch_size", 0, ValueError, "'batch_size'"),
        ("validation_fraction", 1.0, ValueError, "'validation_fraction'"),
        ("n_iter_no_change", 0, ValueError, "'n_iter_no_change'"),
        ("lr", 0.0, ValueError, "'lr'"),
        ("hidden_size", 0, ValueError, "'hidden_size'"),
        ("n_bins", 1, ValueError, "'n_bins'"),
        ("device", 3, TypeError, "'device'"),
        ("device", "abacus", ValueError, "invalid device 'abacus'"),
    ],
)
def test_invalid_parameters_are_named(sim, param, value, error, match):
    gain = GAINImputer(**{**FAST, param: value})
    with pytest.raises(error, match=match):
        gain.fit(sim.train.data)
    assert not hasattr(gain, "grid_")


def test_accepts_irregular_times_off_any_grid():
    rng = np.random.default_rng(2)
    pairs = []
    for _ in range(60):
        t = np.sort(rng.uniform(0, 1, size=rng.integers(3, 8)))
        pairs.append((t, np.cos(2 * t) + rng.normal(scale=0.1, size=t.size)))
    gain = GAINImputer(grid=21, n_bins=10, **FAST).fit(pairs)
    assert gain.bin_centres_.size <= 10
    assert gain.transform(pairs).shape == (60, 21)


def test_command_line_method(tmp_path):
    from fdaimpute.cli import main

    data = fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0).train.data
    path, out = tmp_path / "obs.csv", tmp_path / "curves.csv"
    data.to_long().to_csv(path, index=False)
    args = ["impute", str(path), "-o", str(out), "--grid", "0:1:11"]
    assert main([*args, "--method", "gain", "--param", "max_iter=30"]) == 0
    curves = np.loadtxt(out, delimiter=",", skiprows=1)[:, 1:]
    expected = GAINImputer(grid=np.linspace(0, 1, 11), max_iter=30, random_state=0)
    assert_allclose(curves, expected.fit_transform(data), rtol=1e-6)
