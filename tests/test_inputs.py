"""Input formats, output grids and query handling shared by every imputer."""

import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from fdaimpute import IrregularData, KernelImputer, MICEImputer, PACEImputer


def _lines(n=6, m=8, lo=0.0, hi=1.0, seed=0):
    """Noise-free straight lines, which a local-linear fit reproduces exactly."""
    rng = np.random.default_rng(seed)
    coef = rng.normal(size=(n, 2))
    times = [np.sort(rng.uniform(lo, hi, m)) for _ in range(n)]
    times = [np.concatenate([[lo], t[1:-1], [hi]]) for t in times]
    values = [a + b * t for (a, b), t in zip(coef, times)]
    return IrregularData.from_lists(times, values), coef


def _matrix(n=40, p=6, seed=0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, p)
    X = np.sin(2 * np.pi * (t + rng.uniform(size=(n, 1)))) + 0.1 * rng.normal(
        size=(n, p)
    )
    X[rng.random(X.shape) < 0.3] = np.nan
    X[:, 0] = np.where(np.isnan(X[:, 0]), 0.0, X[:, 0])  # no empty row
    return X


def _long_frame():
    return pd.DataFrame(
        {
            "subject": [1, 1, 1, 2, 2, 3, 3, 3],
            "age": [40.0, 45.0, 50.0, 40.0, 45.0, 40.0, 45.0, 50.0],
            "bmi": [24.0, 25.0, 25.5, 30.0, 30.5, 22.0, 22.4, 23.0],
        }
    )


# --------------------------------------------------------------------- #
# A. refit after set_params(grid=...) on matrix input
@pytest.mark.parametrize(
    "make",
    [
        lambda: KernelImputer(bandwidth=0.3),
        lambda: MICEImputer(random_state=0, max_iter=2),
        lambda: PACEImputer(n_components=2, random_state=0),
    ],
    ids=["kernel", "mice", "pace"],
)
def test_refit_with_changed_grid_equals_fresh_fit(make):
    X = _matrix()
    est = make().set_params(grid=np.arange(6.0)).fit(X)
    new_grid = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 5.0])
    est.set_params(grid=new_grid).fit(X)
    fresh = clone(est).fit(X)
    assert_array_equal(est.dense_times_, new_grid)
    assert_array_equal(est.grid_, fresh.grid_)
    assert_array_equal(est.transform(X), fresh.transform(X))


def test_refit_with_wider_grid_is_not_out_of_range():
    X = _matrix()
    est = KernelImputer(bandwidth=0.5, grid=np.arange(6.0)).fit(X)
    est.set_params(grid=np.array([0.0, 1, 2, 3, 4, 10])).fit(X)
    assert est.time_range_ == (0.0, 10.0)


def test_transform_uses_fitted_column_times():
    X = _matrix()
    est = KernelImputer(bandwidth=0.3, grid=[0.0, 0.1, 0.2, 0.3, 0.4, 5.0]).fit(X)
    before = est.transform(X)
    est.set_params(grid=np.arange(6.0))  # not refitted: no effect
    assert_array_equal(est.transform(X), before)


# --------------------------------------------------------------------- #
# B. predict_at keeps the query's order and allows repeats
def test_predict_at_per_subject_times_keep_order_and_repeats():
    data, coef = _lines(n=3)
    imp = KernelImputer(bandwidth=0.5, shrinkage=0.0).fit(data)
    times = [np.array([0.9, 0.1, 0.9]), np.array([0.5]), np.array([])]
    out = imp.predict_at(data, times)
    assert isinstance(out, list) and [o.shape for o in out] == [(3,), (1,), (0,)]
    for i in range(2):
        assert_allclose(out[i], coef[i, 0] + coef[i, 1] * times[i], atol=1e-8)
    assert out[0][0] == out[0][2]


def test_predict_at_common_times_keep_order_and_repeats():
    data, coef = _lines(n=3)
    imp = KernelImputer(bandwidth=0.5, shrinkage=0.0).fit(data)
    query = np.array([0.9, 0.1, 0.9, 0.4])
    out = imp.predict_at(data, query)
    assert out.shape == (3, 4)
    assert_allclose(out, coef[:, :1] + coef[:, 1:] * query, atol=1e-8)


