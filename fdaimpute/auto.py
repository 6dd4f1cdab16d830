"""AutoImputer: PACE, FACE, mFPCA or the kernel smoother, chosen on held-out points."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.utils import check_random_state

from fdaimpute._core.docstrings import shared_docs
from fdaimpute._core.params import RANDOM_STATE, Interval, validate_params
from fdaimpute._core.plausible import implausible_rows
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
    """The best of PACE, FACE, mFPCA and the kernel smoother for the data at hand.

    Each candidate, with its defaults, predicts observations hidden from
    its fit; the one with the least mean squared error over the hidden
    points does the imputing. The hidden points are PACE's held-out points
    (``docs/pace.md``, step 7): on small data (fewer than 2,000 in one
    draw of a fifth of each subject's points) every observation of a
    subject with at least two is hidden once over five systematic folds,
    a fold hiding at most one in five of a subject's points. PACE's
    cross-validation and FACE's and mFPCA's band refits hide these same
    folds, so each of the three is fitted once, on all the data, and
    scored on the errors of its own refits (their tuning - bandwidths,
    smoothing, ``K``, the predictor's noise - chosen on all the data);
    the kernel smoother is refitted on each fold's visible points, and the
    chosen method's fit is kept. A method whose fit gives some training
    subject an implausible curve (the warning of ``transform``) is passed
    over unless all are. The choice costs about one fit of each
    method. Otherwise (one random draw of hidden points, or more than
    ``max_subjects`` subjects, whose choice is made on a random subsample)
    each candidate is refitted on each fold's visible points and the chosen
    one fitted again on all the data. PACE is kept unless
    another candidate's error is lower by more than a standard error of the
    paired difference (clustered by subject): it gives calibrated bands and
    scores, and where the others are within noise of it the choice among
    them is a draw (on 250 Framingham participants the least error of the
    training folds chose a method 3% worse than PACE on other points).
    No method wins every
    data set: on the small real data of ``benchmarks/bench_stability.py``
    each of the four is the most accurate somewhere.

    Parameters
    ----------
    candidates : tuple of str, default=("pace", "face", "mfpca", "kernel")
        The methods to choose among (a subset of these four).
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
    method_ : str
        The chosen method.
    estimator_ : BaseImputer
        The chosen method's imputer, fitted on all the training data.
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
        The chosen imputer's mean curve on ``grid_``.
    grid_, time_range_, n_subjects_fit_
        As for every imputer.

    Notes
    -----
    ``transform(X, return_std=True)``, ``derivative`` and ``noise_variance_``
    are the chosen imputer's. Fitting costs
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
        n_folds=3,
        max_subjects=1000,
        grid=None,
        extrapolate=False,
        keep_observed=False,
        random_state=None,
    ):
        self.candidates = candidates
        self.n_folds = n_folds
        self.max_subjects = max_subjects
        self.grid = grid
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed
        self.random_state = random_state

    def _check_candidates(self):
        names = (
            (self.candidates,)
            if isinstance(self.candidates, str)
            else tuple(self.candidates)
        )
        unknown = [c for c in names if c not in CANDIDATES]
        if not names or unknown:
            raise ValueError(
                f"candidates must be a non-empty subset of {CANDIDATES}, "
                f"got {self.candidates!r}"
            )
        return names

    def _fit(self, data):
        validate_params(self)
        names = self._check_candidates()
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        fitted = {}
        if len(names) == 1:
            self.cv_scores_, self.n_hidden_, per_subject = {names[0]: np.nan}, 0, {}
        else:
            self.cv_scores_, self.n_hidden_, per_subject = self._score(
                data, names, rng, seed, fitted
            )
        finite = {k: v for k, v in self.cv_scores_.items() if np.isfinite(v)}
        if len(names) > 1 and not finite:
            raise ValueError(
                "AutoImputer: every candidate failed on the held-out folds; fit "
                "one method directly to see its error"
            )
        self.implausible_ = sorted(
            name for name, est in fitted.items() if _implausible(est, data)
        )
        plausible = {k: v for k, v in finite.items() if k not in self.implausible_}
        finite = plausible or finite
        self.method_ = min(finite, key=finite.get) if finite else names[0]
        if self.method_ != "pace" and "pace" in finite:
            # PACE (bands, scores) unless another is better by a standard error
            diff = per_subject["pace"] - per_subject[self.method_]
            n = diff.size
            se = np.sqrt(n) * diff.std(ddof=1) / self.n_hidden_ if n > 1 else 0.0
            if not diff.sum() / self.n_hidden_ > se:
                self.method_ = "pace"
        est = fitted.get(self.method_)
        if est is None:
            est = self._make(self.method_, seed).fit(data)
        self.estimator_ = est
        self.mean_ = self.estimator_.mean_

    def _make(self, name, seed):
        """An unfitted candidate on this imputer's grid and extrapolation."""
        est = _candidate(name, seed)
        return est.set_params(grid=self.grid_, extrapolate=self.extrapolate)

    def _score(self, data, names, rng, seed, fitted):
        """Held-out mean squared error of each candidate.

        On small data the hidden points are the systematic folds that PACE's
        cross-validation and FACE's and mFPCA's band refits hide anyway
        (:func:`~fdaimpute._fpca.folds.heldout_folds`): each of these is then
        fitted once, on all the data, and scored on its own refits' errors
        (added to ``fitted``); only the kernel smoother, which has no
        refits, is refitted per fold. Otherwise (one random draw) every
        candidate is refitted on the visible points of ``n_folds`` folds.
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
        errors = {}
        if shared:
            for name in names:
                if name == "kernel":
                    continue
                est = self._make(name, seed)
                errors[name] = _own_errors(est, data, index)
                if errors[name] is not None and np.all(np.isfinite(errors[name])):
                    fitted[name] = est
        for name in names:
            if errors.get(name) is None:
                errors[name] = _refit_errors(_candidate(name, seed), choice, val, folds)
        owner = np.searchsorted(choice.offsets, index, side="right") - 1
        per_subject = {
            name: np.bincount(owner, err, minlength=len(choice))[val]
            for name, err in errors.items()
        }
        per_subject = {
            k: v if np.all(np.isfinite(v)) else np.full(v.size, np.inf)
            for k, v in per_subject.items()
        }
        n_hidden = index.size
        scores = {k: float(v.sum()) / max(n_hidden, 1) for k, v in per_subject.items()}
        return scores, n_hidden, per_subject

    # ------------------------------------------------------------------ #
    # the chosen imputer does the work
    @property
    def noise_variance_(self):
        """The chosen imputer's measurement-noise variance (if it has one)."""
        return self.estimator_.noise_variance_

    def noise_variance_at(self, times):
        """The chosen imputer's noise variance at ``times`` (see its docs)."""
        at = getattr(self.estimator_, "noise_variance_at", None)
        if at is not None:
            return at(times)
        return np.full(np.shape(times), float(self.noise_variance_))

    def _transform_grid(self, data, grid, return_std=False):
        return self.estimator_._transform_grid(data, grid, return_std=return_std)

    def _derivative_grid(self, data, grid):
        return self.estimator_._derivative_grid(data, grid)

    def _predict_ragged(self, data, times, offsets):
        return self.estimator_._predict_ragged(data, times, offsets)


def _subset(data, mask):
    """The subjects of ``data`` with the observations where ``mask`` holds."""
    counts = np.add.reduceat(mask.astype(np.int64), data.offsets[:-1])
    counts = np.where(data.n_obs > 0, counts, 0)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return IrregularData(data.times[mask], data.values[mask], offsets, data.ids)


def _own_errors(est, data, index):
    """Squared errors of a fit's own refits at ``index`` (None if unusable).

    PACE keeps them in ``cv_results_``, FACE and mFPCA from their band
    refits. None when the fit fails, the refits failed, or they hid other
    points than ``index`` (then the candidate is refitted on the folds).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(data)
    except (ValueError, np.linalg.LinAlgError):
        return np.full(index.size, np.inf)
    cv = getattr(est, "cv_results_", None) or {}
    if "heldout_index" in cv:
        own = (cv["heldout_index"], cv["heldout_errors"])
    else:
        own = getattr(est, "_heldout_errors", None)
    if own is None or not np.array_equal(own[0], index):
        return None
    return np.where(np.isfinite(own[1]), own[1], np.inf)


def _implausible(est, data):
    """Whether a fit gives some subject of ``data`` an implausible curve.

    That is, the warning of ``transform``: a curve leaving the data's range
    widened by half of it inside the observed time range.
    """
    grid = np.linspace(*est.time_range_, 101)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        curves = est.transform(data, grid=grid)
    rows = implausible_rows(
        curves, data, grid, est.time_range_, getattr(est, "value_range_", None)
    )
    return rows.size > 0


def _refit_errors(est, data, val, folds):
    """Squared errors at the folds' points, from a refit per fold."""
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
        err = (pred - data.values[idx_new]) ** 2
        out.append(np.where(np.isfinite(err), err, np.inf))
    return np.concatenate(out)
