"""MFPCAImputer: likelihood and gradient, the optimiser, known answers, the API."""

import numpy as np
import pytest
from sklearn.base import clone

import fdaimpute as fi
from fdaimpute._mfpca.basis import OrthonormalBasis
from fdaimpute._mfpca.fit import barely_seen, n_parameters
from fdaimpute._mfpca.likelihood import SubjectStats, nll_and_gradient, subject_nll
from fdaimpute._mfpca.optimize import maximize_likelihood, qf
from fdaimpute._mfpca.selection import approximate_cv
from fdaimpute.mfpca import MFPCAImputer


def _two_fourier(t):
    t = np.asarray(t, dtype=float)
    r2 = np.sqrt(2.0)
    return np.stack([r2 * np.sin(2 * np.pi * t), r2 * np.cos(2 * np.pi * t)], axis=1)


@pytest.fixture(scope="module")
def rank_two():
    """Two Fourier eigenfunctions with variances 1 and 0.4, noise SD 0.2."""
    process = fi.simulate.BasisProcess(
        mean=lambda t: 1.0 + t,
        basis=_two_fourier,
        score_var=[1.0, 0.4],
        scores="gauss",
        noise_sd=0.2,
    )
    sim = fi.simulate.sample(
        process, 1000, "4-8", split=(0.8, 0.1, 0.1), random_state=3
    )
    return sim, MFPCAImputer(grid=sim.grid).fit(sim.train.data)


def _random_problem(seed=0, n=30, m=6, k=2):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 7, n)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    times = rng.uniform(0, 1, offsets[-1])
    basis = OrthonormalBasis.build(0.0, 1.0, m)
    resid = rng.normal(size=times.size)
    stats = SubjectStats.from_observations(basis.rows(times), resid, offsets)
    coef = qf(rng.normal(size=(m, k)))
    return stats, coef, np.log([0.8, 0.3]), np.log(0.5), basis, (times, resid), offsets


def test_basis_is_orthonormal_in_l2():
    basis = OrthonormalBasis.build(0.0, 2.0, 8)
    t = np.linspace(0.0, 2.0, 20001)
    e = basis.rows(t)
    gram = np.trapezoid(e[:, :, None] * e[:, None, :], t, axis=0)
    np.testing.assert_allclose(gram, np.eye(8), atol=1e-6)


def test_likelihood_equals_the_dense_gaussian_density():
    stats, coef, log_lam, log_s2, basis, (times, resid), offsets = _random_problem()
    e = basis.rows(times)
    p = (coef * np.exp(log_lam)) @ coef.T
    expected = []
    for i in range(offsets.size - 1):
        sl = slice(offsets[i], offsets[i + 1])
        sigma = e[sl] @ p @ e[sl].T + np.exp(log_s2) * np.eye(sl.stop - sl.start)
        _, logdet = np.linalg.slogdet(sigma)
        r = resid[sl]
        expected.append(
            0.5 * (r.size * np.log(2 * np.pi) + logdet + r @ np.linalg.solve(sigma, r))
        )
    np.testing.assert_allclose(
        subject_nll(stats, coef, np.exp(log_lam), np.exp(log_s2)), expected
    )


def test_gradient_matches_finite_differences():
    stats, coef, log_lam, log_s2, *_ = _random_problem(seed=1)
    _, g_c, g_lam, g_s2 = nll_and_gradient(stats, coef, log_lam, log_s2)
    eps = 1e-6

    def value(c=coef, lam=log_lam, s2=log_s2):
        return nll_and_gradient(stats, c, lam, s2)[0]

    rng = np.random.default_rng(2)
    direction = rng.normal(size=coef.shape)
    numeric = (value(c=coef + eps * direction) - value(c=coef - eps * direction)) / (
        2 * eps
    )
    assert np.sum(g_c * direction) == pytest.approx(numeric, rel=1e-5)
    for j in range(2):
        step = np.eye(2)[j] * eps
        numeric = (value(lam=log_lam + step) - value(lam=log_lam - step)) / (2 * eps)
        assert g_lam[j] == pytest.approx(numeric, rel=1e-5)
    numeric = (value(s2=log_s2 + eps) - value(s2=log_s2 - eps)) / (2 * eps)
    assert g_s2 == pytest.approx(numeric, rel=1e-5)


