"""Parquet in and out: the same subjects, models and curves as the CSV."""

import numpy as np
import pandas as pd
import pytest

import fdaimpute as fi
from fdaimpute import IrregularData
from fdaimpute.chunks import CSVChunks, ParquetChunks
from fdaimpute.cli import main
from fdaimpute.pace import PACEImputer

pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def table():
    """A long table sorted by numeric id, odd column names, extra columns."""
    data = fi.simulate.sand_paper(n=120, n_obs="2-8", random_state=5).train.data
    frame = data.to_long(id="who", time="age", value="bmi")
    frame["who"] = np.repeat(np.arange(len(data)) * 3 + 1, data.n_obs)
    frame["site"] = "x"
    return frame


@pytest.fixture()
def files(table, tmp_path):
    csv, parquet = tmp_path / "obs.csv", tmp_path / "obs.parquet"
    table.to_csv(csv, index=False)
    table.to_parquet(parquet, index=False, row_group_size=97)
    return csv, parquet


COLUMNS = {"id": "who", "time": "age", "value": "bmi"}


def test_read_parquet_equals_read_csv(files):
    csv, parquet = files
    from_csv = IrregularData.read_csv(csv, **COLUMNS)
    from_parquet = IrregularData.read_parquet(parquet, **COLUMNS)
    assert from_parquet == from_csv
    assert from_parquet.ids[:2].tolist() == ["1", "4"]  # ids as text


@pytest.mark.parametrize("row_group_size", [None, 3])
def test_read_parquet_arrays_are_the_data_own(tmp_path, row_group_size):
    path = tmp_path / "t.parquet"
    frame = pd.DataFrame({"id": list("aabbc"), "time": np.arange(5.0), "value": 1.0})
    frame.to_parquet(path, row_group_size=row_group_size)
    data = IrregularData.read_parquet(path)
    # one row group converts to a read-only view of Arrow's buffer
    assert data.times.flags.writeable and data.values.flags.writeable
    assert data == IrregularData.from_long(frame)


def test_read_parquet_keeps_text_ids_and_order(tmp_path):
    path = tmp_path / "t.parquet"
    pd.DataFrame(
        {"id": ["007", "7", "007", "b"], "time": [0.0, 1, 2, 3], "value": [1.0] * 4}
    ).to_parquet(path)
    data = IrregularData.read_parquet(path)
    assert data.ids.tolist() == ["007", "7", "b"]
    assert data.n_obs.tolist() == [2, 1, 1]


def test_read_parquet_reports_a_missing_column_and_no_rows(tmp_path, files):
    with pytest.raises(ValueError, match="'when' .the time column. is not in"):
        IrregularData.read_parquet(files[1], id="who", time="when", value="bmi")
    empty = tmp_path / "empty.parquet"
    pd.DataFrame({"id": [], "time": [], "value": []}).to_parquet(empty)
    with pytest.raises(ValueError, match="no observations"):
        IrregularData.read_parquet(empty)
    with pytest.raises(TypeError, match="unexpected arguments"):
        IrregularData.read_parquet(empty, sep=";")


def test_read_parquet_fast_path_equals_from_long_on_odd_types(tmp_path):
    frame = pd.DataFrame(
        {
            "id": pd.Categorical(["b", "a", "b", "c", "a"]),
            "time": np.array([3, 1, 2, 0, 5], dtype=np.int32),
            "value": np.array([1.5, 2.0, -1.0, 0.25, 4.0], dtype=np.float32),
        }
    )
    path = tmp_path / "odd.parquet"
    frame.to_parquet(path)
    expected = IrregularData.from_long(frame.astype({"id": str}))
    got = IrregularData.read_parquet(path)
    assert got == expected
    assert got.ids.tolist() == ["b", "a", "c"]


