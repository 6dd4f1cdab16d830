"""Turning the accepted input types into :class:`IrregularData`; grid checks."""

from __future__ import annotations

import numbers

import numpy as np

from fdaimpute.data import IrregularData, subject_label

LONG_COLUMNS = ("id", "time", "value")


def is_long_frame(X):
    """Whether ``X`` is a DataFrame in long format (columns id, time, value)."""
    return hasattr(X, "columns") and all(c in list(X.columns) for c in LONG_COLUMNS)


def _is_pair_sequence(X):
    """Whether ``X`` is a sequence of ``(t_i, y_i)`` pairs of arrays."""
    if isinstance(X, np.ndarray) or not isinstance(X, (list, tuple)) or len(X) == 0:
        return False
    first = X[0]
    if not isinstance(first, (tuple, list)) or len(first) != 2:
        return False
    return all(np.ndim(part) >= 1 for part in first)


def as_irregular(X):
    """Convert an irregular input (not a dense matrix) to IrregularData.

    Returns ``None`` when ``X`` is dense (a 2-D array-like), which the caller
    validates with scikit-learn's machinery.
    """
    if isinstance(X, IrregularData):
        return X
    if is_long_frame(X):
        return IrregularData.from_long(X, *LONG_COLUMNS)
    if _is_pair_sequence(X):
        for i, pair in enumerate(X):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(
                    f"subject at position {i}: expected a (times, values) pair, "
                    f"got {type(pair).__name__}"
                )
        return IrregularData.from_lists([p[0] for p in X], [p[1] for p in X])
    return None


def check_grid(grid, name="grid"):
    """Validate an explicit time grid: 1-D, finite, strictly increasing, >= 2."""
    try:
        grid = np.asarray(grid, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of numbers") from None
    if grid.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {grid.shape}")
    if grid.size < 2:
        raise ValueError(f"{name} must have at least 2 points, got {grid.size}")
    if not np.all(np.isfinite(grid)):
        raise ValueError(f"{name} must be finite")
    if np.any(np.diff(grid) <= 0):
        raise ValueError(f"{name} must be strictly increasing")
    return grid


def resolve_grid(grid, time_range, dense_times=None):
    """The output grid implied by the ``grid`` parameter.

    ``None`` gives the dense input's column times when fitted on a matrix,
    else 101 points over ``time_range``; an int gives that many equally
    spaced points over ``time_range``; an array is used as given.
    """
    if grid is None:
        if dense_times is not None and dense_times.size >= 2:
            return dense_times
        grid = 101
    if isinstance(grid, numbers.Integral) and not isinstance(grid, bool):
        if grid < 2:
            raise ValueError(f"grid must have at least 2 points, got {grid}")
        lo, hi = time_range
        if hi <= lo:
            raise ValueError(
                "all training observations are at one time; give an explicit grid"
            )
        return np.linspace(lo, hi, int(grid))
    return check_grid(grid)


def check_positive_int(value, name, minimum=1):
    """Validate an integer parameter that must be at least ``minimum``."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_positive_number(value, name):
    """Validate a real parameter that must be finite and positive."""
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not np.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def check_in_range(data, time_range, *, extrapolate, tol=1e-9):
    """Raise if an observation time lies outside the fitted time range."""
    if extrapolate or len(data) == 0:
        return
    lo, hi = time_range
    slack = tol * max(1.0, hi - lo)
    bad = (data.times < lo - slack) | (data.times > hi + slack)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        i = int(data.subject_index[j])
        raise ValueError(
            f"{subject_label(data.ids, i)} is observed at time "
            f"{data.times[j]:g}, outside the training range [{lo:g}, {hi:g}]; "
            "pass extrapolate=True to allow it"
        )


def check_times_in_range(times, time_range, extrapolate):
    """Raise if query ``times`` leave the training range and extrapolation is off."""
    if extrapolate:
        return
    lo, hi = time_range
    slack = 1e-9 * max(1.0, hi - lo)
    if times.min() < lo - slack or times.max() > hi + slack:
        raise ValueError(
            f"requested times span [{times.min():g}, {times.max():g}] but the "
            f"training times span [{lo:g}, {hi:g}]; pass extrapolate=True to "
            "impute outside the observed range"
        )
