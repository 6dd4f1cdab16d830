"""FACE: fast covariance estimation for sparse functional data (Xiao et al., 2018)."""

from __future__ import annotations

from functools import partial

import numpy as np

from fdaimpute._core.docstrings import shared_docs
from fdaimpute._core.params import Interval, Options
from fdaimpute._core.validation import check_spread_over_time
from fdaimpute._face.fit import fit_face, resolve_auto
from fdaimpute._fpca.spline_bands import held_out_bands
from fdaimpute._fpca.spline_predict import SplineModelPredictor
from fdaimpute._fpca.splines import check_basis_sizes
from fdaimpute._numerics.linalg import one_blas_thread
from fdaimpute._numerics.noise_difference import difference_estimate_or_none
from fdaimpute.base import BaseImputer

__all__ = ["FACEImputer"]

_POSITIVE = Interval("real", 0, closed="neither")
#: A chosen ``lambda_cov`` whose fit is implausible gives way to this
#: many times it, its square and cube.
_SMOOTHER_STEP = 10.0
_OPTIONS = (
    "n_basis",
    "n_basis_mean",
    "degree",
    "penalty_order",
    "lambda_mean",
    "lambda_cov",
    "n_components",
    "fve_threshold",
    "max_components",
)


@shared_docs(
    "holds the eigenfunctions at their end values and continues the mean "
    "along its end tangent"
)
class FACEImputer(SplineModelPredictor, BaseImputer):
    """Fast covariance estimation (FACE) for sparse functional data.

    The method of Xiao, Li, Checkley & Crainiceanu (2018): the mean is a
    P-spline (cubic B-splines, difference penalty) fitted to the pooled
    observations; the covariance is a tensor-product P-spline surface
    ``C(s, t) = b(s)^T Theta b(t)`` with a *symmetric* coefficient matrix
    ``Theta``, fitted by penalised least squares to the products of
    residuals ``(y_ij - mu(t_ij)) (y_ik - mu(t_ik))``, ``j != k``, of each
    subject. Both smoothing parameters are chosen by generalised
    cross-validation. The eigenfunctions of the surface are splines too;
    the noise variance is what the raw variances on the diagonal leave
    over the surface. Curves are predicted as in PACE: scores by
    conditional expectation, ``mu + Phi xi_i``.

    Parameters
    ----------
    %(grid)s
    n_basis : int, default=40
        B-splines per dimension of the covariance surface (equally spaced
        knots over the training range); the surface has
        ``n_basis (n_basis + 1) / 2`` free coefficients.
    n_basis_mean : int, default=20
        B-splines of the mean.
    degree : int, default=3
        Degree of the B-splines (3: cubic).
    penalty_order : int, default=2
        Order of the difference penalty on neighbouring coefficients; a
        polynomial of degree below it (per direction) is not penalised.
    lambda_mean : float, "auto", "gcv" or "cv", default="auto"
        Smoothing parameter of the mean: a number, chosen by GCV, or by
        5-fold cross-validation over subjects (each fold's observations
        predicted by the mean of the others'; GCV with fewer than 5
        subjects). ``"auto"``: cross-validation below ``1,000`` subjects,
        GCV above. GCV treats the observations as independent; where the
        subjects are seen at a few shared ages with gaps between them, it
        can follow the subjects' shared deviations (on 90 girls of
        Blackmore's data seen at 8, 10, 12 and later: a mean reaching 83
        between observations of 0 to 23), which the subject folds do not.
        A number applies to the standardised data (times on [0, 1], values
        of unit standard deviation; see Notes), so it means the same in any
        units.
    lambda_cov : float, "auto", "gcv" or "cv", default="auto"
        Smoothing parameter of the covariance surface: a number, chosen by
        GCV over the raw covariances (closed form, see Notes), or by 5-fold
        cross-validation over subjects (GCV with fewer than 5 subjects).
        ``"auto"``: cross-validation below ``1,000`` subjects, GCV above.
        GCV treats the raw covariances as independent, while each subject's
        share them its residuals; with a few hundred subjects it can pick a
        surface that follows single subjects (on 231 girls with 2-5 visits:
        a first eigenvalue of 169,000 for data of variance 30, and curves
        far outside the data), which the subject folds do not. A chosen
        value (by either rule) that still gives some training subject a
        curve leaving the data's range widened by half of it (the warning
        of ``transform``) gives way to 10, 100 or 1,000 times it, then to
        itself with fewer components (down to one), the first that gives
        none (if none does, the one whose worst curve leaves the range
        least).
    n_components : int or "fve", default="fve"
        Number of components ``K`` of the predictor, or the fewest whose
        fraction of variance explained reaches ``fve_threshold``.
    fve_threshold : float, default=0.999
        Threshold of ``n_components="fve"``.
    max_components : int, default=None
        Upper bound on ``K``.
    %(extrapolate)s
    %(keep_observed)s

    Attributes
    ----------
    mean_ : ndarray of shape (n_grid,)
        The mean on ``grid_``.
    covariance_ : ndarray of shape (n_grid, n_grid)
        The covariance on ``grid_``, from all positive eigenpairs of the
        fitted surface (symmetric, positive semi-definite).
    eigenvalues_ : ndarray of shape (K,) with K = ``n_components_``
        Leading eigenvalues.
    eigenfunctions_ : ndarray of shape (n_grid, K)
        Leading eigenfunctions on ``grid_`` (unit L2 norm over the range).
    noise_variance_ : float
        Measurement-error variance: the predictor's, capped by the
        difference-based estimate (:func:`fdaimpute.noise.noise_variance`).
    predictor_noise_variance_ : float
        The noise variance the predictor uses: the raw variances less the
        surface's diagonal, which also carries variation the surface cannot
        follow, times the factor (1, 2, 4, ..., 32), or the share (1, 2, 5
        or 10%) of the hidden points' variance, that best predicts the
        held-out points of the bands (see Notes).
    n_components_ : int
        Number of components ``K`` (0 if the data show no variation
        between subjects: every curve is then the mean).
    fve_ : ndarray of shape (K,)
        Cumulative fraction of variance explained.
    lambda_mean_, lambda_cov_ : float
        Smoothing parameters used (on the standardised data).
    df_mean_, df_cov_ : float
        Effective degrees of freedom of the two fits.
    %(grid_)s
    time_range_ : tuple of float
        Range of the training times.
    n_subjects_fit_ : int
        Number of training subjects.

    See Also
    --------
    PACEImputer : local-linear smoothing of the covariance, the same predictor.

    Notes
    -----
    *Units.* The fit works on standardised data: times mapped onto [0, 1]
    by the training range, values centred on their mean and divided by
    their standard deviation. Its smoothing, tolerances and starting values
    therefore see the same numbers in any units, and the curves, bands and
    derivatives change with the units exactly as the data do (to rounding),
    as PACE's do.

    *Speed.* Pairs of observations are never formed. The normal equations
    of the surface regression are sums over subjects of Kronecker products
    of each subject's banded ``B_i^T B_i`` (less the diagonal pairs), built
    in ``O(n c^2 p^2)`` for ``n`` subjects, ``c`` basis functions and degree
    ``p``, whatever the number of observations per subject. One Cholesky
    factorisation and one eigen-decomposition then give the fit, its
    residual sum of squares and its degrees of freedom at every candidate
    smoothing parameter in ``O(c^2)`` each (the paper's fast selection).
    The eigenfunctions are exact: with ``G`` the Gram matrix of the
    B-splines they come from ``G^(1/2) Theta G^(1/2)``, no grid.

    *Uncertainty.* ``return_std`` gives the standard deviation of the
    curve's error: the scores' posterior covariance, the variance of the
    positive components beyond ``K`` (predicted as zero) and the model's own
    error. The last two are weighed, as in PACE, on points hidden from a
    refit (up to 3,000 subjects, a fifth of each one's points; on small data
    every point once over five folds), which also choose the factor of the
    predictor's noise variance; the hidden
    points' noise is ``noise_variance_``, so the variance the surface leaves
    on its diagonal goes to the curve's band (the posterior SD alone where
    the data cannot be refitted without the hidden points, e.g. two points
    per subject). Where the hidden points show the predictive variance
    changing over the time range, both the curve's variance and the noise
    variance follow a factor linear between the start, middle and end of
    the range, as PACE's (``noise_variance_at``). A band for a new
    observation at ``t`` adds ``noise_variance_at(t)``.

    *Limits.* A tensor-product spline surface cannot follow a kink along the
    diagonal (rough processes such as the SAND paper's); the variance it
    misses there is counted as noise.

    References
    ----------
    .. [1] Xiao, L., Li, C., Checkley, W. and Crainiceanu, C. (2018). Fast
       covariance estimation for sparse functional data. Statistics and
       Computing 28, 511-522.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> from fdaimpute.face import FACEImputer
    >>> sim = fi.simulate.sand_paper(n=300, n_obs="8-12", random_state=0)
    >>> face = FACEImputer().fit(sim.train.data)
    >>> curves, std = face.transform(sim.test.data, return_std=True)
    >>> curves.shape, bool((std > 0).all())
    ((15, 101), True)
    """

    _param_constraints = {
        **BaseImputer._param_constraints,
        "n_basis": [Interval("int", 2)],
        "n_basis_mean": [Interval("int", 2)],
        "degree": [Interval("int", 1, 5)],
        "penalty_order": [Interval("int", 1, 3)],
        "lambda_mean": [_POSITIVE, Options("auto", "gcv", "cv")],
        "lambda_cov": [_POSITIVE, Options("auto", "gcv", "cv")],
        "n_components": [Interval("int", 1), Options("fve")],
        "fve_threshold": [Interval("real", 0, 1, closed="right")],
        "max_components": [Interval("int", 1), None],
    }

    def __init__(
        self,
        *,
        grid=None,
        n_basis=40,
        n_basis_mean=20,
        degree=3,
        penalty_order=2,
        lambda_mean="auto",
        lambda_cov="auto",
        n_components="fve",
        fve_threshold=0.999,
        max_components=None,
        extrapolate=False,
        keep_observed=False,
    ):
        self.grid = grid
        self.n_basis = n_basis
        self.n_basis_mean = n_basis_mean
        self.degree = degree
        self.penalty_order = penalty_order
        self.lambda_mean = lambda_mean
        self.lambda_cov = lambda_cov
        self.n_components = n_components
        self.fve_threshold = fve_threshold
        self.max_components = max_components
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed

    # ------------------------------------------------------------------ #
    def _check_combination(self):
        """The checks that involve several parameters (each is declared alone)."""
        check_basis_sizes(
            "FACEImputer",
            {"n_basis": self.n_basis, "n_basis_mean": self.n_basis_mean},
            max(self.degree + 1, self.penalty_order + 1),
            f"degree={self.degree} and penalty_order={self.penalty_order}",
        )

    def _fit(self, data):
        self._check_combination()
        check_spread_over_time(data.time_range, "cannot fit a curve")
        options = {name: getattr(self, name) for name in _OPTIONS}
        for name in ("lambda_mean", "lambda_cov"):
            options[name] = resolve_auto(options[name], len(data))
        times, values = self._standardise(data)
        scaled = (times, values, data.offsets, (0.0, 1.0))
        self._fit_model(data, scaled, options)
        if isinstance(options["lambda_cov"], str) and self._excursion(data):
            # a surface that takes some training subject's curve far outside
            # the data gives way to smoother ones, then the chosen surface to
            # fewer components (where the smoothest surfaces are nearly
            # bilinear, their linear components extrapolate a subject's trend)
            chosen = dict(
                options, lambda_mean=self.lambda_mean_, lambda_cov=self.lambda_cov_
            )
            lambdas = self.lambda_cov_ * _SMOOTHER_STEP ** np.arange(1, 4)
            tries = [dict(chosen, lambda_cov=lam) for lam in lambdas]
            tries += [
                dict(chosen, n_components=k)
                for k in range(self.n_components_ - 1, 0, -1)
            ]
            self._refit_while_implausible(
                partial(self._excursion, data),
                (partial(self._fit_model, data, scaled, tried) for tried in tries),
            )

    def _fit_model(self, data, scaled, options):
        """Fit the model and its bands; set the fitted attributes."""
        with one_blas_thread():
            result = fit_face(*scaled, options)
        model = result.model
        times, values = scaled[:2]
        observation_noise = _measurement_noise(
            data.with_values(values, times), model.noise_variance
        )
        # the refits keep the chosen smoothing and K: they judge this fit's model
        options = dict(
            options, lambda_mean=result.lambda_mean, lambda_cov=result.lambda_cov
        )
        if model.n_components:
            options["n_components"] = model.n_components
        heldout = {}
        with one_blas_thread():
            model.band_weight, model.band_misfit, noise, profile = held_out_bands(
                *scaled,
                options,
                fit_face,
                observation_noise,
                tune_noise=True,
                noise_variance=model.noise_variance,
                heldout=heldout,
            )
        self._keep_heldout(heldout)
        model.noise_variance, model.band_profile = noise, profile
        self._model = model
        self._set_model_attributes(model, self.grid_)
        spread = self._scale[3]
        self.noise_variance_ = observation_noise * spread**2
        self.predictor_noise_variance_ = model.noise_variance * spread**2
        self.fve_ = result.fve
        self.lambda_mean_, self.lambda_cov_ = result.lambda_mean, result.lambda_cov
        self.df_mean_, self.df_cov_ = result.df_mean, result.df_cov


def _measurement_noise(data, fitted):
    """The fitted noise variance, capped by the difference-based estimate."""
    subject = np.repeat(np.arange(len(data)), data.n_obs)
    difference = difference_estimate_or_none(data.times, data.values, subject)
    return fitted if difference is None else min(fitted, difference)
