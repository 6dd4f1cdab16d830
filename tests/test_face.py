"""FACEImputer: the fast pair statistics, the GCV path, known covariances, the API."""

import warnings

import _configs
import numpy as np
import pytest
from sklearn.base import clone

import fdaimpute as fi
from fdaimpute._face.fit import fit_face
from fdaimpute._face.moments import pair_moments
from fdaimpute._face.penalized import PenalizedPath
from fdaimpute._fpca.eigen import eigen_analysis
from fdaimpute._fpca.spline_bands import held_out_bands
from fdaimpute._fpca.splines import design, difference_penalty, equal_knots
from fdaimpute.face import _OPTIONS as FACE_OPTIONS
from fdaimpute.face import FACEImputer
from fdaimpute.metrics import split_held_out


@pytest.fixture(scope="module")
def low_rank():
    """Three Fourier eigenfunctions with variances 1, 0.5, 0.25, noise SD 0.1."""
    process = fi.simulate.BasisProcess(
        mean=lambda t: 1.0 + np.sin(np.pi * t),
        basis=_configs.fourier_basis3,
        score_var=[1.0, 0.5, 0.25],
        scores="gauss",
        noise_sd=0.1,
    )
    sim = fi.simulate.sample(
        process, 3000, "6-10", split=(0.8, 0.1, 0.1), random_state=1
    )
    return sim, FACEImputer(grid=sim.grid).fit(sim.train.data)


def _brute_force_pairs(times, resid, offsets, knots, degree):
    """Design rows vec(b(s) b(t)^T) and products of every unordered pair j < k."""
    b = design(times, knots, degree).toarray()
    rows, y = [], []
    for i in range(offsets.size - 1):
        for j in range(offsets[i], offsets[i + 1]):
            for k in range(j + 1, offsets[i + 1]):
                rows.append(np.outer(b[j], b[k]).ravel())
                y.append(resid[j] * resid[k])
    return np.array(rows), np.array(y)


@pytest.mark.parametrize("decimals", [None, 1])  # distinct times, or repeated
def test_pair_moments_equal_the_explicit_pair_regression(decimals):
    rng = np.random.default_rng(0)
    counts = np.array([1, 4, 2, 6, 3])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    times = rng.uniform(0, 1, offsets[-1])
    if decimals is not None:
        times = np.round(times, decimals)
    resid = rng.normal(size=offsets[-1])
    knots = equal_knots(0.0, 1.0, 7, 3)
    x, y = _brute_force_pairs(times, resid, offsets, knots, 3)
    # each unordered pair enters symmetrised: half (s, t) and half (t, s)
    swap = np.arange(49).reshape(7, 7).T.ravel()
    xs = (x + x[:, swap]) / 2
    got, diagonal = pair_moments(times, resid, offsets, knots, 3)
    assert got.n_pairs == len(y)
    assert got.yty == pytest.approx(y @ y)
    np.testing.assert_allclose(got.xty, xs.T @ y, atol=1e-12)
    np.testing.assert_allclose(
        got.xtx, (x.T @ x + x[:, swap].T @ x[:, swap]) / 2, atol=1e-12
    )
    b = design(times, knots, 3).toarray()
    xd = np.einsum("ja,jb->jab", b, b).reshape(-1, 49)
    np.testing.assert_allclose(diagonal.xtx, xd.T @ xd, atol=1e-12)
    np.testing.assert_allclose(diagonal.xty, xd.T @ resid**2, atol=1e-12)
    np.testing.assert_allclose(diagonal.basis_sum, xd.sum(0), atol=1e-12)
    assert diagonal.yty == pytest.approx(np.sum(resid**4))


def test_pair_moments_do_not_depend_on_the_blocks(monkeypatch, low_rank):
    from fdaimpute._face import moments

    data = low_rank[0].train.data
    args = (data.times, data.values, data.offsets, equal_knots(0.0, 1.0, 9, 3), 3)
    whole = pair_moments(*args)
    monkeypatch.setattr(moments, "_BLOCK_OBS", 997)
    blocked = pair_moments(*args)
    for one, other in zip(whole, blocked):
        np.testing.assert_allclose(one.xtx, other.xtx, rtol=1e-10, atol=1e-8)
        np.testing.assert_allclose(one.xty, other.xty, rtol=1e-10, atol=1e-8)
        assert one.yty == pytest.approx(other.yty)


