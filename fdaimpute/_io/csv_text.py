"""CSV text of imputed curves, formatted a row at a time instead of a cell.

Numbers are written as Python's ``repr`` writes them, the shortest text that
reads back as the same float (what pandas' ``to_csv`` writes, and it reads
back exactly); a missing value is an empty field. Text fields are quoted
only where needed (a comma, a quote or a line break in them), as pandas
and the ``csv`` module do by default.
"""

from __future__ import annotations

import numpy as np

__all__ = ["field", "long_rows", "wide_rows"]

_SPECIAL = (",", '"', "\n", "\r")


def field(value):
    """One text field of a CSV row (quoted where it must be).

    Examples
    --------
    >>> field("007"), field('a "b", c')
    ('007', '"a ""b"", c"')
    """
    # float.__repr__: NumPy's own repr of its floats names the type
    text = float.__repr__(value) if isinstance(value, float) else str(value)
    if any(mark in text for mark in _SPECIAL):
        return '"' + text.replace('"', '""') + '"'
    return text


def _number_rows(matrix):
    """The rows of a float matrix as CSV text, one string per row."""
    matrix = np.asarray(matrix, dtype=np.float64)
    n_rows, n_cols = matrix.shape
    if n_cols == 0:
        return [""] * n_rows
    missing = np.isnan(matrix)
    if not missing.any():
        template = ",".join(["%r"] * n_cols)
        return [template % tuple(row) for row in matrix.tolist()]
    return [",".join("" if v != v else repr(v) for v in row) for row in matrix.tolist()]


def wide_rows(ids, matrix, header=None):
    """CSV text with one row per subject: its id, then the row of ``matrix``.

    Parameters
    ----------
    ids : array-like of shape (n,)
        Subject ids.
    matrix : ndarray of shape (n, p)
        Numbers of each subject.
    header : list of str, default=None
        Column names (the id's first); no header line when None.

    Returns
    -------
    str
        Lines ending in ``"\\n"``.
    """
    lines = [] if header is None else [",".join(field(h) for h in header)]
    numbers = _number_rows(matrix)
    lines += [f"{field(i)},{row}" for i, row in zip(ids, numbers)]
    return "\n".join(lines) + "\n" if lines else ""


def long_rows(ids, times, columns, header=None, variables=None):
    """CSV text with one row per subject and time: id, time, then ``columns``.

    Parameters
    ----------
    ids : array-like of shape (n,)
        Subject ids.
    times : ndarray of shape (G,)
        The times of every subject.
    columns : list of ndarray of shape (n, G)
        The values written after the time (curves, standard deviations).
    header : list of str, default=None
        Column names; no header line when None.
    variables : list of str, default=None
        Several variables: each of ``columns`` has shape ``(n, p * G)``
        (variable-major blocks), and the rows, one per subject, variable
        and time, carry the variable's name between the id and the time.

    Returns
    -------
    str
    """
    if variables is not None:
        keys = [f"{field(i)},{field(v)}" for i in ids for v in variables]
        return _keyed_long_rows(keys, times, columns, header)
    return _keyed_long_rows([field(i) for i in ids], times, columns, header)


def _keyed_long_rows(keys, times, columns, header):
    """Rows ``key,time,column values``: ``keys[k]`` heads the k-th block of times."""
    n, g = len(keys), np.size(times)
    table = np.empty((n * g, 1 + len(columns)))
    table[:, 0] = np.tile(np.asarray(times, dtype=np.float64), n)
    for j, column in enumerate(columns):
        table[:, 1 + j] = np.asarray(column, dtype=np.float64).ravel()
    lines = [] if header is None else [",".join(field(h) for h in header)]
    numbers = _number_rows(table)
    lines += [f"{keys[k // g]},{row}" if g else "" for k, row in enumerate(numbers)]
    return "\n".join(lines) + "\n" if lines else ""
