"""Turning the accepted input types into :class:`IrregularData`; grid checks."""

from __future__ import annotations

import numbers

import numpy as np

from fdaimpute._core.coerce import check_not_datetime, is_datetime_like
from fdaimpute._core.ids import subject_label
from fdaimpute._core.plausible import (
    OBSERVATION_SLACK,
    allow_observations_near_range,
)
from fdaimpute.data import IrregularData

LONG_COLUMNS = ("id", "time", "value")
#: The public imputers that take several variables, named where others refuse them.
SEVERAL_VARIABLE_IMPUTERS = (
    "MultivariatePACEImputer",
    "KernelImputer",
    "MICEImputer",
    "VTImputer",
    "SANDImputer",
)


def is_long_frame(X, columns=LONG_COLUMNS):
    """Whether ``X`` is a DataFrame with every one of ``columns`` (by
    default id, time, value: a long table of one variable)."""
    return hasattr(X, "columns") and all(c in list(X.columns) for c in columns)


def is_variables_frame(X, id="id", time="time", variable="variable", value="value"):
    """Whether ``X`` is a long table of several variables: a DataFrame with
    the given id, time, variable and value columns (see
    :meth:`MultivariateIrregularData.from_long
    <fdaimpute.multivariate.MultivariateIrregularData.from_long>`)."""
    return is_long_frame(X, (id, time, variable, value))


def _is_pair_sequence(X):
    """Whether ``X`` is a sequence of ``(t_i, y_i)`` pairs of arrays."""
    if isinstance(X, np.ndarray) or not isinstance(X, (list, tuple)) or len(X) == 0:
        return False
    first = X[0]
    if not isinstance(first, (tuple, list)) or len(first) != 2:
        return False
    return all(np.ndim(part) >= 1 for part in first)


def as_irregular(X, who=None):
    """Convert an irregular input (not a dense matrix) to IrregularData.

    Returns ``None`` when ``X`` is dense (a 2-D array-like), which the caller
    validates with scikit-learn's machinery. ``who`` (the imputer's class
    name) is named in the refusal of several variables.
    """
    if isinstance(X, IrregularData):
        return X
    _refuse_multivariate(X, who)
    if is_long_frame(X):
        return IrregularData.from_long(X, *LONG_COLUMNS)
    refuse_columns_frame(X)
    _refuse_unnamed_long_frame(X)
    if _is_pair_sequence(X):
        for i, pair in enumerate(X):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(
                    f"subject at position {i}: expected a (times, values) pair, "
                    f"got {type(pair).__name__}"
                )
        return IrregularData.from_lists([p[0] for p in X], [p[1] for p in X])
    return None


def several_variables_refusal(who=None):
    """The message of an imputer of one variable given several."""
    who = "this imputer" if who is None else who
    names = ", ".join(SEVERAL_VARIABLE_IMPUTERS)
    return (
        "X holds several variables (a MultivariateIrregularData, or a long "
        f"table with a 'variable' column); {who} models one variable. The "
        f"imputers that take several variables are {names}; or pass one "
        "variable (MultivariateIrregularData.variable_data)"
    )


def _refuse_multivariate(X, who=None):
    """Raise for several variables, which univariate imputers would mix up."""
    from fdaimpute.multivariate import MultivariateIrregularData

    if isinstance(X, MultivariateIrregularData) or is_variables_frame(X):
        raise TypeError(several_variables_refusal(who))


def _is_label_column(column):
    """Whether a column holds labels (integers, text or categories)."""
    dtype = column.dtype
    return getattr(dtype, "kind", "O") in "iuOSU" or str(dtype) == "category"


def _is_text_column(column):
    dtype = column.dtype
    return getattr(dtype, "kind", "O") in "OSU" or str(dtype) == "category"


