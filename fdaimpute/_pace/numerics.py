"""The two sets of PACE numerics: ours (the default) and fdapace's.

A :class:`PACEImputer <fdaimpute.pace.PACEImputer>` picks one of these
classes once, in ``fit``, from ``fdapace_compat``; every step that differs
between the two (covariance smoother, noise variance, covariance GCV,
quadrature, sign convention, evaluation off the work grid) is a method here.

============================  ==========================  ==========================
step                          :class:`DefaultNumerics`    :class:`FdapaceNumerics`
============================  ==========================  ==========================
covariance smoother           rotated (along, across)     isotropic product kernel
``sigma^2``                   moment estimator            rotated diagonal smoother
eigen-analysis quadrature     trapezoid                   uniform (Riemann sum)
eigenfunction signs           peak positive               inner product with mean
``Sigma_i`` built from        the ``K`` components        all kept components
off the work grid             cubic spline, mean exact    linear interpolation
============================  ==========================  ==========================
"""

from __future__ import annotations

import numpy as np

from fdaimpute._core.timing import phase
from fdaimpute._fpca.eigen import eigen_analysis, orient_by_mean, orient_by_peak
from fdaimpute._fpca.scores import posterior_scores, truncated_error_variance
from fdaimpute._numerics.interpolate import (
    fmm_spline,
    interpolate_shared,
    slope_shared,
    spline_columns,
)
from fdaimpute._numerics.local_linear import local_linear_binned
from fdaimpute._pace import bandwidth as bw
from fdaimpute._pace.binning import covariance_moments, regular_step
from fdaimpute._pace.noise_variance import fdapace_sigma2, moment_sigma2
from fdaimpute._pace.result import CovarianceEstimate, MeanCurve, PooledMoments
from fdaimpute._pace.surface import RotatedSmoother, smooth_surface

__all__ = ["DefaultNumerics", "FdapaceNumerics", "MAX_EXACT_TIMES"]

#: Most distinct times evaluated (and, by fdapace, binned) exactly.
MAX_EXACT_TIMES = 2000


