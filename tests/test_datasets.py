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
