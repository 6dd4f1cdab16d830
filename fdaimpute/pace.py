"""PACE: functional principal components by conditional expectation."""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from scipy.interpolate import CubicSpline
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from fdaimpute import _fpca
from fdaimpute._interpolate import interpolate_shared, slope_shared, spline_columns
from fdaimpute._local_linear import gcv_mean_bandwidth, local_linear_binned
from fdaimpute._pace_cv import select_by_cv
from fdaimpute._validation import check_positive_number
from fdaimpute.base import BaseImputer
from fdaimpute.smoothing import KERNELS, bandwidth_candidates

__all__ = ["PACEImputer"]

_BANDWIDTH_RULES_MEAN = ("gcv", "cv", "fdapace")
_BANDWIDTH_RULES_COV = ("cv", "gcv", "fdapace")
_K_RULES = ("cv", "fve", "aic", "bic")
_MAX_EXACT_BINS = 2000  # distinct times binned exactly (fdapace mode)
_CHUNK = 20_000  # subjects per block in transform (bounds memory)


class PACEImputer(BaseImputer):
    """Functional PCA by conditional expectation (PACE) for sparse curves.

    The method of Yao, Müller & Wang (2005): a local-linear estimate of the
    mean from the pooled data, a two-dimensional smoother of the raw
    covariances ``(y_ij - mu(t_ij)) (y_ik - mu(t_ik))``, ``j != k``, the
    measurement-error variance from the diagonal, an eigen-decomposition of
    the smoothed covariance on a regular work grid, and each subject's
    scores by conditional expectation (the best linear predictor)
    ``xi_i = Lambda Phi_i^T Sigma_i^{-1} (y_i - mu_i)``. Curves are
    ``mu + Phi xi_i`` on any grid.

    By default the bandwidths and the number of components are chosen by
    held-out-point cross-validation, which tracks imputation error, and
    the covariance is smoothed in rotated coordinates with a long
    bandwidth along the diagonal and a short one across it; see Notes.
    :meth:`fdapace` builds an estimator that reproduces the R package
    fdapace.

    Parameters
    ----------
    grid : int or array-like, default=None
        Output grid of ``transform``: ``None`` gives 101 points over the
        training time range (or the column times of a dense input), an int
        that many equally spaced points, an array those times.
    extrapolate : {False, True, "clip"}, default=False
        Times outside the training range: ``False`` refuses them (a grid may
        overhang the range by half its end spacing), ``True`` extrapolates
        (eigenfunctions held constant beyond the work grid, the mean is the
        local-linear fit), ``"clip"`` holds each curve constant beyond the range.
    keep_observed : bool, default=False
        Output observed values as they are where a grid time equals an
        observation time (otherwise observed cells are smoothed too).
    kernel : {"gaussian", "epanechnikov"}, default="gaussian"
        Smoothing kernel for the mean and the covariance (fdapace's default
        for sparse data is Gaussian).
    bandwidth_mean : float or {"gcv", "cv", "fdapace"}, default="gcv"
        Bandwidth of the mean smoother: a number, generalised
        cross-validation of the pooled smoother, 5-fold cross-validation
        over subjects, or fdapace's default rule (5% of the time range).
    bandwidth_cov : float, pair of floats or {"cv", "gcv", "fdapace"}, \
default="cv"
        Bandwidth of the covariance smoother. A float smooths isotropically;
        a pair ``(along, across)`` gives the bandwidths along and across the
        diagonal. ``"cv"`` chooses the pair (and the number of components)
        by held-out-point cross-validation; ``"gcv"`` chooses an isotropic
        bandwidth by generalised cross-validation of the surface;
        ``"fdapace"`` is fdapace's default rule (10% of the time range).
    n_work_grid : int, default=101
        Points of the regular work grid on which the covariance is
        smoothed and decomposed (fdapace: 51). Rough processes need a fine
        grid; the cost grows as its square.
    n_components : int or {"cv", "fve", "aic", "bic"}, default="cv"
        Number of components ``K``: fixed, chosen by held-out-point
        cross-validation, by the fraction of variance explained, or by
        fdapace's AIC / BIC (stop at the first increase).
    fve_threshold : float, default=0.99
        Threshold for ``n_components="fve"`` (fdapace's default).
    max_components : int, default=None
        Upper bound on ``K``; default ``min(50, n_work_grid - 2)`` (fdapace:
        20), and at most ``n_subjects - 2``.
    measurement_error : bool, default=True
        Model additive measurement error: the raw covariances on the
        diagonal are left out of the smoother and ``sigma^2`` is estimated.
        ``False`` smooths all pairs and sets ``sigma^2 = 0``.
    binning : "auto", int or False, default="auto"
        How observation times are binned for the mean and covariance sums
        (memory O(n_bins^2), independent of the number of subjects).
        ``"auto"``: exact bins at the distinct times when they form a
        regular grid of at most ``2 (n_work_grid - 1) + 1`` points (or, with
        ``fdapace_compat``, when there are at most 2,000 of them), otherwise
        linear binning onto ``2 (n_work_grid - 1) + 1`` regular bins. An
        int: linear binning onto that many bins.
        ``False``: exact bins at the distinct times, however many.
    fdapace_compat : bool, default=False
        Reproduce fdapace's numerics: isotropic product-kernel local-linear
        covariance smoother, ``sigma^2`` from the rotated diagonal smoother
        over the middle half of the range, Riemann-sum eigen-analysis,
        ``Sigma_i`` built from all ``max_components`` eigenpairs, linear
        interpolation to the output grid. Use :meth:`fdapace` for fdapace's
        defaults.
    random_state : int, RandomState or None, default=None
        Randomness of the fit: the held-out points of cross-validation
        (``bandwidth_cov="cv"`` or ``n_components="cv"``) and the subject
        folds of ``bandwidth_mean="cv"``. An int gives reproducible fits;
        ``None`` uses NumPy's global random state.

    Attributes
    ----------
    grid_ : ndarray of shape (n_grid,)
        Output grid of ``transform``.
    mean_ : ndarray of shape (n_grid,)
        Estimated mean function on ``grid_``, as every imputer stores it:
        the curve imputed for a subject whose scores are all zero.
    work_grid_ : ndarray of shape (n_work_grid,)
        The regular grid of the eigen-analysis.
    mean_work_ : ndarray of shape (n_work_grid,)
        Estimated mean function on ``work_grid_`` (the mean the
        eigenfunctions are oriented by; with ``fdapace_compat`` the mean
        that is interpolated to other times).
    covariance_ : ndarray of shape (n_work_grid, n_work_grid)
        Smoothed covariance surface on ``work_grid_``.
    eigenvalues_ : ndarray of shape (n_components_,)
        Leading eigenvalues.
    eigenfunctions_ : ndarray of shape (n_work_grid, n_components_)
        Eigenfunctions on ``work_grid_``, normalised to unit L2 norm.
    noise_variance_ : float
        Estimated measurement-error variance ``sigma^2``.
    n_components_ : int
        Number of components used.
    fve_ : ndarray of shape (n_components_,)
        Cumulative fraction of variance explained by the leading components.
    bandwidth_mean_ : float
        Bandwidth of the mean smoother.
    bandwidth_cov_ : float or tuple of float
        Bandwidth of the covariance smoother (``(along, across)`` for the
        rotated smoother).
    cv_results_ : dict or None
        With cross-validation: the evaluated bandwidths, their scores (mean
        squared error of the held-out points, best over ``K``) and the
        score of each ``K`` at the chosen bandwidths.
    n_bins_ : int
        Number of bins of the mean and covariance sums.
    time_range_ : tuple of float
        Range of the training times.

    See Also
    --------
    fdaimpute.oracle.ConditionalMean : the same predictor with the true
        covariance.

    Notes
    -----
    *Defaults that differ from fdapace, and why.* fdapace sets the
    bandwidths to 5% and 10% of the range and keeps 99% of the variance;
    on rough processes this oversmooths the covariance (its ridge on the
    diagonal is flattened, the missing variance is booked as noise) and
    truncates too early. Here the covariance bandwidths and ``K`` minimise
    the squared error of predicting held-out observations (20% of the
    points of up to 3,000 training subjects, hidden from every estimation
    step) from the rest of each subject - the imputation error itself plus
    the constant ``sigma^2``. The search starts isotropic and then
    lengthens the bandwidth along the diagonal and shortens it across.
    The local fit is linear along the diagonal and, across it, quadratic
    near the diagonal (to follow the ridge that rough processes have
    there) blending to linear farther out.
    Predictions for all ``K`` come from one Cholesky factorisation per
    subject. ``sigma^2`` is the mean squared residual at the observations
    minus the mean of the smoothed covariance on the diagonal there (a
    moment estimator consistent with the fitted surface).

    *Scalability.* The raw covariances are never materialised: each
    subject's residuals are spread onto bins and the pair sums are the
    Gram matrix of a sparse subjects-by-bins matrix. Scores are computed
    by batched solves grouped by the number of observations.

    References
    ----------
    .. [1] Yao, F., Müller, H.-G. and Wang, J.-L. (2005). Functional data
       analysis for sparse longitudinal data. JASA 100(470), 577-590.
    .. [2] Zhou, Y. et al. fdapace: Functional Data Analysis and Empirical
       Dynamics. R package version 0.6.0.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> from fdaimpute.pace import PACEImputer
    >>> sim = fi.simulate.sand_paper(n=300, n_obs="8-12", random_state=0)
    >>> pace = PACEImputer(random_state=0).fit(sim.train.data)
    >>> pace.transform(sim.test.data).shape
    (15, 101)
    >>> curves, std = pace.transform(sim.test.data, return_std=True)
    >>> bool((std > 0).all())
    True
    """

    def __init__(
        self,
        *,
        grid=None,
        extrapolate=False,
        kernel="gaussian",
        bandwidth_mean="gcv",
        bandwidth_cov="cv",
        n_work_grid=101,
        n_components="cv",
        fve_threshold=0.99,
        max_components=None,
        measurement_error=True,
        binning="auto",
        fdapace_compat=False,
        random_state=None,
        keep_observed=False,
    ):
        self.grid = grid
        self.extrapolate = extrapolate
        self.kernel = kernel
        self.bandwidth_mean = bandwidth_mean
        self.bandwidth_cov = bandwidth_cov
        self.n_work_grid = n_work_grid
        self.n_components = n_components
        self.fve_threshold = fve_threshold
        self.max_components = max_components
        self.measurement_error = measurement_error
        self.binning = binning
        self.fdapace_compat = fdapace_compat
        self.random_state = random_state
        self.keep_observed = keep_observed

    @classmethod
    def fdapace(cls, **params):
        """An estimator with fdapace 0.6.0's defaults for sparse data.

        Equivalent to ``FPCA(Ly, Lt)`` with its default options: Gaussian
        kernel, bandwidths 5% / 10% of the time range, a 51-point work grid,
        ``K`` by 99% FVE with at most 20 components, measurement error.
        Keyword arguments override these (e.g. ``bandwidth_cov=0.05``,
        ``n_components=12``, ``n_work_grid=101`` for fdapace's
        ``userBwCov``, ``methodSelectK``, ``nRegGrid``).

        Returns
        -------
        PACEImputer

        Examples
        --------
        >>> from fdaimpute.pace import PACEImputer
        >>> PACEImputer.fdapace(bandwidth_cov=0.05).n_work_grid
        51
        """
        defaults = dict(
            kernel="gaussian",
            bandwidth_mean="fdapace",
            bandwidth_cov="fdapace",
            n_work_grid=51,
            n_components="fve",
            fve_threshold=0.99,
            max_components=20,
            measurement_error=True,
            fdapace_compat=True,
        )
        defaults.update(params)
        return cls(**defaults)

    # ------------------------------------------------------------------ #
    # parameter checks
    def _check_params(self, n_subjects):
        if self.kernel not in KERNELS:
            raise ValueError(
                f"kernel must be one of {sorted(KERNELS)}, got {self.kernel!r}"
            )
        for name, rules in (("bandwidth_mean", _BANDWIDTH_RULES_MEAN),):
            value = getattr(self, name)
            if isinstance(value, str):
                if value not in rules:
                    raise ValueError(
                        f"{name} must be a positive number or one of "
                        f"{rules}, got {value!r}"
                    )
            else:
                check_positive_number(value, name)
        bw = self.bandwidth_cov
        if isinstance(bw, str):
            if bw not in _BANDWIDTH_RULES_COV:
                raise ValueError(
                    "bandwidth_cov must be a positive number, a pair (along, "
                    f"across) or one of {_BANDWIDTH_RULES_COV}, got {bw!r}"
                )
        elif np.ndim(bw) == 1:
            if len(bw) != 2:
                raise ValueError(
                    "bandwidth_cov as a sequence must be a pair "
                    f"(along, across), got {bw!r}"
                )
            for b in bw:
                check_positive_number(b, "bandwidth_cov")
            if self.fdapace_compat and not np.isclose(bw[0], bw[1]):
                raise ValueError(
                    "fdapace_compat=True smooths isotropically; give "
                    "bandwidth_cov as a single number"
                )
        else:
            check_positive_number(bw, "bandwidth_cov")
        if self.fdapace_compat and _is_rule(bw, "cv"):
            raise ValueError(
                "bandwidth_cov='cv' chooses a rotated smoother, which "
                "fdapace_compat=True does not use; use 'gcv', "
                "'fdapace' or a number"
            )
        g = self.n_work_grid
        if not isinstance(g, numbers.Integral) or isinstance(g, bool) or g < 3:
            raise ValueError(f"n_work_grid must be an integer >= 3, got {g!r}")
        k = self.n_components
        if isinstance(k, str):
            if k not in _K_RULES:
                raise ValueError(
                    f"n_components must be a positive integer or one "
                    f"of {_K_RULES}, got {k!r}"
                )
        elif not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 1:
            raise ValueError(
                f"n_components must be a positive integer or one of "
                f"{_K_RULES}, got {k!r}"
            )
        if not (
            isinstance(self.fve_threshold, numbers.Real) and 0 < self.fve_threshold <= 1
        ):
            raise ValueError(
                f"fve_threshold must be in (0, 1], got {self.fve_threshold!r}"
            )
        m = self.max_components
        if m is not None and (
            not isinstance(m, numbers.Integral) or isinstance(m, bool) or m < 1
        ):
            raise ValueError(
                f"max_components must be a positive integer or None, got {m!r}"
            )
        b = self.binning
        if not (
            b == "auto"
            or b is False
            or (isinstance(b, numbers.Integral) and not isinstance(b, bool) and b >= 3)
        ):
            raise ValueError(
                f"binning must be 'auto', False or an integer >= 3, got {b!r}"
            )
        cap = 20 if self.fdapace_compat else 50
        limit = min(cap if m is None else int(m), g - 2, max(1, n_subjects - 2))
        return max(1, limit)

    def _resolve_bins(self, times, lo, hi):
        distinct = np.unique(times)
        b = self.binning
        if b is False:
            return _fpca.make_bins(times)
        if isinstance(b, numbers.Integral):
            return _fpca.make_bins(times, n_bins=int(b), lo=lo, hi=hi)
        n_bins = 2 * (self.n_work_grid - 1) + 1
        if distinct.size <= n_bins and _fpca.regular_step(distinct):
            return _fpca.make_bins(times)
        if self.fdapace_compat and distinct.size <= _MAX_EXACT_BINS:
            return _fpca.make_bins(times)
        return _fpca.make_bins(times, n_bins=n_bins, lo=lo, hi=hi)

    # ------------------------------------------------------------------ #
    # fitting
    def _fit(self, data):
        # Many small matrices: one BLAS thread is faster and shares cores well.
        with threadpool_limits(limits=1, user_api="blas"):
            return self._fit_single_thread(data)

    def _fit_single_thread(self, data):
        max_k = self._check_params(len(data))
        counts = data.n_obs
        if not np.any(counts >= 2):
            raise ValueError(
                "every subject has a single observation: the covariance cannot "
                "be estimated (PACE needs subjects with at least 2 observations)"
            )
        distinct = np.unique(data.times)
        if distinct.size < 3:
            raise ValueError(
                f"only {distinct.size} distinct observation time(s); PACE needs "
                "at least 3 to smooth the mean and covariance on a work grid"
            )
        if not np.ptp(data.values) > 0:
            raise ValueError(
                "all observed values are equal (zero variance); "
                "there is nothing to decompose"
            )
        lo, hi = self.time_range_
        self.work_grid_ = np.linspace(lo, hi, self.n_work_grid)
        bins = self._resolve_bins(data.times, lo, hi)
        self.n_bins_ = bins.centres.size
        subject = data.subject_index
        h_cov, k_cv, self.cv_results_ = self.bandwidth_cov, None, None
        needs_cv = _is_rule(self.bandwidth_cov, "cv") or _is_rule(
            self.n_components, "cv"
        )
        if not self.fdapace_compat and _fpca.regular_step(bins.centres) is None:
            raise ValueError(
                "binning=False with irregular distinct times: the rotated "
                "covariance smoother needs bins on a regular grid; use "
                "binning='auto' or an integer, or fdapace_compat=True"
            )
        # one stream for every random choice of the fit (held-out points,
        # mean-bandwidth folds), in a fixed order
        rng = check_random_state(self.random_state)
        if needs_cv:
            h_cov, k_cv, self.cv_results_ = select_by_cv(self, data, bins, max_k, rng)
        state = self._estimate(data.times, data.values, subject, len(data), bins, rng)
        self._finish(state, h_cov, k_cv, max_k, data)
        return self

    def _estimate(self, times, values, subject, n_subjects, bins, rng):
        """Mean (at bins) and binned raw covariances.

        ``rng`` (a ``RandomState``) draws the folds of
        ``bandwidth_mean="cv"``; no other rule uses it.
        """
        ones = np.ones(times.size)
        w1, s1 = bins.spread(ones), bins.spread(values)
        q1 = bins.spread(values * values)
        h_mean = self._mean_bandwidth(
            bins, w1, s1, q1, values, subject, n_subjects, rng
        )
        mu_c = local_linear_binned(
            bins.centres, w1, s1, bins.centres, h_mean, self.kernel
        )
        resid = values - bins.interpolate(mu_c)
        moments = _fpca.covariance_moments(
            bins,
            resid,
            subject,
            n_subjects,
            include_diagonal=not self.measurement_error,
        )
        return dict(
            bins=bins,
            w1=w1,
            s1=s1,
            h_mean=h_mean,
            mu_c=mu_c,
            resid=resid,
            moments=moments,
            times=times,
        )

    def _mean_bandwidth(self, bins, w1, s1, q1, values, subject, n_subjects, rng):
        bw = self.bandwidth_mean
        span = bins.centres[-1] - bins.centres[0]
        if not isinstance(bw, str):
            return float(bw)
        if bw == "fdapace":
            return 0.05 * span
        keep = w1 > 0
        cands = bandwidth_candidates(bins.centres[keep], 20, kernel=self.kernel)
        if bw == "gcv":
            return gcv_mean_bandwidth(
                bins.centres, w1, s1, q1, cands, self.kernel
            )
        return _fpca.cv_mean_bandwidth(
            bins, values, subject, n_subjects, cands, self.kernel, rng
        )

    def _smooth(self, moments, h_cov, smoother=None):
        """Covariance surface on the work grid for bandwidth ``h_cov``."""
        if self.fdapace_compat:
            h = h_cov[0] if np.ndim(h_cov) else h_cov
            return _fpca.smooth_surface(moments, self.work_grid_, float(h), self.kernel)
        if smoother is None:
            smoother = _fpca.RotatedSmoother(moments, self.work_grid_, self.kernel)
        along, across = (h_cov, h_cov) if np.ndim(h_cov) == 0 else h_cov
        return smoother(float(along), float(across))

    def _noise_variance(self, moments, cov, h_cov):
        if not self.measurement_error:
            return 0.0
        scale = moments.diag_total.sum() / max(moments.diag_count.sum(), 1.0)
        if self.fdapace_compat:
            h = h_cov[1] if np.ndim(h_cov) else h_cov
            s2 = _fdapace_sigma2(moments, self.work_grid_, float(h), self.kernel)
        else:
            s2 = _moment_sigma2(moments, self.work_grid_, cov)
        return float(max(s2, 1e-6 * scale, 1e-300))

    def _cov_bandwidth(self, state):
        bw = self.bandwidth_cov
        span = self.work_grid_[-1] - self.work_grid_[0]
        if _is_rule(bw, "fdapace"):
            return 0.10 * span
        if _is_rule(bw, "gcv"):
            args = (
                state["times"],
                state["resid"],
                state["subject"],
                state["n_subjects"],
            )
            if self.fdapace_compat:
                return _fpca.gcv_cov_bandwidth(
                    *args,
                    self.work_grid_,
                    self.kernel,
                    include_diagonal=not self.measurement_error,
                )
            return _fpca.gcv_rotated_bandwidth(
                *args,
                self.work_grid_[0],
                self.work_grid_[-1],
                self.kernel,
                include_diagonal=not self.measurement_error,
            )
        if np.ndim(bw) == 1:
            return (float(bw[0]), float(bw[1]))
        return float(bw)

    def _finish(self, state, h_cov, k_cv, max_k, data):
        state["subject"] = data.subject_index
        state["n_subjects"] = len(data)
        if isinstance(h_cov, str):
            h_cov = self._cov_bandwidth(state)
        h_cov = tuple(float(h) for h in h_cov) if np.ndim(h_cov) else float(h_cov)
        moments = state["moments"]
        cov = self._smooth(moments, h_cov)
        sigma2 = self._noise_variance(moments, cov, h_cov)
        rule = "uniform" if self.fdapace_compat else "trapezoid"
        values, phi = _fpca.eigen_analysis(
            cov, self.work_grid_, max_components=max_k, rule=rule
        )
        lam = values[: phi.shape[1]]
        mean_work = self._mean_on_work_grid(state)
        phi = _orient(phi, mean_work, self.fdapace_compat)
        denom = lam.sum() if self.fdapace_compat else values.sum()
        fve = np.cumsum(lam) / denom

        self.bandwidth_mean_ = float(state["h_mean"])
        self.bandwidth_cov_ = h_cov
        self.covariance_ = cov
        self.mean_work_ = mean_work
        self.noise_variance_ = sigma2
        self._bins_centres = state["bins"].centres
        self._w1, self._s1 = state["w1"], state["s1"]
        self._lam_all, self._phi_all = lam, phi
        k = self._choose_k(k_cv, lam, fve, data, state, sigma2)
        self.n_components_ = int(k)
        self.eigenvalues_ = lam[:k].copy()
        self.eigenfunctions_ = phi[:, :k].copy()
        self.fve_ = fve[:k].copy()
        self.mean_ = self._curves(np.zeros((1, k)), self.grid_)[0]

    def _mean_on_work_grid(self, state):
        bins = state["bins"]
        if self.fdapace_compat and bins.exact:
            # fdapace: cubic spline of the mean at the distinct times
            return CubicSpline(bins.centres, state["mu_c"])(self.work_grid_)
        return local_linear_binned(
            bins.centres,
            state["w1"],
            state["s1"],
            self.work_grid_,
            state["h_mean"],
            self.kernel,
        )

    def _choose_k(self, k_cv, lam, fve, data, state, sigma2):
        rule = self.n_components
        available = lam.size
        if isinstance(rule, numbers.Integral):
            if rule > available:
                warnings.warn(
                    f"n_components={rule} but only {available} positive "
                    f"eigenvalue(s) are available; using {available}",
                    UserWarning,
                    stacklevel=4,
                )
            return min(int(rule), available)
        if rule == "cv":
            return min(int(k_cv), available)
        if rule == "fve":
            buff = 100 * np.finfo(float).eps
            hit = np.flatnonzero(fve >= self.fve_threshold - buff)
            return int(hit[0]) + 1 if hit.size else available
        # AIC / BIC as fdapace: stop at the first increase
        penalty = 2.0 if rule == "aic" else np.log(len(data))
        resid = data.values - self._mean_at(data.times)
        basis = self._basis_at(data.times, self._phi_all)
        best_k, best = 1, np.inf
        for k in range(1, available + 1):
            crit = (
                _fpca.neg2_loglik(resid, basis[:, :k], data.offsets, lam[:k], sigma2)
                + penalty * k
            )
            if crit > best:
                break
            best_k, best = k, crit
        return best_k

    # ------------------------------------------------------------------ #
    # evaluation helpers
    def _mean_at(self, t, derivative=False):
        """The local-linear mean (or its slope) at any times."""
        t = np.asarray(t, dtype=np.float64)
        uniq, inv = np.unique(t, return_inverse=True)
        out = local_linear_binned(
            self._bins_centres,
            self._w1,
            self._s1,
            uniq,
            self.bandwidth_mean_,
            self.kernel,
            derivative=derivative,
        )
        if derivative:
            return out[1][inv].reshape(t.shape)
        return out[inv].reshape(t.shape)

    def _basis_at(self, t, phi=None, derivative=False):
        """Eigenfunctions (or slopes) at times ``t`` (rows) from the work grid.

        Linear interpolation with ``fdapace_compat``, else a cubic spline;
        constant beyond the work grid (slope zero there).
        """
        phi = self.eigenfunctions_ if phi is None else phi
        if self.fdapace_compat:
            interp = slope_shared if derivative else interpolate_shared
            return interp(phi.T, self.work_grid_, t).T
        return spline_columns(self.work_grid_, phi, t, derivative=derivative)

    def _posterior(self, data, with_cov=False):
        with threadpool_limits(limits=1, user_api="blas"):
            if len(data) <= _CHUNK:
                return self._posterior_single_thread(data, with_cov)
            # blocks of subjects keep the per-observation arrays small
            parts = [
                self._posterior_single_thread(
                    data.take(np.arange(i, min(i + _CHUNK, len(data)))), with_cov
                )
                for i in range(0, len(data), _CHUNK)
            ]
        if with_cov:
            return (
                np.concatenate([p[0] for p in parts]),
                np.concatenate([p[1] for p in parts]),
            )
        return np.concatenate(parts)

    def _posterior_single_thread(self, data, with_cov):
        resid = data.values - self._mean_at(data.times)
        k = self.n_components_
        if self.fdapace_compat:
            lam, phi = self._lam_all, self._phi_all
        else:
            lam, phi = self.eigenvalues_, self.eigenfunctions_
        uniq, index = np.unique(data.times, return_inverse=True)
        if uniq.size > _MAX_EXACT_BINS:
            uniq, index = data.times, None
        basis = self._basis_at(uniq, phi)
        return _fpca.posterior_scores(
            resid,
            basis,
            data.offsets,
            lam,
            self.noise_variance_,
            n_scores=k,
            with_cov=with_cov,
            time_index=index,
        )

    def _curves(self, scores, grid):
        if self.fdapace_compat:
            work = self.mean_work_ + scores @ self.eigenfunctions_.T
            return interpolate_shared(work, self.work_grid_, grid)
        return self._mean_at(grid) + scores @ self._basis_at(grid).T

    def _transform_grid(self, data, grid, return_std=False):
        if not return_std:
            return self._curves(self._posterior(data), grid)
        scores, cov = self._posterior(data, with_cov=True)
        curves = self._curves(scores, grid)
        if self.fdapace_compat:
            basis = interpolate_shared(self.eigenfunctions_.T, self.work_grid_, grid).T
        else:
            basis = self._basis_at(grid)
        var = np.einsum("gk,nkl,gl->ng", basis, cov, basis)
        return curves, np.sqrt(np.clip(var, 0.0, None))

    def _derivative_grid(self, data, grid):
        # the exact derivative of the curves of ``_curves``
        scores = self._posterior(data)
        if self.fdapace_compat:
            work = self.mean_work_ + scores @ self.eigenfunctions_.T
            return slope_shared(work, self.work_grid_, grid)
        slope = self._basis_at(grid, derivative=True)
        return self._mean_at(grid, derivative=True) + scores @ slope.T

    def _predict_ragged(self, data, times, offsets):
        scores = self._posterior(data)
        subject = np.repeat(np.arange(len(data)), np.diff(offsets))
        if self.fdapace_compat:
            mean = np.interp(times, self.work_grid_, self.mean_work_)
        else:
            mean = self._mean_at(times)
        basis = self._basis_at(times)
        return mean + np.einsum("ik,ik->i", basis, scores[subject])

    # ------------------------------------------------------------------ #
    # public extras
    def scores(self, X):
        """Conditional-expectation scores of each subject.

        Parameters
        ----------
        X : IrregularData, long DataFrame, list of (t, y) pairs or 2-D array
            Subjects.

        Returns
        -------
        ndarray or DataFrame of shape (n_subjects, n_components_)
            ``E[xi_i | y_i]`` under the fitted model, for downstream use; a
            DataFrame indexed by subject id with columns ``score_1`` ... after
            ``set_output(transform="pandas")``.
        """
        check_is_fitted(self, "eigenfunctions_")
        data = self._check_transform_input(X)
        names = [f"score_{k + 1}" for k in range(self.n_components_)]
        return self._wrap(self._posterior(data), data, columns=names)


