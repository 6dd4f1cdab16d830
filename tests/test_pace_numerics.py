"""PACE's numerics on arrays, without an estimator."""

import numpy as np
import pytest
from _configs import fourier_basis3 as _basis
from numpy.testing import assert_allclose
from sklearn.utils import check_random_state

from fdaimpute._fpca.eigen import eigen_analysis
from fdaimpute._fpca.scores import posterior_scores
from fdaimpute._pace.binning import choose_bins
from fdaimpute._pace.cv import select_by_cv
from fdaimpute._pace.numerics import DefaultNumerics, FdapaceNumerics
from fdaimpute.pace import PACEImputer
from fdaimpute.simulate import BasisProcess, sample

LAMBDA = np.array([1.0, 0.5, 0.2])


@pytest.fixture(scope="module")
def sim():
    process = BasisProcess(
        lambda t: 1.0 + t, _basis, LAMBDA, scores="gauss", noise_sd=0.3
    )
    return sample(process, 1000, "6-10", random_state=0, split=(0.9, 0.0, 0.1))


def _arrays(data):
    return data.times, data.values, data.offsets


@pytest.mark.parametrize("numerics_class", [DefaultNumerics, FdapaceNumerics])
def test_each_numerics_recovers_a_known_covariance(sim, numerics_class):
    times, values, offsets = _arrays(sim.train.data)
    grid = np.linspace(times.min(), times.max(), 51)
    numerics = numerics_class("gaussian", grid, True)
    bins = choose_bins(times, "auto", grid.size, grid[0], grid[-1])
    subject = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    rng = check_random_state(0)
    pooled = numerics.pool(times, values, subject, offsets.size - 1, bins, "gcv", rng)
    estimate = numerics.estimate_covariance(pooled, 0.05, 5)
    b = _basis(grid)
    truth = (b * LAMBDA) @ b.T
    # 900 subjects: sampling error of a few tenths at worst, far less on average
    assert np.sqrt(np.mean((estimate.covariance - truth) ** 2)) < 0.2
    assert_allclose(estimate.eigenvalues[:2], LAMBDA[:2], rtol=0.15)
    assert 0 < estimate.noise_variance < 0.3
    assert estimate.eigenfunctions.shape == (grid.size, 5)


@pytest.mark.parametrize("rule", ["trapezoid", "uniform"])
def test_eigen_analysis_of_an_exact_surface(rule):
    grid = np.linspace(0.0, 1.0, 201)
    b = _basis(grid)
    values, phi = eigen_analysis((b * LAMBDA) @ b.T, grid, max_components=3, rule=rule)
    assert_allclose(values[:3], LAMBDA, rtol=1e-2)
    overlap = np.abs(np.trapezoid(phi * b, grid, axis=0))
    assert_allclose(overlap, 1.0, atol=1e-2)


def test_cv_on_arrays_chooses_what_the_estimator_chooses(sim):
    data = sim.train.data
    est = PACEImputer(n_work_grid=31, random_state=3).fit(data)
    grid = np.linspace(*data.time_range, 31)
    numerics = DefaultNumerics("gaussian", grid, True)
    times, values, offsets = _arrays(data)
    bins = choose_bins(times, "auto", grid.size, grid[0], grid[-1])
    bandwidth, k, results = select_by_cv(
        times,
        values,
        offsets,
        bins,
        numerics,
        bandwidth_mean="gcv",
        bandwidth_cov="cv",
        n_components="cv",
        max_k=est.cv_results_["scores_by_k"].size,
        rng=check_random_state(3),
    )
    assert bandwidth == est.bandwidth_cov_
    assert k == est.n_components_
    np.testing.assert_array_equal(results["scores"], est.cv_results_["scores"])


@pytest.mark.parametrize("numerics_class", [DefaultNumerics, FdapaceNumerics])
def test_slopes_are_the_derivative_of_curves(sim, numerics_class):
    est = PACEImputer(
        n_components=3,
        bandwidth_cov=0.1,
        fdapace_compat=numerics_class is FdapaceNumerics,
    ).fit(sim.train.data)
    numerics, model = est._numerics, est._model
    assert type(numerics) is numerics_class
    scores = np.random.default_rng(0).standard_normal((4, 3))
    t = np.linspace(0.013, 0.987, 60)
    h = 1e-6
    slope = (
        numerics.curves(model, scores, t + h) - numerics.curves(model, scores, t - h)
    ) / (2 * h)
    assert_allclose(numerics.slopes(model, scores, t), slope, rtol=1e-4, atol=1e-4)
    assert_allclose(numerics.curves(model, 0 * scores[:1], est.grid_)[0], est.mean_)


def test_woodbury_and_direct_scores_agree():
    rng = np.random.default_rng(1)
    offsets = np.array([0, 2, 9, 15])
    basis = rng.standard_normal((15, 3))
    resid = rng.standard_normal(15)
    args = (resid, basis, offsets, LAMBDA, 0.1)
    fast = posterior_scores(*args, with_cov=True)
    direct = posterior_scores(*args, with_cov=True, woodbury=False)
    for a, b in zip(fast, direct):
        assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("sigma2", [0.1, 0.0])