def _looks_long(X, n_columns):
    """Whether ``X`` looks like a long table of ``n_columns`` columns with
    other names: string column labels, no missing cell (a wide matrix to
    impute has some) and a first column of labels (integers, text or
    categories) that repeat."""
    columns = getattr(X, "columns", None)
    if columns is None or not hasattr(X, "iloc") or len(columns) != n_columns:
        return False
    if not all(isinstance(c, str) for c in columns) or len(X) < 2:
        return False
    first = X.iloc[:, 0]
    if not _is_label_column(first):
        return False
    return not X.isna().to_numpy().any() and first.nunique() < len(X)


def _long_start(X):
    first = repr(str(X.columns[0]))
    return (
        "X looks like a long table (one row per observation, repeated values in "
        f"column {first}) rather than a matrix with one row per subject"
    )


def _refuse_unnamed_long_frame(X):
    """Raise when a DataFrame looks like a long table with other column names.

    Such a frame would otherwise be read as a wide matrix (one row per
    observation). It is recognised by three columns (see ``_looks_long``),
    or four of which one of the last three holds text (see
    :func:`refuse_unnamed_variables_frame`).
    """
    refuse_unnamed_variables_frame(X)
    if not _looks_long(X, 3):
        return
    i, t, v = (repr(str(c)) for c in X.columns)
    raise ValueError(
        f"{_long_start(X)}; read it with IrregularData.from_long(df, id={i}, "
        f"time={t}, value={v}) or name the columns 'id', 'time' and 'value'. If "
        "it really is a complete wide matrix, pass X.to_numpy()"
    )


def refuse_unnamed_variables_frame(X):
    """Raise when a DataFrame looks like a long table of several variables
    under other column names.

    Four columns (see ``_looks_long``), one of the last three holding text:
    the variable; the other two are taken as the time and the value, in
    their order. The error gives the call of
    :meth:`MultivariateIrregularData.from_long
    <fdaimpute.multivariate.MultivariateIrregularData.from_long>` that reads
    it.
    """
    if not _looks_long(X, 4):
        return
    text = [k for k in (1, 2, 3) if _is_text_column(X.iloc[:, k])]
    if len(text) != 1:
        return
    names = [repr(str(c)) for c in X.columns]
    variable = names[text[0]]
    t, v = (names[k] for k in (1, 2, 3) if k != text[0])
    raise ValueError(
        f"{_long_start(X)}, of several variables (column {variable}); read it "
        f"with MultivariateIrregularData.from_long(df, id={names[0]}, time={t}, "
        f"variable={variable}, value={v}) or name the columns 'id', 'time', "
        "'variable' and 'value'. The imputers that take several variables are "
        f"{', '.join(SEVERAL_VARIABLE_IMPUTERS)}"
    )


def refuse_columns_frame(X, id="id", time="time", covariates=(), several=False):
    """Raise when a DataFrame has an id and a time column but no value column.

    Such a frame is a long table whose values are in columns of other names
    (one per variable, ``NaN`` where not measured); read as a wide matrix its
    rows would be observations and its ids and times values. The error
    gives the call that reads it: ``IrregularData.from_long`` for one such
    column, unless ``several`` (the caller takes several variables), else
    ``MultivariateIrregularData.from_columns``. ``covariates`` are columns
    that are not variables.
    """
    columns = list(getattr(X, "columns", ()))
    if not hasattr(X, "iloc") or id not in columns or time not in columns:
        return
    rest = [str(c) for c in columns if c not in (id, time, *covariates)]
    if not rest:
        return
    start = (
        f"X is a DataFrame with columns {id!r} and {time!r}: a long table, one "
        "row per observation, rather than a matrix with one row per subject"
    )
    if len(rest) == 1 and not several:
        raise ValueError(
            f"{start}; read it with IrregularData.from_long(df, id={id!r}, "
            f"time={time!r}, value={rest[0]!r}) or name its value column 'value'"
        )
    raise ValueError(
        f"{start}, with one column per variable ({', '.join(map(repr, rest))}); "
        f"read it with MultivariateIrregularData.from_columns(df, {rest!r}, "
        f"id={id!r}, time={time!r}) (leaving out of the list any column that is "
        "not a variable, and naming the subject covariates' columns in "
        "covariates=[...]). The imputers that take "
        f"several variables are {', '.join(SEVERAL_VARIABLE_IMPUTERS)}"
    )


