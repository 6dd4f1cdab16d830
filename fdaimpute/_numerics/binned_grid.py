"""Imputers that fill a subject x time-bin matrix: binning and the curves.

MICE and GAIN work on the same object: each subject's observations averaged
into time bins, a matrix with missing cells, which the method fills; the
curve is the linear interpolation of the filled row between the bin
centres. :class:`BinnedGridMixin` holds everything but the filling.
"""

from __future__ import annotations

import numpy as np

from fdaimpute._numerics.interpolate import (
    interpolate_rows,
    interpolate_shared,
    slope_shared,
)

__all__ = ["BinnedGridMixin"]

#: Times closer than this share of the time range fall in one bin.
TIME_TOLERANCE = 1e-9


class BinnedGridMixin:
    """Time bins, binned matrices and piecewise-linear curves of filled rows.

    The class using it provides ``n_bins``, ``time_range_`` and
    ``_filled(data)``, the filled ``(n_subjects, n_bins_)`` matrix of
    ``data``; it calls :meth:`_fit_bins` in its ``_fit`` before binning.
    """

    def _fit_bins(self, data):
        """Set ``bin_edges_`` and ``bin_centres_`` from the training times.

        By default one bin per distinct time when there are at most 101 of
        them (the centres are then the times themselves), else 51
        equal-width bins. Bins that no training subject observes are merged
        into a neighbour (see :meth:`_merge_empty_bins`): equal-width bins
        between visits. Times closer than ``1e-9`` of the time range (a unit
        in the last place, ``0.1 + 0.2`` beside ``0.3``, a time parsed one
        bit off) count as one time: otherwise such a difference would add a
        bin and change the filled matrix wholesale.
        """
        distinct = np.unique(data.times)
        lo, hi = self.time_range_
        if distinct.size > 1:
            apart = np.diff(distinct) > TIME_TOLERANCE * (hi - lo)
            distinct = distinct[np.r_[True, apart]]
        if self.n_bins is None:
            n_bins = distinct.size if distinct.size <= 101 else 51
        else:
            n_bins = int(self.n_bins)
        if n_bins == distinct.size:
            # One bin per distinct time: centres are the times themselves.
            mids = (distinct[1:] + distinct[:-1]) / 2
            self.bin_edges_ = np.concatenate([[-np.inf], mids, [np.inf]])
            self.bin_centres_ = distinct
        else:
            lo, hi = self.time_range_
            self.bin_edges_ = np.linspace(lo, hi, n_bins + 1)
            self.bin_centres_ = (self.bin_edges_[1:] + self.bin_edges_[:-1]) / 2
        self._merge_empty_bins(data)

    def _merge_empty_bins(self, data):
        """Join each bin no training subject observes to the next observed one.

        The last bins join the previous observed bin. Curves then interpolate
        across the gap instead of imputing a column without data.
        """
        n_bins = self.bin_centres_.size
        occupied = np.bincount(self._bin_of(data.times), minlength=n_bins) > 0
        if occupied.all():
            return
        group = np.minimum(np.cumsum(occupied) - occupied, occupied.sum() - 1)
        interior = np.flatnonzero(group[1:] != group[:-1]) + 1
        self.bin_edges_ = self.bin_edges_[np.r_[0, interior, n_bins]]
        self.bin_centres_ = self.bin_centres_[occupied]

    def _bin_of(self, times):
        """Bin index of each time; a time on an edge goes right in any unit."""
        lo, hi = self.time_range_
        slack = TIME_TOLERANCE * (hi - lo)
        if self.bin_centres_.size > 1:
            # at most a quarter of the closest centres' gap: no centre moves
            slack = min(slack, float(np.diff(self.bin_centres_).min()) / 4)
        col = np.searchsorted(self.bin_edges_, times + slack, "right") - 1
        return np.clip(col, 0, self.bin_centres_.size - 1)

    def _binned(self, data):
        """Average each subject's observations within each bin; NaN if none."""
        n_bins = self.bin_centres_.size
        col = self._bin_of(data.times)
        cell = data.subject_index * n_bins + col
        size = len(data) * n_bins
        count = np.bincount(cell, minlength=size)
        total = np.bincount(cell, data.values, minlength=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (total / count).reshape(len(data), n_bins)

    def _interpolate(self, filled, grid):
        """Rows of ``filled`` (on the bin centres) at common times ``grid``."""
        return interpolate_shared(filled, self.bin_centres_, grid)

    def _transform_grid(self, data, grid, return_std=False):
        if return_std:
            raise NotImplementedError(
                f"{type(self).__name__} does not estimate uncertainty "
                "(return_std=True is not supported)"
            )
        return self._interpolate(self._filled(data), grid)

    def _derivative_grid(self, data, grid):
        return slope_shared(self._filled(data), self.bin_centres_, grid)

    def _predict_ragged(self, data, times, offsets):
        filled = self._filled(data)
        centres = self.bin_centres_
        inside = np.clip(times, centres[0], centres[-1])
        return interpolate_rows(filled, centres, inside, np.diff(offsets))