def _is_rule(value, name):
    """Whether a parameter holds the string rule ``name`` (not a number or pair)."""
    return isinstance(value, str) and value == name


def _orient(phi, mean_work, fdapace_compat):
    """Fix the arbitrary signs of the eigenfunctions."""
    if fdapace_compat:
        sign = np.where(mean_work @ phi >= 0, 1.0, -1.0)
    else:
        peak = phi[np.argmax(np.abs(phi), axis=0), np.arange(phi.shape[1])]
        sign = np.where(peak >= 0, 1.0, -1.0)
    return phi * sign


def _moment_sigma2(moments, work_grid, cov, cut=(0.25, 0.75)):
    """Mean squared residual minus the smoothed variance, over the observations.

    Only observations in the middle half of the range count: local fits at
    the ends of the diagonal are the least stable (as in fdapace).
    """
    lo, hi = work_grid[0], work_grid[-1]
    c = moments.centres
    # The slack makes a centre on a quartile count in every unit of time.
    slack = 1e-9 * (hi - lo)
    inside = (c >= lo + cut[0] * (hi - lo) - slack) & (
        c <= lo + cut[1] * (hi - lo) + slack
    )
    if moments.diag_count[inside].sum() <= 0:
        inside = np.ones_like(inside)
    diag = np.interp(c[inside], work_grid, np.diag(cov))
    count = moments.diag_count[inside]
    return (moments.diag_total[inside].sum() - np.dot(count, diag)) / count.sum()


def _fdapace_sigma2(moments, work_grid, bandwidth, kernel):
    """fdapace's estimate: raw variance minus rotated fit, middle half of the range."""
    obs = moments.centres[moments.diag_count > 0]
    a0, b0 = obs[0], obs[-1]
    span = b0 - a0
    buff = np.finfo(float).eps * np.max(np.abs(obs)) * 10
    cut = work_grid[
        (work_grid > a0 + 0.25 * span - buff) & (work_grid < a0 + 0.75 * span + buff)
    ]
    if cut.size < 2:
        cut = work_grid
    yvar = local_linear_binned(
        moments.centres, moments.diag_count, moments.diag_total, cut, bandwidth, kernel
    )
    xvar = _fpca.smooth_diagonal_rotated(moments, cut, bandwidth, kernel)
    return _fpca._trapezoid(yvar - xvar, cut) / (0.5 * span)
