"""Choices made on PACE's held-out points besides the bandwidths.

- ``K`` of multivariate PACE: the smallest within one standard error of
  the best (:func:`one_standard_error_k`);
- a floor of the noise variance (:func:`noise_floor`);
- what the bands carry beyond the posterior variance of the scores
  (:func:`calibrate_bands`):

The posterior variance of a fitted model's scores treats the estimated
mean and covariance as the truth. Two things are missing from it:

- the components beyond the ``K`` the predictor keeps: the remaining
  eigenvalues of the smoothed covariance are partly real variance (which
  the bands must carry when ``K`` is small) and partly smoothing noise;
- the error of the estimated model itself, which dominates on small data
  (with nearly noise-free curves the posterior variance goes to zero with
  ``K`` observations, while the curve is wrong by the model's error).

The held-out points of cross-validation measure both: the predictive
variance of a hidden observation is ``A + w B + tau^2 + sigma^2``, with
``A`` the posterior variance of the ``K``-component curve, ``B`` what the
left-out components add (:func:`~fdaimpute._fpca.scores.
truncated_error_variance`), ``w`` in ``[0, 1]`` the share of it that is
real and ``tau^2 >= 0`` the model's own error variance; ``w`` and
``tau^2`` maximise the Gaussian likelihood of the hidden residuals.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.stats import norm

from fdaimpute._fpca.scores import posterior_scores
from fdaimpute._numerics.linalg import group_by_count, run_tasks

NOISE_CANDIDATES = 12
MOMENT_FLOOR = 0.5


def calibrate_bands(visible, hidden, lam, sigma2, k, observation_noise=None):
    """The weight ``w`` of the left-out variance and the misfit ``tau^2``.

    Parameters
    ----------
    visible : tuple of (resid, basis, offsets)
        Validation subjects' visible residuals, every component's basis at
        their times (``(n_visible, p)``) and CSR offsets.
    hidden : tuple of (resid, basis, offsets)
        The same for their hidden observations.
    lam : ndarray of shape (p,)
        Eigenvalues of the cross-validation surface.
    sigma2 : float
        Noise variance of the predictor.
    k : int
        Components the predictor keeps.
    observation_noise : float, default=None
        Variance of the measurement noise of a hidden observation (default
        ``sigma2``). Where the predictor's noise variance was raised by
        :func:`noise_floor` above the measurement noise, the difference is
        the model's error and belongs to ``tau^2``.

    Returns
    -------
    weight : float
        ``w`` in ``[0, 1]`` (1 when no component is left out).
    misfit : float
        ``tau^2 >= 0``, in squared data units.
    """
    terms = band_terms(visible, hidden, lam, sigma2, k)
    noise = sigma2 if observation_noise is None else observation_noise
    return fit_band_weights(*terms, noise, lam.size > k)


def band_terms(visible, hidden, lam, sigma2, k):
    """Each hidden point's residual and the two variance terms of its band.

    Parameters
    ----------
    visible, hidden, lam, sigma2, k
        As in :func:`calibrate_bands`.

    Returns
    -------
    resid : ndarray of shape (n_hidden,)
        Hidden residual less the prediction of the ``k``-component model.
    kept : ndarray of shape (n_hidden,)
        Posterior variance of the ``k``-component curve there (``A``).
    left_out : ndarray of shape (n_hidden,)
        What the components beyond ``k`` add (``B``).
    """
    r_fit, b_fit, off_fit = visible
    r_new, b_new, off_new = hidden
    rest_lam = lam[k:]
    mean, cov, cross = posterior_scores(
        r_fit,
        b_fit[:, :k],
        off_fit,
        lam[:k],
        sigma2,
        with_cov=True,
        rest_basis=b_fit[:, k:] if rest_lam.size else np.zeros((b_fit.shape[0], 0)),
    )
    phi, psi = b_new[:, :k], b_new[:, k:]
    resid = np.empty(r_new.size)
    kept = np.empty(r_new.size)
    left_out = np.empty(r_new.size)
    # subjects with the same number of hidden points at once, no (n_hidden,
    # K, K) copies of their covariances
    for rows, idx in group_by_count(off_new):
        at = phi[idx]  # (g, m, K)
        resid[idx] = r_new[idx] - np.einsum("gmk,gk->gm", at, mean[rows])
        kept[idx] = np.einsum("gmk,gmk->gm", at @ cov[rows], at)
        # phi^T (C + Q^T M Q) phi - 2 phi^T Q^T M psi + psi^T M psi
        # = phi^T C phi + sum_j M_jj ((Q phi)_j - psi_j)^2
        gap = at @ np.swapaxes(cross[rows], 1, 2) - psi[idx]  # (g, m, J)
        left_out[idx] = (gap**2) @ rest_lam
    return resid, kept, left_out


def fit_band_weights(resid, kept, left_out, noise, has_rest=True):
    """``(w, tau^2)`` maximising the Gaussian likelihood of hidden residuals.

    Parameters
    ----------
    resid, kept, left_out : ndarray of shape (n_hidden,)
        As returned by :func:`band_terms`.
    noise : float
        Measurement-noise variance of a hidden observation.
    has_rest : bool, default=True
        Whether components were left out (otherwise ``w`` is 1).

    Returns
    -------
    weight, misfit : float
    """
    scale = max(float(np.mean(resid**2)), 1e-300)

    def neg_loglik(params):
        w, tau2 = params
        var = np.maximum(kept + w * left_out + tau2 * scale + noise, 1e-300)
        # the analytic gradient makes the optimum exact to rounding
        slope = (1.0 / var - resid**2 / var**2) / var.size
        value = float(np.mean(np.log(var) + resid**2 / var))
        return value, np.array([slope @ left_out, slope.sum() * scale])

    starts = [(1.0, 0.0), (0.0, 0.0), (0.5, 0.5)]
    fits = [
        minimize(
            neg_loglik,
            x0,
            method="L-BFGS-B",
            jac=True,
            bounds=[(0.0, 1.0), (0.0, None)],
            options={"ftol": 1e-15, "gtol": 1e-12},
        )
        for x0 in starts
    ]
    best = min(fits, key=lambda fit: fit.fun)
    x = _newton_polish(best.x, resid, kept, left_out, noise, scale)
    weight = float(x[0]) if has_rest else 1.0
    return weight, float(x[1]) * scale


def _newton_polish(x, resid, kept, left_out, noise, scale, steps=6):
    """Newton steps from L-BFGS's optimum on the parameters off their bounds.

    L-BFGS stops where the likelihood stops falling by a relative ``ftol``;
    on a flat likelihood that leaves ``tau^2`` uncertain far beyond rounding
    (two fits of the same model whose terms differed by rounding gave
    misfits 1e-9 apart). A few Newton steps reach the optimum to rounding.
    """
    x = np.array(x, dtype=np.float64)
    directions = np.stack([left_out, np.full(resid.size, scale)])
    for _ in range(steps):
        var = kept + x[0] * left_out + x[1] * scale + noise
        if not np.all(var > 0):
            break
        first = (1.0 / var - resid**2 / var**2) / var.size
        second = (2.0 * resid**2 / var**3 - 1.0 / var**2) / var.size
        grad = directions @ first
        hess = (directions * second) @ directions.T
        free = np.array([0.0 < x[0] < 1.0, x[1] > 0.0]) & (np.diag(hess) > 0)
        if not free.any():
            break
        sub = hess[np.ix_(free, free)]
        if np.linalg.eigvalsh(sub).min() <= 0:  # not locally convex: keep x
            break
        step = np.linalg.solve(sub, grad[free])
        new = x.copy()
        new[free] -= step
        new = np.clip(new, [0.0, 0.0], [1.0, np.inf])
        if np.allclose(new, x, rtol=1e-15, atol=0.0):
            x = new
            break
        x = new
    return x


def noise_floor(evaluator, along, across, k_fixed):
    """The noise variance of the predictor that best predicts the hidden points.

    Candidates are the moment estimate and larger values up to half the raw
    variance; a larger one wins only if it predicts the hidden points
    better (at the best ``K``, or at ``k_fixed``).

    Returns
    -------
    predictor_floor : float
        The winner if larger than the moment estimate, else
        ``MOMENT_FLOOR`` times the moment estimate: a floor of the noise
        variance the predictor uses (it regularises the scores).
    noise_floor : float
        ``MOMENT_FLOOR`` times the moment estimate: a floor of the
        measurement-noise variance (the moment estimates of the visible
        points and of all the data differ by sampling; the floor only
        catches a collapse of the latter).
    candidates_and_scores : tuple of ndarray
    """
    moment = evaluator.moment_noise_variance(along, across)
    moments = evaluator.moments
    raw = moments.diag_total.sum() / max(moments.diag_count.sum(), 1.0)
    larger = raw * np.geomspace(1e-3, 0.5, NOISE_CANDIDATES)
    candidates = np.concatenate([[moment], larger[larger > moment]])
    scores = np.empty(candidates.size)

    def by_k(s2):
        return evaluator.squared_errors(along, across, s2).mean(axis=0)

    # independent candidates: scored on the cores at once
    for j, mse in enumerate(run_tasks(by_k, [(s2,) for s2 in candidates])):
        scores[j] = mse[min(k_fixed, mse.size) - 1] if k_fixed else mse.min()
    best = int(np.argmin(scores))
    floor = MOMENT_FLOOR * moment
    return (
        float(candidates[best] if best else floor),
        float(floor),
        (candidates, scores),
    )


def one_standard_error_k(errors, owner):
    """The smallest ``K`` within one standard error of the best held-out score.

    The standard error is that of the paired difference to the best ``K``,
    clustered by subject (a subject's hidden points share its scores).

    Parameters
    ----------
    errors : ndarray of shape (n_hidden, max_k)
        Squared errors of the hidden points for each ``K`` (``inf`` where
        ``K`` is not available).
    owner : ndarray of int of shape (n_hidden,)
        Validation subject of each hidden point.

    Returns
    -------
    int
    """
    mse = errors.mean(axis=0)
    best = int(np.argmin(mse))
    n_subjects = owner.max() + 1
    per_subject = np.zeros((n_subjects, errors.shape[1]))
    np.add.at(per_subject, owner, np.where(np.isfinite(errors), errors, 0.0))
    diff = per_subject - per_subject[:, [best]]
    if n_subjects > 1:
        se = np.sqrt(n_subjects) * diff.std(axis=0, ddof=1) / errors.shape[0]
    else:
        # one validation subject: no spread to measure, so the best K
        se = np.zeros(errors.shape[1])
    within = np.isfinite(mse) & (mse - mse[best] <= se)
    return int(np.flatnonzero(within)[0]) + 1


#: Least hidden points in every third of the time range for a time profile.
PROFILE_MIN_POINTS = 20
#: Bounds of the profile's factor.
PROFILE_BOUNDS = (0.2, 5.0)
#: The interval whose coverage the profile calibrates (two-sided, Gaussian).
PROFILE_LEVEL = 0.95


def band_profile(times, resid, variance, time_range):
    """A factor of the predictive variance over time, calibrated on hidden points.

    The held-out points' predictive variance (curve error plus measurement
    noise) is one number per point, but measurement error and model error
    can both change with time (exercise hours of girls vary less at 8 than
    at 16; on carData's Blackmore one level for all ages covered 0.99 of
    the visits at 8 and 0.93 from 13 on). In each third of the time range
    the factor is the square of the hidden points' ``PROFILE_LEVEL``
    quantile of ``|resid| / sqrt(variance)`` over its Gaussian value; the
    factor is linear in time between the centres of the thirds and
    constant beyond. With fewer than ``PROFILE_MIN_POINTS`` hidden points
    in some third the data cannot support a profile, and the factor is 1.

    The quantile is the order statistic at ``PROFILE_LEVEL * (n + 1)`` of
    the ``n`` points of the third (interpolated: Weibull's plotting
    position), not at ``PROFILE_LEVEL * n``: the ``k``-th smallest of ``n``
    exchangeable scores exceeds a new one with probability ``k / (n + 1)``,
    so this level covers a new point with probability about
    ``PROFILE_LEVEL``, where the plain sample quantile covers
    ``((n - 1) p + 1) / (n + 1)`` (0.921 for 30 points at ``p = 0.95``).

    Parameters
    ----------
    times, resid, variance : ndarray of shape (n_hidden,)
        Hidden points' times, residuals and predictive variances.
    time_range : tuple of float
        The training time range.

    Returns
    -------
    knots : ndarray of shape (3,)
        The centres of the thirds.
    factor : ndarray of shape (3,)
        The factor there (all 1 without support).
    """
    lo, hi = time_range
    knots = lo + (hi - lo) * np.array([1.0, 3.0, 5.0]) / 6.0
    ones = np.ones(3)
    if not hi > lo:
        return knots, ones
    third = np.clip(((times - lo) / (hi - lo) * 3).astype(np.int64), 0, 2)
    counts = np.bincount(third, minlength=3)
    if counts.min() < PROFILE_MIN_POINTS:
        return knots, ones
    z = np.abs(resid) / np.sqrt(np.maximum(variance, 1e-300))
    gaussian = norm.ppf(0.5 + PROFILE_LEVEL / 2)
    log_factor = np.array(
        [
            2.0 * np.log(max(_quantile_for_new_point(z[third == j]), 1e-12) / gaussian)
            for j in range(3)
        ]
    )
    return knots, np.clip(np.exp(log_factor), *PROFILE_BOUNDS)


def _quantile_for_new_point(z):
    """The ``PROFILE_LEVEL`` quantile of ``z`` that covers a new exchangeable
    score with that probability (see :func:`band_profile`)."""
    return np.quantile(z, PROFILE_LEVEL, method="weibull")


def profile_factor(profile, times):
    """The factor of :func:`band_profile` at ``times`` (1 for a None profile).

    Parameters
    ----------
    profile : tuple of ndarray or None
        ``(knots, factor)`` of :func:`band_profile`.
    times : array-like
        Times, in the units of the knots (any shape).

    Returns
    -------
    ndarray of the shape of ``times``
    """
    if profile is None:
        return np.ones(np.shape(times))
    knots, factor = profile
    return np.interp(times, knots, factor)
