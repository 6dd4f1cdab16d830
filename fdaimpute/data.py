"""The ragged container for irregularly observed functional data."""

from __future__ import annotations

import numpy as np

# check_not_datetime, is_datetime_like, subject_label, as_id_array and
# check_ids have always been importable from here
from fdaimpute._core.coerce import check_not_datetime, is_datetime_like  # noqa: F401
from fdaimpute._core.flat import (
    check_storage,
    dense_from_flat,
    flat_from_dense,
    flat_from_lists,
    sort_within_subjects,
)
from fdaimpute._core.frames import flat_from_long, long_frame, require_pandas
from fdaimpute._core.ids import (  # noqa: F401
    as_id_array,
    check_ids,
    subject_label,
)
from fdaimpute._core.ragged import RaggedSubjects
from fdaimpute._io.csv_options import read_long_csv

__all__ = ["IrregularData"]


class IrregularData(RaggedSubjects):
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
    names : tuple of str or None
        The column names ``(id, time, value)`` the data were read from
        (:meth:`from_long`, :meth:`read_csv`, :meth:`read_parquet`), kept
        by subsets; plots label their axes with them. None otherwise.

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
        times, values, offsets, ids = check_storage(times, values, offsets, ids)
        if duplicates not in ("raise", "average"):
            raise ValueError("duplicates must be 'raise' or 'average'")
        self.times, self.values, self.offsets = sort_within_subjects(
            times, values, offsets, ids, duplicates
        )
        self.ids = ids

    names = None

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
        return cls(*flat_from_lists(times, values, ids), duplicates=duplicates)

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
        storage = flat_from_long(df, id=id, time=time, value=value)
        data = cls(*storage, duplicates=duplicates)
        data.names = (str(id), str(time), str(value))
        return data

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
        return cls(*flat_from_dense(X, grid, ids))

    @classmethod
    def read_csv(cls, path, id="id", time="time", value="value", **kwargs):
        """Read a long-format CSV file (one row per observation).

        Parameters
        ----------
        path : str or path-like
            The file.
        id, time, value : str, default="id", "time", "value"
            Column names. Ids are read as the text in the file, so ``007``
            and ``7`` are two subjects and ``NA`` or ``null`` is a subject
            (pass ``dtype={id: int}`` to read them as numbers); the other
            columns read pandas' markers of a missing value as missing.
        **kwargs
            Passed to :func:`pandas.read_csv` (``duplicates`` is passed to
            :meth:`from_long`). Giving ``na_values``, ``keep_default_na``
            or ``na_filter`` sets the missing values of every column, the
            ids' too; giving ``usecols``, rows are not checked for fields
            beyond the header.

        Returns
        -------
        IrregularData

        Raises
        ------
        ValueError
            If the file has no rows (a header alone), lacks a column, or
            has a row with more fields than the header or without an id
            (the message names the line). One trailing comma on every row
            (an empty field beyond the header) is read as nothing.
        """
        pd = require_pandas("IrregularData.read_csv")
        duplicates = kwargs.pop("duplicates", "raise")
        df = read_long_csv(pd, path, id, kwargs)
        if len(df) == 0:
            raise ValueError(
                f"{path} has no observations (a header and no rows); it needs "
                f"one row per observation with columns {id}, {time}, {value}"
            )
        return cls.from_long(df, id=id, time=time, value=value, duplicates=duplicates)

    @classmethod
    def read_parquet(cls, path, id="id", time="time", value="value", **kwargs):
        """Read a long-format Parquet file (one row per observation).

        Needs ``pyarrow``. The columns may have any names and types; other
        columns are not read.

        Parameters
        ----------
        path : str or path-like
            The file, or a folder of Parquet files read as one table.
        id, time, value : str, default="id", "time", "value"
            Column names. Ids are read as text, as :meth:`read_csv` reads
            them, so that the same table gives the same subjects from
            either format.
        **kwargs
            ``duplicates``, passed to :meth:`from_long`.

        Returns
        -------
        IrregularData

        Raises
        ------
        ValueError
            If the file has no rows or lacks a column.

        Examples
        --------
        >>> import os, tempfile
        >>> import pandas as pd
        >>> from fdaimpute import IrregularData
        >>> path = os.path.join(tempfile.mkdtemp(), "obs.parquet")
        >>> pd.DataFrame({"who": [7, 7, 8], "age": [40, 45, 50],
        ...               "bmi": [24.0, 25.5, 30.1]}).to_parquet(path)
        >>> data = IrregularData.read_parquet(path, id="who", time="age", value="bmi")
        >>> data.ids.tolist(), data.n_obs.tolist()
        (['7', '8'], [2, 1])
        """
        from fdaimpute._io.parquet import read_storage

        duplicates = kwargs.pop("duplicates", "raise")
        if kwargs:
            raise TypeError(
                f"read_parquet got unexpected arguments {sorted(kwargs)}; it takes "
                "the column names and duplicates"
            )
        df = read_storage(path, (id, time, value))
        if isinstance(df, tuple):
            data = cls(*df, duplicates=duplicates)
            data.names = (str(id), str(time), str(value))
            return data
        if len(df) == 0:
            raise ValueError(
                f"{path} has no observations; it needs one row per observation "
                f"with columns {id}, {time}, {value}"
            )
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
        data = cls(
            np.concatenate([p.times for p in parts]),
            np.concatenate([p.values for p in parts]),
            np.concatenate([[0], np.cumsum(counts)]),
            np.concatenate([p.ids for p in parts]),
        )
        if len({p.names for p in parts}) == 1:
            data.names = parts[0].names
        return data

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
        return long_frame(self, id=id, time=time, value=value)

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
        return dense_from_flat(self, grid)

    # ------------------------------------------------------------------ #
    # one subject and subsets (sizes and indexing: RaggedSubjects)
    def _subject(self, rows):
        return self.times[rows], self.values[rows]

    def take(self, indices):
        """Return the subjects at ``indices`` (integer positions) in that order."""
        indices, offsets, flat = self._gather(indices)
        new = object.__new__(type(self))
        new.times = self.times[flat]
        new.values = self.values[flat]
        new.offsets = offsets
        new.ids = self.ids[indices]
        new.names = self.names
        return new

    def with_values(self, values, times=None):
        """Return a copy with new values (and optionally times), same subjects."""
        values = np.asarray(values, dtype=np.float64)
        times = self.times if times is None else np.asarray(times, dtype=np.float64)
        if values.shape != self.values.shape or times.shape != self.times.shape:
            raise ValueError("new values/times must match the number of observations")
        new = object.__new__(type(self))
        new.times, new.values = times, values
        new.offsets, new.ids, new.names = self.offsets, self.ids, self.names
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
