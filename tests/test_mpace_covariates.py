"""Covariate-adjusted means in MultivariatePACEImputer: known answers, errors, files."""

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

import fdaimpute as fi
from fdaimpute._fpca.covariates import CovariateDesign, varying_coefficients
from fdaimpute.mpace import MultivariatePACEImputer
from fdaimpute.multivariate import MultivariateIrregularData

FAST = {"n_work_grid": 31}
NAMES = ["age", "group"]


def _mse(a, b):
    return float(np.mean((a - b) ** 2))


def _with_covariates(data, covariates):
    return MultivariateIrregularData(
        data.times,
        data.values,
        data.variable,
        data.offsets,
        data.variables,
        data.ids,
        covariates,
    )


@pytest.fixture(scope="module")
def driven():
    sim = fi.simulate.multivariate_gaussian(
        n=500, split=(0.8, 0.0, 0.2), covariates=True, random_state=0
    )
    imp = MultivariatePACEImputer(random_state=0, covariates=NAMES, pace_params=FAST)
    return sim, imp.fit(sim.train.data)


def test_varying_coefficients_recover_a_linear_in_z_mean():
    rng = np.random.default_rng(0)
    n_obs = 4000
    t = rng.uniform(0, 1, n_obs)
    z = np.column_stack([rng.normal(size=n_obs), rng.integers(0, 2, n_obs)])
    mu0, b1, b2 = np.sin(2 * t), 1 + t**2, -np.cos(3 * t)
    y = mu0 + z[:, 0] * b1 + z[:, 1] * b2 + 0.05 * rng.normal(size=n_obs)
    grid = np.linspace(0.05, 0.95, 19)
    coef = varying_coefficients(t, y, z, grid, 0.08, "epanechnikov")
    truth = np.stack([np.sin(2 * grid), 1 + grid**2, -np.cos(3 * grid)])
    assert np.abs(coef - truth).max() < 0.03


def test_the_simulated_effects_are_recovered(driven):
    sim, imp = driven
    assert imp.covariate_columns_ == ["age", "group=b", "group=c"]
    assert imp.covariate_encoding_["group"]["reference"] == "a"
    # mean_ is the curve of a subject at the covariates' reference
    at_reference = {"age": np.array([imp.covariate_encoding_["age"]["centre"]])}
    at_reference["group"] = np.array(["a"])
    one = sim.train.data[:1]
    one = _with_covariates(one, at_reference)
    lo = imp._covariate_curves(imp._design(one), imp.grid_)[0]
    assert np.allclose(imp._model.grid_mean(imp.grid_) + lo, imp.mean_)
    scales = [1.0, 4.0, 0.25]
    for j, scale in enumerate(scales):
        grid = imp.work_grids_[j]
        truth = scale * np.stack(
            [0.08 * np.cos(np.pi * grid), 0.8 * grid, -0.8 * np.sin(np.pi * grid)]
        )
        est = imp.covariate_effects_[j][1:]
        relative = np.sqrt(np.mean((est - truth) ** 2, axis=1)) / np.sqrt(
            np.mean(truth**2, axis=1)
        )
        # age is numeric, spread over everyone; the groups hold 30% and 20%
        assert np.all(relative < [0.15, 0.5, 0.5]), (j, relative)


def test_covariates_lower_the_error_where_they_drive_the_mean(driven):
    sim, imp = driven
    test, truth = sim.test.data, sim.test.truth
    plain = MultivariatePACEImputer(random_state=0, pace_params=FAST)
    plain.fit(sim.train.data)
    with_z = imp.transform_3d(test, grid=sim.grid)
    without = plain.transform_3d(test, grid=sim.grid)
    for j in range(3):
        assert _mse(with_z[:, j], truth[:, j]) < 0.9 * _mse(without[:, j], truth[:, j])
    # the covariate-aware oracle is the floor
    oracle = fi.oracle.MultivariateConditionalMean(sim.process, grid=sim.grid)
    best = oracle.transform(test).reshape(truth.shape)
    assert _mse(best, truth) < _mse(with_z, truth)


def test_covariates_without_effect_leave_the_curves_within_smoothing_error():
    sim = fi.simulate.multivariate_gaussian(
        n=300, split=(0.8, 0.0, 0.2), random_state=1
    )
    rng = np.random.default_rng(0)

    def attach(data):
        n = len(data)
        return _with_covariates(
            data,
            {"age": rng.normal(50, 10, n), "group": rng.choice(["a", "b"], n)},
        )

    train, test = attach(sim.train.data), attach(sim.test.data)
    plain = MultivariatePACEImputer(random_state=0, pace_params=FAST).fit(train)
    adjusted = MultivariatePACEImputer(
        random_state=0, pace_params=FAST, covariates=NAMES
    ).fit(train)
    a = plain.transform_3d(test, grid=sim.grid)
    b = adjusted.transform_3d(test, grid=sim.grid)
    for j in range(3):
        error = _mse(a[:, j], sim.test.truth[:, j])
        assert _mse(a[:, j], b[:, j]) < 0.3 * error
        assert _mse(b[:, j], sim.test.truth[:, j]) < 1.25 * error


def test_derivative_and_predict_at_carry_the_covariate_effect(driven):
    sim, imp = driven
    test = sim.test.data[:20]
    grid = np.linspace(0.1, 0.9, 9)
    eps = 1e-5
    numeric = (
        imp.transform(test, grid=grid + eps) - imp.transform(test, grid=grid - eps)
    ) / (2 * eps)
    assert np.allclose(imp.derivative(test, grid=grid), numeric, atol=1e-3)
    flat = imp.predict_at(test)
    curves = imp.transform_3d(test, grid=sim.grid)
    col = np.rint(test.times * 100).astype(int)
    on_grid = curves[test.subject_index, test.variable, col]
    assert np.abs(flat.values - on_grid).max() < 1e-8
    assert flat.covariates.keys() == test.covariates.keys()