def frame_axes(X):
    """Column times and subject ids carried by a wide DataFrame's labels.

    Returns ``(times, ids)``, each ``None`` when absent: a default
    ``RangeIndex`` (``0 .. p - 1`` columns, ``0 .. n - 1`` rows) and
    non-numeric column labels carry nothing. Numeric column labels are the
    column times; they must be strictly increasing. Date or duration labels
    raise a TypeError.
    """
    columns = getattr(X, "columns", None)
    index = getattr(X, "index", None)
    if columns is None or index is None:
        return None, None
    times = ids = None
    if not _is_default_range(columns):
        if is_datetime_like(columns):
            check_not_datetime(columns, "the column labels (times)")
        labels = np.asarray(columns)
        if labels.dtype.kind in "iuf":
            times = labels.astype(np.float64)
            if not np.all(np.isfinite(times)) or np.any(np.diff(times) <= 0):
                raise ValueError(
                    "the DataFrame's numeric column labels are read as the column "
                    "times and must be finite and strictly increasing; sort the "
                    "columns (df.sort_index(axis=1)) or pass X.to_numpy()"
                )
    if not _is_default_range(index):
        ids = np.asarray(index)
    return times, ids


def _is_default_range(index):
    """Whether ``index`` is pandas' default ``RangeIndex`` 0, 1, 2, ..."""
    start, step = getattr(index, "start", None), getattr(index, "step", None)
    return type(index).__name__ == "RangeIndex" and start == 0 and step == 1


def check_grid(grid, name="grid"):
    """Validate an explicit time grid: 1-D, finite, strictly increasing, >= 2."""
    check_not_datetime(grid, name)
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
    if np.ndim(grid) == 0 and not isinstance(grid, IrregularData):
        grid = _grid_size(grid)
    if isinstance(grid, numbers.Integral):
        if grid < 2:
            raise ValueError(f"grid must have at least 2 points, got {grid}")
        check_spread_over_time(time_range, "give an explicit grid")
        lo, hi = time_range
        return np.linspace(lo, hi, int(grid))
    return check_grid(grid)


def check_spread_over_time(time_range, remedy):
    """Raise a ValueError when all training observations are at one time.

    Parameters
    ----------
    time_range : tuple of float
        The training times' ``(min, max)``.
    remedy : str
        What the message adds: why one time is not enough, or what to do.
    """
    lo, hi = time_range
    if hi <= lo:
        raise ValueError(f"all training observations are at one time; {remedy}")


def _grid_size(grid):
    """An int (or int-valued float) grid size; other scalars raise."""
    ok = isinstance(grid, numbers.Real) and not isinstance(grid, (bool, np.bool_))
    if ok and isinstance(grid, numbers.Integral):
        return int(grid)
    if ok and np.isfinite(grid) and float(grid).is_integer():
        return int(grid)
    raise TypeError(f"grid must be an int or an array of times, got {grid!r}")


