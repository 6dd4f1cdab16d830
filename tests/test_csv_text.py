"""The CSV text of the command's output: pandas' text, numbers read back exactly."""

import csv
import io
import json

import numpy as np
import pandas as pd
import pytest

import fdaimpute as fi
from fdaimpute._io import csv_text
from fdaimpute._io.csv_text import field, long_rows, wide_rows
from fdaimpute.cli import main
from fdaimpute.pace import PACEImputer

# numbers whose shortest text is awkward: tiny, huge, negative zero, ties
AWKWARD = [0.1, 1 / 3, -0.0, 1e-300, 5e-324, 1.7976931348623157e308, 1e16, -2.5e-7]


@pytest.fixture(params=["repr", "arrow"])
def formatter(request, monkeypatch):
    """Floats formatted by repr, or by Arrow however small the block."""
    if request.param == "arrow":
        pytest.importorskip("pyarrow")
        monkeypatch.setattr(csv_text, "ARROW_MIN_VALUES", 0)
        monkeypatch.setattr(csv_text, "ARROW_SLAB_VALUES", 20)  # a few rows each
    else:
        monkeypatch.setattr(csv_text, "ARROW_MIN_VALUES", np.inf)
    return request.param


def _read(text):
    """Rows of CSV text as strings, numbers parsed by Python (exact)."""
    return list(csv.reader(io.StringIO(text)))


def _matrix(rng, n, p):
    values = rng.normal(size=(n, p)) * 10.0 ** rng.integers(-8, 8, size=(n, p))
    values.flat[: len(AWKWARD)] = AWKWARD
    return values


@pytest.mark.parametrize("header", [True, False])
def test_wide_text_is_pandas_text(header, formatter):
    rng = np.random.default_rng(0)
    values = _matrix(rng, 30, 7)
    values[3, 2] = np.inf
    ids = np.array(
        ["007", "7", 'say "hi"', "a,b", "line\nbreak"] + list("xyz") * 8 + ["q"]
    )
    ids = ids[:30]
    names = ["id"] + [f"t={t}" for t in range(7)]
    frame = pd.DataFrame(values, columns=names[1:])
    frame.insert(0, "id", ids)
    want = frame.to_csv(None, index=False, header=header)
    assert wide_rows(ids, values, names if header else None) == want


def test_wide_numbers_read_back_exactly_and_missing_values_stay_missing(formatter):
    rng = np.random.default_rng(1)
    values = _matrix(rng, 40, 5)
    values[[2, 7], [0, 4]] = np.nan
    ids = np.arange(40).astype(str)
    text = wide_rows(ids, values, ["id", "a", "b", "c", "d", "e"])
    rows = _read(text)[1:]
    assert [row[0] for row in rows] == ids.tolist()
    got = np.array([[float(v) if v else np.nan for v in row[1:]] for row in rows])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(values))
    same = ~np.isnan(values)
    assert np.array_equal(got[same], values[same])  # bit for bit
    assert np.signbit(got.flat[2]) and got.flat[2] == 0.0  # -0.0 kept


def test_long_text_is_pandas_text(formatter):
    rng = np.random.default_rng(2)
    ids = np.array(["b", "a", "0012"], dtype=object)
    grid = np.linspace(0, 1, 4)
    curves, std = _matrix(rng, 3, 4), rng.random((3, 4))
    frame = pd.DataFrame(
        {
            "who": np.repeat(ids, 4),
            "when": np.tile(grid, 3),
            "y": curves.ravel(),
            "std": std.ravel(),
        }
    )
    want = frame.to_csv(None, index=False)
    assert long_rows(ids, grid, [curves, std], ["who", "when", "y", "std"]) == want


