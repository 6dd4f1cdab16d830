"""Covariate-adjusted means in MultivariatePACEImputer: known answers, errors, files."""

import copy
import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fdaimpute as fi
from fdaimpute._fpca.covariates import (
    MIN_HOLDERS,
    CovariateDesign,
    choose_varying,
    coefficient_bandwidths,
    covariate_support,
    effect_curves,
    effective_subjects,
    hold_constant,
    varying_coefficients,
)
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


def test_a_constant_effect_beside_a_varying_one_is_recovered_exactly():
    # a linear mean and a linear-in-time effect are reproduced exactly by
    # the local-linear part; the constant effect by the profile step
    rng = np.random.default_rng(0)
    subject = np.repeat(np.arange(60), 5)
    t = rng.uniform(0, 10, subject.size)
    age = rng.normal(size=60)[subject]
    group = (rng.random(60) < 0.4)[subject].astype(float)
    z = np.column_stack([age, group])
    y = 1 + 0.3 * t + age * (0.5 + 0.1 * t) + 2.0 * group
    grid = np.linspace(0, 10, 31)
    coef = varying_coefficients(
        t, y, z, grid, 1.5, "epanechnikov", np.array([True, False])
    )
    truth = np.stack([1 + 0.3 * grid, 0.5 + 0.1 * grid, np.full(grid.size, 2.0)])
    assert_allclose(coef, truth, atol=1e-6)
    every = varying_coefficients(t, y, z, grid, 1.5, "epanechnikov")
    assert_array_equal(
        every,
        varying_coefficients(t, y, z, grid, 1.5, "epanechnikov", np.ones(2, bool)),
    )


def _effects_world(seed, holders=None, n=150):
    """An effect of ``x`` that changes sign over time, and one of a level
    ``g`` that is constant (or, held by ``holders`` subjects, grows)."""
    rng = np.random.default_rng(seed)
    subject = np.repeat(np.arange(n), rng.integers(2, 6, n))
    t = rng.uniform(0, 1, subject.size)
    x = rng.normal(size=n)
    if holders is None:
        g = (rng.random(n) < 0.4).astype(float)
    else:
        g = (np.arange(n) < holders).astype(float)
    z = np.column_stack([x[subject], g[subject]])
    level = 1.0 if holders is None else 2.0 * t
    own = rng.normal(0, 0.5, n)[subject]
    y = np.sin(2 * t) + z[:, 0] * 1.5 * np.cos(np.pi * t) + z[:, 1] * level
    return t, y + own + rng.normal(0, 0.3, t.size), z, subject


def test_held_out_subjects_choose_which_effects_vary():
    grid = np.linspace(0, 1, 21)
    groups = [np.array([0]), np.array([1])]
    chosen = []
    for seed in range(8):
        t, y, z, subject = _effects_world(seed)
        chosen.append(
            choose_varying(t, y, z, subject, grid, 0.15, "epanechnikov", groups)
        )
    chosen = np.array(chosen)
    # the effect that changes sign is always let vary; the constant one is
    # held constant at least as often as a varying fit of the noise wins
    assert chosen[:, 0].all()
    assert (~chosen[:, 1]).sum() >= 4
    # a level held by a few subjects never varies, though its effect does
    for seed in range(3):
        t, y, z, subject = _effects_world(seed, holders=MIN_HOLDERS - 1)
        found = choose_varying(t, y, z, subject, grid, 0.15, "epanechnikov", groups)
        assert_array_equal(found, [True, False])
    # one subject: none can be held out, and no effect is let vary
    one = subject == 0
    found = choose_varying(
        t[one], y[one], z[one], subject[one], grid, 0.15, "epanechnikov", groups[:1]
    )
    assert_array_equal(found, [False, False])


def test_effective_subjects_weigh_each_subject_by_its_kernel_mass():
    # at the observations' time every kernel weight is K(0): subjects with
    # 1, 1 and 2 observations weigh (1 + 1 + 2)^2 / (1 + 1 + 4)
    times = np.zeros(4)
    found = effective_subjects(
        times, np.array([7, 3, 5, 5]), np.zeros(1), np.ones(1), "gaussian"
    )
    assert_allclose(found, [16 / 6])