def test_optimiser_decreases_monotonically_and_keeps_c_orthonormal():
    stats, coef, log_lam, log_s2, *_ = _random_problem(seed=4, n=200)
    result = maximize_likelihood(stats, coef, log_lam, log_s2, max_iter=100)
    history = np.array(result.history)
    assert np.all(np.diff(history) <= 1e-9 * np.abs(history[:-1]))
    assert history[-1] < history[0]
    np.testing.assert_allclose(result.coef.T @ result.coef, np.eye(2), atol=1e-10)
    # a stationary point: the Riemannian gradient vanishes
    _, g_c, g_lam, g_s2 = nll_and_gradient(
        stats, result.coef, result.log_lam, result.log_s2
    )
    sym = result.coef.T @ g_c
    riemann = g_c - result.coef @ ((sym + sym.T) / 2)
    scale = stats.count.sum()
    assert np.abs(riemann).max() / scale < 1e-3
    assert np.abs(np.append(g_lam, g_s2)).max() / scale < 1e-3


def test_recovers_a_known_rank_two_covariance_and_noise(rank_two):
    sim, model = rank_two
    assert model.n_components_ == 2  # chosen by BIC
    assert model.bic_[2] < model.bic_[1] and model.bic_[2] < model.bic_[3]
    truth = sim.process.covariance(sim.grid, sim.grid)
    error = np.linalg.norm(model.covariance_ - truth) / np.linalg.norm(truth)
    assert error < 0.1
    np.testing.assert_allclose(model.eigenvalues_, [1.0, 0.4], rtol=0.15)
    assert model.noise_variance_ == pytest.approx(0.04, rel=0.15)
    # FACE's P-spline mean (GCV); its error is sampling error, largest at the ends
    assert np.sqrt(np.mean((model.mean_ - 1.0 - sim.grid) ** 2)) < 0.1
    phi = model.eigenfunctions_
    span = _two_fourier(sim.grid)
    # the fitted eigenfunctions lie in the true span
    coef, *_ = np.linalg.lstsq(span, phi, rcond=None)
    assert np.abs(span @ coef - phi).max() < 0.15


def _reduced_rank_sample(n, m=6, k=2, seed=0):
    """Curves drawn from the reduced-rank model itself, in an ``m``-dim basis."""
    rng = np.random.default_rng(seed)
    coef = qf(rng.normal(size=(m, k)))
    counts = rng.integers(3, 8, n)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    rows = rng.normal(size=(offsets[-1], m))
    scores = rng.normal(size=(n, k)) * np.sqrt([4.0, 1.0][:k])
    subject = np.repeat(np.arange(n), counts)
    resid = np.einsum("om,mk,ok->o", rows, coef, scores[subject])
    resid += rng.normal(0.0, np.sqrt(0.3), resid.size)
    return SubjectStats.from_observations(rows, resid, offsets)


def _fit(stats, k, seed=1):
    start = qf(np.random.default_rng(seed).normal(size=(stats.gram.shape[1], k)))
    return maximize_likelihood(stats, start, np.zeros(k), 0.0, max_iter=500, tol=1e-12)


def test_approximate_cv_matches_exact_leave_one_curve_out():
    stats = _reduced_rank_sample(150)
    fit = _fit(stats, 2)
    approx = approximate_cv(stats, fit.coef, fit.log_lam, fit.log_s2)
    exact = 0.0
    for i in range(len(stats)):
        rest = maximize_likelihood(
            stats.take(np.delete(np.arange(len(stats)), i)),
            fit.coef,
            fit.log_lam,
            fit.log_s2,
            max_iter=500,
            tol=1e-12,
        )
        lam, s2 = np.exp(rest.log_lam), np.exp(rest.log_s2)
        exact += subject_nll(stats.take([i]), rest.coef, lam, s2)[0]
    assert approx.nll == pytest.approx(fit.history[-1], rel=1e-9)
    # the optimism of the in-sample fit, estimated and measured
    assert approx.penalty == pytest.approx(exact - approx.nll, rel=0.2)
    # the model holds, so the penalty is about its number of free parameters
    assert approx.n_parameters == n_parameters(6, 2)
    assert approx.penalty == pytest.approx(approx.n_parameters, rel=0.3)


