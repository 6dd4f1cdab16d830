"""Held-out-point cross-validation of PACE's covariance bandwidths and K.

A random set of training subjects hides a share of its observations from
every estimation step (mean, covariance, noise variance); each candidate
model then predicts the hidden values from the visible ones by conditional
expectation. The mean squared prediction error is the imputation error at
those times plus the constant ``sigma^2``, so minimising it tracks the
quantity PACE is used for.
"""

from __future__ import annotations

import numbers
import threading

import numpy as np

from fdaimpute._core.timing import phase
from fdaimpute._fpca.folds import (
    HIDE_FRACTION,
    MAX_SUBJECTS,
    heldout_folds,
    ragged_subset,
)
from fdaimpute._fpca.heldout import (
    band_profile,
    band_terms,
    fit_band_weights,
    noise_floor,
)
from fdaimpute._fpca.scores import cumulative_predictions
from fdaimpute._numerics.interpolate import spline_columns
from fdaimpute._numerics.linalg import run_tasks
from fdaimpute._pace.binning import regular_step

# Least noise variance of the predictors compared in the bandwidth search on
# small data (several folds), as a share of the raw variance: a surface that
# absorbs the noise (moment estimate near 0) makes a near-interpolating
# predictor whose held-out error is dominated by a few subjects, and the
# search then follows them.
SEARCH_NOISE_FLOOR = 0.01
# Ratio along / across of the second sweep of the bandwidth search.
ANISOTROPY = 3.0
MIN_SUBJECTS = 1000
FLOP_BUDGET = 2e8  # per candidate bandwidth


def n_validation(counts, max_k):
    """Validation subjects affordable per candidate (cost of the CV predictions)."""
    m = np.mean(counts[counts >= 2]) * (1 - HIDE_FRACTION)
    per_subject = m * max_k**2 + max_k**3 / 3 + max_k**2 * (1 + m / 4)
    return int(np.clip(FLOP_BUDGET / per_subject, MIN_SUBJECTS, MAX_SUBJECTS))


#: Squared-error tables an evaluator keeps (one per bandwidth and noise
#: variance; each is hidden points x max_k).
ERROR_CACHE = 8


