"""Held-out points for spline FPCA fits (FACE, mFPCA): noise of the predictor, bands.

The posterior variance of the scores treats the fitted surface as the truth.
As for PACE (:mod:`fdaimpute._fpca.heldout`), points hidden from a refit
measure what it misses: the share ``w`` of the left-out components'
variance that is real, and the model's own error variance ``tau^2``.

They also choose the noise variance of the predictor. A likelihood or
penalised fit on a few hundred sparse subjects can put variance in the
covariance that belongs to the noise (mFPCA on 231 girls with 2-5 visits:
noise variance 1.3 where PACE finds 7.7); the predictor then trusts each
observation too much and a subject's curve swings between its visits. The
noise variance is raised by the factor among ``NOISE_SCALES`` that best
predicts the hidden points (1 unless a larger one is better). A fit can
also put nearly all the variance in the covariance (FACE on 79 trees
measured at 5 times: noise variance 1e-6 of the hidden points' variance):
every factor of so small a noise still interpolates the visits, so shares
of the hidden points' variance about the mean (``NOISE_SHARES``) are
candidates too, as PACE's search has a noise floor (on those trees the
held-out RMSE fell from 1.48 to 0.27 of the pooled mean's).
"""

from __future__ import annotations

import numpy as np

from fdaimpute._fpca.folds import heldout_folds, ragged_subset
from fdaimpute._fpca.heldout import band_profile, band_terms, fit_band_weights

# Validation subjects: enough for two parameters, few enough to stay cheap.
MAX_SUBJECTS = 3000
#: Factors of the fitted noise variance tried by the predictor.
NOISE_SCALES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
#: Shares of the hidden points' variance about the mean tried as well (those
#: above the largest scaled candidate).
NOISE_SHARES = (0.01, 0.02, 0.05, 0.1)