def test_predict_at_hooks_see_sorted_times():
    seen = []

    class Spy(KernelImputer):
        def _predict_ragged(self, data, times, offsets):
            for i in range(len(offsets) - 1):
                seen.append(np.all(np.diff(times[offsets[i] : offsets[i + 1]]) >= 0))
            return super()._predict_ragged(data, times, offsets)

    data, _ = _lines(n=2)
    imp = Spy(bandwidth=0.5).fit(data)
    imp.predict_at(data, [[0.7, 0.2], [0.3, 0.3, 0.1]])
    imp.predict_at(data, [0.8, 0.2])
    assert seen and all(seen)


def test_predict_at_per_subject_wrong_count_raises():
    data, _ = _lines(n=2)
    imp = KernelImputer(bandwidth=0.5).fit(data)
    with pytest.raises(ValueError, match="3 entries but X has 2 subjects"):
        imp.predict_at(data, [[0.1], [0.2], [0.3]])


# --------------------------------------------------------------------- #
# C. long frames with other column names
def test_long_frame_with_other_names_is_refused_with_the_fix():
    df = _long_frame()
    with pytest.raises(ValueError) as info:
        KernelImputer(grid=21).fit_transform(df)
    assert "IrregularData.from_long(df, id='subject', time='age', value='bmi')" in (
        str(info.value)
    )


@pytest.mark.parametrize("cls", [PACEImputer, KernelImputer, MICEImputer])
def test_a_long_frame_with_a_column_per_variable_is_not_read_as_a_matrix(cls):
    df = pd.DataFrame(
        {
            "id": [1, 1, 1, 2, 2, 3, 3, 3],
            "time": [0.0, 0.5, 1.2, 0.1, 0.9, 0.0, 0.4, 2.0],
            "bili": [1.0, 1.2, np.nan, 0.5, 0.7, 2.0, 2.1, 2.5],
            "alb": [3.5, np.nan, 3.3, 4.0, 3.9, 3.0, np.nan, 2.8],
        }
    )
    fix = r"from_columns\(df, \['bili', 'alb'\], id='id', time='time'\)"
    with pytest.raises(ValueError, match=fix):
        cls().fit(df)
    with pytest.raises(ValueError, match=r"from_long\(df, id='id', time='time', value"):
        cls().fit(df.drop(columns="alb"))


def test_wide_frames_are_not_mistaken_for_long():
    X = _matrix(p=3)
    wide = pd.DataFrame(X, columns=["a", "b", "c"])
    out = KernelImputer(bandwidth=0.5).fit_transform(wide)
    assert out.shape == X.shape
    complete = pd.DataFrame({"a": [1, 1, 2], "b": [2, 3, 4], "c": [3, 4, 5]})
    assert KernelImputer(bandwidth=1.0).fit_transform(complete.to_numpy()).shape == (
        3,
        3,
    )


# --------------------------------------------------------------------- #
# D. wide frames carry times (column labels) and ids (index)
def test_wide_frame_labels_are_times_and_index_is_ids():
    df = _long_frame()
    wide = df.pivot(index="subject", columns="age", values="bmi")
    imp = KernelImputer(bandwidth=5.0).set_output(transform="pandas")
    out = imp.fit_transform(wide)
    assert_array_equal(imp.grid_, [40.0, 45.0, 50.0])
    assert imp.n_features_in_ == 3
    assert out.index.tolist() == [1, 2, 3] and out.index.name == "id"
    data = IrregularData.from_long(df, id="subject", time="age", value="bmi")
    ref = KernelImputer(bandwidth=5.0, grid=[40.0, 45.0, 50.0]).fit(data)
    assert_allclose(out.to_numpy(), ref.transform(data))


def test_wide_frame_labels_conflicting_with_grid_raise():
    wide = _long_frame().pivot(index="subject", columns="age", values="bmi")
    with pytest.raises(ValueError, match="column labels are its column times"):
        KernelImputer(grid=[0.0, 0.5, 1.0]).fit(wide)
    # the same times are not a conflict
    KernelImputer(bandwidth=5.0, grid=[40.0, 45.0, 50.0]).fit(wide)


