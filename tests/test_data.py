import pickle

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_array_equal
from sklearn.model_selection import KFold, train_test_split

from fdaimpute import IrregularData


@pytest.fixture
def small():
    return IrregularData.from_lists(
        [[0.3, 0.1, 0.9], [0.5], [0.2, 0.4]],
        [[3.0, 1.0, 9.0], [5.0], [2.0, 4.0]],
        ids=["a", "b", "c"],
    )


def test_from_lists_sorts_times_and_keeps_values_aligned(small):
    t, y = small[0]
    assert_array_equal(t, [0.1, 0.3, 0.9])
    assert_array_equal(y, [1.0, 3.0, 9.0])
    assert_array_equal(small.offsets, [0, 3, 4, 6])
    assert_array_equal(small.n_obs, [3, 1, 2])


def test_round_trip_lists_long_dense(small):
    times, values = small.to_lists()
    assert IrregularData.from_lists(times, values, ids=small.ids) == small
    long = small.to_long()
    assert list(long.columns) == ["id", "time", "value"]
    assert IrregularData.from_long(long) == small
    X, grid = small.to_dense()
    assert X.shape == (3, 6)
    assert IrregularData.from_dense(X, grid, ids=small.ids) == small


def test_from_long_custom_columns_keep_first_appearance_order():
    df = pd.DataFrame(
        {"subject": [7, 3, 7, 3], "age": [50, 41, 40, 45], "bmi": [1.0, 2, 3, 4]}
    )
    data = IrregularData.from_long(df, id="subject", time="age", value="bmi")
    assert_array_equal(data.ids, [7, 3])
    assert_array_equal(data[0][0], [40, 50])
    assert_array_equal(data[0][1], [3.0, 1.0])


def test_read_csv(tmp_path, small):
    path = tmp_path / "d.csv"
    small.to_long().to_csv(path, index=False)
    assert IrregularData.read_csv(path) == small


