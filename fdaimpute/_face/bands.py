"""What FACE's bands carry beyond the posterior variance, weighed on held-out points.

The posterior variance of the scores treats the fitted surface as the truth.
As for PACE (:mod:`fdaimpute._pace.heldout`), points hidden from a refit
measure what it misses: the share ``w`` of the left-out components'
variance that is real, and the model's own error variance ``tau^2``.
"""

from __future__ import annotations

import numpy as np

from fdaimpute._pace.cv import hide_points, ragged_subset
from fdaimpute._pace.heldout import calibrate_bands

# Validation subjects: enough for two parameters, few enough to stay cheap.
MAX_SUBJECTS = 3000


def held_out_bands(
    times, values, offsets, time_range, options, fit, observation_noise=None, seed=0
):
    """``(w, tau^2)`` of the bands, from a refit with held-out points hidden.

    Parameters
    ----------
    times, values : ndarray of shape (n_obs,)
    offsets : ndarray of shape (n_subjects + 1,)
    time_range : tuple of float
    options : dict
        The options of the fit (see :func:`fdaimpute._face.fit.fit_face`).
    fit : callable
        ``fit(times, values, offsets, time_range, options)`` returning a
        fit with a ``model``.
    observation_noise : float, default=None
        Variance of the measurement noise of a hidden observation (default:
        the refit's noise variance). Where the surface leaves variance on
        its diagonal, the fitted noise variance carries it; what it carries
        above the measurement noise then goes to ``tau^2``.
    seed : int, default=0
        Seed of the choice of hidden points.

    Returns
    -------
    weight : float
        ``w`` in ``[0, 1]`` (1, with ``tau^2 = 0``, when the data cannot be
        refitted without the hidden points).
    misfit : float
        ``tau^2 >= 0``, in squared data units.
    """
    rng = np.random.default_rng(seed)
    val, hidden = hide_points(offsets, rng, max_subjects=MAX_SUBJECTS)
    if val.size == 0:
        return 1.0, 0.0
    visible = np.ones(times.size, dtype=bool)
    visible[hidden] = False
    kept = np.add.reduceat(visible.astype(np.int64), offsets[:-1])
    refit_offsets = np.concatenate([[0], np.cumsum(kept)])
    try:
        model = fit(
            times[visible], values[visible], refit_offsets, time_range, options
        ).model
    except ValueError:
        # too few points left to refit (e.g. every subject has two): the
        # bands are the posterior SD alone
        return 1.0, 0.0
    if model.n_components == 0:
        return 1.0, 0.0

    def part(mask):
        off, idx = ragged_subset(mask, offsets, val)
        t = times[idx]
        basis = model.eigenfunctions_at(t, components=slice(None))
        return values[idx] - model.mean_at(t), basis, off

    return calibrate_bands(
        part(visible),
        part(~visible),
        model.eigenvalues,
        model.noise_variance,
        model.n_components,
        observation_noise,
    )