def test_coefficients_widen_only_where_few_subjects_are_seen():
    # 60 subjects of 4 visits, fewer and fewer late (Beta(1, 4) times), and
    # an effect beta(t) = t of a subject-level z
    worst_fixed, worst_widened = [], []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        subject = np.repeat(np.arange(60), 4)
        t = rng.beta(1, 4, subject.size)
        z = rng.normal(size=(60, 1))[subject]
        own = 0.3 * rng.normal(size=60)[subject]
        y = np.sin(3 * t) + z[:, 0] * t + own + 0.1 * rng.normal(size=t.size)
        grid = np.linspace(0, t.max(), 21)
        fixed = varying_coefficients(t, y, z, grid, 0.05, "gaussian")
        widths = coefficient_bandwidths(t, subject, grid, 0.05, "gaussian", 2)
        widened = varying_coefficients(t, y, z, grid, widths, "gaussian")
        # where the subjects are many, the same fit
        assert_allclose(widened[:, :3], fixed[:, :3])
        worst_fixed.append(np.abs(fixed[1] - grid).max())
        worst_widened.append(np.abs(widened[1] - grid).max())
    # late, the fixed bandwidth fits the slope to two or three subjects
    assert max(worst_fixed) > 2.0
    assert max(worst_widened) < 0.5


def test_support_is_the_range_seen_near_a_time_and_levels_held_by_three():
    # subjects 0..9 observed twice around t = 0 (ages 30..75), subjects
    # 10..13 once around t = 1 (ages 40..43); a level held by subjects
    # 0, 1 and 2 (early) and by subject 12 alone (late)
    age = np.concatenate([np.repeat(30.0 + 5 * np.arange(10), 2), 40.0 + np.arange(4)])
    times = np.concatenate([np.tile([0.0, 0.05], 10), [0.95, 1.0, 1.0, 0.98]])
    subject = np.concatenate([np.repeat(np.arange(10), 2), 10 + np.arange(4)])
    level = np.isin(subject, [0, 1, 2, 12]).astype(float)
    design = np.column_stack([age, level])
    support = covariate_support(times, design, subject, np.array([0.0, 1.0]), 0.1)
    # near 0: the ages seen there; three subjects hold the level
    assert_allclose(support[:, :, 0], [[30.0, 0.0], [75.0, 1.0]])
    # near 1: one subject holding the level is not support for it
    assert_allclose(support[:, :, 1], [[40.0, 0.0], [43.0, 0.0]])
    # a constant effect's column is held inside all subjects' range at
    # every time (the level: four hold it, so three do); the other stays
    held = hold_constant(support, design, subject, np.array([True, False]))
    assert_allclose(held[:, 0], support[:, 0])
    assert_allclose(held[:, 1], [[0.0, 0.0], [1.0, 1.0]])
    held = hold_constant(support, design, subject, np.array([False, True]))
    assert_allclose(held[:, 0], [[30.0, 30.0], [75.0, 75.0]])


def test_effects_hold_a_subject_inside_the_support_with_consistent_slopes():
    grid = np.linspace(0.0, 1.0, 11)
    beta = np.stack([np.sin(grid), 1.0 + grid, np.cos(3 * grid)])
    low = np.stack([-1.0 + 0.5 * grid, np.zeros(11)])
    high = np.stack([1.0 - grid**2, np.ones(11)])
    support = np.stack([low, high])
    design = np.array([[1.0, 3.0, 1.0], [1.0, -0.3, 0.0], [1.0, -4.0, 1.0]])
    times = np.linspace(0.03, 0.97, 23)
    out = effect_curves(beta, support, grid, design, times)
    # the first subject's value is held at the upper bound throughout, the
    # second's is inside; the bounds are smooth between grid points
    coef = np.stack([np.sin(times), 1.0 + times, np.cos(3 * times)])
    bound_hi = 1.0 - times**2
    assert_allclose(out[0], coef[0] + bound_hi * coef[1] + coef[2], atol=1e-3)
    assert_allclose(out[1], coef[0] - 0.3 * coef[1], atol=1e-3)
    slope = effect_curves(beta, support, grid, design, times, derivative=True)
    eps = 1e-6
    numeric = (
        effect_curves(beta, support, grid, design, times + eps)
        - effect_curves(beta, support, grid, design, times - eps)
    ) / (2 * eps)
    assert_allclose(slope, numeric, atol=1e-5)