def test_approximate_cv_is_least_at_the_true_rank():
    stats = _reduced_rank_sample(400, seed=5)
    scores = {}
    for k in (1, 2, 3):
        fit = _fit(stats, k)
        scores[k] = approximate_cv(stats, fit.coef, fit.log_lam, fit.log_s2).score
    assert scores[2] < scores[1] and scores[2] < scores[3]


def test_cv_rule_finds_the_two_real_components(rank_two):
    sim, _ = rank_two
    model = MFPCAImputer(n_components="cv").fit(sim.train.data)
    # the spline basis cannot hold the two sinusoids exactly, so a third
    # component may pick up what they leave; it must be negligible
    assert model.n_components_ >= 2
    assert model.eigenvalues_[2:].sum() < 0.01 * model.eigenvalues_.sum()
    assert model.cv_[2] < model.cv_[1]
    assert set(model.cv_) == set(model.bic_)
    assert not hasattr(
        model.set_params(n_components="bic").fit(sim.train.data[:200]), "cv_"
    )


def test_the_optimum_beats_the_start(rank_two):
    _, model = rank_two
    assert model.loglik_ > model.start_loglik_
    assert model.converged_


def test_predictions_are_close_to_the_oracle(rank_two):
    sim, model = rank_two
    oracle = fi.oracle.ConditionalMean(sim.process, grid=sim.grid)
    truth = sim.test.truth
    mse = np.mean((model.transform(sim.test.data) - truth) ** 2)
    best = np.mean((oracle.transform(sim.test.data) - truth) ** 2)
    assert mse < 1.3 * best


def test_one_row_per_subject_in_order(rank_two):
    sim, model = rank_two
    data = sim.test.data
    curves = model.transform(data)
    assert curves.shape == (len(data), sim.grid.size)
    order = np.arange(len(data))[::-1]
    np.testing.assert_allclose(model.transform(data.take(order)), curves[order])
    assert model.scores(data).shape == (len(data), 2)


def test_std_is_the_gaussian_conditional_sd_under_the_fitted_model(rank_two):
    sim, model = rank_two
    subject = sim.test.data[:1]
    t = subject.times
    # the fitted model in the data's units
    mean_at, phi = model._mean_and_basis(np.concatenate([sim.grid, t]))
    assert phi.shape[1] == model._model.eigenvalues.size
    cov = (phi * model.eigenvalues_) @ phi.T
    g = sim.grid.size
    k_yy = cov[g:, g:] + model.predictor_noise_variance_ * np.eye(t.size)
    k_gy = cov[:g, g:]
    resid = subject.values - mean_at[g:]
    mean = mean_at[:g] + k_gy @ np.linalg.solve(k_yy, resid)
    var = np.diag(cov[:g, :g] - k_gy @ np.linalg.solve(k_yy, k_gy.T))
    curves, std = model.transform(subject, return_std=True)
    np.testing.assert_allclose(curves[0], mean, atol=1e-8)
    # plus the model's own error weighed on held-out refits (no component is
    # left out of a reduced-rank fit), times the held-out time profile
    misfit = model._model.band_misfit * model._scale[3] ** 2
    factor = model._band_factor(sim.grid)
    np.testing.assert_allclose(std[0] ** 2, (var + misfit) * factor, atol=1e-8)


def test_derivative_and_predict_at(rank_two):
    sim, model = rank_two
    data = sim.test.data[:4]
    grid = np.linspace(0.1, 0.9, 9)
    eps = 1e-5
    numeric = (
        model.transform(data, grid=grid + eps) - model.transform(data, grid=grid - eps)
    ) / (2 * eps)
    np.testing.assert_allclose(model.derivative(data, grid=grid), numeric, atol=1e-4)
    got = model.predict_at(data, [grid[[3, 0]], np.array([]), grid[:1], grid[-1:]])
    curves = model.transform(data, grid=grid)
    np.testing.assert_allclose(got[0], curves[0, [3, 0]])
    assert got[1].size == 0


