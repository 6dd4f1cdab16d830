"""Several functional variables per subject, each observed at its own times."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils.validation import check_is_fitted

from fdaimpute._core.blocks import check_output_fits
from fdaimpute._core.coerce import check_not_datetime
from fdaimpute._core.columns import column_labels
from fdaimpute._core.fitting import fit_from_scratch
from fdaimpute._core.flat import check_storage
from fdaimpute._core.frames import require_pandas
from fdaimpute._core.ids import (
    check_ids,
    codes_by_first_appearance,
    missing_mask,
    subject_label,
)
from fdaimpute._core.multivariate_frames import (
    covariate_names,
    flat_from_columns,
    flat_from_variable_column,
    subject_covariates,
)
from fdaimpute._core.ragged import RaggedSubjects
from fdaimpute._core.validation import (
    check_in_range,
    check_magnitudes,
    is_long_frame,
    is_variables_frame,
    refuse_columns_frame,
    refuse_unnamed_variables_frame,
)
from fdaimpute.data import IrregularData

__all__ = ["MultivariateIrregularData"]


class MultivariateIrregularData(RaggedSubjects):
    """Subjects with ``p`` functional variables, each observed at its own times.

    Observations are stored flat, like :class:`~fdaimpute.IrregularData`,
    with one more array: the variable of each observation (an integer code
    into ``variables``). Subject ``i`` owns the slice ``offsets[i]:offsets[i
    + 1]`` of ``times``, ``values`` and ``variable``, sorted by variable and
    then by time. A subject needs at least one observation of some
    variable; it may never be observed on another (that variable is then
    imputed from the others).

    The container behaves like a sequence of subjects (``len``, indexing by
    integer arrays, slices and boolean masks), so it splits with
    scikit-learn's tools. Univariate imputers refuse it; use
    :class:`~fdaimpute.MultivariatePACEImputer`.

    Parameters
    ----------
    times, values : array-like of shape (n_obs,)
        Observation times and values, concatenated by subject.
    variable : array-like of int of shape (n_obs,)
        Variable of each observation, ``0 <= variable < len(variables)``.
    offsets : array-like of shape (n_subjects + 1,)
        Start of each subject's observations.
    variables : array-like of str, default=None
        Variable names; default ``"x0", "x1", ...`` (as many as the largest
        code needs).
    ids : array-like of shape (n_subjects,), default=None
        Subject labels; default ``0 .. n_subjects - 1``.
    covariates : mapping of str to array-like, default=None
        Subject-level covariates, one value per subject (numbers or
        categories), stored as given.
    duplicates : {"raise", "average"}, default="raise"
        Two observations of one variable of a subject at one time: refuse
        them, or average them.

    Attributes
    ----------
    times, values : ndarray of float64
    variable : ndarray of int64
    offsets : ndarray of int64
    ids : ndarray
    variables : ndarray of str
    covariates : dict of str to ndarray
        Each of shape (n_subjects,); empty without covariates.

    Examples
    --------
    >>> import pandas as pd
    >>> from fdaimpute.multivariate import MultivariateIrregularData
    >>> df = pd.DataFrame({
    ...     "id": ["a", "a", "a", "b"], "time": [0.1, 0.5, 0.5, 0.2],
    ...     "variable": ["bmi", "bmi", "sbp", "sbp"],
    ...     "value": [24.0, 25.0, 120.0, 135.0]})
    >>> data = MultivariateIrregularData.from_long(df)
    >>> data.variables.tolist(), data.ids.tolist()
    (['bmi', 'sbp'], ['a', 'b'])
    >>> data.counts.tolist()
    [[2, 1], [0, 1]]
    """

    def __init__(
        self,
        times,
        values,
        variable,
        offsets,
        variables=None,
        ids=None,
        covariates=None,
        *,
        duplicates="raise",
    ):
        if duplicates not in ("raise", "average"):
            raise ValueError("duplicates must be 'raise' or 'average'")
        check_not_datetime(times, "times")
        times = np.asarray(times, dtype=np.float64).ravel()
        variable = np.asarray(variable)
        if variable.dtype.kind not in "iu":
            raise TypeError(f"variable must hold integer codes, got {variable.dtype}")
        variable = variable.astype(np.int64).ravel()
        if variables is None:
            n_var = int(variable.max()) + 1 if variable.size else 1
            variables = [f"x{j}" for j in range(n_var)]
        variables = np.asarray(variables, dtype=object)
        if variables.ndim != 1 or variables.size < 1:
            raise ValueError("variables must be a non-empty list of names")
        if len(set(variables.tolist())) != variables.size:
            raise ValueError(f"variable names repeat: {variables.tolist()}")
        if variable.size != times.size:
            raise ValueError(
                f"times and variable differ in length: {times.size} != {variable.size}"
            )
        bad = (variable < 0) | (variable >= variables.size)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"observation {j} has variable code {variable[j]}, outside "
                f"0..{variables.size - 1} ({variables.size} variables)"
            )
        _check_finite(times, values, variable, offsets, ids, variables)
        times, values, offsets, ids = check_storage(times, values, offsets, ids)
        (
            self.times,
            self.values,
            self.variable,
            self.offsets,
        ) = _sort_within_subjects(
            times, values, variable, offsets, ids, variables, duplicates
        )
        self.ids = ids
        self.variables = variables
        self.covariates = _check_covariates(covariates, self.offsets.size - 1)

    # ------------------------------------------------------------------ #
    # constructors
    @classmethod
    def from_long(
        cls,
        df,
        id="id",
        time="time",
        variable="variable",
        value="value",
        *,
        covariates=None,
        duplicates="raise",
    ):
        """Build from a long table with a variable column.

        One row per observation: subject, time, the variable's name and its
        value. Subjects and variables appear in order of first appearance.

        Parameters
        ----------
        df : pandas.DataFrame or mapping of column name to array
            The table.
        id, time, variable, value : str
            Column names.
        covariates : list of str, default=None
            Columns holding subject-level covariates (constant within a
            subject; a ValueError names the first subject where one is not).
        duplicates : {"raise", "average"}, default="raise"
            See :class:`MultivariateIrregularData`.

        Returns
        -------
        MultivariateIrregularData
        """
        t, y, var, names, subject, ids = flat_from_variable_column(
            df, id, time, variable, value
        )
        covs = subject_covariates(df, covariates, id) if covariates else None
        return cls._from_rows(t, y, var, names, subject, ids, covs, duplicates)

    @classmethod
    def from_columns(
        cls, df, variables, id="id", time="time", *, covariates=None, duplicates="raise"
    ):
        """Build from a long table with one column per variable.

        One row per subject and time; a variable's column holds ``NaN``
        where it was not measured then. Rows where no variable was measured
        are skipped.

        Parameters
        ----------
        df : pandas.DataFrame or mapping of column name to array
            The table.
        variables : list of str
            The variables' columns.
        id, time : str
            Column names of the subject label and the time.
        covariates : list of str, default=None
            Columns holding subject-level covariates (see :meth:`from_long`).
        duplicates : {"raise", "average"}, default="raise"
            See :class:`MultivariateIrregularData`.

        Returns
        -------
        MultivariateIrregularData

        Examples
        --------
        >>> import numpy as np
        >>> from fdaimpute.multivariate import MultivariateIrregularData
        >>> df = {"id": [1, 1, 2], "time": [0.0, 1.0, 0.5],
        ...       "alb": [3.5, np.nan, 4.1], "bili": [1.2, 1.4, np.nan],
        ...       "sex": ["f", "f", "m"]}
        >>> data = MultivariateIrregularData.from_columns(
        ...     df, ["alb", "bili"], covariates=["sex"])
        >>> data.counts.tolist(), data.covariates["sex"].tolist()
        ([[1, 2], [1, 0]], ['f', 'm'])
        """
        t, y, var, names, subject, ids = flat_from_columns(df, id, time, variables)
        covs = subject_covariates(df, covariates, id) if covariates else None
        return cls._from_rows(t, y, var, names, subject, ids, covs, duplicates)

    @classmethod
    def _from_rows(cls, t, y, var, names, subject, ids, covs, duplicates):
        """The container from per-row arrays and subject codes (rows of ``df``)."""
        order = np.argsort(subject, kind="stable")
        counts = np.bincount(subject, minlength=ids.size)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            raise ValueError(
                f"{subject_label(ids, int(empty[0]))} has no measured value of "
                f"any variable ({', '.join(map(str, names))})"
            )
        return cls(
            t[order],
            y[order],
            var[order],
            offsets,
            names,
            ids,
            covs,
            duplicates=duplicates,
        )

    @classmethod
    def from_variables(cls, parts, *, covariates=None):
        """Combine one univariate data set per variable, matching subjects by id.

        Parameters
        ----------
        parts : mapping of str to IrregularData
            Each variable's observations. Subjects appear in order of first
            appearance over the parts, in order; a subject absent from a
            part is never observed on that variable.
        covariates : mapping of str to array-like, default=None
            One value per subject of the result.

        Returns
        -------
        MultivariateIrregularData

        Examples
        --------
        >>> from fdaimpute import IrregularData
        >>> from fdaimpute.multivariate import MultivariateIrregularData
        >>> a = IrregularData.from_lists([[0, 1], [0.5]], [[1.0, 2.0], [3.0]],
        ...                              ids=["x", "y"])
        >>> b = IrregularData.from_lists([[0.2]], [[9.0]], ids=["z"])
        >>> data = MultivariateIrregularData.from_variables({"a": a, "b": b})
        >>> data.ids.tolist(), data.counts.tolist()
        (['x', 'y', 'z'], [[2, 0], [1, 0], [0, 1]])
        """
        if not parts:
            raise ValueError("no variables given")
        names = list(parts)
        for name, part in parts.items():
            if not isinstance(part, IrregularData):
                raise TypeError(
                    f"variable {name!r}: expected an IrregularData, got "
                    f"{type(part).__name__}"
                )
        labels = np.concatenate(
            [np.repeat(parts[n].ids, parts[n].n_obs) for n in names]
        )
        subject, ids = codes_by_first_appearance(np.asarray(labels, dtype=object))
        ids = check_ids(ids, ids.size)
        t = np.concatenate([parts[n].times for n in names])
        y = np.concatenate([parts[n].values for n in names])
        var = np.repeat(np.arange(len(names)), [parts[n].times.size for n in names])
        order = np.argsort(subject, kind="stable")
        counts = np.bincount(subject, minlength=ids.size)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        return cls(t[order], y[order], var[order], offsets, names, ids, covariates)

    # ------------------------------------------------------------------ #
    # views
    @property
    def n_variables(self):
        """Number of variables ``p``."""
        return self.variables.size

    @property
    def counts(self):
        """Observations of each subject on each variable, shape (n, p)."""
        cell = self.subject_index * self.n_variables + self.variable
        return np.bincount(cell, minlength=self.n_subjects * self.n_variables).reshape(
            self.n_subjects, self.n_variables
        )

    def variable_index(self, name):
        """The code of a variable given by name (or by code)."""
        if isinstance(name, numbers.Integral) and not isinstance(name, bool):
            if not 0 <= name < self.n_variables:
                raise IndexError(f"variable {name} out of range")
            return int(name)
        hits = np.flatnonzero(self.variables == name)
        if not hits.size:
            raise KeyError(
                f"no variable {name!r}; variables are {self.variables.tolist()}"
            )
        return int(hits[0])

    def variable_data(self, name):
        """One variable as an IrregularData, and the rows of its subjects.

        Parameters
        ----------
        name : str or int
            The variable's name or code.

        Returns
        -------
        data : IrregularData
            The subjects observed on this variable (at least once), with
            their ids.
        rows : ndarray of int
            Their positions in this container.
        """
        j = self.variable_index(name)
        keep = self.variable == j
        subject = self.subject_index[keep]
        rows, counts = np.unique(subject, return_counts=True)
        if not rows.size:
            raise ValueError(f"variable {self.variables[j]!r} is never observed")
        offsets = np.concatenate([[0], np.cumsum(counts)])
        data = IrregularData(
            self.times[keep], self.values[keep], offsets, self.ids[rows]
        )
        return data, rows

    def to_long(self, id="id", time="time", variable="variable", value="value"):
        """A long ``pandas.DataFrame``: one row per observation (and covariates)."""
        pd = require_pandas("MultivariateIrregularData.to_long")
        subject = self.subject_index
        frame = {
            id: self.ids[subject],
            time: self.times.copy(),
            variable: self.variables[self.variable],
            value: self.values.copy(),
        }
        for name, col in self.covariates.items():
            frame[name] = np.asarray(col)[subject]
        return pd.DataFrame(frame)

    # ------------------------------------------------------------------ #
    # one subject and subsets (sizes and indexing: RaggedSubjects)
    def _subject(self, rows):
        return self.times[rows], self.values[rows], self.variable[rows]

    def take(self, indices):
        """The subjects at ``indices`` (integer positions), in that order."""
        indices, offsets, flat = self._gather(indices)
        new = object.__new__(type(self))
        new.times = self.times[flat]
        new.values = self.values[flat]
        new.variable = self.variable[flat]
        new.offsets = offsets
        new.ids = self.ids[indices]
        new.variables = self.variables
        new.covariates = {k: v[indices] for k, v in self.covariates.items()}
        return new

    def __eq__(self, other):
        if not isinstance(other, MultivariateIrregularData):
            return NotImplemented
        same = all(
            np.array_equal(getattr(self, a), getattr(other, a))
            for a in ("offsets", "times", "values", "variable", "ids", "variables")
        )
        return (
            same
            and self.covariates.keys() == other.covariates.keys()
            and all(
                np.array_equal(self.covariates[k], other.covariates[k])
                for k in self.covariates
            )
        )

    __hash__ = None

    def __repr__(self):
        n = len(self)
        per_var = self.counts.sum(axis=0)
        parts = ", ".join(
            f"{name}: {c}" for name, c in zip(self.variables.tolist(), per_var)
        )
        return (
            f"MultivariateIrregularData({n} subjects, {self.n_variables} "
            f"variables ({parts} observations))"
        )


def _check_finite(times, values, variable, offsets, ids, variables):
    """Name the subject and variable of the first non-finite time or value."""
    values = np.asarray(values)
    offsets = np.asarray(offsets)
    if values.shape != times.shape or values.dtype.kind not in "biuf":
        return  # check_storage says what is wrong
    if offsets.ndim != 1 or offsets.size < 1 or offsets[-1] != times.size:
        return
    bad = ~(np.isfinite(times) & np.isfinite(values.astype(np.float64)))
    if not bad.any():
        return
    j = int(np.flatnonzero(bad)[0])
    n = offsets.size - 1
    i = int(np.searchsorted(offsets, j, side="right") - 1)
    labels = None if ids is None else check_ids(ids, n)
    what = "time" if not np.isfinite(times[j]) else "value"
    raise ValueError(
        f"{subject_label(labels, i)} has a non-finite {what} on variable "
        f"{variables[variable[j]]!r} (time {times[j]}, value {values[j]})"
    )


def _sort_within_subjects(times, values, variable, offsets, ids, variables, rule):
    """Sort each subject's observations by variable, then time; handle repeats.

    Returns ``(times, values, variable, offsets)``.
    """
    n = offsets.size - 1
    subject = np.repeat(np.arange(n), np.diff(offsets))
    order = np.lexsort((times, variable, subject))
    times, values, variable = times[order], values[order], variable[order]
    same = (
        (np.diff(times) == 0)
        & (variable[1:] == variable[:-1])
        & (subject[1:] == subject[:-1])
    )
    if not same.any():
        return times, values, variable, offsets
    if rule == "raise":
        j = int(np.flatnonzero(same)[0])
        raise ValueError(
            f"{subject_label(ids, int(subject[j]))} has two observations of "
            f"variable {variables[variable[j]]!r} at time {times[j]}; pass "
            "duplicates='average' to average them"
        )
    starts = np.concatenate([[True], ~same])
    group = np.cumsum(starts) - 1
    values = np.bincount(group, weights=values) / np.bincount(group)
    times, variable, subject = times[starts], variable[starts], subject[starts]
    offsets = np.searchsorted(subject, np.arange(n + 1))
    return times, values, variable, offsets


def _check_covariates(covariates, n):
    """Covariates as a dict of arrays with one entry per subject."""
    if covariates is None:
        return {}
    out = {}
    for name, col in dict(covariates).items():
        arr = np.asarray(col)
        if arr.ndim != 1 or arr.shape[0] != n:
            raise ValueError(
                f"covariate {name!r} must have one value per subject: expected "
                f"{n}, got shape {arr.shape}"
            )
        # (one subject's missing value is named where the covariate is used)
        if n > 1 and arr.dtype.kind == "O" and missing_mask(arr).all():
            raise ValueError(f"covariate {name!r} is missing for every subject")
        out[str(name)] = arr
    return out


# ---------------------------------------------------------------------- #
# imputers of one variable that also take several


def as_3d(out, n_variables, return_std=False):
    """``transform``'s output of ``p`` variables as arrays (n_subjects, p, n_grid).

    ``out`` holds the curves, or the curves and their SDs with ``return_std``
    (arrays or DataFrames, variable-major columns).
    """
    outs = out if return_std else (out,)
    shaped = tuple(
        np.asarray(o).reshape(len(np.asarray(o)), n_variables, -1) for o in outs
    )
    return shaped if return_std else shaped[0]


def holds_several_variables(
    X, id="id", time="time", variable="variable", value="value", covariates=None
):
    """Whether ``X`` holds several variables in a form the imputers read.

    Parameters
    ----------
    X : object
        The input.
    id, time, variable, value : str
        The column names of a long table (as in
        :meth:`MultivariateIrregularData.from_long`).
    covariates : list of str, default=None
        The subject covariates an imputer reads. When some are named, a long
        table of one variable (columns id, time, value) also counts: it is
        read as one variable with its covariates (see
        :func:`as_multivariate`).

    Returns
    -------
    bool
        True for a MultivariateIrregularData, or a DataFrame with the four
        columns (or the three, with covariates).
    """
    if isinstance(X, MultivariateIrregularData):
        return True
    if is_variables_frame(X, id, time, variable, value):
        return True
    return bool(covariates) and is_long_frame(X, (id, time, value))


def as_multivariate(
    X, id="id", time="time", variable="variable", value="value", covariates=None
):
    """``X`` as MultivariateIrregularData (see :func:`holds_several_variables`).

    A long table's covariate columns named in ``covariates`` are read with
    it (constant within each subject); with covariates named, a long table
    without a variable column is one variable, named after its value
    column.

    Raises
    ------
    TypeError
        If ``X`` is neither a MultivariateIrregularData nor a DataFrame with
        the four columns (or the three, with covariates).
    ValueError
        If it has no subjects, if :meth:`MultivariateIrregularData.from_long`
        refuses it (a covariate column missing or not constant within a
        subject, say), or if it looks like a long table of several variables
        under other column names (the message gives the call that reads
        it).
    """
    names = list(covariates or ())
    if isinstance(X, MultivariateIrregularData):
        data = X
    elif is_variables_frame(X, id, time, variable, value):
        data = MultivariateIrregularData.from_long(
            X, id, time, variable, value, covariates=names or None
        )
    elif names and is_long_frame(X, (id, time, value)):
        data = MultivariateIrregularData.from_columns(
            X, [value], id, time, covariates=names
        )
    else:
        refuse_unnamed_variables_frame(X)
        if variable not in getattr(X, "columns", ()):
            refuse_columns_frame(X, id, time, names, several=True)
        columns = f"{id}, {time}, {variable}, {value}"
        if names:
            columns += f" (or {id}, {time}, {value} for one variable)"
            columns += f" and the covariates {', '.join(names)}"
        raise TypeError(
            "X must be a MultivariateIrregularData or a long DataFrame with "
            f"columns {columns}; got {type(X).__name__}"
        )
    if len(data) == 0:
        raise ValueError("no subjects: X is empty")
    return data


def align_variables(data, fitted):
    """``data`` with its variable codes in the ``fitted`` order (matched by name).

    Raises
    ------
    ValueError
        Naming the variables of ``data`` that are not in ``fitted``.
    """
    names = [str(v) for v in data.variables]
    fitted = [str(v) for v in fitted]
    unknown = [v for v in names if v not in fitted]
    if unknown:
        raise ValueError(
            f"variable(s) {unknown} were not seen in fit; the fitted "
            f"variables are {fitted}"
        )
    if names == fitted:
        return data
    code = np.array([fitted.index(v) for v in names], dtype=np.int64)
    return MultivariateIrregularData(
        data.times,
        data.values,
        code[data.variable],
        data.offsets,
        fitted,
        data.ids,
        data.covariates,
    )


class SeveralVariablesMixin:
    """Several variables per subject for an imputer of one variable.

    Put before :class:`~fdaimpute.BaseImputer` among the bases. ``fit`` on
    a :class:`MultivariateIrregularData` (or a long frame with a
    ``variable`` column) records ``variables_`` and calls the class's
    ``_fit_variables(data)``; then ``transform``, ``derivative``,
    ``predict_at`` and ``get_feature_names_out`` work as
    :class:`~fdaimpute.MultivariatePACEImputer`'s: one row per subject and
    one block of grid columns per variable (variable-major), a ``(variable,
    time)`` MultiIndex for pandas output, ``transform_3d`` for arrays of
    shape ``(n_subjects, p, n_grid)``, and ``predict_at`` at each
    observation's own time and variable. Fitted on one variable, the
    imputer's own methods run unchanged.

    The class provides ``_fit_variables(data)``, ``_variable_curves(data,
    grid, derivative)`` (shape ``(n_subjects, p * grid.size)``) and
    ``_variable_values(data)`` (one value per observation of ``data``);
    ``_variable_std(data, grid)`` (shape as ``_variable_curves``) if it
    gives ``transform(X, return_std=True)`` on several variables.
    """

    def _several(self):
        return hasattr(self, "variables_")

    def _covariate_names(self):
        """The covariates the imputer reads (none for one without them)."""
        return covariate_names(getattr(self, "covariates", None))

    def _holds_variables(self, X):
        """Whether ``X`` is read as several variables (or one with
        covariates): see :func:`holds_several_variables`."""
        return holds_several_variables(X, covariates=self._covariate_names())

    def _as_variables(self, X):
        """``X`` as MultivariateIrregularData, with the imputer's covariates."""
        return as_multivariate(X, covariates=self._covariate_names())

    @staticmethod
    def _variable_parts(data):
        """``(j, part, rows)`` for each variable ``j`` observed in ``data``:
        its observations as IrregularData and the rows of their subjects."""
        observed = data.counts.any(axis=0)
        for j in np.flatnonzero(observed):
            part, rows = data.variable_data(int(j))
            yield int(j), part, rows

    def fit(self, X, y=None):
        """Fit the imputer on training subjects, of one variable or several.

        A fit that raises leaves the estimator unfitted, even if it was
        fitted before.

        Parameters
        ----------
        X : IrregularData, MultivariateIrregularData, DataFrame, list or 2-D array
            Training subjects: the formats of :class:`~fdaimpute.BaseImputer`,
            or several variables (a MultivariateIrregularData or a long
            frame with columns id, time, variable, value).
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted imputer.
        """
        self._clear_fitted()
        if not self._holds_variables(X):
            return super().fit(X, y)
        return fit_from_scratch(self, X, self._as_variables, self._fit_variables)

    def _several_input(self, X):
        """Input of transform and the like, after a fit on several variables."""
        check_is_fitted(self, "grid_")
        if not self._holds_variables(X):
            raise TypeError(
                f"{type(self).__name__} was fitted on several variables "
                f"({', '.join(self.variables_)}); X must hold them too (a "
                "MultivariateIrregularData or a long frame with columns id, "
                f"time, variable, value), got {type(X).__name__}"
            )
        data = align_variables(self._as_variables(X), self.variables_)
        check_magnitudes(data)
        check_in_range(data, self.time_range_, extrapolate=self._extrapolation())
        return data

    def _check_transform_input(self, X):
        if self._several() or not self._holds_variables(X):
            return super()._check_transform_input(X)
        check_is_fitted(self, "grid_")
        raise TypeError(
            f"{type(self).__name__} was fitted on one variable; X holds several "
            "(fit it on several variables to impute them together)"
        )

    def _several_outputs(self, X, grid, derivative):
        data = self._several_input(X)
        grid = self._query_grid(grid)
        p, n = len(self.variables_), len(data)
        check_output_fits(n, p * grid.size)
        inner, cols, outside = self._clipped(grid)
        out = self._variable_curves(data, inner, derivative)
        out = out.reshape(n, p, inner.size)[:, :, cols]
        if derivative:
            out[:, :, outside] = 0.0
        return data, grid, out.reshape(n, p * grid.size)

    def transform(self, X, return_std=False, grid=None):
        """Impute each subject's curve (of each variable) on the output grid.

        Parameters
        ----------
        X : IrregularData, MultivariateIrregularData, DataFrame, list or 2-D array
            Subjects to impute, in a format of the fit's data (several
            variables after a fit on several, matched by name).
        return_std : bool, default=False
            Also return the pointwise standard deviation, where the method
            supports it.
        grid : int or array-like, default=None
            Where to evaluate; defaults to the fitted ``grid_``.

        Returns
        -------
        curves : ndarray or DataFrame of shape (n_subjects, n_grid)
            One row per subject, in input order; after a fit on ``p``
            variables, ``p * n_grid`` columns in variable-major blocks
            (``transform_3d`` reshapes them).
        std : ndarray or DataFrame
            Only when ``return_std=True``.
        """
        if not self._several():
            return super().transform(X, return_std=return_std, grid=grid)
        if return_std and not hasattr(self, "_variable_std"):
            raise NotImplementedError(
                f"{type(self).__name__} does not estimate uncertainty "
                "(return_std=True is not supported)"
            )
        data, grid, curves = self._several_outputs(X, grid, derivative=False)
        std = self._several_std(data, grid) if return_std else None
        return self._finish_variables(data, grid, curves, std)

    def _several_std(self, data, grid):
        """Each variable's pointwise SD on ``grid`` (``_variable_std`` of the
        class, on the grid clipped to the training range)."""
        p, n = len(self.variables_), len(data)
        inner, cols, _ = self._clipped(grid)
        std = self._variable_std(data, inner).reshape(n, p, inner.size)
        return std[:, :, cols].reshape(n, p * grid.size)

    def transform_3d(self, X, return_std=False, grid=None):
        """:meth:`transform` of several variables as arrays (n_subjects, p, n_grid).

        Only for an imputer fitted on several variables.

        Returns
        -------
        curves : ndarray of shape (n_subjects, p, n_grid)
        std : ndarray of shape (n_subjects, p, n_grid)
            Only with ``return_std`` (where the imputer gives it).
        """
        check_is_fitted(self, "grid_")
        if not self._several():
            raise TypeError(
                f"{type(self).__name__} was fitted on one variable; transform_3d "
                "is for several"
            )
        out = self.transform(X, return_std=return_std, grid=grid)
        return as_3d(out, len(self.variables_), return_std)

    def derivative(self, X, grid=None):
        """First derivative of each subject's imputed curve (of each variable).

        Parameters
        ----------
        X : IrregularData, MultivariateIrregularData, DataFrame, list or 2-D array
            Subjects.
        grid : int or array-like, default=None
            Where to evaluate; defaults to ``grid_``.

        Returns
        -------
        ndarray or DataFrame of shape (n_subjects, n_grid)
            ``p * n_grid`` columns, variable-major, after a fit on ``p``
            variables. With ``extrapolate="clip"``, 0 outside the training
            range.
        """
        if not self._several():
            return super().derivative(X, grid=grid)
        data, grid, deriv = self._several_outputs(X, grid, derivative=True)
        self._check_finite(deriv, data, "derivative")
        return self._wrap(deriv, data, grid)

    def predict_at(self, X, times=None):
        """Evaluate each subject's imputed curve at given times.

        After a fit on one variable, see :meth:`BaseImputer.predict_at
        <fdaimpute.BaseImputer.predict_at>`. After a fit on several, only
        ``times=None``: each observation's own time and variable.

        Parameters
        ----------
        X : IrregularData, MultivariateIrregularData, DataFrame, list or 2-D array
            Subjects.
        times : None, array-like or sequence of arrays
            Query times (``None`` only after a fit on several variables).

        Returns
        -------
        IrregularData, MultivariateIrregularData, ndarray, DataFrame or list
            After a fit on several variables, a MultivariateIrregularData
            with the subjects' observation times, variables and ids and the
            imputed values as values.
        """
        if not self._several():
            return super().predict_at(X, times=times)
        if times is not None:
            raise NotImplementedError(
                f"{type(self).__name__} fitted on several variables takes "
                "times=None only in predict_at; use transform(X, grid=times) "
                "for common times"
            )
        data = self._several_input(X)
        values = self._variable_values(data)
        self._check_finite(values, data, "prediction", flat_offsets=data.offsets)
        out = data.take(np.arange(len(data)))
        out.values = values
        return out

    def get_feature_names_out(self, input_features=None):
        """Output column names: ``"t=<time>"``, or ``"<variable>:t=<time>"``
        (variable-major) after a fit on several variables."""
        check_is_fitted(self, "grid_")
        return column_labels(self.grid_, getattr(self, "variables_", None))

    def _wrap(self, array, data, grid=None, columns=None):
        if not self._several() or columns is not None:
            return super()._wrap(array, data, grid, columns)
        if self._output_container() != "pandas":
            return array
        pd = require_pandas("pandas output")
        grid = self.grid_ if grid is None else grid
        columns = pd.MultiIndex.from_product(
            [list(self.variables_), list(grid)], names=["variable", "time"]
        )
        return pd.DataFrame(array, index=pd.Index(data.ids, name="id"), columns=columns)
