import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fdaimpute as fi
from fdaimpute import IrregularData
from fdaimpute.metrics import (
    held_out_error,
    mse,
    split_held_out,
    summarize,
    tv,
)


def test_mse_and_tv_known_values():
    truth = np.zeros((2, 4))
    pred = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 2.0, 0.0, 2.0]])
    assert mse(pred, truth) == pytest.approx((4 * 1 + 2 * 4) / 8)
    assert tv(pred, truth) == pytest.approx((0.0 + 2.0) / 2)
    assert mse(pred, truth, scale=1000) == pytest.approx(1500.0)
    # TV ignores a constant offset; MSE does not.
    assert tv(pred + 5, truth) == pytest.approx(tv(pred, truth))


def test_summarize_standard_errors():
    rng = np.random.default_rng(0)
    pred = rng.normal(size=(400, 11))
    out = summarize(pred, np.zeros_like(pred), scale=1)
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


def test_held_out_scorer_in_grid_search_prefers_the_right_bandwidth():
    from sklearn.model_selection import GridSearchCV

    sim = fi.simulate.sand_paper(n=300, n_obs=30, random_state=0)
    search = GridSearchCV(
        fi.KernelImputer(shrinkage=0.0, grid=sim.grid),
        {"bandwidth": [0.005, 0.03, 0.3]},
        scoring=fi.metrics.held_out_scorer(0.2),
        cv=3,
    ).fit(sim.train.data)
    assert search.best_params_["bandwidth"] == 0.03


def test_curve_scorer():
    sim = fi.simulate.sand_paper(n=100, n_obs="8-12", random_state=0)
    oracle = fi.oracle.ConditionalMean(sim.process)
    score = fi.metrics.curve_scorer(oracle, sim.test.data, sim.test.truth)
    assert_allclose(-score, mse(oracle.transform(sim.test.data), sim.test.truth))
