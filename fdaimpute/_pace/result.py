"""The typed results passed between PACE's steps, and the fitted model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fdaimpute._core.state import check_array, check_number, check_profile
from fdaimpute._fpca.heldout import profile_factor
from fdaimpute._numerics.local_linear import local_linear_at, local_linear_binned
from fdaimpute._pace.binning import Bins, CovMoments


@dataclass(frozen=True)
class MeanCurve:
    """The local-linear mean, evaluable at any times from its binned sums.

    Attributes
    ----------
    centres, weight, total : ndarray of shape (n_bins,)
        Bin centres, the weight of the observations in each bin and the sum
        of their values.
    bandwidth : float
        Bandwidth of the smoother.
    kernel : str
        Kernel name.
    """

    centres: np.ndarray
    weight: np.ndarray
    total: np.ndarray
    bandwidth: float
    kernel: str

    def __call__(self, times, derivative=False):
        """The mean (or, with ``derivative``, its slope) at ``times`` (any shape).

        At many times the mean comes from an interpolant accurate to about
        1e-13 of its scale (:func:`~fdaimpute._numerics.local_linear.
        local_linear_at`).
        """
        if not derivative:
            return local_linear_at(
                self.centres,
                self.weight,
                self.total,
                times,
                self.bandwidth,
                self.kernel,
            )
        t = np.asarray(times, dtype=np.float64)
        uniq, inv = np.unique(t, return_inverse=True)
        out = local_linear_binned(
            self.centres,
            self.weight,
            self.total,
            uniq,
            self.bandwidth,
            self.kernel,
            derivative=True,
        )
        return out[1][inv].reshape(t.shape)

    def check(self, name):
        """Raise ValueError if the arrays' lengths or signs are not a mean's
        (``name``: the attribute holding it, for the message)."""
        n = check_array(self.centres, f"{name}.centres", (None,)).size
        check_array(self.weight, f"{name}.weight", (n,), nonnegative=True)
        check_array(self.total, f"{name}.total", (n,))
        check_number(self.bandwidth, f"{name}.bandwidth", positive=True)


@dataclass(frozen=True)
class PooledMoments:
    """The pooled mean of some observations and the binned raw covariances around it.

    Attributes
    ----------
    bins : Bins
        Bins of the observations.
    mean : MeanCurve
        The local-linear mean.
    mean_at_bins : ndarray of shape (n_bins,)
        The mean at the bin centres.
    times, resid : ndarray of shape (n_obs,)
        Observation times and residuals from the mean.
    subject : ndarray of int of shape (n_obs,)
        Subject of each observation.
    n_subjects : int
        Number of subjects.
    moments : CovMoments
        Binned sums of the raw covariances of the residuals.
    """

    bins: Bins
    mean: MeanCurve
    mean_at_bins: np.ndarray
    times: np.ndarray
    resid: np.ndarray
    subject: np.ndarray
    n_subjects: int
    moments: CovMoments


@dataclass(frozen=True)
class CovarianceEstimate:
    """A smoothed covariance, its eigen-analysis and the noise variance.

    Attributes
    ----------
    bandwidth : float or tuple of float
        Bandwidth of the covariance smoother (``(along, across)`` when rotated).
    covariance : ndarray of shape (G, G)
        The surface on the work grid.
    noise_variance : float
        Estimated ``sigma^2``.
    eigenvalues : ndarray of shape (p,)
        The leading eigenvalues (at most ``max_components``).
    eigenfunctions : ndarray of shape (G, p)
        Their eigenfunctions on the work grid, signs fixed.
    fve : ndarray of shape (p,)
        Cumulative fraction of variance explained.
    mean_work : ndarray of shape (G,)
        The mean on the work grid.
    """

    bandwidth: float | tuple
    covariance: np.ndarray
    noise_variance: float
    eigenvalues: np.ndarray
    eigenfunctions: np.ndarray
    fve: np.ndarray
    mean_work: np.ndarray


@dataclass(frozen=True)
class PACEModel:
    """What imputation needs of a fitted PACE model.

    Attributes
    ----------
    mean : MeanCurve
        The local-linear mean.
    work_grid : ndarray of shape (G,)
        The work grid.
    mean_work : ndarray of shape (G,)
        The mean on the work grid.
    eigenvalues : ndarray of shape (K,)
        The ``K`` components' eigenvalues.
    eigenfunctions : ndarray of shape (G, K)
        Their eigenfunctions on the work grid.
    all_eigenvalues : ndarray of shape (p,)
        Every kept eigenvalue, ``p >= K`` (fdapace builds ``Sigma_i`` from them).
    all_eigenfunctions : ndarray of shape (G, p)
        Their eigenfunctions.
    noise_variance : float
        ``sigma^2`` of the predictor (``Sigma_i``).
    observation_noise : float or None, default=None
        The measurement-noise variance a new observation adds to the curve
        (``None``: ``noise_variance``). Smaller than ``noise_variance``
        where the held-out points raised the predictor's.
    rest_weight : float, default=1.0
        Share of the variance of the components beyond ``K`` that the
        bands carry (chosen on held-out points, see ``_fpca/heldout.py``).
    misfit_variance : float, default=0.0
        Variance of the model's own error added to the bands (likewise).
    band_profile : tuple of ndarray or None, default=None
        ``(knots, factor)``: the factor of the bands' variance (curve error
        and measurement noise alike), linear in time between the knots
        (likewise; None: 1 everywhere).
    """

    mean: MeanCurve
    work_grid: np.ndarray
    mean_work: np.ndarray
    eigenvalues: np.ndarray
    eigenfunctions: np.ndarray
    all_eigenvalues: np.ndarray
    all_eigenfunctions: np.ndarray
    noise_variance: float
    observation_noise: float | None = None
    rest_weight: float = 1.0
    misfit_variance: float = 0.0
    band_profile: tuple | None = None

    def band_factor(self, times):
        """The factor of the bands' variance at ``times`` (1 without a profile)."""
        return profile_factor(getattr(self, "band_profile", None), times)

    @property
    def n_components(self):
        """The number of components ``K``."""
        return self.eigenvalues.size

    def check(self, name):
        """Raise ValueError if the shapes or signs are not a model's
        (``name``: the attribute holding it, for the message)."""
        self.mean.check(f"{name}.mean")
        g = check_array(self.work_grid, f"{name}.work_grid", (None,)).size
        check_array(self.mean_work, f"{name}.mean_work", (g,))
        k = check_array(
            self.eigenvalues, f"{name}.eigenvalues", (None,), nonnegative=True
        ).size
        check_array(self.eigenfunctions, f"{name}.eigenfunctions", (g, k))
        p = check_array(
            self.all_eigenvalues, f"{name}.all_eigenvalues", (None,), nonnegative=True
        ).size
        check_array(self.all_eigenfunctions, f"{name}.all_eigenfunctions", (g, p))
        for field in ("noise_variance", "rest_weight", "misfit_variance"):
            check_number(getattr(self, field), f"{name}.{field}")
        if self.observation_noise is not None:
            check_number(self.observation_noise, f"{name}.observation_noise")
        check_profile(self.band_profile, f"{name}.band_profile")


@dataclass(frozen=True)
class PACEFit:
    """Everything a PACE fit produces.

    Attributes
    ----------
    model : PACEModel
        What imputation needs.
    estimate : CovarianceEstimate
        The covariance, its eigen-analysis and ``sigma^2`` (all kept components).
    n_bins : int
        Number of bins of the mean and covariance sums.
    cv_results : dict or None
        Held-out-point cross-validation's bandwidths and scores, if it ran.
    """

    model: PACEModel
    estimate: CovarianceEstimate
    n_bins: int
    cv_results: dict | None
