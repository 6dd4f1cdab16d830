"""PACE: functional principal components by conditional expectation."""

from __future__ import annotations

from functools import partial
from time import perf_counter

import numpy as np
from sklearn.utils import check_random_state

from fdaimpute._core.docstrings import shared_docs
from fdaimpute._core.params import (
    RANDOM_STATE,
    Boolean,
    Interval,
    Options,
    Pair,
    validate_params,
)
from fdaimpute._core.state import check_array, check_components, check_number
from fdaimpute._core.timing import phase, recording
from fdaimpute._core.validation import check_times_in_range, resolve_grid
from fdaimpute._fpca.conditional import ConditionalScorePredictor
from fdaimpute._numerics.linalg import one_blas_thread
from fdaimpute._pace import chunked as _chunked
from fdaimpute._pace import fit as _fit
from fdaimpute.base import BaseImputer
from fdaimpute.smoothing import KERNELS

__all__ = ["PACEImputer"]

_POSITIVE = Interval("real", 0, closed="neither")
_LEGACY_PARAMS = ("kernel", "fdapace_compat", "measurement_error")
#: Next-best covariance bandwidths tried when the best gives a training
#: subject an implausible curve ...
_PLAUSIBLE_TRIES = 5
#: ... and beyond them, those whose held-out error is at most this many
#: times the best's.
_PLAUSIBLE_SLACK = 1.10
_CHUNK_OPTIONS = (
    "binning",
    "bandwidth_mean",
    "bandwidth_cov",
    "n_components",
    "fve_threshold",
    "noise_variance",
)


