"""The estimator contract shared by every imputer."""

from __future__ import annotations

import numpy as np
import sklearn
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from fdaimpute._interpolate import interpolate_rows
from fdaimpute._params import Boolean, validate_params
from fdaimpute._validation import (
    as_irregular,
    check_extrapolate,
    check_grid,
    check_in_range,
    check_times_in_range,
    frame_axes,
    resolve_grid,
    rounding_slack,
)
from fdaimpute.data import IrregularData, check_not_datetime, subject_label

__all__ = ["BaseImputer"]

_OUTPUT_KEY = "_sklearn_output_config"  # the attribute sklearn.clone copies


class BaseImputer(TransformerMixin, BaseEstimator):
    """Base class of the imputers: input handling, output grid and output format.

    Subclasses implement ``_fit(data)`` and ``_transform_grid(data, grid,
    return_std)``; optionally ``_derivative_grid(data, grid)`` and
    ``_predict_ragged(data, times, offsets)`` (the default interpolates a
    fine grid). The hooks always see query times sorted within each subject
    and, with ``extrapolate="clip"``, inside the training range. Every
    subclass takes the ``grid``, ``extrapolate`` and ``keep_observed``
    parameters.

    Accepted inputs ``X`` (for ``fit``, ``transform`` and the rest):

    - an :class:`~fdaimpute.IrregularData`;
    - a long :class:`pandas.DataFrame` with columns ``id``, ``time``,
      ``value`` (other column names: read it with
      :meth:`IrregularData.from_long <fdaimpute.IrregularData.from_long>`;
      a three-column frame that looks long raises an error saying so);
    - a list of ``(times, values)`` pairs, one per subject;
    - a 2-D array or wide DataFrame with one row per subject and ``NaN``
      where unobserved. A DataFrame's numeric column labels are the column
      times and its index holds the subject ids (a default ``RangeIndex``
      carries neither). Otherwise the columns sit at the times given by
      ``grid`` when it is an array with one entry per column, else equally
      spaced on ``[0, 1]``. With ``grid=None`` the output grid is those
      column times, so ``fit_transform`` fills in the matrix like any
      scikit-learn imputer.

    Times must be numbers: dates and durations raise a TypeError (convert
    them, e.g. to days since the first visit).

    The output is each subject's estimated *smooth* curve: observed cells
    of a matrix are denoised too, not copied. Pass ``keep_observed=True`` to
    put the observed value back wherever a grid time equals one of the
    subject's observation times (its standard deviation is then 0).

    Output times may lie slightly outside the training range (half the
    grid's end spacing, at most 5% of the range) without error; beyond
    that, ``extrapolate=True`` lets the method extend its curves and
    ``extrapolate="clip"`` holds each curve at its value at the nearest end
    of the range (derivative 0 there). Both also accept new subjects
    observed outside the range, using those observations as they are.
    """

    # Every parameter's accepted values (see fdaimpute._params); subclasses
    # extend this dict. ``grid`` and ``extrapolate`` have checks of their own.
    _param_constraints = {"keep_observed": [Boolean()]}

    def __init_subclass__(cls, **kwargs):
        # Output wrapping is done here (indexed by subject id), not by sklearn.
        kwargs.setdefault("auto_wrap_output_keys", None)
        super().__init_subclass__(**kwargs)

    # ------------------------------------------------------------------ #
    # input handling
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
        data = as_irregular(X)
        if data is not None:
            if len(data) == 0:
                raise ValueError("no subjects: X is empty")
            return data
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

    def _extrapolation(self):
        return check_extrapolate(getattr(self, "extrapolate", False))

    # ------------------------------------------------------------------ #
    # public API
    def fit(self, X, y=None):
        """Fit the imputer on training subjects.

        A fit that raises leaves the estimator unfitted, even if it was
        fitted before: never half-fitted with attributes of two fits.

        Parameters
        ----------
        X : IrregularData, DataFrame, list of (t, y) pairs or 2-D array
            Training subjects (see the class description for the formats).
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted imputer.
        """
        try:
            validate_params(self)
            extrapolate = self._extrapolation()
            data = self._validate_input(X, reset=True)
            self.time_range_ = data.time_range
            dense_times = getattr(self, "dense_times_", None)
            grid = resolve_grid(self.grid, self.time_range_, dense_times)
            check_times_in_range(grid, self.time_range_, extrapolate)
            self.grid_ = grid
            self.n_subjects_fit_ = len(data)
            self._fit(data)
        except BaseException:
            self._clear_fitted()
            raise
        return self

    def _clear_fitted(self):
        """Remove every fitted attribute (public names ending in ``_``)."""
        for name in [k for k in vars(self) if k.endswith("_") and k[0] != "_"]:
            delattr(self, name)

    def fit_transform(self, X, y=None, return_std=False):
        """Fit on ``X``, then impute the same subjects on ``grid_``.

        Parameters
        ----------
        X : IrregularData, DataFrame, list of (t, y) pairs or 2-D array
            Training subjects.
        y : None
            Ignored.
        return_std : bool, default=False
            Also return the pointwise standard deviation (see
            :meth:`transform`).

        Returns
        -------
        curves : ndarray or DataFrame of shape (n_subjects, n_grid)
        std : ndarray or DataFrame of shape (n_subjects, n_grid)
            Only when ``return_std=True``.
        """
        return self.fit(X, y).transform(X, return_std=return_std)

    def transform(self, X, return_std=False, grid=None):
        """Impute each subject's curve on the output grid.

        Parameters
        ----------
        X : IrregularData, DataFrame, list of (t, y) pairs or 2-D array
            Subjects to impute; new subjects are the normal case.
        return_std : bool, default=False
            Also return the pointwise standard deviation of each imputed
            value, where the method supports it.
        grid : int or array-like, default=None
            Where to evaluate; defaults to the fitted ``grid_``.

        Returns
        -------
        curves : ndarray or DataFrame of shape (n_subjects, n_grid)
            One row per input subject, in input order; a DataFrame indexed
            by subject id after ``set_output(transform="pandas")``. These
            are smoothed curves: observed cells are denoised unless
            ``keep_observed=True``.
        std : ndarray or DataFrame of shape (n_subjects, n_grid)
            Only when ``return_std=True``.
        """
        data = self._check_transform_input(X)
        grid = self._query_grid(grid)
        inner, cols, _ = self._clipped(grid)
        if return_std:
            curves, std = self._transform_grid(data, inner, return_std=True)
            curves, std = curves[:, cols], std[:, cols]
            self._check_finite(curves, data, "imputed curve")
            self._check_finite(std, data, "standard deviation")
            curves, std = self._keep_observed(data, grid, curves, std)
            return self._wrap(curves, data, grid), self._wrap(std, data, grid)
        curves = self._transform_grid(data, inner, return_std=False)[:, cols]
        self._check_finite(curves, data, "imputed curve")
        curves, _ = self._keep_observed(data, grid, curves)
        return self._wrap(curves, data, grid)

    def derivative(self, X, grid=None):
        """First derivative of each subject's imputed curve.

        Parameters
        ----------
        X : IrregularData, DataFrame, list of (t, y) pairs or 2-D array
            Subjects.
        grid : int or array-like, default=None
            Where to evaluate; defaults to ``grid_``.

        Returns
        -------
        ndarray or DataFrame of shape (n_subjects, n_grid)
            With ``extrapolate="clip"`` the derivative is 0 outside the
            training range.
        """
        data = self._check_transform_input(X)
        grid = self._query_grid(grid)
        inner, cols, outside = self._clipped(grid)
        deriv = self._derivative_grid(data, inner)[:, cols]
        deriv[:, outside] = 0.0
        self._check_finite(deriv, data, "derivative")
        return self._wrap(deriv, data, grid)

    def predict_at(self, X, times=None):
        """Evaluate each subject's imputed curve at given times.

        Answers follow the order of the query times; a time may be repeated.

        Parameters
        ----------
        X : IrregularData, DataFrame, list of (t, y) pairs or 2-D array
            Subjects.
        times : None, array-like of shape (n_times,) or sequence of arrays
            ``None``: each subject at its own observation times. A 1-D
            array: the same times for every subject. A sequence with one
            1-D array per subject (lengths may differ, may be empty): each
            subject at its own query times.

        Returns
        -------
        IrregularData, ndarray, DataFrame or list of ndarray
            - ``times=None``: an IrregularData with the subjects'
              observation times and ids, and the imputed values as values;
            - common times: an array of shape (n_subjects, n_times), or a
              DataFrame indexed by subject id with ``"t=<time>"`` columns
              after ``set_output(transform="pandas")``;
            - per-subject times: a list with one 1-D array per subject,
              ``out[i][j]`` being subject ``i`` at ``times[i][j]``.
        """
        data = self._check_transform_input(X)
        if times is None:
            values = self._predict_flat(data, data.times, data.offsets)
            return data.with_values(values)
        check_not_datetime(times, "times")
        if not _is_ragged(times) and np.ndim(times) == 1:
            common = np.asarray(times, dtype=np.float64)
            if common.size == 0 or not np.all(np.isfinite(common)):
                raise ValueError("times must be a non-empty array of finite numbers")
            n = len(data)
            check_times_in_range(common, self.time_range_, self._extrapolation())
            flat = np.tile(common, n)
            offsets = np.arange(n + 1) * common.size
            out = self._predict_flat(data, flat, offsets).reshape(n, common.size)
            return self._wrap(out, data, common)
        if len(times) != len(data):
            raise ValueError(
                f"times has {len(times)} entries but X has {len(data)} subjects"
            )
        parts = [_query_times(t, data.ids, i) for i, t in enumerate(times)]
        counts = np.array([p.size for p in parts], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        flat = np.concatenate(parts) if parts else np.empty(0)
        if flat.size:
            self._check_query_in_range(data, flat, offsets)
        values = self._predict_flat(data, flat, offsets)
        return np.split(values, offsets[1:-1])

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
        check_in_range(data, self.time_range_, extrapolate=self._extrapolation())
        return data

    def _check_query_in_range(self, data, flat, offsets):
        if self._extrapolation():
            return
        lo, hi = self.time_range_
        slack = rounding_slack(self.time_range_)
        bad = (flat < lo - slack) | (flat > hi + slack)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            i = int(np.searchsorted(offsets, j, side="right") - 1)
            raise ValueError(
                f"{subject_label(data.ids, i)}: query time {flat[j]:g} is outside "
                f"the training range [{lo:g}, {hi:g}]; pass extrapolate=True, or "
                "extrapolate='clip' to hold each curve constant beyond it"
            )

    def _query_grid(self, grid):
        if grid is None:
            return self.grid_
        grid = resolve_grid(grid, self.time_range_)
        check_times_in_range(grid, self.time_range_, self._extrapolation())
        return grid

    def _clipped(self, grid):
        """Grid for the hooks under ``extrapolate="clip"``.

        Returns the grid to evaluate on (strictly increasing, inside the
        training range), the column of it that serves each point of
        ``grid``, and the mask of points of ``grid`` outside the range.
        """
        everything = slice(None)
        if self._extrapolation() != "clip":
            return grid, everything, np.zeros(grid.size, dtype=bool)
        lo, hi = self.time_range_
        outside = (grid < lo) | (grid > hi)
        if not outside.any():
            return grid, everything, outside
        clipped = np.clip(grid, lo, hi)
        inner = np.unique(clipped)
        if inner.size < 2:
            inner = np.unique(np.concatenate([inner, [lo, hi]]))
        return inner, np.searchsorted(inner, clipped), outside

    def _predict_flat(self, data, times, offsets):
        """``_predict_ragged`` on query times in any order, repeats allowed.

        The hook sees each subject's times sorted (and clipped to the
        training range under ``extrapolate="clip"``); values come back in
        the query's order.
        """
        if times.size == 0:
            return np.empty(0)
        if self._extrapolation() == "clip":
            times = np.clip(times, *self.time_range_)
        subject = np.repeat(np.arange(len(data)), np.diff(offsets))
        order = None
        if times.size > 1 and np.any(
            (np.diff(times) < 0) & (subject[1:] == subject[:-1])
        ):
            order = np.lexsort((times, subject))
            times = times[order]
        values = self._predict_ragged(data, times, offsets)
        self._check_finite(values, data, "prediction", flat_offsets=offsets)
        if order is None:
            return values
        out = np.empty_like(values)
        out[order] = values
        return out

    def _keep_observed(self, data, grid, curves, std=None):
        """Put observed values back where a grid time is an observation time.

        Returns new ``(curves, std)`` arrays (unchanged without ``keep_observed``).
        """
        if not getattr(self, "keep_observed", False):
            return curves, std
        t = data.times
        col = np.clip(np.searchsorted(grid, t), 1, grid.size - 1)
        nearer_left = np.abs(grid[col - 1] - t) <= np.abs(grid[col] - t)
        col = np.where(nearer_left, col - 1, col)
        gap = np.abs(grid[col] - t)
        hit = gap <= 1e-12 * np.maximum(np.abs(t), np.abs(grid[col]))
        rows = data.subject_index[hit]
        curves = np.array(curves, dtype=np.float64)
        curves[rows, col[hit]] = data.values[hit]
        if std is not None:
            std = np.array(std, dtype=np.float64)
            std[rows, col[hit]] = 0.0
        return curves, std

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
            grid = self.grid_ if grid is None else grid
            columns = np.asarray([f"t={t:.10g}" for t in grid], dtype=object)
        return pd.DataFrame(array, index=pd.Index(data.ids, name="id"), columns=columns)

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


def _query_times(t, ids, i):
    """One subject's query times as a 1-D float array (may be empty)."""
    label = subject_label(ids, i)
    check_not_datetime(t, f"{label}: query times")
    try:
        arr = np.asarray(t, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{label}: query times must be numbers") from None
    if arr.ndim != 1:
        raise ValueError(f"{label}: query times must be 1-D, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{label}: query times must be finite")
    return arr


def _is_ragged(times):
    """Whether ``times`` is a sequence of per-subject arrays (not a flat array)."""
    if isinstance(times, np.ndarray):
        return times.dtype == object
    return len(times) > 0 and np.ndim(times[0]) >= 1
