"""Accuracy of imputed curves: grid errors, held-out points, scorers.

Grid metrics follow the SAND paper: for predicted and true curves on a
common grid, ``MSE = mean (X_hat - X)^2`` and ``TV = mean over subjects of
mean_m |e(s_{m+1}) - e(s_m)|`` with ``e = X_hat - X`` (the roughness of the
error). The paper reports both multiplied by 1000: pass ``scale=1000``.
"""

from __future__ import annotations

import numpy as np

from fdaimpute._validation import as_irregular

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


def _pair(pred, truth):
    pred = np.asarray(pred, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if pred.shape != truth.shape or pred.ndim != 2:
        raise ValueError(
            f"pred and truth must be 2-D arrays of one shape, got {pred.shape} "
            f"and {truth.shape}"
        )
    return pred, truth


def mse_per_subject(pred, truth):
    """Mean squared error of each row, shape (n_subjects,)."""
    pred, truth = _pair(pred, truth)
    return np.mean((pred - truth) ** 2, axis=1)


def tv_per_subject(pred, truth):
    """Mean absolute increment of each row's error, shape (n_subjects,)."""
    pred, truth = _pair(pred, truth)
    return np.mean(np.abs(np.diff(pred - truth, axis=1)), axis=1)


def mse(pred, truth, *, scale=1.0):
    """Mean squared error over subjects and grid points.

    Parameters
    ----------
    pred, truth : array-like of shape (n_subjects, n_grid)
        Imputed and true curves on one grid.
    scale : float, default=1.0
        Multiplier; the SAND paper reports ``scale=1000``.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from fdaimpute.metrics import mse
    >>> mse(np.zeros((2, 3)), np.ones((2, 3)), scale=1000)
    1000.0
    """
    return float(scale * mse_per_subject(pred, truth).mean())


def tv(pred, truth, *, scale=1.0):
    """Total variation of the error (SAND paper's TV), averaged over subjects.

    Examples
    --------
    >>> import numpy as np
    >>> from fdaimpute.metrics import tv
    >>> tv(np.array([[0.0, 1.0, 0.0]]), np.zeros((1, 3)))
    1.0
    """
    return float(scale * tv_per_subject(pred, truth).mean())


def summarize(pred, truth, *, scale=1000.0):
    """MSE and TV with their standard errors over subjects.

    Returns
    -------
    dict
        Keys ``mse``, ``mse_se``, ``tv``, ``tv_se`` (all times ``scale``).
    """
    out = {}
    for name, per in (("mse", mse_per_subject), ("tv", tv_per_subject)):
        values = scale * per(pred, truth)
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
    ``min_keep``; subjects with ``n_i <= min_keep`` hide none.

    Parameters
    ----------
    data : IrregularData or accepted input
        The subjects.
    fraction : float, default=0.2
        Share of each subject's points to hide, in (0, 1).
    min_keep : int, default=1
        Observations each subject keeps.
    random_state : int, Generator or None
        Seed.

    Returns
    -------
    visible : IrregularData
        All subjects with their kept observations.
    hidden : IrregularData
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

    data = _as_data(data)
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    rng = np.random.default_rng(random_state)
    counts = data.n_obs
    n_hide = np.maximum(1, np.round(fraction * counts)).astype(np.int64)
    n_hide = np.clip(n_hide, 0, np.maximum(counts - min_keep, 0))
    subject = data.subject_index
    order = np.lexsort((rng.random(subject.size), subject))
    rank = np.empty(subject.size, dtype=np.int64)
    rank[order] = np.arange(subject.size) - np.repeat(data.offsets[:-1], counts)
    hide = rank < n_hide[subject]

    def part(mask, rows):
        sub = subject[mask]
        per = np.bincount(sub, minlength=len(data))[rows]
        return IrregularData(
            data.times[mask],
            data.values[mask],
            np.concatenate([[0], np.cumsum(per)]),
            data.ids[rows],
        )

    rows = np.flatnonzero(n_hide > 0)
    return part(~hide, np.arange(len(data))), part(hide, rows), rows


def held_out_error(estimator, data, fraction=0.2, *, random_state=None):
    """Mean squared error of a fitted imputer on hidden observations.

    Hides a share of each subject's points (:func:`split_held_out`),
    imputes from the rest and compares with the hidden noisy values. The
    noise variance is part of this error; it is the same for every method,
    so differences and ratios are meaningful.

    Parameters
    ----------
    estimator : fitted imputer
        Anything with ``predict_at``.
    data : IrregularData or accepted input
        Subjects to evaluate (usually not used in fitting).
    fraction : float, default=0.2
        Share of each subject's points to hide.
    random_state : int, Generator or None
        Seed of the hiding.

    Returns
    -------
    float
    """
    visible, hidden, rows = split_held_out(data, fraction, random_state=random_state)
    if len(hidden) == 0:
        raise ValueError("no subject has enough observations to hide any")
    times = np.split(hidden.times, hidden.offsets[1:-1])
    pred = estimator.predict_at(visible[rows], times)
    return float(np.mean((np.concatenate(pred) - hidden.values) ** 2))


def held_out_scorer(fraction=0.2, random_state=0):
    """A scikit-learn scorer: minus :func:`held_out_error` on the scored fold.

    Use it to tune an imputer without true curves, e.g.
    ``GridSearchCV(KernelImputer(), {"bandwidth": [...]},
    scoring=held_out_scorer())``.
    """

    def scorer(estimator, X, y=None):
        return -held_out_error(estimator, X, fraction, random_state=random_state)

    return scorer


def curve_scorer(estimator, X, y):
    """A scikit-learn scorer: minus the MSE of ``transform(X)`` against curves ``y``.

    For simulations, where the true curves on the imputer's grid are known.
    """
    return -mse(estimator.transform(X), y)


def _as_data(data):
    out = as_irregular(data)
    if out is None:
        from fdaimpute.data import IrregularData

        out = IrregularData.from_dense(np.asarray(data, dtype=np.float64))
    return out
