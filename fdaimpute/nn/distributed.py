"""Training across processes with ``torch.distributed``, when a group is up.

Launched by ``torchrun`` (or anything that calls
:func:`torch.distributed.init_process_group`), every process runs the same
fit on the same data: the same split, shuffling and hiding seeds. Each
global batch of ``batch_size`` subjects is dealt out to the ranks (rank
``r`` takes subjects ``r, r + W, ...`` of it), DistributedDataParallel
averages the gradients, so the global batch and the learning rate are those
of one process. Each rank's loss is the mean over its own observations;
weighted by its share of the global batch's observations
(:func:`observation_weight`) before DDP's average, the gradient is that of
the mean over the whole batch, as in one process. Epoch losses and the
finiteness check are averaged over ranks, so every rank takes the same
early-stopping decision. Without a process group
(or with one process) nothing here changes anything.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

__all__ = [
    "all_finite",
    "mean_over_ranks",
    "min_over_ranks",
    "observation_weight",
    "shard",
    "world",
    "wrap",
]


def world():
    """``(rank, world_size)`` of the process group; ``(0, 1)`` without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shard(index, rank, size):
    """This rank's subjects of a global batch (never empty).

    A batch with fewer subjects than ranks (the last one of an epoch, at
    most) gives a rank without a subject of its own one of the others, so
    that every rank takes the same number of steps.
    """
    if size == 1:
        return index
    part = index[rank::size]
    if part.numel() == 0:
        part = index[rank % index.numel()].reshape(1)
    return part


def wrap(module, device):
    """``module`` in DistributedDataParallel (gradients averaged over ranks)."""
    ids = [device.index] if device.type == "cuda" and device.index is not None else None
    return DistributedDataParallel(module, device_ids=ids)


def _reduce(value, device, op):
    tensor = torch.tensor([float(value)], dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=op)
    return tensor.item()


def mean_over_ranks(value, device, size):
    """The mean of a float over the ranks (the value itself with one rank)."""
    if size == 1 or value is None:
        return value
    return _reduce(value, device, dist.ReduceOp.SUM) / size


def sum_over_ranks(value, device, size):
    """The sum of a float over the ranks (the value itself with one rank)."""
    if size == 1:
        return value
    return _reduce(value, device, dist.ReduceOp.SUM)


def min_over_ranks(value, device, size):
    """The smallest of a number over the ranks (the value itself with one rank)."""
    if size == 1:
        return value
    return _reduce(value, device, dist.ReduceOp.MIN)


def observation_weight(count, device, size):
    """``size * count / total``: the factor of this rank's mean loss.

    ``count`` is the number (or total weight) of the observations this
    rank's loss averages over and ``total`` its sum over the ranks. With the
    factor, DDP's average of the ranks' gradients is the gradient of the
    mean over all ``total`` observations. 1 with one rank.
    """
    if size == 1:
        return 1.0
    total = _reduce(count, device, dist.ReduceOp.SUM)
    return size * float(count) / max(total, 1.0)


def all_finite(flag, device, size):
    """Whether ``flag`` holds on every rank."""
    if size == 1:
        return flag
    return bool(_reduce(1.0 if flag else 0.0, device, dist.ReduceOp.MIN))