@pytest.mark.parametrize(
    "ids",
    [
        ["a", "a", "b", "c", "c", "c"],  # sorted: the runs are the subjects
        ["c", "c", "a", "b", "b", "d"],  # grouped, not sorted
        ["b", "a", "b", "c", "a", "b"],  # scattered: Arrow's hash
        ["007", "7", "007", "7", "x", "7"],
    ],
)
@pytest.mark.parametrize("dtype", ["str", "string[pyarrow]", "large_string[pyarrow]"])
def test_from_long_of_arrow_text_ids_equals_the_object_ids(ids, dtype):
    times = np.array([3.0, 1, 2, 0, 5, 4])
    frame = pd.DataFrame({"id": ids, "time": times, "value": times * 2 - 1})
    arrow = frame.astype({"id": dtype})
    expected = IrregularData.from_long(frame.astype({"id": object}))
    got = IrregularData.from_long(arrow)
    assert got == expected
    assert got.ids.tolist() == list(dict.fromkeys(ids))
    assert all(type(label) is str for label in got.ids)
    arrow.loc[3, "id"] = None
    with pytest.raises(ValueError, match="missing subject ids .first at row 3"):
        IrregularData.from_long(arrow)


def test_read_parquet_gaps_are_reported_as_from_long_reports_them(tmp_path):
    path = tmp_path / "gaps.parquet"
    frame = pd.DataFrame({"id": ["a", None, "b"], "time": [0.0, 1, 2], "value": 1.0})
    frame.to_parquet(path)
    with pytest.raises(ValueError, match="missing subject ids"):
        IrregularData.read_parquet(path)
    frame = pd.DataFrame({"id": ["a", "a", "b"], "time": [0.0, 1, 2]})
    frame["value"] = pd.array([1.0, None, 2.0], dtype="Float64")
    frame.to_parquet(path)
    with pytest.raises(ValueError) as gap:
        IrregularData.read_parquet(path)
    with pytest.raises(ValueError) as same:
        IrregularData.from_long(frame)
    assert str(gap.value) == str(same.value)


