"""MultivariatePACEImputer: known answers, borrowing strength, output, persistence."""

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline

import fdaimpute as fi
from fdaimpute import PACEImputer
from fdaimpute.mpace import MultivariatePACEImputer
from fdaimpute.multivariate import MultivariateIrregularData


def _hide(data, j, rows):
    """``data`` with variable ``j`` removed from the subjects at ``rows``."""
    drop = (data.variable == j) & np.isin(data.subject_index, rows)
    counts = np.bincount(data.subject_index[~drop], minlength=len(data))
    return MultivariateIrregularData(
        data.times[~drop],
        data.values[~drop],
        data.variable[~drop],
        np.concatenate([[0], np.cumsum(counts)]),
        data.variables,
        data.ids,
    )


def _mse(a, b):
    return float(np.mean((a - b) ** 2))


@pytest.fixture(scope="module")
def shared():
    sim = fi.simulate.multivariate_gaussian(
        n=700, split=(0.8, 0.0, 0.2), random_state=0
    )
    imp = MultivariatePACEImputer(random_state=0, pace_params={"n_work_grid": 51})
    return sim, imp.fit(sim.train.data)


def test_one_variable_is_univariate_pace():
    sim = fi.simulate.sand_paper(n=200, n_obs="5-8", random_state=1)
    train, test = sim.train.data, sim.test.data
    uni = PACEImputer(random_state=0, n_work_grid=51).fit(train)
    multi = MultivariatePACEImputer(random_state=0, pace_params={"n_work_grid": 51})
    multi.fit(MultivariateIrregularData.from_variables({"y": train}))
    mtest = MultivariateIrregularData.from_variables({"y": test})
    assert multi.n_components_ == uni.n_components_
    curves, std = uni.transform(test, return_std=True)
    m_curves, m_std = multi.transform(mtest, return_std=True)
    assert np.abs(m_curves - curves).max() < 1e-10
    assert np.abs(m_std - std).max() < 1e-10
    assert np.abs(multi.derivative(mtest) - uni.derivative(test)).max() < 1e-9
    flat = multi.predict_at(mtest)
    assert np.abs(flat.values - uni.predict_at(test).values).max() < 1e-10


def _correlation(fit):
    """Root mean square of ``C_01`` over that of ``sqrt(C_00(s, s) C_11(t, t))``."""
    var = [np.diag(u.covariance_) for u in fit.univariate_[:2]]
    cross = fit.cross_covariances_[(0, 1)]
    return np.sqrt(np.mean(cross**2) / np.mean(np.outer(var[0], var[1])))


def test_independent_variables_have_no_cross_covariance_and_univariate_curves(
    shared,
):
    sim = fi.simulate.multivariate_gaussian(
        n=500,
        n_obs=["6-10", "6-10"],
        n_variables=2,
        coupling="independent",
        split=(0.8, 0.0, 0.2),
        random_state=2,
    )
    imp = MultivariatePACEImputer(random_state=0, pace_params={"n_work_grid": 51})
    imp.fit(sim.train.data)
    # true values 0 and 0.54; the sampling error with 400 subjects is ~0.05
    assert _correlation(imp) < 0.1
    assert _correlation(shared[1]) > 0.4
    test = sim.test.data
    curves = imp.transform_3d(test)
    for j in range(2):
        part, rows = test.variable_data(j)
        alone = imp.univariate_[j].transform(part)
        truth = sim.test.truth[rows, j]
        # the joint fit differs from the univariate one by the estimation
        # error of a zero cross-covariance and of K, not in accuracy
        assert _mse(curves[rows, j], alone) < 0.2 * _mse(alone, truth)
        assert _mse(curves[rows, j], truth) < 1.15 * _mse(alone, truth)


def test_sparse_variable_borrows_from_the_dense_ones(shared):
    sim, imp = shared
    test = sim.test.data
    oracle = fi.oracle.MultivariateConditionalMean(sim.process, grid=imp.grid_)
    g = imp.grid_.size
    truth = sim.test.truth[:, 0]
    multi = _mse(imp.transform(test)[:, :g], truth)
    best = _mse(oracle.transform(test)[:, :g], truth)
    part, rows = test.variable_data(0)
    assert rows.size == len(test)
    uni = _mse(imp.univariate_[0].transform(part), truth)
    assert multi < uni / 5
    assert multi < 2.5 * best


