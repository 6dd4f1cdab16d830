"""Where the imputers evaluate: output grids and per-subject query times."""

from __future__ import annotations

import numpy as np

from fdaimpute._core.blocks import check_output_fits
from fdaimpute._core.coerce import check_not_datetime
from fdaimpute._core.ids import subject_label
from fdaimpute._core.validation import check_times_in_range, first_outside, resolve_grid

__all__ = ["QueryMixin"]


class QueryMixin:
    """Query handling of :class:`~fdaimpute.BaseImputer`.

    Turns the times a caller asks for (a grid, common times, per-subject
    times) into what the hooks accept: sorted within each subject and,
    under ``extrapolate="clip"``, inside the training range. Needs
    ``time_range_``, ``grid_`` and the ``_extrapolation()`` of the
    estimator.
    """

    def _query_grid(self, grid):
        """Checked ``grid`` argument of transform or derivative (``grid_`` if None)."""
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

    def _predict_common(self, data, times):
        """Every subject at the same 1-D ``times``: shape (n_subjects, n_times)."""
        common = np.asarray(times, dtype=np.float64)
        if common.size == 0 or not np.all(np.isfinite(common)):
            raise ValueError("times must be a non-empty array of finite numbers")
        n = len(data)
        check_times_in_range(common, self.time_range_, self._extrapolation())
        check_output_fits(n, common.size, what="prediction")
        flat = np.tile(common, n)
        offsets = np.arange(n + 1) * common.size
        out = self._predict_flat(data, flat, offsets).reshape(n, common.size)
        return self._wrap(out, data, common)

    def _predict_per_subject(self, data, times):
        """Subject ``i`` at ``times[i]``: a list of 1-D arrays."""
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

    def _check_query_in_range(self, data, flat, offsets):
        """Raise, naming the subject, when a query time leaves the training range."""
        if self._extrapolation():
            return
        j = first_outside(flat, self.time_range_)
        if j is not None:
            lo, hi = self.time_range_
            i = int(np.searchsorted(offsets, j, side="right") - 1)
            raise ValueError(
                f"{subject_label(data.ids, i)}: query time {flat[j]:g} is outside "
                f"the training range [{lo:g}, {hi:g}]; pass extrapolate=True, or "
                "extrapolate='clip' to hold each curve constant beyond it"
            )

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
