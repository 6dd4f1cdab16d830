"""The optimizer and learning-rate schedule of the training loop."""

from __future__ import annotations

import math

import torch

__all__ = ["make_adam", "make_schedule", "set_total_steps"]


def make_adam(groups, capturable=False):
    """Adam, fused into one kernel where this torch and device support it.

    The fused step gives the same update up to rounding and avoids the
    per-parameter loop, whose overhead is large on a model of many small
    tensors.

    Parameters
    ----------
    groups : list of dict
        Parameter groups, as for :class:`torch.optim.Adam`.
    capturable : bool, default=False
        An optimizer whose step can be captured in a CUDA graph (its state
        on the parameters' device; :class:`~fdaimpute.nn.graphed.GraphedStep`
        moves the learning rates to device tensors).

    Returns
    -------
    torch.optim.Adam
    """
    if capturable:
        return torch.optim.Adam(groups, fused=True, capturable=True)
    try:
        return torch.optim.Adam(groups, fused=True)
    except (RuntimeError, TypeError):  # torch < 2.4 on CPU, or another device
        return torch.optim.Adam(groups, foreach=True)


class _Horizon:
    """Learning-rate factor of step ``step`` for a run of ``total_steps`` steps.

    ``total_steps`` may be changed while training (a time budget re-plans
    the run's length after each epoch); the factor follows the new horizon.
    """

    def __init__(self, schedule, total_steps):
        if schedule not in ("cosine", "constant"):
            raise ValueError(
                f"lr_schedule must be 'cosine' or 'constant', got {schedule!r}"
            )
        self.schedule = schedule
        self.total_steps = int(total_steps)

    def warmup(self):
        # 2% of the steps, but at least 100 (or half of a short run): the
        # first full-size Adam steps can throw SAND's layer far off
        steps = self.total_steps
        return max(1, int(0.02 * steps), min(100, steps // 2))

    def __call__(self, step):
        if self.schedule == "constant":
            return 1.0
        warmup, steps = self.warmup(), self.total_steps
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, steps - warmup))
        return 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * progress))


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
        Optimizer steps of the whole run. :func:`set_total_steps` changes it
        later.

    Returns
    -------
    torch.optim.lr_scheduler.LambdaLR
    """
    return torch.optim.lr_scheduler.LambdaLR(optimizer, _Horizon(schedule, steps))


def set_total_steps(scheduler, steps):
    """Re-plan a :func:`make_schedule` schedule for a run of ``steps`` steps.

    The rate of the steps still to come follows the new horizon (the
    cosine decay ends at the new last step).
    """
    for factor in scheduler.lr_lambdas:
        factor.total_steps = max(1, int(steps))