def test_wide_frame_unsorted_numeric_labels_raise():
    wide = _long_frame().pivot(index="subject", columns="age", values="bmi")
    with pytest.raises(ValueError, match="strictly increasing"):
        KernelImputer().fit(wide[[50.0, 40.0, 45.0]])


def test_default_and_string_labels_keep_unit_interval():
    X = _matrix()
    for frame in (pd.DataFrame(X), pd.DataFrame(X, columns=list("abcdef"))):
        imp = KernelImputer(bandwidth=0.3).fit(frame)
        assert_array_equal(imp.grid_, np.linspace(0, 1, 6))
        ref = KernelImputer(bandwidth=0.3).fit(X)
        assert_array_equal(imp.transform(frame), ref.transform(X))


# --------------------------------------------------------------------- #
# E. dates and durations are refused
def _date_inputs():
    df = _long_frame()
    dates = pd.Timestamp("2020-01-01") + pd.to_timedelta(df["age"], unit="D")
    data, _ = _lines()
    fitted = KernelImputer(bandwidth=0.5).fit(data)
    wide = pd.DataFrame([[1.0, np.nan], [2.0, 3.0]])
    wide.columns = pd.date_range("2020", periods=2)
    return {
        "from_long": lambda: IrregularData.from_long(
            df.assign(age=dates), "subject", "age", "bmi"
        ),
        "from_long_tz": lambda: IrregularData.from_long(
            df.assign(age=dates.dt.tz_localize("UTC")), "subject", "age", "bmi"
        ),
        "from_long_timedelta": lambda: IrregularData.from_long(
            df.assign(age=pd.to_timedelta(df["age"], unit="D")), "subject", "age", "bmi"
        ),
        "from_lists_timestamps": lambda: IrregularData.from_lists(
            [[pd.Timestamp("2020-01-01")]], [[1.0]]
        ),
        "init": lambda: IrregularData(
            np.array(["2020-01-01"], dtype="datetime64[D]"), [1.0], [0, 1]
        ),
        "from_dense_grid": lambda: IrregularData.from_dense(
            [[1.0, 2.0]], pd.date_range("2020", periods=2)
        ),
        "grid_param": lambda: KernelImputer(grid=pd.date_range("2020", periods=5)).fit(
            data
        ),
        "wide_labels": lambda: KernelImputer().fit(wide),
        "predict_at": lambda: fitted.predict_at(
            data, np.array([1, 2], dtype="timedelta64[D]")
        ),
        "predict_at_ragged": lambda: fitted.predict_at(
            data, [[pd.Timestamp("2020")]] * len(data)
        ),
    }


@pytest.mark.parametrize("case", sorted(_date_inputs()))
def test_dates_and_durations_are_refused(case):
    with pytest.raises(TypeError, match=r"pd.Timedelta\(days=1\)"):
        _date_inputs()[case]()


# --------------------------------------------------------------------- #
# F. grid tolerance, extrapolate="clip", grid parameter forms
def test_rounded_grid_just_outside_the_data_is_accepted():
    data, _ = _lines(lo=20.08, hi=59.98)
    imp = KernelImputer(bandwidth=5.0, grid=np.arange(20, 61)).fit(data)
    assert imp.transform(data).shape == (len(data), 41)
    with pytest.raises(ValueError, match="extrapolate='clip'"):
        KernelImputer(grid=np.arange(10, 61)).fit(data)


def test_single_query_time_gets_only_a_tiny_tolerance():
    data, _ = _lines()
    imp = KernelImputer(bandwidth=0.5).fit(data)
    with pytest.raises(ValueError, match="extrapolate"):
        imp.predict_at(data, [1.001])


def test_clip_holds_curves_constant_outside_the_range():
    data, _ = _lines()
    clip = KernelImputer(bandwidth=0.5, extrapolate="clip").fit(data)
    plain = KernelImputer(bandwidth=0.5).fit(data)
    grid = np.array([-1.0, 0.0, 0.5, 1.0, 3.0])
    out = clip.transform(data, grid=grid)
    assert_array_equal(out[:, 0], out[:, 1])
    assert_array_equal(out[:, 4], out[:, 3])
    assert_array_equal(out[:, 1:4], plain.transform(data, grid=grid[1:4]))
    deriv = clip.derivative(data, grid=grid)
    assert_array_equal(deriv[:, [0, 4]], 0.0)
    assert_array_equal(deriv[:, 2], plain.derivative(data, grid=grid[1:4])[:, 1])
    at = clip.predict_at(data, [3.0, -1.0, 0.5])
    assert_allclose(at, out[:, [4, 0, 2]], atol=1e-12)
    # inside the range, clip changes nothing
    assert_array_equal(clip.transform(data), plain.transform(data))
    # new subjects observed outside the range are accepted and used as given
    late = IrregularData.from_lists([[0.5, 1.5]], [[0.0, 1.0]])
    assert np.isfinite(clip.transform(late)).all()


