"""Pointwise bands of a linear smoother, calibrated on its leave-one-out residuals.

A smoother that is linear in a subject's values, ``f(s) = sum_j l_j(s) y_j
+ w(s) mu(s)`` (``w`` the weight of a prior curve ``mu``), misses the
subject's true curve at ``s`` by the noise it averages, of variance
``sigma^2 ||l(s)||^2``, plus a misfit: the smoothing bias and, where the
fit leans on the prior, the subject's departure from it. The model is

    var(f(s) - x(s)) = g(s) [(sigma^2 + kappa) ||l(s)||^2 + tau0^2
                             + tau1^2 w(s)],

and a new observation at ``s`` adds the noise ``g(s) sigma^2``, where the
time profile ``g`` (``log g`` piecewise linear over a few knots of the
time range, of mean 0 over the observations) scales the variance of
everything with time; ``kappa`` is a misfit that grows as the weights
spread (extrapolation past a subject's points). ``g``, ``kappa``,
``tau0^2`` and ``tau1^2`` are fitted by Gaussian likelihood on the exact
leave-one-out residuals of the training observations, which the fit did
not see: the residual at ``t_j`` has variance ``g(t_j) [sigma^2 + (sigma^2
+ kappa) ||l_-j||^2 + tau0^2 + tau1^2 w_-j]``,
where ``l_-j`` and ``w_-j`` are the weights of the fit without
observation ``j`` (:func:`leave_one_out`). The residuals barely tell the
noise from the misfit, so ``sigma^2`` is estimated apart (from
within-subject differences), capped at what the residuals allow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from fdaimpute._core.state import check_array, check_number, check_profile

# Bounds of the log-variances, relative to the residuals' mean square.
_LOG_BOUNDS = (-30.0, 5.0)
# A leave-one-out residual is defined where the self-weight is below this.
_MAX_SELF_WEIGHT = 1.0 - 1e-6


@dataclass(frozen=True)
class BandModel:
    """Fitted variance model: noise, time profile and the three misfits."""

    noise: float
    knots: np.ndarray
    log_profile: np.ndarray
    misfit: float
    prior_misfit: float
    norm_misfit: float
    #: ``(knots, factor)``: a further factor of ``g``, linear between its
    #: knots (a calibration of the intervals' coverage over time), or None.
    calibration: tuple | None = None

    def check(self, name):
        """Raise ValueError if the shapes or signs are not a model's
        (``name``: the attribute holding it, for the message)."""
        n = check_array(self.knots, f"{name}.knots", (None,)).size
        check_array(self.log_profile, f"{name}.log_profile", (n,))
        for field in ("noise", "misfit", "prior_misfit", "norm_misfit"):
            check_number(getattr(self, field), f"{name}.{field}")
        check_profile(self.calibration, f"{name}.calibration")

    def profile(self, times):
        """The time profile ``g`` at ``times``."""
        profile = np.exp(np.interp(times, self.knots, self.log_profile))
        if self.calibration is not None:
            profile = profile * np.interp(times, *self.calibration)
        return profile

    def predictive_variance(self, times, norm2, prior_weight):
        """Variance of a new observation at ``times`` about the fit."""
        return self.noise_at(times) + self.curve_variance(times, norm2, prior_weight)

    def noise_at(self, times):
        """The noise variance ``g sigma^2`` of a new observation at ``times``."""
        return self.noise * self.profile(times)

    def curve_variance(self, times, norm2, prior_weight):
        """Variance of the curve's error at ``times`` given the fit's weights."""
        return self.profile(times) * (
            (self.noise + self.norm_misfit) * norm2
            + self.misfit
            + self.prior_misfit * prior_weight
        )


def leave_one_out(resid, self_weight, norm2, prior_weight):
    """Leave-one-out residuals and weights at the observations themselves.

    Parameters
    ----------
    resid : ndarray of shape (n,)
        ``y_j - f(t_j)`` of the fit with every observation.
    self_weight : ndarray of shape (n,)
        ``l_j(t_j)``, each observation's weight on its own fit.
    norm2, prior_weight : ndarray of shape (n,)
        ``||l(t_j)||^2`` and ``w(t_j)`` of the fit with every observation.

    Returns
    -------
    keep : ndarray of bool of shape (n,)
        Where the leave-one-out fit is defined.
    loo_resid, loo_norm2, loo_prior : ndarray of shape (keep.sum(),)
        ``y_j - f_-j(t_j)``, ``||l_-j||^2`` and ``w_-j`` there.

    Notes
    -----
    For a local (weighted least squares) fit at ``t_j``, deleting
    observation ``j`` rescales the other weights by ``1 / (1 - l_jj)``.
    """
    keep = self_weight < _MAX_SELF_WEIGHT
    rest = 1.0 - self_weight[keep]
    loo_resid = resid[keep] / rest
    loo_norm2 = np.maximum(norm2[keep] - self_weight[keep] ** 2, 0.0) / rest**2
    return keep, loo_resid, loo_norm2, prior_weight[keep] / rest


def fit_band_model(resid, norm2, prior_weight, times, time_range, n_knots, noise):
    """Fit :class:`BandModel` to leave-one-out residuals by Gaussian likelihood.

    Parameters
    ----------
    resid, norm2, prior_weight : ndarray of shape (n,)
        Leave-one-out residuals and the weights of their fits
        (:func:`leave_one_out`).
    times : ndarray of shape (n,)
        Times of the residuals.
    time_range : tuple of float
        Range of the knots of the time profile.
    n_knots : int
        Knots of ``log g`` (1: no time profile).
    noise : float or None
        The noise variance estimated apart; it is capped at the mean of
        ``resid^2 / (1 + norm2)`` (the level at which noise alone explains
        the residuals), which also serves when it is None.

    Returns
    -------
    BandModel
    """
    lo, hi = time_range
    knots = np.linspace(lo, hi, n_knots) if n_knots > 1 else np.array([lo])
    inflation = 1.0 + norm2
    cap = float(np.mean(resid**2 / inflation)) if resid.size else 0.0
    noise = cap if noise is None else min(max(float(noise), 0.0), cap)
    flat = np.zeros(knots.size)
    if not cap > 0.0:
        return BandModel(noise, knots, flat, 0.0, 0.0, 0.0)
    basis = _hat_basis(times, knots)
    basis -= basis.mean(axis=0)
    square = resid**2 / cap
    sigma2 = noise / cap

    def objective(free):
        # the line search may step far: the variances stay within bounds
        theta = np.clip(free, *_LOG_BOUNDS)
        profile = np.exp(basis @ theta[:n_knots])
        misfit, prior_misfit, norm_misfit = np.exp(theta[n_knots:])
        inner = (
            sigma2 * inflation
            + misfit
            + prior_misfit * prior_weight
            + norm_misfit * norm2
        )
        var = profile * inner
        loss = 0.5 * np.sum(np.log(var) + square / var)
        dvar = 0.5 * (1.0 / var - square / var**2) * profile
        grad = [
            basis.T @ (dvar * inner),
            [
                np.sum(dvar) * misfit,
                np.sum(dvar * prior_weight) * prior_misfit,
                np.sum(dvar * norm2) * norm_misfit,
            ],
        ]
        return loss, np.where(free == theta, np.concatenate(grad), 0.0)

    start = np.concatenate([flat, np.log([0.1, 0.5, 0.01])])
    # BFGS (a few parameters; L-BFGS-B's bounded steps cost far more here)
    theta = np.clip(minimize(objective, start, jac=True, method="BFGS").x, *_LOG_BOUNDS)
    # the profile's knots relative to its mean over the residuals' times
    log_profile = theta[:n_knots] - (_hat_basis(times, knots) @ theta[:n_knots]).mean()
    return BandModel(
        noise,
        knots,
        log_profile,
        float(np.exp(theta[n_knots]) * cap),
        float(np.exp(theta[n_knots + 1]) * cap),
        float(np.exp(theta[n_knots + 2]) * cap),
    )


def _hat_basis(times, knots):
    """Piecewise-linear hat functions at ``knots`` (constant beyond the ends)."""
    if knots.size == 1:
        return np.ones((times.size, 1))
    return np.stack(
        [np.interp(times, knots, np.eye(knots.size)[k]) for k in range(knots.size)],
        axis=1,
    )