def test_read_parquet_reads_a_folder_as_one_table(table, tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    half = len(table) // 2
    table.iloc[:half].to_parquet(folder / "a.parquet", index=False)
    table.iloc[half:].to_parquet(folder / "b.parquet", index=False)
    whole = IrregularData.from_long(table.astype({"who": str}), "who", "age", "bmi")
    assert IrregularData.read_parquet(folder, **COLUMNS) == whole


@pytest.mark.parametrize("chunksize", [1, 7, 50, 10_000])
def test_parquet_chunks_are_the_csv_chunks(files, chunksize):
    csv, parquet = files
    a = list(CSVChunks(csv, chunksize=chunksize, **COLUMNS))
    b = list(ParquetChunks(parquet, chunksize=chunksize, **COLUMNS))
    assert len(a) == len(b) > 0
    assert all(x == y for x, y in zip(a, b))
    assert IrregularData.concat(b) == IrregularData.read_csv(csv, **COLUMNS)


def test_parquet_chunks_hold_one_row_group_at_a_time(tmp_path):
    import pyarrow as pa

    n_groups, rows = 60, 20_000
    path = tmp_path / "many.parquet"
    pd.DataFrame(
        {
            "id": np.repeat(np.arange(n_groups * rows // 10), 10),
            "time": np.tile(np.linspace(0, 1, 10), n_groups * rows // 10),
            "value": np.random.default_rng(0).normal(size=n_groups * rows),
        }
    ).to_parquet(path, index=False, row_group_size=rows)
    pool = pa.default_memory_pool()
    start, most, n_subjects = pool.bytes_allocated(), 0, 0
    for chunk in ParquetChunks(path, chunksize=rows):
        n_subjects += len(chunk)
        most = max(most, pool.bytes_allocated() - start)
    assert n_subjects == n_groups * rows // 10
    # a row group is 20,000 x 3 numbers (480 kB); pyarrow's pre-buffering
    # kept every row group read (14 MB of buffers here)
    assert most < 8 * rows * 24


def test_parquet_chunks_refuse_unsorted_ids(tmp_path):
    path = tmp_path / "u.parquet"
    pd.DataFrame(
        {"id": [2, 2, 1, 2], "time": [0.0, 1, 0, 2], "value": [1.0, 2, 3, 4]}
    ).to_parquet(path)
    with pytest.raises(ValueError, match="not sorted by subject id"):
        list(ParquetChunks(path, chunksize=2))
    with pytest.raises(ValueError, match="chunksize"):
        ParquetChunks(path, chunksize=0)


def test_fit_chunks_from_parquet_equals_the_whole_fit(files):
    parquet = files[1]
    whole = PACEImputer(random_state=0).fit(
        IrregularData.read_parquet(parquet, **COLUMNS)
    )
    chunked = PACEImputer(random_state=0).fit_chunks(
        ParquetChunks(parquet, chunksize=101, **COLUMNS)
    )
    for name in ("mean_", "covariance_", "eigenvalues_", "noise_variance_"):
        np.testing.assert_allclose(
            getattr(chunked, name), getattr(whole, name), rtol=0, atol=1e-10
        )


@pytest.mark.parametrize("layout", ["wide", "long"])
def test_cli_reads_and_writes_parquet_as_csv(files, tmp_path, layout):
    csv, parquet = files
    flags = ["--method", "kernel", "--grid", "11", "--format", layout]
    flags += ["--id", "who", "--time", "age", "--value", "bmi"]
    assert main(["impute", str(csv), "-o", str(tmp_path / "o.csv"), *flags]) == 0
    out = tmp_path / "o.parquet"
    assert main(["impute", str(parquet), "-o", str(out), *flags]) == 0
    expected = pd.read_csv(tmp_path / "o.csv", dtype={"who": str})
    written = pd.read_parquet(out)
    assert list(written.columns) == list(expected.columns)
    assert written["who"].tolist() == expected["who"].tolist()
    np.testing.assert_allclose(
        written.iloc[:, 1:].to_numpy(float), expected.iloc[:, 1:].to_numpy(float)
    )
    with pytest.raises(SystemExit, match="exists"):
        main(["impute", str(parquet), "-o", str(out), *flags])


def test_cli_fit_from_parquet_then_impute_with_the_model(files, tmp_path):
    parquet = files[1]
    model = tmp_path / "m.fdai"
    columns = ["--id", "who", "--time", "age", "--value", "bmi"]
    fit = ["fit", str(parquet), "--method", "pace", "--save", str(model)]
    assert main([*fit, "--grid", "21", *columns]) == 0
    out = tmp_path / "curves.parquet"
    assert main(["impute", str(parquet), "--model", str(model), "-o", str(out)]) == 0
    written = pd.read_parquet(out)
    data = IrregularData.read_parquet(parquet, **COLUMNS)
    direct = PACEImputer(random_state=0, grid=np.linspace(*data.time_range, 21))
    assert written["who"].tolist() == data.ids.tolist()
    np.testing.assert_allclose(
        written.iloc[:, 1:].to_numpy(), direct.fit(data).transform(data), atol=1e-10
    )


def test_read_parquet_grouped_rows_across_row_groups(tmp_path):
    # runs of one id that cross row groups are one subject each; one row alone
    frame = pd.DataFrame(
        {
            "id": ["s"] * 3 + ["t"] * 4 + ["u"],
            "time": [2.0, 0, 1, 0, 3, 1, 2, 0],
            "value": np.arange(8.0),
        }
    )
    path = tmp_path / "grouped.parquet"
    frame.to_parquet(path, row_group_size=2)
    assert IrregularData.read_parquet(path) == IrregularData.from_long(frame)
    one = tmp_path / "one.parquet"
    frame.iloc[:1].to_parquet(one)
    assert IrregularData.read_parquet(one) == IrregularData.from_long(frame.iloc[:1])
    # grouped but not in id order, and an id whose run comes back later
    frame.loc[7, "time"] = 5.0
    for ids in (["t"] * 3 + ["s"] * 4 + ["u"], ["t"] * 3 + ["s"] * 4 + ["t"]):
        frame["id"] = ids
        frame.to_parquet(path, row_group_size=2)
        expected = IrregularData.from_long(frame)
        assert IrregularData.read_parquet(path) == expected
        assert IrregularData.read_parquet(path).ids.tolist() == expected.ids.tolist()
