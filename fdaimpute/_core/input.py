"""Reading the imputers' input ``X``: every accepted format to IrregularData."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from fdaimpute._core.validation import (
    as_irregular,
    check_grid,
    check_in_range,
    check_magnitudes,
    frame_axes,
)
from fdaimpute.data import IrregularData
from fdaimpute.interop import from_skfda, grid_arrays, skfda_kind

__all__ = ["InputMixin"]


class InputMixin:
    """Input handling of :class:`~fdaimpute.BaseImputer`.

    Irregular inputs become :class:`~fdaimpute.IrregularData` as they are
    (scikit-fda's ``FDataIrregular`` too); matrices (and ``FDataGrid``) go
    through scikit-learn's validation (``n_features_in_``,
    ``feature_names_in_``) and get column times, recorded at fit as
    ``dense_times_``. Needs the ``grid`` parameter, ``time_range_`` and the
    ``_extrapolation()`` of the estimator.
    """

    def _dense_column_times(self, n_columns, frame_times, reset):
        """Column times of matrix input: from its labels, the fit or ``grid``."""
        grid = self.grid
        explicit = grid is not None and np.ndim(grid) == 1 and len(grid) == n_columns
        if frame_times is not None:
            if reset and explicit:
                given = check_grid(grid)
                if not np.array_equal(given, frame_times):
                    raise ValueError(
                        "X's numeric column labels are its column times, but grid "
                        "gives other times for the same columns; drop one of them "
                        "(pass X.to_numpy() to use grid, or leave grid out)"
                    )
            return frame_times
        fitted = None if reset else getattr(self, "dense_times_", None)
        if fitted is not None and fitted.size == n_columns:
            return fitted
        if explicit:
            return check_grid(grid)
        if n_columns == 1:
            raise ValueError(
                "a dense matrix needs at least 2 columns (times); got 1 feature(s)"
            )
        return np.linspace(0.0, 1.0, n_columns)

    def _validate_input(self, X, *, reset):
        """Return IrregularData; for dense input also record/check n_features_in_."""
        if reset:
            for attr in ("n_features_in_", "feature_names_in_", "dense_times_"):
                if hasattr(self, attr):
                    delattr(self, attr)
        kind = skfda_kind(X)
        if kind == "irregular":
            data = from_skfda(X)
        else:
            data = as_irregular(X, type(self).__name__)
        if data is not None:
            if len(data) == 0:
                raise ValueError("no subjects: X is empty")
            return data
        if kind == "grid":
            X, frame_times, frame_ids = grid_arrays(X)
        else:
            frame_times, frame_ids = frame_axes(X)
        X = validate_data(
            self,
            X,
            reset=reset,
            dtype=np.float64,
            ensure_all_finite="allow-nan",
            ensure_min_samples=1,
            ensure_min_features=1,
        )
        times = self._dense_column_times(X.shape[1], frame_times, reset)
        if reset:
            self.dense_times_ = times
        return IrregularData.from_dense(X, times, ids=frame_ids)

    def _check_transform_input(self, X):
        """Input of transform and the like: fitted, in range, as IrregularData."""
        check_is_fitted(self, "grid_")
        data = self._validate_input(X, reset=False)
        check_magnitudes(data)
        check_in_range(data, self.time_range_, extrapolate=self._extrapolation())
        return data
