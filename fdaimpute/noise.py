"""Measurement-noise variance of functional data from within-subject differences.

For a smooth random curve observed with independent noise of variance
``sigma^2``, half the squared difference of two observations of one subject
at times ``h`` apart has expectation (the semivariogram)

    gamma(h) = sigma^2 + 1/2 E[X(t + h) - X(t)]^2 = sigma^2 + c h^2 + O(h^3),

so ``sigma^2`` is the intercept of a regression of the half squared
differences on ``h^2``, fitted on the shortest lags (the difference-based
estimator of Tong & Wang, 2005, pooled over subjects). It needs no model of
the mean or covariance, only subjects with two or more points.
"""

from __future__ import annotations

import numpy as np

from fdaimpute._validation import as_irregular

__all__ = ["difference_estimate", "noise_variance"]


def neighbour_pairs(t, y, subject, max_lag):
    """Lags ``h`` and half squared differences of pairs ``k <= max_lag`` apart."""
    lags, halves = [], []
    for k in range(1, max_lag + 1):
        same = subject[k:] == subject[:-k]
        lags.append((t[k:] - t[:-k])[same])
        halves.append(0.5 * (y[k:] - y[:-k])[same] ** 2)
    return np.concatenate(lags), np.concatenate(halves)


def noise_variance(X, *, max_lag=3, share=0.2, min_pairs=50):
    """Estimate the variance of the measurement noise.

    Parameters
    ----------
    X : IrregularData, long DataFrame or list of (t, y) pairs
        Observations (any number per subject).
    max_lag : int, default=3
        Pair each observation with its next ``max_lag`` neighbours in time
        within the same subject.
    share : float, default=0.2
        Fit on the shortest ``share`` of the pair lags (at least
        ``min_pairs`` pairs), with Epanechnikov weights in the lag.
    min_pairs : int, default=50
        Fewer pairs than this raise a :class:`ValueError`.

    Returns
    -------
    float
        The estimated noise variance, in squared data units (>= 0).

    Raises
    ------
    ValueError
        When fewer than ``min_pairs`` within-subject pairs exist.

    Notes
    -----
    The intercept of the weighted fit ``gamma(h) ~ a + b h^2`` is the
    estimate. With curves that are smooth at the scale of the shortest lags
    it is nearly unbiased; a rough process (or very sparse subjects, whose
    shortest lags are long) biases it upwards. Repeated measurements at the
    same time (lag 0) measure ``sigma^2`` directly.

    Examples
    --------
    >>> import numpy as np
    >>> from fdaimpute.noise import noise_variance
    >>> rng = np.random.default_rng(0)
    >>> subjects = []
    >>> for _ in range(300):
    ...     t = np.sort(rng.uniform(0, 1, 10))
    ...     a, b = rng.normal(size=2)
    ...     subjects.append((t, a + b * t + 0.5 * rng.normal(size=10)))
    >>> round(noise_variance(subjects), 2)  # the truth is 0.5^2 = 0.25
    0.24
    """
    data = as_irregular(X)
    if data is None:
        raise TypeError(
            "X must be an IrregularData, a long DataFrame or a list of (t, y) pairs"
        )
    if not (isinstance(max_lag, (int, np.integer)) and max_lag >= 1):
        raise ValueError(f"max_lag must be a positive integer, got {max_lag!r}")
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], got {share!r}")
    return difference_estimate(
        data.times,
        data.values,
        data.subject_index,
        max_lag=int(max_lag),
        share=share,
        min_pairs=min_pairs,
    )


def difference_estimate(times, values, subject, *, max_lag=3, share=0.2, min_pairs=50):
    """:func:`noise_variance` of observations given as arrays.

    Parameters
    ----------
    times, values : ndarray of shape (n_obs,)
        Observations, grouped by subject and sorted by time within each.
    subject : ndarray of int of shape (n_obs,)
        Subject of each observation.
    max_lag, share, min_pairs
        As in :func:`noise_variance`.

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