class _Numerics:
    """What both numerics share; subclasses fill in the steps that differ.

    Parameters
    ----------
    kernel : str
        Kernel of the mean and covariance smoothers.
    work_grid : ndarray of shape (G,)
        Regular grid of the covariance surface and the eigen-analysis.
    measurement_error : bool
        Model measurement error (leave the raw variances out of the
        covariance smoother and estimate ``sigma^2``).
    """

    #: Default cap on the number of components.
    component_cap = 50
    #: With ``binning="auto"``, bin exactly up to this many irregular times.
    max_exact_bins = None
    #: Quadrature rule of the eigen-analysis.
    quadrature = "trapezoid"

    def __init__(self, kernel, work_grid, measurement_error):
        self.kernel = kernel
        self.work_grid = work_grid
        self.measurement_error = measurement_error

    # ------------------------------------------------------------------ #
    # fitting
    def pool(self, times, values, subject, n_subjects, bins, bandwidth_mean, rng):
        """Mean at the bins and binned raw covariances of some observations.

        ``rng`` (a ``RandomState``) draws the folds of
        ``bandwidth_mean="cv"``; no other rule uses it.

        Returns
        -------
        PooledMoments
        """
        with phase("mean"):
            ones = np.ones(times.size)
            weight, total = bins.spread(ones), bins.spread(values)
            total_sq = bins.spread(values * values)
            h_mean = bw.mean_bandwidth(
                bandwidth_mean,
                bins,
                (weight, total, total_sq),
                values,
                subject,
                n_subjects,
                self.kernel,
                rng,
            )
            at_bins = local_linear_binned(
                bins.centres, weight, total, bins.centres, h_mean, self.kernel
            )
            resid = values - bins.interpolate(at_bins)
        with phase("covariance"):
            moments = covariance_moments(
                bins,
                resid,
                subject,
                n_subjects,
                include_diagonal=not self.measurement_error,
            )
        mean = MeanCurve(bins.centres, weight, total, float(h_mean), self.kernel)
        return PooledMoments(
            bins, mean, at_bins, times, resid, subject, n_subjects, moments
        )

    def check_bins(self, bins):
        """Raise if these numerics cannot smooth on ``bins``."""

    def smoother(self, moments):
        """A reusable smoother of ``moments`` for many bandwidths, or None."""
        return None

    def cov_bandwidth(self, rule, pooled):
        """The covariance bandwidth of a rule ("fdapace", "gcv") or a value.

        Returns
        -------
        float or tuple of float
        """
        if isinstance(rule, str) and rule == "fdapace":
            return 0.10 * (self.work_grid[-1] - self.work_grid[0])
        if isinstance(rule, str) and rule == "gcv":
            return self._gcv_bandwidth(pooled)
        if np.ndim(rule) == 1:
            return (float(rule[0]), float(rule[1]))
        return float(rule)

    def noise_variance(self, moments, cov, bandwidth):
        """``sigma^2`` (0 without measurement error), floored above zero."""
        if not self.measurement_error:
            return 0.0
        scale = moments.diag_total.sum() / max(moments.diag_count.sum(), 1.0)
        s2 = self._raw_noise_variance(moments, cov, bandwidth)
        return float(max(s2, 1e-6 * scale, 1e-300))

    def eigen(self, cov, max_components):
        """All positive eigenvalues and the leading eigenfunctions of ``cov``."""
        return eigen_analysis(
            cov, self.work_grid, max_components=max_components, rule=self.quadrature
        )

    def estimate_covariance(self, pooled, bandwidth, max_components):
        """Smooth, decompose and orient the covariance; estimate ``sigma^2``.

        Parameters
        ----------
        pooled : PooledMoments
            Mean and binned raw covariances.
        bandwidth : float or tuple of float
            Covariance bandwidth.
        max_components : int
            Most components to keep.

        Returns
        -------
        CovarianceEstimate
        """
        if np.ndim(bandwidth):
            bandwidth = tuple(float(h) for h in bandwidth)
        else:
            bandwidth = float(bandwidth)
        cov = self.smooth(pooled.moments, bandwidth)
        sigma2 = self.noise_variance(pooled.moments, cov, bandwidth)
        values, phi = self.eigen(cov, max_components)
        lam = values[: phi.shape[1]]
        mean_work = self.mean_on_work_grid(pooled)
        phi = self.orient(phi, mean_work)
        fve = np.cumsum(lam) / self._variance_total(lam, values)
        return CovarianceEstimate(bandwidth, cov, sigma2, lam, phi, fve, mean_work)

    def mean_on_work_grid(self, pooled):
        """The mean on the work grid."""
        mean = pooled.mean
        return local_linear_binned(
            mean.centres,
            mean.weight,
            mean.total,
            self.work_grid,
            mean.bandwidth,
            self.kernel,
        )

    # ------------------------------------------------------------------ #
    # evaluation of a fitted model
    def scores(self, model, times, values, offsets, with_cov=False):
        """Conditional-expectation scores (and covariance) of subjects.

        Parameters
        ----------
        model : PACEModel
            The fitted model.
        times, values : ndarray of shape (n_obs,)
            The subjects' observations, concatenated.
        offsets : ndarray of shape (n_subjects + 1,)
            CSR offsets.
        with_cov : bool, default=False
            Also return the posterior covariance of the scores.

        Returns
        -------
        ndarray of shape (n_subjects, K), and (n_subjects, K, K) with ``with_cov``
        """
        lam, phi = self._posterior_components(model)
        resid, uniq, index = self._distinct(model, times, values)
        return posterior_scores(
            resid,
            self.basis_at(phi, uniq),
            offsets,
            lam,
            model.noise_variance,
            n_scores=model.n_components,
            with_cov=with_cov,
            time_index=index,
        )

    def error_variance(self, model, times, values, offsets, grid):
        """Scores and the pointwise variance of the curves' error at ``grid``.

        Here the posterior variance of the model's scores.

        Returns
        -------
        scores : ndarray of shape (n_subjects, K)
        variance : ndarray of shape (n_subjects, n_grid)
        """
        scores, cov = self.scores(model, times, values, offsets, with_cov=True)
        basis = self.basis_at(model.eigenfunctions, grid)
        return scores, np.einsum("gk,nkl,gl->ng", basis, cov, basis)

    @staticmethod
    def _distinct(model, times, values):
        """Residuals, and the distinct times with each one's index (if few)."""
        uniq, index = np.unique(times, return_inverse=True)
        resid = values - model.mean(uniq)[index]
        if uniq.size > MAX_EXACT_TIMES:
            uniq, index = times, None
        return resid, uniq, index


