"""Accuracy of imputed curves: grid errors, held-out points, scorers.

Grid metrics follow the SAND paper: for predicted and true curves on a
common grid, ``MSE = mean (X_hat - X)^2`` and ``TV = mean over subjects of
mean_m |e(s_{m+1}) - e(s_m)|`` with ``e = X_hat - X`` (the roughness of the
error). The paper reports both multiplied by 1000: pass ``scale=1000``.
Arguments come in scikit-learn's order, ``(y_true, y_pred)``; both metrics
are symmetric in value. The scorers are factories to call and pass as
``GridSearchCV(scoring=...)``: :func:`held_out_scorer` needs no true
curves, :func:`curve_scorer` compares with them.
"""

from __future__ import annotations

import warnings

import numpy as np

from fdaimpute._core.validation import as_irregular

__all__ = [
    "curve_scorer",
    "held_out_error",
    "held_out_scorer",
    "mse",
    "mse_per_subject",
    "split_held_out",
    "summarize",
    "tv",
    "tv_per_subject",
]


def _pair(y_true, y_pred):
    y_true = np.asarray(y_true, dtype=np.float64)
    y_pred = np.asarray(y_pred, dtype=np.float64)
    if y_true.shape != y_pred.shape or y_true.ndim != 2:
        raise ValueError(
            f"y_true and y_pred must be 2-D arrays of one shape, got {y_true.shape} "
            f"and {y_pred.shape}"
        )
    return y_true, y_pred


def mse_per_subject(y_true, y_pred):
    """Mean squared error of each row.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_subjects, n_grid)
        True and imputed curves on one grid.

    Returns
    -------
    ndarray of shape (n_subjects,)

    Examples
    --------
    >>> import numpy as np
    >>> from fdaimpute.metrics import mse_per_subject
    >>> mse_per_subject(np.zeros((2, 2)), np.array([[1.0, 1.0], [0.0, 2.0]])).tolist()
    [1.0, 2.0]
    """
    y_true, y_pred = _pair(y_true, y_pred)
    return np.mean((y_pred - y_true) ** 2, axis=1)


