"""The measurement-error variance ``sigma^2`` from binned raw variances."""

from __future__ import annotations

import numpy as np

from fdaimpute._fpca.eigen import trapezoid
from fdaimpute._numerics.local_linear import local_linear_binned
from fdaimpute._pace.surface import smooth_diagonal_rotated


def moment_sigma2(moments, work_grid, cov, cut=(0.25, 0.75)):
    """Mean squared residual minus the smoothed variance, over the observations.

    Only observations in the middle half of the range count: local fits at
    the ends of the diagonal are the least stable (as in fdapace).

    Parameters
    ----------
    moments : CovMoments
        Binned raw covariances (their ``diag_*`` sums).
    work_grid : ndarray of shape (G,)
        Grid of ``cov``.
    cov : ndarray of shape (G, G)
        Smoothed covariance.
    cut : pair of float, default=(0.25, 0.75)
        Fractions of the range that bound the observations used.

    Returns
    -------
    float
    """
    lo, hi = work_grid[0], work_grid[-1]
    c = moments.centres
    # The slack makes a centre on a quartile count in every unit of time.
    slack = 1e-9 * (hi - lo)
    inside = (c >= lo + cut[0] * (hi - lo) - slack) & (
        c <= lo + cut[1] * (hi - lo) + slack
    )
    if moments.diag_count[inside].sum() <= 0:
        inside = np.ones_like(inside)
    diag = np.interp(c[inside], work_grid, np.diag(cov))
    count = moments.diag_count[inside]
    return (moments.diag_total[inside].sum() - np.dot(count, diag)) / count.sum()


def fdapace_sigma2(moments, work_grid, bandwidth, kernel):
    """fdapace's estimate: raw variance minus rotated fit, middle half of the range.

    Parameters
    ----------
    moments : CovMoments
        Binned raw covariances.
    work_grid : ndarray of shape (G,)
        The work grid (its middle half is integrated over).
    bandwidth : float
        Bandwidth of both smoothers.
    kernel : str
        Kernel name.

    Returns
    -------
    float
    """
    obs = moments.centres[moments.diag_count > 0]
    a0, b0 = obs[0], obs[-1]
    span = b0 - a0
    buff = np.finfo(float).eps * np.max(np.abs(obs)) * 10
    cut = work_grid[
        (work_grid > a0 + 0.25 * span - buff) & (work_grid < a0 + 0.75 * span + buff)
    ]
    if cut.size < 2:
        cut = work_grid
    yvar = local_linear_binned(
        moments.centres, moments.diag_count, moments.diag_total, cut, bandwidth, kernel
    )
    xvar = smooth_diagonal_rotated(moments, cut, bandwidth, kernel)
    return trapezoid(yvar - xvar, cut) / (0.5 * span)
