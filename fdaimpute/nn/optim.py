"""The optimizer and learning-rate schedule of the training loop."""

from __future__ import annotations

import math

import torch

__all__ = ["make_adam", "make_schedule"]


def make_adam(groups):
    """Adam, fused into one kernel where this torch and device support it.

    The fused step gives the same update up to rounding and avoids the
    per-parameter loop, whose overhead is large on a model of many small
    tensors.

    Parameters
    ----------
    groups : list of dict
        Parameter groups, as for :class:`torch.optim.Adam`.

    Returns
    -------
    torch.optim.Adam
    """
    try:
        return torch.optim.Adam(groups, fused=True)
    except (RuntimeError, TypeError):  # torch < 2.4 on CPU, or another device
        return torch.optim.Adam(groups, foreach=True)


def make_schedule(optimizer, schedule, steps):
    """The learning-rate schedule of a run of ``steps`` optimizer steps.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        The optimizer whose rates are scaled.
    schedule : {"cosine", "constant"}
        ``"cosine"``: linear warm-up over 2% of the steps (at least 100, or
        half of a shorter run), then cosine decay to 2% of the peak at the
        last step. ``"constant"``: the peak rate throughout.
    steps : int
        Optimizer steps of the whole run.

    Returns
    -------
    torch.optim.lr_scheduler.LambdaLR
    """
    # 2% of the steps, but at least 100 (or half of a short run): the
    # first full-size Adam steps can throw SAND's layer far off
    warmup = max(1, int(0.02 * steps), min(100, steps // 2))
    if schedule == "cosine":

        def factor(step):
            if step < warmup:
                return (step + 1) / warmup
            progress = min(1.0, (step - warmup) / max(1, steps - warmup))
            return 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * progress))

    elif schedule == "constant":

        def factor(step):
            return 1.0

    else:
        raise ValueError(
            f"lr_schedule must be 'cosine' or 'constant', got {schedule!r}"
        )
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