def tv_per_subject(y_true, y_pred):
    """Mean absolute increment of each row's error ``y_pred - y_true``.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_subjects, n_grid)
        True and imputed curves on one grid.

    Returns
    -------
    ndarray of shape (n_subjects,)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    return np.mean(np.abs(np.diff(y_pred - y_true, axis=1)), axis=1)


def mse(y_true, y_pred, *, scale=1.0):
    """Mean squared error over subjects and grid points.

    The argument order is scikit-learn's (``sklearn.metrics``): truth first.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_subjects, n_grid)
        True and imputed curves on one grid.
    scale : float, default=1.0
        Multiplier; the SAND paper reports ``scale=1000``.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from fdaimpute.metrics import mse
    >>> mse(np.ones((2, 3)), np.zeros((2, 3)), scale=1000)
    1000.0
    """
    return float(scale * mse_per_subject(y_true, y_pred).mean())


def tv(y_true, y_pred, *, scale=1.0):
    """Total variation of the error (SAND paper's TV), averaged over subjects.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_subjects, n_grid)
        True and imputed curves on one grid.
    scale : float, default=1.0
        Multiplier; the SAND paper reports ``scale=1000``.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from fdaimpute.metrics import tv
    >>> tv(np.zeros((1, 3)), np.array([[0.0, 1.0, 0.0]]))
    1.0
    """
    return float(scale * tv_per_subject(y_true, y_pred).mean())


def summarize(y_true, y_pred, *, scale=1000.0):
    """MSE and TV with their standard errors over subjects.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_subjects, n_grid)
        True and imputed curves on one grid.
    scale : float, default=1000.0
        Multiplier of all four numbers (the SAND paper's x1000).

    Returns
    -------
    dict
        Keys ``mse``, ``mse_se``, ``tv``, ``tv_se`` (all times ``scale``);
        the standard errors are NaN for a single subject.
    """
    out = {}
    for name, per in (("mse", mse_per_subject), ("tv", tv_per_subject)):
        values = scale * per(y_true, y_pred)
        out[name] = float(values.mean())
        out[name + "_se"] = (
            float(values.std(ddof=1) / np.sqrt(values.size))
            if (values.size > 1)
            else float("nan")
        )
    return out


def split_held_out(data, fraction=0.2, *, min_keep=1, random_state=None):
    """Hide a share of each subject's observations.

    Each subject with more than ``min_keep`` observations hides
    ``max(1, round(fraction * n_i))`` of them, at random, keeping at least
    ``min_keep``; subjects with ``n_i <= min_keep`` hide none. With several
    variables (a :class:`~fdaimpute.multivariate.MultivariateIrregularData`)
    each variable of a subject is split that way on its own: a subject
    keeps ``min_keep`` observations of every variable it was observed on.

    Parameters
    ----------
    data : IrregularData, MultivariateIrregularData or accepted input
        The subjects.
    fraction : float, default=0.2
        Share of each subject's points to hide, in (0, 1).
    min_keep : int, default=1
        Observations each subject keeps (of each variable).
    random_state : int, Generator or None
        Seed.

    Returns
    -------
    visible : IrregularData or MultivariateIrregularData
        All subjects with their kept observations (and their covariates).
    hidden : IrregularData or MultivariateIrregularData
        The subjects that hid something, with the hidden observations.
    rows : ndarray of int
        Positions in ``visible`` of the subjects in ``hidden``.

    Examples
    --------
    >>> from fdaimpute import IrregularData
    >>> from fdaimpute.metrics import split_held_out
    >>> data = IrregularData.from_lists([[0, 1, 2, 3, 4], [0, 1]], [[1] * 5, [2, 3]])
    >>> visible, hidden, rows = split_held_out(data, 0.4, random_state=0)
    >>> visible.n_obs.tolist(), hidden.n_obs.tolist(), rows.tolist()
    ([3, 1], [2, 1], [0, 1])
    """
    from fdaimpute.data import IrregularData
    from fdaimpute.multivariate import (
        MultivariateIrregularData,
        holds_several_variables,
    )

    several = holds_several_variables(data)
    data = _as_several(data) if several else _as_data(data)
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    rng = np.random.default_rng(random_state)
    subject = data.subject_index
    # what is split on its own: a subject, or one variable of a subject
    width = data.n_variables if several else 1
    group = subject * width + data.variable if several else subject
    counts = np.bincount(group, minlength=len(data) * width)
    n_hide = np.maximum(1, np.round(fraction * counts)).astype(np.int64)
    n_hide = np.clip(n_hide, 0, np.maximum(counts - min_keep, 0))
    order = np.lexsort((rng.random(subject.size), group))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty(subject.size, dtype=np.int64)
    rank[order] = np.arange(subject.size) - starts[group[order]]
    hide = rank < n_hide[group]

    def part(mask, rows):
        per = np.bincount(subject[mask], minlength=len(data))[rows]
        offsets = np.concatenate([[0], np.cumsum(per)])
        if not several:
            return IrregularData(
                data.times[mask], data.values[mask], offsets, data.ids[rows]
            )
        return MultivariateIrregularData(
            data.times[mask],
            data.values[mask],
            data.variable[mask],
            offsets,
            data.variables,
            data.ids[rows],
            {name: column[rows] for name, column in data.covariates.items()},
        )

    rows = np.flatnonzero(n_hide.reshape(len(data), width).sum(axis=1) > 0)
    return part(~hide, np.arange(len(data))), part(hide, rows), rows


def held_out_error(
    estimator,
    data,
    fraction=0.2,
    *,
    refit=False,
    min_keep=1,
    return_errors=False,
    random_state=None,
):
    """Mean squared error of an imputer on hidden observations.

    Hides a share of each subject's points (:func:`split_held_out`),
    imputes them from the rest and compares with the hidden noisy values.
    The noise variance is part of this error; it is the same for every
    method, so differences and ratios are meaningful.

    Two protocols, as on real data without true curves:

    - ``refit=False``: ``estimator`` is already fitted (usually on other
      subjects) and predicts each subject's hidden points from its
      visible ones;
    - ``refit=True``: a clone of ``estimator`` is fitted on the visible
      points of every subject of ``data`` and predicts the hidden points of
      those same subjects (the SAND paper's protocol for real data). The
      estimator passed in is left as it is.

    With several variables (a
    :class:`~fdaimpute.multivariate.MultivariateIrregularData` or a long
    table with a variable column), each variable of a subject hides its
    share, the hidden values are read off the curves of ``transform`` at
    their times, and each squared error is divided by its variable's
    variance over ``data`` (so that no variable weighs by its units): the
    error is the mean over the variables of each one's mean relative squared
    error, so that a variable weighs alike however many values it hides (as
    ``MultivariatePACEImputer`` chooses its ``K``).

    Parameters
    ----------
    estimator : imputer
        Anything with ``predict_at`` (answering one array per subject for
        per-subject query times), or with several variables an imputer that
        takes them (its ``transform`` with ``grid=``); fitted unless
        ``refit``.
    data : IrregularData, MultivariateIrregularData or accepted input
        Subjects to evaluate.
    fraction : float, default=0.2
        Share of each subject's points to hide.
    refit : bool, default=False
        Fit a clone of ``estimator`` on the visible points first.
    min_keep : int, default=1
        Observations each subject keeps visible.
    return_errors : bool, default=False
        Also return the squared error of every hidden point (for
        :func:`fdaimpute.plotting.plot_comparison` or standard errors).
    random_state : int, Generator or None
        Seed of the hiding.

    Returns
    -------
    error : float
    errors : ndarray of shape (n_hidden,)
        Only with ``return_errors``; in the order of the hidden points,
        subject by subject (relative to the variable's variance with several
        variables).

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.sand_paper(n=200, n_obs="8-12", random_state=0)
    >>> error = fi.metrics.held_out_error(
    ...     fi.KernelImputer(), sim.train.data, refit=True, random_state=0)
    >>> bool(error > 0)
    True
    """
    from fdaimpute.multivariate import holds_several_variables

    several = holds_several_variables(data)
    if several:
        data = _as_several(data)
    visible, hidden, rows = split_held_out(
        data, fraction, min_keep=min_keep, random_state=random_state
    )
    if len(hidden) == 0:
        raise ValueError("no subject has enough observations to hide any")
    if refit:
        from sklearn.base import clone

        estimator = clone(estimator).fit(visible)
    if several:
        pred = _several_predictions(estimator, visible.take(rows), hidden)
        errors = (pred - hidden.values) ** 2 / _variances(data)[hidden.variable]
        error = _mean_over_variables(errors, hidden.variable, hidden.n_variables)
    else:
        times = np.split(hidden.times, hidden.offsets[1:-1])
        answer = estimator.predict_at(visible[rows], times)
        pred = np.concatenate(answer) if len(answer) else np.empty(0)
        if pred.shape != hidden.values.shape:
            raise ValueError(
                f"{type(estimator).__name__}.predict_at returned {pred.size} "
                f"values for {hidden.values.size} hidden observations"
            )
        errors = (pred - hidden.values) ** 2
        error = float(np.mean(errors))
    return (error, errors) if return_errors else error


#: Subjects whose hidden values are predicted from one transform (several variables).
PREDICTION_CHUNK = 256


def _several_predictions(estimator, visible, hidden):
    """Each hidden value's prediction from its subject's visible values.

    ``visible`` and ``hidden`` hold the same subjects, in the same order, of
    several variables. The estimator's curves are read at the hidden times,
    a chunk of subjects at a time, each variable's in its own block
    (matched by name to the fitted ``variables_``).
    """
    fitted = [str(v) for v in getattr(estimator, "variables_", hidden.variables)]
    missing = [str(v) for v in hidden.variables if str(v) not in fitted]
    if missing:
        raise ValueError(
            f"variable(s) {missing} were not seen in fit; the fitted variables "
            f"are {fitted}"
        )
    block = np.array([fitted.index(str(v)) for v in hidden.variables])
    block = block[hidden.variable]
    pred = np.empty(hidden.values.size)
    for start in range(0, len(hidden), PREDICTION_CHUNK):
        stop = min(start + PREDICTION_CHUNK, len(hidden))
        lo, hi = hidden.offsets[start], hidden.offsets[stop]
        grid, at = np.unique(hidden.times[lo:hi], return_inverse=True)
        curves = estimator.transform(visible.take(np.arange(start, stop)), grid=grid)
        curves = np.asarray(curves, dtype=np.float64)
        curves = curves.reshape(stop - start, len(fitted), grid.size)
        who = hidden.subject_index[lo:hi] - start
        pred[lo:hi] = curves[who, block[lo:hi], at]
    return pred


def _mean_over_variables(errors, variable, n_variables):
    """The mean over variables of each variable's mean error (those with any)."""
    count = np.bincount(variable, minlength=n_variables)
    total = np.bincount(variable, errors, minlength=n_variables)
    return float(np.mean(total[count > 0] / count[count > 0]))


def _variances(data):
    """Each variable's variance over all its observed values (1 where constant)."""
    total = np.maximum(np.bincount(data.variable, minlength=data.n_variables), 1)
    mean = np.bincount(data.variable, data.values, data.n_variables) / total
    spread = data.values - mean[data.variable]
    var = np.bincount(data.variable, spread**2, data.n_variables) / total
    return np.where(var > 0, var, 1.0)


class _HeldOutScorer:
    """Minus :func:`held_out_error` of a fitted imputer on the scored fold."""

    def __init__(self, fraction, random_state):
        self.fraction = fraction
        self.random_state = random_state

    def __call__(self, estimator, X, y=None):
        return -held_out_error(
            estimator, X, self.fraction, random_state=self.random_state
        )

    def __repr__(self):
        return (
            f"held_out_scorer(fraction={self.fraction!r}, "
            f"random_state={self.random_state!r})"
        )


class _CurveScorer:
    """Minus :func:`mse` of ``estimator.transform(X)`` against true curves ``y``."""

    def __init__(self, scale):
        self.scale = scale

    def __call__(self, estimator, X, y):
        if y is None:
            raise ValueError(
                "curve_scorer needs the true curves: pass them as y, e.g. "
                "GridSearchCV(...).fit(X, truth)"
            )
        return -mse(y, estimator.transform(X), scale=self.scale)

    def __repr__(self):
        return f"curve_scorer(scale={self.scale!r})"


def held_out_scorer(fraction=0.2, random_state=0):
    """A scikit-learn scorer: minus :func:`held_out_error` on the scored fold.

    Use it to tune an imputer without true curves. Like :func:`curve_scorer`
    it is a factory: call it, and pass the result as ``scoring``.

    Parameters
    ----------
    fraction : float, default=0.2
        Share of each scored subject's points to hide.
    random_state : int, Generator or None, default=0
        Seed of the hiding; an int hides the same points for every
        candidate, so their scores are paired.

    Returns
    -------
    callable
        ``scorer(estimator, X, y=None)``, greater is better.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> from sklearn.model_selection import GridSearchCV
    >>> sim = fi.simulate.sand_paper(n=100, n_obs=30, random_state=0)
    >>> search = GridSearchCV(fi.KernelImputer(), {"bandwidth": [0.03, 0.3]},
    ...                       scoring=fi.metrics.held_out_scorer(), cv=2)
    >>> search.fit(sim.train.data).best_params_
    {'bandwidth': 0.03}
    """
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    return _HeldOutScorer(fraction, random_state)


def curve_scorer(*args, scale=1.0):
    """A scikit-learn scorer: minus the MSE of ``transform(X)`` against curves ``y``.

    For simulations, where the true curves on the imputer's grid are known:
    fit the search with them as targets,
    ``GridSearchCV(imputer, params, scoring=curve_scorer()).fit(X, truth)``.

    Parameters
    ----------
    scale : float, default=1.0
        Multiplier of the MSE (``1000`` for the SAND paper's units).

    Returns
    -------
    callable
        ``scorer(estimator, X, y)``: ``-mse(y, estimator.transform(X))``,
        greater is better.

    Notes
    -----
    Calling ``curve_scorer(estimator, X, y)`` directly, as a scorer, is
    deprecated: it still returns the score but warns; use
    ``curve_scorer()(estimator, X, y)``.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.sand_paper(n=100, n_obs="8-12", random_state=0)
    >>> imp = fi.KernelImputer(grid=sim.grid).fit(sim.train.data)
    >>> score = fi.metrics.curve_scorer()(imp, sim.test.data, sim.test.truth)
    >>> score == -fi.metrics.mse(sim.test.truth, imp.transform(sim.test.data))
    True
    """
    if len(args) == 3:
        warnings.warn(
            "calling curve_scorer(estimator, X, y) directly is deprecated; "
            "curve_scorer is a factory like held_out_scorer: use "
            "scoring=curve_scorer() or curve_scorer()(estimator, X, y)",
            FutureWarning,
            stacklevel=2,
        )
        return _CurveScorer(scale)(*args)
    if args:
        raise TypeError(
            "curve_scorer takes only the keyword scale (e.g. curve_scorer(scale=1000)),"
            f" got {len(args)} positional argument(s)"
        )
    return _CurveScorer(scale)


def _as_several(data):
    """Several variables as a MultivariateIrregularData (from a long table)."""
    from fdaimpute.multivariate import MultivariateIrregularData

    if isinstance(data, MultivariateIrregularData):
        return data
    return MultivariateIrregularData.from_long(data)


def _as_data(data):
    out = as_irregular(data)
    if out is None:
        from fdaimpute.data import IrregularData

        out = IrregularData.from_dense(np.asarray(data, dtype=np.float64))
    return out