def test_save_load_round_trip_with_covariates(driven, tmp_path):
    sim, imp = driven
    path = tmp_path / "mpace-z.fdaimpute"
    imp.save(path)
    back = MultivariatePACEImputer.load(path)
    a, sa = imp.transform(sim.test.data, return_std=True)
    b, sb = back.transform(sim.test.data, return_std=True)
    assert np.array_equal(a, b) and np.array_equal(sa, sb)
    assert back.covariate_columns_ == imp.covariate_columns_


def test_new_subjects_need_their_covariates(driven):
    sim, imp = driven
    test = sim.test.data
    bare = _with_covariates(test, {"age": test.covariates["age"]})
    with pytest.raises(ValueError, match="covariate 'group' is needed"):
        imp.transform(bare)
    level = test.covariates["group"].astype(object).copy()
    level[3] = "z"
    odd = _with_covariates(test, {"age": test.covariates["age"], "group": level})
    who = f"subject {test.ids[3].item()!r}"
    with pytest.raises(ValueError, match=rf"{who}.*level 'z', not seen"):
        imp.transform(odd)
    ages = test.covariates["age"].astype(object)
    ages[0] = None
    gap = _with_covariates(test, {"age": ages, "group": test.covariates["group"]})
    with pytest.raises(ValueError, match="covariate 'age' is missing"):
        imp.predict_at(gap)


def test_training_data_without_the_named_covariate_is_refused():
    sim = fi.simulate.multivariate_gaussian(n=60, random_state=0)
    imp = MultivariatePACEImputer(covariates=["sex"], pace_params=FAST)
    with pytest.raises(ValueError, match="covariate 'sex' is needed"):
        imp.fit(sim.train.data)
    with pytest.raises(ValueError, match="distinct column names"):
        MultivariatePACEImputer(covariates=["a", "a"]).fit(sim.train.data)


def test_covariate_not_constant_within_a_subject_is_refused_by_name():
    frame = pd.DataFrame(
        {
            "id": ["p1", "p1", "p2", "p2"],
            "time": [0.0, 1.0, 0.0, 1.0],
            "bili": [1.0, 2.0, 1.5, np.nan],
            "alb": [3.0, np.nan, 3.2, 3.1],
            "trt": ["a", "a", "a", "b"],
        }
    )
    with pytest.raises(ValueError, match=r"'p2'.*covariate 'trt' is not constant"):
        MultivariateIrregularData.from_columns(
            frame, ["bili", "alb"], covariates=["trt"]
        )


def test_categorical_coding_uses_the_most_frequent_level_as_reference():
    covariates = {
        "site": np.array(["x", "y", "y", "z", "y"], dtype=object),
        "dose": np.array([1, 2, 3, 4, 5]),
    }
    design = CovariateDesign.learn(covariates, ["site", "dose"])
    assert design.columns == ["site=x", "site=z", "dose"]
    z = design.matrix(covariates)
    assert z.tolist() == [
        [1, 0, -2],
        [0, 0, -1],
        [0, 0, 0],
        [0, 1, 1],
        [0, 0, 2],
    ]
    with pytest.raises(ValueError, match="'dose' was numeric"):
        design.matrix({"site": covariates["site"], "dose": np.array(["1"] * 5)})


def test_one_variable_with_covariates_is_covariate_adjusted_pace(driven):
    sim, _ = driven
    part, _ = sim.train.data.variable_data(1)
    one = MultivariateIrregularData.from_variables(
        {"x1": part}, covariates=sim.train.data.covariates
    )
    imp = MultivariatePACEImputer(random_state=0, covariates=NAMES, pace_params=FAST)
    imp.fit(one)
    assert imp.n_components_ == imp.univariate_[0].n_components_
    test_part, _ = sim.test.data.variable_data(1)
    test = MultivariateIrregularData.from_variables(
        {"x1": test_part}, covariates=sim.test.data.covariates
    )
    curves = imp.transform(test, grid=sim.grid)
    plain = fi.PACEImputer(random_state=0, **FAST).fit(part)
    plain = plain.transform(test_part, grid=sim.grid)
    assert _mse(curves, sim.test.truth[:, 1]) < _mse(plain, sim.test.truth[:, 1])


def test_covariates_are_read_from_a_long_frames_columns(driven):
    sim, _ = driven
    data = sim.train.data
    frame = data.to_long()  # with a column per covariate
    assert {"age", "group"} <= set(frame.columns)
    imp = MultivariatePACEImputer(random_state=0, covariates=NAMES, pace_params=FAST)
    from_frame = imp.fit(frame).transform(frame)
    expected = imp.fit(data).transform(data)
    assert_allclose(from_frame, expected, rtol=0, atol=1e-12)
    # one variable in a frame without a variable column: the frame's value column
    part = frame[frame["variable"] == data.variables[1]].drop(columns="variable")
    one = imp.fit(part)
    assert one.variables_ == ["value"]
    assert one.covariate_columns_ == ["age", "group=b", "group=c"]
    read = MultivariateIrregularData.from_columns(part, ["value"], covariates=NAMES)
    assert_allclose(one.transform(part), imp.fit(read).transform(read), atol=1e-12)
    with pytest.raises(ValueError, match="'sex'.*not in the table"):
        MultivariatePACEImputer(covariates=["sex"]).fit(part)
    with pytest.raises(TypeError, match="id, time, value for one variable"):
        MultivariatePACEImputer(covariates=NAMES).fit(
            part.rename(columns={"value": "y"})
        )
