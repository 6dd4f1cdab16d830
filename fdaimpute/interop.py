"""Conversions to and from scikit-fda's functional data objects.

scikit-fda is optional (``pip install 'fdaimpute[skfda]'``) and imported only
when a conversion is asked for. Its irregular container,
:class:`skfda.representation.irregular.FDataIrregular`, holds the same flat
storage as :class:`~fdaimpute.IrregularData` (start indices, points,
values), and :class:`skfda.FDataGrid` holds curves on a common grid, such as
the imputed ones. Subject ids travel as scikit-fda's ``sample_names``.

Every imputer also accepts an ``FDataIrregular`` or ``FDataGrid`` as ``X``
directly: the first is read as :func:`from_skfda` reads it, the second like
a wide DataFrame whose columns are its grid points (``NaN`` where a subject
is unobserved).
"""

from __future__ import annotations

import sys

import numpy as np

from fdaimpute._core.validation import as_irregular
from fdaimpute.data import IrregularData

__all__ = ["from_skfda", "to_fdata_grid", "to_fdata_irregular"]

_EXTRA = "pip install 'fdaimpute[skfda]'"


def _skfda():
    """The ``skfda`` module, or an ImportError naming the extra to install."""
    try:
        import skfda
        from skfda.representation.irregular import FDataIrregular  # noqa: F401
    except ImportError as err:
        raise ImportError(
            f"converting to or from scikit-fda needs the scikit-fda package: {_EXTRA}"
        ) from err
    return skfda


def skfda_kind(X):
    """``"irregular"``, ``"grid"`` or None: which scikit-fda object ``X`` is.

    Never imports scikit-fda: when it is not imported, ``X`` cannot be one.
    """
    if sys.modules.get("skfda") is None:
        return None
    skfda = _skfda()
    if isinstance(X, skfda.representation.irregular.FDataIrregular):
        return "irregular"
    if isinstance(X, skfda.FDataGrid):
        return "grid"
    return None


def _check_scalar_curves(fd):
    if fd.dim_domain != 1 or fd.dim_codomain != 1:
        raise ValueError(
            f"only curves of one variable with scalar values can be converted; "
            f"this {type(fd).__name__} has dim_domain={fd.dim_domain} and "
            f"dim_codomain={fd.dim_codomain}"
        )


def _ids(fd):
    """Subject ids from ``sample_names``, or None when no sample is named."""
    names = list(fd.sample_names)
    if all(name is None for name in names):
        return None
    return names


def grid_arrays(fd):
    """An ``FDataGrid`` as ``(matrix, column times, ids or None)``."""
    _check_scalar_curves(fd)
    matrix = np.asarray(fd.data_matrix, dtype=np.float64)[..., 0]
    times = np.asarray(fd.grid_points[0], dtype=np.float64)
    ids = _ids(fd)
    return matrix, times, None if ids is None else np.asarray(ids)


def from_skfda(fd):
    """Convert a scikit-fda object to :class:`~fdaimpute.IrregularData`.

    Parameters
    ----------
    fd : FDataIrregular or FDataGrid
        Curves of one variable with scalar values. An ``FDataGrid``'s rows
        become subjects observed at the grid points where their values are
        not ``NaN``.

    Returns
    -------
    IrregularData
        Subject ids are the ``sample_names`` when the samples are named,
        else the positions ``0 .. n - 1``.

    Raises
    ------
    TypeError
        If ``fd`` is neither an ``FDataIrregular`` nor an ``FDataGrid``.
    ValueError
        If the curves are not scalar functions of one variable, or a row of
        an ``FDataGrid`` is all ``NaN``.

    Examples
    --------
    >>> from skfda.representation.irregular import FDataIrregular
    >>> from fdaimpute.interop import from_skfda
    >>> fd = FDataIrregular(start_indices=[0, 2], points=[0.1, 0.6, 0.3],
    ...                     values=[1.0, 2.0, 0.5], sample_names=["a", "b"])
    >>> data = from_skfda(fd)
    >>> data.ids.tolist(), data.n_obs.tolist()
    (['a', 'b'], [2, 1])
    """
    kind = skfda_kind(fd)
    if kind == "grid":
        return IrregularData.from_dense(*grid_arrays(fd))
    if kind != "irregular":
        raise TypeError(
            f"expected a scikit-fda FDataIrregular or FDataGrid, got "
            f"{type(fd).__name__}"
        )
    _check_scalar_curves(fd)
    starts = np.asarray(fd.start_indices, dtype=np.int64)
    points = np.asarray(fd.points, dtype=np.float64)[:, 0]
    offsets = np.append(starts, points.size)
    values = np.asarray(fd.values, dtype=np.float64)[:, 0]
    return IrregularData(points, values, offsets, ids=_ids(fd))


