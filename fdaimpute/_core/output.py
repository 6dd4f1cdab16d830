"""What the imputers hand back: the output container and checks on the numbers."""

from __future__ import annotations

import numpy as np
import sklearn
from sklearn.utils.validation import check_is_fitted

from fdaimpute._core.columns import column_labels
from fdaimpute._core.ids import subject_label

__all__ = ["OutputMixin", "put_observed"]

_OUTPUT_KEY = "_sklearn_output_config"  # the attribute sklearn.clone copies


def put_observed(data, grid, curves, std=None):
    """Observed values put back where a grid time equals an observation time.

    A grid time matches an observation time when they differ by at most
    ``1e-12`` of the larger in magnitude; there the curve takes the
    observed value and its standard deviation 0.

    Parameters
    ----------
    data : IrregularData or MultivariateIrregularData
        The subjects whose curves these are. With several variables (data
        with a ``variable`` code per observation), each observation goes
        to its variable's block of ``grid.size`` columns.
    grid : ndarray of shape (n_grid,)
        The curves' times, increasing.
    curves, std : ndarray of shape (n_subjects, p * n_grid)
        The curves (``p = 1`` for one variable), and their standard
        deviations or None.

    Returns
    -------
    curves, std : ndarray or None
        New arrays.
    """
    t = data.times
    col = np.clip(np.searchsorted(grid, t), 1, grid.size - 1)
    nearer_left = np.abs(grid[col - 1] - t) <= np.abs(grid[col] - t)
    col = np.where(nearer_left, col - 1, col)
    gap = np.abs(grid[col] - t)
    hit = gap <= 1e-12 * np.maximum(np.abs(t), np.abs(grid[col]))
    rows = data.subject_index[hit]
    cols = col[hit]
    variable = getattr(data, "variable", None)
    if variable is not None:
        cols = variable[hit] * grid.size + cols
    curves = np.array(curves, dtype=np.float64)
    curves[rows, cols] = data.values[hit]
    if std is not None:
        std = np.array(std, dtype=np.float64)
        std[rows, cols] = 0.0
    return curves, std


class OutputMixin:
    """Output handling of :class:`~fdaimpute.BaseImputer`.

    Chooses the container (ndarray or DataFrame indexed by subject id), puts
    observed values back under ``keep_observed=True`` and refuses
    non-finite results with the subjects they concern.
    """

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns: ``"t=<time>"`` for each grid time."""
        check_is_fitted(self, "grid_")
        return column_labels(self.grid_)

    def set_output(self, *, transform=None):
        """Choose the container of ``transform`` output.

        Parameters
        ----------
        transform : {"default", "pandas"} or None
            ``"pandas"`` returns DataFrames indexed by subject id with one
            column per grid time; ``"default"`` returns ndarrays; ``None``
            leaves the setting unchanged.

        Returns
        -------
        self
        """
        if transform is None:
            return self
        if transform not in ("default", "pandas"):
            raise ValueError(
                f"transform output {transform!r} is not supported; "
                "use 'default' or 'pandas'"
            )
        config = dict(getattr(self, _OUTPUT_KEY, {}))
        config["transform"] = transform
        setattr(self, _OUTPUT_KEY, config)
        return self

    def _output_container(self):
        config = getattr(self, _OUTPUT_KEY, {}).get("transform", "default")
        if config == "default":
            config = sklearn.get_config().get("transform_output", "default")
        return config

    def _wrap(self, array, data, grid=None, columns=None):
        """The output container: ndarray, or DataFrame indexed by subject id."""
        if self._output_container() != "pandas":
            return array
        import pandas as pd

        if columns is None:
            columns = column_labels(self.grid_ if grid is None else grid)
        return pd.DataFrame(array, index=pd.Index(data.ids, name="id"), columns=columns)

    def _keep_observed(self, data, grid, curves, std=None):
        """Put observed values back where a grid time is an observation time.

        Returns new ``(curves, std)`` arrays (unchanged without
        ``keep_observed``); see :func:`put_observed`.
        """
        if not getattr(self, "keep_observed", False):
            return curves, std
        return put_observed(data, grid, curves, std)

    @staticmethod
    def _check_finite(array, data, what, flat_offsets=None):
        """Raise a FloatingPointError naming the subjects with non-finite output.

        ``array`` has one row per subject, or is flat with subject ``i`` at
        ``flat_offsets[i]:flat_offsets[i + 1]``.
        """
        bad = ~np.isfinite(array)
        if not bad.any():
            return
        if flat_offsets is None:
            rows = np.flatnonzero(bad.reshape(len(data), -1).any(axis=1))
        else:
            subject = np.repeat(np.arange(len(data)), np.diff(flat_offsets))
            rows = np.unique(subject[bad])
        names = "; ".join(subject_label(data.ids, i) for i in rows[:5])
        raise FloatingPointError(
            f"non-finite {what} for {rows.size} subject(s) ({names}); this is a bug "
            "or a numerical failure - please report it with the data"
        )
