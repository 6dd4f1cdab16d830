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


def test_bands_for_several_methods_each_around_its_curve():
    data = _data(["a", "b", "c"])
    std = {"one": np.full_like(CURVES, 0.5), "two": np.full_like(CURVES, 2.0)}
    fig = fi.plotting.plot_curves(
        data,
        {"one": CURVES, "two": CURVES + 10, "three": CURVES - 10},
        GRID,
        std=std,
        subjects=["c"],
        ncols=1,
    )
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 4  # three curves and the observations
    spans = [
        (
            band.get_paths()[0].vertices[:, 1].min(),
            band.get_paths()[0].vertices[:, 1].max(),
        )
        for band in ax.collections
    ]
    assert spans == [
        pytest.approx((2 - 1.96 * 0.5, 2 + 1.96 * 0.5)),
        pytest.approx((12 - 1.96 * 2, 12 + 1.96 * 2)),
    ]
    with pytest.raises(ValueError, match=r"bands for \['four'\]"):
        fi.plotting.plot_curves(data, {"one": CURVES}, GRID, std={"four": CURVES})


@pytest.fixture(scope="module")
def vt():
    import _configs

    sim = fi.simulate.sand_paper(n=40, n_obs=8, random_state=0)
    return fi.VTImputer(**dict(_configs.TINY, max_epochs=1)).fit(sim.train.data)


def test_history_draws_both_losses_and_marks_the_kept_epoch(vt):
    vt.history_ = {
        "epoch": [0, 1, 2, 3],
        "train_loss": [1.0, 0.5, 0.3, 0.2],
        "valid_loss": [1.1, 0.6, 0.4, 0.45],
    }
    vt.best_epoch_ = 2
    ax = fi.plotting.plot_history(vt).axes[0]
    train, valid, kept, marker = ax.get_lines()
    assert_array_equal(train.get_ydata(), vt.history_["train_loss"])
    assert_array_equal(valid.get_ydata(), vt.history_["valid_loss"])
    assert list(kept.get_xdata()) == [2, 2]
    assert (marker.get_xdata()[0], marker.get_ydata()[0]) == (2, 0.4)
    assert ax.get_yscale() == "log"
    assert "epoch 2" in kept.get_label()


def test_history_of_a_kept_start_without_validation(vt):
    vt.history_ = {
        "epoch": [3, 4],
        "train_loss": [0.5, 0.4],
        "valid_loss": [None, None],
    }
    vt.best_epoch_ = 2
    ax = fi.plotting.plot_history(vt, log=False).axes[0]
    train, kept = ax.get_lines()
    assert list(kept.get_xdata()) == [2, 2] and "starting state" in kept.get_label()
    assert ax.get_yscale() == "linear"
    with pytest.raises(TypeError, match="neural imputer"):
        fi.plotting.plot_history(fi.KernelImputer())


def test_comparison_bars_are_means_with_95_percent_intervals():
    errors = {
        "wide": np.array([1.0, 3.0, 5.0, 7.0]),
        "narrow": np.array([1.0, 1.0, 2.0, 2.0]),
    }
    ax = fi.plotting.plot_comparison(errors, sort=True).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["narrow", "wide"]
    assert [b.get_height() for b in ax.patches] == pytest.approx([1.5, 4.0])
    (bars,) = [c for c in ax.containers if hasattr(c, "errorbar")]
    segments = bars.errorbar.lines[2][0].get_segments()
    half = [(s[1, 1] - s[0, 1]) / 2 for s in segments]
    se = [np.std(errors[k], ddof=1) / 2 for k in ("narrow", "wide")]
    assert half == pytest.approx([1.96 * s for s in se])


def test_comparison_reads_a_frame_and_refuses_bad_errors():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 5.0]})
    ax = fi.plotting.plot_comparison(frame).axes[0]
    assert [b.get_height() for b in ax.patches] == [1.5, 4.0]
    with pytest.raises(ValueError, match="'a' must be a non-empty 1-D array"):
        fi.plotting.plot_comparison({"a": np.zeros((2, 2))})
    with pytest.raises(TypeError, match="non-empty dict"):
        fi.plotting.plot_comparison([1.0, 2.0])


