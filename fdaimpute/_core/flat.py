"""IrregularData's flat storage: its checks, and lists or matrices to and from it.

Subject ``i`` owns ``times[offsets[i]:offsets[i + 1]]`` and the same slice of
``values``. The builders here return the arguments of
``IrregularData(times, values, offsets, ids)``, which checks them again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fdaimpute._core.coerce import as_float_1d, check_not_datetime
from fdaimpute._core.ids import check_ids, subject_label


def check_storage(times, values, offsets, ids):
    """Validate the constructor's arrays; return them as float/int64 arrays.

    Returns ``(times, values, offsets, ids)``; ``ids`` defaults to
    ``0 .. n_subjects - 1``. Every subject needs an observation, and every
    time and value must be finite.
    """
    check_not_datetime(times, "times")
    times = np.asarray(times, dtype=np.float64).ravel()
    values = np.asarray(values)
    offsets = np.asarray(offsets)
    if offsets.ndim != 1 or offsets.size < 1:
        raise ValueError("offsets must be a 1-D array of length n_subjects + 1")
    if offsets.dtype.kind not in "iu":
        raise TypeError(f"offsets must be integers, got dtype {offsets.dtype}")
    offsets = offsets.astype(np.int64)
    n = offsets.size - 1
    ids = np.arange(n) if ids is None else check_ids(ids, n)
    if offsets[0] != 0 or np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must start at 0 and be non-decreasing")
    if offsets[-1] != times.size:
        raise ValueError(
            f"offsets end at {offsets[-1]} but there are {times.size} times"
        )
    if values.ndim != 1:
        raise ValueError(f"values must be 1-D, got shape {values.shape}")
    if values.dtype.kind not in "biuf":
        raise TypeError(f"values must be numeric, got dtype {values.dtype}")
    values = values.astype(np.float64)
    if values.size != times.size:
        raise ValueError(
            f"times and values differ in length: {times.size} != {values.size}"
        )
    counts = np.diff(offsets)
    if np.any(counts == 0):
        i = int(np.flatnonzero(counts == 0)[0])
        raise ValueError(f"{subject_label(ids, i)} has no observations")
    for arr, what in ((times, "time"), (values, "value")):
        if not np.isfinite(arr).all():
            j = int(np.flatnonzero(~np.isfinite(arr))[0])
            i = int(np.searchsorted(offsets, j, side="right")) - 1
            raise ValueError(
                f"{subject_label(ids, i)} has a non-finite {what} "
                f"({arr[j]}) at observation {j - offsets[i]}"
            )
    return times, values, offsets, ids


def sort_within_subjects(times, values, offsets, ids, duplicates):
    """Sort each subject's observations by time; handle repeated times.

    ``duplicates="raise"`` refuses two observations of a subject at one
    time; ``"average"`` replaces them by their mean. Returns
    ``(times, values, offsets)``, the inputs themselves when already sorted.
    """
    n = offsets.size - 1
    if times.size < 2:
        return times, values, offsets
    # a time not after the one before it, within a subject: the pairs
    # across subjects end at the inner offsets
    unsorted = np.diff(times) <= 0
    cuts = offsets[1:-1]
    unsorted[cuts[(cuts > 0) & (cuts < times.size)] - 1] = False
    if not unsorted.any():
        return times, values, offsets
    subject = np.repeat(np.arange(n), np.diff(offsets))
    order = np.lexsort((times, subject))
    times, values = times[order], values[order]
    same = (np.diff(times) == 0) & (subject[1:] == subject[:-1])
    if not same.any():
        return times, values, offsets
    if duplicates == "raise":
        j = int(np.flatnonzero(same)[0])
        i = int(subject[j])
        raise ValueError(
            f"{subject_label(ids, i)} has two observations at time "
            f"{times[j]}; pass duplicates='average' to average them"
        )
    starts = np.concatenate([[True], ~same])
    group = np.cumsum(starts) - 1
    sums = np.bincount(group, weights=values)
    values = sums / np.bincount(group)
    times = times[starts]
    subject = subject[starts]
    offsets = np.searchsorted(subject, np.arange(n + 1))
    return times, values, offsets


def _as_subject_sequence(x, name):
    """A 2-D numeric array as a list of rows; refuse what is not a sequence."""
    if isinstance(x, np.ndarray) and x.ndim == 2 and x.dtype != object:
        x = list(x)
    if not isinstance(x, Sequence) and not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a sequence of arrays, got {type(x)}")
    return x


def flat_from_lists(times, values, ids=None):
    """Storage from one array of times and one of values per subject.

    Returns ``(times, values, offsets, ids)``; see
    :meth:`IrregularData.from_lists <fdaimpute.IrregularData.from_lists>`.
    """
    times = _as_subject_sequence(times, "times")
    values = _as_subject_sequence(values, "values")
    if len(times) != len(values):
        raise ValueError(
            f"times has {len(times)} subjects but values has {len(values)}"
        )
    n = len(times)
    if ids is not None:
        ids = check_ids(ids, n)
    t_list, y_list = [], []
    for i in range(n):
        label = subject_label(ids, i)
        t = as_float_1d(times[i], "times", label)
        y = as_float_1d(values[i], "values", label)
        if t.size != y.size:
            raise ValueError(f"{label} has {t.size} times but {y.size} values")
        if t.size == 0:
            raise ValueError(f"{label} has no observations")
        t_list.append(t)
        y_list.append(y)
    counts = np.array([t.size for t in t_list], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    cat_t = np.concatenate(t_list) if n else np.empty(0)
    cat_y = np.concatenate(y_list) if n else np.empty(0)
    return cat_t, cat_y, offsets, ids


def flat_from_dense(X, grid=None, ids=None):
    """Storage from a matrix with one row per subject and NaN where unobserved.

    Returns ``(times, values, offsets, ids)``; see
    :meth:`IrregularData.from_dense <fdaimpute.IrregularData.from_dense>`.
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (subjects x times), got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        try:
            X = X.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"X must be numeric, got dtype {X.dtype}") from None
    X = X.astype(np.float64)
    if grid is None:
        grid = np.linspace(0.0, 1.0, X.shape[1]) if X.shape[1] > 1 else np.zeros(1)
    check_not_datetime(grid, "the column times (grid)")
    grid = np.asarray(grid, dtype=np.float64)
    if grid.shape != (X.shape[1],):
        raise ValueError(
            f"grid must have one time per column: expected {X.shape[1]}, "
            f"got shape {grid.shape}"
        )
    if np.isinf(X).any():
        i, j = np.argwhere(np.isinf(X))[0]
        raise ValueError(
            f"{subject_label(ids, int(i))} has an infinite value in column {j}"
        )
    observed = ~np.isnan(X)
    rows, cols = np.nonzero(observed)
    counts = observed.sum(axis=1)
    if ids is not None:
        ids = check_ids(ids, X.shape[0])
    if np.any(counts == 0):
        i = int(np.flatnonzero(counts == 0)[0])
        raise ValueError(f"{subject_label(ids, i)} has no observations (all NaN)")
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return grid[cols], X[rows, cols], offsets, ids


def dense_from_flat(data, grid=None):
    """A matrix with one row per subject of ``data``, NaN where unobserved.

    Returns ``(X, grid)``; see
    :meth:`IrregularData.to_dense <fdaimpute.IrregularData.to_dense>`.
    """
    if grid is None:
        grid = np.unique(data.times)
    grid = np.asarray(grid, dtype=np.float64)
    col = np.searchsorted(grid, data.times)
    col = np.clip(col, 0, grid.size - 1)
    off = grid[col] != data.times
    if off.any():
        j = int(np.flatnonzero(off)[0])
        i = int(data.subject_index[j])
        raise ValueError(
            f"{subject_label(data.ids, i)} is observed at time "
            f"{data.times[j]}, which is not on the grid"
        )
    X = np.full((len(data), grid.size), np.nan)
    X[data.subject_index, col] = data.values
    return X, grid
