"""Long tables to the storage of MultivariateIrregularData, and its covariates."""

from __future__ import annotations

import numpy as np

from fdaimpute._core.coerce import check_not_datetime, first_non_numeric
from fdaimpute._core.ids import (
    codes_by_first_appearance,
    missing_mask,
    subject_codes,
    subject_label,
)


def _check_columns(df, roles):
    """Raise naming the first column of ``roles`` (role, name) not in ``df``."""
    columns = list(df.keys())
    for role, name in roles:
        if name not in columns:
            raise ValueError(
                f"column {name!r} (the {role} column) is not in the table; "
                f"columns are {columns}"
            )


def _numeric(arr, col, subject, ids):
    """``arr`` as float64, or a TypeError naming the first subject with text."""
    if arr.dtype.kind not in "biuf":
        try:
            return arr.astype(np.float64)
        except (TypeError, ValueError):
            bad = first_non_numeric(arr)
            raise TypeError(
                f"{subject_label(ids, int(subject[bad]))}: column {col!r} must "
                f"be numeric, got {arr[bad]!r}"
            ) from None
    return arr.astype(np.float64)


def flat_from_variable_column(df, id, time, variable, value):
    """Per-row arrays of a long table with a variable column.

    Returns ``(times, values, variable_codes, names, subject, ids)``: rows
    in table order, variables and subjects numbered by first appearance.
    """
    _check_columns(
        df, (("id", id), ("time", time), ("variable", variable), ("value", value))
    )
    check_not_datetime(df[time], f"the times (column {time!r})")
    subject, ids = subject_codes(df[id], id)
    raw_var = np.asarray(df[variable])
    missing = missing_mask(raw_var)
    if missing.any():
        j = int(np.flatnonzero(missing)[0])
        raise ValueError(
            f"{subject_label(ids, int(subject[j]))}: column {variable!r} has a "
            f"missing variable name (row {j})"
        )
    codes, names = codes_by_first_appearance(raw_var)
    t = _numeric(np.asarray(df[time]), time, subject, ids)
    y = _numeric(np.asarray(df[value]), value, subject, ids)
    names = np.asarray([str(n) for n in names], dtype=object)
    if len(set(names.tolist())) != names.size:
        raise ValueError(f"variable names repeat as text: {names.tolist()}")
    return t, y, codes, names, subject, ids


def flat_from_columns(df, id, time, variables):
    """Per-row arrays of a long table with one column per variable (NaN: not measured).

    Returns ``(times, values, variable_codes, names, subject, ids)`` with one
    row per measured cell, ``subject`` numbering the subjects of *every*
    row of the table (a subject with no measured cell is kept, so the
    caller can name it).
    """
    variables = [variables] if isinstance(variables, str) else list(variables)
    if not variables:
        raise ValueError("variables must name at least one column")
    if len(set(variables)) != len(variables):
        raise ValueError(f"variables repeat: {variables}")
    _check_columns(
        df,
        [("id", id), ("time", time)] + [("variable", v) for v in variables],
    )
    check_not_datetime(df[time], f"the times (column {time!r})")
    subject, ids = subject_codes(df[id], id)
    t = _numeric(np.asarray(df[time]), time, subject, ids)
    block = np.stack(
        [_numeric(np.asarray(df[v]), v, subject, ids) for v in variables], axis=1
    )
    measured = ~np.isnan(block)
    rows, var = np.nonzero(measured)
    names = np.asarray([str(v) for v in variables], dtype=object)
    return t[rows], block[rows, var], var.astype(np.int64), names, subject[rows], ids


def covariate_names(setting):
    """The covariate names of an imputer's ``covariates`` parameter (a list).

    Raises
    ------
    ValueError
        Names that are not strings, or that repeat.
    """
    if setting is None:
        return []
    names = list(setting)
    bad = [c for c in names if not isinstance(c, str)]
    if bad or len(set(names)) != len(names):
        raise ValueError(f"covariates must be distinct column names, got {setting!r}")
    return names


def subject_covariates(df, columns, id):
    """One value per subject of each covariate column; constant within a subject.

    Subjects in order of first appearance in the column ``id`` of ``df``.

    Raises
    ------
    ValueError
        For a missing column, or the first subject whose rows disagree.
    """
    columns = [columns] if isinstance(columns, str) else list(columns)
    _check_columns(df, [("covariate", c) for c in columns])
    subject, ids = subject_codes(df[id], id)
    out = {}
    for name in columns:
        col = np.asarray(df[name])
        codes = _factorize(col)
        # the first row of each subject, in table order
        first_row = np.empty(ids.size, dtype=np.int64)
        first_row[subject[::-1]] = np.arange(col.size)[::-1]
        differs = codes != codes[first_row][subject]
        if differs.any():
            j = int(np.flatnonzero(differs)[0])
            i = int(subject[j])
            first, other = (_plain(col[k]) for k in (first_row[i], j))
            raise ValueError(
                f"{subject_label(ids, i)}: covariate {name!r} is not constant "
                f"within the subject ({first!r} and {other!r}); "
                "a covariate holds one value per subject"
            )
        out[name] = col[first_row]
    return out


def _plain(x):
    """A numpy scalar as the Python value it holds (for messages)."""
    return x.item() if isinstance(x, np.generic) else x


def _factorize(col):
    """Integer codes of a column's values, equal values (NaN too) equal codes."""
    if col.dtype.kind in "biuf":
        col = col.astype(np.float64)
        nan = np.isnan(col)
        _, codes = np.unique(np.where(nan, 0.0, col), return_inverse=True)
        return np.where(nan, -1, codes.ravel())
    missing = missing_mask(col)
    filled = np.where(missing, "", col.astype(str))
    _, codes = np.unique(filled, return_inverse=True)
    return np.where(missing, -1, codes.ravel())
