"""Kernel smoothing building blocks: kernels, binning, local-linear fits.

Three thin layers, each testable alone: kernel functions, the weighted
local-linear fit at a set of evaluation points, and bandwidth selection by
generalised cross-validation (GCV) or leave-one-out cross-validation.
Kernels are scaled so that ``K(0) = 1``; a local fit's total weight is then
an "effective number of observations".
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "KERNELS",
    "bin_data",
    "bandwidth_candidates",
    "get_kernel",
    "local_linear",
    "select_bandwidth",
]


def gaussian(u):
    """Gaussian kernel ``exp(-u^2 / 2)`` (scaled so that ``K(0) = 1``)."""
    return np.exp(-0.5 * u * u)


def epanechnikov(u):
    """Epanechnikov kernel ``max(0, 1 - u^2)`` (scaled so that ``K(0) = 1``)."""
    return np.clip(1.0 - u * u, 0.0, None)


KERNELS = {"gaussian": gaussian, "epanechnikov": epanechnikov}

# Support radius in bandwidths beyond which a kernel is negligible (< 1e-8).
KERNEL_RADIUS = {"gaussian": 6.1, "epanechnikov": 1.0}


def get_kernel(name):
    """Return the kernel function called ``name``."""
    try:
        return KERNELS[name]
    except KeyError:
        raise ValueError(
            f"kernel must be one of {sorted(KERNELS)}, got {name!r}"
        ) from None


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


def _local_sums(x, w, y, points, bandwidth, kernel, chunk=2_000_000):
    """Kernel-weighted moment sums S0, S1, S2, T0, T1 at each evaluation point."""
    kern = get_kernel(kernel)
    points = np.asarray(points, dtype=np.float64)
    out = np.empty((5, points.size))
    step = max(1, chunk // max(1, x.size))
    for start in range(0, points.size, step):
        stop = start + step
        d = x[None, :] - points[start:stop, None]
        k = kern(d / bandwidth) * w
        kd = k * d
        out[0, start:stop] = k.sum(1)
        out[1, start:stop] = kd.sum(1)
        out[2, start:stop] = (kd * d).sum(1)
        out[3, start:stop] = k @ y
        out[4, start:stop] = kd @ y
    return out


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
    s0, s1, s2, t0, t1 = _local_sums(x, w, y, points, bandwidth, kernel)
    s0 = s0 + ridge
    s2 = s2 + ridge * bandwidth**2
    det = s0 * s2 - s1 * s1
    scale = np.maximum(s0 * s2, np.finfo(float).tiny)
    if np.any(det <= 1e-12 * scale) or np.any(s0 <= 0):
        bad = np.asarray(points)[(det <= 1e-12 * scale) | (s0 <= 0)][0]
        raise ValueError(
            f"local-linear fit undefined at t={bad:g} with bandwidth {bandwidth:g} "
            "(fewer than two points in the window); use a larger bandwidth"
        )
    est = (s2 * t0 - s1 * t1) / det
    if derivative:
        return est, (s0 * t1 - s1 * t0) / det
    return est


def bandwidth_candidates(x, n=20, *, kernel="gaussian", min_points=2):
    """Geometric grid of bandwidths suited to pooled locations ``x``.

    From the smallest bandwidth whose windows each hold ``min_points``
    distinct locations (roughly) up to a quarter of the range.
    """
    distinct = np.unique(np.asarray(x, dtype=np.float64))
    span = distinct[-1] - distinct[0]
    if span <= 0:
        raise ValueError("all locations are equal; no bandwidth can be chosen")
    radius = KERNEL_RADIUS[kernel] if kernel == "epanechnikov" else 1.0
    gaps = np.diff(distinct)
    k = max(1, min_points - 1)
    widest = np.max(distinct[k:] - distinct[:-k]) if distinct.size > k else span
    h_min = max(widest / (2 * radius), np.max(gaps) / 2, span * 1e-3)
    h_max = max(span / 4, 1.5 * h_min)
    return np.geomspace(h_min, h_max, n)


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
    total = w.sum()
    scores = np.full(len(candidates), np.inf)
    for i, h in enumerate(candidates):
        s0, s1, s2, t0, t1 = _local_sums(x, w, y, x, h, kernel)
        det = s0 * s2 - s1 * s1
        if np.any(det <= 1e-12 * np.maximum(s0 * s2, np.finfo(float).tiny)):
            continue
        fit = (s2 * t0 - s1 * t1) / det
        hat = s2 / det  # weight of one unit observation on its own fit, K(0) = 1
        sq = within + w * (y - fit) ** 2
        rss = sq.sum()
        if criterion == "gcv":
            dof = np.sum(w * hat)
            if dof >= total:
                continue
            scores[i] = rss / total / (1.0 - dof / total) ** 2
        elif criterion == "loocv":
            if np.any(hat >= 1.0):
                continue
            scores[i] = np.sum(sq / (1.0 - hat) ** 2) / total
        else:
            raise ValueError(f"criterion must be 'gcv' or 'loocv', got {criterion!r}")
    if not np.isfinite(scores).any():
        raise ValueError("no candidate bandwidth gives a defined fit; widen the range")
    return float(candidates[int(np.argmin(scores))]), scores
