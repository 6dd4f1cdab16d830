"""Regression tests of numerical fixes (issue 13, items 3, 5, 6; issue 18.6).

PACE's randomness follows ``random_state``; PACE's derivative is the
derivative of the curve ``transform`` returns, in both modes; ``mean_`` is
the mean on ``grid_``; SAND's whitened grid features and identity start
are computed in float64; a difference noise estimate that underflows is
left out, without warnings, by every imputer that caps its noise with it.
"""

import numpy as np
import pytest
from sklearn.base import clone

from fdaimpute import FACEImputer, IrregularData, KernelImputer
from fdaimpute._numerics.noise_difference import (
    difference_estimate,
    difference_estimate_or_none,
)
from fdaimpute.pace import PACEImputer
from fdaimpute.simulate import BasisProcess, sample


def _small_sample(n=12, seed=3):
    """Few noisy subjects: the mean-bandwidth CV depends on the folds."""
    rng = np.random.default_rng(seed)
    times, values = [], []
    for _ in range(n):
        t = np.sort(rng.uniform(0, 1, 6))
        shift = rng.normal(0, 1.0)
        values.append(np.sin(2 * np.pi * t) + shift + rng.normal(0, 0.5, t.size))
        times.append(t)
    return IrregularData.from_lists(times, values)


def _mean_cv(random_state):
    return PACEImputer(
        bandwidth_mean="cv",
        bandwidth_cov=0.2,
        n_components=2,
        random_state=random_state,
    )


# ---------------------------------------------------------------------- #
# item 3: random_state drives every random choice of the PACE fit


def test_pace_mean_bandwidth_cv_folds_follow_random_state():
    data = _small_sample()
    chosen = {_mean_cv(seed).fit(data).bandwidth_mean_ for seed in range(8)}
    # twelve subjects in five folds: the folds change the chosen bandwidth
    assert len(chosen) > 1


def test_pace_same_int_random_state_gives_identical_fits():
    data = _small_sample()
    a, b = _mean_cv(5).fit(data), _mean_cv(5).fit(data)
    assert a.bandwidth_mean_ == b.bandwidth_mean_
    np.testing.assert_array_equal(a.transform(data), b.transform(data))
    # the held-out-point CV too, together with the mean folds
    full = dict(bandwidth_mean="cv", random_state=2)
    c = PACEImputer(**full).fit(data)
    d = PACEImputer(**full).fit(data)
    assert c.bandwidth_cov_ == d.bandwidth_cov_
    np.testing.assert_array_equal(c.transform(data), d.transform(data))


def test_pace_random_state_instance_is_drawn_from():
    data = _small_sample()
    seeded = [_mean_cv(seed).fit(data).bandwidth_mean_ for seed in range(4)]
    states = [np.random.RandomState(seed) for seed in range(4)]
    assert [_mean_cv(rs).fit(data).bandwidth_mean_ for rs in states] == seeded


# ---------------------------------------------------------------------- #
# item 5: derivative is the derivative of the returned curve


def _uneven_sim():
    r2 = np.sqrt(2.0)

    def basis(t):
        t = np.asarray(t, dtype=float)
        return np.stack([r2 * np.sin(2 * np.pi * t), r2 * np.cos(2 * np.pi * t)], -1)

    process = BasisProcess(
        lambda t: np.sin(3 * t) + t, basis, [1.0, 0.4], scores="gauss", noise_sd=0.3
    )
    return sample(process, 300, "4-8", random_state=1, split=(1.0, 0.0, 0.0))


@pytest.fixture(scope="module")
def uneven():
    return _uneven_sim().train.data


def _central_difference(est, data, t, eps):
    up = est.predict_at(data, t + eps)
    down = est.predict_at(data, t - eps)
    return (up - down) / (2 * eps)


