"""Bandwidth choice: the mean by GCV or subject-fold CV, the covariance by GCV.

(The default covariance bandwidths come from held-out-point CV, in :mod:`.cv`.)
"""

from __future__ import annotations

import numpy as np

from fdaimpute._numerics.local_linear import (
    bandwidth_grid,
    gcv_mean_bandwidth,
    local_linear_binned,
)
from fdaimpute._pace.binning import covariance_moments, make_bins, regular_step
from fdaimpute._pace.surface import RotatedSmoother, surface_with_hat


def mean_bandwidth(rule, bins, sums, values, subject, n_subjects, kernel, rng):
    """Bandwidth of the mean smoother by PACEImputer's ``bandwidth_mean`` rule.

    Parameters
    ----------
    rule : float or {"gcv", "cv", "fdapace"}
        A number, generalised cross-validation of the pooled smoother,
        5-fold cross-validation over subjects, or 5% of the range.
    bins : Bins
        Bins of the observations.
    sums : tuple of ndarray
        The bins' weights, sums of values and sums of squared values.
    values : ndarray of shape (n_obs,)
        Observed values.
    subject : ndarray of int of shape (n_obs,)
        Subject of each observation.
    n_subjects : int
        Number of subjects.
    kernel : str
        Kernel name.
    rng : numpy.random.RandomState
        Draws the folds of ``"cv"`` (no other rule uses it).

    Returns
    -------
    float
    """
    span = bins.centres[-1] - bins.centres[0]
    if not isinstance(rule, str):
        return float(rule)
    if rule == "fdapace":
        return 0.05 * span
    weight, total, total_sq = sums
    keep = weight > 0
    cands = bandwidth_grid(bins.centres[keep], 20, gap="widest")
    if rule == "gcv":
        return gcv_mean_bandwidth(bins.centres, weight, total, total_sq, cands, kernel)
    return cv_mean_bandwidth(bins, values, subject, n_subjects, cands, kernel, rng)


def cv_mean_bandwidth(
    bins, values, subject, n_subjects, candidates, kernel, rng, n_folds=5
):
    """Bandwidth of the mean by K-fold cross-validation over subjects."""
    fold_of_subject = rng.permutation(n_subjects) % n_folds
    fold = fold_of_subject[subject]
    ones = np.ones(values.size)
    sums = []
    for f in range(n_folds):
        part = bins.subset(fold == f)
        sums.append(
            (
                part.spread(ones[fold == f]),
                part.spread(values[fold == f]),
                part.spread(values[fold == f] ** 2),
            )
        )
    w_all = sum(s[0] for s in sums)
    s_all = sum(s[1] for s in sums)
    best, best_score = None, np.inf
    for h in candidates:
        score = 0.0
        try:
            for w_f, s_f, q_f in sums:
                fit = local_linear_binned(
                    bins.centres, w_all - w_f, s_all - s_f, bins.centres, h, kernel
                )
                score += np.sum(q_f - 2 * fit * s_f + fit * fit * w_f)
        except ValueError:
            continue
        if score < best_score:
            best, best_score = float(h), score
    if best is None:
        raise ValueError("no candidate mean bandwidth gives a defined fit")
    return best


def gcv_cov_bandwidth(
    times,
    resid,
    subject,
    n_subjects,
    work_grid,
    kernel,
    *,
    include_diagonal=False,
    n_candidates=12,
):
    """Isotropic covariance bandwidth by generalised cross-validation.

    The surface is fitted at the bin centres; the residual sum of squares
    of the raw covariances and the trace of the smoother (each cell's
    weight on its own fit) give ``GCV = RSS / (1 - dof / N)^2``. Bins are
    the distinct times when there are at most 201, else 201 linear bins.
    """
    distinct = np.unique(times)
    bins = make_bins(times) if distinct.size <= 201 else make_bins(times, n_bins=201)
    mom = covariance_moments(
        bins, resid, subject, n_subjects, include_diagonal=include_diagonal
    )
    c = bins.centres
    span = c[-1] - c[0]
    h_min = max(np.max(np.diff(c)), span / 500)
    return _least_gcv(
        mom,
        np.geomspace(h_min, span / 4, n_candidates),
        lambda h: surface_with_hat(mom, c, h, kernel),
        (ValueError,),
    )


def gcv_rotated_bandwidth(
    times,
    resid,
    subject,
    n_subjects,
    lo,
    hi,
    kernel,
    *,
    include_diagonal=False,
    n_candidates=10,
):
    """Isotropic bandwidth of the rotated smoother by generalised CV.

    Fits on a regular grid of at most 101 bins (exact when the times are
    on such a grid) and uses each bin's weight on its own fit as the trace.
    """
    distinct = np.unique(times)
    if distinct.size <= 101 and regular_step(distinct):
        bins = make_bins(times)
    else:
        bins = make_bins(times, n_bins=101, lo=lo, hi=hi)
    mom = covariance_moments(
        bins, resid, subject, n_subjects, include_diagonal=include_diagonal
    )
    c = bins.centres
    span = c[-1] - c[0]
    smoother = RotatedSmoother(mom, c, "gaussian" if kernel is None else kernel)
    n = mom.count.sum()
    h_dense = span * np.sqrt(20.0 / (2 * np.pi * max(n, 1.0)))
    h_min = max(0.7 * (c[1] - c[0]), h_dense, span * 1e-3)
    return _least_gcv(
        mom,
        np.geomspace(min(h_min, span / 8), span / 2, n_candidates),
        lambda h: smoother(h, h, return_hat=True),
        (ValueError, np.linalg.LinAlgError),
    )


def _least_gcv(mom, candidates, fit_with_hat, failures):
    """The candidate whose surface has the least ``RSS / N / (1 - dof / N)^2``.

    ``fit_with_hat(h)`` gives the surface at the bins and each bin's weight
    on its own fit; a candidate raising one of ``failures``, or whose
    degrees of freedom are not in ``[0, N)``, is passed over.
    """
    best, best_score = None, np.inf
    n = mom.count.sum()
    for h in candidates:
        try:
            fit, hat = fit_with_hat(h)
        except failures:
            continue
        rss = np.sum(mom.total_sq - 2 * fit * mom.total + fit * fit * mom.count)
        dof = np.sum(mom.count * hat)
        if not 0 <= dof < n:
            continue
        score = rss / n / (1 - dof / n) ** 2
        if score < best_score:
            best, best_score = float(h), score
    if best is None:
        raise ValueError(
            "no candidate covariance bandwidth gives a defined fit; "
            "the data are too sparse"
        )
    return best