def test_penalized_path_matches_a_direct_solve_and_gcv():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(60, 8))
    y = rng.normal(size=60)
    penalty = difference_penalty(8, 2)
    path = PenalizedPath(x.T @ x, x.T @ y, y @ y, 60, penalty)
    lam = 3.0
    direct = np.linalg.solve(x.T @ x + lam * penalty, x.T @ y)
    hat = x @ np.linalg.solve(x.T @ x + lam * penalty, x.T)
    rss = np.sum((y - hat @ y) ** 2)
    fit = path.fit(lam)
    np.testing.assert_allclose(fit.coef, direct, rtol=1e-8)
    assert fit.df == pytest.approx(np.trace(hat))
    assert fit.gcv == pytest.approx(60 * rss / (60 - np.trace(hat)) ** 2)
    chosen = path.select()
    assert chosen.gcv <= min(path.criterion(v) for v in np.logspace(-4, 4, 41))


@pytest.mark.parametrize("lam", [1e-3, 1.0, 1e3])
def test_penalized_path_is_exact_where_the_data_leave_coefficients_free(lam):
    # twelve of twenty coefficients have no data (X^T X of rank 8): the
    # penalty alone determines them. A factor of X^T X alone (plus a tiny
    # ridge) made these fits follow the rounding of the BLAS, so that FACE's
    # surface changed with the machine's processor
    rng = np.random.default_rng(2)
    x = np.zeros((60, 20))
    x[:, :8] = rng.normal(size=(60, 8))
    y = rng.normal(size=60)
    penalty = difference_penalty(20, 2)
    path = PenalizedPath(x.T @ x, x.T @ y, y @ y, 60, penalty)
    system = x.T @ x + lam * penalty
    direct = np.linalg.solve(system, x.T @ y)
    hat = x @ np.linalg.solve(system, x.T)
    fit = path.fit(lam)
    np.testing.assert_allclose(fit.coef, direct, rtol=1e-9, atol=1e-12)
    assert fit.df == pytest.approx(np.trace(hat), rel=1e-10)
    rss = np.sum((y - hat @ y) ** 2)
    assert fit.gcv == pytest.approx(60 * rss / (60 - np.trace(hat)) ** 2, rel=1e-10)


def test_recovers_a_known_low_rank_covariance(low_rank):
    sim, face = low_rank
    truth = sim.process.covariance(sim.grid, sim.grid)
    error = np.linalg.norm(face.covariance_ - truth) / np.linalg.norm(truth)
    assert error < 0.12
    np.testing.assert_allclose(face.eigenvalues_[:3], [1.0, 0.5, 0.25], rtol=0.15)
    assert face.eigenvalues_[3:].sum() < 0.1
    np.testing.assert_allclose(face.mean_, sim.process.mean(sim.grid), atol=0.15)


def test_subject_cross_validation_of_lambda_also_recovers_it(low_rank):
    sim, face = low_rank
    cv = FACEImputer(grid=sim.grid, lambda_cov="cv").fit(sim.train.data)
    truth = sim.process.covariance(sim.grid, sim.grid)
    error = np.linalg.norm(cv.covariance_ - truth) / np.linalg.norm(truth)
    assert error < 0.12
    assert cv.lambda_cov_ != face.lambda_cov_


def test_random_lines_are_predicted_almost_as_well_as_by_the_oracle():
    # a random intercept and slope: the covariance lies in the null space of
    # the penalty, so the surface is unbiased whatever lambda GCV picks
    process = fi.simulate.BasisProcess(
        mean=lambda t: 2.0 - t,
        basis=lambda t: np.stack([np.ones_like(t), np.sqrt(12) * (t - 0.5)], -1),
        score_var=[1.0, 0.5],
        scores="gauss",
        noise_sd=0.3,
    )
    sim = fi.simulate.sample(
        process, 1000, "3-5", split=(0.8, 0.1, 0.1), random_state=1
    )
    face = FACEImputer(grid=sim.grid).fit(sim.train.data)
    np.testing.assert_allclose(face.eigenvalues_, [1.0, 0.5], rtol=0.2)
    oracle = fi.oracle.ConditionalMean(process, grid=sim.grid)
    err = fi.metrics.mse(sim.test.truth, face.transform(sim.test.data))
    best = fi.metrics.mse(sim.test.truth, oracle.transform(sim.test.data))
    assert err < 1.2 * best


