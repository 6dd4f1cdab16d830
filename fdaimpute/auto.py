"""AutoImputer: PACE, FACE, mFPCA or the kernel smoother, chosen on held-out points."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import nnls
from sklearn.base import clone
from sklearn.utils import check_random_state

from fdaimpute._core.docstrings import shared_docs
from fdaimpute._core.params import RANDOM_STATE, Interval, Options, validate_params
from fdaimpute._core.state import check_number
from fdaimpute._fpca.folds import heldout_folds, ragged_subset
from fdaimpute.base import BaseImputer
from fdaimpute.data import IrregularData

__all__ = ["AutoImputer"]

#: The methods AutoImputer chooses among, in the order they are tried.
CANDIDATES = ("pace", "face", "mfpca", "kernel")


def _candidate(name, random_state):
    """An unfitted imputer of a candidate method with its defaults."""
    from fdaimpute.face import FACEImputer
    from fdaimpute.kernel import KernelImputer
    from fdaimpute.mfpca import MFPCAImputer
    from fdaimpute.pace import PACEImputer

    if name == "pace":
        return PACEImputer(random_state=random_state)
    return {"face": FACEImputer, "mfpca": MFPCAImputer, "kernel": KernelImputer}[name]()


@shared_docs("lets the chosen method extrapolate")
class AutoImputer(BaseImputer):
    """The best mix of PACE, FACE, mFPCA and the kernel smoother for the data at hand.

    Each candidate, with its defaults, predicts observations hidden from
    its fit. By default (``combine="stack"``) the imputer's curve is the
    mix of the candidates' curves, ``sum_k w_k curve_k`` with weights
    ``w_k >= 0`` summing to one, whose mean squared error over the hidden
    points is least (non-negative least squares on the candidates'
    held-out residuals); a candidate without which the mix predicts the
    hidden points within 0.5% as well (``STACK_TOLERANCE``) is left out.
    With ``combine="choose"`` the single candidate of least error does the
    imputing, PACE kept unless another's error is lower by more than a
    standard error of the paired difference (clustered by subject). On the
    hidden points it was weighed on, the mix is never more than 0.5% worse
    than the best candidate, and where the candidates err differently it
    is better than each; on new points it stays closer to the best method
    than a choice of one does (the ``stability`` section of
    ``docs/benchmarks.md``).

    The hidden points are PACE's held-out points (``docs/pace.md``, step
    7): on small data (fewer than 2,000 in one draw of a fifth of each
    subject's points) every observation of a subject with at least two is
    hidden once over five systematic folds, a fold hiding at most one in
    five of a subject's points. PACE's cross-validation and FACE's and
    mFPCA's band refits hide these same folds, so each of the three is
    fitted once, on all the data, and scored on the residuals of its own
    refits (their tuning - bandwidths, smoothing, ``K``, the predictor's
    noise - chosen on all the data); the kernel smoother, which has no
    refits of its own, is refitted on each fold's visible points with the
    bandwidth and shrinkage it chose on all the data, so that all four are
    judged alike. A method whose fit gives some training
    subject an implausible curve (the warning of ``transform``) gets no
    weight unless all do. The choice costs about one fit of each method.
    Otherwise (one random draw of hidden points, or more than
    ``max_subjects`` subjects, whose choice is made on a random subsample)
    each candidate is refitted on each fold's visible points and those
    with weight fitted again on all the data; one whose fit there gives a
    training subject an implausible curve gives way to the others, whose
    weights are found again without it.

    Parameters
    ----------
    candidates : tuple of str, default=("pace", "face", "mfpca", "kernel")
        The methods to mix or choose among (a subset of these four).
    combine : {"stack", "choose"}, default="stack"
        Mix the candidates with the weights that predict the hidden points
        best, or keep the single best (PACE unless beaten by a standard
        error; its bands, scores and derivatives are one method's).
    n_folds : int, default=3
        Where the candidates are refitted per fold (see above), how many of
        the systematic folds (at most 5; a single draw is one fold). Where
        they are scored on their own refits, all five are, at no extra cost.
    max_subjects : int, default=1000
        The choice is made on at most this many subjects, drawn at random
        (the chosen method is then fitted on all of them).
    %(grid)s
    %(extrapolate)s
    %(keep_observed)s
    random_state : int, RandomState or None, default=None
        Randomness of the hidden points and of PACE's own cross-validation.

    Attributes
    ----------
    weights_ : dict
        Method -> weight in the mix (positive, summing to one); one method
        with weight 1 when ``combine="choose"``.
    estimators_ : dict
        Method -> its imputer, fitted on all the training data, for each
        method with a weight.
    method_ : str
        The method with the largest weight.
    estimator_ : BaseImputer
        ``estimators_[method_]``.
    cv_scores_ : dict
        Mean squared error of the hidden points for each candidate
        (``inf`` where its fit failed).
    implausible_ : list of str
        Candidates fitted on all the data whose curve of some training
        subject leaves the data's range widened by half of it (the warning
        of ``transform``); they are not chosen unless every candidate is.
    n_hidden_ : int
        Hidden points scored.
    mean_ : ndarray of shape (n_grid,)
        The mix of the imputers' mean curves on ``grid_``.
    grid_, time_range_, n_subjects_fit_
        As for every imputer.

    Notes
    -----
    Curves, derivatives, ``predict_at`` and ``noise_variance_`` (and
    ``noise_variance_at``) are the weighted sums of the kept imputers'.
    The standard deviation of ``transform(X, return_std=True)`` is at
    least the weighted sum of theirs, which bounds the standard deviation
    of the mixed curve's error whatever the correlation of the
    candidates' errors; it is widened where needed so that, with the
    mixed noise variance, it also bounds the error of predicting a new
    observation by the weighted sum of the candidates' predictive SDs
    (curve and noise together: candidates share these two out
    differently). The coverage of the mix's bands is in the
    ``stability`` section of ``docs/benchmarks.md``. Fitting costs
    about one fit of each candidate on small data, ``n_folds + 1`` on
    larger data.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.sand_paper(n=120, n_obs="3-5", random_state=0)
    >>> auto = fi.AutoImputer(random_state=0).fit(sim.train.data)
    >>> auto.method_ in ("pace", "face", "mfpca", "kernel")
    True
    >>> auto.transform(sim.test.data).shape
    (6, 101)
    """

    _param_constraints = {
        **BaseImputer._param_constraints,
        "combine": [Options("stack", "choose")],
        "n_folds": [Interval("int", 1, 5)],
        "max_subjects": [Interval("int", 10)],
        "random_state": RANDOM_STATE,
    }

    #: Score candidates on their own refits where they hid the same points
    #: (False: refit every candidate per fold, as before; for benchmarks).
    _score_on_own_refits = True

    def __init__(
        self,
        *,
        candidates=CANDIDATES,
        combine="stack",
        n_folds=3,
        max_subjects=1000,
        grid=None,
        extrapolate=False,
        keep_observed=False,
        random_state=None,
    ):
        self.candidates = candidates
        self.combine = combine
        self.n_folds = n_folds
        self.max_subjects = max_subjects
        self.grid = grid
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed
        self.random_state = random_state

    def _check_candidates(self):
        given = self.candidates
        if isinstance(given, str):
            names = (given,)
        elif isinstance(given, (tuple, list, set, frozenset)):
            names = tuple(given)
        else:
            names = ()
        unknown = [c for c in names if c not in CANDIDATES]
        if not names or unknown or len(set(names)) < len(names):
            raise ValueError(
                f"candidates must be a non-empty subset of {CANDIDATES}, each "
                f"named once, got {given!r}"
            )
        return names

    def _fit(self, data):
        validate_params(self)
        names = self._check_candidates()
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        fitted = {}
        if len(names) == 1:
            self.cv_scores_, self.n_hidden_, residuals = {names[0]: np.nan}, 0, {}
            owner = val = None
        else:
            residuals, owner, val = self._score(data, names, rng, seed, fitted)
            self.n_hidden_ = owner.size
            self.cv_scores_ = {
                k: float(np.sum(r**2)) / max(r.size, 1)
                if np.all(np.isfinite(r))
                else np.inf
                for k, r in residuals.items()
            }
        finite = {k: v for k, v in self.cv_scores_.items() if np.isfinite(v)}
        if len(names) > 1 and not finite:
            raise ValueError(
                "AutoImputer: every candidate failed on the held-out folds; fit "
                "one method directly to see its error"
            )
        implausible = {name for name, est in fitted.items() if _implausible(est, data)}
        while True:
            usable = {k: v for k, v in finite.items() if k not in implausible}
            weights = self._weigh(usable or finite, residuals, owner, val, names)
            unchecked = [name for name in weights if name not in fitted]
            for name in unchecked:
                fitted[name] = self._make(name, seed).fit(data)
            # a candidate first fitted on all the data now (the weights were
            # found on a subsample or on refits) is judged like the others
            found = {name for name in unchecked if _implausible(fitted[name], data)}
            if not found:
                break
            implausible |= found
        self.implausible_ = sorted(implausible)
        self.weights_ = weights
        self.estimators_ = {name: fitted[name] for name in weights}
        self.method_ = max(weights, key=weights.get)
        self.estimator_ = self.estimators_[self.method_]
        self.mean_ = sum(w * self.estimators_[k].mean_ for k, w in weights.items())

    def _check_state(self):
        super()._check_state()
        if not hasattr(self, "grid_"):
            return
        names = set(self.estimators_)
        if set(self.weights_) != names or self.method_ not in names:
            raise ValueError(
                "weights_, estimators_ and method_ do not name the same candidates"
            )
        for name, weight in self.weights_.items():
            check_number(weight, f"weights_[{name!r}]")
        total = sum(self.weights_.values())
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"weights_ sum to {total!r}, not 1")

    def _weigh(self, scores, residuals, owner, val, names):
        """The weights of the candidates in ``scores`` (name -> weight)."""
        if len(scores) > 1 and self.n_hidden_ and self.combine == "stack":
            return stack_weights({k: residuals[k] for k in scores})
        if len(scores) > 1:
            return {self._choose(scores, residuals, owner, val): 1.0}
        return {next(iter(scores)) if scores else names[0]: 1.0}

    @staticmethod
    def _choose(scores, residuals, owner, val):
        """The candidate of least error; PACE unless beaten by a standard error."""
        best = min(scores, key=scores.get)
        if best == "pace" or "pace" not in scores:
            return best
        # PACE (bands, scores) unless another is better by a standard error of
        # the paired difference, clustered by subject
        gain = residuals["pace"] ** 2 - residuals[best] ** 2
        diff = np.bincount(owner, gain, minlength=int(val.max(initial=-1)) + 1)[val]
        n = diff.size
        se = np.sqrt(n) * diff.std(ddof=1) / owner.size if n > 1 else 0.0
        return best if diff.sum() / owner.size > se else "pace"

    def _make(self, name, seed):
        """An unfitted candidate on this imputer's grid and extrapolation."""
        est = _candidate(name, seed)
        return est.set_params(grid=self.grid_, extrapolate=self.extrapolate)

    def _score(self, data, names, rng, seed, fitted):
        """Each candidate's residuals at the hidden points.

        On small data the hidden points are the systematic folds that PACE's
        cross-validation and FACE's and mFPCA's band refits hide anyway
        (:func:`~fdaimpute._fpca.folds.heldout_folds`): each of these is then
        fitted once, on all the data, and scored on its own refits'
        residuals (added to ``fitted``); only the kernel smoother, which has
        no refits, is refitted per fold, keeping the tuning of its fit on all
        the data (also added to ``fitted``). Otherwise (one random draw) every
        candidate is refitted, tuning included, on the visible points of
        ``n_folds`` folds.

        Returns
        -------
        residuals : dict
            Name -> hidden values less predictions (``inf`` where a fit
            failed), in the same order for every candidate.
        owner : ndarray of int
            The subject of each hidden point.
        val : ndarray of int
            The subjects whose points may be hidden.
        """
        if len(data) > self.max_subjects:
            keep = np.sort(rng.choice(len(data), self.max_subjects, replace=False))
            choice = data.take(keep)
        else:
            choice = data
        val, folds = heldout_folds(choice.offsets, rng)
        shared = self._score_on_own_refits and choice is data and len(folds) > 1
        if not shared:
            folds = folds[: self.n_folds]
        index = np.concatenate(folds)
        residuals = {}
        if shared:
            for name in names:
                est = self._make(name, seed)
                if name == "kernel":
                    residuals[name] = _tuned_refit_residuals(est, data, val, folds)
                else:
                    residuals[name] = _own_residuals(est, data, index)
                if residuals[name] is not None and np.all(np.isfinite(residuals[name])):
                    fitted[name] = est
        for name in names:
            if residuals.get(name) is None:
                residuals[name] = _refit_residuals(
                    _candidate(name, seed), choice, val, folds
                )
        owner = np.searchsorted(choice.offsets, index, side="right") - 1
        return residuals, owner, val

    # ------------------------------------------------------------------ #
    # the chosen imputers do the work, mixed by their weights
    def _mix(self, compute):
        """``sum_k weight_k * compute(estimator_k)`` over the chosen candidates."""
        return sum(w * compute(self.estimators_[k]) for k, w in self.weights_.items())

    @property
    def noise_variance_(self):
        """The chosen imputers' measurement-noise variance, mixed by weight."""
        return self._mix(lambda est: float(est.noise_variance_))

    def noise_variance_at(self, times):
        """The chosen imputers' noise variance at ``times``, mixed by weight."""
        return self._mix(lambda est: est.noise_variance_at(times))

    def _transform_grid(self, data, grid, return_std=False):
        if not return_std:
            return self._mix(lambda est: est._transform_grid(data, grid))
        parts = {
            k: est._transform_grid(data, grid, return_std=True)
            for k, est in self.estimators_.items()
        }
        noise = {k: est.noise_variance_at(grid) for k, est in self.estimators_.items()}
        curves = sum(w * parts[k][0] for k, w in self.weights_.items())
        # The weighted mean of SDs bounds the SD of a mix of errors whatever
        # their correlation: of the curves' errors, and of the errors in
        # predicting a new observation, whose SD is each candidate's curve
        # SD and noise together. The candidates share out the second
        # between curve and noise differently (one a tight curve and much
        # noise, another the reverse), so the mixed curve SD is widened
        # where the mixed noise leaves the second bound uncovered.
        curve_sd = sum(w * parts[k][1] for k, w in self.weights_.items())
        predictive_sd = sum(
            w * np.sqrt(parts[k][1] ** 2 + noise[k]) for k, w in self.weights_.items()
        )
        mixed_noise = sum(w * noise[k] for k, w in self.weights_.items())
        gap = np.sqrt(np.maximum(predictive_sd**2 - mixed_noise, 0.0))
        return curves, np.maximum(curve_sd, gap)

    def _derivative_grid(self, data, grid):
        return self._mix(lambda est: est._derivative_grid(data, grid))

    def _predict_ragged(self, data, times, offsets):
        return self._mix(lambda est: est._predict_ragged(data, times, offsets))


#: A candidate is left out of the mix when the mix of the others predicts
#: the hidden points within this share of the full mix's mean squared error
#: (fewer fits to keep, and mFPCA's is slow on thousands of subjects).
STACK_TOLERANCE = 0.005


def stack_weights(residuals, tolerance=STACK_TOLERANCE):
    """Convex weights of candidates that minimise the mixed held-out error.

    Candidates are dropped one at a time, the least useful first, while the
    best mix of those left stays within ``1 + tolerance`` times the mean
    squared error of the best mix of all.

    Parameters
    ----------
    residuals : dict
        Name -> residuals of the same hidden points (finite).
    tolerance : float, default=STACK_TOLERANCE
        Relative rise of the mean squared error allowed for a smaller mix.

    Returns
    -------
    dict
        Name -> weight, for the candidates kept (positive, summing to 1),
        in the order given.
    """
    names = list(residuals)
    r = np.column_stack([residuals[k] for k in names])
    w, least = _convex_least_squares(r)
    keep = [j for j in range(len(names)) if w[j] > 0]
    w = w[keep]
    while len(keep) > 1:
        tried = []
        for j in keep:
            rest = [i for i in keep if i != j]
            tried.append((*_convex_least_squares(r[:, rest])[::-1], rest))
        error, w_rest, rest = min(tried, key=lambda t: t[0])
        if error > (1 + tolerance) * least:
            break
        keep, w = rest, w_rest
    return {names[j]: float(v) for j, v in zip(keep, w) if v > 0}


def _convex_least_squares(r):
    """``(w, mean((r @ w)**2))`` least over ``w >= 0`` summing to one."""
    # the sum-to-one constraint as a heavily weighted extra row of the
    # non-negative least squares problem
    scale = 1e3 * np.sqrt(np.sum(r**2)) + 1.0
    a = np.vstack([r, np.full((1, r.shape[1]), scale)])
    b = np.zeros(a.shape[0])
    b[-1] = scale
    w, _ = nnls(a, b)
    w = np.where(w >= 1e-3 * w.sum(), w, 0.0)
    w /= w.sum()
    return w, float(np.mean((r @ w) ** 2))


def _subset(data, mask):
    """The subjects of ``data`` with the observations where ``mask`` holds."""
    counts = np.add.reduceat(mask.astype(np.int64), data.offsets[:-1])
    counts = np.where(data.n_obs > 0, counts, 0)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return IrregularData(data.times[mask], data.values[mask], offsets, data.ids)


def _fits(est, data):
    """Fit ``est`` on ``data``, warnings silenced; False where the fit fails."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(data)
    except (ValueError, np.linalg.LinAlgError):
        return False
    return True


def _own_residuals(est, data, index):
    """Residuals of a fit's own refits at ``index`` (None if unusable).

    PACE keeps them in ``cv_results_``, FACE and mFPCA from their band
    refits. None when the fit fails, the refits failed, or they hid other
    points than ``index`` (then the candidate is refitted on the folds).
    """
    if not _fits(est, data):
        return np.full(index.size, np.inf)
    cv = getattr(est, "cv_results_", None) or {}
    if "heldout_residuals" in cv:
        own = (cv["heldout_index"], cv["heldout_residuals"])
    else:
        own = getattr(est, "_heldout_residuals", None)
    if own is None or not np.array_equal(own[0], index):
        return None
    return np.where(np.isfinite(own[1]), own[1], np.inf)


def _implausible(est, data):
    """Whether a fit gives some subject of ``data`` an implausible curve.

    That is, the warning of ``transform``: a curve leaving the data's range
    widened by half of it inside the observed time range.
    """
    return bool(est._excursion(data))


def _tuned_refit_residuals(est, data, val, folds):
    """The kernel smoother's fold residuals, its tuning chosen on all the data.

    ``est`` is fitted on ``data``; each fold's refit keeps its bandwidth and
    shrinkage, as PACE's, FACE's and mFPCA's own refits keep their tuning.
    Infinite residuals (and ``est`` unfitted) when the fit fails.
    """
    if not _fits(est, data):
        return np.full(sum(f.size for f in folds), np.inf)
    # a fold may hide the first or last time: its refit takes its own grid
    refit = clone(est).set_params(
        grid=None, bandwidth=est.bandwidth_, shrinkage=est.shrinkage_
    )
    return _refit_residuals(refit, data, val, folds)


def _refit_residuals(est, data, val, folds):
    """Values less predictions at the folds' points, from a refit per fold."""
    out = []
    for hidden_at in folds:
        hidden = np.zeros(data.times.size, dtype=bool)
        hidden[hidden_at] = True
        visible = _subset(data, ~hidden)
        off_new, idx_new = ragged_subset(hidden, data.offsets, val)
        times = np.split(data.times[idx_new], off_new[1:-1])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(visible)
                est.set_params(extrapolate="clip")
                pred = np.concatenate(est.predict_at(visible.take(val), times))
        except (ValueError, np.linalg.LinAlgError):
            return np.full(sum(f.size for f in folds), np.inf)
        resid = data.values[idx_new] - pred
        out.append(np.where(np.isfinite(resid), resid, np.inf))
    return np.concatenate(out)