def test_an_effect_is_not_carried_to_covariates_unseen_at_a_time():
    # a small study whose patients over 55 are seen early only; the effect
    # of age grows with time up to 55 and no further (the old are sicker
    # from the start, not ever faster). The young show a linear effect, and
    # carried to a 70-year-old late it would double the truth there
    rng = np.random.default_rng(3)
    n = 40
    age = rng.uniform(30, 75, n)
    own = rng.normal(0, 0.3, n)

    def truth(a, t):
        return 1.0 + (np.minimum(a, 55.0) - 50) * 0.08 * t

    rows = []
    for i in range(n):
        last = 0.35 if age[i] > 55 else 1.0
        t = np.sort(rng.uniform(0, last, rng.integers(3, 7)))
        t[0] = 0.0
        y = truth(age[i], t) + own[i] + rng.normal(0, 0.2, t.size)
        rows += [(i, s, "x", v, age[i]) for s, v in zip(t, y)]
    frame = pd.DataFrame(rows, columns=["id", "time", "variable", "value", "age"])
    data = MultivariateIrregularData.from_long(frame, covariates=["age"])
    imp = MultivariatePACEImputer(random_state=0, covariates=["age"]).fit(data)
    old = np.flatnonzero(data.covariates["age"] > 70)
    late = np.linspace(0.75, 0.95, 5)
    curves = np.asarray(imp.transform(data.take(old), grid=late))
    expected = truth(age[old][:, None], late) + own[old][:, None]
    # the linear effect carried to them was 2.6 off the truth (its
    # curves left the data's widened range); their own deviations, read
    # from a few early visits, leave errors of a few tenths
    assert np.abs(curves - expected).max() < 1.0
    # the support's upper age late is that of the oldest followed so long
    support = imp.covariate_support_[0]
    centre = imp.covariate_encoding_["age"]["centre"]
    assert_allclose(support[1, 0, -1] + centre, age[age <= 55].max(), atol=1e-9)


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
        # the effects vary in time, and held-out subjects say so
        assert imp.covariate_varying_[j].all()


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
    # a subject held at a bound of the covariates' support follows the
    # bound, a C1 cubic whose second derivative jumps at grid points: the
    # central difference's error there is eps times that jump
    eps = 1e-7
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


def test_a_model_saved_before_the_support_was_kept_holds_nothing(driven):
    sim, imp = driven
    older = copy.deepcopy(imp)
    del older.covariate_support_
    test = sim.test.data
    design = imp._design(test)[:, 1:]
    # the subjects inside every variable's support at every time are
    # imputed alike; the others are not held by the older model
    inside = np.ones(len(test), dtype=bool)
    for support in imp.covariate_support_:
        low, high = support[0].max(axis=1), support[1].min(axis=1)
        inside &= np.all((design >= low) & (design <= high), axis=1)
    assert 0 < inside.sum() < len(test)
    a, b = imp.transform(test), older.transform(test)
    assert_allclose(a[inside], b[inside])
    assert not np.allclose(a[~inside], b[~inside])


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
        "site": np.array(list("xyyzyxzyxz"), dtype=object),
        "dose": np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
    }
    design = CovariateDesign.learn(covariates, ["site", "dose"])
    assert design.columns == ["site=x", "site=z", "dose"]
    z = design.matrix(covariates)
    assert z[:, :2].tolist() == [
        [1, 0],
        [0, 0],
        [0, 0],
        [0, 1],
        [0, 0],
        [1, 0],
        [0, 1],
        [0, 0],
        [1, 0],
        [0, 1],
    ]
    assert_allclose(z[:, 2], covariates["dose"] - 5.5)
    text = {"site": covariates["site"], "dose": np.array(["1"] * 9 + ["n/a"])}
    with pytest.raises(ValueError, match="subject 9.*'dose' was numeric.*'n/a'"):
        design.matrix(text)


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
    with pytest.raises(ValueError, match=r"from_columns\(df, \['y'\]"):
        MultivariatePACEImputer(covariates=NAMES).fit(
            part.rename(columns={"value": "y"})
        )