def test_covariance_is_symmetric_positive_semidefinite_and_eigen_exact(low_rank):
    sim, face = low_rank
    cov = face.covariance_
    np.testing.assert_allclose(cov, cov.T, atol=1e-12)
    assert np.linalg.eigvalsh(cov).min() > -1e-10
    fine = np.linspace(0, 1, 2001)
    values, _ = eigen_analysis(face._model.covariance_on(fine), fine, max_components=3)
    np.testing.assert_allclose(face._model.eigenvalues[:3], values[:3], rtol=1e-4)


def test_std_is_the_gaussian_conditional_sd_under_the_fitted_model(low_rank):
    sim, _ = low_rank
    face = FACEImputer(grid=sim.grid, n_basis=12, n_components=50)
    with pytest.warns(UserWarning, match="n_components=50"):
        face.fit(sim.train.data)
    face._model.band_profile = None  # the held-out points' time profile aside
    subject = sim.test.data[:1]
    t = subject.times
    # the fitted model in the data's units (all its components are used)
    mean_at, phi = face._mean_and_basis(np.concatenate([sim.grid, t]))
    assert phi.shape[1] == face._model.eigenvalues.size
    cov = (phi * face.eigenvalues_) @ phi.T
    g = sim.grid.size
    k_yy = cov[g:, g:] + face.predictor_noise_variance_ * np.eye(t.size)
    k_gy = cov[:g, g:]
    resid = subject.values - mean_at[g:]
    mean = mean_at[:g] + k_gy @ np.linalg.solve(k_yy, resid)
    var = np.diag(cov[:g, :g] - k_gy @ np.linalg.solve(k_yy, k_gy.T))
    curves, std = face.transform(subject, return_std=True)
    np.testing.assert_allclose(curves[0], mean, atol=1e-8)
    np.testing.assert_allclose(std[0] ** 2, var, atol=1e-8)


def test_std_counts_the_left_out_components(low_rank):
    sim, _ = low_rank
    full = FACEImputer(grid=sim.grid, n_basis=12, n_components=1)
    _, std = full.fit(sim.train.data).transform(sim.test.data, return_std=True)
    model = full._model
    rest = slice(1, None)
    phi = model.eigenfunctions_at(sim.grid, components=rest)
    floor = np.sqrt((phi**2) @ model.eigenvalues[rest])
    # the second component's variance is not explained by a one-component fit
    assert (std.mean(0) > 0.5 * floor).all()
    assert std.mean() > 0.3


def test_random_constants_are_recovered_from_one_noise_free_point():
    # every subject at the same three times: the mean is exactly the average
    # level and every raw covariance the same constant, so the fit is exact
    rng = np.random.default_rng(2)
    level = rng.normal(size=100)
    times = np.array([0.0, 0.5, 1.0])
    data = [(times, np.full(3, c)) for c in level]
    face = FACEImputer(grid=11, n_basis=8, lambda_mean=1.0, lambda_cov=1.0)
    face.fit(data)
    assert face.n_components_ == 1
    assert face.eigenvalues_[0] == pytest.approx(np.var(level), rel=1e-5)
    new = [(np.array([0.5]), np.array([2.5]))]
    # the conditional expectation, shrunk by the predictor's noise variance
    # (chosen on held-out refits, tiny here)
    lam, s2 = face.eigenvalues_[0], face.predictor_noise_variance_
    mean = np.mean(level)
    expected = mean + lam / (lam + s2) * (2.5 - mean)
    assert s2 < 1e-4 * lam
    np.testing.assert_allclose(face.transform(new), expected, atol=1e-5)


def test_a_common_line_is_the_mean_with_no_components():
    rng = np.random.default_rng(3)
    data = []
    for _ in range(50):
        t = np.sort(rng.uniform(0, 2, 4))
        data.append((t, 2.0 + 3.0 * t))
    face = FACEImputer(grid=np.linspace(0.1, 1.9, 7), n_basis=8).fit(data)
    assert face.n_components_ == 0
    np.testing.assert_allclose(face.mean_, 2.0 + 3.0 * face.grid_, atol=1e-8)
    np.testing.assert_allclose(face.transform(data[:3]), np.tile(face.mean_, (3, 1)))
    np.testing.assert_allclose(face.derivative(data[:3]), 3.0, atol=1e-6)


