"""MultivariateIrregularData: constructors, checks, subject order, splits."""

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from fdaimpute import IrregularData, PACEImputer
from fdaimpute.multivariate import MultivariateIrregularData


def _long():
    return pd.DataFrame(
        {
            "pid": ["b", "b", "a", "b", "a", "c"],
            "t": [0.5, 0.1, 0.3, 0.2, 0.3, 0.9],
            "lab": ["alb", "alb", "bili", "bili", "alb", "bili"],
            "y": [3.0, 3.2, 1.1, 1.4, 3.9, 2.0],
            "sex": ["f", "f", "m", "f", "m", "f"],
            "age": [50.0, 50.0, 61.0, 50.0, 61.0, 40.0],
        }
    )


def test_from_long_keeps_subject_and_variable_order_and_sorts_times():
    data = MultivariateIrregularData.from_long(
        _long(),
        id="pid",
        time="t",
        variable="lab",
        value="y",
        covariates=["sex", "age"],
    )
    assert data.ids.tolist() == ["b", "a", "c"]
    assert data.variables.tolist() == ["alb", "bili"]
    assert data.counts.tolist() == [[2, 1], [1, 1], [0, 1]]
    t, y, v = data[0]
    assert t.tolist() == [0.1, 0.5, 0.2] and y.tolist() == [3.2, 3.0, 1.4]
    assert v.tolist() == [0, 0, 1]
    assert data.covariates["sex"].tolist() == ["f", "m", "f"]
    assert data.covariates["age"].tolist() == [50.0, 61.0, 40.0]


@pytest.mark.parametrize("dtype", [object, "string[pyarrow]"])
def test_from_long_reads_arrow_held_ids_as_object_ids(dtype):
    pytest.importorskip("pyarrow")
    frame = _long().astype({"pid": dtype})
    data = MultivariateIrregularData.from_long(
        frame, id="pid", time="t", variable="lab", value="y"
    )
    assert data.ids.tolist() == ["b", "a", "c"]
    assert all(type(label) is str for label in data.ids)
    assert data.counts.tolist() == [[2, 1], [1, 1], [0, 1]]
    frame.loc[4, "pid"] = None
    with pytest.raises(ValueError, match="missing subject ids .first at row 4"):
        MultivariateIrregularData.from_long(
            frame, id="pid", time="t", variable="lab", value="y"
        )


def test_from_columns_equals_from_long_of_the_same_observations():
    wide = pd.DataFrame(
        {
            "id": [1, 1, 2, 2, 3],
            "time": [0.0, 1.0, 0.5, 0.7, 0.2],
            "alb": [3.5, np.nan, 4.1, np.nan, 3.0],
            "bili": [1.2, 1.4, np.nan, 0.9, np.nan],
        }
    )
    a = MultivariateIrregularData.from_columns(wide, ["alb", "bili"])
    long = wide.melt(["id", "time"], var_name="variable").dropna()
    b = MultivariateIrregularData.from_long(long)
    assert a == b
    assert a.counts.tolist() == [[1, 2], [1, 1], [1, 0]]


def test_from_variables_matches_subjects_by_id():
    a = IrregularData.from_lists([[0, 1], [0.5]], [[1.0, 2.0], [3.0]], ids=["x", "y"])
    b = IrregularData.from_lists([[0.2], [0.4, 0.6]], [[9.0], [7, 8]], ids=["y", "z"])
    data = MultivariateIrregularData.from_variables({"a": a, "b": b})
    assert data.ids.tolist() == ["x", "y", "z"]
    assert data.counts.tolist() == [[2, 0], [1, 1], [0, 2]]
    back, rows = data.variable_data("b")
    assert rows.tolist() == [1, 2]
    assert back == b


def test_exact_times_survive_the_sort():
    times = [0.1, 0.7, 0.1 + 1e-12, 1e6 + 0.3]
    data = MultivariateIrregularData(
        times, [1.0, 2.0, 3.0, 4.0], [1, 0, 1, 0], [0, 4], ["u", "v"]
    )
    assert sorted(data.times.tolist()) == sorted(times)
    assert data.variable.tolist() == [0, 0, 1, 1]


def test_indexing_and_splitting_keep_ids_variables_and_covariates():
    data = MultivariateIrregularData.from_long(
        _long(), id="pid", time="t", variable="lab", value="y", covariates=["age"]
    )
    train, test = train_test_split(data, test_size=1, random_state=0)
    assert sorted(train.ids.tolist() + test.ids.tolist()) == ["a", "b", "c"]
    sub = data[np.array([False, True, True])]
    assert sub.ids.tolist() == ["a", "c"]
    assert sub.covariates["age"].tolist() == [61.0, 40.0]
    assert data[::-1].ids.tolist() == ["c", "a", "b"]
    assert data[[2, 0]].counts.tolist() == [[0, 1], [2, 1]]
    again = MultivariateIrregularData.from_long(data.to_long(), covariates=["age"])
    assert again == data


