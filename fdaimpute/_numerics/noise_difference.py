"""The difference estimator of the noise variance, on arrays.

The statistics are described in :mod:`fdaimpute.noise` (its public face,
:func:`fdaimpute.noise.noise_variance`). The pieces are separate so that the
chunked and distributed PACE fits can add the pairs' sums over chunks.
"""

from __future__ import annotations

import numpy as np


def neighbour_pairs(t, y, subject, max_lag):
    """Lags ``h`` and half squared differences of pairs ``k <= max_lag`` apart."""
    lags, halves = [], []
    for k in range(1, max_lag + 1):
        same = subject[k:] == subject[:-k]
        lags.append((t[k:] - t[:-k])[same])
        halves.append(0.5 * (y[k:] - y[:-k])[same] ** 2)
    return np.concatenate(lags), np.concatenate(halves)


def difference_estimate(times, values, subject, *, max_lag=3, share=0.2, min_pairs=50):
    """:func:`fdaimpute.noise.noise_variance` of observations given as arrays.

    Parameters
    ----------
    times, values : ndarray of shape (n_obs,)
        Observations, grouped by subject and sorted by time within each.
    subject : ndarray of int of shape (n_obs,)
        Subject of each observation.
    max_lag, share, min_pairs
        As in :func:`fdaimpute.noise.noise_variance`.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        When fewer than ``min_pairs`` within-subject pairs exist.
    """
    lag, half = neighbour_pairs(times, values, subject, max_lag)
    keep = n_kept(lag.size, share, min_pairs)
    width = np.partition(lag, keep - 1)[keep - 1] if keep < lag.size else lag.max()
    # lags equal to the cut but for rounding (times on a lattice, rescaled)
    # are ties too: the estimate must not depend on the unit of time
    kept = lag <= width * (1.0 + 1e-9)
    return intercept_from_sums(power_sums(lag[kept], half[kept]), width)


def difference_estimate_or_none(times, values, subject):
    """:func:`difference_estimate` at its defaults, or None where it has none.

    None with too few pairs, and where the estimate is not finite: lags over
    many orders of magnitude can underflow its sums (then the callers' other
    noise estimate stands alone).
    """
    try:
        with np.errstate(all="ignore"):
            estimate = difference_estimate(times, values, subject)
    except ValueError:
        return None
    return estimate if np.isfinite(estimate) else None


def n_kept(n_pairs, share, min_pairs):
    """How many of the shortest pairs the fit uses (raises with too few pairs)."""
    if n_pairs < min_pairs:
        raise ValueError(
            f"estimating the noise variance needs at least {min_pairs} pairs of "
            f"observations within subjects; these data have {n_pairs}"
        )
    return min(n_pairs, max(int(min_pairs), int(np.ceil(share * n_pairs))))


def power_sums(lag, half):
    """The sums the weighted fit needs, and the shortest lag.

    Returns
    -------
    ndarray of shape (8,)
        ``sum h^0, h^2, h^4, h^6``, ``sum g h^0, g h^2, g h^4`` (``g`` the
        half squared differences) and ``min h``.
    """
    h2 = lag * lag
    powers = np.stack([np.ones_like(h2), h2, h2 * h2, h2 * h2 * h2])
    return np.concatenate(
        [powers.sum(axis=1), powers[:3] @ half, [lag.min(initial=np.inf)]]
    )


def intercept_from_sums(sums, width):
    """The intercept of the fit from :func:`power_sums` of the pairs it uses.

    Every pair not longer than ``width`` takes part (ties included, so the
    estimate does not depend on the order of the pairs), weighted by
    ``1 - (h / (1.001 width))^2``.
    """
    n, g = sums[0], sums[4]
    if width <= 0:
        return float(g / n)
    if sums[7] >= width:
        # one lag only: no slope can be fitted, and the mean half squared
        # difference there (noise plus the curve's change over the lag) is
        # the estimate; unlike a minimum-norm intercept it does not depend
        # on the unit of time
        return float(max(g / n, 0.0))
    scale = (1.001 * width) ** 2
    u = sums[:4] / scale ** np.arange(4)  # sums of (h^2 / scale)^p
    gu = sums[4:7] / scale ** np.arange(3)
    normal = np.array([[u[0] - u[1], u[1] - u[2]], [u[1] - u[2], u[2] - u[3]]])
    rhs = np.array([gu[0] - gu[1], gu[1] - gu[2]])
    coef = np.linalg.solve(normal, rhs)
    return float(max(coef[0], 0.0))