def to_fdata_irregular(data, **kwargs):
    """Convert irregular subjects to a scikit-fda ``FDataIrregular``.

    Parameters
    ----------
    data : IrregularData or accepted irregular input
        The subjects (a long DataFrame or ``(times, values)`` pairs are read
        as the imputers read them).
    **kwargs
        Passed to ``FDataIrregular`` (e.g. ``domain_range``,
        ``dataset_name``).

    Returns
    -------
    skfda.representation.irregular.FDataIrregular
        One sample per subject, named by its id.

    Examples
    --------
    >>> from fdaimpute import IrregularData
    >>> from fdaimpute.interop import to_fdata_irregular
    >>> data = IrregularData.from_lists([[0, 1], [0.5]], [[1.0, 2.0], [3.0]],
    ...                                 ids=["a", "b"])
    >>> fd = to_fdata_irregular(data)
    >>> fd.sample_names, fd.start_indices.tolist()
    (('a', 'b'), [0, 2])
    """
    skfda = _skfda()
    irregular = as_irregular(data)
    if irregular is None:
        raise TypeError(
            "data must be IrregularData, a long DataFrame or (times, values) "
            f"pairs, got {type(data).__name__}; for curves on a grid use "
            "to_fdata_grid"
        )
    return skfda.representation.irregular.FDataIrregular(
        start_indices=irregular.offsets[:-1],
        points=irregular.times,
        values=irregular.values,
        sample_names=tuple(irregular.ids.tolist()),
        **kwargs,
    )


def to_fdata_grid(curves, grid, ids=None, **kwargs):
    """Convert curves on a grid (such as imputed ones) to a scikit-fda ``FDataGrid``.

    Parameters
    ----------
    curves : array-like or DataFrame of shape (n_subjects, n_grid)
        One row per subject, e.g. the output of an imputer's ``transform``.
        A DataFrame's index gives the ids unless ``ids`` is given.
    grid : array-like of shape (n_grid,)
        Times of the columns (an imputer's ``grid_``).
    ids : array-like of shape (n_subjects,), default=None
        Subject ids, kept as ``sample_names``.
    **kwargs
        Passed to ``FDataGrid`` (e.g. ``domain_range``, ``dataset_name``).

    Returns
    -------
    skfda.FDataGrid

    Examples
    --------
    >>> import numpy as np
    >>> from fdaimpute.interop import to_fdata_grid
    >>> fd = to_fdata_grid(np.zeros((2, 3)), [0.0, 0.5, 1.0], ids=["a", "b"])
    >>> fd.data_matrix.shape, fd.sample_names
    ((2, 3, 1), ('a', 'b'))
    """
    skfda = _skfda()
    if ids is None and hasattr(curves, "index") and hasattr(curves, "columns"):
        ids = curves.index
    matrix = np.asarray(curves, dtype=np.float64)
    grid = np.asarray(grid, dtype=np.float64)
    if matrix.ndim != 2 or grid.ndim != 1 or matrix.shape[1] != grid.size:
        raise ValueError(
            f"curves must be a matrix with one column per grid time: got curves "
            f"of shape {matrix.shape} and a grid of shape {grid.shape}"
        )
    if ids is not None:
        ids = tuple(np.asarray(ids).tolist())
        if len(ids) != matrix.shape[0]:
            raise ValueError(
                f"ids must have one entry per row of curves: expected "
                f"{matrix.shape[0]}, got {len(ids)}"
            )
    return skfda.FDataGrid(matrix, grid_points=grid, sample_names=ids, **kwargs)