def test_covariate_not_constant_within_a_subject_names_it():
    df = _long()
    df.loc[3, "age"] = 51.0  # subject b's third row
    with pytest.raises(ValueError, match=r"'b'.*covariate 'age' is not constant"):
        MultivariateIrregularData.from_long(
            df, id="pid", time="t", variable="lab", value="y", covariates=["age"]
        )


def test_missing_covariate_column_is_named():
    with pytest.raises(ValueError, match="column 'smoker'"):
        MultivariateIrregularData.from_long(
            _long(),
            id="pid",
            time="t",
            variable="lab",
            value="y",
            covariates=["smoker"],
        )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"y": [np.nan, 3.2, 1.1, 1.4, 3.9, 2.0]}, r"'b'.*non-finite value.*'alb'"),
        ({"t": [0.5, 0.1, 0.3, 0.2, np.inf, 0.9]}, r"'a'.*non-finite time.*'alb'"),
        ({"t": [0.5, 0.5, 0.3, 0.2, 0.3, 0.9]}, r"'b'.*two observations.*'alb'"),
        ({"y": [3.0, "high", 1.1, 1.4, 3.9, 2.0]}, r"'b'.*column 'y' must be numeric"),
        (
            {"lab": ["alb", None, "bili", "bili", "alb", "bili"]},
            r"'b'.*missing variable",
        ),
    ],
)
def test_bad_input_names_subject_and_variable(change, message):
    df = _long().assign(**change)
    err = TypeError if "numeric" in message else ValueError
    with pytest.raises(err, match=message):
        MultivariateIrregularData.from_long(
            df, id="pid", time="t", variable="lab", value="y"
        )


def test_subject_with_nothing_measured_is_named():
    wide = pd.DataFrame(
        {"id": [1, 2], "time": [0.0, 0.5], "a": [1.0, np.nan], "b": [2.0, np.nan]}
    )
    with pytest.raises(ValueError, match=r"subject 2 .*no measured value"):
        MultivariateIrregularData.from_columns(wide, ["a", "b"])


def test_duplicates_average_within_one_variable_only():
    data = MultivariateIrregularData(
        [0.2, 0.2, 0.2],
        [1.0, 3.0, 5.0],
        [0, 0, 1],
        [0, 3],
        ["a", "b"],
        duplicates="average",
    )
    assert data.values.tolist() == [2.0, 5.0]
    assert data.variable.tolist() == [0, 1]


def test_univariate_imputers_refuse_several_variables():
    data = MultivariateIrregularData.from_long(
        _long(), id="pid", time="t", variable="lab", value="y"
    )
    for X in (data, data.to_long()):
        with pytest.raises(TypeError, match="several variables") as err:
            PACEImputer().fit(X)
        message = str(err.value)
        assert "PACEImputer models one variable" in message
        assert (
            "imputers that take several variables are MultivariatePACEImputer, "
            "KernelImputer, MICEImputer" in message
        )


def test_several_variables_are_recognised_under_the_users_column_names():
    from fdaimpute.multivariate import as_multivariate, holds_several_variables

    frame = _long()
    names = dict(id="pid", time="t", variable="lab", value="y")
    assert holds_several_variables(frame, **names)
    assert not holds_several_variables(frame)  # not the default names
    assert as_multivariate(frame, **names) == MultivariateIrregularData.from_long(
        frame, **names
    )
    renamed = frame.rename(
        columns={"pid": "id", "t": "time", "lab": "variable", "y": "value"}
    )
    assert holds_several_variables(renamed)
    assert as_multivariate(renamed) == as_multivariate(frame, **names)
    with pytest.raises(TypeError, match="columns pid, t, lab, value"):
        as_multivariate(frame, id="pid", time="t", variable="lab")
    assert not holds_several_variables(frame[["pid", "t", "y"]], **names)


def test_a_table_of_several_variables_under_other_names_is_explained():
    from fdaimpute import KernelImputer, MultivariatePACEImputer

    frame = _long()[["pid", "t", "lab", "y"]]
    for imputer in (PACEImputer(), KernelImputer(), MultivariatePACEImputer()):
        with pytest.raises(ValueError, match="looks like a long table") as err:
            imputer.fit(frame)
        message = str(err.value)
        assert (
            "MultivariateIrregularData.from_long(df, id='pid', time='t', "
            "variable='lab', value='y')" in message
        )
        assert "MultivariatePACEImputer, KernelImputer, MICEImputer" in message
    # the advice reads it
    data = MultivariateIrregularData.from_long(
        frame, id="pid", time="t", variable="lab", value="y"
    )
    assert KernelImputer(n_bandwidths=3).fit(data).variables_ == ["alb", "bili"]
