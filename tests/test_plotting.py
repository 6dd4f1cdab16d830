import subprocess
import sys

import matplotlib
import numpy as np
import pytest
from numpy.testing import assert_array_equal

import fdaimpute as fi

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _data(ids):
    times = [[0.0, 0.5, 1.0], [0.1, 0.9], [0.2, 0.4, 0.6, 0.8]]
    values = [[1.0, 2.0, 3.0], [4.0, 5.0], [6.0, 7.0, 8.0, 9.0]]
    return fi.IrregularData.from_lists(times, values, ids=ids)


GRID = np.linspace(0, 1, 5)
# Row i of the curves is constant i, so a drawn line tells its row.
CURVES = np.repeat(np.arange(3.0)[:, None], GRID.size, axis=1)


def _shown(fig, data):
    """(title, curve row, observed times) of each visible panel."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        curve, observed = ax.get_lines()
        row = int(curve.get_ydata()[0])
        out.append((ax.get_title(), row, list(observed.get_xdata())))
    return out


def test_subjects_by_string_id():
    data = _data(["a", "b", "c"])
    fig = fi.plotting.plot_curves(data, CURVES, GRID, subjects=["c", "a"])
    assert _shown(fig, data) == [
        ("subject c", 2, [0.2, 0.4, 0.6, 0.8]),
        ("subject a", 0, [0.0, 0.5, 1.0]),
    ]


def test_integers_are_positions_when_ids_are_strings():
    data = _data(["a", "b", "c"])
    fig = fi.plotting.plot_curves(data, CURVES, GRID, subjects=[1, -1])
    assert [(t, r) for t, r, _ in _shown(fig, data)] == [
        ("subject b", 1),
        ("subject c", 2),
    ]
    with pytest.raises(ValueError, match=r"position\(s\) \[3\]"):
        fi.plotting.plot_curves(data, CURVES, GRID, subjects=[3])


def test_integer_ids_that_differ_from_positions_are_ids():
    data = _data([30, 10, 20])
    fig = fi.plotting.plot_curves(data, CURVES, GRID, subjects=[20, 30])
    assert [(t, r) for t, r, _ in _shown(fig, data)] == [
        ("subject 20", 2),
        ("subject 30", 0),
    ]
    with pytest.raises(ValueError, match=r"subject id\(s\) \[0\] not in the data"):
        fi.plotting.plot_curves(data, CURVES, GRID, subjects=[0, 10])
    with pytest.raises(ValueError, match=r"\['x'\] not in the data"):
        fi.plotting.plot_curves(data, CURVES, GRID, subjects=["x"])


def test_default_ids_are_positions_and_int_shows_the_first():
    data = _data(None)
    fig = fi.plotting.plot_curves(data, CURVES, GRID, subjects=[2, 0])
    assert [r for _, r, _ in _shown(fig, data)] == [2, 0]
    fig = fi.plotting.plot_curves(data, CURVES, GRID, subjects=3, ncols=2)
    assert [r for _, r, _ in _shown(fig, data)] == [0, 1, 2]
    assert len(fig.axes) == 4 and not fig.axes[3].get_visible()


def test_truth_band_and_several_methods_follow_the_chosen_subject():
    data = _data(["a", "b", "c"])
    std = np.full_like(CURVES, 0.5)
    fig = fi.plotting.plot_curves(
        data,
        {"one": CURVES, "two": CURVES + 10},
        GRID,
        truth=CURVES - 10,
        std=std,
        subjects=["b"],
        ncols=1,
    )
    (ax,) = fig.axes
    truth, one, two, observed = ax.get_lines()
    assert_array_equal(truth.get_ydata(), CURVES[1] - 10)
    assert_array_equal(one.get_ydata(), CURVES[1])
    assert_array_equal(two.get_ydata(), CURVES[1] + 10)
    (band,) = ax.collections
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(1 - 1.96 * 0.5)
    assert ys.max() == pytest.approx(1 + 1.96 * 0.5)


def test_bad_subjects_are_reported():
    data = _data(["a", "b", "c"])
    with pytest.raises(TypeError, match="subjects"):
        fi.plotting.plot_curves(data, CURVES, GRID, subjects=2.5)
    with pytest.raises(ValueError, match="at least 1"):
        fi.plotting.plot_curves(data, CURVES, GRID, subjects=0)
    _, axes = plt.subplots(1, 1, squeeze=False)
    with pytest.raises(ValueError, match="only 1 axes"):
        fi.plotting.plot_curves(data, CURVES, GRID, subjects=["a", "b"], axes=axes)


def test_plotting_is_an_attribute_of_the_package():
    code = "import fdaimpute as fi; print(fi.plotting.plot_curves.__name__)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "plot_curves"
