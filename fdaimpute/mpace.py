"""Multivariate PACE: several functional variables, each observed at its own times."""

from __future__ import annotations

import numbers
from dataclasses import replace
from functools import partial
from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from fdaimpute._core.columns import column_labels
from fdaimpute._core.fitting import fit_from_scratch
from fdaimpute._core.multivariate_frames import covariate_names
from fdaimpute._core.params import (
    RANDOM_STATE,
    Boolean,
    Instance,
    Interval,
    Options,
    Pair,
)
from fdaimpute._core.plausible import excursion_variables
from fdaimpute._core.state import check_array, check_components
from fdaimpute._fpca.covariates import (
    SUPPORT_REACH,
    CovariateDesign,
    choose_varying,
    coefficient_bandwidths,
    covariate_support,
    effect_at,
    effect_curves,
    hold_constant,
    varying_coefficients,
)
from fdaimpute._fpca.folds import N_FOLDS
from fdaimpute._fpca.heldout import one_standard_error_k
from fdaimpute._numerics.linalg import one_blas_thread
from fdaimpute._pace.binning import choose_bins
from fdaimpute._pace.multivariate import (
    MultivariatePACEModel,
    calibrate_joint_bands,
    cross_moments,
    heldout_errors,
    joint_eigen,
    refine,
    regrid,
    smooth_cross,
    variable_scales,
)
from fdaimpute.base import BaseImputer
from fdaimpute.multivariate import (
    align_variables,
    as_3d,
    as_multivariate,
)
from fdaimpute.pace import PACEImputer

__all__ = ["MultivariatePACEImputer"]

_POSITIVE = Interval("real", 0, closed="neither")
#: Backfitting steps of the covariate effects (see ``_backfit``).
BACKFIT_STEPS = 2
#: From this many subjects on, the refinement check uses one fold of
#: subjects (see ``_score_refinement``).
REFINE_SCORING_SUBJECTS = 1500
#: Refinement is declined only when its held-out error is higher by more
#: than this share: the unrefined model's smoothed covariances saw the
#: validation subjects, so ties go to the refinement (on the simulated
#: process with covariates, 2,000 subjects, it scored 0.2-0.5% worse in
#: one fold yet lowers the test error; on PBC's labs 10-12% worse).
REFINE_TOLERANCE = 0.02
#: Sizes of the refined loadings' basis tried (by the refinement's held-out
#: check), as shares of one function per covariance bandwidth.
KNOT_SHARES = (0.5, 0.65, 0.8, 1.0)
_FIXED_PACE = ("grid", "extrapolate", "keep_observed", "random_state")
#: Fewer components are tried, when a training curve is implausible, while
#: their held-out error is within this factor of the best.
PLAUSIBLE_SLACK = 1.10


