"""AutoImputer: PACE, FACE, mFPCA or the kernel smoother, chosen on held-out points."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.utils import check_random_state

from fdaimpute._pace.cv import heldout_folds, ragged_subset
from fdaimpute._params import RANDOM_STATE, Interval, validate_params
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


class AutoImputer(BaseImputer):
    """The best of PACE, FACE, mFPCA and the kernel smoother for the data at hand.

    Each candidate, with its defaults, is fitted on the training subjects
    with some of their observations hidden and predicts the hidden ones;
    the candidate with the least mean squared error over the hidden points
    is then fitted on all the data and does the imputing. The hidden points
    are whole folds of PACE's held-out points (``docs/pace.md``, step 7): each
    observation of a subject (with at least two) belongs to one of five
    folds, a fold hiding at most one in five of a subject's points and at
    least one; ``n_folds`` of them are used (one draw of a fifth of the
    points when that already hides 2,000 or more). PACE is kept unless
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
        Folds of hidden points scored (at most 5). More folds: a surer
        choice, one fit of every candidate more per fold.
    max_subjects : int, default=1000
        The choice is made on at most this many subjects, drawn at random
        (the chosen method is then fitted on all of them).
    grid : int or array-like, default=None
        Output grid (see :class:`~fdaimpute.PACEImputer`).
    extrapolate : {False, True, "clip"}, default=False
        Times outside the training range (see :class:`~fdaimpute.BaseImputer`).
    keep_observed : bool, default=False
        Output observed values as they are where a grid time equals an
        observation time.
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
    n_hidden_ : int
        Hidden points scored.
    mean_ : ndarray of shape (n_grid,)
        The chosen imputer's mean curve on ``grid_``.
    grid_, time_range_, n_subjects_fit_
        As for every imputer.

    Notes
    -----
    ``transform(X, return_std=True)``, ``derivative`` and ``noise_variance_``
    are the chosen imputer's; the kernel smoother gives no standard
    deviation (``NotImplementedError``) and no noise variance. Fitting costs
    about ``n_folds + 1`` fits of each candidate.

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
        if len(names) == 1:
            self.cv_scores_, self.n_hidden_, per_subject = {names[0]: np.nan}, 0, {}
        else:
            self.cv_scores_, self.n_hidden_, per_subject = self._score(
                data, names, rng, seed
            )
        finite = {k: v for k, v in self.cv_scores_.items() if np.isfinite(v)}
        if len(names) > 1 and not finite:
            raise ValueError(
                "AutoImputer: every candidate failed on the held-out folds; fit "
                "one method directly to see its error"
            )
        self.method_ = min(finite, key=finite.get) if finite else names[0]
        if self.method_ != "pace" and "pace" in finite:
            # PACE (bands, scores) unless another is better by a standard error
            diff = per_subject["pace"] - per_subject[self.method_]
            n = diff.size
            se = np.sqrt(n) * diff.std(ddof=1) / self.n_hidden_ if n > 1 else 0.0
            if not diff.sum() / self.n_hidden_ > se:
                self.method_ = "pace"
        est = _candidate(self.method_, seed)
        est.set_params(grid=self.grid_, extrapolate=self.extrapolate)
        self.estimator_ = est.fit(data)
        self.mean_ = self.estimator_.mean_

    def _score(self, data, names, rng, seed):
        """Held-out mean squared error of each candidate."""
        if len(data) > self.max_subjects:
            keep = np.sort(rng.choice(len(data), self.max_subjects, replace=False))
            data = data.take(keep)
        val, folds = heldout_folds(data.offsets, rng)
        folds = folds[: self.n_folds]
        per_subject = {name: np.zeros(val.size) for name in names}
        n_hidden = 0
        for hidden_at in folds:
            hidden = np.zeros(data.times.size, dtype=bool)
            hidden[hidden_at] = True
            visible = _subset(data, ~hidden)
            off_new, idx_new = ragged_subset(hidden, data.offsets, val)
            times = np.split(data.times[idx_new], off_new[1:-1])
            owner = np.repeat(np.arange(val.size), np.diff(off_new))
            n_hidden += idx_new.size
            for name in names:
                if not np.all(np.isfinite(per_subject[name])):
                    continue
                per_subject[name] += _squared_errors(
                    _candidate(name, seed),
                    visible,
                    val,
                    times,
                    data.values[idx_new],
                    owner,
                )
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


def _squared_errors(est, visible, val, times, values, owner):
    """Each validation subject's sum of squared errors (inf if the fit fails)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(visible)
            est.set_params(extrapolate="clip")
            pred = np.concatenate(est.predict_at(visible.take(val), times))
    except (ValueError, np.linalg.LinAlgError):
        return np.full(val.size, np.inf)
    err = np.bincount(owner, (pred - values) ** 2, minlength=val.size)
    return np.where(np.isfinite(err), err, np.inf)
