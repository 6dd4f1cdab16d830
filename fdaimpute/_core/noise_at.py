"""``noise_variance_at``: the measurement noise of a new observation over time."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted


class NoiseAtMixin:
    """``noise_variance_at`` for an imputer whose bands follow time.

    The imputer sets ``noise_variance_`` in ``fit`` and implements
    ``_noise_at(times)``: the noise variance at an array of times.
    """

    def noise_variance_at(self, times):
        """The measurement-noise variance of a new observation at ``times``.

        ``noise_variance_`` times the bands' time profile, calibrated on
        points hidden from the fit (1 everywhere where they show no change
        over the time range; see the Notes of the imputer). A prediction
        interval for a new observation at ``t`` has standard deviation
        ``sqrt(sd(t)^2 + noise_variance_at(t))``, ``sd`` from
        ``transform(X, return_std=True)``.

        Parameters
        ----------
        times : array-like
            Times (any shape).

        Returns
        -------
        ndarray of the shape of ``times``
        """
        check_is_fitted(self, "noise_variance_")
        return self._noise_at(np.asarray(times, dtype=np.float64))
