"""Observations onto bins, and the binned sums of the raw covariances.

Everything downstream works on *binned* data: observations are assigned to
bin centres (exactly, when the centres are the distinct observation times,
or by linear binning onto a regular grid), so the cost and memory of the
covariance step are O(n_bins^2), independent of the number of subjects
and of sum n_i^2. Local-linear fits on bins are exact for data sitting on
the centres, and accurate to O((bin width / bandwidth)^2) otherwise.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass
class Bins:
    """Assignment of observations to bin centres.

    ``index[j, q]`` and ``weight[j, q]`` (q < p) give the bins of observation
    ``j`` and its share in each (``p = 1`` for exact binning, 2 for linear
    binning; shares sum to one).
    """

    centres: np.ndarray
    index: np.ndarray
    weight: np.ndarray
    exact: bool

    def spread(self, values):
        """Sum ``values`` (one per observation) into the bins."""
        return np.bincount(
            self.index.ravel(),
            (self.weight * np.asarray(values)[:, None]).ravel(),
            minlength=self.centres.size,
        )

    def interpolate(self, on_centres):
        """Values at the observations of a function known at the centres."""
        return np.sum(self.weight * on_centres[self.index], axis=1)

    def subset(self, mask):
        """The bins of the observations selected by ``mask``."""
        return Bins(self.centres, self.index[mask], self.weight[mask], self.exact)


def make_bins(times, *, n_bins=None, lo=None, hi=None):
    """Exact bins at the distinct times (``n_bins=None``) or linear binning.

    Parameters
    ----------
    times : ndarray of shape (n_obs,)
        Observation times.
    n_bins : int or None
        ``None``: one bin per distinct time (exact). An int: that many
        equally spaced centres on ``[lo, hi]`` with linear binning (each
        observation split between its two neighbouring centres).
    lo, hi : float
        Range of the regular centres (default: range of ``times``).

    Returns
    -------
    Bins
    """
    times = np.asarray(times, dtype=np.float64)
    if n_bins is None:
        centres, inverse = np.unique(times, return_inverse=True)
        return Bins(centres, inverse.reshape(-1, 1), np.ones((times.size, 1)), True)
    lo = times.min() if lo is None else lo
    hi = times.max() if hi is None else hi
    centres = np.linspace(lo, hi, int(n_bins))
    step = (hi - lo) / (n_bins - 1)
    pos = np.clip((times - lo) / step, 0.0, n_bins - 1)
    left = np.minimum(np.floor(pos).astype(np.int64), n_bins - 2)
    frac = pos - left
    index = np.stack([left, left + 1], axis=1)
    weight = np.stack([1.0 - frac, frac], axis=1)
    return Bins(centres, index, weight, False)


def bins_on(centres, times):
    """Linear binning of ``times`` onto given increasing ``centres``.

    A time equal to a centre goes wholly to it (so the exact bins of
    :func:`make_bins` are reproduced for times among their centres); others
    are split between their two neighbours, and times outside the centres
    go to the nearer end.

    Parameters
    ----------
    centres : ndarray of shape (n_bins,)
        At least two increasing bin centres.
    times : ndarray of shape (n_obs,)
        Observation times.

    Returns
    -------
    Bins
    """
    centres = np.asarray(centres, dtype=np.float64)
    times = np.asarray(times, dtype=np.float64)
    right = np.clip(np.searchsorted(centres, times, side="right"), 1, centres.size - 1)
    left = right - 1
    frac = (times - centres[left]) / (centres[right] - centres[left])
    frac = np.clip(frac, 0.0, 1.0)
    index = np.stack([left, right], axis=1)
    weight = np.stack([1.0 - frac, frac], axis=1)
    return Bins(centres, index, weight, False)


def choose_bins(times, binning, n_work_grid, lo, hi, *, max_exact=None):
    """The bins of PACEImputer's ``binning`` parameter.

    Parameters
    ----------
    times : ndarray of shape (n_obs,)
        Observation times.
    binning : "auto", int or False
        ``False``: exact bins; an int: that many linear bins on ``[lo, hi]``;
        ``"auto"``: exact bins when the distinct times form a regular grid
        of at most ``2 (n_work_grid - 1) + 1`` points (or number at most
        ``max_exact``), else that many linear bins.
    n_work_grid : int
        Points of the work grid.
    lo, hi : float
        Range of the linear bins.
    max_exact : int, default=None
        With ``"auto"``, also bin exactly up to this many distinct times,
        regular or not (fdapace's choice).

    Returns
    -------
    Bins
    """
    if binning is False:
        return make_bins(times)
    if isinstance(binning, numbers.Integral):
        return make_bins(times, n_bins=int(binning), lo=lo, hi=hi)
    distinct = np.unique(times)
    n_bins = 2 * (n_work_grid - 1) + 1
    if distinct.size <= n_bins and regular_step(distinct):
        return make_bins(times)
    if max_exact is not None and distinct.size <= max_exact:
        return make_bins(times)
    return make_bins(times, n_bins=n_bins, lo=lo, hi=hi)


def regular_step(x, rtol=1e-6):
    """Spacing of ``x`` if it is an equally spaced grid, else None."""
    x = np.asarray(x, dtype=np.float64)
    if x.size < 2:
        return None
    d = np.diff(x)
    step = (x[-1] - x[0]) / (x.size - 1)
    if step > 0 and np.all(np.abs(d - step) <= rtol * step):
        return float(step)
    return None


@dataclass
class CovMoments:
    """Binned raw-covariance sums on ``centres x centres``.

    ``count``, ``total`` and ``total_sq`` are the (weighted) number of raw
    products (y_ij - mu)(y_ik - mu), their sum and the sum of their squares,
    over pairs ``j != k`` (or all pairs without measurement error); ``diag_*``
    are the same over ``j == k`` on the centres (1-D).
    """

    centres: np.ndarray
    count: np.ndarray
    total: np.ndarray
    total_sq: np.ndarray
    diag_count: np.ndarray
    diag_total: np.ndarray
    diag_total_sq: np.ndarray


#: Entries of the dense subjects x bins block that :func:`_gram` multiplies at
#: once (4 MiB of float64: no slower than larger blocks, which raised the
#: peak memory of a whole PACE job).
GRAM_BLOCK = 1 << 19

#: Up to this many bins the binned sums per subject are multiplied as a dense
#: block (one BLAS product); beyond, as a sparse matrix, whose cost follows
#: the observations per subject instead of the bins squared.
DENSE_GRAM_BINS = 128


def _gram(index, subject, n_subjects, n_bins, values):
    """``Z^T Z`` for ``Z[i, b] = sum_j values[j, q]`` over subject ``i``'s
    observations ``j`` with ``index[j, q] == b``.

    Subjects must come in order (``subject`` nondecreasing), as flat
    storage keeps them.
    """
    p = index.shape[1]
    if n_bins <= DENSE_GRAM_BINS:
        out = np.zeros((n_bins, n_bins))
        per_block = max(1, GRAM_BLOCK // n_bins)
        firsts = np.searchsorted(subject, np.arange(0, n_subjects, per_block))
        ends = np.append(firsts[1:], subject.size)
        for lo, hi, first in zip(firsts, ends, range(0, n_subjects, per_block)):
            key = (subject[lo:hi, None] - first) * n_bins + index[lo:hi]
            rows = min(per_block, n_subjects - first)
            z = np.bincount(key.ravel(), values[lo:hi].ravel(), minlength=rows * n_bins)
            z = z.reshape(rows, n_bins)
            out += z.T @ z
        return out
    indptr = np.zeros(n_subjects + 1, dtype=np.int64)
    np.cumsum(np.bincount(subject, minlength=n_subjects) * p, out=indptr[1:])
    z = sp.csr_matrix(
        (values.ravel(), index.ravel(), indptr), shape=(n_subjects, n_bins)
    )
    return (z.T @ z).toarray()


def covariance_moments(bins, resid, subject, n_subjects, *, include_diagonal=False):
    """Sum the raw covariances of each subject's residual pairs into bins.

    With ``Z[i, b] = sum_j w_jb r_ij`` the all-pairs sums are ``Z^T Z``; the
    ``j == k`` terms are removed afterwards, so no pair is ever materialised.

    Parameters
    ----------
    bins : Bins
        Bins of the observations.
    resid : ndarray of shape (n_obs,)
        Residuals from the mean.
    subject : ndarray of int of shape (n_obs,)
        Subject of each observation.
    n_subjects : int
        Number of subjects.
    include_diagonal : bool, default=False
        Also count the products of an observation with itself.

    Returns
    -------
    CovMoments
    """
    n_bins = bins.centres.size
    n_obs, p = bins.index.shape
    subject = np.asarray(subject)
    if n_obs > 1 and np.any(subject[1:] < subject[:-1]):
        order = np.argsort(subject, kind="stable")
        bins, resid, subject = (
            bins.subset(order),
            np.asarray(resid)[order],
            subject[order],
        )
    w = bins.weight
    r = np.asarray(resid)
    r2 = r * r

    def gram(values):
        return _gram(bins.index, subject, n_subjects, n_bins, values)

    count = gram(w)
    total = gram(w * r[:, None])
    total_sq = gram(w * r2[:, None])
    if not include_diagonal:
        # sum over observations of w_ja w_jb v_j on cell (a, b)
        cell = (bins.index[:, :, None] * n_bins + bins.index[:, None, :]).ravel()
        pairs = (w[:, :, None] * w[:, None, :]).reshape(n_obs, p * p)

        def self_pairs(v):
            weights = pairs if v is None else pairs * v[:, None]
            flat = np.bincount(cell, weights.ravel(), minlength=n_bins * n_bins)
            return flat.reshape(n_bins, n_bins)

        count -= self_pairs(None)
        total -= self_pairs(r2)
        total_sq -= self_pairs(r2 * r2)
        np.clip(count, 0.0, None, out=count)
    return CovMoments(
        bins.centres,
        count,
        total,
        total_sq,
        bins.spread(np.ones_like(r2)),
        bins.spread(r2),
        bins.spread(r2 * r2),
    )
