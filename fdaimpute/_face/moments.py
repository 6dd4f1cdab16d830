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
    """Each observation's products ``b_a b_{a+d}`` (``0 <= d <= degree``).

    Returns the row of each entry, its column ``a (degree + 1) + d`` and value.
    """
    width = degree + 1
    n_obs = bmat.shape[0]
    if not np.all(np.diff(bmat.indptr) == width):
        raise AssertionError("a B-spline design row must hold degree + 1 entries")
    vals = bmat.data.reshape(n_obs, width)
    first = bmat.indices.reshape(n_obs, width)[:, 0]
    i, d = np.array([(i, d) for i in range(width) for d in range(width - i)]).T
    cols = (first[:, None] + i) * width + d
    values = vals[:, i] * vals[:, i + d]
    rows = np.broadcast_to(np.arange(n_obs)[:, None], cols.shape)
    return rows.ravel(), cols.ravel(), values.ravel()


def _band_index(c, degree):
    """Column of band entry ``(a, b)`` (symmetric), or ``c (degree + 1)`` outside."""
    width = degree + 1
    a, b = np.meshgrid(np.arange(c), np.arange(c), indexing="ij")
    idx = np.minimum(a, b) * width + np.abs(a - b)
    return np.where(np.abs(a - b) < width, idx, c * width)


def pair_moments(bmat, resid, offsets, degree):
    """The statistics of :class:`PairMoments` from the basis rows and residuals.

    Parameters
    ----------
    bmat : scipy.sparse.csr_matrix of shape (n_obs, c)
        B-spline design at the observation times.
    resid : ndarray of shape (n_obs,)
        Residuals from the mean.
    offsets : ndarray of shape (n_subjects + 1,)
        CSR offsets of the subjects.
    degree : int
        Degree of the B-splines.

    Returns
    -------
    pairs : PairMoments
        Over the off-diagonal pairs.
    diagonal : DiagonalMoments
        Over the raw variances.
    """
    c = bmat.shape[1]
    ncol = c * (degree + 1)
    band = np.zeros((ncol, ncol))
    single_band = np.zeros((ncol, ncol))
    z_outer = np.zeros((c, c))
    diag_xty = np.zeros((c, c))
    yty = 0.0
    for lo, hi in _subject_blocks(offsets):
        start, stop = offsets[lo], offsets[hi]
        part = bmat[start:stop]
        r = resid[start:stop]
        subject = np.repeat(np.arange(hi - lo), np.diff(offsets[lo : hi + 1]))
        rows, cols, vals = _band_entries(part, degree)
        per_subject = np.bincount(
            subject[rows] * ncol + cols, weights=vals, minlength=(hi - lo) * ncol
        ).reshape(hi - lo, ncol)
        single = csr_matrix((vals, (rows, cols)), shape=(stop - start, ncol))
        single_gram = (single.T @ single).toarray()
        band += per_subject.T @ per_subject - single_gram
        single_band += single_gram
        weighted = part.multiply(r[:, None]).tocsr()
        coo = weighted.tocoo()
        z = np.bincount(
            subject[coo.row] * c + coo.col, weights=coo.data, minlength=(hi - lo) * c
        ).reshape(hi - lo, c)
        own = (weighted.T @ weighted).toarray()
        z_outer += z.T @ z - own
        diag_xty += own
        r2 = np.bincount(subject, r * r, minlength=hi - lo)
        yty += float(r2 @ r2 - np.sum(r**4))
    counts = np.diff(offsets).astype(float)
    n_pairs = float(np.sum(counts * (counts - 1)))
    pairs = PairMoments(
        _kron_layout(band, c, degree) / 2, z_outer.ravel() / 2, yty / 2, n_pairs / 2
    )
    diagonal = DiagonalMoments(
        _kron_layout(single_band, c, degree),
        diag_xty.ravel(),
        float(np.sum(resid**4)),
        np.asarray((bmat.T @ bmat).todense()).ravel(),
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