def test_derivative_matches_finite_differences(low_rank):
    sim, face = low_rank
    data = sim.test.data[:5]
    grid = np.linspace(0.1, 0.9, 9)
    eps = 1e-5
    numeric = (
        face.transform(data, grid=grid + eps) - face.transform(data, grid=grid - eps)
    ) / (2 * eps)
    np.testing.assert_allclose(face.derivative(data, grid=grid), numeric, atol=1e-4)


def test_predict_at_agrees_with_transform(low_rank):
    sim, face = low_rank
    data = sim.test.data[:4]
    times = [np.array([0.5, 0.1]), np.array([]), np.array([0.9]), np.array([0.2])]
    got = face.predict_at(data, times)
    curves = face.transform(data, grid=np.array([0.1, 0.2, 0.5, 0.9]))
    np.testing.assert_allclose(got[0], curves[0, [2, 0]])
    np.testing.assert_allclose(got[2], curves[2, [3]])
    assert got[1].size == 0


def test_extrapolation_holds_eigenfunctions_and_continues_the_mean(low_rank):
    sim, face = low_rank
    ahead = face.set_params(extrapolate=True)
    try:
        grid = np.array([1.0, 1.1, 1.3])
        curves, std = ahead.transform(sim.test.data[:3], grid=grid, return_std=True)
        # the model's mean slope at the end, in the data's units
        lo, span, _, spread = ahead._scale
        end = np.array([(1.0 - lo) / span])
        slope = ahead._model.mean_at(end, derivative=1)[0] * spread / span
        step = np.tile(slope * np.diff(grid), (3, 1))
        np.testing.assert_allclose(np.diff(curves, axis=1), step)
        np.testing.assert_allclose(std[:, 1:], std[:, [0, 0]])
        deriv = ahead.derivative(sim.test.data[:3], grid=grid)
        np.testing.assert_allclose(deriv[:, 1:], np.full((3, 2), slope))
    finally:
        face.set_params(extrapolate=False)


def test_a_fixed_lambda_reproduces_the_gcv_fit(low_rank):
    sim, face = low_rank
    fixed = FACEImputer(
        grid=sim.grid, lambda_cov=face.lambda_cov_, lambda_mean=face.lambda_mean_
    ).fit(sim.train.data)
    np.testing.assert_allclose(fixed.covariance_, face.covariance_, atol=1e-10)
    rough = FACEImputer(grid=sim.grid, lambda_cov=face.lambda_cov_ * 1e-4)
    assert rough.fit(sim.train.data).df_cov_ > face.df_cov_


def test_save_load_and_clone(tmp_path, low_rank):
    sim, face = low_rank
    path = tmp_path / "face.fdaimpute"
    face.save(path)
    same = FACEImputer.load(path)
    np.testing.assert_array_equal(
        same.transform(sim.test.data), face.transform(sim.test.data)
    )
    fresh = clone(face)
    assert fresh.n_basis == face.n_basis
    np.testing.assert_array_equal(fresh.grid, face.grid)
    assert not hasattr(fresh, "covariance_")


@pytest.mark.parametrize(
    "params, error, match",
    [
        (dict(n_basis=3.5), TypeError, "n_basis"),
        (dict(n_basis=3), ValueError, "n_basis=3 is too small"),
        (dict(lambda_cov="aic"), ValueError, "lambda_cov"),
        (dict(lambda_mean=-1.0), ValueError, "lambda_mean"),
        (dict(n_components=0), ValueError, "n_components"),
        (dict(fve_threshold=1.5), ValueError, "fve_threshold"),
        (dict(degree=0), ValueError, "degree"),
    ],
)
def test_bad_parameters_are_refused(params, error, match, low_rank):
    sim, _ = low_rank
    with pytest.raises(error, match=match):
        FACEImputer(**params).fit(sim.train.data[:50])


def test_subjects_with_one_observation_each_are_refused():
    data = [(np.array([t]), np.array([t])) for t in np.linspace(0, 1, 20)]
    with pytest.raises(ValueError, match="no subject has two observations"):
        FACEImputer(n_basis=6).fit(data)


