"""Normalisation layers of the transformer: layer, RMS, masked batch, or none.

:func:`make_norm` builds the layer a ``norm`` option names. Layer and RMS
normalisation act on each token alone. :class:`MaskedBatchNorm` normalises
each feature over the tokens of the whole batch and so needs to know which
tokens are real: its ``forward`` takes a mask, and :func:`takes_mask` tells
the callers which layers want one.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["NORMS", "MaskedBatchNorm", "RMSNorm", "make_norm", "takes_mask"]

#: The accepted values of a ``norm`` option (``None``: no normalisation).
NORMS = ("layer", "batch", "rms", None)
_EPS = 1e-5


class _OwnRMSNorm(nn.Module):
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last dimension.

    The stand-in for :class:`torch.nn.RMSNorm` (torch < 2.4), with the same
    parameter name, so weights move between the two.
    """

    def __init__(self, d_model, eps=_EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (h * self.weight).to(x.dtype)


#: Root-mean-square normalisation: torch's where it exists (torch >= 2.4).
RMSNorm = getattr(nn, "RMSNorm", _OwnRMSNorm)


class MaskedBatchNorm(nn.Module):
    """Batch normalisation of tokens, with statistics over the real ones only.

    In training, each of the ``d`` features of a (B, L, d) input is
    standardised by its mean and variance over the tokens the mask marks as
    real (all of them without a mask), then scaled and shifted by learned
    ``weight`` and ``bias``; the running averages of those statistics
    (momentum ``momentum``) replace them in eval mode. Padded tokens are
    transformed too (their outputs are meaningless and ignored downstream)
    but never enter the statistics, so padding cannot change the output of
    the real tokens, in either mode.

    Parameters
    ----------
    d_model : int
        Number of features (the last dimension).
    momentum : float, default=0.1
        Weight of the current batch in the running statistics.
    eps : float, default=1e-5
        Added to the variance.

    Notes
    -----
    The running variance averages the batch's *biased* variance (PyTorch's
    :class:`~torch.nn.BatchNorm1d` uses the unbiased one). With it, a batch
    of ``B`` identical copies of ``M`` tokens has exactly the statistics of
    one copy, in training and in the running averages; the transformer
    relies on this to share its first decoder layer's grid queries between
    subjects. Statistics are computed in float32 (also under autocast).

    Examples
    --------
    >>> import torch
    >>> bn = MaskedBatchNorm(3)
    >>> x = torch.randn(2, 4, 3)
    >>> mask = torch.tensor([[True, True, False, False], [True] * 4])
    >>> padded = torch.where(mask[..., None], x, torch.tensor(1e3))
    >>> torch.allclose(bn(x, mask)[mask], bn(padded, mask)[mask])
    True
    """

    def __init__(self, d_model, momentum=0.1, eps=_EPS):
        super().__init__()
        self.momentum = float(momentum)
        self.eps = float(eps)
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.register_buffer("running_mean", torch.zeros(d_model))
        self.register_buffer("running_var", torch.ones(d_model))

    def forward(self, x, mask=None):
        """Normalise ``x`` (..., d); ``mask`` (x.shape[:-1]) is True for real tokens."""
        h = x.float()
        if self.training:
            mean, var = self._batch_stats(h, mask)
            with torch.no_grad():
                self.running_mean.lerp_(mean.detach(), self.momentum)
                self.running_var.lerp_(var.detach(), self.momentum)
        else:
            mean, var = self.running_mean, self.running_var
        scale = torch.rsqrt(var + self.eps) * self.weight
        return ((h - mean) * scale + self.bias).to(x.dtype)

    @staticmethod
    def _batch_stats(h, mask):
        """Per-feature mean and biased variance over the real tokens of ``h``."""
        flat = h.reshape(-1, h.shape[-1])
        if mask is None:
            mean = flat.mean(dim=0)
            return mean, (flat - mean).pow(2).mean(dim=0)
        keep = mask.reshape(-1, 1)
        count = keep.sum().clamp_min(1)
        # where(), not a product: padded tokens may hold anything, inf included
        mean = torch.where(keep, flat, 0.0).sum(dim=0) / count
        var = torch.where(keep, flat - mean, 0.0).pow(2).sum(dim=0) / count
        return mean, var


def takes_mask(layer):
    """Whether ``layer`` (from :func:`make_norm`) needs the mask of real tokens."""
    return isinstance(layer, MaskedBatchNorm)


def make_norm(norm, d_model):
    """The normalisation layer named by ``norm``.

    Parameters
    ----------
    norm : {"layer", "batch", "rms", None}
        :class:`torch.nn.LayerNorm`, :class:`MaskedBatchNorm`,
        :data:`RMSNorm`, or :class:`torch.nn.Identity`.
    d_model : int
        Width of the tokens.

    Returns
    -------
    torch.nn.Module

    Raises
    ------
    ValueError
        If ``norm`` is not one of the four.
    """
    if norm is None:
        return nn.Identity()
    if norm == "layer":
        return nn.LayerNorm(d_model)
    if norm == "batch":
        return MaskedBatchNorm(d_model)
    if norm == "rms":
        return RMSNorm(d_model, eps=_EPS)
    raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
