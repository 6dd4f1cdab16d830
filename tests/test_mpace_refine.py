"""The numerics of multivariate PACE's refinement: bins on given centres, the
cubic B-spline basis of the loadings and the expected Gram matrix."""

import numpy as np

from fdaimpute._pace.binning import bins_on, make_bins
from fdaimpute._pace.multivariate import _expected_gram, _loading_basis


def test_bins_on_centres_put_each_time_on_its_centre_or_between_two():
    times = np.array([0.0, 0.3, 0.3, 0.7, 1.0])
    exact = make_bins(times)
    on = bins_on(exact.centres, times)
    # times among the centres go wholly to their own centre
    np.testing.assert_array_equal(on.spread(np.ones(5)), exact.spread(np.ones(5)))
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    np.testing.assert_array_equal(on.spread(values), exact.spread(values))
    # others are split linearly between their neighbours; outside, the end
    between = bins_on(np.array([0.0, 0.5, 1.0]), np.array([0.2, -1.0, 2.0]))
    np.testing.assert_allclose(
        between.spread(np.ones(3)), [1.0 + 0.6, 0.4, 1.0], rtol=1e-12
    )
    line = np.array([0.0, 0.5, 1.0])
    t = np.random.default_rng(0).uniform(0, 1, 50)
    np.testing.assert_allclose(bins_on(line, t).interpolate(line), t, atol=1e-12)


def test_loading_basis_reproduces_a_cubic():
    work = np.linspace(0.0, 2.0, 41)
    times = np.random.default_rng(1).uniform(0.0, 2.0, 300)
    design, on_work = _loading_basis(work, 7, times)
    assert design.shape == (300, 7) and on_work.shape == (41, 7)
    assert np.all(np.diff(design.indices.reshape(-1, 4), axis=1) == 1)

    def cubic(t):
        return 1 - 2 * t + 0.5 * t**2 - 0.3 * t**3

    coef, *_ = np.linalg.lstsq(design.toarray(), cubic(times), rcond=None)
    np.testing.assert_allclose(on_work @ coef, cubic(work), atol=1e-10)


def test_expected_gram_is_the_sum_of_kronecker_products():
    rng = np.random.default_rng(2)
    work = np.linspace(0.0, 1.0, 21)
    times = np.concatenate([rng.uniform(0, 1, 40), [0.0, 1.0, 1.0]])
    design, _ = _loading_basis(work, 8, times)
    k = 3
    factor = rng.normal(size=(times.size, k, k))
    second = factor @ factor.transpose(0, 2, 1)
    b = design.toarray()
    direct = sum(np.kron(np.outer(b[o], b[o]), second[o]) for o in range(times.size))
    gram = _expected_gram(design, second).reshape(8 * k, 8 * k)
    np.testing.assert_allclose(gram, direct, rtol=1e-12, atol=1e-12)
