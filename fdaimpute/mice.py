"""MICEImputer: chained-equation imputation of a binned grid (a baseline)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.experimental import enable_iterative_imputer  # noqa: F401
from sklearn.impute import IterativeImputer

from fdaimpute._core.docstrings import shared_docs
from fdaimpute._core.params import RANDOM_STATE, Interval
from fdaimpute._numerics.binned_grid import BinnedGridMixin
from fdaimpute.base import BaseImputer

__all__ = ["MICEImputer"]


@shared_docs()
class MICEImputer(BinnedGridMixin, BaseImputer):
    """Multiple imputation by chained equations on binned times (baseline).

    Observations are averaged into ``n_bins`` equal-width time bins, giving
    a matrix with missing cells; scikit-learn's
    :class:`~sklearn.impute.IterativeImputer` (Bayesian ridge regression of
    each bin on the others, iterated) fills the missing cells. The fitted
    regressions are kept as arrays and replayed on new subjects as the
    iterative imputer's ``transform`` would. The curve is the linear
    interpolation of the filled row between the bin centres,
    constant beyond the first and last centres. Observed cells keep their
    noisy values, so the curves are not smooth: this is the MICE baseline of
    the SAND paper, not a recommended imputer.

    Parameters
    ----------
    %(grid)s
    n_bins : int or None, default=None
        Number of time bins; by default the number of distinct training
        times when that is at most 101, else 51.
    max_iter : int, default=10
        Rounds of chained equations, a fixed budget as in van Buuren's
        ``mice``. scikit-learn also stops early once the imputed cells
        change by under 0.1% of the largest observed value between rounds,
        and warns when that does not happen. On sparse noisy curves it
        practically never does (the imputed cells keep moving, with 20 or
        all bins as predictors), and more rounds do not help: in a check on
        ``simulate.sand_paper(n=200, random_state=0)``, 30 rounds gave a
        larger test MSE than 10 at n_i = 3-5, 8-12 and 30. So that warning
        is not passed on; ``converged_`` records whether the criterion was
        met.
    n_nearest_features : int or None, default=20
        Use only this many other bins (drawn by their correlation with the
        bin) as predictors of each bin; ``None`` uses all. With most cells
        missing, regressing on every other bin amplifies noise: on the SAND
        paper's simulation (n = 10,000, ``benchmarks/bench_paper.py``; both
        runs' rows are in ``benchmarks/results/paper/``) 20 gave 1.50 /
        1.67 / 1.66 x the oracle's MSE at n_i = 30 / 8-12 / 3-5 against
        2.14 / 3.39 / 1.97 with all bins, and fitted 4 to 14 times faster.
    random_state : int or None, default=None
        Seed of the iterative imputer.
    %(extrapolate)s
    %(keep_observed)s

    Attributes
    ----------
    bin_edges_ : ndarray of shape (n_bins + 1,)
        Edges of the time bins.
    bin_centres_ : ndarray of shape (n_bins,)
        Times the filled matrix's columns stand for.
    initial_fill_ : ndarray of shape (n_bins,)
        Each bin's mean over the training subjects: the first fill of a
        missing cell.
    chain_bins_ : ndarray of shape (n_steps,)
        The bin each step of the chained equations imputes, in order
        (``n_iter_`` rounds over the bins).
    chain_predictors_ : ndarray of shape (n_steps, n_predictors)
        The bins each step regresses on.
    chain_coef_ : ndarray of shape (n_steps, n_predictors)
        The fitted Bayesian ridge coefficients of each step.
    chain_intercept_ : ndarray of shape (n_steps,)
        The intercepts.
    n_iter_ : int
        Rounds of chained equations run.
    converged_ : bool
        Whether scikit-learn's early-stopping criterion was met before
        ``max_iter`` rounds (see ``max_iter``).
    mean_ : ndarray of shape (n_grid,)
        Mean of the training subjects' imputed curves on ``grid_`` (the
        curve of the mean filled row). MICE estimates no noise variance.
    %(grid_)s
    time_range_ : tuple of float
        Range of the training times.
    n_subjects_fit_ : int
        Number of training subjects.

    Notes
    -----
    The curve is piecewise linear with knots at the bin centres, so
    ``derivative`` returns the slope of the segment that evaluates each
    time: at a knot, the slope of the segment to its right (the right
    derivative), except at the last centre, which takes the slope of the
    segment to its left; 0 outside the first and last centres, where the
    curve is constant.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.sand_paper(n=300, n_obs=30, random_state=0)
    >>> mice = fi.MICEImputer(grid=sim.grid, max_iter=3).fit(sim.train.data)
    >>> mice.transform(sim.test.data).shape
    (15, 101)
    """

    _param_constraints = {
        **BaseImputer._param_constraints,
        "n_bins": [Interval("int", 2), None],
        "max_iter": [Interval("int", 1)],
        "n_nearest_features": [Interval("int", 1), None],
        "random_state": RANDOM_STATE,
    }

    def __init__(
        self,
        *,
        grid=None,
        n_bins=None,
        max_iter=10,
        n_nearest_features=20,
        random_state=None,
        extrapolate=False,
        keep_observed=False,
    ):
        self.grid = grid
        self.n_bins = n_bins
        self.max_iter = max_iter
        self.n_nearest_features = n_nearest_features
        self.random_state = random_state
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed

    def _fit(self, data):
        self._fit_bins(data)
        # A correlation needs two subjects; with fewer, use every bin.
        nearest = self.n_nearest_features if len(data) > 2 else None
        imputer = IterativeImputer(
            max_iter=self.max_iter,
            n_nearest_features=nearest,
            random_state=self.random_state,
        )
        with warnings.catch_warnings():
            # A fixed number of rounds is the method (see ``max_iter``).
            warnings.filterwarnings(
                "ignore",
                message=r"\[IterativeImputer\] Early stopping",
                category=ConvergenceWarning,
            )
            filled = imputer.fit_transform(self._binned(data))
        self._keep_chain(imputer)
        self.n_iter_ = imputer.n_iter_
        self.converged_ = bool(self.n_iter_ < self.max_iter)
        mean_row = filled.mean(axis=0, keepdims=True)
        self.mean_ = self._interpolate(mean_row, self.grid_)[0]

    def _keep_chain(self, imputer):
        """Keep the fitted regressions of ``imputer`` as arrays."""
        steps = imputer.imputation_sequence_
        self.initial_fill_ = imputer.initial_imputer_.statistics_
        self.chain_bins_ = np.array([s.feat_idx for s in steps], dtype=np.intp)
        width = len(steps[0].neighbor_feat_idx) if steps else 0
        self.chain_predictors_ = np.array(
            [s.neighbor_feat_idx for s in steps], dtype=np.intp
        ).reshape(len(steps), width)
        self.chain_coef_ = np.array(
            [s.estimator.coef_ for s in steps], dtype=np.float64
        ).reshape(len(steps), width)
        self.chain_intercept_ = np.array(
            [s.estimator.intercept_ for s in steps], dtype=np.float64
        )

    def _filled(self, data):
        """The binned matrix of ``data``, its missing cells filled by the chain.

        Replays scikit-learn's ``IterativeImputer.transform`` (without
        posterior sampling, bounds or empty bins, which the fit never uses):
        the bin means first, then each step's regression on its bins, in
        order, for the rows where the step's bin is missing.
        """
        binned = self._binned(data)
        missing = np.isnan(binned)
        filled = np.asfortranarray(np.where(missing, self.initial_fill_, binned))
        steps = zip(
            self.chain_bins_,
            self.chain_predictors_,
            self.chain_coef_,
            self.chain_intercept_,
        )
        for col, predictors, coef, intercept in steps:
            rows = missing[:, col]
            if rows.any():
                filled[rows, col] = filled[:, predictors][rows] @ coef + intercept
        return filled
