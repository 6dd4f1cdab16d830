"""Several variables (channels) in one network: the layout of their curves.

A network for ``p`` variables outputs one curve per variable on the same
grid of ``M`` points, variable-major in one row of ``p * M`` values (the
layout of the multivariate imputers' output). Each observation carries its
variable's index. Reading a subject's curves at its observations then needs
each observation's own variable: :func:`channel_grid` lays the ``p`` copies
of the grid end to end, each shifted past the previous one by one more grid
step, and :func:`channel_times` shifts each observation's time into its
variable's copy, so that interpolation on the long grid (the functions of
:mod:`~fdaimpute.nn.integration`) reads every observation from its own
variable's curve and never between two variables' curves. What works per
curve -- SAND's integration and its anchors -- runs on ``B * p`` rows of
``M`` points (:func:`fold_channels`, :func:`channel_masks`).
"""

from __future__ import annotations

import torch

__all__ = [
    "channel_grid",
    "channel_gate",
    "channel_masks",
    "channel_times",
    "fold_channels",
    "module_inputs",
    "unfold_channels",
]


def _shift(grid):
    """How far each variable's copy of ``grid`` lies past the previous one."""
    step = (
        grid[-1] - grid[-2] if grid.shape[0] > 1 else torch.ones((), device=grid.device)
    )
    return grid[-1] - grid[0] + step


def channel_grid(grid, n_variables):
    """The grid's ``n_variables`` copies end to end, shape ``(n_variables * M,)``.

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn.channels import channel_grid
    >>> channel_grid(torch.tensor([0.0, 0.5, 1.0]), 2).tolist()
    [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    """
    offsets = _shift(grid) * torch.arange(
        n_variables, device=grid.device, dtype=grid.dtype
    )
    return (offsets[:, None] + grid[None, :]).reshape(-1)


def channel_gate(gate, m):
    """A base gate as the weights of one row of curves.

    Parameters
    ----------
    gate : Tensor of shape () or (p,)
        One weight for a curve, or one per variable.
    m : int
        Grid points per curve.

    Returns
    -------
    Tensor of shape () or (p * m,)
        ``gate`` itself, or each variable's weight over its block of the
        variable-major row.
    """
    return gate if gate.dim() == 0 else gate.repeat_interleave(m)


def module_inputs(n_variables, variable, covariates):
    """The keyword inputs passed on beyond the observations.

    What a module hands its transformer and its statistical base
    (``base_curves``): each observation's ``variable`` with several
    variables, and the subjects' ``covariates`` where given.
    """
    extra = {} if n_variables == 1 else {"variable": variable}
    if covariates is not None:
        extra["covariates"] = covariates
    return extra


def channel_times(times, variable, grid):
    """Each observation's time moved into its variable's copy of ``grid``.

    Parameters
    ----------
    times : Tensor of shape (B, L)
        Observation times on the grid's scale.
    variable : long Tensor of shape (B, L)
        Each observation's variable.
    grid : Tensor of shape (M,)
        The grid of one variable.

    Returns
    -------
    Tensor of shape (B, L)
        Times on :func:`channel_grid`'s scale.
    """
    return times + _shift(grid) * variable.to(times.dtype)


def fold_channels(curves, n_variables):
    """``(B, p * M)`` variable-major rows as ``(B * p, M)`` rows, one per curve.

    A trailing feature axis is kept: ``(B, p * M, d)`` becomes ``(B * p, M, d)``.
    """
    return curves.reshape(curves.shape[0] * n_variables, -1, *curves.shape[2:])


def unfold_channels(curves, n_variables):
    """The inverse of :func:`fold_channels`: ``(B * p, M)`` to ``(B, p * M)``."""
    return curves.reshape(curves.shape[0] // n_variables, -1)


def channel_masks(times, mask, variable, n_variables):
    """Each variable's observations as rows of their own: ``(B * p, L)`` each.

    Returns
    -------
    times : Tensor of shape (B * p, L)
        Row ``b * p + j`` holds subject ``b``'s times.
    mask : bool Tensor of shape (B * p, L)
        ``mask`` where the observation is of variable ``j``.
    """
    own = variable.unsqueeze(1) == torch.arange(
        n_variables, device=variable.device
    ).view(1, -1, 1)
    rows = (mask.unsqueeze(1) & own).reshape(-1, mask.shape[1])
    return times.repeat_interleave(n_variables, dim=0), rows
