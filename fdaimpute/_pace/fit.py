"""A whole PACE fit on arrays: bins, CV, mean, covariance, eigen-analysis, ``K``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fdaimpute._core.timing import phase
from fdaimpute._fpca.eigen import choose_n_components
from fdaimpute._numerics.noise_difference import difference_estimate_or_none
from fdaimpute._pace.binning import choose_bins
from fdaimpute._pace.cv import select_by_cv
from fdaimpute._pace.numerics import DefaultNumerics, FdapaceNumerics
from fdaimpute._pace.result import MeanCurve, PACEFit, PACEModel


def numerics_class(fdapace_compat):
    """The numerics class: fdapace's with ``fdapace_compat``, else ours."""
    return FdapaceNumerics if fdapace_compat else DefaultNumerics


def check_training_data(times, values, counts):
    """Refuse training data PACE cannot estimate a covariance from.

    Parameters
    ----------
    times, values : ndarray of shape (n_obs,)
        Observations.
    counts : ndarray of int of shape (n_subjects,)
        Number of observations of each subject.

    Raises
    ------
    ValueError
        With no subject of two observations, fewer than three distinct
        times, or all values equal.
    """
    if not np.any(counts >= 2):
        raise ValueError(
            "every subject has a single observation: the covariance cannot "
            "be estimated (PACE needs subjects with at least 2 observations)"
        )
    distinct = np.unique(times)
    if distinct.size < 3:
        raise ValueError(
            f"only {distinct.size} distinct observation time(s); PACE needs "
            "at least 3 to smooth the mean and covariance on a work grid"
        )
    if not np.ptp(values) > 0:
        raise ValueError(
            "all observed values are equal (zero variance); "
            "there is nothing to decompose"
        )


def fit_pace(
    times,
    values,
    offsets,
    numerics,
    *,
    binning,
    bandwidth_mean,
    bandwidth_cov,
    n_components,
    fve_threshold,
    max_components,
    rng,
    noise_variance="moment",
):
    """Fit PACE to subjects given as arrays.

    Parameters
    ----------
    times, values : ndarray of shape (n_obs,)
        Observations, concatenated by subject.
    offsets : ndarray of shape (n_subjects + 1,)
        CSR offsets of the subjects.
    numerics : DefaultNumerics or FdapaceNumerics
        The numerics, with the kernel and the work grid (which spans the
        training times).
    binning, bandwidth_mean, bandwidth_cov, n_components, fve_threshold
        As the parameters of :class:`fdaimpute.pace.PACEImputer`.
    max_components : int
        Most components to keep.
    rng : numpy.random.RandomState
        One stream for every random choice of the fit (held-out points,
        mean-bandwidth folds), drawn in a fixed order.
    noise_variance : {"auto", "moment"}, default="moment"
        ``"auto"``: when cross-validation runs, the predictor's noise
        variance is raised to the value that best predicts the held-out
        points if that is larger; the measurement-noise estimate is
        floored (:func:`~fdaimpute._fpca.heldout.noise_floor`) and lowered
        to the difference-based estimate where that is smaller (the gap is
        curve variance finer than the smoothed covariance, which the bands
        then carry).

    Returns
    -------
    PACEFit
    """
    work_grid = numerics.work_grid
    with phase("bins"):
        bins = choose_bins(
            times,
            binning,
            work_grid.size,
            work_grid[0],
            work_grid[-1],
            max_exact=numerics.max_exact_bins,
        )
        numerics.check_bins(bins)
        subject = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    tune_noise = noise_variance == "auto" and numerics.measurement_error
    difference_noise = None
    if tune_noise:
        with phase("noise"):
            difference_noise = difference_estimate_or_none(times, values, subject)
    h_cov, k_cv, cv_results = bandwidth_cov, None, None
    if is_rule(bandwidth_cov, "cv") or is_rule(n_components, "cv"):
        with phase("cross-validation"):
            h_cov, k_cv, cv_results = select_by_cv(
                times,
                values,
                offsets,
                bins,
                numerics,
                bandwidth_mean=bandwidth_mean,
                bandwidth_cov=bandwidth_cov,
                n_components=n_components,
                max_k=max_components,
                rng=rng,
                tune_noise=tune_noise,
                difference_noise=difference_noise,
            )
    pooled = numerics.pool(
        times, values, subject, offsets.size - 1, bins, bandwidth_mean, rng
    )
    loglik_data = None
    if is_rule(n_components, "aic") or is_rule(n_components, "bic"):
        loglik_data = (times, values, offsets)
    return finish_fit(
        numerics,
        pooled,
        (h_cov, k_cv, cv_results),
        difference_noise,
        n_components=n_components,
        fve_threshold=fve_threshold,
        max_components=max_components,
        loglik_data=loglik_data,
    )