def test_never_observed_variable_is_imputed_from_the_others_with_a_wider_band(
    shared,
):
    sim, imp = shared
    test = sim.test.data
    rows = np.arange(0, len(test), 2)
    hidden = _hide(test, 0, rows)
    assert (hidden.counts[rows, 0] == 0).all()
    seen, seen_sd = imp.transform_3d(test, return_std=True)
    blind, blind_sd = imp.transform_3d(hidden, return_std=True)
    truth = sim.test.truth[rows, 0]
    assert (blind_sd[rows, 0].mean(axis=1) > seen_sd[rows, 0].mean(axis=1)).all()
    # still far better than the mean, which knows nothing of the subject
    mean = imp.mean_[: imp.grid_.size]
    assert _mse(blind[rows, 0], truth) < 0.3 * _mse(mean, truth)
    # subjects that kept the variable are unchanged
    kept = np.setdiff1d(np.arange(len(test)), rows)
    assert np.allclose(blind[kept], seen[kept])


def test_rows_follow_subjects_and_layout_is_variable_major(shared):
    sim, imp = shared
    test = sim.test.data
    order = np.arange(len(test))[::-1]
    curves = imp.transform(test)
    assert curves.shape == (len(test), 3 * imp.grid_.size)
    assert np.allclose(imp.transform(test[order]), curves[order])
    three = imp.transform_3d(test)
    assert np.array_equal(three, curves.reshape(len(test), 3, -1))
    frame = imp.set_output(transform="pandas").transform(test)
    imp.set_output(transform="default")
    assert frame.index.tolist() == test.ids.tolist()
    assert frame.columns.names == ["variable", "time"]
    assert np.array_equal(frame["x1"].to_numpy(), three[:, 1])
    names = imp.get_feature_names_out()
    assert names[imp.grid_.size] == "x1:t=0"
    # a long frame and a re-ordered variable list give the same answer
    long = test.to_long()
    assert np.allclose(imp.transform(long), curves)
    swapped = MultivariateIrregularData.from_long(long.iloc[::-1])
    assert swapped.variables.tolist() != ["x0", "x1", "x2"]
    assert np.allclose(imp.transform(swapped)[::-1], curves)
    with pytest.raises(ValueError, match="not seen in fit"):
        imp.transform(long.assign(variable=long["variable"].replace("x2", "bmi")))


def test_derivative_matches_finite_differences(shared):
    sim, imp = shared
    test = sim.test.data[:5]
    grid = np.linspace(0.1, 0.9, 9)
    eps = 1e-5
    slope = imp.derivative(test, grid=grid)
    numeric = (
        imp.transform(test, grid=grid + eps) - imp.transform(test, grid=grid - eps)
    ) / (2 * eps)
    assert np.allclose(slope, numeric, rtol=1e-4, atol=1e-4)


def test_save_load_round_trip(shared, tmp_path):
    sim, imp = shared
    path = tmp_path / "mpace.fdaimpute"
    imp.save(path)
    back = MultivariatePACEImputer.load(path)
    test = sim.test.data
    a, sa = imp.transform(test, return_std=True)
    b, sb = back.transform(test, return_std=True)
    assert np.array_equal(a, b) and np.array_equal(sa, sb)
    assert back.variables_ == imp.variables_


def test_pipeline_takes_the_variable_major_features(shared):
    sim, imp = shared
    y = sim.train.scores[:, 0]
    fixed = {"n_work_grid": 31, "bandwidth_cov": (0.5, 0.05), "n_components": 6}
    imputer = MultivariatePACEImputer(n_components=6, pace_params=fixed)
    model = make_pipeline(imputer, Ridge())
    model.fit(sim.train.data[:200], y[:200])
    assert model.predict(sim.test.data).shape == (len(sim.test.data),)