@shared_docs(
    "extrapolates (eigenfunctions held constant beyond the work grid, the "
    "mean is the local-linear fit)"
)
class PACEImputer(ConditionalScorePredictor, BaseImputer):
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
    %(grid)s
    %(extrapolate)s
    %(keep_observed)s
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
    noise_variance : {"auto", "moment"}, default="auto"
        How ``sigma^2`` is estimated. ``"moment"``: the moment estimator of
        the Notes alone. ``"auto"``: when cross-validation runs, the
        predictor's noise variance (``predictor_noise_variance_``) is raised
        to the one that best predicts the held-out points, where that is
        larger, and the reported ``noise_variance_`` is bounded both ways:
        raised to a floor from the held-out fit and capped by the
        difference-based estimate where that is smaller (see Notes);
        otherwise as ``"moment"``.
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
        (``bandwidth_cov="cv"`` or ``n_components="cv"``) on large data and
        the subject folds of ``bandwidth_mean="cv"``. On small data (one
        draw would hide fewer than 2,000 points) the held-out points are
        laid out systematically (see Notes) and do not depend on it. An int
        gives reproducible fits; ``None`` uses NumPy's global random state.

    Attributes
    ----------
    %(grid_)s
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
    eigenvalues_ : ndarray of shape (K,) with K = ``n_components_``
        Leading eigenvalues.
    eigenfunctions_ : ndarray of shape (n_work_grid, K)
        Eigenfunctions on ``work_grid_``, normalised to unit L2 norm.
    noise_variance_ : float
        Estimated measurement-error variance ``sigma^2`` (what a new
        observation adds to the curve's variance; see Notes).
    predictor_noise_variance_ : float
        The noise variance in the scores' conditional expectation
        (``Sigma_i``): ``noise_variance_``, or larger where the held-out
        points showed that a larger one predicts better (see Notes).
    n_components_ : int
        Number of components used.
    fve_ : ndarray of shape (K,)
        Cumulative fraction of variance explained by the leading components.
    bandwidth_mean_ : float
        Bandwidth of the mean smoother.
    bandwidth_cov_ : float or tuple of float
        Bandwidth of the covariance smoother (``(along, across)`` for the
        rotated smoother).
    cv_results_ : dict or None
        With cross-validation: the evaluated bandwidths, their scores (mean
        squared error of the held-out points, best over ``K``), the
        score of each ``K`` at the chosen bandwidths and, where ``K`` is
        chosen or fixed, each held-out point's squared error under the
        chosen model (``"heldout_errors"``, at positions ``"heldout_index"``
        of the training observations) and its value less the prediction
        (``"heldout_residuals"``, where the bands were calibrated); and
        ``"implausible_bandwidths"``, the pairs whose fits gave a training
        subject an implausible curve before the one kept (see Notes).
    n_bins_ : int
        Number of bins of the mean and covariance sums.
    time_range_ : tuple of float
        Range of the training times.
    timings_ : dict
        Wall seconds of the fit's phases (``"bins"``, ``"mean"``,
        ``"covariance"``, ``"cross-validation"``, ``"noise"``, ``"bands"``,
        ``"components"``, ``"plausibility"`` (the check of the training
        subjects' curves, see Notes); those that ran) and of the whole fit
        (``"total"``, which also counts the checks of the input). Each
        second counts for one phase only.

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
    the constant ``sigma^2``. When that would hide fewer than 2,000 points
    (a few hundred subjects), every observation is hidden once over five
    folds instead, subject ``v``'s ``j``-th observation in fold
    ``(j + v) mod 5``: one random draw on small data made the choice, and
    the held-out error, depend on the seed (on 231 girls with 2-5 visits
    the covariance bandwidths ranged from 0.44 to 9.9 years over 20 seeds,
    ``K`` from 1 to 16). On such data the predictors compared in the search
    have a noise variance of at least 1% of the raw variance, and ``K`` is
    the one with the least pooled error. The search starts with isotropic
    bandwidths and bandwidths three times longer along the diagonal than
    across, and then lengthens the bandwidth along the diagonal and
    shortens it across. Where the pair with the least held-out error gives
    some training subject a curve that leaves the data's range widened by
    half of it inside the time range (the warning of ``transform``), the
    next pairs by held-out error are tried in turn (five, and beyond them
    those whose held-out error is within 10% of the best) and the first
    that gives none is kept (if none does, the one whose worst curve
    leaves the range least); ``cv_results_["implausible_bandwidths"]``
    lists the pairs tried before the one kept. On 90 of pbcseq's patients
    the best pair (14.1 years along the diagonal, 0.34 across) took a
    patient whose log bilirubin rose from 0.3 to 2.9 in three years to 8.1
    five years later (the data end at 3.7); the third pair after it (a
    held-out mean squared error 4% larger) keeps every curve inside.
    The local fit is linear along the diagonal and, across it, quadratic
    near the diagonal (to follow the ridge that rough processes have
    there) blending to linear farther out.
    Predictions for all ``K`` come from one Cholesky factorisation per
    subject; ``K`` is the one with the least held-out error.

    *Noise variance and bands.* ``sigma^2`` is the mean squared residual
    at the observations minus the mean of the smoothed covariance on the
    diagonal there (a moment estimator consistent with the fitted
    surface). On small data the surface can absorb the noise and this
    estimate collapses towards zero; the predictor then interpolates the
    noise and its bands shrink to nothing. With ``noise_variance="auto"``
    the held-out points also choose the predictor's noise variance
    (``predictor_noise_variance_``) among the moment estimate and larger
    values (up to half the raw variance), a larger one winning only if it
    predicts them better. ``noise_variance_`` is at least half the moment
    estimate on the held-out fit, and at most the difference-based
    estimate of :func:`fdaimpute.noise.noise_variance`, where that is
    smaller: on a rough process the moment estimate also counts variance
    of the curve finer than the smoothed surface. ``return_std``
    gives the standard deviation of the curve's error, including the
    variance of the components beyond ``K`` (the remaining positive
    eigenvalues of the smoothed surface), which the predictor sets to zero,
    and of the model's own error; the held-out points weigh both (see
    ``fdaimpute/_fpca/heldout.py``). A band for a new observation adds
    ``noise_variance_``. Where the held-out points show the predictive
    variance changing over the time range (a factor per third of the range
    that brings their 95% quantile of ``|z|`` to the Gaussian value, shrunk
    towards 1 where they are few, linear in time between the thirds'
    centres), both the curve's variance and the noise variance follow it
    (``cv_results_["band_profile"]``; ``noise_variance_at``). With
    ``fdapace_compat`` the SD is the posterior SD of the ``K`` scores alone.

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

    _param_constraints = {
        **BaseImputer._param_constraints,
        "kernel": [Options(*KERNELS)],
        "bandwidth_mean": [_POSITIVE, Options("gcv", "cv", "fdapace")],
        "bandwidth_cov": [
            _POSITIVE,
            Pair(_POSITIVE, "(along, across)"),
            Options("cv", "gcv", "fdapace"),
        ],
        "n_work_grid": [Interval("int", 3)],
        "n_components": [Interval("int", 1), Options("cv", "fve", "aic", "bic")],
        "fve_threshold": [Interval("real", 0, 1, closed="right")],
        "max_components": [Interval("int", 1), None],
        "measurement_error": [Boolean()],
        "noise_variance": [Options("auto", "moment")],
        "binning": [Options("auto", False), Interval("int", 3)],
        "fdapace_compat": [Boolean()],
        "random_state": RANDOM_STATE,
    }

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
        noise_variance="auto",
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
        self.noise_variance = noise_variance
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
            noise_variance="moment",
            fdapace_compat=True,
        )
        defaults.update(params)
        return cls(**defaults)

    # ------------------------------------------------------------------ #
    # fitting
    def _check_combination(self):
        """The checks that involve several parameters (each is declared alone)."""
        bw = self.bandwidth_cov
        if not self.fdapace_compat:
            return
        if np.ndim(bw) == 1 and not np.isclose(bw[0], bw[1]):
            raise ValueError(
                "fdapace_compat=True smooths isotropically; give "
                "bandwidth_cov as a single number, not a pair"
            )
        if _fit.is_rule(bw, "cv"):
            raise ValueError(
                "bandwidth_cov='cv' chooses a rotated smoother, which "
                "fdapace_compat=True does not use; use 'gcv', "
                "'fdapace' or a number"
            )

    def _fit(self, data):
        start = perf_counter()
        # Many small matrices: one BLAS thread is faster and shares cores well.
        with recording() as seconds, one_blas_thread():
            self._fit_single_thread(data)
        self.timings_ = {**seconds, "total": perf_counter() - start}
        return self

    def _fit_single_thread(self, data):
        self._check_combination()
        numerics, max_k = self._numerics_for(len(data))
        _fit.check_training_data(data.times, data.values, data.n_obs)

        def fit(bandwidth_cov):
            return _fit.fit_pace(
                data.times,
                data.values,
                data.offsets,
                numerics,
                binning=self.binning,
                bandwidth_mean=self.bandwidth_mean,
                bandwidth_cov=bandwidth_cov,
                n_components=self.n_components,
                fve_threshold=self.fve_threshold,
                max_components=max_k,
                rng=check_random_state(self.random_state),
                noise_variance=self.noise_variance,
            )

        result = fit(self.bandwidth_cov)
        self._store(result, numerics)
        self._check_plausible(partial(self._excursion, data), fit, result, numerics)
        return self

    def _check_plausible(self, excursion, fit, result, numerics):
        """With cross-validated covariance bandwidths, the check that no
        training subject's curve is implausible (see Notes of the class).

        ``excursion()`` measures the fitted imputer's worst training curve
        (:meth:`~fdaimpute.base.BaseImputer._excursion`) and ``fit(pair)``
        refits at other covariance bandwidths; ``result`` is the fit made.
        """
        if not _fit.is_rule(self.bandwidth_cov, "cv"):
            return
        with phase("plausibility"):
            implausible = excursion()
        if implausible:
            self._fall_back_to_plausible(excursion, fit, result, numerics)

    def _fall_back_to_plausible(self, excursion, fit, best, numerics):
        """Refit at the next-best covariance bandwidths of the search (the
        next ``_PLAUSIBLE_TRIES``, then any within ``_PLAUSIBLE_SLACK`` of the
        best held-out error) while some training subject's curve leaves the
        data's widened range; ``cv_results_["implausible_bandwidths"]`` lists
        the pairs tried before the one kept."""
        cv = best.cv_results
        chosen = np.asarray(best.estimate.bandwidth, dtype=float)
        scores = np.asarray(cv["scores"], dtype=float)
        others = [
            i
            for i in np.argsort(scores, kind="stable")
            if not np.allclose(cv["bandwidths"][i], chosen)
        ]
        near = _PLAUSIBLE_SLACK * np.nanmin(scores)
        ranked = [
            tuple(map(float, cv["bandwidths"][i]))
            for rank, i in enumerate(others)
            if rank < _PLAUSIBLE_TRIES or scores[i] <= near
        ]
        tried = [tuple(map(float, chosen)), *ranked]
        self.cv_results_ = {**cv, "implausible_bandwidths": tried[1:]}

        def refit(position):
            result = fit(tried[position])
            self._store(result, numerics)
            self.cv_results_ = {
                **(result.cv_results or {}),
                "bandwidths": cv["bandwidths"],
                "scores": cv["scores"],
                "implausible_bandwidths": tried[:position],
            }

        self._refit_while_implausible(
            excursion, (partial(refit, i) for i in range(1, len(tried)))
        )

    def _numerics_for(self, n_subjects):
        """The numerics on the work grid over ``time_range_``, and K's cap."""
        numerics_class = _fit.numerics_class(self.fdapace_compat)
        cap = self.max_components
        cap = numerics_class.component_cap if cap is None else int(cap)
        max_k = max(1, min(cap, self.n_work_grid - 2, max(1, n_subjects - 2)))
        lo, hi = self.time_range_
        self.work_grid_ = np.linspace(lo, hi, self.n_work_grid)
        numerics = numerics_class(self.kernel, self.work_grid_, self.measurement_error)
        return numerics, max_k

    def _store(self, result, numerics):
        """Set the fitted attributes from a PACEFit."""
        estimate, model = result.estimate, result.model
        self.n_bins_ = result.n_bins
        self.cv_results_ = result.cv_results
        self.bandwidth_mean_ = model.mean.bandwidth
        self.bandwidth_cov_ = estimate.bandwidth
        self.covariance_ = estimate.covariance
        self.mean_work_ = model.mean_work
        self.predictor_noise_variance_ = model.noise_variance
        self.noise_variance_ = (
            model.noise_variance
            if model.observation_noise is None
            else model.observation_noise
        )
        self.n_components_ = model.n_components
        self.eigenvalues_ = model.eigenvalues
        self.eigenfunctions_ = model.eigenfunctions
        self.fve_ = estimate.fve[: model.n_components].copy()
        self._numerics, self._model = numerics, model
        scores = np.zeros((1, model.n_components))
        self.mean_ = numerics.curves(model, scores, self.grid_)[0]
        return self

    def fit_chunks(self, chunks, *, check_curves=False):
        """Fit on data read in chunks of whole subjects, never all in memory.

        The chunks are read three times (see :mod:`fdaimpute.chunks` and
        ``docs/pace.md``); the model is the one ``fit`` gives on all the
        subjects in the order read, up to rounding, except where ``fit``
        would reject the chosen bandwidths for a training subject's
        implausible curve (see Notes of the class): that check is made
        with ``check_curves=True``. The rules that need all observations at
        once (``bandwidth_mean="cv"``, ``bandwidth_cov="gcv"``,
        ``n_components="aic"`` or ``"bic"``) are refused.

        Parameters
        ----------
        chunks : list, CSVChunks or callable
            The chunks - each an IrregularData or a long DataFrame, with
            subject ids unique across chunks - as a list, a
            :class:`fdaimpute.chunks.CSVChunks`, or a function returning a
            new iterator over them at each call.
        check_curves : bool, default=False
            Make ``fit``'s check of every training subject's curve in a
            fourth pass, and where one is implausible fit the next-best
            covariance bandwidths from the same sums (each checked with one
            more pass), as ``fit`` does: the model is then ``fit``'s in every
            case. The pass computes every subject's scores and curve: about
            40% more time at 10^7 observations (``docs/pace.md``). Without
            it, ``transform`` still warns of an implausible curve.

        Returns
        -------
        self : PACEImputer
            The fitted imputer.

        Raises
        ------
        ValueError
            With no data, a subject in two chunks, or a refused rule.
        TypeError
            When ``chunks`` can be read only once (an iterator).

        Examples
        --------
        >>> import fdaimpute as fi
        >>> from fdaimpute.pace import PACEImputer
        >>> sim = fi.simulate.sand_paper(n=400, n_obs="8-12", random_state=0)
        >>> data = sim.train.data
        >>> parts = [data[:100], data[100:250], data[250:]]
        >>> whole = PACEImputer(random_state=0).fit(data)
        >>> chunked = PACEImputer(random_state=0).fit_chunks(parts)
        >>> bool(abs(whole.eigenvalues_ - chunked.eigenvalues_).max() < 1e-10)
        True
        """

        def prepare():
            read = _chunked.reader(chunks)
            return partial(_chunked.survey, read), _chunked.serial(read)

        return self._fit_in_passes(prepare, check_curves)

    def fit_dask(
        self,
        df,
        id="id",
        time="time",
        value="value",
        *,
        duplicates="raise",
        persist=False,
        check_curves=False,
    ):
        """Fit on a Dask DataFrame in long form, the passes run on its workers.

        Each pass of :meth:`fit_chunks` runs on every partition where it
        lies (with the same code as for a chunk) and the partitions' sums
        are added on the workers; the model equals the one ``fit_chunks``
        gives, and so ``fit``'s on the subjects in the order of the frame,
        up to rounding and with the same exception. A subject
        whose rows are split between partitions is joined in one partition
        first, with a warning (see :mod:`fdaimpute.cluster`). Runs on the
        active ``dask.distributed`` client, or on Dask's default scheduler
        without one. Needs ``dask[dataframe]``.

        Parameters
        ----------
        df : dask.dataframe.DataFrame
            One row per observation.
        id, time, value : str, default="id", "time", "value"
            Column names, as in :meth:`IrregularData.from_long
            <fdaimpute.IrregularData.from_long>`.
        duplicates : {"raise", "average"}, default="raise"
            What to do with two observations of a subject at one time.
        persist : bool, default=False
            Keep each partition's subjects in its worker's memory between
            the passes, so that the input is read twice (the survey, then once
            to keep the subjects) instead of three times; the cluster then
            holds all the observations (24 bytes each) at once.
        check_curves : bool, default=False
            As for :meth:`fit_chunks`: ``fit``'s check of every training
            curve, partition by partition on the workers.

        Returns
        -------
        self : PACEImputer
            The fitted imputer.

        Raises
        ------
        ValueError
            With no data, a missing column, or a rule :meth:`fit_chunks`
            refuses.
        """
        from fdaimpute.cluster import partition_passes

        return self._fit_in_passes(
            lambda: partition_passes(df, (id, time, value), duplicates, persist),
            check_curves,
        )

    def _fit_in_passes(self, prepare, check_curves):
        """Fit from chunked data (see ``_pace.chunked``).

        ``prepare()`` returns ``survey(max_distinct)``, the first pass, and
        ``run``, the runner of the other passes; ``check_curves`` asks for
        the check of every training curve.
        """
        try:
            validate_params(self)
            extrapolate = self._extrapolation()
            self._check_combination()
            _chunked.check_options(self.get_params())
            survey, run = prepare()
            for attr in ("n_features_in_", "feature_names_in_", "dense_times_"):
                self.__dict__.pop(attr, None)
            numerics_class = _fit.numerics_class(self.fdapace_compat)
            found = survey(self._distinct_to_track(numerics_class))
            _chunked.check_survey(found)
            self.time_range_ = found.time_range
            self.grid_ = resolve_grid(self.grid, self.time_range_, None)
            check_times_in_range(self.grid_, self.time_range_, extrapolate)
            self.n_subjects_fit_ = found.n_subjects
            numerics, max_k = self._numerics_for(found.n_subjects)
            options = {k: getattr(self, k) for k in _CHUNK_OPTIONS}
            options["max_components"] = max_k
            rng = check_random_state(self.random_state)
            start = perf_counter()
            self.value_range_ = found.value_range
            with recording() as seconds, one_blas_thread():
                result, refit = _chunked.fit_passes(run, found, numerics, options, rng)
                self._store(result, numerics)
                if check_curves:
                    excursion = partial(
                        run, _chunked.excursion, _chunked.no_local, max, estimator=self
                    )
                    self._check_plausible(excursion, refit, result, numerics)
            self.timings_ = {**seconds, "total": perf_counter() - start}
        except BaseException:
            self._clear_fitted()
            raise
        return self

    def _distinct_to_track(self, numerics_class):
        """Distinct times the choice of bins needs to see (None: all)."""
        if self.binning is False:
            return None
        return max(
            3, 2 * (self.n_work_grid - 1) + 1, numerics_class.max_exact_bins or 0
        )

    def __setstate__(self, state):
        super().__setstate__(state)
        # pickled before the noise floor: fitted as "moment" would fit
        self.__dict__.setdefault("noise_variance", "moment")
        if "noise_variance_" in self.__dict__:
            self.__dict__.setdefault("predictor_noise_variance_", self.noise_variance_)
        if "_w1" in self.__dict__:  # pickled before PACEModel existed
            params = {k: getattr(self, k) for k in _LEGACY_PARAMS}
            self._numerics, self._model = _fit.model_from_pickled_state(
                self.__dict__, params
            )

    def _check_state(self):
        super()._check_state()
        if not hasattr(self, "grid_"):
            return
        model = self._model
        model.check("_model")
        g, k = model.eigenfunctions.shape
        check_components(self, k)
        check_array(self.eigenfunctions_, "eigenfunctions_", (g, k))
        for name in ("work_grid_", "mean_work_"):
            check_array(getattr(self, name), name, (g,))
        check_array(self._numerics.work_grid, "_numerics.work_grid", (g,))
        check_number(self.noise_variance_, "noise_variance_")
        check_number(self.predictor_noise_variance_, "predictor_noise_variance_")

    # ------------------------------------------------------------------ #
    # the fitted model's pieces, for ConditionalScorePredictor
    def _band_factor(self, times):
        return self._model.band_factor(times)

    def _block_scores(self, part):
        return self._numerics.scores(self._model, part.times, part.values, part.offsets)

    def _block_error_variance(self, part, grid):
        return self._numerics.error_variance(
            self._model, part.times, part.values, part.offsets, grid
        )

    def _curves(self, scores, grid):
        return self._numerics.curves(self._model, scores, grid)

    def _slopes(self, scores, grid):
        return self._numerics.slopes(self._model, scores, grid)

    def _mean_and_basis(self, times):
        numerics, model = self._numerics, self._model
        return (
            numerics.mean_at(model, times),
            numerics.basis_at(model.eigenfunctions, times),
        )
