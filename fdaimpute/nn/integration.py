"""Integration and interpolation on a grid: the arithmetic behind SAND.

SAND's curve is ``T~_1 + Intg(D~)``: the cumulative trapezoidal rule, which
is exact for the piecewise-quadratic C1 curve whose derivative interpolates
``D~`` linearly; that curve is how SAND is evaluated between grid points
(:func:`interpolate_c1`). Anchored variants pin the integral to a rough
curve at chosen grid points.
"""

from __future__ import annotations

import torch

from fdaimpute._numerics.interpolate import c1_segment

__all__ = [
    "ANCHORS",
    "cumulative_integral",
    "integrate",
    "interpolate_c1",
    "interpolate_linear",
    "mean_anchored_integral",
    "two_sided_integral",
]

ANCHORS = (None, "mean", "two-sided")


def cumulative_integral(deriv, grid):
    """Cumulative trapezoidal integral of ``deriv`` on ``grid``, zero at the start.

    Parameters
    ----------
    deriv : Tensor of shape (B, M)
        Derivative values at the grid points.
    grid : Tensor of shape (M,)
        Increasing grid.

    Returns
    -------
    Tensor of shape (B, M)

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import cumulative_integral
    >>> cumulative_integral(torch.ones(1, 3), torch.tensor([0.0, 0.5, 1.0]))
    tensor([[0.0000, 0.5000, 1.0000]])
    """
    inc = 0.5 * (deriv[:, 1:] + deriv[:, :-1]) * torch.diff(grid)
    return torch.cat([torch.zeros_like(deriv[:, :1]), torch.cumsum(inc, dim=1)], dim=1)


def integrate(deriv, grid, start):
    """Curve with derivative ``deriv`` that starts at ``start``: ``start + Intg``.

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import integrate
    >>> s = torch.linspace(0, 1, 5)
    >>> integrate(2 * s[None], s, torch.tensor([1.0]))
    tensor([[1.0000, 1.0625, 1.2500, 1.5625, 2.0000]])
    """
    return start.unsqueeze(-1) + cumulative_integral(deriv, grid)


def two_sided_integral(values, deriv, grid, anchors):
    """Integrate from the nearest anchors on both sides and blend by distance.

    Between two anchors ``a < m < b`` the curve is the distance-weighted
    mean of ``values[a] + int_a^m deriv`` (weight ``(s_b - s_m) / (s_b -
    s_a)``) and ``values[b] - int_m^b deriv``; before the first and after
    the last anchor only one side exists. The result equals ``values``
    exactly at the anchors; it is continuous, but its derivative jumps at
    the anchors by the disagreement of the two sides.

    Parameters
    ----------
    values : Tensor of shape (B, M)
        Curve values; only those at anchors are used.
    deriv : Tensor of shape (B, M)
        Derivative on the grid.
    grid : Tensor of shape (M,)
        Increasing grid.
    anchors : bool Tensor of shape (B, M)
        Anchor grid points; every row needs at least one.

    Returns
    -------
    Tensor of shape (B, M)

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import two_sided_integral
    >>> s = torch.linspace(0, 1, 5)
    >>> anchors = torch.tensor([[False, True, False, False, True]])
    >>> out = two_sided_integral(torch.arange(5.0)[None], torch.zeros(1, 5), s, anchors)
    >>> out.round(decimals=4).tolist()
    [[1.0, 1.0, 2.0, 3.0, 4.0]]
    """
    if not bool(anchors.any(dim=1).all()):
        raise ValueError("every row needs at least one anchor")
    m = grid.shape[0]
    cum = cumulative_integral(deriv, grid)
    offset = values - cum
    idx = torch.arange(m, device=deriv.device).expand_as(anchors)
    left = torch.where(anchors, idx, -1).cummax(dim=1).values
    right = torch.where(anchors, idx, m).flip(1).cummin(dim=1).values.flip(1)
    has_left, has_right = left >= 0, right < m
    left, right = left.clamp(min=0), right.clamp(max=m - 1)
    s_left, s_right = grid[left], grid[right]
    span = (s_right - s_left).clamp(min=torch.finfo(grid.dtype).tiny)
    w_left = torch.where(right > left, (s_right - grid) / span, 1.0)
    w_left = torch.where(has_left & has_right, w_left, has_left.to(deriv.dtype))
    blended = w_left * offset.gather(1, left) + (1 - w_left) * offset.gather(1, right)
    return torch.where(anchors, values, cum + blended)


def mean_anchored_integral(values, deriv, grid, weights):
    """Integral of ``deriv`` whose constant is fitted to ``values`` by least squares.

    Equivalent to anchoring at each weighted grid point in turn and
    averaging the curves: ``Intg(deriv) + sum_m w_m (values_m - Intg_m) /
    sum_m w_m``. The result stays C1 with derivative ``deriv``.

    Parameters
    ----------
    values, deriv : Tensor of shape (B, M)
        Curve values and derivative on the grid.
    grid : Tensor of shape (M,)
        Increasing grid.
    weights : Tensor of shape (B, M)
        Non-negative weight of each grid point (e.g. 1 at a subject's
        observed grid points); every row needs a positive total.

    Returns
    -------
    Tensor of shape (B, M)
    """
    cum = cumulative_integral(deriv, grid)
    w = weights.to(deriv.dtype)
    offset = ((values - cum) * w).sum(dim=1) / w.sum(dim=1)
    return cum + offset.unsqueeze(-1)


def _locate(grid, t):
    """Left grid index (clamped to ``[0, M-2]``), step and offset of each time."""
    pos = (torch.searchsorted(grid, t.contiguous(), right=True) - 1).clamp(
        0, grid.shape[0] - 2
    )
    step = grid[pos + 1] - grid[pos]
    return pos, step, t - grid[pos]


def interpolate_linear(curve, grid, t):
    """Piecewise-linear interpolation of each row of ``curve`` at its times ``t``.

    Parameters
    ----------
    curve : Tensor of shape (B, M)
        Values on ``grid``.
    grid : Tensor of shape (M,)
        Increasing grid.
    t : Tensor of shape (B, L)
        Query times of each row (linear extrapolation outside the grid).

    Returns
    -------
    Tensor of shape (B, L)
    """
    pos, step, dt = _locate(grid, t)
    left, right = curve.gather(1, pos), curve.gather(1, pos + 1)
    return left + (dt / step) * (right - left)


def interpolate_c1(curve, deriv, grid, t):
    """Evaluate the C1 curve defined by grid values and derivatives.

    On ``[s_j, s_j+1]`` the curve is the cubic with the values and
    derivatives of both knots (cubic Hermite interpolation), so it passes
    through ``curve`` at the grid points; for SAND outputs (built by the
    trapezoidal rule) it is the integral of the linear interpolation of
    ``deriv``, a quadratic. Beyond the grid it continues from the end knot
    with the end interval's linear derivative. The same curve as
    :func:`fdaimpute._numerics.interpolate.interpolate_c1_rows`.

    Parameters
    ----------
    curve, deriv : Tensor of shape (B, M)
        Values and derivatives on ``grid``.
    grid : Tensor of shape (M,)
        Increasing grid.
    t : Tensor of shape (B, L)
        Query times of each row.

    Returns
    -------
    Tensor of shape (B, L)
    """
    pos, step, dt = _locate(grid, t)
    return c1_segment(
        curve.gather(1, pos),
        curve.gather(1, pos + 1),
        deriv.gather(1, pos),
        deriv.gather(1, pos + 1),
        step,
        dt,
        torch.where,
    )