def test_bad_input_and_parameters_are_refused():
    sim = fi.simulate.multivariate_gaussian(n=60, random_state=0)
    with pytest.raises(TypeError, match="MultivariateIrregularData"):
        MultivariatePACEImputer().fit(sim.train.data.variable_data(0)[0])
    with pytest.raises(ValueError, match="pace_params cannot set"):
        MultivariatePACEImputer(pace_params={"grid": 5}).fit(sim.train.data)
    with pytest.raises(ValueError, match="fdapace_compat"):
        MultivariatePACEImputer(pace_params={"fdapace_compat": True}).fit(
            sim.train.data
        )
    one = pd.DataFrame(
        {"id": [0, 0, 1], "time": [0.1, 0.2, 0.3], "variable": "a", "value": 1.0}
    ).assign(value=[1.0, 2.0, 0.5])
    two = one.assign(variable="b", id=one["id"] + 2)
    disjoint = MultivariateIrregularData.from_long(
        pd.concat([one, two, one.assign(id=9, variable="a")])
    )
    with pytest.raises(ValueError):
        MultivariatePACEImputer().fit(disjoint)


def test_refinement_lowers_the_error_of_every_variable(shared):
    sim, imp = shared
    plain = MultivariatePACEImputer(
        random_state=0, refine_steps=0, pace_params={"n_work_grid": 51}
    ).fit(sim.train.data)
    assert plain.n_components_ == imp.n_components_
    truth = sim.test.truth
    refined = imp.transform_3d(sim.test.data)
    smoothed = plain.transform_3d(sim.test.data)
    for j in range(3):
        assert _mse(refined[:, j], truth[:, j]) < 0.95 * _mse(
            smoothed[:, j], truth[:, j]
        )
    # the refined noise variances approach the truth
    true = sim.process.noise_sd**2
    assert np.all(np.abs(imp.noise_variance_ / true - 1) < 0.25)


def test_keep_observed_puts_each_variables_values_back(shared):
    sim, imp = shared
    test = sim.test.data[:4]
    imp.set_params(keep_observed=True)
    try:
        curves, std = imp.transform_3d(test, return_std=True)
    finally:
        imp.set_params(keep_observed=False)
    col = np.searchsorted(imp.grid_, test.times)
    who, var = test.subject_index, test.variable
    assert np.array_equal(curves[who, var, col], test.values)
    assert (std[who, var, col] == 0).all()
    assert (std > 0).sum() == std.size - test.times.size


def test_component_choice_does_not_depend_on_the_seed():
    # 120 subjects, 2-4 and 3-6 points: the held-out draw used to pick
    # K = 14, 15, 18 and 8 at seeds 0-3 (the true rank is 6)
    sim = fi.simulate.multivariate_gaussian(
        n=120,
        n_variables=2,
        n_obs=["2-4", "3-6"],
        split=(1.0, 0.0, 0.0),
        random_state=3,
    )
    fits = [
        MultivariatePACEImputer(random_state=seed, pace_params={"n_work_grid": 51}).fit(
            sim.train.data
        )
        for seed in (0, 2)
    ]
    ks = {fit.n_components_ for fit in fits}
    assert len(ks) == 1
    cap = sum(u.n_components_ for u in fits[0].univariate_)
    assert 6 <= ks.pop() <= cap
    assert fits[0].cv_scores_.size == cap
    curves = [fit.transform(sim.train.data) for fit in fits]
    assert np.abs(curves[0] - curves[1]).max() < 1e-8


def test_refinement_is_kept_where_it_predicts_held_out_subjects_better(shared):
    sim, imp = shared
    # the shared-score process is where refinement pays (see the Notes)
    candidates = imp._knot_candidates()
    assert candidates[0] is None  # the means alone
    sizes = [c[0] for c in candidates[1:]]
    assert sizes == sorted(sizes) and len(set(map(tuple, candidates[1:]))) == len(sizes)
    assert imp.refine_scores_.shape == (1 + len(candidates),)
    best = int(np.argmin(imp.refine_scores_[1:]))
    assert imp.n_knots_ == candidates[best]
    assert imp.refined_ == (
        imp.refine_scores_[1 + best] <= 1.02 * imp.refine_scores_[0]
    )
    assert imp.refined_
    plain = MultivariatePACEImputer(
        random_state=0, refine_steps=0, pace_params={"n_work_grid": 51}
    ).fit(sim.train.data)
    assert not plain.refined_ and plain.refine_scores_ is None


