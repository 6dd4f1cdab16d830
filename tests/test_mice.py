import warnings

import numpy as np
from numpy.testing import assert_allclose

import fdaimpute as fi
from fdaimpute import IrregularData, MICEImputer


def test_observed_cells_are_kept_and_missing_cells_filled():
    sim = fi.simulate.sand_paper(n=200, n_obs="8-12", random_state=0)
    mice = MICEImputer(grid=sim.grid, max_iter=3, random_state=0).fit(sim.train.data)
    curves = mice.transform(sim.test.data)
    assert curves.shape == (len(sim.test.data), 101)
    assert np.isfinite(curves).all()
    col = np.rint(sim.test.data.times * 100).astype(int)
    assert_allclose(curves[sim.test.data.subject_index, col], sim.test.data.values)


def test_recovers_a_perfectly_correlated_design():
    # Every curve is a multiple of one shape: each bin predicts the others exactly.
    rng = np.random.default_rng(0)
    shape = np.sin(np.linspace(0, 3, 11)) + 2
    amp = rng.uniform(0.5, 2, size=300)
    X = amp[:, None] * shape
    X_missing = X.copy()
    X_missing[rng.random(X.shape) < 0.3] = np.nan
    X_missing[np.isnan(X_missing).all(axis=1), 0] = X[
        np.isnan(X_missing).all(axis=1), 0
    ]
    data = IrregularData.from_dense(X_missing, np.linspace(0, 1, 11))
    mice = MICEImputer(grid=np.linspace(0, 1, 11), random_state=0).fit(data)
    assert_allclose(mice.transform(data), X, atol=0.05)


def test_between_bins_the_curve_is_linear():
    sim = fi.simulate.sand_paper(n=100, n_obs=30, random_state=0)
    mice = MICEImputer(max_iter=2, random_state=0).fit(sim.train.data)
    grid = np.array([0.10, 0.105, 0.11])
    out = mice.predict_at(sim.test.data, grid)
    assert_allclose(out[:, 1], (out[:, 0] + out[:, 2]) / 2)