class _Evaluator:
    """Scores of candidate bandwidths on the held-out points (cached).

    Parameters
    ----------
    numerics : DefaultNumerics or FdapaceNumerics
        Smoother, noise variance and eigen-analysis of the candidates.
    moments : CovMoments
        Binned raw covariances of the visible observations.
    val_fit, val_new : tuple of (times, resid, offsets)
        The validation subjects' visible and hidden observations.
    max_k : int
        Largest number of components.
    """

    def __init__(self, numerics, moments, val_fit, val_new, max_k):
        self.numerics = numerics
        self.moments = moments
        self.smoother = numerics.smoother(moments)
        self.t_fit, self.r_fit, self.off_fit = val_fit
        self.t_new, self.r_new, self.off_new = val_new
        self.max_k = max_k
        raw = moments.diag_total.sum() / max(moments.diag_count.sum(), 1.0)
        self.noise_floor = SEARCH_NOISE_FLOOR * max(raw, 0.0)
        self.cache = {}
        self.latest = None
        # the components of the best-scoring bandwidth so far: the search
        # ends there, and the noise search and the bands need them again
        self.best = (np.inf, None)
        self.errors = {}
        self.lock = threading.Lock()
        work_grid = numerics.work_grid
        self.work_grid = work_grid
        both = np.clip(
            np.concatenate([self.t_fit, self.t_new]), work_grid[0], work_grid[-1]
        )
        self.unique_times, inverse = np.unique(both, return_inverse=True)
        n_fit = self.t_fit.size
        self.inv_fit, self.inv_new = inverse[:n_fit], inverse[n_fit:]

    def _components(self, along, across):
        """``sigma^2``, eigenvalues and the basis at the validation times (cached).

        The basis is a table of its rows at the distinct validation times
        (``inv_fit`` and ``inv_new`` give each observation's row).

        The bases are large: only the latest and the best-scoring so far are
        kept (one assignment each, so that candidates scored on several
        threads at once stay consistent).
        """
        key = (float(f"{along:.12g}"), float(f"{across:.12g}"))
        for known in (self.latest, self.best[1]):
            if known is not None and known[0] == key:
                return known[1]
        num = self.numerics
        try:
            cov = num.smooth(self.moments, (along, across), self.smoother)
            sigma2 = num.noise_variance(self.moments, cov, (along, across))
            values, phi = num.eigen(cov, self.max_k)
        except (ValueError, np.linalg.LinAlgError):
            value = None
        else:
            at_unique = spline_columns(self.work_grid, phi, self.unique_times)
            value = (sigma2, values[: phi.shape[1]], at_unique)
        self.latest = (key, value)
        return value

    def squared_errors(self, along, across, sigma2=None):
        """Squared errors of the hidden points for each ``K`` (``inf`` if it fails).

        Parameters
        ----------
        along, across : float
            Covariance bandwidths.
        sigma2 : float, default=None
            Noise variance of the predictor (default: the moment estimate
            of this bandwidth).

        Returns
        -------
        ndarray of shape (n_hidden, max_k) or None
            ``None`` when the covariance cannot be estimated.
        """
        parts = self._components(along, across)
        if parts is None:
            return None
        moment, lam, table = parts
        s2 = max(moment, self.noise_floor) if sigma2 is None else sigma2
        key = (float(f"{along:.12g}"), float(f"{across:.12g}"), float(s2))
        with self.lock:
            known = self.errors.get(key)  # the noise search's winner comes back
        if known is not None:
            return known
        out = self._squared_errors(lam, table, s2)
        score = float(np.min(out.mean(axis=0))) if sigma2 is None else np.inf
        with self.lock:
            if len(self.errors) >= ERROR_CACHE:
                self.errors.pop(next(iter(self.errors)))
            self.errors[key] = out
            if score < self.best[0]:
                self.best = (score, (key[:2], parts))
        return out

    def _squared_errors(self, lam, table, s2):
        try:
            pred = cumulative_predictions(
                self.r_fit,
                table,
                self.off_fit,
                table,
                self.off_new,
                lam,
                s2,
                index_fit=self.inv_fit,
                index_new=self.inv_new,
            )
        except np.linalg.LinAlgError:
            return np.full((self.t_new.size, self.max_k), np.inf)
        # in place: the table is hidden points x max_k
        err = np.subtract(self.r_new[:, None], pred, out=pred)
        np.square(err, out=err)
        err[np.isnan(err)] = np.inf  # a square is never -inf
        if lam.size == self.max_k:
            return err
        out = np.full((self.t_new.size, self.max_k), np.inf)
        out[:, : lam.size] = err
        return out

    def band_terms(self, along, across, sigma2, k):
        """Hidden residuals and variance terms of the bands (see ``heldout.py``)."""
        parts = self._components(along, across)
        if parts is None:
            return None
        _, lam, table = parts
        return band_terms(
            (self.r_fit, table[self.inv_fit], self.off_fit),
            (self.r_new, table[self.inv_new], self.off_new),
            lam,
            sigma2,
            min(k, lam.size),
        )

    def moment_noise_variance(self, along, across):
        """The moment estimate of ``sigma^2`` at these bandwidths (None if it fails)."""
        parts = self._components(along, across)
        return None if parts is None else parts[0]

    def __call__(self, along, across):
        """Mean squared error of the hidden points for each ``K = 1..max_k``."""
        key = (float(f"{along:.12g}"), float(f"{across:.12g}"))
        if key not in self.cache:
            err = self.squared_errors(along, across)
            self.cache[key] = (
                np.full(self.max_k, np.inf) if err is None else err.mean(axis=0)
            )
        return self.cache[key]


