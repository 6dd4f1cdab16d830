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

from fdaimpute._core.validation import as_irregular
from fdaimpute._numerics.noise_difference import difference_estimate

__all__ = ["difference_estimate", "noise_variance"]


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
