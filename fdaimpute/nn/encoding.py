"""Sinusoidal time encodings for continuous, irregular time stamps."""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["SinusoidalEncoding", "sinusoidal_encoding"]


def sinusoidal_encoding(t, dim, scale=100.0, base=1e4):
    """Encode times with sines and cosines of geometric frequencies.

    Feature ``2k`` is ``sin(scale * t * w_k)`` and feature ``2k + 1`` is
    ``cos(scale * t * w_k)`` with ``w_k = base ** (-2 (k + 1) / dim)``,
    ``k = 0 .. dim/2 - 1``. With ``base=1e4`` this is the SAND paper's
    ``w_k = 10^(-4 (k+1) / p)`` indexed over the ``p/2`` frequencies, and
    ``scale = M - 1`` makes ``scale * t`` the (fractional) index of ``t``
    on an ``M``-point grid over ``[0, 1]``.

    Parameters
    ----------
    t : Tensor of any shape
        Times, usually mapped to ``[0, 1]``.
    dim : int
        Number of features (even).
    scale : float, default=100.0
        Multiplier of ``t``.
    base : float, default=1e4
        Sets the frequency range: the frequencies run geometrically from
        about 1 down to ``1 / base`` (as in the original transformer).

    Returns
    -------
    Tensor of shape ``t.shape + (dim,)``

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import sinusoidal_encoding
    >>> sinusoidal_encoding(torch.tensor([0.0, 0.5]), 4).shape
    torch.Size([2, 4])
    """
    if dim <= 0 or dim % 2:
        raise ValueError(f"dim must be a positive even integer, got {dim}")
    # float64 times are encoded in float64, anything else in float32
    dtype = torch.float64 if t.dtype == torch.float64 else torch.float32
    k = torch.arange(dim // 2, device=t.device, dtype=dtype)
    freq = torch.exp(-(2.0 * (k + 1.0) / dim) * math.log(base))
    angle = (scale * t.to(dtype)).unsqueeze(-1) * freq
    enc = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1)
    return enc.flatten(-2).to(t.dtype if t.is_floating_point() else torch.float32)


class SinusoidalEncoding(nn.Module):
    """Module wrapper of :func:`sinusoidal_encoding` (no learned parameters).

    Parameters
    ----------
    dim : int
        Number of features (even).
    scale : float, default=100.0
        Multiplier of the time; ``M - 1`` for an ``M``-point grid on [0, 1].
    base : float, default=1e4
        Frequency range, as in :func:`sinusoidal_encoding`.

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import SinusoidalEncoding
    >>> SinusoidalEncoding(8)(torch.zeros(3, 5)).shape
    torch.Size([3, 5, 8])
    """

    def __init__(self, dim, scale=100.0, base=1e4):
        super().__init__()
        if dim <= 0 or dim % 2:
            raise ValueError(f"dim must be a positive even integer, got {dim}")
        self.dim = int(dim)
        self.scale = float(scale)
        self.base = float(base)

    def forward(self, t):
        return sinusoidal_encoding(t, self.dim, self.scale, self.base)

    def extra_repr(self):
        return f"dim={self.dim}, scale={self.scale:g}, base={self.base:g}"