@pytest.mark.parametrize("value", ["yes", 2, None])
def test_bad_extrapolate_raises(value):
    data, _ = _lines()
    with pytest.raises(ValueError, match="extrapolate must be"):
        KernelImputer(extrapolate=value).fit(data)


def test_grid_parameter_forms():
    data, _ = _lines()
    assert KernelImputer(bandwidth=0.5, grid=11.0).fit(data).grid_.size == 11
    for bad in (10.5, "abc"):
        with pytest.raises(TypeError, match="grid must be an int or an array"):
            KernelImputer(grid=bad).fit(data)


def test_transform_on_a_given_grid():
    data, _ = _lines()
    imp = KernelImputer(bandwidth=0.5).fit(data)
    grid = np.array([0.0, 0.25, 0.8])
    assert_array_equal(imp.transform(data, grid=grid), imp.predict_at(data, grid))
    out = imp.set_output(transform="pandas").transform(data, grid=grid)
    assert out.columns.tolist() == ["t=0", "t=0.25", "t=0.8"]


def test_fit_transform_with_std():
    X = _matrix()
    est = PACEImputer(n_components=2, random_state=0)
    curves, std = est.fit_transform(X, return_std=True)
    ref_curves, ref_std = clone(est).fit(X).transform(X, return_std=True)
    assert_array_equal(curves, ref_curves)
    assert_array_equal(std, ref_std)


# --------------------------------------------------------------------- #
# G. keep_observed
def test_keep_observed_puts_observed_cells_back():
    X = _matrix()
    seen = ~np.isnan(X)
    est = PACEImputer(n_components=2, random_state=0)
    smooth, smooth_std = est.fit_transform(X, return_std=True)
    assert not np.allclose(smooth[seen], X[seen])  # denoised by default
    kept, kept_std = est.set_params(keep_observed=True).fit_transform(
        X, return_std=True
    )
    assert_array_equal(kept[seen], X[seen])
    assert_array_equal(kept[~seen], smooth[~seen])
    assert_array_equal(kept_std[seen], 0.0)
    assert_array_equal(kept_std[~seen], smooth_std[~seen])
    assert_array_equal(est.derivative(X), clone(est).fit(X).derivative(X))


def test_keep_observed_matches_within_relative_rounding_only():
    t = np.array([0.0, 0.3 * (1 + 1e-14), 0.7 + 1e-6, 1.0])
    data = IrregularData.from_lists([t, t], [[1.0, 2.0, 3.0, 4.0], [0.0] * 4])
    grid = np.array([0.0, 0.3, 0.7, 1.0])
    out = KernelImputer(bandwidth=0.5, grid=grid, keep_observed=True).fit_transform(
        data
    )
    assert_array_equal(out[0, [0, 1, 3]], [1.0, 2.0, 4.0])
    assert out[0, 2] != 3.0


# --------------------------------------------------------------------- #
# H. missing ids; pandas output of predict_at and scores
@pytest.mark.parametrize(
    "ids",
    [
        [1.0, np.nan],
        np.array(["a", None], dtype=object),
        np.array(["a", float("nan")], dtype=object),
        pd.array([1, pd.NA]).to_numpy(dtype=object),
    ],
    ids=["nan", "none", "object_nan", "pandas_na"],
)
def test_missing_subject_ids_raise_in_every_constructor(ids):
    match = "position 1 has a missing id"
    with pytest.raises(ValueError, match=match):
        IrregularData.from_lists([[0.0], [1.0]], [[1.0], [2.0]], ids=ids)
    with pytest.raises(ValueError, match=match):
        IrregularData.from_dense([[1.0, np.nan], [np.nan, 2.0]], ids=ids)
    with pytest.raises(ValueError, match=match):
        IrregularData([0.0, 1.0], [1.0, 2.0], [0, 1, 2], ids=ids)
    frame = {"id": np.asarray(ids, dtype=object), "time": [0.0, 1.0], "value": [1, 2]}
    with pytest.raises(ValueError, match="missing subject ids"):
        IrregularData.from_long(pd.DataFrame(frame))