def test_save_load_and_clone(tmp_path, rank_two):
    sim, model = rank_two
    path = tmp_path / "mfpca.fdaimpute"
    model.save(path)
    same = MFPCAImputer.load(path)
    np.testing.assert_array_equal(
        same.transform(sim.test.data), model.transform(sim.test.data)
    )
    fresh = clone(model)
    assert fresh.n_basis == model.n_basis
    assert not hasattr(fresh, "eigenfunctions_")


@pytest.mark.parametrize(
    "params, error, match",
    [
        (dict(n_basis=3.5), TypeError, "n_basis"),
        (dict(n_basis=3), ValueError, "n_basis=3 is too small"),
        (dict(n_components="aic"), ValueError, "n_components"),
        (dict(n_components=0), ValueError, "n_components"),
        (dict(max_iter=0), ValueError, "max_iter"),
        (dict(tol=-1.0), ValueError, "tol"),
        (dict(degree=0), ValueError, "degree"),
    ],
)
def test_bad_parameters_are_refused(params, error, match, rank_two):
    sim, _ = rank_two
    with pytest.raises(error, match=match):
        MFPCAImputer(**params).fit(sim.train.data[:50])


def test_a_given_rank_and_basis_are_fitted_once(rank_two):
    sim, _ = rank_two
    model = MFPCAImputer(n_basis=9, n_components=3).fit(sim.train.data[:300])
    assert model.n_basis_ == 9 and model.n_components_ == 3
    assert list(model.bic_) == [3]
    fine = np.linspace(*model.time_range_, 4001)
    phi = model._model.eigenfunctions_at(fine)
    gram = np.trapezoid(phi[:, :, None] * phi[:, None, :], fine, axis=0)
    np.testing.assert_allclose(gram, np.eye(3), atol=1e-5)


def test_the_cli_offers_it():
    from fdaimpute._cli.methods import method_factories

    _, factory = method_factories()["mfpca"]
    assert isinstance(factory(None, 0, False), MFPCAImputer)


def _visit_times(schedule, n, seed):
    """Each subject's visits: the ``schedule`` times, one uniform late time."""
    rng = np.random.default_rng(seed)
    late = rng.uniform(0.65, 1.0, n)
    return np.sort(np.concatenate([np.tile(schedule, n), late]))


def test_a_basis_the_design_barely_sees_is_recognised():
    scheduled = _visit_times([0.0, 0.2, 0.4, 0.6], 200, 0)
    uniform = np.random.default_rng(1).uniform(0, 1, 1000)
    few_times = np.tile([0.0, 0.3, 0.6, 1.0], 50)

    def seen(size, times):
        return barely_seen(OrthonormalBasis.build(0.0, 1.0, size), times)

    # knots every 0.2 with visits on them: some spline is ~0 at every visit
    # and not 0 between them
    assert seen(8, scheduled) and seen(12, scheduled)
    assert not seen(6, scheduled)
    assert not seen(8, uniform) and not seen(12, uniform)
    # directions never seen at all leave the likelihood flat: harmless
    assert not seen(8, few_times)


def test_auto_basis_stops_before_a_size_the_design_barely_sees(monkeypatch):
    calls = []
    monkeypatch.setattr(
        "fdaimpute._mfpca.fit.barely_seen",
        lambda basis, times: calls.append(basis.size) or basis.size >= 8,
    )
    sim = fi.simulate.sample(
        fi.simulate.BasisProcess(
            mean=lambda t: 1.0 + t,
            basis=_two_fourier,
            score_var=[1.0, 0.4],
            scores="gauss",
            noise_sd=0.2,
        ),
        300,
        "8-12",
        random_state=0,
    )
    model = MFPCAImputer(n_components=2).fit(sim.train.data)
    assert model.n_basis_ == 6 and 8 in calls
    monkeypatch.undo()  # a uniform design sees every size: BIC takes 8 here
    assert MFPCAImputer(n_components=2).fit(sim.train.data).n_basis_ == 8