class DefaultNumerics(_Numerics):
    """Our numerics: rotated smoother, moment ``sigma^2``, splines off the grid."""

    def check_bins(self, bins):
        """The rotated smoother needs regular bins."""
        if regular_step(bins.centres) is None:
            raise ValueError(
                "binning=False with irregular distinct times: the rotated "
                "covariance smoother needs bins on a regular grid; use "
                "binning='auto' or an integer, or fdapace_compat=True"
            )

    def smoother(self, moments):
        """The rotated smoother of ``moments`` (reused across bandwidths)."""
        return RotatedSmoother(moments, self.work_grid, self.kernel)

    def smooth(self, moments, bandwidth, smoother=None):
        """Covariance surface; a number is isotropic, a pair ``(along, across)``."""
        if smoother is None:
            smoother = self.smoother(moments)
        along, across = (bandwidth, bandwidth) if np.ndim(bandwidth) == 0 else bandwidth
        return smoother(float(along), float(across))

    def _raw_noise_variance(self, moments, cov, bandwidth):
        return moment_sigma2(moments, self.work_grid, cov)

    def _gcv_bandwidth(self, pooled):
        return bw.gcv_rotated_bandwidth(
            pooled.times,
            pooled.resid,
            pooled.subject,
            pooled.n_subjects,
            self.work_grid[0],
            self.work_grid[-1],
            self.kernel,
            include_diagonal=not self.measurement_error,
        )

    def orient(self, phi, mean_work):
        """Each eigenfunction's largest absolute value positive."""
        return orient_by_peak(phi)

    def _variance_total(self, lam, values):
        return values.sum()

    def _posterior_components(self, model):
        return model.eigenvalues, model.eigenfunctions

    def basis_at(self, phi, times, derivative=False):
        """Cubic spline of the eigenfunctions (or slopes), constant beyond the grid."""
        return spline_columns(self.work_grid, phi, times, derivative=derivative)

    def curves(self, model, scores, grid):
        """``mu + Phi xi`` at ``grid``, the mean evaluated exactly."""
        return model.mean(grid) + scores @ self.basis_at(model.eigenfunctions, grid).T

    def slopes(self, model, scores, grid):
        """The exact derivative of :meth:`curves`."""
        slope = self.basis_at(model.eigenfunctions, grid, derivative=True)
        return model.mean(grid, derivative=True) + scores @ slope.T

    def mean_at(self, model, times):
        """The mean at any times."""
        return model.mean(times)

    def error_variance(self, model, times, values, offsets, grid):
        """Scores and the pointwise variance of the curves' error at ``grid``.

        The components beyond ``K`` (every other positive eigenvalue of the
        smoothed covariance, weighted by ``model.rest_weight``) are left out
        of the predictor but not out of the error (see
        :func:`~fdaimpute._fpca.scores.truncated_error_variance`), and the
        model's own error adds ``model.misfit_variance``; the whole is
        scaled by the model's time profile of the bands
        (:meth:`~fdaimpute._pace.result.PACEModel.band_factor`).

        Returns
        -------
        scores : ndarray of shape (n_subjects, K)
        variance : ndarray of shape (n_subjects, n_grid)
        """
        k = model.n_components
        rest_lam = model.rest_weight * model.all_eigenvalues[k:]
        if not rest_lam.size or not model.rest_weight > 0:
            scores, variance = super().error_variance(
                model, times, values, offsets, grid
            )
            return scores, (variance + model.misfit_variance) * model.band_factor(grid)
        phi, rest_phi = model.eigenfunctions, model.all_eigenfunctions[:, k:]
        resid, uniq, index = self._distinct(model, times, values)
        scores, cov, cross = posterior_scores(
            resid,
            self.basis_at(phi, uniq),
            offsets,
            model.eigenvalues,
            model.noise_variance,
            with_cov=True,
            time_index=index,
            rest_basis=self.basis_at(rest_phi, uniq),
        )
        variance = truncated_error_variance(
            self.basis_at(phi, grid),
            self.basis_at(rest_phi, grid),
            cov,
            cross,
            rest_lam,
        )
        variance += model.misfit_variance
        return scores, variance * model.band_factor(grid)