def test_refined_mean_of_the_sparse_variable_borrows_from_the_dense_ones(shared):
    # the sparse variable's pooled mean is off by the average curve of the
    # few subjects seen near each time; the refined mean takes off what the
    # shared scores predict of each observation before smoothing
    sim, imp = shared
    grid = imp.grid_
    truth = sim.process.mean(0, grid)
    refined = _mse(imp._model.means[0](grid), truth)
    pooled = _mse(imp.univariate_[0]._model.mean(grid), truth)
    assert refined < 0.5 * pooled


def test_bands_are_calibrated_on_the_joint_models_held_out_points():
    # borrowed from each variable's univariate fit, the model-error terms
    # made these bands cover 0.994-0.998 of the true curves; calibrated on
    # subjects the refined model did not see they cover about 0.95
    sim = fi.simulate.multivariate_gaussian(
        n=3000, split=(2 / 3, 0.0, 1 / 3), random_state=0
    )
    imp = MultivariatePACEImputer(random_state=0, pace_params={"n_work_grid": 51}).fit(
        sim.train.data
    )
    curves, sd = imp.transform_3d(sim.test.data, return_std=True, grid=sim.grid)
    coverage = np.mean(np.abs(curves - sim.test.truth) <= 1.96 * sd, axis=(0, 2))
    assert np.all((coverage >= 0.93) & (coverage <= 0.985)), coverage
    assert imp._model.rest_weight == 0.0


class _ImplausibleAbove(MultivariatePACEImputer):
    """Reports an implausible training curve whenever K is above 10."""

    def _training_excursion(self, given):
        return 0.5 if self._model.eigenvalues.size > 10 else 0.0


def test_an_implausible_fit_falls_back_to_fewer_components():
    # K = 13 is chosen here, and 10 to 13 are within 10% of the best score
    sim = fi.simulate.multivariate_gaussian(n=120, random_state=3)
    params = {"random_state": 0, "pace_params": {"n_work_grid": 31}}
    chosen = MultivariatePACEImputer(**params).fit(sim.train.data)
    assert chosen.n_components_ == 13 and chosen.implausible_components_ == []
    relative = chosen.cv_scores_ / chosen.cv_scores_.min()
    assert relative[9] <= 1.1 < relative[8]
    fallen = _ImplausibleAbove(**params).fit(sim.train.data)
    assert fallen.n_components_ == 10
    assert fallen.implausible_components_ == [13, 12, 11]
    # the model kept is the fit with K = 10, bands included
    direct = MultivariatePACEImputer(n_components=10, **params).fit(sim.train.data)
    for a, b in zip(
        fallen.transform(sim.test.data, return_std=True),
        direct.transform(sim.test.data, return_std=True),
    ):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_excursion_of_several_variables_is_the_worst_share_of_a_range():
    from fdaimpute._core.plausible import excursion_variables

    # variable a in [0, 1] (allowed -0.5 to 1.5), b in [0, 10] (-5 to 15)
    data = MultivariateIrregularData.from_variables(
        {
            "a": fi.IrregularData.from_lists([[0.0, 1.0]] * 2, [[0.0, 1.0]] * 2),
            "b": fi.IrregularData.from_lists([[0.0, 1.0]] * 2, [[0.0, 10.0]] * 2),
        }
    )
    grid = np.linspace(0.0, 1.0, 5)
    curves = np.zeros((2, 10))
    ranges = [(0.0, 1.0), (0.0, 10.0)]
    assert excursion_variables(curves, data, grid, (0.0, 1.0), ranges) == 0.0
    curves[1, 7] = 16.0  # b, 1.0 past its bound: a tenth of its range
    curves[0, 2] = 1.55  # a, 0.05 past: 5% of its range
    found = excursion_variables(curves, data, grid, (0.0, 1.0), ranges)
    assert found == pytest.approx(0.1)
    assert excursion_variables(curves, data, grid, (0.0, 1.0), None) == 0.0
