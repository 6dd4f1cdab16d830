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
from fdaimpute._numerics.interpolate import (
    interpolate_rows,
    interpolate_shared,
    slope_shared,
)
from fdaimpute.base import BaseImputer
from fdaimpute.multivariate import SeveralVariablesMixin

__all__ = ["MICEImputer"]


@shared_docs()
class MICEImputer(SeveralVariablesMixin, BinnedGridMixin, BaseImputer):
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
    variables_ : list of str
        Only after a fit on several variables: their names, in the order
        of the output's blocks.
    value_ranges_ : list of tuple of float
        Only after a fit on several variables: each variable's training
        range; ``transform`` warns, naming the subject and the variable,
        when a curve leaves it widened by half of it.
    variable_bin_edges_, variable_bin_centres_ : list of ndarray
        Only after a fit on several variables: each variable's bins, as
        ``bin_edges_`` and ``bin_centres_`` of a fit on it alone (which
        are then not set). ``initial_fill_`` and the ``chain_*`` arrays
        index the variables' bins side by side, variable-major.
    variable_time_ranges_ : ndarray of shape (p, 2)
        Only after a fit on several variables: each variable's time range.
    variable_value_ranges_ : ndarray of shape (p, 2)
        Only after a fit on several variables: each variable's lowest and
        highest training value, the bounds of its imputed cells (with two
        variables or more).

    Notes
    -----
    The curve is piecewise linear with knots at the bin centres, so
    ``derivative`` returns the slope of the segment that evaluates each
    time: at a knot, the slope of the segment to its right (the right
    derivative), except at the last centre, which takes the slope of the
    segment to its left; 0 outside the first and last centres, where the
    curve is constant.

    *Several variables.* Fitted on a
    :class:`~fdaimpute.multivariate.MultivariateIrregularData`, each
    variable is binned as a fit on it alone would bin it, and the
    variables' binned matrices, side by side, are filled together: each
    bin of each variable is regressed on the bins of every variable (the
    ``n_nearest_features`` most correlated), so a variable measured
    rarely, or never for a subject, is filled from the others. With two
    variables or more, each imputed cell is held within its variable's
    range of training values (``IterativeImputer``'s ``min_value`` and
    ``max_value``): a bin regressed on other variables' bins can otherwise
    run far beyond its own variable's values (unbounded, on PBC's labs,
    the prothrombin-time curves of 20 of 90 patients left that lab's
    range of values widened by half of it, at seed 0 of
    ``benchmarks/bench_pbc.py --kernel-mice``). The output
    has one block of grid columns per variable, as
    :class:`~fdaimpute.MultivariatePACEImputer`'s (``transform_3d`` gives
    ``(n_subjects, p, n_grid)``, pandas output a ``(variable, time)``
    MultiIndex, ``predict_at`` each observation's own time and variable).
    With one variable this is the fit above, to the last bit.

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
        filled = self._fit_chain(self._binned(data))
        mean_row = filled.mean(axis=0, keepdims=True)
        self.mean_ = self._interpolate(mean_row, self.grid_)[0]

    def _fit_chain(self, binned):
        """Fit the chained equations to the binned matrix; return it filled."""
        # A correlation needs two subjects; with fewer, use every bin.
        nearest = self.n_nearest_features if len(binned) > 2 else None
        bounds = self._column_bounds()
        lo, hi = (-np.inf, np.inf) if bounds is None else bounds
        imputer = IterativeImputer(
            max_iter=self.max_iter,
            n_nearest_features=nearest,
            random_state=self.random_state,
            min_value=lo,
            max_value=hi,
        )
        with warnings.catch_warnings():
            # A fixed number of rounds is the method (see ``max_iter``).
            warnings.filterwarnings(
                "ignore",
                message=r"\[IterativeImputer\] Early stopping",
                category=ConvergenceWarning,
            )
            filled = imputer.fit_transform(binned)
        self._keep_chain(imputer)
        self.n_iter_ = imputer.n_iter_
        self.converged_ = bool(self.n_iter_ < self.max_iter)
        return filled

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
        """The binned matrix of ``data``, its missing cells filled by the chain."""
        return self._replay(self._binned(data))

    def _replay(self, binned):
        """``binned`` with its missing cells filled by the fitted chain.

        Replays scikit-learn's ``IterativeImputer.transform`` (without
        posterior sampling or empty bins, which the fit never uses): the bin
        means first, then each step's regression on its bins, in order, for
        the rows where the step's bin is missing, held within the column's
        bounds (see ``_column_bounds``).
        """
        missing = np.isnan(binned)
        filled = np.asfortranarray(np.where(missing, self.initial_fill_, binned))
        bounds = self._column_bounds()
        steps = zip(
            self.chain_bins_,
            self.chain_predictors_,
            self.chain_coef_,
            self.chain_intercept_,
        )
        for col, predictors, coef, intercept in steps:
            rows = missing[:, col]
            if rows.any():
                fit = filled[:, predictors][rows] @ coef + intercept
                if bounds is not None:
                    fit = np.clip(fit, bounds[0][col], bounds[1][col])
                filled[rows, col] = fit
        return filled

    # ------------------------------------------------------------------ #
    # several variables
    def _column_bounds(self):
        """Lowest and highest imputed value of each binned column.

        None (unbounded) for one variable. For several, each variable's
        range of training values, repeated over its bins (see the class
        Notes).
        """
        ranges = getattr(self, "variable_value_ranges_", None)
        if ranges is None or len(ranges) < 2:
            return None
        sizes = [c.size for c in self.variable_bin_centres_]
        lo, hi = ranges[:, 0], ranges[:, 1]
        # a variable whose values are all equal: IterativeImputer wants lo < hi
        hi = np.where(hi > lo, hi, np.nextafter(lo, np.inf))
        return np.repeat(lo, sizes), np.repeat(hi, sizes)

    def _fit_variables(self, data):
        """Each variable's bins, then one chain over all variables' bins."""
        bins = []
        for _, part, _ in self._variable_parts(data):
            one = _VariableBins(self.n_bins, part.time_range)
            one._fit_bins(part)
            bins.append(one)
        if len(bins) != data.n_variables:
            missing = data.variables[~data.counts.any(axis=0)].tolist()
            raise ValueError(f"variable(s) {missing} are never observed")
        self.variable_bin_edges_ = [one.bin_edges_ for one in bins]
        self.variable_bin_centres_ = [one.bin_centres_ for one in bins]
        self.variable_time_ranges_ = np.array([one.time_range_ for one in bins])
        values = [data.values[data.variable == j] for j in range(data.n_variables)]
        self.variable_value_ranges_ = np.array([[v.min(), v.max()] for v in values])
        filled = self._fit_chain(self._stacked_bins(data))
        self.mean_ = self._variable_curves_of(
            filled.mean(axis=0, keepdims=True), self.grid_, derivative=False
        )[0]

    def _bins(self):
        return [
            _VariableBins(self.n_bins, tuple(r), edges, centres)
            for r, edges, centres in zip(
                self.variable_time_ranges_,
                self.variable_bin_edges_,
                self.variable_bin_centres_,
            )
        ]

    def _stacked_bins(self, data):
        """The variables' binned matrices side by side (NaN: no observation)."""
        bins = self._bins()
        blocks = [np.full((len(data), b.bin_centres_.size), np.nan) for b in bins]
        for j, part, rows in self._variable_parts(data):
            blocks[j][rows] = bins[j]._binned(part)
        return np.concatenate(blocks, axis=1)

    def _filled_blocks(self, filled):
        """``filled`` split into the variables' blocks of bins."""
        sizes = [c.size for c in self.variable_bin_centres_]
        return np.split(filled, np.cumsum(sizes)[:-1], axis=1)

    def _variable_curves_of(self, filled, grid, derivative):
        rows = slope_shared if derivative else interpolate_shared
        return np.concatenate(
            [
                rows(block, centres, grid)
                for block, centres in zip(
                    self._filled_blocks(filled), self.variable_bin_centres_
                )
            ],
            axis=1,
        )

    def _variable_curves(self, data, grid, derivative):
        filled = self._replay(self._stacked_bins(data))
        return self._variable_curves_of(filled, grid, derivative)

    def _variable_values(self, data):
        blocks = self._filled_blocks(self._replay(self._stacked_bins(data)))
        values = np.empty(data.times.size)
        for j, part, rows in self._variable_parts(data):
            centres = self.variable_bin_centres_[j]
            inside = np.clip(part.times, centres[0], centres[-1])
            values[data.variable == j] = interpolate_rows(
                blocks[j][rows], centres, inside, part.n_obs
            )
        return values


class _VariableBins(BinnedGridMixin):
    """One variable's time bins, for :class:`MICEImputer` on several variables."""

    def __init__(self, n_bins, time_range, edges=None, centres=None):
        self.n_bins = n_bins
        self.time_range_ = time_range
        if edges is not None:
            self.bin_edges_, self.bin_centres_ = edges, centres
