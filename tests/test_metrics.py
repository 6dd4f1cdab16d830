import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fdaimpute as fi
from fdaimpute import IrregularData
from fdaimpute.metrics import (
    held_out_error,
    mse,
    mse_per_subject,
    split_held_out,
    summarize,
    tv,
    tv_per_subject,
)
from fdaimpute.multivariate import MultivariateIrregularData


def test_mse_and_tv_known_values():
    truth = np.zeros((2, 4))
    pred = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 2.0, 0.0, 2.0]])
    assert mse(truth, pred) == pytest.approx((4 * 1 + 2 * 4) / 8)
    assert tv(truth, pred) == pytest.approx((0.0 + 2.0) / 2)
    assert mse(truth, pred, scale=1000) == pytest.approx(1500.0)
    # TV ignores a constant offset; MSE does not.
    assert tv(truth, pred + 5) == pytest.approx(tv(truth, pred))


@pytest.mark.parametrize(
    "metric", [mse, tv, summarize, mse_per_subject, tv_per_subject]
)
def test_metrics_take_y_true_then_y_pred_like_sklearn(metric):
    rng = np.random.default_rng(0)
    truth, pred = rng.normal(size=(2, 5, 7))
    by_name = metric(y_pred=pred, y_true=truth)
    positional = metric(truth, pred)
    if isinstance(by_name, dict):
        assert by_name == positional
    else:
        assert_array_equal(by_name, positional)
    with pytest.raises(ValueError, match="y_true and y_pred"):
        metric(y_true=truth, y_pred=pred[:, :3])


def test_summarize_standard_errors():
    rng = np.random.default_rng(0)
    pred = rng.normal(size=(400, 11))
    out = summarize(np.zeros_like(pred), pred, scale=1)
    per = np.mean(pred**2, axis=1)
    assert out["mse"] == pytest.approx(per.mean())
    assert out["mse_se"] == pytest.approx(per.std(ddof=1) / 20)


def test_metric_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape"):
        mse(np.zeros((2, 3)), np.zeros((3, 2)))


def test_split_held_out_partitions_each_subject():
    data = IrregularData.from_lists(
        [np.arange(10.0), np.arange(3.0), [0.0]], [np.arange(10.0), [1, 2, 3], [4]]
    )
    visible, hidden, rows = split_held_out(data, 0.3, random_state=1)
    assert_array_equal(visible.n_obs, [7, 2, 1])
    assert_array_equal(hidden.n_obs, [3, 1])
    assert_array_equal(rows, [0, 1])
    for r, (th, _) in zip(rows, hidden):
        tv_, _ = visible[r]
        t_all, _ = data[r]
        assert_array_equal(np.sort(np.concatenate([tv_, th])), t_all)
        assert not set(tv_) & set(th)


def test_split_held_out_splits_each_variable_of_a_subject_on_its_own():
    from fdaimpute.multivariate import MultivariateIrregularData

    # subject a: 10 points of x and 3 of y; b: 1 of x and 5 of y; c: 2 of y
    times = [*range(10), 0, 1, 2, 0, 0, 1, 2, 3, 4, 5, 6]
    variable = [0] * 10 + [1] * 3 + [0] + [1] * 5 + [1] * 2
    data = MultivariateIrregularData(
        np.asarray(times, dtype=float),
        np.arange(21.0),
        np.asarray(variable),
        [0, 13, 19, 21],
        ["x", "y"],
        ["a", "b", "c"],
        {"sex": np.array(["f", "m", "f"])},
    )
    visible, hidden, rows = split_held_out(data, 0.3, min_keep=2, random_state=0)
    # per variable: max(1, round(0.3 n)) hidden, two kept; b's single x and
    # c's two y points stay
    assert_array_equal(hidden.counts, [[3, 1], [0, 2]])
    assert_array_equal(visible.counts, [[7, 2], [1, 3], [0, 2]])
    assert_array_equal(rows, [0, 1])
    assert_array_equal(hidden.ids, ["a", "b"])
    assert_array_equal(hidden.covariates["sex"], ["f", "m"])
    assert_array_equal(visible.covariates["sex"], ["f", "m", "f"])
    # together the two halves are the data, each value once, at its own
    # time and variable
    for r, k in enumerate(rows):
        seen = visible.take([k])
        kept = set(zip(seen.variable, seen.times, seen.values))
        gone = set(
            zip(
                *(getattr(hidden.take([r]), a) for a in ("variable", "times", "values"))
            )
        )
        whole = data.take([k])
        assert kept | gone == set(zip(whole.variable, whole.times, whole.values))
        assert not kept & gone