class _Folds:
    """The evaluators of several folds of hidden points, scored as one.

    Every score is over the hidden points of all folds together (each fold's
    predictions come from its own visible points); the noise variance of
    the moment estimator is the folds' mean.
    """

    def __init__(self, evaluators):
        self.evaluators = evaluators
        self.moments = evaluators[0].moments
        self.cache = {}

    def squared_errors(self, along, across, sigma2=None):
        """Squared errors of every fold's hidden points (None if a fold fails)."""
        parts = [e.squared_errors(along, across, sigma2) for e in self.evaluators]
        if any(p is None for p in parts):
            return None
        return np.concatenate(parts)

    def moment_noise_variance(self, along, across):
        """The folds' mean moment estimate of ``sigma^2`` (None if one fails)."""
        parts = [e.moment_noise_variance(along, across) for e in self.evaluators]
        return None if any(p is None for p in parts) else float(np.mean(parts))

    def calibrate_bands(self, along, across, sigma2, k, observation_noise=None):
        """``(w, tau^2, profile, resid)`` of the bands from every fold's hidden points.

        ``profile`` is the time profile of :func:`~fdaimpute._fpca.heldout.
        band_profile` and ``resid`` each hidden point's value less its
        prediction (both None when a fold fails).
        """
        terms = [e.band_terms(along, across, sigma2, k) for e in self.evaluators]
        if any(t is None for t in terms):
            return 1.0, 0.0, None, None
        joined = [np.concatenate(parts) for parts in zip(*terms)]
        noise = sigma2 if observation_noise is None else observation_noise
        has_rest = any(e.max_k > k for e in self.evaluators) and joined[2].any()
        weight, misfit = fit_band_weights(*joined, noise, has_rest)
        resid, kept, left_out = joined
        variance = kept + weight * left_out + misfit + noise
        times = np.concatenate([e.t_new for e in self.evaluators])
        grid = self.evaluators[0].work_grid
        profile = band_profile(times, resid, variance, (grid[0], grid[-1]))
        return weight, misfit, profile, resid

    def __call__(self, along, across):
        """Mean squared error of all hidden points for each ``K = 1..max_k``."""
        key = (float(f"{along:.12g}"), float(f"{across:.12g}"))
        if key not in self.cache:
            err = self.squared_errors(along, across)
            max_k = self.evaluators[0].max_k
            self.cache[key] = np.full(max_k, np.inf) if err is None else err.mean(0)
        return self.cache[key]


def select_by_cv(
    times,
    values,
    offsets,
    bins,
    numerics,
    *,
    bandwidth_mean,
    bandwidth_cov,
    n_components,
    max_k,
    rng,
    tune_noise=False,
    difference_noise=None,
):
    """Choose the covariance bandwidths and/or K by held-out-point CV.

    Parameters
    ----------
    times, values : ndarray of shape (n_obs,)
        Training observations, concatenated by subject.
    offsets : ndarray of shape (n_subjects + 1,)
        CSR offsets of the subjects.
    bins : Bins
        Bins of all training observations.
    numerics : DefaultNumerics or FdapaceNumerics
        The numerics of the fit (with its kernel and work grid).
    bandwidth_mean : float or str
        Rule of the mean bandwidth (applied to the visible points).
    bandwidth_cov : float, pair or str
        ``"cv"`` to search the pair ``(along, across)``; any other rule or
        value is used as it is (only ``K`` is then chosen).
    n_components : int or str
        ``"cv"`` to choose ``K``; an integer scores the bandwidths at that ``K``.
    max_k : int
        Largest number of components.
    rng : numpy.random.RandomState
        Randomness of the held-out points (and of the mean-bandwidth folds
        of the estimate without them).
    tune_noise : bool, default=False
        Also choose floors of the predictor's noise variance (``results
        ["noise_variance"]``) and of the measurement noise (``results
        ["noise_floor"]``); see :func:`~fdaimpute._fpca.heldout.noise_floor`.
    difference_noise : float, default=None
        The difference-based estimate of the measurement noise
        (:func:`fdaimpute.noise.difference_estimate`). With ``tune_noise``
        the band calibration takes the hidden points' noise as the smaller
        of it and the moment estimate (not below the floor): what the
        moment estimate adds is variance of the curve too fine for the
        smoothed covariance, and the bands of the curve must carry it.

    Returns
    -------
    bandwidth : tuple of float or the ``bandwidth_cov`` given
        ``(along, across)``, or ``bandwidth_cov`` itself when it is not "cv".
    k : int or None
        Chosen number of components (``None`` unless ``n_components="cv"``):
        the one with the least held-out error.
    results : dict
        Evaluated bandwidths and scores; where ``K`` is chosen or fixed,
        also each hidden point's squared error under the chosen model
        (``"heldout_errors"``), its position in ``times``
        (``"heldout_index"``) and, where the bands were calibrated, its
        value less its prediction (``"heldout_residuals"``).
    """
    n_subjects = offsets.size - 1
    counts = np.diff(offsets)
    subject = np.repeat(np.arange(n_subjects), counts)
    val, folds = heldout_folds(offsets, rng, n_validation(counts, max_k))
    parts = []
    for hidden_at in folds:
        hidden = np.zeros(offsets[-1], dtype=bool)
        hidden[hidden_at] = True
        visible = ~hidden
        pooled = numerics.pool(
            times[visible],
            values[visible],
            subject[visible],
            n_subjects,
            bins.subset(visible),
            bandwidth_mean,
            rng,
        )
        resid_all = values - bins.interpolate(pooled.mean_at_bins)
        off_fit, idx_fit = ragged_subset(visible, offsets, val)
        off_new, idx_new = ragged_subset(hidden, offsets, val)
        parts.append(
            (
                pooled,
                (times[idx_fit], resid_all[idx_fit], off_fit),
                (times[idx_new], resid_all[idx_new], off_new),
            )
        )
    bandwidth, k, results = select_on_folds(
        numerics,
        parts,
        bandwidth_cov=bandwidth_cov,
        n_components=n_components,
        max_k=max_k,
        tune_noise=tune_noise,
        difference_noise=difference_noise,
    )
    if "heldout_errors" in results:
        results["heldout_index"] = np.concatenate(folds)
    return bandwidth, k, results