def _small_driven(n=120, seed=0):
    """A small simulated covariate-driven data set (age and a three-level group)."""
    sim = fi.simulate.multivariate_gaussian(n=n, covariates=True, random_state=seed)
    return sim.train.data


def _imputer():
    return MultivariatePACEImputer(random_state=0, covariates=NAMES, pace_params=FAST)


def test_a_covariates_units_change_nothing():
    data = _small_driven()
    curves = []
    for scale in (1.0, 365.25, 1e9, 1e-9):
        ages = data.covariates["age"] * scale
        scaled = _with_covariates(
            data, {"age": ages, "group": data.covariates["group"]}
        )
        imp = _imputer()
        curves.append(imp.fit(scaled).transform(scaled))
    for other in curves[1:]:
        assert_allclose(other, curves[0], rtol=0, atol=1e-8)


def test_collinear_or_constant_covariates_are_refused_by_column():
    data = _small_driven()
    group = data.covariates["group"]
    ages = data.covariates["age"]
    doubled = {"age": ages, "group": group, "age_months": 12 * ages + 3}
    with pytest.raises(ValueError, match="'age_months' is a linear combination of"):
        CovariateDesign.learn(doubled, ["age", "group", "age_months"])
    coded = (group == group[0]).astype(float)
    level = {"group": group, "coded": coded}
    with pytest.raises(ValueError, match="'coded' is a linear combination of"):
        CovariateDesign.learn(level, ["group", "coded"])
    with pytest.raises(ValueError, match="'flat' is constant over the training"):
        CovariateDesign.learn({"flat": np.full(ages.size, 2.5)}, ["flat"])
    with pytest.raises(ValueError, match="'site' is 'a' for every training subject"):
        CovariateDesign.learn({"site": np.full(ages.size, "a")}, ["site"])
    refused = _with_covariates(data, doubled)
    with pytest.raises(ValueError, match="cannot be told apart"):
        MultivariatePACEImputer(
            covariates=["age", "group", "age_months"], pace_params=FAST
        ).fit(refused)


def test_a_level_held_by_too_few_subjects_counts_as_the_reference():
    data = _small_driven()
    group = data.covariates["group"].astype(object)
    reference = CovariateDesign.learn(data.covariates, ["group"]).encoding["group"]
    rare = group.copy()
    rare[[4, 9]] = "rare"  # two subjects: below SUPPORT_SUBJECTS
    as_reference = group.copy()
    as_reference[[4, 9]] = reference["reference"]
    ages = data.covariates["age"]
    pooled = r"'group': 1 level\(s\) \('rare'\).*reference"
    with pytest.warns(UserWarning, match=pooled):
        design = CovariateDesign.learn({"group": rare}, ["group"])
    assert "group=rare" not in design.columns
    assert_array_equal(
        design.matrix({"group": rare}),
        CovariateDesign.learn({"group": as_reference}, ["group"]).matrix(
            {"group": as_reference}
        ),
    )
    fits = []
    for levels in (rare, as_reference):
        part = _with_covariates(data, {"age": ages, "group": levels})
        imp = _imputer()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            fits.append(imp.fit(part).transform(part))
    assert_array_equal(fits[0], fits[1])


def test_many_single_subject_levels_say_the_covariate_may_be_numbers():
    ages = np.arange(30.0).astype(str)
    with pytest.warns(UserWarning, match="30 levels among 30 subjects.*to_numeric"):
        design = CovariateDesign.learn({"age": ages}, ["age"])
    assert design.columns == []


def test_infinite_covariates_are_refused_by_subject():
    data = _small_driven()
    ages = data.covariates["age"].astype(float).copy()
    ages[5] = np.inf
    bad = _with_covariates(data, {"age": ages, "group": data.covariates["group"]})
    who = f"subject {data.ids[5].item()!r}"
    imp = MultivariatePACEImputer(random_state=0, covariates=NAMES, pace_params=FAST)
    with pytest.raises(ValueError, match=rf"{who}.*'age' is inf"):
        imp.fit(bad)
    imp.fit(data)
    with pytest.raises(ValueError, match=rf"{who}.*'age' is inf"):
        imp.transform(bad)
