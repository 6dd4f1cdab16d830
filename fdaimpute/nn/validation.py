"""Validation masking: which observations of held-out subjects are predicted.

The neural imputers choose their epoch by how well the network predicts
observations of validation subjects that it does not see. The hidden
observations are drawn once, before training (the same rule as in training,
:func:`~fdaimpute.nn.hide_observations`), and kept as a flag per flat
observation, so every epoch is scored on the same points.
"""

from __future__ import annotations

import torch

from fdaimpute.nn.batching import hide_observations
from fdaimpute.nn.inference import read_at

__all__ = ["held_out_error", "hidden_in_batch", "hide_validation_observations"]


def hide_validation_observations(data, seed):
    """Choose the observations of validation subjects to hide and predict.

    Parameters
    ----------
    data : RaggedTensors
        The validation subjects.
    seed : int
        Seed of the draw (a generator on ``data``'s device).

    Returns
    -------
    bool Tensor of shape (n_obs,) or None
        True at the hidden observations, aligned with ``data``'s flat
        observations; None when nothing could be hidden (every subject has
        a single observation).

    Examples
    --------
    >>> from fdaimpute.nn import RaggedTensors
    >>> from fdaimpute.nn.validation import hide_validation_observations
    >>> data = RaggedTensors([0.1, 0.5, 0.9, 0.3], [1.0, 2.0, 3.0, 4.0], [0, 3, 4])
    >>> int(hide_validation_observations(data, seed=0).sum())
    1
    """
    device = data.device
    generator = torch.Generator(device=device).manual_seed(seed)
    batch = data.batch(torch.arange(len(data)))
    hidden = hide_observations(batch.valid, generator)
    flat = data.offsets[:-1].unsqueeze(1) + torch.arange(
        batch.valid.shape[1], device=device
    )
    flags = torch.zeros(data.times.shape[0], dtype=torch.bool, device=device)
    flags[flat[hidden]] = True
    return flags if bool(flags.any()) else None


def hidden_in_batch(flags, data, batch):
    """The flat flags of :func:`hide_validation_observations` laid out as ``batch``.

    Parameters
    ----------
    flags : bool Tensor of shape (n_obs,)
        One flag per flat observation of ``data``.
    data : RaggedTensors
        The subjects ``batch`` was padded from.
    batch : Batch
        A batch of ``data``.

    Returns
    -------
    bool Tensor of shape (B, L)
        The flags of the batch's real observations (False at padding).
    """
    flat = (
        data.offsets[batch.index].unsqueeze(1)
        + torch.arange(batch.valid.shape[1], device=data.device)
    ).clamp(max=flags.shape[0] - 1)
    return flags[flat] & batch.valid


@torch.no_grad()
def held_out_error(forward, data, hidden, grid, anchors=None, batch_size=512):
    """Mean squared error of a module's output at the hidden validation points.

    Parameters
    ----------
    forward : callable
        Maps a :class:`~fdaimpute.nn.Batch` (whose ``visible`` excludes the
        hidden points) to the module's :class:`~fdaimpute.nn.ModuleOutput`
        on ``grid``, e.g. :meth:`Trainer.forward <fdaimpute.nn.Trainer.forward>`.
    data : RaggedTensors
        The validation subjects.
    hidden : bool Tensor of shape (n_obs,)
        The points to predict (:func:`hide_validation_observations`).
    grid : Tensor of shape (M,)
        The module's grid.
    anchors : {None, "mean", "two-sided"}, default=None
        SAND's integration constant (how its curve is read off the grid).
    batch_size : int, default=512
        Subjects per forward pass (at least 512 are used).

    Returns
    -------
    float
        SAND's error for a SAND module, VT's for a VT.
    """
    total, count = 0.0, 0
    for index in torch.arange(len(data)).split(max(batch_size, 512)):
        batch = data.batch(index)
        held = hidden_in_batch(hidden, data, batch)
        batch.visible = batch.valid & ~held
        out = forward(batch)
        vt, sand = read_at(out, grid, batch.times, anchors)
        pred = vt if sand is None else sand
        err = torch.where(held, pred - batch.values, 0.0)
        total += float(err.pow(2).sum())
        count += int(held.sum())
    return total / max(count, 1)