class FdapaceNumerics(_Numerics):
    """fdapace's numerics: isotropic smoother, Riemann sums, linear interpolation."""

    component_cap = 20
    max_exact_bins = MAX_EXACT_TIMES
    quadrature = "uniform"

    def smooth(self, moments, bandwidth, smoother=None):
        """Isotropic surface (of a pair, the first bandwidth)."""
        h = bandwidth[0] if np.ndim(bandwidth) else bandwidth
        return smooth_surface(moments, self.work_grid, float(h), self.kernel)

    def _raw_noise_variance(self, moments, cov, bandwidth):
        h = bandwidth[1] if np.ndim(bandwidth) else bandwidth
        return fdapace_sigma2(moments, self.work_grid, float(h), self.kernel)

    def _gcv_bandwidth(self, pooled):
        return bw.gcv_cov_bandwidth(
            pooled.times,
            pooled.resid,
            pooled.subject,
            pooled.n_subjects,
            self.work_grid,
            self.kernel,
            include_diagonal=not self.measurement_error,
        )

    def mean_on_work_grid(self, pooled):
        """With exact bins, R's cubic spline of the mean at the distinct times.

        fdapace returns its mean on the work grid as ``spline()`` of the mean
        at the observation times (Forsythe, Malcolm & Moler's end
        conditions, not scipy's not-a-knot ends).
        """
        if pooled.bins.exact:
            return fmm_spline(pooled.bins.centres, pooled.mean_at_bins, self.work_grid)
        return super().mean_on_work_grid(pooled)

    def orient(self, phi, mean_work):
        """Each eigenfunction's inner product with the mean non-negative."""
        return orient_by_mean(phi, mean_work)

    def _variance_total(self, lam, values):
        return lam.sum()

    def _posterior_components(self, model):
        return model.all_eigenvalues, model.all_eigenfunctions

    def basis_at(self, phi, times, derivative=False):
        """Linear interpolation of the eigenfunctions (or their slopes)."""
        interp = slope_shared if derivative else interpolate_shared
        return interp(phi.T, self.work_grid, times).T

    def curves(self, model, scores, grid):
        """``mu + Phi xi`` on the work grid, interpolated linearly to ``grid``."""
        work = model.mean_work + scores @ model.eigenfunctions.T
        return interpolate_shared(work, self.work_grid, grid)

    def slopes(self, model, scores, grid):
        """The exact derivative of :meth:`curves`."""
        work = model.mean_work + scores @ model.eigenfunctions.T
        return slope_shared(work, self.work_grid, grid)

    def mean_at(self, model, times):
        """The mean on the work grid, interpolated linearly."""
        return np.interp(times, self.work_grid, model.mean_work)
