"""Evaluating curves known on a grid at other times: the package's one place for it.

Two layouts occur. *Per-row* queries give each curve its own times
(concatenated, with a count per row), as ``predict_at`` does. *Shared*
queries evaluate every curve at the same times, as a change of grid does.
"""

from __future__ import annotations

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.linalg import solve_banded


def grid_segments(grid, times, counts):
    """Locate per-row query times on ``grid``.

    Parameters
    ----------
    grid : ndarray of shape (m,)
        Increasing grid, ``m >= 2``.
    times : ndarray of shape (sum(counts),)
        Query times, concatenated by row.
    counts : ndarray of shape (n,)
        Number of query times of each row.

    Returns
    -------
    row, pos, step, offset : ndarray of shape (sum(counts),)
        The row of each time, the index of the grid interval holding it
        (clamped to the first and last intervals, so the ends extrapolate),
        the interval's length and the time's offset from its left end.
    """
    row = np.repeat(np.arange(len(counts)), counts)
    pos = _segment(grid, times)
    return row, pos, grid[pos + 1] - grid[pos], times - grid[pos]


def _segment(grid, times):
    """Index of the grid interval evaluating each time (the right one at a knot)."""
    return np.clip(np.searchsorted(grid, times, side="right") - 1, 0, grid.size - 2)