def held_out_bands(
    times,
    values,
    offsets,
    time_range,
    options,
    fit,
    observation_noise=None,
    seed=0,
    tune_noise=False,
    noise_variance=None,
    heldout=None,
):
    """``(w, tau^2, noise, profile)`` from refits with held-out points hidden.

    The hidden points are one draw (a fifth of each validation subject's
    points) on large data, or every point once over five folds on small
    data (:func:`fdaimpute._fpca.folds.heldout_folds`).

    Parameters
    ----------
    times, values : ndarray of shape (n_obs,)
    offsets : ndarray of shape (n_subjects + 1,)
    time_range : tuple of float
    options : dict
        The options of the refits.
    fit : callable
        ``fit(times, values, offsets, time_range, options)`` returning a
        fit with a ``model``.
    observation_noise : float, default=None
        Variance of the measurement noise of a hidden observation (default:
        each refit's noise variance). Where the surface leaves variance on
        its diagonal, the fitted noise variance carries it; what it carries
        above the measurement noise then goes to ``tau^2``.
    seed : int, default=0
        Seed of the choice of hidden points.
    tune_noise : bool, default=False
        Choose the factor of the predictor's noise variance (else 1).
    noise_variance : float, default=None
        The noise variance of the whole fit's predictor, which every
        refit's predictor then uses (times the factor). Default: each
        refit's own, which can collapse in one fold (on 800 random lines
        with 3-5 points, two refits of five had a noise variance near 0 and
        errors 40 times the others', and they alone chose the factor).
    heldout : dict, default=None
        If given, receives ``"index"`` (positions of the hidden observations
        in ``times``) and ``"residuals"`` (their values less the refits'
        predictions, at the chosen noise), so that a caller comparing
        methods on the same hidden points need not refit (left empty when
        the refits fail).

    Returns
    -------
    weight : float
        ``w`` in ``[0, 1]`` (1, with ``tau^2 = 0`` and the noise unchanged,
        when the data cannot be refitted without the hidden points).
    misfit : float
        ``tau^2 >= 0``, in squared data units.
    noise : float or None
        The predictor's noise variance: ``noise_variance`` unless
        ``tune_noise`` chose a larger one (None without ``noise_variance``).
    profile : tuple of ndarray or None
        The time profile of the bands' variance from the hidden points
        (:func:`fdaimpute._fpca.heldout.band_profile`; None without refits).
    """
    if tune_noise and noise_variance is None:
        raise ValueError("tune_noise needs the fit's noise_variance")
    rng = np.random.default_rng(seed)
    val, folds = heldout_folds(offsets, rng, MAX_SUBJECTS)
    if val.size == 0:
        return 1.0, 0.0, noise_variance, None
    parts = []
    for hidden in folds:
        part = _fold(times, values, offsets, time_range, options, fit, val, hidden)
        if part is None:
            # too few points left to refit (e.g. every subject has two): the
            # bands are the posterior SD alone
            return 1.0, 0.0, noise_variance, None
        parts.append(part)
    if noise_variance is not None:
        parts = [
            (vis, new, lam, float(noise_variance), k) for vis, new, lam, _, k in parts
        ]
    spread = sum(float(np.sum(new[0] ** 2)) for _, new, _, _, _ in parts)
    n_hidden = sum(new[0].size for _, new, _, _, _ in parts)
    noises = (
        _candidate_noises(noise_variance, spread / n_hidden) if tune_noise else [None]
    )

    def under(noise):
        return [
            band_terms(vis, new, lam, s2 if noise is None else noise, k)
            for vis, new, lam, s2, k in parts
        ]

    errors = [sum(float(np.sum(t[0] ** 2)) for t in under(noise)) for noise in noises]
    best = int(np.argmin(errors))
    # a larger noise only where it predicts clearly better (not by rounding,
    # as on noise-free data where every factor predicts alike)
    gain = errors[0] - errors[best]
    chosen = noises[best] if gain > 1e-3 * errors[0] + 1e-9 * spread else noises[0]
    terms = under(chosen)
    if heldout is not None:
        heldout["index"] = np.concatenate(folds)
        heldout["residuals"] = np.concatenate([t[0] for t in terms])
    joined = [np.concatenate(t) for t in zip(*terms)]
    noise = np.concatenate(
        [
            np.full(t[0].size, s2 if observation_noise is None else observation_noise)
            for t, (_, _, _, s2, _) in zip(terms, parts)
        ]
    )
    has_rest = any(lam.size > k for _, _, lam, _, k in parts)
    weight, misfit = fit_band_weights(*joined, noise, has_rest)
    resid, kept, left_out = joined
    hidden_times = times[np.concatenate(folds)]
    variance = kept + weight * left_out + misfit + noise
    profile = band_profile(hidden_times, resid, variance, time_range)
    return weight, misfit, noise_variance if chosen is None else float(chosen), profile


def _candidate_noises(noise_variance, total):
    """Noise variances of the predictor to try, the fitted one first.

    ``NOISE_SCALES`` times the fitted noise variance, then the
    ``NOISE_SHARES`` of ``total`` (the hidden points' variance about the
    mean) that lie above the largest of those.
    """
    scaled = [c * noise_variance for c in NOISE_SCALES]
    return scaled + [
        share * total for share in NOISE_SHARES if share * total > scaled[-1]
    ]


def _fold(times, values, offsets, time_range, options, fit, val, hidden):
    """Visible and hidden parts of one fold under its refit (None if it fails)."""
    visible = np.ones(times.size, dtype=bool)
    visible[hidden] = False
    kept = np.add.reduceat(visible.astype(np.int64), offsets[:-1])
    refit_offsets = np.concatenate([[0], np.cumsum(kept)])
    try:
        model = fit(
            times[visible], values[visible], refit_offsets, time_range, options
        ).model
    except ValueError:
        return None
    if model.n_components == 0:
        return None

    def part(mask):
        off, idx = ragged_subset(mask, offsets, val)
        t = times[idx]
        basis = model.eigenfunctions_at(t, components=slice(None))
        return values[idx] - model.mean_at(t), basis, off

    return (
        part(visible),
        part(~visible),
        model.eigenvalues,
        model.noise_variance,
        model.n_components,
    )