def test_a_long_table_of_several_variables_splits_as_its_data_does():
    sim = fi.simulate.multivariate_gaussian(n=30, random_state=0)
    data = sim.train.data
    from_table = split_held_out(data.to_long(), 0.3, min_keep=2, random_state=4)
    from_data = split_held_out(data, 0.3, min_keep=2, random_state=4)
    assert from_table[0] == from_data[0] and from_table[1] == from_data[1]
    assert_array_equal(from_table[2], from_data[2])


def test_held_out_error_of_one_variable_as_several_is_relative_to_its_variance():
    data = fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0).train.data
    one = MultivariateIrregularData.from_variables({"y": data})
    kernel = fi.KernelImputer(bandwidth=0.1)
    alone = held_out_error(kernel, data, refit=True, random_state=3)
    several = held_out_error(kernel, one, refit=True, random_state=3)
    assert several == pytest.approx(alone / np.var(data.values), rel=1e-10)


@pytest.mark.parametrize("as_table", [False, True])
def test_held_out_error_of_several_variables_does_not_depend_on_their_units(as_table):
    data = fi.simulate.multivariate_gaussian(n=40, random_state=0).train.data
    scaled = data.take(np.arange(len(data)))
    scaled.values = np.where(data.variable == 1, 1000 * data.values, data.values)
    kernel = fi.KernelImputer(bandwidth=0.2)
    errors = [
        held_out_error(
            kernel,
            d.to_long() if as_table else d,
            refit=True,
            random_state=0,
            return_errors=True,
        )
        for d in (data, scaled)
    ]
    assert errors[0][0] == pytest.approx(errors[1][0], rel=1e-9)
    assert_allclose(errors[0][1], errors[1][1], rtol=1e-9)


def test_held_out_error_weighs_every_variable_alike():
    # a variable seen 8-12 times hides several times more values than one
    # seen 2-4 times; each variable's mean relative error counts once (as
    # multivariate PACE's choice of K weighs them), not each hidden value
    data = fi.simulate.multivariate_gaussian(n=40, random_state=1).train.data
    kernel = fi.KernelImputer(bandwidth=0.2)
    error, errors = held_out_error(
        kernel, data, refit=True, random_state=0, return_errors=True
    )
    _, hidden, _ = split_held_out(data, 0.2, random_state=0)
    counts = np.bincount(hidden.variable)
    assert counts.max() >= 2 * counts.min()
    per_variable = [errors[hidden.variable == j].mean() for j in range(len(counts))]
    assert error == pytest.approx(np.mean(per_variable), rel=1e-12)
    assert error != pytest.approx(np.mean(errors), rel=1e-3)


def test_held_out_scorer_tunes_an_imputer_of_several_variables():
    from sklearn.model_selection import GridSearchCV, KFold

    data = fi.simulate.multivariate_gaussian(n=60, random_state=0).train.data
    search = GridSearchCV(
        fi.KernelImputer(extrapolate="clip"),
        {"bandwidth": [0.001, 0.2]},
        scoring=fi.metrics.held_out_scorer(),
        cv=KFold(3, shuffle=True, random_state=0),
        error_score="raise",
    ).fit(data)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores))
    assert search.best_params_ == {"bandwidth": 0.2}


def test_held_out_error_of_the_oracle_is_noise_plus_posterior_variance():
    sim = fi.simulate.sand_paper(
        n=3000, n_obs=30, n_harmonics=3, scores="gauss", split=(0, 0, 1), random_state=0
    )
    oracle = fi.oracle.ConditionalMean(sim.process)
    err = held_out_error(oracle, sim.test.data, 0.2, random_state=0)
    visible, hidden, rows = split_held_out(sim.test.data, 0.2, random_state=0)
    _, sd = oracle.transform(visible[rows], return_std=True)
    col = np.rint(hidden.times * 100).astype(int)
    expected = sim.noise_sd**2 + np.mean(sd[hidden.subject_index, col] ** 2)
    assert err == pytest.approx(expected, rel=0.04)
    assert err > sim.noise_sd**2


def test_held_out_error_matches_an_error_computed_by_hand():
    sim = fi.simulate.sand_paper(n=100, n_obs="8-12", random_state=0)
    imp = fi.KernelImputer(grid=sim.grid).fit(sim.train.data)
    visible, hidden, rows = split_held_out(sim.test.data, random_state=3)
    times = np.split(hidden.times, hidden.offsets[1:-1])
    # Each subject at its own times through the common-times form.
    pred = np.concatenate(
        [imp.predict_at(visible[[r]], t)[0] for r, t in zip(rows, times)]
    )
    by_hand = np.mean((pred - hidden.values) ** 2)
    got = held_out_error(imp, sim.test.data, random_state=3)
    assert got == pytest.approx(by_hand, rel=1e-12)


