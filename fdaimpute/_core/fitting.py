"""The steps every imputer's fit shares, before and around its own model fit."""

from __future__ import annotations

from fdaimpute._core.params import validate_params
from fdaimpute._core.plausible import value_range
from fdaimpute._core.validation import (
    check_magnitudes,
    check_times_in_range,
    resolve_grid,
)

__all__ = ["fit_from_scratch"]


def fit_from_scratch(estimator, X, read, fit):
    """Fit ``estimator`` on ``X``, leaving it unfitted if anything raises.

    Checks the parameters and the data, then records what every fitted
    imputer holds before handing the data to the method's own fit:
    ``time_range_``, ``grid_`` (from the ``grid`` parameter, or the column
    times of a matrix, ``dense_times_``, that ``read`` recorded), and
    ``n_subjects_fit_``; for one variable ``value_range_``, for several
    (data with ``variables``) their names as ``variables_`` and each one's
    range as ``value_ranges_``. A fit that
    raises removes every fitted attribute, those of an earlier fit too.

    Parameters
    ----------
    estimator : BaseImputer
        The imputer; it has ``grid``, ``_extrapolation()`` and
        ``_clear_fitted()``.
    X : object
        The training input, as the caller accepts it.
    read : callable
        ``read(X)`` returns the subjects: an IrregularData or a
        MultivariateIrregularData.
    fit : callable
        ``fit(data)``: the method's own fit.

    Returns
    -------
    estimator
        Fitted.
    """
    try:
        validate_params(estimator)
        extrapolate = estimator._extrapolation()
        data = read(X)
        check_magnitudes(data)
        variables = getattr(data, "variables", None)
        estimator.time_range_ = data.time_range
        if variables is None:
            estimator.value_range_ = value_range(data.values)
        dense_times = getattr(estimator, "dense_times_", None)
        grid = resolve_grid(estimator.grid, estimator.time_range_, dense_times)
        check_times_in_range(grid, estimator.time_range_, extrapolate)
        estimator.grid_ = grid
        estimator.n_subjects_fit_ = len(data)
        if variables is not None:
            estimator.variables_ = [str(v) for v in variables]
            estimator.value_ranges_ = [
                value_range(data.values[data.variable == j])
                for j in range(len(variables))
            ]
        fit(data)
    except BaseException:
        estimator._clear_fitted()
        raise
    return estimator
