"""The estimator contract shared by every imputer."""

from __future__ import annotations

import numpy as np
import sklearn
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from fdaimpute._validation import (
    as_irregular,
    check_in_range,
    check_times_in_range,
    resolve_grid,
)
from fdaimpute.data import IrregularData, subject_label

__all__ = ["BaseImputer"]

_OUTPUT_KEY = "_sklearn_output_config"  # the attribute sklearn.clone copies


class BaseImputer(TransformerMixin, BaseEstimator):
    """Base class of the imputers: input handling, output grid and output format.

    Subclasses implement ``_fit(data)`` and ``_transform_grid(data, grid,
    return_std)``; optionally ``_derivative_grid(data, grid)`` and
    ``_predict_ragged(data, times, offsets)`` (the default interpolates a
    fine grid). Every subclass takes the ``grid`` and ``extrapolate``
    parameters.

    Accepted inputs ``X`` (for ``fit``, ``transform`` and the rest):

    - an :class:`~fdaimpute.IrregularData`;
    - a long :class:`pandas.DataFrame` with columns ``id``, ``time``,
      ``value``;
    - a list of ``(times, values)`` pairs, one per subject;
    - a 2-D array (or wide DataFrame) with ``NaN`` where unobserved. Its
      columns sit at the times given by ``grid`` when ``grid`` is an array
      with one entry per column, else equally spaced on ``[0, 1]``. With
      ``grid=None`` the output grid is those column times, so
      ``fit_transform`` fills in the matrix like any scikit-learn imputer.
    """

    def __init_subclass__(cls, **kwargs):
        # Output wrapping is done here (indexed by subject id), not by sklearn.
        kwargs.setdefault("auto_wrap_output_keys", None)
        super().__init_subclass__(**kwargs)

    # ------------------------------------------------------------------ #
    # input handling
    def _dense_column_times(self, n_columns):
        fitted = getattr(self, "dense_times_", None)
        if fitted is not None and fitted.size == n_columns:
            return fitted
        grid = self.grid
        if grid is not None and np.ndim(grid) == 1 and len(grid) == n_columns:
            return np.asarray(grid, dtype=np.float64)
        if n_columns == 1:
            raise ValueError(
                "a dense matrix needs at least 2 columns (times); got 1 feature(s)"
            )
        return np.linspace(0.0, 1.0, n_columns)

    def _validate_input(self, X, *, reset):
        """Return IrregularData; for dense input also record/check n_features_in_."""
        data = as_irregular(X)
        if data is not None:
            if reset:
                for attr in ("n_features_in_", "feature_names_in_", "dense_times_"):
                    if hasattr(self, attr):
                        delattr(self, attr)
            if len(data) == 0:
                raise ValueError("no subjects: X is empty")
            return data
        X = validate_data(
            self,
            X,
            reset=reset,
            dtype=np.float64,
            ensure_all_finite="allow-nan",
            ensure_min_samples=1,
            ensure_min_features=1,
        )
        times = self._dense_column_times(X.shape[1])
        if reset:
            self.dense_times_ = times
        return IrregularData.from_dense(X, times)

    # ------------------------------------------------------------------ #
    # public API
    def fit(self, X, y=None):
        """Fit the imputer on training subjects.

        Parameters
        ----------
        X : IrregularData, long DataFrame, list of (t, y) pairs or 2-D array
            Training subjects (see the class description for the formats).
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted imputer.
        """
        data = self._validate_input(X, reset=True)
        self.time_range_ = data.time_range
        dense_times = getattr(self, "dense_times_", None)
        grid = resolve_grid(self.grid, self.time_range_, dense_times)
        check_times_in_range(grid, self.time_range_, self.extrapolate)
        self.grid_ = grid
        self.n_subjects_fit_ = len(data)
        self._fit(data)
        return self

    def transform(self, X, return_std=False):
        """Impute each subject's curve on the output grid ``grid_``.

        Parameters
        ----------
        X : IrregularData, long DataFrame, list of (t, y) pairs or 2-D array
            Subjects to impute; new subjects are the normal case.
        return_std : bool, default=False
            Also return the pointwise standard deviation of each imputed
            value, where the method supports it.

        Returns
        -------
        curves : ndarray or DataFrame of shape (n_subjects, n_grid)
            One row per input subject, in input order; a DataFrame indexed
            by subject id after ``set_output(transform="pandas")``.
        std : ndarray or DataFrame of shape (n_subjects, n_grid)
            Only when ``return_std=True``.
        """
        data = self._check_transform_input(X)
        if return_std:
            curves, std = self._transform_grid(data, self.grid_, return_std=True)
            self._check_finite(curves, data, "imputed curve")
            self._check_finite(std, data, "standard deviation")
            return self._wrap(curves, data), self._wrap(std, data)
        curves = self._transform_grid(data, self.grid_, return_std=False)
        self._check_finite(curves, data, "imputed curve")
        return self._wrap(curves, data)

    def derivative(self, X, grid=None):
        """First derivative of each subject's imputed curve.

        Parameters
        ----------
        X : IrregularData, long DataFrame, list of (t, y) pairs or 2-D array
            Subjects.
        grid : array-like, default=None
            Where to evaluate; defaults to ``grid_``.

        Returns
        -------
        ndarray or DataFrame of shape (n_subjects, n_grid)
        """
        data = self._check_transform_input(X)
        grid = self._query_grid(grid)
        deriv = self._derivative_grid(data, grid)
        self._check_finite(deriv, data, "derivative")
        return self._wrap(deriv, data, grid)

    def predict_at(self, X, times=None):
        """Evaluate each subject's imputed curve at given times.

        Parameters
        ----------
        X : IrregularData, long DataFrame, list of (t, y) pairs or 2-D array
            Subjects.
        times : None, array-like of shape (n_times,) or sequence of arrays
            ``None``: each subject at its own observation times. A 1-D
            array: the same times for every subject. A sequence with one
            array per subject: each subject at its own query times.

        Returns
        -------
        IrregularData or ndarray
            For ``None`` or per-subject times, an IrregularData with the
            query times and imputed values (ids kept); for common times an
            array of shape (n_subjects, n_times).
        """
        data = self._check_transform_input(X)
        if times is None:
            query = data
        elif not _is_ragged(times) and np.ndim(times) == 1:
            common = np.asarray(times, dtype=np.float64)
            if common.size == 0 or not np.all(np.isfinite(common)):
                raise ValueError("times must be a non-empty array of finite numbers")
            n = len(data)
            check_times_in_range(common, self.time_range_, self.extrapolate)
            flat = np.tile(common, n)
            offsets = np.arange(n + 1) * common.size
            out = self._predict_ragged(data, flat, offsets).reshape(n, common.size)
            self._check_finite(out, data, "prediction")
            return out
        else:
            if len(times) != len(data):
                raise ValueError(
                    f"times has {len(times)} entries but X has {len(data)} subjects"
                )
            query = IrregularData.from_lists(
                times, [np.zeros(np.size(t)) for t in times], ids=data.ids
            )
            check_in_range(query, self.time_range_, extrapolate=self.extrapolate)
        values = self._predict_ragged(data, query.times, query.offsets)
        self._check_finite(values, data, "prediction", flat_offsets=query.offsets)
        return query.with_values(values)

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns: ``"t=<time>"`` for each grid time."""
        check_is_fitted(self, "grid_")
        return np.asarray([f"t={t:.10g}" for t in self.grid_], dtype=object)

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

    # ------------------------------------------------------------------ #
    # helpers for subclasses
    def _check_transform_input(self, X):
        check_is_fitted(self, "grid_")
        data = self._validate_input(X, reset=False)
        check_in_range(data, self.time_range_, extrapolate=self.extrapolate)
        return data

    def _query_grid(self, grid):
        if grid is None:
            return self.grid_
        grid = resolve_grid(grid, self.time_range_)
        check_times_in_range(grid, self.time_range_, self.extrapolate)
        return grid

    def _output_container(self):
        config = getattr(self, _OUTPUT_KEY, {}).get("transform", "default")
        if config == "default":
            config = sklearn.get_config().get("transform_output", "default")
        return config

    def _wrap(self, array, data, grid=None):
        if self._output_container() != "pandas":
            return array
        import pandas as pd

        names = (
            self.get_feature_names_out()
            if grid is None
            else np.asarray([f"t={t:.10g}" for t in grid], dtype=object)
        )
        return pd.DataFrame(array, index=pd.Index(data.ids, name="id"), columns=names)

    @staticmethod
    def _check_finite(array, data, what, flat_offsets=None):
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

    def _derivative_grid(self, data, grid):
        raise NotImplementedError(f"{type(self).__name__} does not provide derivatives")

    def _predict_ragged(self, data, times, offsets):
        """Evaluate at per-subject times by linear interpolation of a fine grid."""
        lo, hi = (
            min(self.time_range_[0], times.min()),
            max(self.time_range_[1], times.max()),
        )
        fine = np.linspace(lo, hi, 1001)
        curves = self._transform_grid(data, fine, return_std=False)
        return interpolate_rows(curves, fine, times, np.diff(offsets))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.requires_fit = True
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags

    # ------------------------------------------------------------------ #
    # persistence
    def save(self, path):
        """Write the imputer, fitted or not, to ``path``.

        The file is fdaimpute's versioned model format (a magic line, a JSON
        header with the class, the library versions and a SHA-256 digest,
        then the pickled estimator; see :mod:`fdaimpute.persistence`).
        Neural imputers store their weights on the CPU, so a model trained
        on a GPU loads on a machine without one.

        Parameters
        ----------
        path : str or path-like
            Destination file (overwritten).

        See Also
        --------
        load : read it back.
        """
        from fdaimpute.persistence import save

        save(self, path)

    @classmethod
    def load(cls, path):
        """Read an imputer written by :meth:`save`.

        .. warning::
           Loading unpickles the file, which can run arbitrary code: load
           only files you trust.

        Parameters
        ----------
        path : str or path-like
            The file.

        Returns
        -------
        estimator
            An instance of this class, fitted if it was when saved
            (``BaseImputer.load`` accepts any imputer). Neural imputers
            move their weights to their ``device``, or to the CPU with a
            warning when it is not available.

        Raises
        ------
        ValueError
            If the file is not an fdaimpute model, is in another format
            version, or is truncated or corrupted.
        TypeError
            If the file holds another class.

        Examples
        --------
        >>> import os, tempfile
        >>> import fdaimpute as fi
        >>> sim = fi.simulate.sand_paper(n=100, n_obs=10, random_state=0)
        >>> imp = fi.KernelImputer(grid=sim.grid).fit(sim.train.data)
        >>> path = os.path.join(tempfile.mkdtemp(), "kernel.fdaimpute")
        >>> imp.save(path)
        >>> same = fi.KernelImputer.load(path)
        >>> bool((same.transform(sim.test.data) == imp.transform(sim.test.data)).all())
        True
        """
        from fdaimpute.persistence import load

        return load(path, cls)


def interpolate_rows(curves, grid, times, counts):
    """Linearly interpolate row ``i`` of ``curves`` at its own ``counts[i]`` times.

    Parameters
    ----------
    curves : ndarray of shape (n, m)
        Values on ``grid``.
    grid : ndarray of shape (m,)
        Increasing grid.
    times : ndarray of shape (sum(counts),)
        Query times, concatenated by row.
    counts : ndarray of shape (n,)
        Number of query times of each row.

    Returns
    -------
    ndarray of shape (sum(counts),)
    """
    row, pos, step, offset = grid_segments(grid, times, counts)
    left = curves[row, pos]
    return left + (offset / step) * (curves[row, pos + 1] - left)


def grid_segments(grid, times, counts):
    """Locate per-row query times on ``grid`` (see :func:`interpolate_rows`).

    Returns the row of each time, the index of the grid interval holding it
    (clamped to the first and last intervals, so ends extrapolate), the
    interval's length and the time's offset from its left end.
    """
    row = np.repeat(np.arange(len(counts)), counts)
    pos = np.clip(np.searchsorted(grid, times, side="right") - 1, 0, grid.size - 2)
    return row, pos, grid[pos + 1] - grid[pos], times - grid[pos]


def _is_ragged(times):
    """Whether ``times`` is a sequence of per-subject arrays (not a flat array)."""
    if isinstance(times, np.ndarray):
        return times.dtype == object
    return len(times) > 0 and np.ndim(times[0]) >= 1