def select_on_heldout(
    numerics,
    pooled,
    val_fit,
    val_new,
    *,
    bandwidth_cov,
    n_components,
    max_k,
    tune_noise=False,
    difference_noise=None,
):
    """:func:`select_by_cv` once the held-out points are set apart.

    Parameters
    ----------
    numerics : DefaultNumerics or FdapaceNumerics
        The numerics of the fit.
    pooled : PooledMoments
        Mean and binned raw covariances of the visible observations.
    val_fit, val_new : tuple of (times, resid, offsets)
        The validation subjects' visible and hidden observations, with
        residuals from the visible mean.
    bandwidth_cov, n_components, max_k, tune_noise, difference_noise
        As in :func:`select_by_cv`.

    Returns
    -------
    bandwidth, k, results
        As :func:`select_by_cv`.
    """
    return select_on_folds(
        numerics,
        [(pooled, val_fit, val_new)],
        bandwidth_cov=bandwidth_cov,
        n_components=n_components,
        max_k=max_k,
        tune_noise=tune_noise,
        difference_noise=difference_noise,
    )


def select_on_folds(
    numerics,
    folds,
    *,
    bandwidth_cov,
    n_components,
    max_k,
    tune_noise=False,
    difference_noise=None,
):
    """:func:`select_on_heldout` with the hidden points of several folds pooled.

    Parameters
    ----------
    numerics : DefaultNumerics or FdapaceNumerics
        The numerics of the fit.
    folds : list of tuple
        ``(pooled, val_fit, val_new)`` of each fold, as the arguments of
        :func:`select_on_heldout`; the validation subjects are the same in
        every fold (in the same order).
    bandwidth_cov, n_components, max_k, tune_noise, difference_noise
        As in :func:`select_by_cv`.

    Returns
    -------
    bandwidth, k, results
        As :func:`select_by_cv`.
    """
    evaluator = _Folds(
        [_Evaluator(numerics, p.moments, fit, new, max_k) for p, fit, new in folds]
    )
    if len(folds) == 1:
        # large data: the moment estimate does not collapse, and noise-free
        # data must keep their sigma^2 near 0
        for e in evaluator.evaluators:
            e.noise_floor = 0.0
    pooled = folds[0][0]
    n_val = folds[0][1][2].size - 1
    n_hidden = sum(new[0].size for _, _, new in folds)

    k_fixed = int(n_components) if isinstance(n_components, numbers.Integral) else None

    def score(along, across):
        s = evaluator(along, across)
        if k_fixed is not None:
            return s[min(k_fixed, max_k) - 1]
        return float(np.min(s))

    if isinstance(bandwidth_cov, str) and bandwidth_cov == "cv":
        along, across = _search(
            score,
            pooled.bins.centres,
            numerics.work_grid,
            float(pooled.moments.count.sum()),
        )
        bandwidth = (along, across)
    else:
        h = numerics.cov_bandwidth(bandwidth_cov, pooled)
        along, across = (h, h) if np.ndim(h) == 0 else h
        bandwidth = bandwidth_cov
    curve = evaluator(along, across)
    if not np.isfinite(curve).any():
        raise ValueError(
            "cross-validation failed for every candidate bandwidth; the data "
            "are too sparse for a covariance estimate"
        )
    noise, obs_floor, noise_scores = None, None, None
    if tune_noise:
        with phase("noise"):
            noise, obs_floor, noise_scores = noise_floor(
                evaluator, along, across, k_fixed
            )
    moment = evaluator.moment_noise_variance(along, across)
    predictor_noise = moment if noise is None else max(noise, moment)
    errors = evaluator.squared_errors(along, across, predictor_noise)
    curve = errors.mean(axis=0)
    k = None
    if isinstance(n_components, str) and n_components == "cv":
        # the least held-out error: a component too many costs the predictor
        # little (its score is shrunk by its small variance), one too few
        # costs it the component. The one-standard-error rule kept K = 1 on
        # 50 households where 2-4 components predict 30% better, and K = 1
        # or 2 on most seeds of the whole UK table at 3-5 readings, whose
        # heavy-tailed errors make its standard error large
        k = int(np.argmin(curve)) + 1
    k_bands = k or k_fixed
    bands = None
    if k_bands is not None:
        observed = moment
        if tune_noise and difference_noise is not None:
            observed = min(moment, max(difference_noise, obs_floor))
        with phase("bands"):
            bands = evaluator.calibrate_bands(
                along, across, predictor_noise, min(k_bands, max_k), observed
            )
    tried = sorted(evaluator.cache)
    results = dict(
        bandwidths=np.array(tried),
        scores=np.array([np.min(evaluator.cache[t]) for t in tried]),
        scores_by_k=curve,
        n_subjects=n_val,
        n_hidden=n_hidden,
        n_folds=len(folds),
    )
    if k_bands is not None:
        results["heldout_errors"] = errors[:, min(k_bands, max_k) - 1].copy()
    if bands is not None:
        results["rest_weight"], results["misfit_variance"], profile, resid = bands
        if profile is not None:
            results["band_profile"] = profile
        if resid is not None:
            results["heldout_residuals"] = resid
    if tune_noise:
        results["noise_variance"], results["noise_floor"] = noise, obs_floor
        results["noise_candidates"], results["noise_scores"] = noise_scores
    return bandwidth, k, results