class MultivariatePACEImputer(BaseImputer):
    """PACE for several functional variables, each observed at its own times.

    Every variable gets its univariate PACE fit (mean, covariance surface,
    noise variance, bandwidths; :class:`~fdaimpute.PACEImputer` with
    ``pace_params``). The cross-covariance of each pair of variables is
    smoothed from the raw cross-products of a subject's observations of the
    two, the variables are put on a comparable scale, and one eigen-analysis
    of the joint covariance on the stacked work grids gives components
    shared by all variables. A subject's scores are their conditional
    expectation given *every* observed value of *every* variable, so a
    sparsely observed variable borrows strength from the densely observed
    ones it co-varies with, and a variable never observed for a subject is
    imputed from the others (with a wider band). See ``docs/multivariate.md``.

    Parameters
    ----------
    grid : int or array-like, default=None
        Output grid (common to all variables): ``None`` gives 101 points
        over the training time range.
    extrapolate : {False, True, "clip"}, default=False
        Times outside the training range, as in
        :class:`~fdaimpute.PACEImputer`.
    keep_observed : bool, default=False
        Put observed values back where a grid time equals one of the
        subject's observation times of that variable.
    n_components : int or "auto", default="auto"
        Number ``K`` of joint components. ``"auto"``: chosen by predicting
        held-out observations from the rest of each subject's observations
        of every variable (each variable's squared errors relative to its
        variance, averaged over the variables): on large data one random
        fifth of the observations of up to 3,000 subjects, on small data
        every observation once over five systematic folds; ``K`` is at most
        the sum of the univariate fits' ``K``, and the smallest within one
        standard error of the best. With one variable, the univariate
        fit's ``K``.
    max_components : int, default=None
        Most joint components (default ``min(50, sum of work-grid sizes -
        2, n_subjects - 2)``).
    bandwidth_cross : float, pair of floats or "auto", default="auto"
        Bandwidths ``(along, across)`` the diagonal of the cross-covariance
        smoother (a float: both). ``"auto"``: for variables ``j, k``, the
        geometric means of their univariate covariance bandwidths along and
        across.
    scale : bool, default=True
        Put the variables on a comparable scale before the joint
        eigen-analysis (divide each by the root of its average variance);
        otherwise a variable with large values dominates the components.
    refine_steps : int, default=3
        With several variables, expectation-maximisation steps that refit
        the means, the components' loadings and the noise variances to all
        observations at once, starting from the smoothed covariances (see
        Notes). One variable is never refined (its model is univariate
        PACE's).
    pace_params : dict, default=None
        Parameters of each variable's :class:`~fdaimpute.PACEImputer`
        (not ``grid``, ``extrapolate``, ``keep_observed``, ``random_state``
        or ``fdapace_compat=True``).
    covariates : list of str, default=None
        Subject covariates (names in ``X.covariates``) that shift the
        variables' means: ``mu_j(t, z) = mu0_j(t) + sum_k z_k beta_jk(t)``
        (see Notes). Numeric covariates are centred, categorical ones
        (strings) one-hot encoded against their most frequent level; a
        level held by fewer than three training subjects counts as that
        reference (with a warning), and a constant or collinear column is
        refused. Their units change nothing. ``transform`` then needs every
        subject's values of them. ``None``: no covariates, whatever ``X``
        carries.
    random_state : int or None, default=None
        Seed of the univariate fits' cross-validation.

    Attributes
    ----------
    variables_ : list of str
        The variables, in the order of the output's blocks.
    value_ranges_ : list of tuple of float
        Each variable's training range; ``transform`` warns, naming the
        subject and the variable, when a curve leaves it widened by half of
        it (inside the observed time range).
    grid_ : ndarray of shape (n_grid,)
        The output grid.
    univariate_ : list of PACEImputer
        Each variable's univariate fit (its mean, covariance, noise).
    work_grids_ : list of ndarray
        Each variable's work grid (over its own observation times).
    cross_covariances_ : dict
        ``(j, k) -> C_jk`` on ``work_grids_[j] x work_grids_[k]`` for
        ``j < k``.
    bandwidth_cross_ : dict
        ``(j, k) -> `` the bandwidth of ``C_jk``.
    scales_ : ndarray of shape (p,)
        The variables' scales (all 1 without ``scale``).
    n_components_ : int
        ``K``.
    eigenvalues_ : ndarray of shape (K,)
        Variances of the shared scores.
    fve_ : ndarray of shape (K,)
        Cumulative fraction of the joint variance explained.
    n_knots_ : list of int or None
        Each variable's number of basis functions of its refined loadings
        (None: the refinement refits the means only).
    refined_ : bool
        Whether the refinement was applied (see Notes).
    refine_scores_ : ndarray or None
        Held-out error (subject folds) without refinement, then with each
        candidate refinement: the means alone, then loadings bases of
        increasing size (see Notes).
    cv_scores_ : ndarray or None
        With ``n_components="auto"`` and several variables: the held-out
        score of each ``K`` up to the cap (``K - 1`` indexes it).
    implausible_components_ : list of int
        The ``K`` given up because a training subject's curve left a
        variable's widened range (see Notes); empty when the first choice
        was kept.
    noise_variance_ : ndarray of shape (p,)
        Each variable's measurement-error variance (after refinement, its
        refined value; otherwise its univariate fit's).
    mean_ : ndarray of shape (p * n_grid,)
        The variables' means on ``grid_``, variable-major (with covariates:
        those of a subject at the reference of each covariate).
    covariate_encoding_ : dict
        With ``covariates``: each covariate's coding (``"numeric"`` with
        its ``"centre"``, or ``"categorical"`` with its ``"reference"`` and
        other ``"levels"``); empty without.
    covariate_effects_ : list of ndarray
        With ``covariates``: variable ``j``'s coefficient curves on
        ``work_grids_[j]``, shape ``(q + 1, G_j)``: row 0 a correction of
        ``mu0_j`` (from backfitting), then ``beta_jk`` in the order of
        ``covariate_columns_``.
    covariate_support_ : list of ndarray
        With ``covariates``: variable ``j``'s covariate support on
        ``work_grids_[j]``, shape ``(2, q, G_j)``: the smallest and largest
        value of each design column among the training subjects observed
        (on ``j``) within twice the coefficients' bandwidth of each time
        (for a categorical level's column, present where three of them
        hold it). A subject's design is held inside it where its effect is
        computed.
    covariate_columns_ : list of str
        Names of the design's columns (``"age"``, ``"sex=m"``, ...).
    covariate_varying_ : list of ndarray of bool
        With ``covariates``: for variable ``j``, whether each design
        column's coefficient varies in time (otherwise it is one constant;
        chosen by held-out subjects, see Notes).

    Notes
    -----
    *Output layout.* ``transform`` returns one row per subject and ``p *
    n_grid`` columns: variable ``j`` occupies columns ``j * n_grid`` to
    ``(j + 1) * n_grid`` (variable-major blocks), which a scikit-learn
    Pipeline takes as features. ``curves.reshape(n_subjects, p, n_grid)``
    gives one slice per variable; with ``set_output(transform="pandas")``
    the columns are a ``(variable, time)`` MultiIndex.

    *Refinement.* Smoothing each pair of variables' cross-products
    separately leaves each block of the joint covariance with its own
    error, and the predictor of a sparse variable leans on exactly these
    blocks; a sparse variable's pooled mean is also off by the average
    curve of the few subjects seen near each time. After ``K`` is chosen,
    ``refine_steps`` steps of expectation-maximisation (as in reduced-rank
    models of sparse curves, James, Hastie & Sugar 2000) refit, using
    every observation of every variable together, each variable's mean
    (smoothed again from its values less what the shared scores predict of
    them, bandwidth by generalised cross-validation), its loadings (least
    squares in expectation over the scores' conditional distribution, in a
    clamped cubic B-spline basis) and its noise variance. The basis size is
    a share (``KNOT_SHARES``) of one function per covariance bandwidth
    across the diagonal (the univariate fit's resolution), and, with the
    choice of refitting the means alone, is chosen by held-out subjects
    (subject folds, each refined on the others; ``refine_scores_``,
    ``n_knots_``). The refinement is declined when the best candidate
    predicts them more than 2% worse than no refinement. On the simulated
    process of ``benchmarks/bench_multivariate.py`` it brings the sparse
    variable from about 1.9 to about 1.07 times the oracle's error and the
    dense ones from about 1.3 to about 1.03; on PBC's labs the means alone
    are chosen (refitting the loadings scored worse there).

    *Bands.* ``return_std=True`` gives each variable's posterior SD of the
    shared scores through its loadings, plus a model-error variance and a
    time profile calibrated per variable on held-out points of the joint
    model: the models of the refinement check predict the hidden
    observations of subjects they were not refined on (as for univariate
    PACE, the Gaussian likelihood of those residuals chooses the variance).

    *Covariates.* The mean of variable ``j`` is the varying-coefficient
    model ``mu0_j(t) + sum_k z_k beta_jk(t)`` (Jiang & Wang 2010): the
    variable's univariate fit without covariates gives a mean bandwidth
    ``h_j``; at each work-grid time, one kernel-weighted least-squares fit
    of the observations on ``[1, z] x [1, t - t0]`` (bandwidth ``h_j``,
    local-linear in every coefficient) gives ``beta_jk``; the variable's
    univariate PACE is then fitted to ``y - z^T beta_j(t)``, whose mean is
    ``mu0_j`` and whose covariances are those of the residuals off
    ``mu_j(t, z)``. Everything after (cross-covariances, components,
    scores) works on these adjusted values, and the curves get ``z^T
    beta_j(t)`` back. In that first regression each subject's own
    deviation from the mean is noise, large beside the effects; two
    backfitting steps then regress ``y`` less each training subject's
    predicted deviation (its scores' part) on ``[1, z]`` again, which on
    the simulated process of ``benchmarks/bench_multivariate.py
    --covariates`` (seed 0) lowered the error of the sparse variable from
    1.34 to 1.15 times the covariate-aware oracle's. With one variable this
    is covariate-adjusted univariate PACE.

    *Covariates on small studies.* Two guards keep the effects to what the
    data near each time show. Where the subjects observed near a time are
    few (late in a small study), the coefficients' bandwidth there widens
    until they weigh as much as five subjects per coefficient (at most
    half of all subjects), so the ``q + 1`` coefficients are not fitted to
    two or three subjects' values. And a subject's design is held, at
    each time, inside the range of the subjects observed within twice the
    bandwidth of it (``covariate_support_``), as ``extrapolate="clip"``
    holds a time inside the training range: on 40 patients of pbcseq, the
    youngest were followed longest, and the age effect they showed,
    applied to a 70-year-old seen once at entry, drew her log bilirubin
    late in the range far below any value in the data. A level that fewer
    than three subjects near a time hold has no effect there. Where many
    subjects of every kind are observed at every time (large studies),
    neither guard moves the fit much.

    *Which effects vary.* Each covariate's effect on each variable is
    either a curve ``beta_jk(t)`` or one constant (a partially linear
    model, fitted by Speckman's profile estimate), whichever predicts the
    observations of held-out subjects better from their covariates
    (subject folds; ``covariate_varying_``). The choice is made twice:
    on the raw values before the joint model, and in the first
    backfitting step on the values less each subject's own predicted
    deviation, where the subjects' variation no longer hides a real time
    course. A level of a categorical covariate held by fewer than 10
    subjects always has a constant effect: with three men among 40
    patients of pbcseq, the men's effect late was one man's curve, and it
    carried every man seen once at entry far above the data.

    *Implausible curves.* With ``n_components="auto"``, where the chosen
    ``K`` gives some training subject a curve outside a variable's range
    widened by half of it (the range ``transform`` warns outside of),
    smaller ``K`` whose held-out error is within 10% of the best are
    tried, largest first, and the first whose training curves all stay
    inside is kept (``implausible_components_``); where none does, the
    least implausible is kept and ``transform`` warns. On small studies of
    pbcseq (``benchmarks/bench_pbc.py --small-studies``) the chosen ``K``
    once carried a patient seen for two years, whose last bilirubin was the
    highest in the data, past the range late in the study.

    *Noise.* The variables' measurement errors are taken to be independent
    of each other (and each homoscedastic, as in univariate PACE), so the
    raw cross-products at equal times are unbiased and enter the smoother.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> from fdaimpute.mpace import MultivariatePACEImputer
    >>> sim = fi.simulate.multivariate_gaussian(n=300, random_state=0)
    >>> imp = MultivariatePACEImputer(random_state=0).fit(sim.train.data)
    >>> curves = imp.transform(sim.test.data)
    >>> curves.shape
    (15, 303)
    >>> curves.reshape(15, 3, 101).shape
    (15, 3, 101)
    """

    _param_constraints = {
        **BaseImputer._param_constraints,
        "n_components": [Interval("int", 1), Options("auto")],
        "max_components": [Interval("int", 1), None],
        "bandwidth_cross": [
            _POSITIVE,
            Pair(_POSITIVE, "(along, across)"),
            Options("auto"),
        ],
        "scale": [Boolean()],
        "refine_steps": [Interval("int", 0)],
        "pace_params": [Instance(dict, "a dict of PACEImputer parameters"), None],
        "covariates": [
            Instance((list, tuple), "a list of covariate names"),
            None,
        ],
        "random_state": RANDOM_STATE,
    }

    def __init__(
        self,
        *,
        grid=None,
        extrapolate=False,
        keep_observed=False,
        n_components="auto",
        max_components=None,
        bandwidth_cross="auto",
        scale=True,
        refine_steps=3,
        pace_params=None,
        covariates=None,
        random_state=None,
    ):
        self.grid = grid
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed
        self.n_components = n_components
        self.max_components = max_components
        self.bandwidth_cross = bandwidth_cross
        self.scale = scale
        self.refine_steps = refine_steps
        self.pace_params = pace_params
        self.covariates = covariates
        self.random_state = random_state

    # ------------------------------------------------------------------ #
    # input
    def _validate_input(self, X, *, reset):
        data = as_multivariate(X, covariates=covariate_names(self.covariates))
        if reset:
            return data
        return align_variables(data, self.variables_)

    # ------------------------------------------------------------------ #
    # fitting
    def fit(self, X, y=None):
        """Fit every variable's PACE, the cross-covariances and the joint components.

        Parameters
        ----------
        X : MultivariateIrregularData or long DataFrame
            Training subjects (a DataFrame with columns id, time, variable,
            value, and the columns named in ``covariates``; with covariates,
            columns id, time and value are one variable named ``value``).
        y : None
            Ignored.

        Returns
        -------
        self : MultivariatePACEImputer
        """
        return fit_from_scratch(
            self, X, lambda X: self._validate_input(X, reset=True), self._fit_joint
        )

    def _check_state(self):
        super()._check_state()
        if not hasattr(self, "grid_"):
            return
        p = len(self.variables_)
        for name in ("univariate_", "work_grids_"):
            if len(getattr(self, name)) != p:
                raise ValueError(f"{name} does not have {p} items, one a variable")
        if self._model.n_variables != p:
            raise ValueError(f"_model does not have {p} variables")
        self._model.check("_model")
        check_components(self, self._model.n_components)
        check_array(self.scales_, "scales_", (p,), nonnegative=True)
        check_array(self.noise_variance_, "noise_variance_", (p,), nonnegative=True)

    def _fit_joint(self, data):
        with one_blas_thread():
            self._fit(data)

    def _pace_params(self):
        params = dict(self.pace_params or {})
        fixed = [k for k in _FIXED_PACE if k in params]
        if fixed:
            raise ValueError(
                f"pace_params cannot set {fixed}: they are this estimator's own"
            )
        if params.get("fdapace_compat", False):
            raise ValueError(
                "pace_params: fdapace_compat=True is not supported by the "
                "multivariate fit"
            )
        return params

    def _fit(self, data):
        params = self._pace_params()
        p = data.n_variables
        seed = self.random_state
        names = covariate_names(self.covariates)
        self.covariate_encoding_, self.covariate_effects_ = {}, []
        self.covariate_support_ = []
        self.covariate_columns_, self.covariate_varying_ = [], []
        design = None
        if names:
            coding = CovariateDesign.learn(data.covariates, names, data.ids)
            self.covariate_encoding_ = coding.encoding
            self.covariate_columns_ = coding.columns
            design = self._design(data)
        self.univariate_, supports = [], []
        for j in range(p):
            part, rows = data.variable_data(j)
            if not np.any(part.n_obs >= 2):
                raise ValueError(
                    f"variable {data.variables[j]!r}: no subject has two "
                    "observations of it, so its covariance cannot be estimated"
                )
            try:
                pace = PACEImputer(random_state=seed, **params).fit(part)
            except ValueError as exc:
                raise ValueError(f"variable {data.variables[j]!r}: {exc}") from exc
            if design is not None:
                z = design[rows][part.subject_index]
                widths = self._coefficient_widths(pace, part.times, part.subject_index)
                inputs = (part.times, part.values, z[:, 1:])
                varying = choose_varying(
                    *inputs,
                    part.subject_index,
                    pace.work_grid_,
                    widths,
                    pace.kernel,
                    coding.groups,
                )
                self.covariate_varying_.append(varying)
                coef = varying_coefficients(
                    *inputs, pace.work_grid_, widths, pace.kernel, varying
                )
                coef[0] = 0.0  # the mean of the adjusted values is mu0
                self.covariate_effects_.append(coef)
                supports.append(
                    covariate_support(
                        part.times,
                        z[:, 1:],
                        part.subject_index,
                        pace.work_grid_,
                        SUPPORT_REACH * float(pace.bandwidth_mean_),
                    )
                )
                self.covariate_support_.append(
                    hold_constant(supports[j], z[:, 1:], part.subject_index, varying)
                )
                effect = effect_at(
                    coef, self.covariate_support_[j], pace.work_grid_, part.times, z
                )
                part.values = part.values - effect
                pace = PACEImputer(random_state=seed, **params).fit(part)
            self.univariate_.append(pace)
        grids = [u.work_grid_ for u in self.univariate_]
        self.work_grids_ = grids
        given = data
        if design is not None:
            data = self._adjusted(data, design)
        models = [u._model for u in self.univariate_]
        blocks = [[None] * p for _ in range(p)]
        for j in range(p):
            blocks[j][j] = self.univariate_[j].covariance_
        self.cross_covariances_, self.bandwidth_cross_ = {}, {}
        if p > 1:
            self._fit_cross(data, models, grids, blocks)
        scales = variable_scales([blocks[j][j] for j in range(p)], grids)
        if not self.scale:
            scales = np.ones(p)
        self.scales_ = scales
        cap = self._component_cap(len(data), grids)
        values, phi, fve = joint_eigen(blocks, grids, scales, cap)
        sizes = np.cumsum([0] + [g.size for g in grids])
        loads = [scales[j] * phi[sizes[j] : sizes[j + 1]] for j in range(p)]
        full = MultivariatePACEModel(
            means=[m.mean for m in models],
            work_grids=grids,
            scales=scales,
            eigenvalues=values,
            loadings=loads,
            rest_eigenvalues=values[:0],
            rest_loadings=[x[:, :0] for x in loads],
            noise_variance=np.array([m.noise_variance for m in models]),
            rest_weight=float(np.mean([m.rest_weight for m in models])),
            misfit_variance=np.array([m.misfit_variance for m in models]),
            band_profiles=[m.band_profile for m in models],
        )
        self.cv_scores_ = None
        if isinstance(self.n_components, numbers.Integral):
            k = min(int(self.n_components), values.size)
        elif p == 1:
            k = min(self.univariate_[0].n_components_, values.size)
        else:
            k = self._choose_k(full, data)
        widths = None
        if design is not None:  # of the fits to the adjusted values
            widths = []
            for j, pace in enumerate(self.univariate_):
                on = given.variable == j
                times, subject = given.times[on], given.subject_index[on]
                widths.append(self._coefficient_widths(pace, times, subject))
        start = _JointStart(
            full,
            fve,
            data,
            given,
            design,
            self.covariate_effects_,
            self.covariate_support_,
            self.covariate_varying_,
            supports,
            widths,
        )
        self._complete(k, start)
        self.implausible_components_ = []
        if self.cv_scores_ is not None:
            self._fall_back_to_plausible(start)
        return self

    def _complete(self, k, start):
        """The fit with ``K = k`` from ``start`` (a :class:`_JointStart`):
        refinement, bands, the covariates' backfitting and the attributes
        (each call starts again from the first covariate effects)."""
        self.covariate_effects_ = list(start.effects)
        self.covariate_support_ = list(start.support)
        self.covariate_varying_ = list(start.varying)
        full, data, given, design = start.full, start.data, start.given, start.design
        p = len(full.loadings)
        model = _truncated(full, k)
        candidates = self._knot_candidates()
        self.n_knots_ = candidates[-1]
        self.refined_ = p > 1 and self.refine_steps > 0
        self.refine_scores_ = None
        # the models that predicted subjects they were not refined on, with
        # those subjects: what the bands are calibrated on
        judged = [(model, data)]
        if self.refined_:
            self.refine_scores_, fitted = self._score_refinement(
                model, data, candidates
            )
            best = int(np.argmin(self.refine_scores_[1:]))
            self.n_knots_ = candidates[best]
            worse = self.refine_scores_[1 + best] / self.refine_scores_[0] - 1
            self.refined_ = bool(worse <= REFINE_TOLERANCE)
            which = 1 + best if self.refined_ else 0
            judged = [(models[which], val) for val, models in fitted] or judged
        for _ in range(self.refine_steps if self.refined_ else 0):
            model = refine(model, data, self.n_knots_)
        if p > 1:
            model = calibrate_joint_bands(
                model, judged, check_random_state(self.random_state), self.time_range_
            )
        self._model = model
        if design is not None:
            self._backfit(given, design, start.widths, start.raw_support)
            for _ in range(BACKFIT_STEPS - 1):
                self._backfit(given, design, start.widths)
        self.n_components_ = k
        self.eigenvalues_ = self._model.eigenvalues
        self.fve_ = start.fve[:k].copy()
        self.noise_variance_ = np.array([u.noise_variance_ for u in self.univariate_])
        if self.refined_:
            self.noise_variance_ = self._model.noise_variance.copy()
        self.mean_ = self._model.grid_mean(self.grid_)
        if design is not None:
            at_reference = np.eye(1, design.shape[1])  # z = 0: only mu0's correction
            self.mean_ = (
                self.mean_ + self._covariate_curves(at_reference, self.grid_)[0]
            )

    def _fall_back_to_plausible(self, start):
        """Fewer components while some training subject's curve is implausible.

        With ``K`` chosen by held-out points, where some training subject's
        curve leaves a variable's range widened by half of it (see
        ``transform``'s warning), smaller ``K`` whose held-out error is
        within ``PLAUSIBLE_SLACK`` of the best are tried, largest first:
        each is screened by the curves of the joint model refined as the
        chosen one was (without its held-out check, bands or backfitting),
        and the fit is made again with the first that passes;
        the first fit with no implausible curve is kept (otherwise the
        least implausible:
        :meth:`~fdaimpute.base.BaseImputer._refit_while_implausible`).
        ``implausible_components_`` lists the ``K`` given up.
        """
        excursion = partial(self._training_excursion, start.given)
        if not excursion():
            return
        chosen, scores = self.n_components_, self.cv_scores_
        near = PLAUSIBLE_SLACK * scores.min()
        fewer = [m for m in range(chosen - 1, 0, -1) if scores[m - 1] <= near]
        steps = self.refine_steps if self.refined_ else 0
        knots = self.n_knots_

        def passes_screen(m):
            self.covariate_effects_ = list(start.effects)
            self.covariate_support_ = list(start.support)
            model = _truncated(start.full, m)
            for _ in range(steps):
                model = refine(model, start.data, knots)
            self._model = model
            return not excursion()

        def refit(m):
            self._complete(m, start)
            self.implausible_components_ = [chosen, *(x for x in fewer if x > m)]

        self.implausible_components_ = [chosen]
        self._refit_while_implausible(
            excursion, (partial(refit, m) for m in fewer if passes_screen(m))
        )

    def _training_excursion(self, given):
        """How far the worst training curve leaves its variable's widened
        range (0.0 when none does; see :func:`excursion_variables`)."""
        grid = np.linspace(*self.time_range_, 101)
        design = self._design(given)
        scores = self._scores(self._adjusted(given, design))
        curves = self._mean_curves(scores, design, grid)
        return excursion_variables(
            curves, given, grid, self.time_range_, self.value_ranges_
        )

    def _choose_k(self, full, data):
        """``K`` by held-out observations, at most the univariate fits' ``K`` summed.

        The univariate fits chose each variable's ``K_j`` by cross-validation
        with the held-out points left out of every estimate, so ``K_j`` is
        what that variable's visits identify; the joint model needs at most
        ``sum K_j`` shared components to reproduce all of them (block-diagonal
        covariances of those ranks). The held-out errors here come from the
        covariances estimated on every point, so they keep falling slowly
        with ``K`` (on pbcseq's three labs, by 0.5% from 10 to 50
        components); within the cap, ``K`` is the smallest within one
        standard error (clustered by subject) of the best.
        """
        cap = min(sum(u.n_components_ for u in self.univariate_), full.n_components)
        errors, owner, _ = heldout_errors(
            full, data, check_random_state(self.random_state)
        )
        errors = errors[:, :cap]
        self.cv_scores_ = errors.mean(axis=0)
        return one_standard_error_k(errors, owner)

    def _knot_candidates(self):
        """Basis sizes tried for the refined loadings, fewest first.

        Each is a share (``KNOT_SHARES``) of one basis function per
        covariance bandwidth across the diagonal, for every variable.
        """
        out = [None]
        for share in KNOT_SHARES:
            sizes = [self._knots(u, share) for u in self.univariate_]
            if sizes not in out:
                out.append(sizes)
        return out

    def _score_refinement(self, model, data, candidates):
        """Held-out error of ``model`` without and with refinement, by subject folds.

        Refinement fits the loadings to the observations themselves, so
        held-out points of the subjects it was fitted on cannot judge it.
        Subjects are dealt into ``N_FOLDS`` folds (by position); each
        fold's subjects hide their observations (as for ``K``) and are
        predicted by ``model`` and by ``model`` refined on the other folds'
        subjects alone. From ``REFINE_SCORING_SUBJECTS`` subjects on, one
        fold is enough (the check then costs about one refinement of the
        whole data, not five; refining on fewer subjects than the rest would
        judge a weaker refinement: on 5,000 simulated subjects, refined on
        1,500, it was declined although it halves the excess error).

        Returns
        -------
        scores : ndarray of shape (1 + len(candidates),)
            Mean relative squared error without refinement, then with each
            candidate's.
        folds : list of tuple
            Each fold's validation subjects and the models that predicted
            them (unrefined first, then each candidate's), for the bands.
        """
        n = len(data)
        folds = np.arange(n) % N_FOLDS
        large = n >= REFINE_SCORING_SUBJECTS
        errors = [[] for _ in range(1 + len(candidates))]
        fitted = []
        for f in range(1 if large else N_FOLDS):
            val = data.take(np.flatnonzero(folds == f))
            if not np.any(val.n_obs >= 2):
                continue
            train = data.take(np.flatnonzero(folds != f))
            models = [model]
            for knots in candidates:
                refined = model
                for _ in range(self.refine_steps):
                    refined = refine(refined, train, knots)
                models.append(refined)
            for which, candidate in enumerate(models):
                rng = check_random_state(self.random_state)
                err, _, _ = heldout_errors(candidate, val, rng)
                errors[which].append(err[:, -1])
            fitted.append((val, models))
        return np.array([np.concatenate(e).mean() for e in errors]), fitted

    def _fit_cross(self, data, models, grids, blocks):
        lo, hi = self.time_range_
        n_work = max(g.size for g in grids)
        common = np.linspace(lo, hi, n_work)
        bins = choose_bins(data.times, "auto", n_work, lo, hi)
        resid = np.empty(data.times.size)
        for j, model in enumerate(models):
            on = data.variable == j
            resid[on] = data.values[on] - model.mean(data.times[on])
        subject = data.subject_index
        kernel = self.univariate_[0].kernel
        p = len(models)
        for j in range(p):
            for k in range(j + 1, p):
                count, total = cross_moments(
                    bins, resid, data.variable, subject, len(data), j, k
                )
                if not count.any():
                    raise ValueError(
                        f"variables {data.variables[j]!r} and {data.variables[k]!r} "
                        "are never observed on the same subject: their "
                        "cross-covariance cannot be estimated"
                    )
                h = self._cross_bandwidth(j, k)
                cov = smooth_cross(count, total, bins.centres, common, h, kernel)
                cov = regrid(cov, common, grids[j], grids[k])
                self.cross_covariances_[(j, k)] = cov
                self.bandwidth_cross_[(j, k)] = h
                blocks[j][k], blocks[k][j] = cov, cov.T

    # ------------------------------------------------------------------ #
    # covariates
    def _effect_at(self, j, times, z):
        """Variable ``j``'s ``z^T beta_j(t)`` at observations (rows of ``z``,
        held inside the covariates' support)."""
        beta = self.covariate_effects_[j]
        return effect_at(beta, self._support(j), self.work_grids_[j], times, z)

    def _support(self, j):
        """Variable ``j``'s covariate support, None for a model saved before
        it was kept (nothing held then)."""
        support = getattr(self, "covariate_support_", None)
        return support[j] if support else None

    def _design(self, data):
        """``[1, z]`` of ``data``'s subjects, or None without covariates."""
        if not self.covariate_encoding_:
            return None
        z = CovariateDesign(self.covariate_encoding_).matrix(data.covariates, data.ids)
        return np.concatenate([np.ones((len(data), 1)), z], axis=1)

    def _backfit(self, data, design, widths, supports=None):
        """Re-estimate the covariate effects with each subject's own curve taken off.

        The first estimate regresses the raw values on ``[1, z]``, where
        the subjects' own variation is noise (large beside the effects).
        Here the values less each subject's predicted deviation from the
        mean (its scores' part) are regressed, as in backfitting a mixed
        model; row 0 of the new coefficients corrects ``mu0``. ``widths``:
        each variable's :meth:`_coefficient_widths` (of its fit to the
        adjusted values, the same for every step). With ``supports`` (each
        variable's :func:`covariate_support`), which effects vary is chosen
        again on these values, and the support held accordingly.
        """
        adjusted = self._adjusted(data, design)
        model = self._model
        scores = self._scores(adjusted)
        rows = model._rows(data.times, data.variable, "main")
        own = np.einsum("ok,ok->o", rows, scores[data.subject_index])
        base = model.residuals(data.times, data.values - own, data.variable)
        z = design[data.subject_index]
        groups = CovariateDesign(self.covariate_encoding_).groups
        for j, pace in enumerate(self.univariate_):
            on = data.variable == j
            if supports is not None:
                _, subject = np.unique(data.subject_index[on], return_inverse=True)
                varying = choose_varying(
                    data.times[on],
                    base[on],
                    z[on, 1:],
                    subject,
                    pace.work_grid_,
                    widths[j],
                    pace.kernel,
                    groups,
                )
                self.covariate_varying_[j] = varying
                self.covariate_support_[j] = hold_constant(
                    supports[j], z[on, 1:], subject, varying
                )
            self.covariate_effects_[j] = varying_coefficients(
                data.times[on],
                base[on],
                z[on, 1:],
                pace.work_grid_,
                widths[j],
                pace.kernel,
                self.covariate_varying_[j],
            )

    def _coefficient_widths(self, pace, times, subject):
        """The covariate effects' bandwidth at each time of ``pace``'s work
        grid: its mean's, widened where few subjects are observed."""
        return coefficient_bandwidths(
            times,
            subject,
            pace.work_grid_,
            float(pace.bandwidth_mean_),
            pace.kernel,
            1 + len(self.covariate_columns_),
        )

    def _adjusted(self, data, design):
        """``data`` with each observation's covariate effect taken off."""
        if design is None:
            return data
        out = data.take(np.arange(len(data)))
        z = design[data.subject_index]
        values = data.values.copy()
        for j in range(data.n_variables):
            on = data.variable == j
            if on.any():
                values[on] -= self._effect_at(j, data.times[on], z[on])
        out.values = values
        return out

    def _mean_curves(self, scores, design, grid):
        """The curves of scored subjects on ``grid``: the joint model's, plus
        their covariate effects (``design`` their ``[1, z]``, or None)."""
        return self._model.curves(scores, grid) + self._covariate_curves(design, grid)

    def _covariate_curves(self, design, grid, derivative=False):
        """``z^T beta_j`` (or its slope) on ``grid``, variable-major, (n, p * G),
        each subject's ``z`` held inside the covariates' support."""
        if design is None:
            return 0.0
        parts = zip(self.work_grids_, self.covariate_effects_)
        return np.concatenate(
            [
                effect_curves(
                    beta, self._support(j), w, design, grid, derivative=derivative
                )
                for j, (w, beta) in enumerate(parts)
            ],
            axis=1,
        )

    @staticmethod
    def _knots(pace, share=1.0):
        """Refined loadings basis size: ``share`` of one per bandwidth across."""
        h = pace.bandwidth_cov_
        across = float(h[1]) if np.ndim(h) else float(h)
        grid = pace.work_grid_
        size = share * ((grid[-1] - grid[0]) / across + 1)
        return int(np.clip(np.ceil(size), 4, grid.size))

    def _cross_bandwidth(self, j, k):
        """``(along, across)`` of the cross-covariance of variables ``j`` and ``k``."""
        if self.bandwidth_cross != "auto":
            h = self.bandwidth_cross
            return (float(h[0]), float(h[1])) if np.ndim(h) else (float(h),) * 2

        def pair(h):
            return (float(h[0]), float(h[1])) if np.ndim(h) else (float(h),) * 2

        hj = pair(self.univariate_[j].bandwidth_cov_)
        hk = pair(self.univariate_[k].bandwidth_cov_)
        return tuple(float(np.sqrt(a * b)) for a, b in zip(hj, hk))

    def _component_cap(self, n_subjects, grids):
        cap = 50 if self.max_components is None else int(self.max_components)
        return max(1, min(cap, sum(g.size for g in grids) - 2, max(1, n_subjects - 2)))

    # ------------------------------------------------------------------ #
    # imputation
    def _columns(self, grid):
        return column_labels(grid, self.variables_)

    def get_feature_names_out(self, input_features=None):
        """Output column names ``"<variable>:t=<time>"``, variable-major."""
        check_is_fitted(self, "grid_")
        return self._columns(self.grid_)

    def _wrap(self, array, data, grid=None, columns=None):
        if self._output_container() != "pandas":
            return array
        import pandas as pd

        grid = self.grid_ if grid is None else grid
        if columns is None:
            columns = pd.MultiIndex.from_product(
                [list(self.variables_), list(grid)], names=["variable", "time"]
            )
        return pd.DataFrame(array, index=pd.Index(data.ids, name="id"), columns=columns)

    def _clip_grid(self, grid):
        """The grid with times beyond the range held at its ends under "clip"."""
        if self._extrapolation() == "clip":
            lo, hi = self.time_range_
            return np.clip(grid, lo, hi), (grid < lo) | (grid > hi)
        return grid, np.zeros(grid.size, dtype=bool)

    def _scores(self, data, with_cov=False):
        return self._model.scores(
            data.times, data.values, data.variable, data.offsets, with_cov=with_cov
        )

    def transform(self, X, return_std=False, grid=None):
        """Impute every variable's curve on the grid, for each subject.

        Parameters
        ----------
        X : MultivariateIrregularData or long DataFrame
            Subjects (new subjects are the normal case); a variable may be
            missing for some or all of them.
        return_std : bool, default=False
            Also return the pointwise standard deviation of each value.
        grid : int or array-like, default=None
            Where to evaluate; defaults to ``grid_``.

        Returns
        -------
        curves : ndarray or DataFrame of shape (n_subjects, p * n_grid)
            Variable-major blocks (see Notes); one row per subject, in order.
        std : ndarray or DataFrame of shape (n_subjects, p * n_grid)
            Only with ``return_std``.
        """
        given, design, data, grid = self._prepared(X, grid)
        inner, _ = self._clip_grid(grid)
        with one_blas_thread():
            if return_std:
                scores, var = self._model.error_variance(
                    data.times, data.values, data.variable, data.offsets, inner
                )
                std = np.sqrt(np.clip(var, 0.0, None))
            else:
                scores, std = self._scores(data), None
        curves = self._mean_curves(scores, design, inner)
        return self._finish_variables(given, grid, curves, std)

    def transform_3d(self, X, return_std=False, grid=None):
        """:meth:`transform` as arrays of shape (n_subjects, p, n_grid).

        Returns
        -------
        curves : ndarray of shape (n_subjects, p, n_grid)
        std : ndarray of shape (n_subjects, p, n_grid)
            Only with ``return_std``.
        """
        out = self.transform(X, return_std=return_std, grid=grid)
        return as_3d(out, len(self.variables_), return_std)

    def derivative(self, X, grid=None):
        """First derivative of each variable's imputed curve, variable-major.

        Returns
        -------
        ndarray or DataFrame of shape (n_subjects, p * n_grid)
            With ``extrapolate="clip"``, 0 outside the training range.
        """
        _, design, data, grid = self._prepared(X, grid)
        inner, outside = self._clip_grid(grid)
        with one_blas_thread():
            scores = self._scores(data)
        deriv = self._slopes(scores, design, data, inner, outside)
        return self._wrap(deriv, data, grid)

    def _curves_and_derivatives(self, X, grid=None):
        """``transform(X, grid=grid)`` and ``derivative(X, grid=grid)`` as arrays.

        The subjects are scored once for both (the networks' statistical
        base asks for both on every batch).
        """
        given, design, data, grid = self._prepared(X, grid)
        inner, outside = self._clip_grid(grid)
        with one_blas_thread():
            scores = self._scores(data)
        curves = self._mean_curves(scores, design, inner)
        curves = np.asarray(self._finish_variables(given, grid, curves))
        return curves, self._slopes(scores, design, data, inner, outside)

    def _prepared(self, X, grid):
        """The checked subjects, the covariates' design, the subjects with
        the covariates' effects taken off, and the query grid."""
        given = self._check_transform_input(X)
        design = self._design(given)
        return given, design, self._adjusted(given, design), self._query_grid(grid)

    def _slopes(self, scores, design, data, inner, outside):
        """The derivatives of the scored subjects' curves on ``inner``."""
        deriv = self._model.slopes(scores, inner)
        deriv = deriv + self._covariate_curves(design, inner, derivative=True)
        deriv[:, np.tile(outside, len(self.variables_))] = 0.0
        self._check_finite(deriv, data, "derivative")
        return deriv

    def predict_at(self, X, times=None):
        """Each subject's imputed value at each of its own observations.

        Parameters
        ----------
        X : MultivariateIrregularData or long DataFrame
            Subjects.
        times : None
            Only ``None`` (each observation's own time and variable) for now.

        Returns
        -------
        MultivariateIrregularData
            The subjects' observation times, variables and ids, with the
            imputed values as values.
        """
        if times is not None:
            raise NotImplementedError(
                "MultivariatePACEImputer.predict_at takes times=None only; "
                "use transform(X, grid=times) for common times"
            )
        given, design, data, _ = self._prepared(X, None)
        model = self._model
        with one_blas_thread():
            scores = self._scores(data)
        rows = model._rows(data.times, data.variable, "main")
        mean = model.residuals(data.times, np.zeros(data.times.size), data.variable)
        values = -mean + np.einsum("ik,ik->i", rows, scores[data.subject_index])
        values += given.values - data.values
        self._check_finite(values, data, "prediction", flat_offsets=data.offsets)
        out = given.take(np.arange(len(given)))
        out.values = values
        return out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        return tags


class _JointStart(NamedTuple):
    """What a fit with any ``K`` starts from (see ``MultivariatePACEImputer._fit``).

    ``full``: the joint eigen-analysis with every component; ``fve``: its
    cumulative fractions; ``data``: the training subjects with the first
    covariate effects taken off; ``given``: as given; ``design``: their
    ``[1, z]`` (None without covariates); ``effects``, ``support``,
    ``varying``: the first covariate effects, their held support and which
    vary; ``raw_support``: each variable's support before holding;
    ``widths``: the backfitting's coefficient bandwidths (None without
    covariates).
    """

    full: MultivariatePACEModel
    fve: np.ndarray
    data: object
    given: object
    design: object
    effects: list
    support: list
    varying: list
    raw_support: list
    widths: list | None


def _truncated(full, k):
    """The joint model ``full`` with its first ``k`` components as the main
    ones and the rest behind them."""
    return replace(
        full,
        eigenvalues=full.eigenvalues[:k].copy(),
        loadings=[x[:, :k].copy() for x in full.loadings],
        rest_eigenvalues=full.eigenvalues[k:].copy(),
        rest_loadings=[x[:, k:].copy() for x in full.loadings],
    )
