"""The ragged container for irregularly observed functional data."""

from __future__ import annotations

import datetime
import numbers
from collections.abc import Sequence

import numpy as np

__all__ = ["IrregularData"]


def subject_label(ids, i):
    """Human-readable name of subject ``i`` for error messages."""
    if ids is None:
        return f"subject at position {i}"
    label = ids[i]
    label = label.item() if hasattr(label, "item") else label
    return f"subject {label!r} (position {i})"


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


def _is_missing(v):
    if v is None:
        return True
    try:
        return bool(v != v)  # NaN, NaT
    except (TypeError, ValueError):  # pandas.NA has no truth value
        return True


def _missing_mask(ids):
    """Which entries of a 1-D id array are missing (NaN, NaT, None, pandas.NA)."""
    if ids.dtype.kind in "fc":
        return np.isnan(ids)
    if ids.dtype.kind in "mM":
        return np.isnat(ids)
    if ids.dtype == object:
        return np.fromiter((_is_missing(v) for v in ids), bool, count=ids.size)
    return np.zeros(ids.shape, dtype=bool)


def as_id_array(ids):
    """Subject labels as a 1-D array that keeps each label as given.

    NumPy would turn ``[1, "a"]`` into strings and a list of tuples into a
    2-D array; labels of mixed types or tuples are kept in an object array.
    """
    if isinstance(ids, np.ndarray):
        return ids
    if hasattr(ids, "to_numpy"):  # pandas Index or Series
        return ids.to_numpy()
    values = list(ids)
    kinds = {type(v) for v in values}
    if len(kinds) == 1 and not kinds & {tuple, list}:
        return np.asarray(values)
    return np.fromiter(values, dtype=object, count=len(values))


def check_ids(ids, n):
    """Validate subject ids: one per subject, none missing, all distinct."""
    ids = as_id_array(ids)
    if ids.ndim != 1 or ids.shape[0] != n:
        raise ValueError(
            f"ids must have one entry per subject: expected {n}, got shape {ids.shape}"
        )
    missing = _missing_mask(ids)
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise ValueError(
            f"subject at position {i} has a missing id ({ids[i]!r}); "
            "every subject needs a label"
        )
    try:
        uniq, counts = np.unique(ids, return_counts=True)
        repeated = uniq[counts > 1][:5].tolist()
    except TypeError:  # labels of mixed types do not sort
        seen, repeated = set(), []
        for v in ids.tolist():
            if v in seen and v not in repeated:
                repeated.append(v)
            seen.add(v)
    if repeated:
        raise ValueError(f"ids must be unique; repeated: {repeated[:5]}")
    return ids


def _as_float_1d(x, what, label):
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