def test_read_csv_keeps_ids_as_the_text_in_the_file(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("id,time,value\n007,0.1,1.0\n7,0.2,2.0\n007,0.3,3.0\n7.0,0.4,4\n")
    data = IrregularData.read_csv(path)
    assert data.ids.tolist() == ["007", "7", "7.0"]
    assert data.n_obs.tolist() == [2, 1, 1]
    # numbers, when asked for
    numeric = IrregularData.read_csv(path, dtype={"id": float})
    assert numeric.ids.tolist() == [7.0]


def test_read_csv_with_a_header_only_says_so(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("id,time,value\n")
    with pytest.raises(ValueError, match="no observations"):
        IrregularData.read_csv(path)


@pytest.mark.parametrize(
    "key, expected",
    [
        (np.array([2, 0]), ["c", "a"]),
        (np.array([True, False, True]), ["a", "c"]),
        (slice(1, None), ["b", "c"]),
        ([1], ["b"]),
        (np.array([-1]), ["c"]),
    ],
)
def test_indexing_returns_subjects_in_order(small, key, expected):
    sub = small[key]
    assert isinstance(sub, IrregularData)
    assert_array_equal(sub.ids, expected)
    for i, name in enumerate(expected):
        t, y = small[list(small.ids).index(name)]
        assert_array_equal(sub[i][0], t)
        assert_array_equal(sub[i][1], y)


def test_indexing_errors(small):
    with pytest.raises(IndexError):
        small[5]
    with pytest.raises(IndexError):
        small[np.array([True, False])]
    with pytest.raises(IndexError):
        small[np.array([0.5])]


def test_works_with_sklearn_splitters(small):
    data = IrregularData.from_lists([[0, 1]] * 10, [[i, i + 1.0] for i in range(10)])
    train, test = train_test_split(data, test_size=0.3, random_state=0)
    assert isinstance(train, IrregularData) and isinstance(test, IrregularData)
    assert sorted(np.concatenate([train.ids, test.ids])) == list(range(10))
    for i, sid in enumerate(test.ids):
        assert_array_equal(test[i][1], data[int(sid)][1])
    folds = list(KFold(3).split(data))
    assert sum(len(te) for _, te in folds) == 10


def test_iteration_len_repr_equality_pickle(small):
    assert len(small) == 3
    assert [len(t) for t, _ in small] == [3, 1, 2]
    assert "3 subjects" in repr(small)
    assert small != small[[0, 1]]
    assert pickle.loads(pickle.dumps(small)) == small


def test_duplicates_raise_or_average():
    with pytest.raises(ValueError, match=r"subject 'x'.*two observations at time 0.5"):
        IrregularData.from_lists([[0.5, 0.5]], [[1.0, 3.0]], ids=["x"])
    data = IrregularData.from_lists(
        [[0.5, 0.1, 0.5], [0.2]], [[1.0, 7.0, 3.0], [4.0]], duplicates="average"
    )
    assert_array_equal(data[0][0], [0.1, 0.5])
    assert_array_equal(data[0][1], [7.0, 2.0])
    assert_array_equal(data.n_obs, [2, 1])


def test_constructor_sorts_within_subjects_only_and_names_a_non_finite_value():
    # 0.9 -> 0.1 is a pair across subjects; only b's 0.7 -> 0.3 is unsorted
    data = IrregularData([0.5, 0.9, 0.1, 0.7, 0.3], [1, 2, 3, 4, 5.0], [0, 2, 5])
    assert_array_equal(data.times, [0.5, 0.9, 0.1, 0.3, 0.7])
    assert_array_equal(data.values, [1, 2, 3, 5, 4])
    times = np.array([0.5, 0.9, 0.1, 0.3])
    # already sorted within subjects: not reordered (no copy)
    kept = IrregularData(times, [1, 2, 3, 4.0], [0, 2, 4])
    assert np.shares_memory(kept.times, times)
    with pytest.raises(ValueError, match=r"'b' .*non-finite value \(nan\) at obs"):
        IrregularData(times, [1, 2, 3, np.nan], [0, 2, 4], ids=["a", "b"])


@pytest.mark.parametrize(
    "times, values, ids, error, match",
    [
        (
            [[0.0, np.nan]],
            [[1.0, 2.0]],
            ["s1"],
            ValueError,
            r"subject 's1'.*non-finite time",
        ),
        (
            [[0.0, 1.0]],
            [[1.0, np.inf]],
            ["s1"],
            ValueError,
            r"subject 's1'.*non-finite value",
        ),
        (
            [[0.0, 1.0], [0.0]],
            [[1.0, 2.0], [1.0, 2.0]],
            ["a", "b"],
            ValueError,
            r"subject 'b'.*1 times but 2 values",
        ),
        (
            [[0.0], []],
            [[1.0], []],
            ["a", "b"],
            ValueError,
            r"subject 'b'.*no observations",
        ),
        ([[0.0, 1.0]], [["x", "y"]], ["s1"], TypeError, r"subject 's1'.*numeric"),
        ([[0.0, 1.0]], [[[1.0], [2.0]]], ["s1"], ValueError, r"subject 's1'.*1-D"),
        ([[0.0], [1.0]], [[1.0], [2.0]], ["a"], ValueError, r"one entry per subject"),
        ([[0.0]], [[1.0], [2.0]], None, ValueError, r"1 subjects but values has 2"),
    ],
)
def test_from_lists_bad_input_names_subject(times, values, ids, error, match):
    with pytest.raises(error, match=match):
        IrregularData.from_lists(times, values, ids=ids)


def test_from_long_bad_input():
    df = pd.DataFrame({"id": ["a", "b"], "time": [0.0, "late"], "value": [1.0, 2.0]})
    with pytest.raises(TypeError, match=r"subject 'b'.*'time' must be numeric"):
        IrregularData.from_long(df)
    df = pd.DataFrame({"id": ["a", "b"], "time": [0.0, np.nan], "value": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"subject 'b'.*non-finite time"):
        IrregularData.from_long(df)
    with pytest.raises(ValueError, match=r"column 'age'.*not in the table"):
        IrregularData.from_long(df, time="age")
    df = pd.DataFrame({"id": [1.0, np.nan], "time": [0.0, 1.0], "value": [1.0, 2.0]})
    with pytest.raises(ValueError, match="missing subject ids"):
        IrregularData.from_long(df)


def test_from_dense_bad_input():
    X = np.array([[1.0, np.nan], [np.nan, np.nan]])
    with pytest.raises(ValueError, match=r"subject 'q'.*no observations"):
        IrregularData.from_dense(X, ids=["p", "q"])
    with pytest.raises(ValueError, match=r"position 0.*infinite"):
        IrregularData.from_dense(np.array([[np.inf, 1.0]]))
    with pytest.raises(ValueError, match="one time per column"):
        IrregularData.from_dense(np.ones((2, 3)), grid=[0, 1])
    with pytest.raises(ValueError, match="2-D"):
        IrregularData.from_dense(np.ones(3))
    with pytest.raises(TypeError, match="numeric"):
        IrregularData.from_dense(np.array([["a", "b"]]))
    with pytest.raises(ValueError, match="one entry per subject"):
        IrregularData.from_dense(np.ones((2, 2)), ids=[1, 2, 3])


def test_constructor_checks_offsets_and_unique_ids():
    with pytest.raises(ValueError, match="offsets end"):
        IrregularData([0.0, 1.0], [1.0, 2.0], [0, 1])
    with pytest.raises(ValueError, match="unique"):
        IrregularData([0.0, 1.0], [1.0, 2.0], [0, 1, 2], ids=["a", "a"])


def test_repeated_object_ids_are_named_and_distinct_ones_pass():
    times, values, offsets = [0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"repeated: \['a'\]"):
        IrregularData(times, values, offsets, ids=np.array(["a", 7, "a"], dtype=object))
    with pytest.raises(ValueError, match="repeated"):
        IrregularData(times, values, offsets, ids=np.array([1, 1.0, 2], dtype=object))
    ids = np.array(["a", 7, (1, 2)], dtype=object)
    assert IrregularData(times, values, offsets, ids=ids).ids.tolist() == ids.tolist()


def test_to_dense_rejects_off_grid_time(small):
    with pytest.raises(ValueError, match=r"subject 'a'.*not on the grid"):
        small.to_dense(grid=[0.1, 0.2])


@pytest.mark.parametrize(
    "version, exact",
    [("2.2.3", True), ("3.0.6", True), ("3.1.0rc1", False), ("3.1.1", False)],
)
def test_csv_read_options_ask_for_exact_floats_before_pandas_3_1(version, exact):
    # pandas 3.0.6 read 29 of 558 floats written by to_csv one bit off
    from types import SimpleNamespace

    from fdaimpute._io.csv_options import read_options

    options = read_options(
        {"sep": ";"}, "subject", SimpleNamespace(__version__=version)
    )
    assert options["dtype"] == {"subject": str}
    assert options["sep"] == ";"
    assert ("float_precision" in options) is exact
    kept = read_options(
        {"float_precision": "high"}, "id", SimpleNamespace(__version__=version)
    )
    assert kept.get("float_precision", "high") == "high"


def _csv(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("chunked", [False, True])
def test_rows_with_more_fields_than_the_header_are_refused_with_their_line(
    tmp_path, chunked
):
    from fdaimpute.chunks import CSVChunks

    def read(path):
        if chunked:
            return IrregularData.concat(list(CSVChunks(path, chunksize=1)))
        return IrregularData.read_csv(path)

    # every row one field more: pandas made the ids its index, shifting columns
    every = _csv(tmp_path / "every.csv", "id,time,value\nA,0.1,0.5,1\nA,0.2,0.6,1\n")
    with pytest.raises(
        ValueError, match=r"line 2 of .* has 4 fields \('A,0.1,0.5,1'\)"
    ):
        read(every)
    later = _csv(tmp_path / "later.csv", "id,time,value\nA,0.1,0.5\nB,0.2,0.6,7\n")
    with pytest.raises(
        ValueError, match=r"line 3 of .* has 4 fields .* header \(id, time, value\)"
    ):
        read(later)
    # a trailing comma on every row is an empty field: read as nothing
    trailing = _csv(
        tmp_path / "trailing.csv", "id,time,value\nA,0.1,0.5,\nB,0.2,0.6,\n"
    )
    data = read(trailing)
    assert data.ids.tolist() == ["A", "B"]
    assert_array_equal(data.values, [0.5, 0.6])


@pytest.mark.parametrize("chunked", [False, True])
def test_ids_that_pandas_reads_as_missing_are_ids(tmp_path, chunked):
    from fdaimpute.chunks import CSVChunks

    def read(path):
        if chunked:
            return IrregularData.concat(list(CSVChunks(path, chunksize=3)))
        return IrregularData.read_csv(path)

    ids = ["N/A", "NA", "None", "nan", "null"]  # sorted, for CSVChunks
    rows = "".join(f"{i},{t},{t * 10}\n" for i in ids for t in (0.1, 0.2))
    path = _csv(tmp_path / "obs.csv", "id,time,value\n" + rows)
    data = read(path)
    assert data.ids.tolist() == ids
    assert data.n_obs.tolist() == [2] * 5
    # the values keep pandas' markers of a missing value
    path.write_text("id,time,value\n" + rows + "null,0.3,NA\n")
    with pytest.raises(ValueError, match="'null' .* non-finite value"):
        read(path)


def test_an_empty_id_is_refused_with_its_line(tmp_path):
    path = _csv(tmp_path / "obs.csv", "id,time,value\nA,0.1,0.5\n\n,0.2,0.6\n")
    with pytest.raises(
        ValueError, match=r"line 4 of .* has no subject id \(',0.2,0.6'\)"
    ):
        IrregularData.read_csv(path)
