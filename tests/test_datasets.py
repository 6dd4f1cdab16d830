import numpy as np
import pytest
from numpy.testing import assert_array_equal

from fdaimpute.datasets import load_uk_electricity


@pytest.mark.parametrize(
    "level, lo, hi", [("dense", 30, 30), ("8-12", 8, 12), ("ssparse", 3, 5)]
)
def test_uk_electricity_levels(level, lo, hi):
    uk = load_uk_electricity(level)
    assert len(uk.data) == 5494
    assert uk.data.n_obs.min() == lo and uk.data.n_obs.max() == hi
    # Half-hour k of 0..95 sits at k / 95.
    k = uk.data.times * 95
    assert np.allclose(k, np.rint(k)) and k.min() >= 0 and k.max() <= 95
    assert uk.data.values.min() >= 0
    assert len(uk.train) + len(uk.validation) + len(uk.test) == 5494
    assert_array_equal(uk.test.ids, np.arange(5494 - len(uk.test), 5494))


def test_uk_electricity_bad_level():
    with pytest.raises(ValueError, match="n_obs"):
        load_uk_electricity("medium")


def test_framingham_loader():
    from fdaimpute.datasets import load_framingham

    fram = load_framingham()
    data = fram.data
    assert len(data) == 889
    assert data.n_obs.min() == 3 and data.n_obs.max() == 11
    # ages 40..60 one year apart: 21 distinct times k / 20
    k = data.times * 20
    assert np.allclose(k, np.rint(k)) and np.unique(np.rint(k)).size == 21
    assert np.isfinite(data.values).all()
    assert len(fram.train) + len(fram.validation) + len(fram.test) == 889
    assert_array_equal(fram.test.ids, np.arange(889 - len(fram.test), 889))


def test_framingham_matches_the_shared_csv():
    import csv
    from pathlib import Path

    from fdaimpute.datasets import load_framingham

    folder = Path(__file__).resolve().parents[2] / "shared" / "data" / "framingham"
    if not folder.exists():
        pytest.skip("the shared Framingham CSVs are not on this machine")
    with open(folder / "T_obs.csv") as t_file, open(folder / "X_obs.csv") as x_file:
        rows = list(zip(csv.reader(t_file), csv.reader(x_file)))
    data = load_framingham().data
    for i, (t_row, x_row) in enumerate(rows):
        n = int(x_row[0])
        times = np.array(t_row[:n], dtype=float)
        values = np.array(x_row[1 : n + 1], dtype=float)
        lo, hi = data.offsets[i], data.offsets[i + 1]
        got_t, got_y = data.times[lo:hi], data.values[lo:hi]
        # the one duplicated visit (participant 602) is averaged
        expect_t = np.unique(times)
        expect_y = np.array([values[times == t].mean() for t in expect_t])
        assert_array_equal(got_t, expect_t)
        np.testing.assert_allclose(got_y, expect_y, rtol=0, atol=1e-15)