def test_predict_at_and_scores_follow_set_output():
    X = _matrix()
    ids = [f"s{i}" for i in range(len(X))]
    frame = pd.DataFrame(X, index=ids, columns=np.linspace(0, 1, 6))
    est = PACEImputer(n_components=2, random_state=0).fit(frame)
    plain_at, plain_scores = est.predict_at(frame, [0.5, 0.1]), est.scores(frame)
    est.set_output(transform="pandas")
    at = est.predict_at(frame, [0.5, 0.1])
    assert at.index.tolist() == ids and at.columns.tolist() == ["t=0.5", "t=0.1"]
    assert_array_equal(at.to_numpy(), plain_at)
    scores = est.scores(frame)
    assert scores.columns.tolist() == ["score_1", "score_2"]
    assert scores.index.tolist() == ids
    assert_array_equal(scores.to_numpy(), plain_scores)


# --------------------------------------------------------------------- #
# I. n_features_in_
def test_n_features_in_follows_the_last_fit():
    X = _matrix()
    imp = KernelImputer(bandwidth=0.3).fit(X)
    assert imp.n_features_in_ == X.shape[1]
    data, _ = _lines()
    imp.fit(data)
    assert not hasattr(imp, "n_features_in_")
    assert not hasattr(imp, "dense_times_")


@pytest.mark.parametrize("make", [KernelImputer, PACEImputer], ids=["kernel", "pace"])
def test_a_failed_refit_leaves_the_estimator_unfitted(make):
    rng = np.random.default_rng(0)
    good = IrregularData.from_lists(
        [np.sort(rng.uniform(size=6)) for _ in range(30)],
        [rng.normal(size=6) for _ in range(30)],
    )
    est = make(grid=11).fit(good)
    with pytest.raises(ValueError):
        est.set_params(grid=[0.5, 0.2]).fit(good)  # not increasing
    assert not [k for k in vars(est) if k.endswith("_") and not k.startswith("_")]
    with pytest.raises(NotFittedError):
        est.transform(good)


def test_range_tolerance_follows_the_unit_of_time():
    rng = np.random.default_rng(1)
    times = [np.sort(rng.uniform(size=5)) for _ in range(20)]
    times[0][0], times[1][-1] = 0.0, 1.0
    values = [rng.normal(size=5) for _ in range(20)]
    for scale in (1e-8, 1.0, 1e8):
        data = IrregularData.from_lists([t * scale for t in times], values)
        est = KernelImputer(grid=11).fit(data)
        late = [(np.array([0.5, 1.2]) * scale, np.zeros(2))]
        with pytest.raises(ValueError, match="outside the training range"):
            est.transform(late)
        near = [(np.array([0.5, 1.05]) * scale, np.zeros(2))]
        with pytest.warns(UserWarning, match=r"beyond the training range .*5\.0% of"):
            assert est.transform(near).shape == (1, 11)
        inside = [(np.array([0.5, 1.0 + 1e-12]) * scale, np.zeros(2))]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # rounding is not "beyond the range"
            assert est.transform(inside).shape == (1, 11)


def test_the_refusal_names_the_observation_far_outside_not_the_first_outside():
    rng = np.random.default_rng(1)
    times = [np.sort(rng.uniform(size=5)) for _ in range(20)]
    times[0][0], times[1][-1] = 0.0, 1.0
    est = KernelImputer(grid=11).fit(
        IrregularData.from_lists(times, [rng.normal(size=5) for _ in range(20)])
    )
    new = [(np.array([0.5, 1.03]), np.zeros(2)), (np.array([0.5, 1.6]), np.zeros(2))]
    with pytest.raises(ValueError, match=r"subject 1 .*at time 1\.6, outside"):
        est.transform(new)


# --------------------------------------------------------------------------- #
# numbers too large or too small to compute with: a message, not a traceback