def check_extrapolate(value):
    """Validate the ``extrapolate`` parameter: False, True or ``"clip"``."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str) and value == "clip":
        return "clip"
    raise ValueError(f"extrapolate must be False, True or 'clip', got {value!r}")


def rounding_slack(time_range):
    """Rounding tolerance at the ends of ``time_range``, in the unit of time."""
    lo, hi = time_range
    scale = max(hi - lo, abs(lo), abs(hi))
    return 1e-9 * scale if scale > 0 else 1e-300


def first_outside(times, time_range):
    """Position of the first of ``times`` outside ``time_range``, or None.

    Times within :func:`rounding_slack` of the range count as inside.
    """
    lo, hi = time_range
    slack = rounding_slack(time_range)
    outside = np.flatnonzero((times < lo - slack) | (times > hi + slack))
    return int(outside[0]) if outside.size else None


def check_in_range(data, time_range, *, extrapolate):
    """Raise if an observation time lies far outside the fitted time range.

    With ``extrapolate`` True or ``"clip"`` such observations are allowed and
    used at their own times. Without, observations up to a tenth of the
    range beyond it are used too, with a warning that says how far
    (:func:`fdaimpute._core.plausible.allow_observations_near_range`).
    """
    if extrapolate or len(data) == 0:
        return
    if allow_observations_near_range(data, time_range, rounding_slack(time_range)):
        return
    lo, hi = time_range
    slack = OBSERVATION_SLACK * (hi - lo)
    j = first_outside(data.times, (lo - slack, hi + slack))
    if j is not None:
        i = int(data.subject_index[j])
        raise ValueError(
            f"{subject_label(data.ids, i)} is observed at time "
            f"{data.times[j]:g}, outside the training range [{lo:g}, {hi:g}] "
            "by more than a tenth of its length; pass extrapolate=True (or "
            "extrapolate='clip') to allow it"
        )


def range_slack(times, time_range):
    """How far requested ``times`` may lie outside ``time_range`` without error.

    Half of the requested times' spacing at each end (so that a rounded grid
    such as ``np.arange(20, 61)`` covers data seen from 20.08 to 59.98), at
    most 5% of the training range; a single time gets a tiny relative slack.

    Returns
    -------
    below, above : float
    """
    lo, hi = time_range
    tiny = rounding_slack(time_range)
    distinct = np.unique(times)
    if distinct.size < 2:
        return tiny, tiny
    cap = 0.05 * (hi - lo)
    below = min(0.5 * (distinct[1] - distinct[0]), cap)
    above = min(0.5 * (distinct[-1] - distinct[-2]), cap)
    return max(below, tiny), max(above, tiny)


def check_times_in_range(times, time_range, extrapolate):
    """Raise if query ``times`` leave the training range and extrapolation is off.

    Times within :func:`range_slack` of the range are accepted.
    """
    if extrapolate:
        return
    lo, hi = time_range
    below, above = range_slack(times, time_range)
    if times.min() < lo - below or times.max() > hi + above:
        raise ValueError(
            f"requested times span [{times.min():g}, {times.max():g}] but the "
            f"training times span [{lo:g}, {hi:g}]; pass extrapolate=True to "
            "impute outside the observed range, or extrapolate='clip' to hold "
            "each curve constant beyond it"
        )


#: Largest magnitude of a time or a value the imputers accept: the
#: smoothers' squares and products of such numbers stay far inside double
#: precision (about 1.8e308).
MAX_MAGNITUDE = 1e100


def check_magnitudes(data):
    """Raise a ValueError when times or values are too large to compute with.

    Parameters
    ----------
    data : IrregularData
        Subjects to fit or impute.
    """
    for name, array in (("times", data.times), ("values", data.values)):
        if array.size == 0:
            continue
        top = float(np.max(np.abs(array)))
        if top > MAX_MAGNITUDE:
            exponent = int(np.floor(np.log10(top)))
            raise ValueError(
                f"{name} reach {top:.3g}: beyond {MAX_MAGNITUDE:.0e} in magnitude "
                "their squares and products overflow double precision; express "
                f"them in other units first (e.g. {name} / 1e{exponent})"
            )
        spread = float(np.max(array) - np.min(array))
        if 0 < spread < 1 / MAX_MAGNITUDE:
            exponent = -int(np.floor(np.log10(spread)))
            raise ValueError(
                f"{name} span only {spread:.3g}: below {1 / MAX_MAGNITUDE:.0e} "
                "their squares underflow to zero in double precision; express "
                f"them in other units first (e.g. {name} * 1e{exponent})"
            )
