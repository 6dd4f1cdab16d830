"""Tiny neural-network settings, a known basis, a PACE-model comparison and a
small real data set shared by the test files.

Test files import this module by name (``import _configs``): pytest's default
"prepend" import mode puts ``tests/`` on ``sys.path``. Where a file needs other
values it derives them in the open, e.g. ``dict(_configs.TINY, max_epochs=10)``.
Treat the dicts as read-only: every test file shares them.
"""

from pathlib import Path

import numpy as np
import pandas as pd

import fdaimpute as fi

DATA = Path(__file__).resolve().parent / "data"

# The tiny transformer: width 16, two heads, one encoder and one decoder layer.
TINY_SIZES = dict(
    d_model=16,
    n_heads=2,
    encoder_layers=1,
    decoder_layers=1,
    dim_feedforward=32,
    encoding_dim=8,
)
# The same at width 8.
NARROW_SIZES = dict(TINY_SIZES, d_model=8, dim_feedforward=16)

# VTImputer settings: three epochs of the tiny transformer alone (without the
# default PACE base, which three epochs would rarely beat, so the output would
# be PACE's and the network untested; test_neural_base tests the base), the
# error model calibrated on the held-out subjects only (cross-fitting would
# train five more networks per fit; its tests ask for it).
TINY = dict(
    TINY_SIZES,
    base=None,
    max_epochs=3,
    batch_size=16,
    random_state=0,
    calibration_folds=None,
)
# CNPImputer: two tiny MLPs, three epochs, no cross-fitting to switch off.
CNP_TINY = dict(
    hidden_dim=16, n_layers=1, r_dim=8, max_epochs=3, batch_size=16, random_state=0
)
# SANDImputer's extra layer, small.
SAND_SIZES = dict(sand_head_dim=8, sand_encoding_dim=16)
SAND_TINY = dict(TINY, **SAND_SIZES)


def fourier_basis3(t):
    """Three orthonormal Fourier functions on [0, 1]: a known-eigenfunction basis."""
    t = np.asarray(t, dtype=float)
    r2 = np.sqrt(2.0)
    return np.stack(
        [
            r2 * np.sin(2 * np.pi * t),
            r2 * np.cos(2 * np.pi * t),
            r2 * np.sin(4 * np.pi * t),
        ],
        axis=-1,
    )


# What a PACE model fitted in passes (chunks, partitions) must share with fit.
PACE_FITTED = (
    "mean_",
    "mean_work_",
    "covariance_",
    "eigenvalues_",
    "eigenfunctions_",
    "fve_",
    "noise_variance_",
    "predictor_noise_variance_",
    "bandwidth_mean_",
)


def assert_same_pace_model(a, b, tol=1e-10):
    """Assert two fitted PACEImputers hold the same model, to ``tol``."""
    for name in PACE_FITTED:
        np.testing.assert_allclose(
            getattr(a, name), getattr(b, name), rtol=0, atol=tol, err_msg=name
        )
    assert a.n_components_ == b.n_components_
    np.testing.assert_allclose(a.bandwidth_cov_, b.bandwidth_cov_, rtol=1e-12)
    assert a.time_range_ == b.time_range_
    assert a.n_bins_ == b.n_bins_


def pbcseq():
    """survival's pbcseq: log bilirubin of 312 patients by years since entry."""
    frame = pd.read_csv(DATA / "pbcseq.csv")
    frame["years"] = frame["day"] / 365.25
    frame["log_bili"] = np.log(frame["bili"])
    return fi.IrregularData.from_long(frame, id="id", time="years", value="log_bili")


def subsample(data, n, seed=None):
    """The stability benchmark's ``n`` subjects of ``data`` (its seed is ``n``
    for the fixed draws, ``1000 + split`` for those drawn afresh)."""
    rng = np.random.default_rng(n if seed is None else seed)
    return data.take(np.sort(rng.choice(len(data), n, replace=False)))


def inside_intervals(imputer, visible, hidden, rows):
    """Whether each held-out value lies in ``imputer``'s 95% prediction
    interval (the curve's band widened by the noise at its time), the
    subjects ``visible[rows]`` imputed on the hidden values' times."""
    grid = np.unique(hidden.times)
    curves, sd = imputer.transform(visible[rows], grid=grid, return_std=True)
    subject = np.repeat(np.arange(len(hidden)), hidden.n_obs)
    column = np.searchsorted(grid, hidden.times)
    noise = imputer.noise_variance_at(hidden.times)
    scale = np.sqrt(np.asarray(sd)[subject, column] ** 2 + noise)
    return (
        np.abs(hidden.values - np.asarray(curves)[subject, column]) <= 1.959964 * scale
    )