def finish_fit(
    numerics,
    pooled,
    choice,
    difference_noise,
    *,
    n_components,
    fve_threshold,
    max_components,
    loglik_data=None,
):
    """The steps of a fit after the moments and the cross-validation.

    Parameters
    ----------
    numerics : DefaultNumerics or FdapaceNumerics
        The numerics of the fit.
    pooled : PooledMoments
        Mean and binned raw covariances of all training observations.
    choice : tuple
        ``(bandwidth_cov, k, cv_results)``: the covariance bandwidth (or its
        rule), the ``K`` chosen by cross-validation (or None) and the
        cross-validation results (or None).
    difference_noise : float or None
        The difference-based noise estimate (with ``noise_variance="auto"``).
    n_components, fve_threshold, max_components
        As in :func:`fit_pace`.
    loglik_data : tuple, default=None
        ``(times, values, offsets)`` of the training data, for
        ``n_components="aic"`` or ``"bic"``.

    Returns
    -------
    PACEFit
    """
    h_cov, k_cv, cv_results = choice
    with phase("covariance"):
        if isinstance(h_cov, str):
            h_cov = numerics.cov_bandwidth(h_cov, pooled)
        estimate = numerics.estimate_covariance(pooled, h_cov, max_components)
    observation_noise = estimate.noise_variance
    if cv_results is not None and "noise_variance" in cv_results:
        floor = cv_results["noise_floor"]
        observation_noise = max(observation_noise, floor)
        predictor_noise = max(observation_noise, cv_results["noise_variance"])
        estimate = replace(estimate, noise_variance=predictor_noise)
        if difference_noise is not None:
            observation_noise = min(observation_noise, max(difference_noise, floor))
    loglik = None
    if loglik_data is not None:
        times, values, offsets = loglik_data
        resid = values - pooled.mean(times)
        basis = numerics.basis_at(estimate.eigenfunctions, times)
        loglik = (resid, basis, offsets, estimate.noise_variance)
    with phase("components"):
        k = choose_n_components(
            n_components,
            estimate.eigenvalues,
            estimate.fve,
            k_cv=k_cv,
            fve_threshold=fve_threshold,
            loglik_data=loglik,
        )
    model = PACEModel(
        mean=pooled.mean,
        work_grid=numerics.work_grid,
        mean_work=estimate.mean_work,
        eigenvalues=estimate.eigenvalues[:k].copy(),
        eigenfunctions=estimate.eigenfunctions[:, :k].copy(),
        all_eigenvalues=estimate.eigenvalues,
        all_eigenfunctions=estimate.eigenfunctions,
        noise_variance=estimate.noise_variance,
        observation_noise=observation_noise,
        rest_weight=(cv_results or {}).get("rest_weight", 1.0),
        misfit_variance=(cv_results or {}).get("misfit_variance", 0.0),
        band_profile=(cv_results or {}).get("band_profile"),
    )
    return PACEFit(model, estimate, pooled.bins.centres.size, cv_results)


def is_rule(value, name):
    """Whether a parameter holds the string rule ``name`` (not a number or pair)."""
    return isinstance(value, str) and value == name


def model_from_pickled_state(state, params):
    """The numerics and model of a PACEImputer pickled before PACEModel existed.

    Parameters
    ----------
    state : dict
        The unpickled ``__dict__``; its private arrays ``_bins_centres``,
        ``_w1``, ``_s1``, ``_lam_all`` and ``_phi_all`` are removed from it.
    params : dict
        The estimator's ``kernel``, ``fdapace_compat`` and ``measurement_error``.

    Returns
    -------
    numerics : DefaultNumerics or FdapaceNumerics
    model : PACEModel
    """
    kernel = params["kernel"]
    mean = MeanCurve(
        state.pop("_bins_centres"),
        state.pop("_w1"),
        state.pop("_s1"),
        state["bandwidth_mean_"],
        kernel,
    )
    numerics = numerics_class(params["fdapace_compat"])(
        kernel, state["work_grid_"], params["measurement_error"]
    )
    model = PACEModel(
        mean=mean,
        work_grid=state["work_grid_"],
        mean_work=state["mean_work_"],
        eigenvalues=state["eigenvalues_"],
        eigenfunctions=state["eigenfunctions_"],
        all_eigenvalues=state.pop("_lam_all"),
        all_eigenfunctions=state.pop("_phi_all"),
        noise_variance=state["noise_variance_"],
    )
    return numerics, model
