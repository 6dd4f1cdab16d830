"""Ragged batches: flat observation tensors padded per batch, and masking.

Data are kept flat on the device (CSR-style ``times``, ``values``,
``offsets``, like :class:`fdaimpute.IrregularData`) and padded per batch to
the batch's longest subject; no Python loop runs over subjects.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "Batch",
    "RaggedTensors",
    "anchor_weights",
    "hide_observations",
    "shuffled_batches",
]


@dataclass
class Batch:
    """A padded batch: rows are subjects, columns their observations.

    Attributes
    ----------
    index : Tensor of shape (B,)
        Positions of the subjects in their data set.
    times, values : Tensor of shape (B, L)
        Times on [0, 1] and standardised values (0 at padding).
    valid : bool Tensor of shape (B, L)
        True at real observations.
    visible : bool Tensor of shape (B, L)
        True at observations the encoder sees (``valid`` minus hidden).
    variable : long Tensor of shape (B, L) or None
        Each observation's variable (0 at padding); None for data of one
        variable.
    covariates : Tensor of shape (B, c) or None
        Each subject's covariates (numeric, standardised); None without.
    base : tuple of two Tensors of shape (B, M) or None
        The module's statistical base (curve, derivative or None) from the
        ``visible`` observations, when computed ahead of the forward pass;
        None otherwise (the module then computes it).
    """

    index: torch.Tensor
    times: torch.Tensor
    values: torch.Tensor
    valid: torch.Tensor
    visible: torch.Tensor
    variable: torch.Tensor | None = None
    covariates: torch.Tensor | None = None
    base: tuple | None = None

    @property
    def extra_inputs(self):
        """The module's keyword inputs beyond the observations: ``variable``,
        ``covariates`` and ``base``, where the batch has them."""
        extra = {
            "variable": self.variable,
            "covariates": self.covariates,
            "base": self.base,
        }
        return {k: v for k, v in extra.items() if v is not None}


class RaggedTensors:
    """Flat observation tensors of many subjects, padded batch by batch.

    Parameters
    ----------
    times, values : array-like of shape (n_obs,)
        Observation times (already mapped to the model's scale) and values
        (already standardised), concatenated by subject.
    offsets : array-like of shape (n_subjects + 1,)
        CSR offsets.
    device : str or torch.device, default="cpu"
        Where to keep the tensors.
    variable : array-like of int of shape (n_obs,), default=None
        Each observation's variable, for data of several (batches then
        carry it).
    covariates : array-like of shape (n_subjects, c), default=None
        Each subject's covariates, numeric (batches then carry them).

    Examples
    --------
    >>> from fdaimpute.nn import RaggedTensors
    >>> data = RaggedTensors([0.1, 0.5, 0.2], [1.0, 2.0, 3.0], [0, 2, 3])
    >>> batch = data.batch([1, 0])
    >>> batch.values.tolist(), batch.valid.tolist()
    ([[3.0, 0.0], [1.0, 2.0]], [[True, False], [True, True]])
    """

    def __init__(
        self, times, values, offsets, device="cpu", variable=None, covariates=None
    ):
        self.times = torch.as_tensor(times, dtype=torch.float32, device=device)
        self.values = torch.as_tensor(values, dtype=torch.float32, device=device)
        self.variable = (
            None
            if variable is None
            else torch.as_tensor(variable, dtype=torch.long, device=device)
        )
        self.covariates = (
            None
            if covariates is None
            else torch.as_tensor(covariates, dtype=torch.float32, device=device)
        )
        self.offsets = torch.as_tensor(offsets, dtype=torch.long, device=device)
        self.counts = self.offsets[1:] - self.offsets[:-1]
        self.counts_cpu = self.counts.cpu()

    def __len__(self):
        return self.counts.shape[0]

    @property
    def device(self):
        return self.times.device

    def batch(self, index, width=None):
        """Pad the subjects at ``index`` to their longest: a :class:`Batch`.

        ``width`` pads to that many columns instead (at least the longest).
        """
        index = torch.as_tensor(index, dtype=torch.long)
        if width is None:
            # read on the host: no device sync when index is on the CPU
            width = int(self.counts_cpu[index.cpu()].max())
        index = index.to(self.device)
        counts = self.counts[index]
        cols = torch.arange(width, device=self.device)
        valid = cols < counts.unsqueeze(1)
        flat = (self.offsets[index].unsqueeze(1) + cols).clamp(
            max=self.times.shape[0] - 1
        )
        zero = torch.zeros((), device=self.device)
        times = torch.where(valid, self.times[flat], zero)
        values = torch.where(valid, self.values[flat], zero)
        variable = None
        if self.variable is not None:
            variable = torch.where(valid, self.variable[flat], 0)
        covariates = None if self.covariates is None else self.covariates[index]
        return Batch(index, times, values, valid, valid, variable, covariates)


def hide_observations(valid, generator=None):
    """Choose observations to hide from the encoder (self-supervised training).

    Each subject with ``n_i >= 2`` points hides ``k_i`` of them, ``k_i``
    uniform on ``1 .. floor(n_i / 2)``: with probability 1/2 a random
    subset, otherwise a contiguous run around a random centre (the SAND
    recipe, drawn per subject rather than per batch). Subjects with one
    point hide nothing.

    Parameters
    ----------
    valid : bool Tensor of shape (B, L)
        Real observations, left-aligned (padding at the end of each row).
    generator : torch.Generator, default=None
        Random source (on ``valid``'s device).

    Returns
    -------
    bool Tensor of shape (B, L)
        True where hidden.

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import hide_observations
    >>> valid = torch.ones(4, 6, dtype=torch.bool)
    >>> hidden = hide_observations(valid, torch.Generator().manual_seed(0))
    >>> bool(((hidden.sum(1) >= 1) & (hidden.sum(1) <= 3)).all())
    True
    """
    b, width = valid.shape
    dev = valid.device

    def rand(*shape):
        return torch.rand(*shape, generator=generator, device=dev)

    counts = valid.sum(dim=1)
    max_hide = counts // 2
    k = torch.where(max_hide > 0, (rand(b) * max_hide).long() + 1, 0).clamp(
        max=max_hide
    )
    keys = torch.where(valid, rand(b, width), 2.0)
    rank = keys.argsort(dim=1).argsort(dim=1)
    random_hide = rank < k.unsqueeze(1)
    centre = (rand(b) * counts).long()
    start = torch.minimum((centre - k // 2).clamp(min=0), counts - k)
    cols = torch.arange(width, device=dev)
    run_hide = (cols >= start.unsqueeze(1)) & (cols < (start + k).unsqueeze(1))
    use_run = (rand(b) < 0.5).unsqueeze(1)
    return torch.where(use_run, run_hide, random_hide) & valid


def anchor_weights(times, mask, grid, nearest=False):
    """Spread each visible observation over the grid (SAND's anchors).

    Parameters
    ----------
    times : Tensor of shape (B, L)
        Observation times on the grid's scale.
    mask : bool Tensor of shape (B, L)
        Observations to use.
    grid : Tensor of shape (M,)
        Increasing grid.
    nearest : bool, default=False
        Put each observation's unit weight on its nearest grid point instead
        of splitting it linearly between its two neighbours.

    Returns
    -------
    Tensor of shape (B, M)
        Non-negative weights; a subject's weights sum to its number of
        visible observations.
    """
    m = grid.shape[0]
    t = times.clamp(grid[0], grid[-1]).contiguous()
    pos = (torch.searchsorted(grid, t, right=True) - 1).clamp(0, m - 2)
    frac = (t - grid[pos]) / (grid[pos + 1] - grid[pos])
    w = mask.to(grid.dtype)
    out = torch.zeros(times.shape[0], m, dtype=grid.dtype, device=grid.device)
    if nearest:
        return out.scatter_add_(1, pos + (frac > 0.5).long(), w)
    out.scatter_add_(1, pos, w * (1 - frac))
    return out.scatter_add_(1, pos + 1, w * frac)


def shuffled_batches(data, batch_size, bucket, generator):
    """Index tensors of one epoch's batches: shuffled, sorted by length in chunks.

    Parameters
    ----------
    data : RaggedTensors
        The subjects.
    batch_size : int
        Subjects per batch.
    bucket : int
        Sort subjects by length within chunks of ``bucket`` batches, which
        cuts padding when the numbers of observations vary (0 disables it).
    generator : torch.Generator
        CPU random source of the shuffles.

    Returns
    -------
    list of Tensor
        The batches' subject positions, in a random order.
    """
    n = len(data)
    perm = torch.randperm(n, generator=generator)
    if bucket and data.counts_cpu.min() != data.counts_cpu.max():
        chunk = batch_size * bucket
        parts = []
        for start in range(0, n, chunk):
            idx = perm[start : start + chunk]
            parts.append(idx[data.counts_cpu[idx].argsort(stable=True)])
        perm = torch.cat(parts)
    out = list(perm.split(batch_size))
    order = torch.randperm(len(out), generator=generator)
    return [out[i] for i in order]
