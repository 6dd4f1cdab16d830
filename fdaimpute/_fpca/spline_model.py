"""The fitted FACE model: spline mean and eigenfunctions, and its predictions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fdaimpute._core.state import check_array, check_number, check_profile
from fdaimpute._fpca.heldout import profile_factor
from fdaimpute._fpca.scores import posterior_scores, truncated_error_variance
from fdaimpute._fpca.splines import evaluate

# Distinct times up to which each subject's covariance is gathered from one
# precomputed matrix rather than rebuilt from basis rows.
_MAX_SHARED_TIMES = 2_000


@dataclass
class FACEModel:
    """Mean and covariance as splines, and the predictor's settings.

    Attributes
    ----------
    degree : int
        Degree of both spline bases.
    mean_knots, mean_coef : ndarray
        The mean ``mu(t) = sum_a coef_a b_a(t)``.
    cov_knots : ndarray
        Knots of the covariance basis (``c`` functions).
    theta : ndarray of shape (c, c)
        Symmetric coefficients: ``C(s, t) = b(s)^T theta b(t)``.
    eigenvalues : ndarray of shape (p,)
        Positive eigenvalues of the covariance operator, decreasing.
    eigen_coef : ndarray of shape (c, p)
        Eigenfunction ``k`` is ``b(t)^T eigen_coef[:, k]`` (unit L2 norm).
    n_components : int
        Components in the predictor (the rest enter its error variance).
    noise_variance : float
        Measurement-error variance.
    band_weight, band_misfit : float
        Share ``w`` of the left-out components' variance and the model's
        error variance ``tau^2`` that the error variance carries (see
        :mod:`fdaimpute._fpca.spline_bands`).
    band_profile : tuple of ndarray or None
        ``(knots, factor)``: the factor of the bands' variance (curve error
        and measurement noise alike) over the model's time (see
        :func:`fdaimpute._fpca.heldout.band_profile`; None: 1 everywhere).
    """

    degree: int
    mean_knots: np.ndarray
    mean_coef: np.ndarray
    cov_knots: np.ndarray
    theta: np.ndarray
    eigenvalues: np.ndarray
    eigen_coef: np.ndarray
    n_components: int
    noise_variance: float
    band_weight: float = 1.0
    band_misfit: float = 0.0
    band_profile: tuple | None = None

    def band_factor(self, t):
        """The factor of the bands' variance at ``t`` (1 without a profile)."""
        return profile_factor(self.band_profile, t)

    def check(self, name):
        """Raise ValueError if the shapes or signs are not a model's
        (``name``: the attribute holding it, for the message)."""
        degree = check_number(self.degree, f"{name}.degree", integer=True)
        knots = check_array(self.mean_knots, f"{name}.mean_knots", (None,))
        check_array(self.mean_coef, f"{name}.mean_coef", (knots.size - degree - 1,))
        knots = check_array(self.cov_knots, f"{name}.cov_knots", (None,))
        c = knots.size - degree - 1
        check_array(self.theta, f"{name}.theta", (c, c))
        p = check_array(
            self.eigenvalues, f"{name}.eigenvalues", (None,), nonnegative=True
        ).size
        check_array(self.eigen_coef, f"{name}.eigen_coef", (c, p))
        k = check_number(self.n_components, f"{name}.n_components", integer=True)
        if k > p:
            raise ValueError(
                f"{name}.n_components is {k}, more than its {p} eigenvalues"
            )
        for field in ("noise_variance", "band_weight", "band_misfit"):
            check_number(getattr(self, field), f"{name}.{field}")
        check_profile(self.band_profile, f"{name}.band_profile")

    def mean_at(self, t, derivative=0):
        """The mean (or its derivative) at ``t``; linear beyond the range."""
        return evaluate(
            self.mean_knots, self.mean_coef, self.degree, t, derivative, "linear"
        )

    def eigenfunctions_at(self, t, derivative=0, components=None):
        """Eigenfunctions (or derivatives) at ``t``, shape ``(len(t), k)``.

        ``components`` is a slice of the eigenpairs (default: the predictor's).
        Beyond the range each eigenfunction is held at its end value.
        """
        if components is None:
            components = slice(0, self.n_components)
        coef = self.eigen_coef[:, components]
        if coef.shape[1] == 0:
            return np.zeros((np.size(t), 0))
        return evaluate(self.cov_knots, coef, self.degree, t, derivative)

    def covariance_on(self, grid):
        """The covariance from all positive eigenpairs on ``grid`` (PSD)."""
        phi = self.eigenfunctions_at(grid, components=slice(None))
        return (phi * self.eigenvalues) @ phi.T

    def _observed(self, times, values, with_rest=False):
        """Residuals and basis rows (or distinct-time rows and their index)."""
        resid = values - self.mean_at(times)
        distinct, index = np.unique(times, return_inverse=True)
        shared = distinct.size <= _MAX_SHARED_TIMES
        at = distinct if shared else times
        rest = slice(self.n_components, None) if with_rest else None
        basis = self.eigenfunctions_at(at)
        rest_basis = None if rest is None else self.eigenfunctions_at(at, 0, rest)
        return resid, basis, rest_basis, (index if shared else None)

    def scores(self, times, values, offsets):
        """Conditional-expectation scores ``E[xi_i | y_i]``, shape (n, K)."""
        n = offsets.size - 1
        if self.n_components == 0:
            return np.zeros((n, 0))
        resid, basis, _, index = self._observed(times, values)
        lam = self.eigenvalues[: self.n_components]
        return posterior_scores(
            resid, basis, offsets, lam, self.noise_variance, time_index=index
        )

    def error_variance(self, times, values, offsets, grid):
        """Scores and the posterior variance of each curve on ``grid``.

        The variance counts the predictor's score uncertainty, the share
        ``band_weight`` of the positive components it leaves out (their
        scores predicted as 0) and the model's error ``band_misfit``, all
        times the time profile ``band_profile``.
        """
        n = offsets.size - 1
        k = self.n_components
        rest_lam = self.eigenvalues[k:]
        rest_grid = self.eigenfunctions_at(grid, components=slice(k, None))
        if k == 0:
            left_out = self.band_weight * (rest_grid**2) @ rest_lam
            var = (left_out + self.band_misfit) * self.band_factor(grid)
            return np.zeros((n, 0)), np.tile(var, (n, 1))
        resid, basis, rest_basis, index = self._observed(times, values, True)
        scores, cov, cross = posterior_scores(
            resid,
            basis,
            offsets,
            self.eigenvalues[:k],
            self.noise_variance,
            with_cov=True,
            time_index=index,
            rest_basis=rest_basis,
        )
        phi = self.eigenfunctions_at(grid)
        var = truncated_error_variance(phi, rest_grid, cov, cross, rest_lam)
        if self.band_weight != 1.0:
            kept = np.einsum("gk,nkl,gl->ng", phi, cov, phi)
            var = kept + self.band_weight * (var - kept)
        return scores, (var + self.band_misfit) * self.band_factor(grid)

    def curves(self, scores, t, derivative=0):
        """``mu + Phi xi`` (or its derivative) at ``t`` for each row of ``scores``."""
        phi = self.eigenfunctions_at(t, derivative)
        return self.mean_at(t, derivative)[None, :] + scores @ phi.T