def test_bands_cover_the_true_curves_on_a_rough_process():
    # the SAND process's covariance has a kink on the diagonal that the spline
    # surface cannot follow; its noise variance absorbs the lost variance,
    # and the held-out calibration must give it back to the bands
    sim = fi.simulate.sand_paper(n=1000, n_obs="8-12", random_state=0)
    face = FACEImputer(grid=sim.grid).fit(sim.train.data)
    curves, std = face.transform(sim.test.data, return_std=True)
    covered = np.abs(curves - sim.test.truth) <= 1.96 * std
    assert 0.92 <= covered.mean() <= 0.98
    truth = sim.process.noise_sd**2
    assert face.predictor_noise_variance_ > 1.5 * truth
    # the measurement noise is capped below the predictor's
    assert face.noise_variance_ < 0.9 * face.predictor_noise_variance_


def test_a_collapsed_noise_variance_is_lifted_on_the_held_out_points():
    # A fit that puts all the variance in its surface (noise near 0) makes the
    # predictor interpolate each visit; the held-out points must choose a
    # noise variance near the truth, beyond any factor of the collapsed one.
    process = fi.simulate.BasisProcess(
        mean=lambda t: 1.0 + np.sin(np.pi * t),
        basis=_configs.fourier_basis3,
        score_var=[1.0, 0.5, 0.25],
        scores="gauss",
        noise_sd=0.5,
    )
    data = fi.simulate.sample(process, 200, "4-6", random_state=0).train.data
    options = {name: getattr(FACEImputer(), name) for name in FACE_OPTIONS}
    options.update(lambda_mean="gcv", lambda_cov="gcv")
    collapsed = 1e-6
    args = (data.times, data.values, data.offsets, data.time_range, options, fit_face)
    _, _, noise, _ = held_out_bands(*args, tune_noise=True, noise_variance=collapsed)
    assert 0.05 <= noise <= 0.5  # the truth is 0.25; 32 x collapsed is 3e-5
    _, _, untuned, _ = held_out_bands(*args, tune_noise=False, noise_variance=collapsed)
    assert untuned == collapsed


@pytest.mark.parametrize("imputer", [fi.FACEImputer, fi.MFPCAImputer])
def test_bands_follow_noise_that_grows_over_time(imputer):
    # Measurement noise with SD from 0.1 at the start to 1.3 at the end: one
    # noise variance for all times covered 0.91 (FACE) and 0.875 (mFPCA) of the
    # hidden points of the last third. The held-out refits' time profile
    # widens the late bands (and narrows the early ones).
    sim = fi.simulate.sand_paper(n=300, n_obs="4-6", n_harmonics=3, random_state=0)
    data = sim.train.data
    lo, hi = data.time_range
    share = (data.times - lo) / (hi - lo)
    rng = np.random.default_rng(0)
    noisy = data.with_values(data.values + rng.normal(0, 0.1 + 1.2 * share), data.times)
    visible, hidden, rows = split_held_out(noisy, 0.2, min_keep=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imp = imputer().fit(visible)
    start, end = imp.noise_variance_at(np.array([lo, hi]))
    assert end > 1.3 * start
    inside = _configs.inside_intervals(imp, visible, hidden, rows)
    late = hidden.times >= lo + 2 * (hi - lo) / 3
    assert np.mean(inside[late]) >= 0.92


def test_mean_cross_validated_over_fewer_subjects_than_folds_is_gcv():
    from fdaimpute._face.fit import fit_mean
    from fdaimpute._fpca.splines import equal_knots

    rng = np.random.default_rng(0)
    times = np.sort(rng.uniform(0, 1, 40))
    values = np.sin(2 * np.pi * times) + 0.1 * rng.normal(size=40)
    knots = equal_knots(0.0, 1.0, 12, 3)
    four = np.array([0, 10, 20, 30, 40])
    by_gcv, _ = fit_mean(times, values, knots, 3, 2, "gcv")
    few, _ = fit_mean(times, values, knots, 3, 2, "cv", four)
    assert few.lam == by_gcv.lam
    # with one observation per subject the folds hold out single points, and
    # choose a smoothing near GCV's
    single = np.arange(41)
    by_cv, _ = fit_mean(times, values, knots, 3, 2, "cv", single)
    assert 0.2 < by_cv.df / by_gcv.df < 5
