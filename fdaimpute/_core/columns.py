"""The columns of a table of curves: their names and contents.

Shared by the imputers' DataFrame output and the command line's CSV and
Parquet files; it needs only NumPy, so that writing a file's header costs
no import of scikit-learn.
"""

from __future__ import annotations

import numpy as np

__all__ = ["column_labels", "curve_columns"]


def column_labels(grid, variables=None):
    """``"t=<time>"`` for each grid time (``"<variable>:t=<time>"`` for each
    variable and grid time, variable-major), as an object array.

    Times are written with 10 significant digits, or with as many more as
    it takes for distinct times to get distinct labels (times in Unix
    seconds a quarter-second apart need 11).
    """
    grid = np.asarray(grid, dtype=np.float64)
    distinct = np.unique(grid).size
    for digits in range(10, 18):
        times = [f"t={t:.{digits}g}" for t in grid]
        if len(set(times)) == distinct:
            break
    if variables is None:
        return np.asarray(times, dtype=object)
    return np.asarray([f"{v}:{t}" for v in variables for t in times], dtype=object)


def curve_columns(ids, grid, curves, std, layout, names, variables=None):
    """The columns of a table of curves, as the command line writes them.

    Parameters
    ----------
    ids : ndarray of shape (n_subjects,)
        Subject ids.
    grid : ndarray of shape (n_grid,)
        Output times.
    curves, std : ndarray of shape (n_subjects, n_grid)
        The curves, and their standard deviations (or None).
    layout : {"wide", "long"}
        ``"wide"``: the id column, then ``"t=<time>"`` columns (then
        ``"std(t=<time>)"``); ``"long"``: one row per subject and grid
        time with the id, time and value names (and ``"std"``).
    names : tuple of str
        The id, time and value column names (and, with ``variables``, the
        variable column's name fourth).
    variables : list of str, default=None
        Several variables: ``curves`` and ``std`` hold variable-major
        blocks of ``n_grid`` columns; wide columns are named
        ``"<variable>:t=<time>"`` and long rows carry the variable in a
        column between the id and the time.

    Returns
    -------
    dict
        Column name -> 1-D array, in order.
    """
    id_name, time_name, value_name = names[:3]
    if variables is not None and layout == "long":
        p, g = len(variables), grid.size
        columns = {
            id_name: np.repeat(ids, p * g),
            names[3]: np.tile(np.repeat(np.asarray(variables, dtype=str), g), len(ids)),
            time_name: np.tile(grid, len(ids) * p),
            value_name: curves.ravel(),
        }
        if std is not None:
            columns[_std_name(names)] = std.ravel()
        return columns
    if layout == "long":
        columns = {
            id_name: np.repeat(ids, grid.size),
            time_name: np.tile(grid, len(ids)),
            value_name: curves.ravel(),
        }
        if std is not None:
            columns[_std_name(names)] = std.ravel()
        return columns
    labels = column_labels(grid, variables)
    columns = {id_name: ids, **dict(zip(labels, curves.T))}
    if std is not None:
        columns.update(zip((f"std({n})" for n in labels), std.T))
    return columns


def _std_name(names):
    """The long table's standard-deviation column: ``std`` unless taken."""
    return "std" if "std" not in names else f"{names[2]}_std"
