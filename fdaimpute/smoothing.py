"""Kernel smoothing building blocks: kernels, binning, local-linear fits.

Public front of the local-linear engine in :mod:`fdaimpute._numerics.local_linear`
(kernel functions, the weighted local-linear fit at a set of evaluation
points, and bandwidth selection by generalised or leave-one-out
cross-validation), plus binning of pooled observations.
Kernels are scaled so that ``K(0) = 1``; a local fit's total weight is then
an "effective number of observations".
"""

from __future__ import annotations

import numpy as np

# The kernels live with the engine; these are their public names.
from fdaimpute._numerics.local_linear import (
    KERNEL_RADIUS,
    KERNELS,
    bandwidth_grid,
    bandwidth_scores,
    epanechnikov,
    gaussian,
    get_kernel,
    moment_sums,
    solve_local_linear,
)

__all__ = [
    "KERNELS",
    "KERNEL_RADIUS",
    "bin_data",
    "bandwidth_candidates",
    "epanechnikov",
    "gaussian",
    "get_kernel",
    "local_linear",
    "select_bandwidth",
]


def bin_data(x, y, weights=None, *, n_bins=None, lo=None, hi=None):
    """Collapse pooled observations onto a regular grid of bin centres.

    Each observation goes to its nearest bin centre; bins keep the total
    weight, the weighted sum of ``y`` and of ``y**2``, so that weighted
    least-squares fits and residual sums of squares stay exact for data on
    the centres and nearly exact otherwise.

    Parameters
    ----------
    x, y : ndarray of shape (n,)
        Locations and values.
    weights : ndarray of shape (n,), default=None
        Observation weights (default 1).
    n_bins : int, default=None
        Number of bins; by default the number of distinct ``x`` when it is
        at most 400, else 400.
    lo, hi : float, default=None
        Range of the bin centres (default: range of ``x``).

    Returns
    -------
    centres, weight, sum_y, sum_y2 : ndarray of shape (n_bins,)
        Empty bins are dropped.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64)
    distinct = np.unique(x)
    if n_bins is None and distinct.size <= 400:
        centres = distinct
        idx = np.searchsorted(distinct, x)
    else:
        n_bins = 400 if n_bins is None else int(n_bins)
        lo = x.min() if lo is None else lo
        hi = x.max() if hi is None else hi
        centres = np.linspace(lo, hi, n_bins)
        step = (hi - lo) / (n_bins - 1) if n_bins > 1 else 1.0
        idx = np.clip(np.rint((x - lo) / step).astype(np.int64), 0, n_bins - 1)
    size = centres.size
    weight = np.bincount(idx, w, minlength=size)
    sum_y = np.bincount(idx, w * y, minlength=size)
    sum_y2 = np.bincount(idx, w * y * y, minlength=size)
    keep = weight > 0
    return centres[keep], weight[keep], sum_y[keep], sum_y2[keep]


def local_linear(
    x,
    y,
    points,
    bandwidth,
    *,
    weights=None,
    kernel="gaussian",
    derivative=False,
    ridge=0.0,
):
    """Weighted local-linear regression of ``y`` on ``x`` at ``points``.

    Solves, at each point ``s``, ``min_{a,b} sum_j w_j K((x_j - s)/h)
    (y_j - a - b (x_j - s))^2``; the estimate is ``a`` (and ``b`` for the
    derivative). ``y`` may be given as weighted bin sums by passing
    ``weights`` = bin weights and ``y`` = bin means.

    Parameters
    ----------
    x, y : ndarray of shape (n,)
        Data.
    points : ndarray of shape (m,)
        Evaluation points.
    bandwidth : float
        Kernel bandwidth ``h``.
    weights : ndarray of shape (n,), default=None
        Observation weights.
    kernel : {"gaussian", "epanechnikov"}, default="gaussian"
        Kernel.
    derivative : bool, default=False
        Also return the slope ``b``.
    ridge : float, default=0.0
        Added to the diagonal of the 2x2 normal equations (``ridge`` on the
        intercept, ``ridge * h**2`` on the slope), which keeps the fit
        defined where a window holds fewer than two points.

    Returns
    -------
    estimate : ndarray of shape (m,)
    slope : ndarray of shape (m,)
        Only when ``derivative=True``.

    Raises
    ------
    ValueError
        If the fit is undefined at some point (an empty or single-point
        window without ``ridge``): choose a larger bandwidth.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64)
    points = np.asarray(points, dtype=np.float64)
    sums = moment_sums(x, w, w * y, points, bandwidth, kernel)
    fit, slope, _ = solve_local_linear(sums, bandwidth, ridge=ridge, points=points)
    return (fit, slope) if derivative else fit


def bandwidth_candidates(x, n=20, *, kernel="gaussian", min_points=2):
    """Geometric grid of bandwidths suited to pooled locations ``x``.

    From the smallest bandwidth whose windows each hold ``min_points``
    distinct locations (roughly) up to a quarter of the range. The grid
    does not depend on ``kernel``.
    """
    return bandwidth_grid(x, n, gap="widest", min_points=min_points)


def select_bandwidth(
    x,
    y,
    candidates,
    *,
    weights=None,
    within_ss=None,
    kernel="gaussian",
    criterion="gcv",
):
    """Choose the bandwidth of a pooled local-linear smoother.

    Works on binned data (``x`` bin centres, ``y`` bin means, ``weights``
    bin weights) as well as raw data. The residual sum of squares and the
    trace of the smoother use each bin's points as sitting at its centre.

    Parameters
    ----------
    x, y : ndarray of shape (n,)
        Locations and values (or bin means).
    candidates : array-like
        Bandwidths to try.
    weights : ndarray of shape (n,), default=None
        Observation (or bin) weights.
    within_ss : ndarray of shape (n,), default=None
        For binned data, each bin's weighted sum of squares of its values
        about the bin mean (``sum_y2 - sum_y**2 / weight``); zero for raw data.
    kernel : {"gaussian", "epanechnikov"}, default="gaussian"
        Kernel.
    criterion : {"gcv", "loocv"}, default="gcv"
        Generalised or leave-one-out cross-validation.

    Returns
    -------
    best : float
        The chosen bandwidth.
    scores : ndarray
        The criterion for each candidate (``inf`` where undefined).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64)
    within = np.zeros_like(x) if within_ss is None else np.asarray(within_ss, float)
    scores = bandwidth_scores(x, w, w * y, within, candidates, kernel, criterion)
    if not np.isfinite(scores).any():
        raise ValueError("no candidate bandwidth gives a defined fit; widen the range")
    return float(candidates[int(np.argmin(scores))]), scores
