"""KernelImputer and MICEImputer on several variables; the others refuse them.

VT and SAND on several variables: tests/test_neural_variables.py.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline

import fdaimpute as fi
from fdaimpute._core.validation import SEVERAL_VARIABLE_IMPUTERS
from fdaimpute.multivariate import MultivariateIrregularData, SeveralVariablesMixin

GRID = np.linspace(0.0, 1.0, 21)
FAST_MICE = dict(n_bins=12, max_iter=4, random_state=0)


def _kernel():
    return fi.KernelImputer(grid=GRID, n_bandwidths=6)


def _mice():
    return fi.MICEImputer(grid=GRID, **FAST_MICE)


def _univariate(seed, n=60):
    sim = fi.simulate.sand_paper(n=n, n_obs="8-12", random_state=seed)
    return sim.train.data


@pytest.fixture(scope="module")
def two_independent():
    """Two independent variables on the same subjects; "b" misses two subjects."""
    a, b = _univariate(0), _univariate(1)
    b = b.take(np.arange(2, len(b)))  # subjects 0 and 1 never measured on b
    return a, b, MultivariateIrregularData.from_variables({"a": a, "b": b})


@pytest.fixture(scope="module")
def shared():
    """Three variables sharing their scores (x0 sparse), train and test."""
    return fi.simulate.multivariate_gaussian(
        n=400, split=(0.7, 0.0, 0.3), random_state=0
    )


@pytest.mark.parametrize("make", [_kernel, _mice])
def test_one_variable_equals_the_univariate_fit(make):
    data = _univariate(2)
    one = MultivariateIrregularData.from_variables({"bmi": data})
    multi, uni = make().fit(one), make().fit(data)
    assert multi.variables_ == ["bmi"] and not hasattr(uni, "variables_")
    assert_array_equal(multi.transform(one), uni.transform(data))
    assert_array_equal(multi.derivative(one), uni.derivative(data))
    assert_array_equal(multi.predict_at(one).values, uni.predict_at(data).values)
    assert_array_equal(multi.mean_, uni.mean_)
    assert_array_equal(multi.transform_3d(one)[:, 0], uni.transform(data))


def test_kernel_smooths_each_variable_as_its_own_fit(two_independent):
    a, b, data = two_independent
    imp = _kernel().fit(data)
    curves, slopes = imp.transform_3d(data), imp.derivative(data)
    slopes = slopes.reshape(len(data), 2, GRID.size)
    for j, alone in enumerate((a, b)):
        uni = _kernel().fit(alone)
        rows = np.flatnonzero(np.isin(data.ids, alone.ids))
        assert_array_equal(curves[rows, j], uni.transform(alone))
        assert_array_equal(slopes[rows, j], uni.derivative(alone))
        assert imp.variable_imputers_[j].bandwidth_ == uni.bandwidth_
    # a subject never measured on b gets b's mean curve
    assert_array_equal(curves[:2, 1], np.tile(imp.variable_imputers_[1].mean_, (2, 1)))
    values = imp.predict_at(data)
    on_b = data.variable == 1
    assert_array_equal(values.values[on_b], _kernel().fit(b).predict_at(b).values)


def test_kernel_gives_each_variable_its_own_bands(two_independent):
    a, b, data = two_independent
    imp = _kernel().fit(data)
    curves, std = imp.transform(data, return_std=True)
    assert_array_equal(curves, imp.transform(data))
    std = std.reshape(len(data), 2, GRID.size)
    for j, alone in enumerate((a, b)):
        uni = _kernel().fit(alone)
        rows = np.flatnonzero(np.isin(data.ids, alone.ids))
        assert_array_equal(std[rows, j], uni.transform(alone, return_std=True)[1])
        assert imp.noise_variance_[j] == uni.noise_variance_
    # a subject never measured on b: b's band without data, wider than any
    # of a measured subject's
    assert np.all(std[:2, 1] > std[2:, 1].min(axis=0))
    # kept observations have no uncertainty
    kept = clone(imp).set_params(keep_observed=True).fit(data)
    _, kept_std = kept.transform(data, return_std=True)
    assert np.sum(kept_std == 0.0) > 0


def test_mice_fills_a_variable_from_the_others(shared):
    train, test, truth = shared.train.data, shared.test.data, shared.test.truth
    multi = _mice().set_params(grid=shared.grid).fit(train)
    curves = multi.transform_3d(test)
    sparse, rows = test.variable_data(0)  # 2-4 observations per subject
    uni = _mice().set_params(grid=shared.grid).fit(train.variable_data(0)[0])
    err_multi = np.mean((curves[rows, 0] - truth[rows, 0]) ** 2)
    err_uni = np.mean((uni.transform(sparse) - truth[rows, 0]) ** 2)
    assert err_multi < 0.7 * err_uni
    # the chain regresses bins of one variable on bins of the others
    n0 = multi.variable_bin_centres_[0].size
    own = multi.chain_bins_ < n0
    assert (multi.chain_predictors_[own] >= n0).any()


def test_mice_imputes_a_variable_never_observed_from_the_others(shared):
    train, test, truth = shared.train.data, shared.test.data, shared.test.truth
    imp = _mice().set_params(grid=shared.grid).fit(train)
    hidden = test.take(np.arange(len(test)))
    keep = hidden.variable != 0
    hidden = MultivariateIrregularData(
        hidden.times[keep],
        hidden.values[keep],
        hidden.variable[keep],
        np.concatenate([[0], np.cumsum(hidden.counts[:, 1:].sum(axis=1))]),
        hidden.variables,
        hidden.ids,
    )
    curves = imp.transform_3d(hidden)[:, 0]
    mean_only = np.mean((imp.mean_[: shared.grid.size] - truth[:, 0]) ** 2)
    assert np.mean((curves - truth[:, 0]) ** 2) < 0.5 * mean_only


@pytest.mark.parametrize("make", [_kernel, _mice])
def test_save_load_round_trip(make, two_independent, tmp_path):
    _, _, data = two_independent
    imp = make().fit(data)
    path = tmp_path / "model.fdai"
    imp.save(path)
    back = type(imp).load(path)
    assert back.variables_ == imp.variables_
    assert_array_equal(back.transform(data), imp.transform(data))
    assert_array_equal(back.derivative(data), imp.derivative(data))


@pytest.mark.parametrize("make", [_kernel, _mice])
def test_estimator_contract_on_several_variables(make, two_independent):
    _, _, data = two_independent
    imp = make()
    with pytest.raises(NotFittedError):
        imp.transform(data)
    assert imp.fit(data) is imp
    first = imp.transform(data)
    assert first.shape == (len(data), 2 * GRID.size)
    assert_array_equal(clone(imp).fit(data).transform(data), first)  # idempotent
    names = imp.get_feature_names_out()
    assert names[0] == "a:t=0" and names[GRID.size] == "b:t=0"
    # the long frame with a variable column reads the same
    assert_array_equal(make().fit(data.to_long()).transform(data), first)
    # variables in another order are matched by name
    swapped = MultivariateIrregularData.from_long(data.to_long().iloc[::-1])
    assert swapped.variables.tolist() == ["b", "a"]
    order = [swapped.ids.tolist().index(i) for i in data.ids]
    assert_allclose(imp.transform(swapped)[order], first, rtol=0, atol=1e-12)
    if make is _mice:
        with pytest.raises(NotImplementedError, match="uncertainty"):
            imp.transform(data, return_std=True)
    with pytest.raises(TypeError, match="fitted on several variables"):
        imp.transform(data.variable_data("a")[0])
    frame = clone(imp).set_output(transform="pandas").fit(data).transform(data)
    assert frame.columns.names == ["variable", "time"]
    assert_array_equal(frame["b"].to_numpy(), first[:, GRID.size :])
    assert_array_equal(frame.index, data.ids)
    pipe = make_pipeline(clone(imp), PCA(n_components=2)).fit(data)
    assert pipe.transform(data).shape == (len(data), 2)
    # a later fit on one variable forgets the several
    imp.fit(data.variable_data("a")[0])
    assert not hasattr(imp, "variables_")
    with pytest.raises(TypeError, match="fitted on one variable"):
        imp.transform(data)


@pytest.mark.parametrize("make", [_kernel, _mice])
def test_keep_observed_and_unknown_variables(make, two_independent):
    _, _, data = two_independent
    imp = make().set_params(keep_observed=True).fit(data)
    row = 2
    own = slice(data.offsets[row], data.offsets[row + 1])
    times, variable, values = data.times[own], data.variable[own], data.values[own]
    grid = np.unique(times)  # every observation of the subject is on the grid
    curves = imp.transform(data, grid=grid)
    plain = clone(imp).set_params(keep_observed=False).fit(data)
    smoothed = plain.transform(data, grid=grid)
    cols = variable * grid.size + np.searchsorted(grid, times)
    assert_array_equal(curves[row, cols], values)
    assert not np.allclose(smoothed[row, cols], values)
    untouched = np.setdiff1d(np.arange(curves.shape[1]), cols)
    assert_array_equal(curves[row, untouched], smoothed[row, untouched])
    other = data.to_long()
    other["variable"] = other["variable"].replace({"b": "c"})
    with pytest.raises(ValueError, match=r"\['c'\] were not seen in fit"):
        imp.transform(other)


_OTHERS = ["PACEImputer", "FACEImputer", "MFPCAImputer", "AutoImputer"]
_NEURAL = ["GAINImputer", "CNPImputer"]


@pytest.mark.parametrize("name", _OTHERS + _NEURAL)
def test_every_other_imputer_refuses_several_variables(name, two_independent):
    if name in _NEURAL:
        pytest.importorskip("torch")
    _, _, data = two_independent
    imp = getattr(fi, name)()
    for X in (data, data.to_long()):
        with pytest.raises(TypeError, match="holds several variables") as err:
            imp.fit(X)
        assert f"{name} models one variable" in str(err.value)
        assert ", ".join(SEVERAL_VARIABLE_IMPUTERS) in str(err.value)
    assert not hasattr(imp, "grid_")


def test_the_refusal_names_exactly_the_imputers_that_take_several(two_independent):
    _, _, data = two_independent
    imputers = [n for n in fi.__all__ if n.endswith("Imputer") and n != "BaseImputer"]
    assert set(SEVERAL_VARIABLE_IMPUTERS) <= set(imputers)
    several = {n for n in imputers if issubclass(getattr(fi, n), SeveralVariablesMixin)}
    assert several | {"MultivariatePACEImputer"} == set(SEVERAL_VARIABLE_IMPUTERS)
    assert set(_OTHERS + _NEURAL) | set(SEVERAL_VARIABLE_IMPUTERS) == set(imputers)


@pytest.mark.parametrize("make", [_kernel, _mice, fi.MultivariatePACEImputer])
def test_one_fit_prelude_for_every_imputer_of_several_variables(make, shared):
    data = shared.train.data
    imp = make().fit(data)
    assert imp.time_range_ == data.time_range
    assert imp.n_subjects_fit_ == len(data)
    assert imp.variables_ == ["x0", "x1", "x2"]
    assert not hasattr(imp, "value_range_")  # one variable's range only
    if make is not fi.MultivariatePACEImputer:
        assert_array_equal(imp.grid_, GRID)
    # a refused refit leaves nothing of the first fit
    with pytest.raises(ValueError, match="extrapolate"):
        imp.set_params(extrapolate="sideways").fit(data)
    assert not [k for k in vars(imp) if k.endswith("_") and not k.startswith("_")]


def test_frames_without_a_variable_column_stay_univariate():
    data = _univariate(3)
    frame = data.to_long()
    assert isinstance(frame, pd.DataFrame)
    imp = _kernel().fit(frame)
    assert not hasattr(imp, "variables_")
    assert imp.transform(frame).shape == (len(data), GRID.size)


def test_observed_values_go_back_by_one_rule_for_one_variable_and_several(
    two_independent,
):
    from fdaimpute._core.output import put_observed

    _, _, data = two_independent
    grid = np.union1d(GRID, data.times[::3])
    rng = np.random.default_rng(0)
    curves = rng.normal(size=(len(data), 2 * grid.size))
    std = rng.uniform(size=curves.shape)
    got, got_std = put_observed(data, grid, curves, std)
    for j in range(2):
        part, rows = data.variable_data(j)
        block = slice(j * grid.size, (j + 1) * grid.size)
        one, one_std = put_observed(part, grid, curves[rows, block], std[rows, block])
        assert_array_equal(got[rows, block], one)
        assert_array_equal(got_std[rows, block], one_std)
        assert (one_std == 0).sum() == np.isin(part.times, grid).sum()
    changed = got != curves
    assert changed.sum() == (got_std == 0).sum() > 0


def test_mice_keeps_each_variables_imputed_cells_within_its_values(tmp_path):
    # variables on scales 600 times apart: unbounded, a bin regressed on
    # the others' bins ran beyond its own variable's values
    sim = fi.simulate.multivariate_gaussian(
        n=60, scales=(1.0, 30.0, 0.05), random_state=0
    )
    data = sim.train.data
    imp = _mice().fit(data)
    curves = imp.transform_3d(data)
    values = imp.predict_at(data).values
    for j in range(3):
        own = data.values[data.variable == j]
        assert own.min() <= curves[:, j].min() and curves[:, j].max() <= own.max()
        at = values[data.variable == j]
        assert own.min() <= at.min() and at.max() <= own.max()
        assert_array_equal(imp.variable_value_ranges_[j], [own.min(), own.max()])
    # the chain's bounds are the fit's: the replay gives the fit's own filling
    filled = imp._fit_chain(imp._stacked_bins(data))
    assert_allclose(imp._replay(imp._stacked_bins(data)), filled, atol=1e-10)
    path = tmp_path / "mice.fdaimpute"
    imp.save(path)
    assert_array_equal(fi.MICEImputer.load(path).transform_3d(data), curves)


def test_each_variable_is_judged_against_its_own_range(two_independent):
    from fdaimpute._core.plausible import warn_implausible_variables

    _, _, data = two_independent
    ranges = [(-1.0, 1.0), (10.0, 11.0)]  # b's values read as if near 10.5
    curves = np.zeros((len(data), 2 * GRID.size))
    curves[:, GRID.size :] = 10.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_implausible_variables(curves, data, GRID, (0, 1), ranges, "X")
    # 2.0 is far outside b's [9.5, 11.5] (not a's): subject 0, never observed
    # on b, is judged against b's range alone
    curves[0, GRID.size + 3] = 2.0
    label = f"subject {data.ids[0]!r}"
    with pytest.warns(UserWarning, match=rf"X \(b\): the imputed curve of {label}"):
        warn_implausible_variables(curves, data, GRID, (0, 1), ranges, "X")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_implausible_variables(curves, data, GRID, (0, 1), None, "X")
    # the farthest excursion is the one quoted, whichever subject comes first
    curves[2, GRID.size + 5] = -40.0
    label = f"subject {data.ids[2]!r}"
    far = rf"of {label}.*\(-40 at time {GRID[5]:.4g}\)"
    with pytest.warns(UserWarning, match=far):
        warn_implausible_variables(curves, data, GRID, (0, 1), ranges, "X")


@pytest.mark.parametrize("make", [_kernel, _mice])
def test_several_variables_warn_of_an_implausible_curve(
    make, two_independent, tmp_path
):
    _, _, data = two_independent
    imp = make().fit(data)
    b = data.values[data.variable == 1]
    assert imp.value_ranges_[1] == (b.min(), b.max())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        imp.transform(data)
    imp.save(tmp_path / "model.fdai")
    back = type(imp).load(tmp_path / "model.fdai")
    assert back.value_ranges_ == imp.value_ranges_
    curves_of = back._variable_curves

    def spiked(part, grid, derivative):
        out = curves_of(part, grid, derivative)
        out[1, grid.size + 2] = b.max() + 10 * (b.max() - b.min())
        return out

    back._variable_curves = spiked
    with pytest.warns(UserWarning, match=r"\(b\): the imputed curve of subject"):
        back.transform(data)


def test_multivariate_pace_warns_of_an_implausible_curve(two_independent):
    _, _, data = two_independent
    imp = fi.MultivariatePACEImputer(grid=GRID, random_state=0).fit(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        imp.transform(data)
    a = data.values[data.variable == 0]
    shift = np.zeros((len(data), 2 * GRID.size))
    shift[3, 5] = 10 * (a.max() - a.min())
    imp._covariate_curves = lambda design, grid: shift
    with pytest.warns(UserWarning, match=r"\(a\): the imputed curve of subject"):
        imp.transform(data)


@pytest.mark.parametrize("make", [_kernel, _mice])
def test_a_variable_whose_values_are_all_equal_is_imputed_as_that_value(
    make, two_independent
):
    a, b, _ = two_independent
    flat = b.take(np.arange(len(b)))
    flat.values = np.full(flat.values.size, 3.5)
    data = MultivariateIrregularData.from_variables({"a": a, "b": flat})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not "outside the range [3.5, 3.5]"
        curves = make().fit(data).transform_3d(data)
    assert_allclose(curves[:, 1], 3.5, rtol=1e-9)


def test_multivariate_pace_names_the_variable_it_cannot_fit(two_independent):
    a, b, _ = two_independent
    flat = b.take(np.arange(len(b)))
    flat.values = np.full(flat.values.size, 3.5)
    data = MultivariateIrregularData.from_variables({"a": a, "flat": flat})
    with pytest.raises(ValueError, match="variable 'flat': all observed values"):
        fi.MultivariatePACEImputer().fit(data)