def test_pace_default_derivative_is_derivative_of_curve(uneven):
    est = PACEImputer(
        bandwidth_cov=(0.3, 0.1), n_components=2, extrapolate=True, random_state=0
    ).fit(uneven)
    lo, hi = est.time_range_
    # inside the range, and beyond it (eigenfunctions are constant there)
    t = np.concatenate([np.linspace(lo + 0.013, hi - 0.017, 40), [hi + 0.05]])
    data = uneven[:8]
    deriv = est.derivative(data, grid=t)
    fd = _central_difference(est, data, t, 1e-5)
    scale = np.max(np.abs(fd))
    # rounding of a central difference ~1e-11: the slope of the
    # local-linear mean (not its derivative) is off by far more
    np.testing.assert_allclose(deriv, fd, atol=1e-6 * scale, rtol=0)


def test_pace_fdapace_derivative_is_slope_of_interpolated_curve(uneven):
    est = PACEImputer.fdapace(n_components=2, extrapolate=True).fit(uneven)
    w = est.work_grid_
    data = uneven[:8]
    # midpoints of the work-grid segments and quarter points: the returned
    # curve is linear there, so a central difference is exact
    t = np.sort(np.concatenate([(w[:-1] + w[1:]) / 2, w[:-1] + 0.25 * np.diff(w)]))
    deriv = est.derivative(data, grid=t)
    eps = 1e-3 * np.min(np.diff(w))
    fd = _central_difference(est, data, t, eps)
    np.testing.assert_allclose(deriv, fd, atol=1e-7 * np.max(np.abs(fd)), rtol=0)
    # the curve from transform is the interpolated one; at a knot the slope
    # is the segment to its right, beyond the work grid it is zero
    knots = w[10:12]
    curve = est.predict_at(data, w[10:13])
    right = np.diff(curve, axis=1) / np.diff(w[10:13])
    np.testing.assert_allclose(est.derivative(data, grid=knots), right, rtol=1e-9)
    outside = est.derivative(data, grid=w[-1] + np.array([0.05, 0.1]))
    np.testing.assert_array_equal(outside, 0.0)


# ---------------------------------------------------------------------- #
# issue 18.6: mean_ is the mean on grid_


@pytest.mark.parametrize("fdapace", [False, True])
def test_pace_mean_is_on_output_grid(uneven, fdapace):
    params = dict(grid=37, n_components=2)
    if fdapace:
        est = PACEImputer.fdapace(**params).fit(uneven)
    else:
        est = PACEImputer(bandwidth_cov=(0.3, 0.1), random_state=0, **params)
        est.fit(uneven)
    assert est.mean_.shape == est.grid_.shape == (37,)
    assert est.mean_work_.shape == est.work_grid_.shape == (est.n_work_grid,)
    # a subject observed on its mean has zero scores: its curve is mean_
    idx = [5, 20, 40]
    on_mean = IrregularData.from_lists([est.work_grid_[idx]], [est.mean_work_[idx]])
    assert np.max(np.abs(est.scores(on_mean))) < 1e-6
    np.testing.assert_allclose(est.transform(on_mean)[0], est.mean_, atol=1e-6)
    # and the mean on grid_ agrees with the work-grid mean between its points
    np.testing.assert_allclose(
        est.mean_,
        np.interp(est.grid_, est.work_grid_, est.mean_work_),
        atol=1e-3 * np.ptp(est.mean_work_),
    )
    refit = clone(est).set_params(grid=est.work_grid_).fit(uneven)
    np.testing.assert_allclose(refit.mean_, refit.mean_work_, rtol=1e-12)


# ---------------------------------------------------------------------- #
# item 6: SAND's whitening and identity start use float64 grid features


