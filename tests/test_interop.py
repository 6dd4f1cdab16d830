"""Conversions to and from scikit-fda, and its objects as the imputers' input."""

import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fdaimpute as fi
from fdaimpute.interop import from_skfda, to_fdata_grid, to_fdata_irregular

skfda = pytest.importorskip("skfda")
FDataIrregular = skfda.representation.irregular.FDataIrregular


@pytest.fixture(scope="module")
def fd():
    """Four named subjects with 3 to 5 points each, unsorted within one."""
    rng = np.random.default_rng(0)
    counts = [3, 5, 4, 3]
    points = [np.sort(rng.uniform(0, 1, k)) for k in counts]
    points[1] = points[1][::-1]
    values = [np.sin(6 * p) + rng.normal(0, 0.1, p.size) for p in points]
    return FDataIrregular(
        start_indices=np.cumsum([0, *counts[:-1]]),
        points=np.concatenate(points),
        values=np.concatenate(values),
        sample_names=["s1", "s2", "s3", "s4"],
    )


def test_irregular_round_trip_keeps_values_times_and_ids(fd):
    data = from_skfda(fd)
    assert data.ids.tolist() == ["s1", "s2", "s3", "s4"]
    assert data.n_obs.tolist() == [3, 5, 4, 3]
    for i in range(len(data)):
        t, y = data[i]
        assert_array_equal(
            t, fd.points[fd.start_indices[i] : fd.start_indices[i] + t.size, 0]
        )
        assert_array_equal(
            y, fd.values[fd.start_indices[i] : fd.start_indices[i] + y.size, 0]
        )
    back = to_fdata_irregular(data)
    assert back.sample_names == fd.sample_names
    assert_array_equal(back.start_indices, fd.start_indices)
    assert_array_equal(back.points, fd.points)
    assert_array_equal(back.values, fd.values)
    assert from_skfda(back) == data


def test_unnamed_samples_get_positions_and_partly_named_ones_are_refused(fd):
    unnamed = FDataIrregular(fd.start_indices, fd.points, fd.values)
    assert from_skfda(unnamed).ids.tolist() == [0, 1, 2, 3]
    partly = FDataIrregular(
        fd.start_indices, fd.points, fd.values, sample_names=["a", None, "c", "d"]
    )
    with pytest.raises(ValueError, match="position 1 has a missing id"):
        from_skfda(partly)


def test_grid_rows_become_subjects_without_their_nan():
    matrix = np.array([[1.0, np.nan, 3.0], [np.nan, 5.0, 6.0]])
    fdg = skfda.FDataGrid(matrix, grid_points=[0.0, 0.5, 1.0], sample_names=["x", "y"])
    data = from_skfda(fdg)
    assert data.ids.tolist() == ["x", "y"]
    assert_array_equal(data.times, [0.0, 1.0, 0.5, 1.0])
    assert_array_equal(data.values, [1.0, 3.0, 5.0, 6.0])


def test_imputed_curves_to_grid_keep_grid_values_and_ids(sim):
    imp = fi.KernelImputer(grid=sim.grid).fit(sim.train.data)
    curves = imp.transform(sim.test.data)
    fdg = to_fdata_grid(curves, imp.grid_, ids=sim.test.data.ids)
    assert_array_equal(fdg.grid_points[0], imp.grid_)
    assert_array_equal(fdg.data_matrix[..., 0], curves)
    assert fdg.sample_names == tuple(sim.test.data.ids.tolist())
    frame = imp.set_output(transform="pandas").transform(sim.test.data)
    assert to_fdata_grid(frame, imp.grid_).sample_names == fdg.sample_names
    assert from_skfda(fdg) == fi.IrregularData.from_dense(
        curves, imp.grid_, ids=sim.test.data.ids
    )


def test_fit_on_converted_data_equals_fit_on_the_original(sim):
    fd_train = to_fdata_irregular(sim.train.data)
    fd_test = to_fdata_irregular(sim.test.data)
    pace = fi.PACEImputer(random_state=0, n_work_grid=31)
    direct = pace.fit(sim.train.data).transform(sim.test.data)
    via_skfda = fi.PACEImputer(random_state=0, n_work_grid=31).fit(fd_train)
    assert_array_equal(via_skfda.transform(fd_test), direct)
    assert_array_equal(
        via_skfda.transform(from_skfda(fd_test)), via_skfda.transform(sim.test.data)
    )


def test_fdatagrid_is_read_like_a_wide_matrix_at_its_grid_points():
    rng = np.random.default_rng(1)
    grid = np.linspace(0, 2, 9)
    matrix = np.sin(grid) + rng.normal(0, 0.1, (30, grid.size))
    matrix[rng.random(matrix.shape) < 0.4] = np.nan
    ids = [f"p{i}" for i in range(30)]
    fdg = skfda.FDataGrid(matrix, grid_points=grid, sample_names=ids)
    imp = fi.KernelImputer().set_output(transform="pandas")
    out = imp.fit_transform(fdg)
    assert_array_equal(imp.grid_, grid)
    assert out.index.tolist() == ids
    expected = fi.KernelImputer(grid=grid).fit_transform(matrix)
    assert_allclose(out.to_numpy(), expected)


def test_bad_inputs_are_named():
    with pytest.raises(TypeError, match="FDataIrregular or FDataGrid, got list"):
        from_skfda([1, 2])
    with pytest.raises(TypeError, match="to_fdata_grid"):
        to_fdata_irregular(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"shape \(2, 3\) and a grid of shape \(4,\)"):
        to_fdata_grid(np.zeros((2, 3)), np.arange(4.0))
    with pytest.raises(ValueError, match="one entry per row"):
        to_fdata_grid(np.zeros((2, 3)), np.arange(3.0), ids=["a"])
    surface = skfda.FDataGrid(np.zeros((2, 3, 3)), grid_points=[[0, 1, 2], [0, 1, 2]])
    with pytest.raises(ValueError, match="dim_domain=2"):
        from_skfda(surface)


def test_missing_skfda_raises_an_import_error_naming_the_extra():
    code = (
        "import sys; sys.modules['skfda'] = None\n"
        "import fdaimpute as fi\n"
        "from fdaimpute.interop import to_fdata_grid\n"
        "fi.KernelImputer().fit([([0.0, 1.0], [1.0, 2.0])] * 3)\n"
        "try:\n"
        "    to_fdata_grid([[0.0]], [0.0])\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert "pip install 'fdaimpute[skfda]'" in out.stdout
