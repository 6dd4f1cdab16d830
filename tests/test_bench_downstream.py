"""Targets and scoring of benchmarks/bench_downstream.py (no neural fitting)."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_downstream as bd  # noqa: E402

import fdaimpute as fi  # noqa: E402


def _data():
    return fi.IrregularData.from_lists(
        [[0.1, 0.4, 0.6, 0.9], [0.2, 0.8], [0.3, 0.5]],
        [[1.0, 2.0, 3.0, 5.0], [4.0, 6.0], [7.0, 8.0]],
    )


def test_window_and_counts():
    data = _data()
    np.testing.assert_array_equal(bd.counts_in(data, 0.0, 0.5), [2, 1, 2])
    np.testing.assert_array_equal(bd.counts_in(data, 0.5 + 1e-9, 1.0), [2, 1, 0])
    early = bd.window(data, 0.0, 0.5)
    np.testing.assert_array_equal(early.times, [0.1, 0.4, 0.2, 0.3, 0.5])
    np.testing.assert_array_equal(np.diff(early.offsets), [2, 1, 2])
    with pytest.raises(ValueError, match="subject 2"):
        bd.window(data, 0.5 + 1e-9, 1.0)  # subject 2 has nothing after 0.5


def test_subject_means_and_summaries():
    data = _data()
    np.testing.assert_allclose(bd.subject_means(data), [2.75, 5.0, 7.5])
    features = bd.Summaries().fit(data).transform(data)
    np.testing.assert_allclose(features, [[2.75, 5.0, 4], [5.0, 6.0, 2], [7.5, 8.0, 2]])


def test_framingham_target_is_later_mean():
    inputs, target, left_out, end = bd.framingham_task()
    assert len(inputs) == target.size and left_out + len(inputs) == 889
    assert inputs.times.max() <= end
    data = fi.datasets.load_framingham().data
    # the first usable participant: recompute its target from the raw visits
    first = next(i for i, (t, _) in enumerate(data) if t.min() <= end and t.max() > end)
    t, y = data[first]
    assert target[0] == pytest.approx(y[t > end].mean())


def test_summary_rows_pair_with_pace():
    # two repeats of five folds; method B's errors are twice PACE's
    record = {
        "sse": [1.0] * 10,
        "sst": [4.0] * 10,
        "n": [10] * 10,
        "seconds": [0.1] * 10,
    }
    double = dict(record, sse=[4.0] * 10)
    rows = bd.summarize("t", 100, {"PACE": record, "B": double}, repeats=2)
    by_method = {r["method"]: r for r in rows}
    assert by_method["B"]["RMSE / PACE"].startswith("2.000")
    assert by_method["PACE"]["R^2"].startswith("0.750")
    assert by_method["B"]["R^2"].startswith("0.000")