def test_axes_are_labelled_with_the_data_columns_and_the_band_says_what_it_covers():
    import pandas as pd

    frame = pd.DataFrame(
        {
            "girl": [1, 1, 2, 2],
            "age": [8.0, 10.0, 9.0, 12.0],
            "exercise": [1.0, 2, 3, 4],
        }
    )
    data = fi.IrregularData.from_long(frame, id="girl", time="age", value="exercise")
    assert data.names == ("girl", "age", "exercise")
    assert data[[1]].names == data.names  # subsets keep them
    grid = np.linspace(8, 12, 5)
    curves = np.zeros((2, 5))
    fig = fi.plotting.plot_curves(
        data, {"PACE": curves}, grid, std=curves + 1, subjects=2, band_of="observation"
    )
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("age", "exercise")
    labels = ax.get_legend_handles_labels()[1]
    assert "PACE: 95% band of a new observation" in labels
    # without names: generic labels, and the curve's band by default
    fig = fi.plotting.plot_curves(_data(None), CURVES, GRID, std=CURVES, subjects=1)
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time", "value")
    assert "imputed: 95% band of the curve" in ax.get_legend_handles_labels()[1]
    with pytest.raises(ValueError, match="band_of"):
        fi.plotting.plot_curves(data, curves, grid, band_of="subject")


def _fitted_frames():
    sim = fi.simulate.sand_paper(n=60, n_obs="4-6", random_state=0)
    frame = sim.test.data.to_long()
    frame["id"] = "s" + frame["id"].astype(str).str.zfill(2)
    data = fi.IrregularData.from_long(frame)
    imp = fi.KernelImputer(grid=sim.grid).fit(sim.train.data)
    imp.set_output(transform="pandas")
    curves, std = imp.transform(data, return_std=True)
    return data, curves, std, sim.grid


def test_curves_given_as_a_frame_are_matched_to_subjects_by_id():
    # the pandas output sorted in reverse: each panel drew the curve of the
    # subject in its row, not its own
    data, curves, std, grid = _fitted_frames()
    first = data.ids[0]
    backwards = curves.sort_index(ascending=False)
    fig = fi.plotting.plot_curves(
        data,
        backwards,
        grid,
        std=std.sort_index(ascending=False),
        truth=curves,
        subjects=[first],
    )
    ax = fig.axes[0]
    assert ax.get_title() == f"subject {first}"
    drawn = [
        line.get_ydata() for line in ax.get_lines() if line.get_label() == "imputed"
    ]
    np.testing.assert_array_equal(drawn[0], curves.loc[first].to_numpy())


def test_curves_of_other_subjects_or_sizes_are_refused():
    data, curves, std, grid = _fitted_frames()
    other = curves.rename(index=lambda i: i + "x")
    with pytest.raises(ValueError, match="other ids"):
        fi.plotting.plot_curves(data, other, grid)
    with pytest.raises(ValueError, match="shape"):
        fi.plotting.plot_curves(data, curves.to_numpy()[:-1], grid)
    with pytest.raises(ValueError, match="shape"):
        fi.plotting.plot_curves(data, curves, grid, std=std.to_numpy()[:, :1])
    with pytest.raises(ValueError, match="negative"):
        fi.plotting.plot_curves(data, curves, grid, std=-std)
    with pytest.raises(ValueError, match="ncols"):
        fi.plotting.plot_curves(data, curves, grid, ncols=0)


def test_frames_are_matched_by_id_when_the_ids_are_positions_in_another_order():
    # ids 0..n-1 in another order than the frame's sorted index: by id, not
    # by row
    sim = fi.simulate.sand_paper(n=40, n_obs="4-6", random_state=0)
    data = sim.train.data
    order = np.arange(len(data))[::-1]
    shuffled = fi.IrregularData.from_long(
        data.to_long().set_index("id").loc[order].reset_index()
    )
    imp = fi.KernelImputer(grid=sim.grid).fit(data).set_output(transform="pandas")
    curves = imp.transform(shuffled).sort_index()
    fig = fi.plotting.plot_curves(shuffled, curves, sim.grid, subjects=[5])
    drawn = [
        line.get_ydata()
        for line in fig.axes[0].get_lines()
        if line.get_label() == "imputed"
    ]
    np.testing.assert_array_equal(drawn[0], curves.loc[5].to_numpy())