def test_arrow_writes_repr_text_at_every_magnitude(monkeypatch):
    # Arrow's own text differs from repr for integers ("1"), tiny ("1e-5") and
    # large numbers ("2.8753507931772537e+10"): those must still read as repr
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(3)
    values = rng.normal(size=(200, 60)) * 10.0 ** rng.integers(-12, 18, (200, 60))
    values[::3, 5] = np.round(values[::3, 5])
    values[::4, 6] = np.nan
    values[:, 7] = np.arange(200.0) - 100
    values[:, 8] = 28753507931.772537
    want = [",".join("" if v != v else repr(v) for v in row) for row in values.tolist()]
    monkeypatch.setattr(csv_text, "ARROW_MIN_VALUES", 0)
    monkeypatch.setattr(csv_text, "ARROW_SLAB_VALUES", 1000)  # 16 rows a slab
    assert csv_text._number_rows(values) == want


def test_arrow_is_not_used_where_its_text_is_not_reprs(monkeypatch):
    # a range where Arrow writes 1e-05 as 0.00001 fails the check at first use
    pytest.importorskip("pyarrow")
    monkeypatch.setattr(csv_text, "ARROW_RANGE", (1e-7, 1e9))
    csv_text._arrow.cache_clear()
    try:
        assert csv_text._arrow() is None
    finally:
        csv_text._arrow.cache_clear()


def test_fields_are_quoted_only_where_needed():
    assert field("plain") == "plain"
    assert field("a,b") == '"a,b"'
    assert field('say "hi"') == '"say ""hi"""'
    assert field(7) == "7"
    assert field(0.1) == "0.1"
    assert field(np.float64(2.5)) == "2.5"
    assert field(np.int64(12)) == "12"


@pytest.mark.parametrize("layout", ["wide", "long"])
def test_command_output_reads_back_as_the_curves(tmp_path, layout):
    sim = fi.simulate.sand_paper(n=120, n_obs="3-5", random_state=0)
    path = tmp_path / "obs.csv"
    sim.train.data.to_long().to_csv(path, index=False)
    out, timings = tmp_path / "out.csv", tmp_path / "timings.json"
    params = ["--param", "bandwidth_cov=0.1", "--param", "n_components=3"]
    args = ["impute", str(path), "-o", str(out), "--method", "pace", *params]
    main([*args, "--std", "--format", layout, "--timings", str(timings)])
    read = fi.IrregularData.read_csv(path)
    grid = np.linspace(*read.time_range, 101)
    pace = PACEImputer(bandwidth_cov=0.1, n_components=3, grid=grid).fit(read)
    curves, std = pace.transform(read, return_std=True)
    rows = _read(out.read_text())[1:]
    got = np.array([[float(v) for v in row[1:]] for row in rows])
    if layout == "wide":
        assert np.array_equal(got, np.concatenate([curves, std], axis=1))
    else:
        assert np.array_equal(
            got,
            np.column_stack([np.tile(grid, len(read)), curves.ravel(), std.ravel()]),
        )
    seconds = json.loads(timings.read_text())
    phases = {"import", "read", "bins", "mean", "covariance", "transform", "write"}
    assert phases <= set(seconds)
    parts = sum(v for k, v in seconds.items() if k != "total")
    assert parts <= seconds["total"]


@pytest.mark.parametrize("layout", ["wide", "long"])
def test_command_output_is_the_same_text_whatever_the_pieces(
    tmp_path, monkeypatch, layout
):
    # the curves are turned into text a few subjects at a time: the file is
    # the same as from one piece, with its header once
    from fdaimpute._cli import output

    sim = fi.simulate.sand_paper(n=60, n_obs="3-5", random_state=1)
    path = tmp_path / "obs.csv"
    sim.train.data.to_long().to_csv(path, index=False)
    args = ["impute", str(path), "--method", "kernel", "--grid", "0:1:7"]
    args += ["--std", "--format", layout]
    texts = []
    for cells in (1 << 20, 50):  # one piece; pieces of 3 subjects (14 cells each)
        monkeypatch.setattr(output, "TEXT_CELLS", cells)
        out = tmp_path / f"out{cells}.csv"
        main([*args, "-o", str(out)])
        texts.append(out.read_text())
    assert texts[0] == texts[1]
    lines = texts[0].splitlines()
    assert lines[0].startswith("id,") and not any(
        line.startswith("id,") for line in lines[1:]
    )
    assert len(lines) == 1 + (len(sim.train.data) * (7 if layout == "long" else 1))