ALL_IMPUTERS = [
    "KernelImputer",
    "PACEImputer",
    "FACEImputer",
    "MFPCAImputer",
    "MICEImputer",
    "GAINImputer",
    "VTImputer",
    "SANDImputer",
    "CNPImputer",
]


def _sim_data():
    import fdaimpute as fi

    return fi.simulate.sand_paper(n=40, n_obs="8-12", random_state=0).train.data


@pytest.mark.parametrize("name", ALL_IMPUTERS)
@pytest.mark.parametrize(
    "times, values, message",
    [
        (
            lambda t: 10.0 ** (-300 + 600 * t),
            lambda y: y,
            r"times reach 1e\+300.*/ 1e300",
        ),
        (lambda t: t, lambda y: y * 1e307, r"values reach .*e\+30[78].*/ 1e30"),
        (lambda t: t * 1e-300, lambda y: y, r"times span only 1e-300.* \* 1e300"),
        (lambda t: t, lambda y: y * 1e-300, r"values span only .*e-30.* \* 1e30"),
    ],
    ids=["times-1e-300-to-1e300", "values-1e307", "times-1e-300", "values-1e-300"],
)
def test_unusable_magnitudes_are_refused_with_the_fix(name, times, values, message):
    import fdaimpute as fi

    data = _sim_data()
    bad = IrregularData(times(data.times), values(data.values), data.offsets)
    with pytest.raises(ValueError, match=message):
        getattr(fi, name)().fit(bad)


def test_unusable_magnitudes_are_refused_at_transform():
    data = _sim_data()
    est = KernelImputer().fit(data)
    with pytest.raises(ValueError, match="values reach"):
        est.transform(data.with_values(data.values * 1e200))


@pytest.mark.parametrize("cls", [MICEImputer, KernelImputer])
def test_times_over_many_orders_of_magnitude_fit(cls):
    # bins of the distinct times 1e-300 ... 1e99 keep every time in its own bin
    data = _sim_data()
    wide = IrregularData(10.0 ** (-300 + 399 * data.times), data.values, data.offsets)
    out = (
        cls(**({"max_iter": 2} if cls is MICEImputer else {})).fit(wide).transform(wide)
    )
    assert np.isfinite(out).all()


# --------------------------------------------------------------------------- #
# bounded memory: blocks of subjects, and outputs that cannot fit refused first


def test_output_that_cannot_fit_is_refused_before_any_work(monkeypatch):
    from fdaimpute._core import blocks as _blocks

    data = _sim_data()
    est = KernelImputer().fit(data)

    def forbidden(*args, **kwargs):
        raise AssertionError("computed an output that cannot fit")

    monkeypatch.setattr(_blocks, "available_memory", lambda: 10_000)
    monkeypatch.setattr(est, "_transform_grid", forbidden)
    monkeypatch.setattr(est, "_derivative_grid", forbidden)
    monkeypatch.setattr(est, "_predict_ragged", forbidden)
    with pytest.raises(ValueError, match=r"would need .* more than the .* available"):
        est.transform(data)
    with pytest.raises(ValueError, match=f"derivative of {len(data)} subjects"):
        est.derivative(data)
    with pytest.raises(ValueError, match="prediction"):
        est.predict_at(data, np.linspace(0, 1, 500))


@pytest.mark.parametrize("cls", [KernelImputer, PACEImputer, MICEImputer])
def test_transform_in_blocks_of_subjects_matches_one_block(cls, monkeypatch):
    from fdaimpute import base

    data = _sim_data()
    est = cls().fit(data)
    whole = est.transform(data, return_std=cls is PACEImputer)
    slope = est.derivative(data) if cls is not MICEImputer else None
    seen = []
    real = base.subject_blocks

    def small(offsets, width):
        blocks = real(offsets, width, cells=5 * width)
        seen.append(max(hi - lo for lo, hi in blocks))
        return blocks

    monkeypatch.setattr(base, "subject_blocks", small)
    blocked = est.transform(data, return_std=cls is PACEImputer)
    assert seen and max(seen) == 5
    for got, expected in zip(
        blocked if cls is PACEImputer else [blocked],
        whole if cls is PACEImputer else [whole],
    ):
        assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    if slope is not None:
        assert_allclose(est.derivative(data), slope, rtol=1e-12, atol=1e-12)
