"""CSV text of imputed curves, formatted a row at a time instead of a cell.

Numbers are written as Python's ``repr`` writes them, the shortest text that
reads back as the same float (what pandas' ``to_csv`` writes, and it reads
back exactly); a missing value is an empty field. Text fields are quoted
only where needed (a comma, a quote or a line break in them), as pandas
and the ``csv`` module do by default.

Formatting a float is most of the time of writing curves (a million of
them take about half a second through ``repr``). Where ``pyarrow`` is
installed, large blocks are formatted by Arrow's cast to text, which writes
the same shortest digits; its text differs from ``repr`` for integers, tiny
and huge numbers (``1`` for ``1.0``, ``1e-5`` for ``1e-05``), so those
values, outside :data:`ARROW_RANGE` or integral, are still written by
``repr``, and the output is the same text either way.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["field", "long_rows", "wide_rows"]

_SPECIAL = (",", '"', "\n", "\r")

# Non-integral magnitudes where Arrow's text of a float is repr's
# (Arrow turns to exponents from 1e10 on with 17 digits, repr from 1e16).
ARROW_RANGE = (1e-4, 1e9)
# Fewer values than this are formatted by repr: as quick as importing pyarrow.
ARROW_MIN_VALUES = 200_000
# Values formatted by one call into Arrow (its buffers are about 40 bytes each).
ARROW_SLAB_VALUES = 50_000


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
    if matrix.size >= ARROW_MIN_VALUES and _arrow() is not None:
        return _arrow_number_rows(matrix)
    missing = np.isnan(matrix)
    if not missing.any():
        template = ",".join(["%r"] * n_cols)
        return [template % tuple(row) for row in matrix.tolist()]
    return [",".join("" if v != v else repr(v) for v in row) for row in matrix.tolist()]


@functools.cache
def _arrow():
    """``pyarrow`` and its compute module, if installed and Arrow's text of
    the floats in :data:`ARROW_RANGE` is repr's (checked once), else None."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        return None
    rng = np.random.default_rng(0)
    low, high = np.log10(ARROW_RANGE)
    probe = rng.choice([-1.0, 1.0], 1000) * 10 ** rng.uniform(low, high, 1000)
    text = pc.cast(pa.array(probe), pa.large_string()).to_pylist()
    if text != [repr(value) for value in probe.tolist()]:
        return None
    return pa, pc


def _arrow_number_rows(matrix):
    """:func:`_number_rows` formatted by Arrow (the same text), a slab of
    :data:`ARROW_SLAB_VALUES` at a time, so that Arrow's buffers stay small."""
    pa, pc = _arrow()
    text_type = pa.large_string()
    comma = pa.scalar(",", text_type)
    low, high = ARROW_RANGE
    n_rows, n_cols = matrix.shape
    step = max(1, ARROW_SLAB_VALUES // n_cols)
    rows = []
    for start in range(0, n_rows, step):
        slab = matrix[start : start + step]
        values = slab.ravel(order="F")  # column after column
        text = pc.cast(pa.array(values), text_type)
        size = np.abs(values)
        own = ~((size >= low) & (size < high) & (values != np.floor(values)))
        if own.any():
            fixed = ["" if v != v else repr(v) for v in values[own].tolist()]
            fixed = pa.array(fixed, text_type)
            text = pc.replace_with_mask(text, pa.array(own), fixed)
        count = len(slab)
        columns = (text.slice(j * count, count) for j in range(n_cols))
        rows += pc.binary_join_element_wise(*columns, comma).to_pylist()
    return rows


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