def _search(score, centres, work_grid, n_pairs):
    """Coordinate search in log-bandwidths, from isotropic to anisotropic.

    1. isotropic sweep (7 bandwidths, from the smallest with about 20 raw
       covariances per window up to half the range), and the same across
       the diagonal with ``ANISOTROPY`` times as much along it (a walk from
       the best isotropic point alone can stall: on 50 households with
       8-12 readings the isotropic score fell up to half the range, and
       the walks from there missed a pair with a third of its error
       bandwidth across and a held-out error 20% lower); 2. lengthen along the
       diagonal by factors of 3; 3. shorten (else widen) across it by
       factors of 1.5; 4. refine along by sqrt(3). Each move is repeated
       while it improves the score.
    """
    span = work_grid[-1] - work_grid[0]
    step = regular_step(centres) or np.max(np.diff(centres))
    h_min = max(0.7 * step, span * 1e-3)
    h_max = span
    h_dense = span * np.sqrt(20.0 / (2 * np.pi * max(n_pairs, 1.0)))
    best = (np.inf, None)
    sweep = np.geomspace(min(max(h_min, h_dense), span / 8), span / 2, 7)
    candidates = [(h, h) for h in sweep]
    candidates += [(min(ANISOTROPY * h, h_max), h) for h in sweep]
    # the sweep's candidates are independent: scored on the cores at once
    for cand, s in zip(candidates, run_tasks(score, candidates)):
        if s < best[0]:
            best = (s, cand)
    if best[1] is None:
        raise ValueError(
            "the covariance cannot be smoothed for any candidate bandwidth; "
            "the data are too sparse"
        )
    best_score, point = best

    def walk(point, best_score, factor, axis):
        moved = False
        while True:
            cand = list(point)
            cand[axis] = float(np.clip(cand[axis] * factor, h_min, h_max))
            cand = tuple(cand)
            if np.isclose(cand[axis], point[axis], rtol=1e-9, atol=0.0):
                return point, best_score, moved
            s = score(*cand)
            if not s < best_score:
                return point, best_score, moved
            point, best_score, moved = cand, s, True

    # 2. lengthen along the diagonal
    point, best_score, _ = walk(point, best_score, 3.0, 0)
    # 3. shorten (or widen) across the diagonal
    point, best_score, moved = walk(point, best_score, 1 / 1.5, 1)
    if not moved:
        point, best_score, _ = walk(point, best_score, 1.5, 1)
    # 4. refine along
    point, best_score, moved = walk(point, best_score, np.sqrt(3.0), 0)
    if not moved:
        point, best_score, _ = walk(point, best_score, 1 / np.sqrt(3.0), 0)
    return float(point[0]), float(point[1])
