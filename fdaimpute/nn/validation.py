"""Validation masking: which observations of held-out subjects are predicted.

The neural imputers choose their epoch by how well the network predicts
observations of validation subjects that it does not see. The hidden
observations are drawn once, before training (the same rule as in training,
:func:`~fdaimpute.nn.hide_observations`), and kept as a flag per flat
observation, so every epoch is scored on the same points.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from fdaimpute.nn.batching import hide_observations
from fdaimpute.nn.inference import read_at

__all__ = [
    "held_out_error",
    "hidden_in_batch",
    "hide_validation_observations",
    "paired_gain",
    "pooled_subject_errors",
    "signed_rank_p",
    "subject_squared_errors",
]


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


def _held_out_batches(forward, data, hidden, grid, anchors, batch_size, read=None):
    """Yield each batch's subjects, hidden flags, errors at those points and
    its observations' variables (None for one variable)."""
    for index in torch.arange(len(data)).split(max(batch_size, 512)):
        batch = data.batch(index)
        held = hidden_in_batch(hidden, data, batch)
        batch.visible = batch.valid & ~held
        out = forward(batch)
        if read is None:
            vt, sand = read_at(out, grid, batch.times, anchors, batch.variable)
            pred = vt if sand is None else sand
        else:
            pred = read(out, batch)
        yield index, held, torch.where(held, pred - batch.values, 0.0), batch.variable


@torch.no_grad()
def held_out_error(
    forward, data, hidden, grid, anchors=None, batch_size=512, *, read=None
):
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
    read : callable, default=None
        Maps ``(out, batch)`` to the predictions at ``batch.times``, shape
        (B, L), for an output that is not a curve on ``grid`` (e.g.
        :meth:`Trainer.read <fdaimpute.nn.Trainer.read>`); ``None`` reads
        SAND's curve of a SAND module, VT's of a VT, off ``grid``.

    Returns
    -------
    float
        The mean squared error at the hidden points.
    """
    total, count = 0.0, 0
    batches = _held_out_batches(forward, data, hidden, grid, anchors, batch_size, read)
    for _, held, err, _ in batches:
        total += float(err.pow(2).sum())
        count += int(held.sum())
    return total / max(count, 1)


@torch.no_grad()
def subject_squared_errors(
    forward,
    data,
    hidden,
    grid,
    anchors=None,
    batch_size=512,
    *,
    read=None,
    n_variables=None,
):
    """Per validation subject: the sum of squared errors at its hidden points.

    Arguments as for :func:`held_out_error`; with ``n_variables``, the sums
    are kept apart for each variable.

    Returns
    -------
    sums : ndarray of shape (n_subjects,) or (n_subjects, n_variables)
        Float64 sums (0 for a subject with nothing hidden).
    counts : ndarray of the same shape
        Hidden points per subject.
    """
    shape = (len(data),) if n_variables is None else (len(data), n_variables)
    sums = torch.zeros(shape, dtype=torch.float64)
    counts = torch.zeros(shape, dtype=torch.float64)
    batches = _held_out_batches(forward, data, hidden, grid, anchors, batch_size, read)
    for index, held, err, variable in batches:
        square, held = err.double().pow(2), held.double()
        if n_variables is not None:
            # (B, L) to (B, L, p): each point in its variable's column
            own = F.one_hot(variable.long(), n_variables).to(square.dtype)
            square, held = square.unsqueeze(-1) * own, held.unsqueeze(-1) * own
        sums[index] = square.sum(1).cpu()
        counts[index] = held.sum(1).cpu()
    return sums.numpy(), counts.numpy()


def pooled_subject_errors(
    forward, data, hidden, grid, anchors=None, batch_size=512, **kwargs
):
    """:func:`subject_squared_errors` summed over several draws of hidden points.

    Parameters
    ----------
    forward, data, grid, anchors, batch_size, **kwargs
        As for :func:`subject_squared_errors`.
    hidden : bool Tensor or list of bool Tensor
        One draw of hidden observations (:func:`hide_validation_observations`),
        or several: each subject's sums and counts are then added over the
        draws, so that its error rests on more of its points.

    Returns
    -------
    sums, counts : ndarray
        As for :func:`subject_squared_errors`.
    """
    if not isinstance(hidden, (list, tuple)):
        return subject_squared_errors(
            forward, data, hidden, grid, anchors, batch_size, **kwargs
        )
    parts = [
        subject_squared_errors(forward, data, h, grid, anchors, batch_size, **kwargs)
        for h in hidden
    ]
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def paired_gain(errors, reference):
    """How much lower ``errors`` are than ``reference``, in standard errors.

    Both are :func:`subject_squared_errors` of the same hidden points. The
    gain is the drop in mean squared error per hidden point; its standard
    error treats subjects as the independent units (a ratio estimator over
    subjects), since a subject's hidden points share its curve.

    Returns
    -------
    gain : float
        ``MSE(reference) - MSE(errors)``.
    z : float
        ``gain`` over its standard error (``inf`` when that is 0 and the
        gain positive, 0 when both are 0).
    """
    (sums, counts), (ref_sums, _) = errors, reference
    total = counts.sum()
    diff = ref_sums - sums
    gain = diff.sum() / total
    n = diff.size
    resid = diff - counts * gain
    se = np.sqrt(n / max(n - 1, 1) * (resid**2).sum()) / total
    if se > 0:
        return float(gain), float(gain / se)
    return float(gain), math.inf if gain > 0 else 0.0


def signed_rank_p(errors, reference):
    """One-sided p-value that ``errors`` are lower than ``reference`` per subject.

    Both are :func:`subject_squared_errors` of the same hidden points. The
    Wilcoxon signed-rank test on each subject's drop in mean squared error
    per hidden point asks whether the drop is shared by the subjects, where
    :func:`paired_gain` asks whether it is large on average; on heavy-tailed
    data a few subjects can make the average look significant on their own.

    Returns
    -------
    p : float
        The test's p-value (1 when no subject's error changed).
    """
    from scipy.stats import wilcoxon

    (sums, counts), (ref_sums, _) = errors, reference
    scored = counts > 0
    drop = (ref_sums[scored] - sums[scored]) / counts[scored]
    if not np.any(drop != 0):
        return 1.0
    return float(wilcoxon(drop, alternative="greater").pvalue)
