"""Sufficient statistics of the raw-covariance regression, without forming pairs.

The raw covariances are the products ``r_ij r_ik`` of residuals of one
subject at two different observations (``j != k``), regressed on the
tensor-product basis ``b(t_ij) (x) b(t_ik)``. With ``Q_i = B_i^T B_i`` and
``z_i = B_i^T r_i`` (``B_i`` the subject's basis rows),

    X^T X = sum_i Q_i (x) Q_i - sum_j (b_j b_j^T) (x) (b_j b_j^T),
    X^T y = vec(sum_i z_i z_i^T - sum_j r_j^2 b_j b_j^T),
    y^T y = sum_i (sum_j r_j^2)^2 - sum_j r_j^4,

summed over ordered pairs. ``Q_i`` is banded (B-splines of degree ``p``
overlap ``p + 1`` at a time), so the first sum is the Gram matrix of the
subjects' band entries: ``O(n c^2 p^2)`` work for ``n`` subjects and ``c``
basis functions, however many observations each has.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix

from fdaimpute._fpca.splines import design

# Observations per block: bounds the per-subject band arrays in memory.
_BLOCK_OBS = 500_000


@dataclass
class PairMoments:
    """``X^T X``, ``X^T y``, ``y^T y`` of the off-diagonal raw covariances.

    Over unordered pairs, in the full (``vec``) parametrisation: ``xtx`` has
    shape ``(c^2, c^2)``, ``xty`` shape ``(c^2,)``; ``n_pairs`` counts them.
    """

    xtx: np.ndarray
    xty: np.ndarray
    yty: float
    n_pairs: float


@dataclass
class DiagonalMoments:
    """The same for the raw variances ``r_j^2`` on ``b(t_j) (x) b(t_j)``.

    ``basis_sum`` is ``vec(sum_j b_j b_j^T)`` (the regressors summed),
    ``sum_y`` the sum of ``r_j^2`` and ``n_obs`` their number.
    """

    xtx: np.ndarray
    xty: np.ndarray
    yty: float
    basis_sum: np.ndarray
    sum_y: float
    n_obs: float


def _band_entries(bmat, degree):
    """Each row's products ``b_a b_{a+d}`` (``0 <= d <= degree``).

    Returns the columns ``a (degree + 1) + d`` and values, shape
    ``(n_rows, (degree + 1) (degree + 2) / 2)`` each.
    """
    width = degree + 1
    n_rows = bmat.shape[0]
    if not np.all(np.diff(bmat.indptr) == width):
        raise AssertionError("a B-spline design row must hold degree + 1 entries")
    vals = bmat.data.reshape(n_rows, width)
    first = bmat.indices.reshape(n_rows, width)[:, 0]
    i, d = np.array([(i, d) for i in range(width) for d in range(width - i)]).T
    return (first[:, None] + i) * width + d, vals[:, i] * vals[:, i + d]


def _band_index(c, degree):
    """Column of band entry ``(a, b)`` (symmetric), or ``c (degree + 1)`` outside."""
    width = degree + 1
    a, b = np.meshgrid(np.arange(c), np.arange(c), indexing="ij")
    idx = np.minimum(a, b) * width + np.abs(a - b)
    return np.where(np.abs(a - b) < width, idx, c * width)


def _weighted_gram(cols, vals, weights, ncol):
    """``sum_k w_k u_k u_k^T`` for sparse rows ``u_k`` given by columns and values."""
    rows = np.repeat(np.arange(cols.shape[0]), cols.shape[1])
    u = csr_matrix((vals.ravel(), (rows, cols.ravel())), shape=(cols.shape[0], ncol))
    return (u.T @ u.multiply(weights[:, None])).toarray()


def pair_moments(times, resid, offsets, knots, degree):
    """The statistics of the raw-covariance regression, from the observations.

    Parameters
    ----------
    times, resid : ndarray of shape (n_obs,)
        Observation times (inside the knots) and residuals from the mean.
    offsets : ndarray of shape (n_subjects + 1,)
        CSR offsets of the subjects.
    knots : ndarray
        Knot vector of the B-spline basis (``c`` functions).
    degree : int
        Degree of the B-splines.

    Returns
    -------
    pairs : PairMoments
        Over the off-diagonal pairs.
    diagonal : DiagonalMoments
        Over the raw variances.
    """
    # The basis is evaluated once per distinct time; the per-observation
    # terms of the diagonal are sums over observations at one time.
    distinct, inverse, counts = np.unique(
        times, return_inverse=True, return_counts=True
    )
    bmat = design(distinct, knots, degree)
    c, width = bmat.shape[1], degree + 1
    ncol = c * width
    band_cols, band_vals = _band_entries(bmat, degree)
    basis_cols = bmat.indices.reshape(-1, width)
    basis_vals = bmat.data.reshape(-1, width)
    r2_at = np.bincount(inverse, resid * resid, minlength=distinct.size)
    single_band = _weighted_gram(band_cols, band_vals, counts.astype(float), ncol)
    own = _weighted_gram(basis_cols, basis_vals, r2_at, c)
    band = -single_band
    z_outer = -own
    yty = -float(np.sum(resid**4))
    for lo, hi in _subject_blocks(offsets):
        start, stop = offsets[lo], offsets[hi]
        at, r = inverse[start:stop], resid[start:stop]
        subject = np.repeat(np.arange(hi - lo), np.diff(offsets[lo : hi + 1]))
        per_subject = np.bincount(
            (subject[:, None] * ncol + band_cols[at]).ravel(),
            weights=band_vals[at].ravel(),
            minlength=(hi - lo) * ncol,
        ).reshape(hi - lo, ncol)
        band += per_subject.T @ per_subject
        z = np.bincount(
            (subject[:, None] * c + basis_cols[at]).ravel(),
            weights=(basis_vals[at] * r[:, None]).ravel(),
            minlength=(hi - lo) * c,
        ).reshape(hi - lo, c)
        z_outer += z.T @ z
        r2 = np.bincount(subject, r * r, minlength=hi - lo)
        yty += float(r2 @ r2)
    n_obs = np.diff(offsets).astype(float)
    n_pairs = float(np.sum(n_obs * (n_obs - 1)))
    pairs = PairMoments(
        _kron_layout(band, c, degree) / 2, z_outer.ravel() / 2, yty / 2, n_pairs / 2
    )
    diagonal = DiagonalMoments(
        _kron_layout(single_band, c, degree),
        own.ravel(),
        float(np.sum(resid**4)),
        _weighted_gram(basis_cols, basis_vals, counts.astype(float), c).ravel(),
        float(resid @ resid),
        float(resid.size),
    )
    return pairs, diagonal


def _kron_layout(band, c, degree):
    """``X^T X`` in ``vec`` order from the Gram matrix of the band entries.

    Entry ``[(a, b), (a', b')]`` is ``W[e(a, a'), e(b, b')]``, ``e`` the band
    column of a pair of basis functions (zero outside the band).
    """
    ncol = band.shape[0]
    idx = _band_index(c, degree)
    padded = np.zeros((ncol + 1, ncol + 1))
    padded[:ncol, :ncol] = band
    full = padded[idx[:, :, None, None], idx[None, None, :, :]]
    return full.transpose(0, 2, 1, 3).reshape(c * c, c * c)


def _subject_blocks(offsets):
    """``(first, stop)`` subject ranges of about ``_BLOCK_OBS`` observations."""
    n = offsets.size - 1
    cuts = np.searchsorted(offsets, np.arange(_BLOCK_OBS, offsets[-1], _BLOCK_OBS))
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]]))
    return list(zip(bounds[:-1], bounds[1:]))