@pytest.mark.parametrize("time_index", [False, True])
def test_scores_do_not_depend_on_how_subjects_are_cut_for_threads(
    monkeypatch, sigma2, time_index
):
    """Pieces of a few subjects give what one piece gives, bit for bit.

    Without noise the systems' jitter comes from the largest trace of all
    subjects with that count, not of the piece a subject lands in.
    """
    from fdaimpute._fpca import scores as scores_module

    rng = np.random.default_rng(2)
    counts = rng.integers(1, 8, 40)  # some above p (Woodbury), some below
    offsets = np.concatenate([[0], np.cumsum(counts)])
    lam = np.array([1.0, 0.5, 0.2, 0.1, 0.05])
    n_obs = offsets[-1]
    if time_index:
        basis = rng.standard_normal((12, lam.size))
        index = rng.integers(0, 12, n_obs)
        basis[index[:3]] *= 50.0  # a few large traces
    else:
        basis = rng.standard_normal((n_obs, lam.size))
        basis[:3] *= 50.0
        index = None
    rest = rng.standard_normal((basis.shape[0], 2))
    resid = rng.standard_normal(n_obs)
    args = (resid, basis, offsets, lam, sigma2)
    kwargs = dict(n_scores=3, with_cov=True, time_index=index, rest_basis=rest)
    whole = posterior_scores(*args, **kwargs)
    monkeypatch.setattr(scores_module, "CHUNK_SUBJECTS", 2)
    pieces = posterior_scores(*args, **kwargs)
    # a batch this small is solved in the calling thread; shared among
    # threads it gives the same numbers
    monkeypatch.setattr(scores_module, "PARALLEL_MIN_OBSERVATIONS", 0)
    threaded = posterior_scores(*args, **kwargs)
    for a, b, c in zip(whole, pieces, threaded):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    if sigma2 == 0:
        return  # singular systems: the jitter decides, no known answer
    # and the scores are the conditional expectation, subject by subject
    for i in range(counts.size):
        obs = np.arange(offsets[i], offsets[i + 1])
        b = basis[obs if index is None else index[obs]]
        sigma = (b * lam) @ b.T + sigma2 * np.eye(obs.size)
        want = (b[:, :3] * lam[:3]).T @ np.linalg.solve(sigma, resid[obs])
        assert_allclose(whole[0][i], want, rtol=1e-6, atol=1e-8)


def test_small_batches_of_scores_start_no_threads(monkeypatch):
    import concurrent.futures

    from fdaimpute._fpca import scores as scores_module

    def no_pool(*args, **kwargs):
        raise AssertionError("a thread pool was started")

    monkeypatch.setattr(concurrent.futures, "ThreadPoolExecutor", no_pool)
    monkeypatch.setattr("fdaimpute._numerics.linalg.n_workers", lambda: 2)
    rng = np.random.default_rng(0)
    counts = np.repeat([3, 4], 600)  # two tasks, 4,200 observations
    offsets = np.concatenate([[0], np.cumsum(counts)])
    basis = rng.standard_normal((offsets[-1], 3))
    args = (rng.standard_normal(offsets[-1]), basis, offsets, np.ones(3), 0.1)
    posterior_scores(*args)
    monkeypatch.setattr(scores_module, "PARALLEL_MIN_OBSERVATIONS", 0)
    with pytest.raises(AssertionError, match="thread pool"):
        posterior_scores(*args)


def _pair_sums(bins, resid, subject, include_diagonal):
    """The binned raw-covariance sums by enumerating every pair of points."""
    n_bins = bins.centres.size
    sums = np.zeros((3, n_bins, n_bins))
    for i in np.unique(subject):
        (rows,) = np.nonzero(subject == i)
        for j in rows:
            for k in rows:
                if j == k and not include_diagonal:
                    continue
                product = resid[j] * resid[k]
                for a, wa in zip(bins.index[j], bins.weight[j]):
                    for b, wb in zip(bins.index[k], bins.weight[k]):
                        sums[:, a, b] += wa * wb * np.array([1, product, product**2])
    return sums


@pytest.mark.parametrize("dense_up_to", [0, 1000])  # sparse, then dense products
@pytest.mark.parametrize("include_diagonal", [False, True])
@pytest.mark.parametrize("n_bins", [None, 9])  # exact bins, linear binning
def test_covariance_moments_are_the_sums_over_pairs(
    monkeypatch, dense_up_to, include_diagonal, n_bins
):
    from fdaimpute._pace import binning

    monkeypatch.setattr(binning, "DENSE_GRAM_BINS", dense_up_to)
    monkeypatch.setattr(binning, "GRAM_BLOCK", 20)  # several blocks of subjects
    rng = np.random.default_rng(3)
    subject = np.repeat(np.arange(12), rng.integers(1, 6, 12))
    times = rng.integers(0, 7, subject.size) / 6.0
    if n_bins is not None:
        times = rng.uniform(0, 1, subject.size)
    resid = rng.normal(size=subject.size)
    bins = binning.make_bins(times, n_bins=n_bins, lo=0.0, hi=1.0)
    expected = _pair_sums(bins, resid, subject, include_diagonal)
    # subjects in order, then shuffled (the moments do not depend on order)
    for order in (np.arange(subject.size), rng.permutation(subject.size)):
        got = binning.covariance_moments(
            bins.subset(order),
            resid[order],
            subject[order],
            12,
            include_diagonal=include_diagonal,
        )
        assert_allclose(got.count, expected[0], atol=1e-12)
        assert_allclose(got.total, expected[1], atol=1e-12)
        assert_allclose(got.total_sq, expected[2], atol=1e-12)