def interpolate_rows(curves, grid, times, counts):
    """Linearly interpolate row ``i`` of ``curves`` at its own ``counts[i]`` times.

    Beyond the grid each row is extended along its end segment.

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


def c1_segment(v0, v1, d0, d1, step, u, where, derivative=False):
    """The C1 curve of :func:`interpolate_c1_rows` on one grid interval each.

    ``v0, v1`` and ``d0, d1`` are the values and slopes at the interval's
    knots, ``step`` its length and ``u`` each time's offset from its left
    knot; ``where`` is ``numpy.where`` or ``torch.where``, so that the
    networks' training (torch) and the fitted imputers (NumPy) read the
    same curve.
    """
    bend = (d1 - d0) / step  # the slope's change per unit time
    s = u / step
    if derivative:
        inside = (
            6 * (s * s - s) * (v0 - v1) / step
            + (3 * s * s - 4 * s + 1) * d0
            + (3 * s * s - 2 * s) * d1
        )
        before = d0 + bend * u
        after = d1 + bend * (u - step)
    else:
        s2, s3 = s * s, s * s * s
        inside = (
            (2 * s3 - 3 * s2 + 1) * v0
            + (s3 - 2 * s2 + s) * step * d0
            + (3 * s2 - 2 * s3) * v1
            + (s3 - s2) * step * d1
        )
        before = v0 + d0 * u + bend * u * u / 2
        after = v1 + d1 * (u - step) + bend * (u - step) ** 2 / 2
    return where(u < 0, before, where(u > step, after, inside))


def interpolate_c1_rows(values, deriv, grid, times, counts, derivative=False):
    """Per-row evaluation of the C1 curve of values and slopes known on a grid.

    On each grid interval the curve is the cubic with the given values and
    slopes at both knots (cubic Hermite interpolation), so it passes through
    every knot's value. Where the values are the integral of the linear
    interpolation of the slopes (SAND's curves, built by the trapezoidal
    rule), that cubic is the quadratic whose slope moves linearly from knot
    to knot. Beyond the grid each row continues from its end knot with the
    end interval's linear slope (a quadratic). Arguments as in
    :func:`interpolate_rows`, with ``deriv`` of the shape of ``values``;
    ``derivative`` returns the curve's slope instead.
    """
    row, pos, step, u = grid_segments(grid, times, counts)
    return c1_segment(
        values[row, pos],
        values[row, pos + 1],
        deriv[row, pos],
        deriv[row, pos + 1],
        step,
        u,
        np.where,
        derivative,
    )


def interpolate_shared(rows, grid, times):
    """Linear interpolation of every row at common ``times``, constant beyond the ends.

    Parameters
    ----------
    rows : ndarray of shape (n, m)
        Values on ``grid``.
    grid : ndarray of shape (m,)
        Increasing grid.
    times : ndarray of shape (q,)
        Query times.

    Returns
    -------
    ndarray of shape (n, q)
    """
    times = np.clip(times, grid[0], grid[-1])
    pos = _segment(grid, times)
    frac = (times - grid[pos]) / (grid[pos + 1] - grid[pos])
    return rows[:, pos] * (1 - frac) + rows[:, pos + 1] * frac


def slope_shared(rows, grid, times):
    """Derivative of :func:`interpolate_shared`: each segment's slope.

    At a knot the slope of the segment to its right (the one
    :func:`interpolate_shared` uses there), at the last knot the last
    segment's; zero beyond the ends, where the interpolant is constant.
    """
    times = np.asarray(times, dtype=np.float64)
    pos = _segment(grid, times)
    slope = np.diff(rows, axis=1) / np.diff(grid)
    inside = (times >= grid[0]) & (times <= grid[-1])
    return np.where(inside, slope[:, pos], 0.0)


def spline_columns(grid, columns, times, derivative=False):
    """Cubic-spline interpolation of each column, constant beyond the ends.

    Parameters
    ----------
    grid : ndarray of shape (m,)
        Increasing grid.
    columns : ndarray of shape (m,) or (m, p)
        Values on ``grid``.
    times : ndarray of shape (q,)
        Query times.
    derivative : bool, default=False
        Return the spline's derivative instead (zero beyond the ends).

    Returns
    -------
    ndarray of shape (q,) or (q, p)
    """
    times = np.asarray(times, dtype=np.float64)
    inside = np.clip(times, grid[0], grid[-1])
    spline = CubicSpline(grid, columns, axis=0)
    if not derivative:
        return spline(inside)
    keep = (times >= grid[0]) & (times <= grid[-1])
    if np.ndim(columns) > 1:
        keep = keep[:, None]
    return np.where(keep, spline(inside, 1), 0.0)


def fmm_spline(x, y, times):
    """Interpolating cubic spline with Forsythe, Malcolm & Moler's end conditions.

    At each end the spline's third derivative is that of the cubic through
    the four nearest points (six times their third divided difference), so
    four points give that cubic itself and three the parabola through them;
    two give the line. This is R's ``spline(method = "fmm")``, its default,
    which fdapace uses to put the mean on its work grid; scipy's
    ``CubicSpline`` ends differ ("not-a-knot").

    Parameters
    ----------
    x : ndarray of shape (m,)
        Increasing knots, ``m >= 2``.
    y : ndarray of shape (m,)
        Values at the knots.
    times : ndarray
        Query times (within ``[x[0], x[-1]]``).

    Returns
    -------
    ndarray of the shape of ``times``
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size < 3:
        return np.interp(times, x, y)
    h = np.diff(x)
    slopes = np.diff(y) / h

    def third_difference(i):
        # the third divided difference of the points i .. i + 3
        second = np.diff(slopes[i : i + 3]) / (x[i + 2 : i + 4] - x[i : i + 2])
        return (second[1] - second[0]) / (x[i + 3] - x[i])

    m = x.size
    # banded system for the second derivatives M: rows 0 and m - 1 are the
    # end conditions (M1 - M0) / h0 = 6 D0, interior rows the continuity of
    # the first derivative
    bands = np.zeros((3, m))
    rhs = np.zeros(m)
    bands[1, 1:-1] = 2.0 * (h[:-1] + h[1:])
    bands[0, 2:] = h[1:]
    bands[2, :-2] = h[:-1]
    rhs[1:-1] = 6.0 * np.diff(slopes)
    bands[1, 0], bands[0, 1] = -1.0 / h[0], 1.0 / h[0]
    bands[1, -1], bands[2, -2] = 1.0 / h[-1], -1.0 / h[-1]
    if m > 3:
        rhs[0] = 6.0 * third_difference(0)
        rhs[-1] = 6.0 * third_difference(m - 4)
    second = solve_banded((1, 1), bands, rhs)
    spline = CubicSpline(x, y, bc_type=((2, second[0]), (2, second[-1])))
    return spline(np.asarray(times, dtype=np.float64))