def _whitened_reference(grid, dim, scale, base):
    """Ridge-whitened sinusoidal features, all in float64 NumPy."""
    k = np.arange(dim // 2)
    angle = scale * grid[:, None] * base ** (-2.0 * (k + 1.0) / dim)
    enc = np.stack([np.sin(angle), np.cos(angle)], axis=-1).reshape(grid.size, dim)
    evals, evecs = np.linalg.eigh(enc.T @ enc / grid.size)
    ridge = 1e-4 * evals.max()
    return enc @ ((evecs / np.sqrt(np.clip(evals, 0, None) + ridge)) @ evecs.T)


def test_sand_grid_features_are_float64_accurate():
    torch = pytest.importorskip("torch")
    from fdaimpute.nn import SANDLayer, sinusoidal_encoding

    m, dim, scale, base = 101, 120, np.pi * 50, 100.0
    grid64 = np.linspace(0, 1, m)
    ref = _whitened_reference(grid64, dim, scale, base)
    layer = SANDLayer(2, 8, dim, encoding_scale=scale, encoding_base=base).double()
    feats = layer.grid_features(torch.tensor(grid64)).numpy()
    assert feats.dtype == np.float64
    err = np.max(np.abs(feats - ref)) / np.max(np.abs(ref))
    assert err < 1e-10
    # a float32 encoding, even whitened in float64, is far off: the
    # whitening amplifies its rounding in the small eigen-directions
    enc32 = sinusoidal_encoding(
        torch.tensor(grid64, dtype=torch.float32), dim, scale, base
    )
    enc = enc32.double().numpy()
    evals, evecs = np.linalg.eigh(enc.T @ enc / m)
    inv = (evecs / np.sqrt(np.clip(evals, 0, None) + 1e-4 * evals.max())) @ evecs.T
    assert np.max(np.abs(enc @ inv - ref)) / np.max(np.abs(ref)) > 1e-7
    # the float32 layer gets the float64 features rounded once
    layer32 = SANDLayer(2, 8, dim, encoding_scale=scale, encoding_base=base)
    f32 = layer32.grid_features(torch.linspace(0, 1, m, dtype=torch.float64))
    assert f32.dtype == torch.float32
    np.testing.assert_allclose(f32.numpy(), ref, rtol=0, atol=1e-6 * np.abs(ref).max())


# ---------------------------------------------------------------------- #
# the difference noise estimate where its sums underflow


def _lags_over_many_orders(n=60, seed=0):
    """Three visits within 5e-100 of time 0 and three over [0, 1] each: the
    shortest lags underflow the difference estimate's power sums."""
    rng = np.random.default_rng(seed)
    times, values = [], []
    for _ in range(n):
        t = np.sort(np.r_[rng.uniform(0, 1, 3), 1e-100 * rng.uniform(1, 5, 3)])
        times.append(t)
        values.append(np.sin(3 * t) + rng.normal(0, 0.1, t.size))
    return IrregularData.from_lists(times, values)


def test_difference_estimate_that_underflows_is_none():
    data = _lags_over_many_orders()
    subject = data.subject_index
    with np.errstate(all="ignore"):
        assert np.isnan(difference_estimate(data.times, data.values, subject))
    assert difference_estimate_or_none(data.times, data.values, subject) is None


@pytest.mark.parametrize(
    "imputer",
    [PACEImputer(random_state=0), FACEImputer(), KernelImputer()],
    ids=["pace", "face", "kernel"],
)
def test_underflowing_difference_estimate_leaves_the_fitted_noise(imputer):
    # the suite turns fdaimpute's RuntimeWarnings into errors (setup.cfg)
    fitted = imputer.fit(_lags_over_many_orders())
    assert np.isfinite(fitted.noise_variance_) and fitted.noise_variance_ > 0


def test_underflowing_difference_estimate_leaves_chunked_pace_equal_to_pace():
    data = _lags_over_many_orders()
    whole = PACEImputer(random_state=0).fit(data)
    halves = [data.take(np.arange(30)), data.take(np.arange(30, 60))]
    chunked = PACEImputer(random_state=0).fit_chunks(halves)
    assert np.isfinite(chunked.noise_variance_)
    np.testing.assert_allclose(
        chunked.noise_variance_, whole.noise_variance_, rtol=1e-8
    )
