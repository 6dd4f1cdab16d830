"""Reading user input as numbers; dates and durations are refused with advice."""

from __future__ import annotations

import datetime

import numpy as np

_DATETIME_TYPES = (datetime.date, datetime.time, datetime.timedelta)


def is_datetime_like(x):
    """Whether ``x`` holds dates, times of day or durations rather than numbers.

    Covers numpy ``datetime64``/``timedelta64``, pandas datetime (also
    time-zone aware) and timedelta data, and object arrays or scalars of
    :class:`datetime.datetime`, :class:`pandas.Timestamp` and the like.
    """
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if kind in ("M", "m"):
        return True
    if isinstance(x, (*_DATETIME_TYPES, np.datetime64, np.timedelta64)):
        return True
    if kind is not None and kind != "O":
        return False
    try:
        arr = np.asarray(x)
    except Exception:  # ragged input: other checks report it
        return False
    if arr.dtype.kind in "mM":
        return True
    if arr.dtype != object:
        return False
    return any(
        isinstance(v, (*_DATETIME_TYPES, np.datetime64, np.timedelta64))
        for v in arr.ravel()
    )


def check_not_datetime(x, what):
    """Raise a TypeError explaining how to convert dates or durations to numbers."""
    if is_datetime_like(x):
        raise TypeError(
            f"{what}: dates and durations are not accepted as times; convert "
            "them to numbers first, e.g. (df['date'] - df['date'].min()) / "
            "pd.Timedelta(days=1) for days since the first date"
        )


def as_float_1d(x, what, label):
    """Convert one subject's times or values to a 1-D float array."""
    check_not_datetime(x, f"{label}: {what}")
    try:
        arr = np.asarray(x)
    except Exception as exc:  # ragged nested sequences and the like
        raise TypeError(
            f"{label}: {what} could not be read as an array ({exc})"
        ) from None
    if arr.dtype == object or arr.dtype.kind in "USV":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(
                f"{label}: {what} must be numeric, got dtype {arr.dtype}"
            ) from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{label}: {what} must be numeric, got dtype {arr.dtype}")
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{label}: {what} must be 1-D, got shape {arr.shape}")
    return arr.astype(np.float64, copy=False)


def first_non_numeric(arr):
    """Position of the first entry of ``arr`` that is not a number (0 if none)."""
    for j, v in enumerate(arr):
        try:
            float(v)
        except (TypeError, ValueError):
            return j
    return 0