def test_default_fit_does_not_warn():
    # sklearn's early-stopping criterion is never met on sparse noisy curves;
    # a fixed number of rounds is the method, so no ConvergenceWarning
    sim = fi.simulate.sand_paper(n=200, n_obs="8-12", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mice = MICEImputer(random_state=0).fit(sim.train.data)
    assert mice.n_iter_ == mice.max_iter and not mice.converged_


def _lines(n_subjects, times, rng, missing=0.3):
    """Straight lines a + b t observed at ``times`` with some cells missing."""
    a, b = rng.normal(size=(2, n_subjects, 1))
    X = a + b * times
    X[rng.random(X.shape) < missing] = np.nan
    X[:, 0] = (a + b * times[0])[:, 0]  # every subject keeps a point
    return IrregularData.from_dense(X, times)


def test_derivative_matches_finite_differences_between_knots():
    sim = fi.simulate.sand_paper(n=100, n_obs=30, random_state=0)
    mice = MICEImputer(n_bins=15, max_iter=2, random_state=0).fit(sim.train.data)
    knots, h = mice.bin_centres_, 1e-6
    t = np.linspace(knots[0], knots[-1], 400)
    t = t[np.abs(t[:, None] - knots).min(axis=1) > 10 * h]  # not at a knot
    data = sim.test.data
    slope = (mice.predict_at(data, t + h) - mice.predict_at(data, t - h)) / (2 * h)
    deriv = mice.derivative(data, grid=t)
    assert_allclose(deriv, slope, rtol=1e-6, atol=1e-6 * np.abs(slope).max())
    # beyond the outer bin centres the curve is constant
    ends = np.array([mice.time_range_[0], mice.time_range_[1]])
    assert_allclose(mice.derivative(data, grid=ends), 0.0)
    assert_allclose(mice.predict_at(data, ends), mice.predict_at(data, knots[[0, -1]]))


def test_a_linear_subject_has_its_slope_everywhere():
    rng = np.random.default_rng(1)
    times = np.linspace(0, 1, 11)
    mice = MICEImputer(max_iter=3, random_state=0).fit(_lines(200, times, rng))
    line = [(times, 2.0 - 3.0 * times), (times[::2], 1.0 + 0.5 * times[::2])]
    deriv = mice.derivative(line)
    # fully observed: the curve is the line itself, knots and ends included
    assert_allclose(deriv[0], -3.0, rtol=1e-12)
    assert_allclose(mice.transform(line)[0], 2.0 - 3.0 * mice.grid_, atol=1e-12)
    # every other time observed: the Bayesian ridge fills the gaps close to
    # the line (not exactly: it shrinks), so the slope is close to 0.5
    assert_allclose(deriv[1], 0.5, rtol=1e-2)


def test_derivative_at_a_knot_is_the_right_slope_and_the_last_knot_the_left():
    times = np.linspace(0, 1, 5)
    rng = np.random.default_rng(2)
    mice = MICEImputer(max_iter=2, random_state=0).fit(_lines(50, times, rng))
    kink = [(times, np.abs(times - 0.5))]  # slopes -1, -1, +1, +1
    assert_allclose(mice.derivative(kink, grid=times)[0], [-1, -1, 1, 1, 1])


def test_mean_is_the_mean_training_curve():
    sim = fi.simulate.sand_paper(n=100, n_obs="8-12", random_state=0)
    mice = MICEImputer(n_bins=21, max_iter=2, random_state=0).fit(sim.train.data)
    assert mice.mean_.shape == mice.grid_.shape
    assert_allclose(mice.mean_, mice.transform(sim.train.data).mean(axis=0))


def _times_a_unit_apart(seed=0):
    """Half the subjects at times one unit in the last place above the others'."""
    rng = np.random.default_rng(seed)
    base = np.unique(np.round(rng.uniform(0, 1, 40), 2))
    times, values = [], []
    for i in range(30):
        t = np.sort(rng.choice(base, 4, replace=False))
        times.append(np.nextafter(t, 2.0) if i % 2 else t)
        values.append(rng.normal(size=4))
    return IrregularData.from_lists(times, values)


def test_times_a_unit_apart_share_a_bin():
    # distinct times so close that both fall in one bin used to leave an
    # empty column, which the chained equations dropped (IndexError)
    data = _times_a_unit_apart()
    assert np.unique(data.times).size > 50
    est = MICEImputer(random_state=0).fit(data)
    assert est.bin_centres_.size < np.unique(data.times).size
    own = np.searchsorted(est.bin_edges_, data.times, "right") - 1
    assert np.bincount(own, minlength=est.bin_centres_.size).min() > 0
    curves = est.transform(data)
    assert curves.shape == (30, 101) and np.isfinite(curves).all()
    gain = fi.GAINImputer(max_iter=5, random_state=0).fit(data)
    assert np.isfinite(gain.transform(data)).all()


def test_a_unit_in_the_last_place_does_not_move_the_fit():
    # times read one unit off (as CSV parsing can) must not change the bins,
    # or the chained equations change wholesale
    rng = np.random.default_rng(1)
    base = np.unique(np.round(rng.uniform(0, 1, 25), 2))
    times = [np.sort(rng.choice(base, 4, replace=False)) for _ in range(40)]
    values = [np.sin(6 * t) + rng.normal(0, 0.2, 4) for t in times]
    nudged = [np.nextafter(t, 2.0) if i % 3 == 0 else t for i, t in enumerate(times)]
    exact = IrregularData.from_lists(times, values)
    off = IrregularData.from_lists(nudged, values)
    a = MICEImputer(random_state=0).fit(exact)
    b = MICEImputer(random_state=0).fit(off)
    assert_allclose(b.bin_centres_, a.bin_centres_, rtol=0, atol=1e-12)
    assert_allclose(b.transform(off), a.transform(exact), rtol=0, atol=1e-6)