def test_held_out_error_with_refit_fits_on_the_visible_points_of_the_same_subjects():
    sim = fi.simulate.sand_paper(n=100, n_obs="8-12", random_state=0)
    data = sim.train.data
    unfitted = fi.KernelImputer(grid=sim.grid)
    got, errors = held_out_error(
        unfitted, data, refit=True, min_keep=2, return_errors=True, random_state=3
    )
    visible, hidden, rows = split_held_out(data, min_keep=2, random_state=3)
    imp = fi.KernelImputer(grid=sim.grid).fit(visible)
    times = np.split(hidden.times, hidden.offsets[1:-1])
    pred = np.concatenate(imp.predict_at(visible[rows], times))
    assert_array_equal(errors, (pred - hidden.values) ** 2)
    assert got == errors.mean()
    assert not hasattr(unfitted, "grid_")  # the clone was fitted
    # fitted on every point instead, the hidden points were seen: lower error
    fitted = fi.KernelImputer(grid=sim.grid).fit(data)
    seen = held_out_error(fitted, data, min_keep=2, random_state=3)
    assert seen < got


@pytest.fixture(scope="module")
def dense_sim():
    return fi.simulate.sand_paper(n=150, n_obs=30, random_state=0)


@pytest.mark.parametrize(
    "scoring, with_truth",
    [
        (fi.metrics.held_out_scorer(), False),
        (fi.metrics.held_out_scorer(fraction=0.3, random_state=1), False),
        (fi.metrics.curve_scorer(), True),
        (fi.metrics.curve_scorer(scale=1000), True),
    ],
    ids=repr,
)
def test_scorers_in_grid_search_prefer_the_right_bandwidth(
    dense_sim, scoring, with_truth
):
    from sklearn.model_selection import GridSearchCV

    sim = dense_sim
    search = GridSearchCV(
        fi.KernelImputer(shrinkage=0.0, grid=sim.grid),
        {"bandwidth": [0.005, 0.03, 0.3]},
        scoring=scoring,
        cv=3,
    ).fit(sim.train.data, sim.train.truth if with_truth else None)
    # Too narrow chases the noise, too wide flattens the curves.
    assert search.best_params_ == {"bandwidth": 0.03}
    assert np.isfinite(search.best_score_) and search.best_score_ < 0


def test_curve_scorer_is_minus_mse_by_hand():
    sim = fi.simulate.sand_paper(n=100, n_obs="8-12", random_state=0)
    oracle = fi.oracle.ConditionalMean(sim.process)
    curves = oracle.transform(sim.test.data)
    by_hand = np.mean((curves - sim.test.truth) ** 2)
    score = fi.metrics.curve_scorer()(oracle, sim.test.data, sim.test.truth)
    assert score == pytest.approx(-by_hand, rel=1e-12)
    scaled = fi.metrics.curve_scorer(scale=1000)(oracle, sim.test.data, sim.test.truth)
    assert scaled == pytest.approx(-1000 * by_hand, rel=1e-12)
    with pytest.raises(ValueError, match="true curves"):
        fi.metrics.curve_scorer()(oracle, sim.test.data, None)


def test_curve_scorer_called_as_a_scorer_still_works_with_a_warning():
    sim = fi.simulate.sand_paper(n=100, n_obs="8-12", random_state=0)
    oracle = fi.oracle.ConditionalMean(sim.process)
    with pytest.warns(FutureWarning, match=r"curve_scorer\(\)"):
        score = fi.metrics.curve_scorer(oracle, sim.test.data, sim.test.truth)
    assert_allclose(-score, mse(sim.test.truth, oracle.transform(sim.test.data)))
    with pytest.raises(TypeError, match="scale"):
        fi.metrics.curve_scorer(1000)


def test_held_out_scorer_checks_fraction():
    with pytest.raises(ValueError, match="fraction"):
        fi.metrics.held_out_scorer(fraction=1.5)


def test_scorers_survive_pickling_for_parallel_searches():
    import pickle

    sim = fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0)
    imp = fi.KernelImputer(grid=sim.grid).fit(sim.train.data)
    for scorer, y in (
        (fi.metrics.held_out_scorer(fraction=0.3, random_state=2), None),
        (fi.metrics.curve_scorer(scale=1000), sim.test.truth),
    ):
        copy = pickle.loads(pickle.dumps(scorer))
        assert repr(copy) == repr(scorer)
        assert copy(imp, sim.test.data, y) == scorer(imp, sim.test.data, y)