class IrregularData:
    """Irregularly sampled curves: subject ``i`` observed at its own times.

    Observations are stored flat, like a CSR matrix: ``times[offsets[i]:
    offsets[i + 1]]`` and ``values[offsets[i]:offsets[i + 1]]`` belong to
    subject ``i``. Within a subject, times are sorted increasingly.

    The container behaves like a sequence of subjects: ``len(data)`` is the
    number of subjects, ``data[i]`` is the pair ``(t_i, y_i)`` and indexing
    with an integer array, slice or boolean mask returns a new
    ``IrregularData``. This makes it work unchanged with
    :func:`~sklearn.model_selection.train_test_split`, cross-validation and
    pipelines.

    Parameters
    ----------
    times : array-like of shape (n_obs,)
        Observation times of all subjects, concatenated.
    values : array-like of shape (n_obs,)
        Observed values, aligned with ``times``.
    offsets : array-like of shape (n_subjects + 1,)
        Start of each subject in ``times``; ``offsets[0] == 0`` and
        ``offsets[-1] == n_obs``.
    ids : array-like of shape (n_subjects,), default=None
        Subject labels, kept through every transformation so that output
        rows can be matched back. Defaults to ``0 .. n_subjects - 1``.
    duplicates : {"raise", "average"}, default="raise"
        What to do when a subject has two observations at the same time:
        raise an error, or replace them by their average.

    Attributes
    ----------
    times, values, offsets, ids : ndarray
        The validated storage (times sorted within each subject).

    Examples
    --------
    >>> import numpy as np
    >>> from fdaimpute import IrregularData
    >>> data = IrregularData.from_lists(
    ...     [[0.1, 0.5, 0.9], [0.2, 0.7]], [[1.0, 2.0, 1.5], [0.3, 0.1]],
    ...     ids=["a", "b"])
    >>> len(data), data.n_obs.tolist()
    (2, [3, 2])
    >>> t, y = data[1]
    >>> t.tolist(), y.tolist()
    ([0.2, 0.7], [0.3, 0.1])
    >>> data[np.array([True, False])].ids.tolist()
    ['a']
    """

    def __init__(self, times, values, offsets, ids=None, *, duplicates="raise"):
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
        subject = np.repeat(np.arange(n), counts)
        for arr, what in ((times, "time"), (values, "value")):
            bad = ~np.isfinite(arr)
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                i = int(subject[j])
                raise ValueError(
                    f"{subject_label(ids, i)} has a non-finite {what} "
                    f"({arr[j]}) at observation {j - offsets[i]}"
                )
        if duplicates not in ("raise", "average"):
            raise ValueError("duplicates must be 'raise' or 'average'")

        if times.size > 1 and np.any(
            (np.diff(times) <= 0) & (subject[1:] == subject[:-1])
        ):
            order = np.lexsort((times, subject))
            times, values = times[order], values[order]
            same = (np.diff(times) == 0) & (subject[1:] == subject[:-1])
            if same.any():
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
        self.times = times
        self.values = values
        self.offsets = offsets
        self.ids = ids

    # ------------------------------------------------------------------ #
    # constructors
    @classmethod
    def from_lists(cls, times, values, ids=None, *, duplicates="raise"):
        """Build from one sequence of times and one of values per subject.

        Parameters
        ----------
        times : sequence of array-like
            ``times[i]`` are the observation times of subject ``i``.
        values : sequence of array-like
            ``values[i]`` are the observed values, aligned with ``times[i]``.
        ids : array-like, default=None
            Subject labels.
        duplicates : {"raise", "average"}, default="raise"
            See :class:`IrregularData`.

        Returns
        -------
        IrregularData

        Examples
        --------
        >>> from fdaimpute import IrregularData
        >>> IrregularData.from_lists([[0, 1]], [[2.0, 3.0]]).n_obs.tolist()
        [2]
        """
        if isinstance(times, np.ndarray) and times.ndim == 2 and times.dtype != object:
            times = list(times)
        if (
            isinstance(values, np.ndarray)
            and values.ndim == 2
            and values.dtype != object
        ):
            values = list(values)
        if not isinstance(times, Sequence) and not isinstance(times, np.ndarray):
            raise TypeError(f"times must be a sequence of arrays, got {type(times)}")
        if not isinstance(values, Sequence) and not isinstance(values, np.ndarray):
            raise TypeError(f"values must be a sequence of arrays, got {type(values)}")
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
            t = _as_float_1d(times[i], "times", label)
            y = _as_float_1d(values[i], "values", label)
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
        return cls(cat_t, cat_y, offsets, ids, duplicates=duplicates)

    @classmethod
    def from_long(cls, df, id="id", time="time", value="value", *, duplicates="raise"):
        """Build from a long table: one row per observation.

        Subjects appear in order of first appearance in ``df``.

        Parameters
        ----------
        df : pandas.DataFrame or mapping of column name to array
            The table.
        id, time, value : str, default="id", "time", "value"
            Column names of the subject label, the time and the value.
        duplicates : {"raise", "average"}, default="raise"
            See :class:`IrregularData`.

        Returns
        -------
        IrregularData

        Examples
        --------
        >>> import pandas as pd
        >>> from fdaimpute import IrregularData
        >>> df = pd.DataFrame({"subject": ["x", "x", "y"], "age": [40, 45, 50],
        ...                    "bmi": [24.0, 25.5, 30.1]})
        >>> data = IrregularData.from_long(df, id="subject", time="age", value="bmi")
        >>> data.ids.tolist(), data.n_obs.tolist()
        (['x', 'y'], [2, 1])
        """
        columns = list(df.keys())
        for role, name in (("id", id), ("time", time), ("value", value)):
            if name not in columns:
                raise ValueError(
                    f"column {name!r} (the {role} column) is not in the table; "
                    f"columns are {columns}"
                )
        check_not_datetime(df[time], f"the times (column {time!r})")
        raw_ids = np.asarray(df[id])
        t = np.asarray(df[time])
        y = np.asarray(df[value])
        missing = _missing_mask(raw_ids)
        if missing.any():
            j = int(np.flatnonzero(missing)[0])
            raise ValueError(
                f"column {id!r} has missing subject ids (first at row {j}: "
                f"{raw_ids[j]!r})"
            )
        subject, ids = _codes_by_first_appearance(raw_ids)
        for arr, col in ((t, time), (y, value)):
            if arr.dtype.kind not in "biuf":
                try:
                    arr.astype(np.float64)
                except (TypeError, ValueError):
                    bad = _first_non_numeric(arr)
                    i = int(subject[bad])
                    raise TypeError(
                        f"{subject_label(ids, i)}: column {col!r} must be numeric, "
                        f"got {arr[bad]!r}"
                    ) from None
        t = t.astype(np.float64)
        y = y.astype(np.float64)
        order = np.argsort(subject, kind="stable")
        counts = np.bincount(subject, minlength=ids.size)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        return cls(t[order], y[order], offsets, ids, duplicates=duplicates)

    @classmethod
    def from_dense(cls, X, grid=None, ids=None):
        """Build from a matrix with one row per subject and NaN where unobserved.

        Parameters
        ----------
        X : array-like of shape (n_subjects, n_times)
            Values; ``NaN`` marks a missing observation.
        grid : array-like of shape (n_times,), default=None
            Time of each column; defaults to equal spacing on ``[0, 1]``.
        ids : array-like of shape (n_subjects,), default=None
            Subject labels.

        Returns
        -------
        IrregularData

        Examples
        --------
        >>> import numpy as np
        >>> from fdaimpute import IrregularData
        >>> X = np.array([[1.0, np.nan, 3.0], [np.nan, 2.0, np.nan]])
        >>> IrregularData.from_dense(X).times.tolist()
        [0.0, 1.0, 0.5]
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
        return cls(grid[cols], X[rows, cols], offsets, ids)

    @classmethod
    def read_csv(cls, path, id="id", time="time", value="value", **kwargs):
        """Read a long-format CSV file (one row per observation).

        Parameters
        ----------
        path : str or path-like
            The file.
        id, time, value : str, default="id", "time", "value"
            Column names.
        **kwargs
            Passed to :func:`pandas.read_csv` (``duplicates`` is passed to
            :meth:`from_long`).

        Returns
        -------
        IrregularData
        """
        pd = _require_pandas("IrregularData.read_csv")
        duplicates = kwargs.pop("duplicates", "raise")
        df = pd.read_csv(path, **kwargs)
        return cls.from_long(df, id=id, time=time, value=value, duplicates=duplicates)

    @classmethod
    def concat(cls, parts):
        """Stack the subjects of several IrregularData, in order.

        Ids must stay unique across the parts.

        Examples
        --------
        >>> from fdaimpute import IrregularData
        >>> a = IrregularData.from_lists([[0, 1]], [[1.0, 2.0]], ids=["a"])
        >>> b = IrregularData.from_lists([[0.5]], [[3.0]], ids=["b"])
        >>> IrregularData.concat([a, b]).ids.tolist()
        ['a', 'b']
        """
        parts = list(parts)
        if not parts:
            raise ValueError("nothing to concatenate")
        counts = np.concatenate([p.n_obs for p in parts])
        return cls(
            np.concatenate([p.times for p in parts]),
            np.concatenate([p.values for p in parts]),
            np.concatenate([[0], np.cumsum(counts)]),
            np.concatenate([p.ids for p in parts]),
        )

    # ------------------------------------------------------------------ #
    # conversions
    def to_long(self, id="id", time="time", value="value"):
        """Return a long ``pandas.DataFrame`` with one row per observation.

        Examples
        --------
        >>> from fdaimpute import IrregularData
        >>> IrregularData.from_lists([[0, 1]], [[2.0, 3.0]]).to_long().shape
        (2, 3)
        """
        pd = _require_pandas("IrregularData.to_long")
        return pd.DataFrame(
            {
                id: np.repeat(self.ids, self.n_obs),
                time: self.times.copy(),
                value: self.values.copy(),
            }
        )

    def to_lists(self):
        """Return ``(times, values)``: two lists with one array per subject."""
        cuts = self.offsets[1:-1]
        return np.split(self.times, cuts), np.split(self.values, cuts)

    def to_dense(self, grid=None):
        """Return a matrix with one row per subject and NaN where unobserved.

        Parameters
        ----------
        grid : array-like, default=None
            Column times; every observation time must be one of them.
            Defaults to the sorted distinct observation times.

        Returns
        -------
        X : ndarray of shape (n_subjects, n_times)
        grid : ndarray of shape (n_times,)
        """
        if grid is None:
            grid = np.unique(self.times)
        grid = np.asarray(grid, dtype=np.float64)
        col = np.searchsorted(grid, self.times)
        col = np.clip(col, 0, grid.size - 1)
        off = grid[col] != self.times
        if off.any():
            j = int(np.flatnonzero(off)[0])
            i = int(self.subject_index[j])
            raise ValueError(
                f"{subject_label(self.ids, i)} is observed at time "
                f"{self.times[j]}, which is not on the grid"
            )
        X = np.full((len(self), grid.size), np.nan)
        X[self.subject_index, col] = self.values
        return X, grid

    # ------------------------------------------------------------------ #
    # sequence protocol
    @property
    def n_obs(self):
        """Number of observations of each subject, shape (n_subjects,)."""
        return np.diff(self.offsets)

    @property
    def n_subjects(self):
        """Number of subjects."""
        return self.offsets.size - 1

    @property
    def shape(self):
        """``(n_subjects,)``, so that scikit-learn indexes this like an array."""
        return (self.n_subjects,)

    @property
    def subject_index(self):
        """Subject position of each observation, shape (n_obs,)."""
        return np.repeat(np.arange(self.n_subjects), self.n_obs)

    @property
    def time_range(self):
        """``(min, max)`` of all observation times."""
        return float(self.times.min()), float(self.times.max())

    def __len__(self):
        return self.n_subjects

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, key):
        if isinstance(key, tuple):
            if len(key) == 2 and key[1] is Ellipsis:
                key = key[0]
            else:
                raise IndexError("IrregularData supports one index (subjects)")
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            n = len(self)
            i = int(key) + n if key < 0 else int(key)
            if not 0 <= i < n:
                raise IndexError(f"subject index {key} out of range for {n} subjects")
            lo, hi = self.offsets[i], self.offsets[i + 1]
            return self.times[lo:hi], self.values[lo:hi]
        if isinstance(key, slice):
            idx = np.arange(len(self))[key]
        else:
            key = np.asarray(key)
            if key.dtype == bool:
                if key.shape != (len(self),):
                    raise IndexError(
                        f"boolean mask of shape {key.shape} does not match "
                        f"{len(self)} subjects"
                    )
                idx = np.flatnonzero(key)
            elif key.dtype.kind in "iu" or key.size == 0:
                idx = key.astype(np.int64).ravel()
                n = len(self)
                if idx.size and (idx.max() >= n or idx.min() < -n):
                    raise IndexError(f"subject index out of range for {n} subjects")
                idx = np.where(idx < 0, idx + n, idx)
            else:
                raise IndexError(f"cannot index subjects with dtype {key.dtype}")
        return self.take(idx)

    def take(self, indices):
        """Return the subjects at ``indices`` (integer positions) in that order."""
        indices = np.asarray(indices, dtype=np.int64)
        counts = self.n_obs[indices]
        offsets = np.concatenate([[0], np.cumsum(counts)])
        starts = self.offsets[indices]
        flat = np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1])
        new = object.__new__(type(self))
        new.times = self.times[flat]
        new.values = self.values[flat]
        new.offsets = offsets
        new.ids = self.ids[indices]
        return new

    def with_values(self, values, times=None):
        """Return a copy with new values (and optionally times), same subjects."""
        values = np.asarray(values, dtype=np.float64)
        times = self.times if times is None else np.asarray(times, dtype=np.float64)
        if values.shape != self.values.shape or times.shape != self.times.shape:
            raise ValueError("new values/times must match the number of observations")
        new = object.__new__(type(self))
        new.times, new.values = times, values
        new.offsets, new.ids = self.offsets, self.ids
        return new

    def __eq__(self, other):
        if not isinstance(other, IrregularData):
            return NotImplemented
        return (
            np.array_equal(self.offsets, other.offsets)
            and np.array_equal(self.times, other.times)
            and np.array_equal(self.values, other.values)
            and np.array_equal(self.ids, other.ids)
        )

    __hash__ = None

    def __repr__(self):
        n = len(self)
        if n == 0:
            return "IrregularData(0 subjects)"
        counts = self.n_obs
        lo, hi = self.time_range
        return (
            f"IrregularData({n} subjects, {self.times.size} observations, "
            f"n_i {counts.min()}-{counts.max()} (median {np.median(counts):g}), "
            f"times in [{lo:.4g}, {hi:.4g}])"
        )


def _codes_by_first_appearance(labels):
    """Number labels 0, 1, ... in order of first appearance.

    Returns the code of each entry and the distinct labels in that order.
    """
    try:
        uniq, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    except TypeError:  # labels of mixed types do not sort
        codes, distinct = {}, []
        for v in labels.tolist():
            if v not in codes:
                codes[v] = len(distinct)
                distinct.append(v)
        subject = np.fromiter(
            (codes[v] for v in labels.tolist()), dtype=np.int64, count=labels.size
        )
        return subject, np.fromiter(distinct, dtype=object, count=len(distinct))
    order = np.argsort(first, kind="stable")
    rank = np.empty(uniq.size, dtype=np.int64)
    rank[order] = np.arange(uniq.size)
    return rank[inverse.ravel()], uniq[order]


def _first_non_numeric(arr):
    for j, v in enumerate(arr):
        try:
            float(v)
        except (TypeError, ValueError):
            return j
    return 0


def _require_pandas(what):
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - exercised only without pandas
        raise ImportError(f"{what} needs pandas: pip install pandas") from None
    return pd
