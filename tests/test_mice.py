import numpy as np
import pytest
from numpy.testing import assert_allclose

import fdaimpute as fi
from fdaimpute import IrregularData, MICEImputer

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def test_observed_cells_are_kept_and_missing_cells_filled():
    sim = fi.simulate.sand_paper(n=200, n_obs="8-12", random_state=0)
    mice = MICEImputer(grid=sim.grid, max_iter=3, random_state=0).fit(sim.train.data)
    curves = mice.transform(sim.test.data)
    assert curves.shape == (len(sim.test.data), 101)
    assert np.isfinite(curves).all()
    col = np.rint(sim.test.data.times * 100).astype(int)
    assert_allclose(curves[sim.test.data.subject_index, col], sim.test.data.values)


def test_recovers_a_perfectly_correlated_design():
    # Every curve is a multiple of one shape: each bin predicts the others exactly.
    rng = np.random.default_rng(0)
    shape = np.sin(np.linspace(0, 3, 11)) + 2
    amp = rng.uniform(0.5, 2, size=300)
    X = amp[:, None] * shape
    X_missing = X.copy()
    X_missing[rng.random(X.shape) < 0.3] = np.nan
    X_missing[np.isnan(X_missing).all(axis=1), 0] = X[
        np.isnan(X_missing).all(axis=1), 0
    ]
    data = IrregularData.from_dense(X_missing, np.linspace(0, 1, 11))
    mice = MICEImputer(grid=np.linspace(0, 1, 11), random_state=0).fit(data)
    assert_allclose(mice.transform(data), X, atol=0.05)


def test_between_bins_the_curve_is_linear():
    sim = fi.simulate.sand_paper(n=100, n_obs=30, random_state=0)
    mice = MICEImputer(max_iter=2, random_state=0).fit(sim.train.data)
    grid = np.array([0.10, 0.105, 0.11])
    out = mice.predict_at(sim.test.data, grid)
    assert_allclose(out[:, 1], (out[:, 0] + out[:, 2]) / 2)
