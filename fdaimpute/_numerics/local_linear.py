"""Local-linear smoothing in one dimension: the engine of the kernel imputer and PACE.

Every fit goes through the same three steps:

1. kernel-weighted moment sums ``S0, S1, S2, T0, T1`` at each evaluation
   point, either pooled (:func:`moment_sums`: every point against all
   locations, raw observations or bins with their weights and weighted sums)
   or per subject (:func:`subject_moment_sums`: each query against its own
   subject's observations);
2. the batched 2x2 solve (:func:`solve_local_linear`), optionally with a
   ridge pull toward a prior curve and slope;
3. for bandwidth choice, the GCV or leave-one-out score of each candidate
   (:func:`bandwidth_scores`) from a geometric grid (:func:`bandwidth_grid`).

Kernels are scaled so that ``K(0) = 1``; a window's total weight is then an
"effective number of observations" and ``(A^-1)_00`` the weight of one unit
observation at the evaluation point on its own fit (the hat value).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.interpolate import CubicHermiteSpline


def gaussian(u):
    """Gaussian kernel ``exp(-u^2 / 2)`` (scaled so that ``K(0) = 1``)."""
    return np.exp(-0.5 * u * u)


def epanechnikov(u):
    """Epanechnikov kernel ``max(0, 1 - u^2)`` (scaled so that ``K(0) = 1``)."""
    return np.clip(1.0 - u * u, 0.0, None)


KERNELS = {"gaussian": gaussian, "epanechnikov": epanechnikov}

# Support radius in bandwidths beyond which a kernel is negligible (< 1e-8).
KERNEL_RADIUS = {"gaussian": 6.1, "epanechnikov": 1.0}
#: Observations every window of a pooled smoother holds (kernel-weighted).
MIN_WINDOW_COUNT = 10.0

# ``-K'(u) / u`` of each kernel: d/dt K((c - t) / h) = (c - t) / h^2 times it
_KERNEL_SLOPE = {
    "gaussian": lambda u: np.exp(-0.5 * u * u),
    "epanechnikov": lambda u: 2.0 * (np.abs(u) < 1.0),
}

# Kernel evaluations held at once by the moment sums (bounds memory).
_MAX_PAIRS = 2_000_000
# A solve is undefined where det(A) <= this times S0 S2 (under two points).
_UNDEFINED = 1e-12
# Rule of :func:`solve_local_linear`'s ``floor``: windows this close to
# singular get at least the floor's ridge.
_DEGENERATE = 1e-10


def get_kernel(name):
    """Return the kernel function called ``name``."""
    try:
        return KERNELS[name]
    except KeyError:
        raise ValueError(
            f"kernel must be one of {sorted(KERNELS)}, got {name!r}"
        ) from None


class UndefinedFitError(ValueError):
    """A local-linear window holds fewer than two distinct locations."""


class LocalFit(NamedTuple):
    """Intercept (the fit), slope and hat value ``(A^-1)_00`` at each point."""

    fit: np.ndarray
    slope: np.ndarray
    hat: np.ndarray


# ---------------------------------------------------------------------- #
# moment sums


def _kernel_powers(d, bandwidth, kernel, order):
    """``[K(d/h), K(d/h) d, ..., K(d/h) d^order]`` for offsets ``d``."""
    mats = [get_kernel(kernel)(d / bandwidth)]
    for _ in range(order):
        mats.append(mats[-1] * d)
    return mats


def _kernel_matrices(centres, points, bandwidth, kernel, order):
    """``[K_0, ..., K_order]`` with ``K_a[g, b] = K((c_b - x_g)/h) (c_b - x_g)^a``."""
    d = centres[None, :] - points[:, None]
    return _kernel_powers(d, bandwidth, kernel, order)


def moment_sums(
    locations, weight, total, points, bandwidth, kernel, *, derivative=False
):
    """Kernel-weighted moment sums of pooled data at evaluation points.

    Parameters
    ----------
    locations, weight, total : ndarray of shape (n,)
        Locations with their weights and weighted sums of values: raw
        observations (weight 1, total = value) or bins (count, sum).
    points : ndarray of shape (m,)
        Evaluation points.
    bandwidth : float
        Kernel bandwidth ``h``.
    kernel : str
        Kernel name.
    derivative : bool, default=False
        Also return the sums that differentiate the first five in ``t``.

    Returns
    -------
    ndarray of shape (5, m), or (10, m) with ``derivative``
        ``S_a = sum K d^a w`` (a = 0, 1, 2), ``T_a = sum K d^a total``
        (a = 0, 1) with ``d = location - point``; with ``derivative`` also
        ``G d w, G d^2 w, G d^3 w, G d total, G d^2 total`` where
        ``G = -K'(d/h) / (d h)``.
    """
    points = np.asarray(points, dtype=np.float64)
    sums = np.empty((10 if derivative else 5, points.size))
    step = max(1, _MAX_PAIRS // max(locations.size, 1))
    h2 = float(bandwidth) ** 2
    for start in range(0, points.size, step):
        part = slice(start, start + step)
        k0, k1, k2 = _kernel_matrices(locations, points[part], bandwidth, kernel, 2)
        sums[:5, part] = [k0 @ weight, k1 @ weight, k2 @ weight, k0 @ total, k1 @ total]
        if derivative:
            d = locations[None, :] - points[part, None]
            g1 = _KERNEL_SLOPE[kernel](d / bandwidth) * d / h2
            g2 = g1 * d
            sums[5:8, part] = [g1 @ weight, g2 @ weight, (g2 * d) @ weight]
            sums[8:, part] = [g1 @ total, g2 @ total]
    return sums


def subject_moment_sums(
    obs_times,
    obs_values,
    obs_offsets,
    q_times,
    q_offsets,
    bandwidths,
    kernel,
    *,
    squares=False,
):
    """Moment sums of each query point over its own subject's observations.

    Parameters
    ----------
    obs_times, obs_values : ndarray of shape (n_obs,)
        Observations, concatenated by subject.
    obs_offsets : ndarray of shape (n_subjects + 1,)
        CSR offsets of the observations.
    q_times : ndarray of shape (n_queries,)
        Query times, concatenated by subject.
    q_offsets : ndarray of shape (n_subjects + 1,)
        CSR offsets of the queries.
    bandwidths : ndarray of shape (n_subjects,)
        Bandwidth of each subject.
    kernel : str
        Kernel name.
    squares : bool, default=False
        Also return the sums of the squared kernel ``sum K^2 d^a``
        (a = 0, 1, 2), which give the squared norm of the smoother's weights
        (:func:`weight_norms`).

    Returns
    -------
    ndarray of shape (5, n_queries), or (8, n_queries) with ``squares``
        ``S0, S1, S2, T0, T1`` as :func:`moment_sums` (unit weights), then
        the squared-kernel sums.
    """
    n_obs = np.diff(obs_offsets)
    q_subject = np.repeat(np.arange(n_obs.size), np.diff(q_offsets))
    out = np.empty((8 if squares else 5, q_times.size))
    # Blocks of consecutive queries whose pairs (query, observation of its
    # subject) number about _MAX_PAIRS: memory stays linear in a subject's
    # points however many queries it has (one query with more points than
    # that is a block of its own).
    for lo, hi in _chunks(n_obs[q_subject], _MAX_PAIRS):
        sub = q_subject[lo:hi]
        m = n_obs[sub]
        start = np.cumsum(m) - m  # each query's pairs are contiguous
        pos = np.arange(m.sum()) - np.repeat(start, m)
        pair_sub = np.repeat(sub, m)
        o_idx = obs_offsets[pair_sub] + pos
        d = obs_times[o_idx] - np.repeat(q_times[lo:hi], m)
        k, kd, kd2 = _kernel_powers(d, bandwidths[pair_sub], kernel, 2)
        y = obs_values[o_idx]
        for row, vals in enumerate((k, kd, kd2, k * y, kd * y)):
            out[row, lo:hi] = np.add.reduceat(vals, start)
        if squares:
            for row, vals in enumerate((k * k, k * kd, k * kd2), start=5):
                out[row, lo:hi] = np.add.reduceat(vals, start)
    return out


def _chunks(sizes, max_total):
    """Consecutive ranges of items whose sizes sum to about ``max_total`` each."""
    start = np.cumsum(sizes) - sizes
    chunk = start // max_total
    cuts = np.flatnonzero(np.diff(chunk)) + 1
    bounds = np.concatenate([[0], cuts, [len(sizes)]])
    return zip(bounds[:-1], bounds[1:])


# ---------------------------------------------------------------------- #
# the 2x2 solve


def solve_local_linear(
    sums, bandwidth, *, ridge=0.0, prior=0.0, prior_slope=0.0, floor=None, points=None
):
    """Solve the batched 2x2 local-linear systems, optionally ridge-penalised.

    At each point solves ``[[S0 + lam, S1], [S1, S2 + lam h^2]] [a, b] =
    [T0 + lam mu, T1 + lam h^2 mu']``: ``lam`` pseudo-observations pull the
    intercept toward ``mu`` and the slope toward ``mu'``.

    Parameters
    ----------
    sums : ndarray of shape (>= 5, m)
        ``S0, S1, S2, T0, T1`` (further rows are ignored).
    bandwidth : float or ndarray of shape (m,)
        Bandwidth ``h`` of each system (scales the slope's ridge).
    ridge : float or ndarray of shape (m,), default=0.0
        Weight ``lam`` of the prior.
    prior, prior_slope : float or ndarray of shape (m,), default=0.0
        Prior intercept ``mu`` and slope ``mu'``.
    floor : float, default=None
        If given, nearly singular windows get a ridge of at least ``floor``
        (so no fit is undefined) and no error is raised.
    points : ndarray of shape (m,), default=None
        Evaluation points, only to name one in the error message.

    Returns
    -------
    LocalFit
        ``fit`` (intercept), ``slope`` and ``hat`` (``(A^-1)_00``).

    Raises
    ------
    UndefinedFitError
        Without ``floor``, if a window holds fewer than two distinct points.
    """
    s0, s1, s2, t0, t1 = sums[:5]
    if floor is not None:
        ridge = _floored_ridge(s0, s1, s2, ridge, floor)
    if np.any(ridge):
        ridge_slope = ridge * bandwidth * bandwidth
        s0, s2 = s0 + ridge, s2 + ridge_slope
        t0, t1 = t0 + ridge * prior, t1 + ridge_slope * prior_slope
    det = s0 * s2 - s1 * s1
    if floor is None:
        scale = np.maximum(s0 * s2, np.finfo(float).tiny)
        undefined = ~(det > _UNDEFINED * scale) | ~(s0 > 0)
        if np.any(undefined):
            where = "" if points is None else f" at t={points[undefined][0]:g}"
            raise UndefinedFitError(
                f"local-linear fit undefined{where} with bandwidth "
                f"{float(bandwidth):.4g} (fewer than two distinct times in a "
                "window); use a larger bandwidth"
            )
    return LocalFit((s2 * t0 - s1 * t1) / det, (s0 * t1 - s1 * t0) / det, s2 / det)


def _floored_ridge(s0, s1, s2, ridge, floor):
    """The ridge with at least ``floor`` where a window is nearly singular."""
    degenerate = (s0 * s2 - s1 * s1 <= _DEGENERATE * s0 * s2) | (s0 < 1e-250)
    return np.where(degenerate, np.maximum(ridge, floor), ridge)


def weight_norms(sums, bandwidth, *, ridge=0.0, floor=None):
    """Squared norm of the smoother's weights and the prior's weight.

    The intercept of :func:`solve_local_linear` is ``sum_j l_j y_j + w mu +
    (slope prior term)``: linear in the observations with weights
    ``l_j = K_j (S2' - S1 d_j) / det`` (``S2' = S2 + lam h^2``). Where the
    observations carry independent errors of variance ``sigma^2``, the
    fit's error from them has variance ``sigma^2 ||l||^2``.

    Parameters
    ----------
    sums : ndarray of shape (8, m)
        ``S0, S1, S2, T0, T1`` and the squared-kernel sums ``sum K^2 d^a``
        (:func:`subject_moment_sums` with ``squares=True``).
    bandwidth, ridge, floor
        As :func:`solve_local_linear`.

    Returns
    -------
    norm2 : ndarray of shape (m,)
        ``||l||^2 = sum_j l_j^2``.
    prior_weight : ndarray of shape (m,)
        ``w = lam (A^-1)_00 = 1 - sum_j l_j``: the share of the fit that is
        the prior curve (0 without a ridge, 1 where no data are near).
    """
    s0, s1, s2 = sums[:3]
    q0, q1, q2 = sums[5:8]
    if floor is not None:
        ridge = _floored_ridge(s0, s1, s2, ridge, floor)
    ridge = np.broadcast_to(ridge, s0.shape)
    s2 = s2 + ridge * bandwidth * bandwidth
    det = (s0 + ridge) * s2 - s1 * s1
    a, b = s2 / det, s1 / det
    norm2 = a * a * q0 - 2.0 * a * b * q1 + b * b * q2
    return np.maximum(norm2, 0.0), ridge * a


def local_linear_binned(
    centres, weight, total, points, bandwidth, kernel, *, derivative=False
):
    """1-D local-linear fit from bin weights and bin sums (empty bins allowed).

    With ``derivative=True`` also returns the exact derivative of the fitted
    function ``t -> m(t)`` (not the local slope coefficient, which differs
    from it wherever the design is uneven), so that a curve built from the
    fit and its derivative agree.
    """
    points = np.asarray(points, dtype=np.float64)
    sums = moment_sums(
        centres, weight, total, points, bandwidth, kernel, derivative=derivative
    )
    est = solve_local_linear(sums, bandwidth, points=points).fit
    if not derivative:
        return est
    s0, s1, s2, t0, t1, g1w, g2w, g3w, g1s, g2s = sums
    det = s0 * s2 - s1 * s1
    # d/dt of K_a = K(u) d^a is G(u) d^(a+1) / h^2 - a K(u) d^(a-1)
    ds0, ds1, ds2 = g1w, g2w - s0, g3w - 2 * s1
    dt0, dt1 = g1s, g2s - t0
    dnum = ds2 * t0 + s2 * dt0 - ds1 * t1 - s1 * dt1
    ddet = ds0 * s2 + s0 * ds2 - 2 * s1 * ds1
    return est, (dnum - est * ddet) / det


#: Grid steps per bandwidth of :func:`local_linear_at`'s interpolant.
HERMITE_STEPS = 512
#: :func:`local_linear_at` interpolates where the distinct points outnumber
#: its grid this many times over.
HERMITE_MIN_RATIO = 4


def local_linear_at(centres, weight, total, points, bandwidth, kernel):
    """The fit of :func:`local_linear_binned` at many points (any shape).

    Evaluating the fit costs a kernel weight per point and bin. With the
    Gaussian kernel and more than ``HERMITE_MIN_RATIO`` times as many
    distinct points as a grid of step ``bandwidth / HERMITE_STEPS`` over
    their range holds, the fit at the points is the cubic Hermite
    interpolant of the exact fit and its exact derivative on that grid
    instead. The fit is a ratio of Gaussian-smoothed sums, whose fourth
    derivative is of the order of its scale over ``bandwidth^4``, so the
    interpolation error is of the order of ``3 / 384 / HERMITE_STEPS^4``
    (1e-13) of the fit's scale (at most 3e-14 on real and simulated data,
    ``benchmarks/bench_mean_at.py``; the tests bound it at 1e-12).
    Otherwise, or where the fit is undefined anywhere on that grid, the
    exact fit at each distinct point.

    Parameters
    ----------
    centres, weight, total : ndarray of shape (n_bins,)
        As for :func:`local_linear_binned`.
    points : array-like
        Evaluation points (any shape).
    bandwidth : float
        Kernel bandwidth.
    kernel : str
        Kernel name.

    Returns
    -------
    ndarray of the shape of ``points``
    """
    t = np.asarray(points, dtype=np.float64)
    if t.ndim == 1 and (np.diff(t) > 0).all():  # already distinct, in order
        uniq, inv = t, None
    else:
        uniq, inv = np.unique(t, return_inverse=True)
    fit = None
    if kernel == "gaussian" and uniq.size:
        lo, hi = float(uniq[0]), float(uniq[-1])
        n_grid = int(np.ceil((hi - lo) * HERMITE_STEPS / float(bandwidth))) + 1
        if n_grid >= 2 and uniq.size > HERMITE_MIN_RATIO * n_grid:
            fit = _hermite_fit(centres, weight, total, uniq, bandwidth, n_grid)
    if fit is None:
        fit = local_linear_binned(centres, weight, total, uniq, bandwidth, kernel)
    return fit if inv is None else fit[inv].reshape(t.shape)


def _hermite_fit(centres, weight, total, points, bandwidth, n_grid):
    """:func:`local_linear_at`'s interpolant at sorted ``points`` (None where
    the fit on its grid is undefined)."""
    grid = np.linspace(points[0], points[-1], n_grid)
    try:
        fit, slope = local_linear_binned(
            centres, weight, total, grid, bandwidth, "gaussian", derivative=True
        )
    except UndefinedFitError:
        return None
    if not (np.isfinite(fit).all() and np.isfinite(slope).all()):
        return None
    return CubicHermiteSpline(grid, fit, slope)(points)


# ---------------------------------------------------------------------- #
# bandwidth choice


def bandwidth_scores(
    locations, weight, total, within, candidates, kernel, criterion="gcv"
):
    """GCV or leave-one-out score of each candidate bandwidth of a pooled fit.

    Works on raw data (unit weights, ``total`` the values, ``within`` zero)
    and on binned data, whose points count as sitting at their bin centre.

    Parameters
    ----------
    locations, weight, total : ndarray of shape (n,)
        Locations, weights and weighted sums of values (empty bins allowed).
    within : ndarray of shape (n,)
        Each bin's weighted sum of squares about its mean.
    candidates : array-like
        Bandwidths to score.
    kernel : str
        Kernel name.
    criterion : {"gcv", "loocv"}, default="gcv"
        Generalised or leave-one-out cross-validation.

    Returns
    -------
    ndarray of shape (n_candidates,)
        The criterion, ``inf`` where the fit is undefined or saturated.
    """
    if criterion not in ("gcv", "loocv"):
        raise ValueError(f"criterion must be 'gcv' or 'loocv', got {criterion!r}")
    n = weight.sum()
    keep = weight > 0
    x, w, s, within = locations[keep], weight[keep], total[keep], within[keep]
    scores = np.full(len(candidates), np.inf)
    for i, h in enumerate(candidates):
        try:
            fit, _, hat = solve_local_linear(moment_sums(x, w, s, x, h, kernel), h)
        except UndefinedFitError:
            continue
        sq = within + (s - w * fit) ** 2 / w  # = within + w (mean - fit)^2
        if criterion == "gcv":
            dof = np.sum(w * hat)
            if dof < n:
                scores[i] = sq.sum() / n / (1.0 - dof / n) ** 2
        elif np.all(hat < 1.0):
            scores[i] = np.sum(sq / (1.0 - hat) ** 2) / n
    return np.where(np.isfinite(scores), scores, np.inf)


def gcv_mean_bandwidth(centres, weight, total, total_sq, candidates, kernel):
    """GCV choice of the mean bandwidth on binned pooled data."""
    with np.errstate(divide="ignore", invalid="ignore"):
        within = np.where(weight > 0, total_sq - total * total / weight, 0.0)
    scores = bandwidth_scores(centres, weight, total, within, candidates, kernel)
    if not np.isfinite(scores).any():
        raise ValueError("no candidate mean bandwidth gives a defined fit")
    return float(candidates[int(np.argmin(scores))])


def bandwidth_grid(
    locations,
    n,
    *,
    gap="widest",
    min_points=2,
    gap_factor=0.5,
    resolution=1000,
    top=4,
    growth=1.5,
):
    """Geometric grid of ``n`` bandwidths for smoothing over ``locations``.

    The smallest is ``max(gap_factor * g, span / resolution)``, where ``g``
    is the widest span of ``min_points`` consecutive distinct locations
    (``gap="widest"``: every window then holds about ``min_points`` of
    them) or the finest gap between distinct locations (``gap="finest"``);
    the largest is ``max(span / top, growth * smallest)``.

    PACE uses the defaults; the kernel imputer ``gap="finest"``,
    ``gap_factor`` 1 (Epanechnikov) or 2 (Gaussian), ``resolution=200``,
    ``top=2``, ``growth=2``.
    """
    distinct = np.unique(np.asarray(locations, dtype=np.float64))
    span = distinct[-1] - distinct[0]
    if span <= 0:
        raise ValueError("all locations are equal; no bandwidth can be chosen")
    if gap == "finest":
        g = np.min(np.diff(distinct))
    else:
        k = max(1, min_points - 1)
        g = np.max(distinct[k:] - distinct[:-k]) if distinct.size > k else span
    h_min = max(gap_factor * g, span / resolution)
    return np.geomspace(h_min, max(span / top, growth * h_min), n)


def min_count_bandwidth(centres, weight, kernel, min_count=MIN_WINDOW_COUNT):
    """The least bandwidth whose every window holds ``min_count`` observations.

    The kernel-weighted count ``sum_j w_j K((c_j - c) / h)`` (``K(0) = 1``)
    at each occupied bin centre ``c`` must reach ``min_count`` (or all the
    observations, if fewer). A pooled smoother with a smaller bandwidth
    follows a handful of points wherever times are sparse: on designs with
    many ties at a few ages and scattered times elsewhere, GCV picks such a
    bandwidth and the mean turns up and down between the scattered times.

    Parameters
    ----------
    centres, weight : ndarray of shape (n_bins,)
        Bin centres and the number of observations in each.
    kernel : str
        Kernel name.
    min_count : float, default=MIN_WINDOW_COUNT
        Observations every window must hold.

    Returns
    -------
    float
    """
    centres = np.asarray(centres, dtype=np.float64)
    weight = np.asarray(weight, dtype=np.float64)
    occupied = weight > 0
    c, w = centres[occupied], weight[occupied]
    span = c[-1] - c[0] if c.size else 0.0
    if span <= 0:
        return 0.0
    need = min(float(min_count), w.sum())
    distance = np.abs(c[:, None] - c[None, :])
    k = KERNELS[kernel]
    low, high = span * 1e-4, span
    if (k(distance / high) @ w).min() < need:
        return high
    for _ in range(50):  # bisection in log h
        mid = np.sqrt(low * high)
        if (k(distance / mid) @ w).min() >= need:
            high = mid
        else:
            low = mid
    return float(high)
