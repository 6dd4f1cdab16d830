"""Penalties added to the training loss of the neural imputers.

A regularizer is a small object with a ``weight`` and a :meth:`penalty`
method that maps a :class:`RegularizerContext` (everything one training
step computed) to an *unweighted* scalar tensor. The training loop adds
``weight * penalty`` to the loss and records the unweighted value per epoch
in ``history_["reg/<name>"]``. Regularizers are plain classes whose
``__init__`` only stores its arguments, so ``sklearn.base.clone`` copies
them with the estimator.

Writing a new one takes a few lines::

    class MeanCurve(Regularizer):
        def __init__(self, weight=1.0):
            super().__init__(weight)

        def penalty(self, context):
            return context.curve.mean(dim=1).pow(2).mean()

Set the class attribute ``needs_hidden = True`` when ``penalty`` reads
``context.hidden``; the layer outputs are then collected during the
forward pass.
"""

from __future__ import annotations

import math
import numbers

import torch

from fdaimpute.nn.regularizer_base import (
    Regularizer,
    RegularizerContext,
    check_regularizers,  # noqa: F401 (importable from here, as before)
    regularizer_names,
)

__all__ = [
    "LipReg",
    "NormStabilizer",
    "Regularizer",
    "RegularizerContext",
    "Roughness",
    "SmoothingRegularizer",
    "WeightDecay",
    "feed_forward_blocks",
    "regularizer_names",
]


class Roughness(Regularizer):
    """Mean squared second difference of the output curve on the grid.

    ``mean_{b, m} (c_{b, m+1} - 2 c_{b, m} + c_{b, m-1})^2`` on standardised
    values; with a VT this is the SAND paper's VTP.

    Parameters
    ----------
    weight : float, default=1.0
        Multiplier in the loss (the paper picks it on validation over a
        small log grid).
    on : {"output", "vt"}, default="output"
        ``"output"``: the estimator's output curve (SAND's curve for
        SAND); ``"vt"``: the transformer's ``T~``.

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import Roughness, RegularizerContext
    >>> curve = torch.tensor([[0.0, 1.0, 0.0, 1.0]])
    >>> ctx = RegularizerContext(None, 0, 0, None, None, None, None, curve, curve)
    >>> Roughness(0.1).penalty(ctx)
    tensor(4.)
    """

    def __init__(self, weight=1.0, on="output"):
        super().__init__(weight)
        self.on = on

    def check(self):
        super().check()
        if self.on not in ("output", "vt"):
            raise ValueError(f"{self!r}: on must be 'output' or 'vt', got {self.on!r}")

    def penalty(self, context):
        c = context.curve if self.on == "output" else context.vt_curve
        return (c[:, 2:] - 2 * c[:, 1:-1] + c[:, :-2]).float().pow(2).mean()


class WeightDecay(Regularizer):
    """Half the sum of squared weights: ``0.5 * sum ||W||^2``.

    With this scaling, ``weight`` plays the role of SGD's ``weight_decay``
    (the gradient adds ``weight * W``). Unlike Adam's built-in weight decay
    it acts through the loss, so Adam rescales it like the data term.

    Parameters
    ----------
    weight : float, default=1e-4
        Multiplier in the loss.
    include_bias : bool, default=False
        Also penalise biases and normalisation parameters (the tensors with
        fewer than 2 dimensions).

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import RegularizerContext, WeightDecay
    >>> layer = torch.nn.Linear(2, 1)
    >>> with torch.no_grad():
    ...     _ = layer.weight.fill_(2.0)
    >>> ctx = RegularizerContext(layer, 0, 0, None, None, None, None, None, None)
    >>> WeightDecay().penalty(ctx)
    tensor(4., grad_fn=<MulBackward0>)
    """

    def __init__(self, weight=1e-4, include_bias=False):
        super().__init__(weight)
        self.include_bias = include_bias

    def penalty(self, context):
        params = [
            p
            for p in context.module.parameters()
            if p.requires_grad and (self.include_bias or p.ndim >= 2)
        ]
        return 0.5 * sum(p.float().pow(2).sum() for p in params)


def _normalise_per_channel(x, valid):
    """Rescale each subject's channels to [0, 1] over its valid positions.

    Positions that are not valid become 0 (their differences are never
    scored; left as they were, a row with one valid position could scale
    them beyond float32), and a row with none (a variable a subject does
    not show the encoder) is all 0.
    """
    big = torch.finfo(x.dtype).max
    keep = valid.unsqueeze(-1)
    empty = ~keep.any(dim=1, keepdim=True)
    lo = torch.where(keep, x, big).amin(dim=1, keepdim=True)
    hi = torch.where(keep, x, -big).amax(dim=1, keepdim=True)
    lo, hi = torch.where(empty, 0.0, lo), torch.where(empty, 1.0, hi)
    return torch.where(keep, (x - lo) / (hi - lo).clamp_min(1e-12), 0.0)


def _successive(values, times, valid):
    """Differences between consecutive valid positions, divided by their gaps.

    Positions are assumed sorted by time within each row (observation tokens
    are; grid points are). Returns the quotients and a mask of valid pairs.
    """
    pair = valid[:, 1:] & valid[:, :-1]
    gap = (times[:, 1:] - times[:, :-1]).clamp_min(1e-12)
    slope = (values[:, 1:] - values[:, :-1]) / gap.unsqueeze(-1)
    return slope, pair


class LipReg(Regularizer):
    """Lipschitz regularizer: mean squared successive difference along time.

    ``L_Lip = mean over subjects, channels and consecutive pairs of
    ((x_{j+1} - x_j) / (t_{j+1} - t_j))^2`` (Qu et al., ICLR 2023), a
    smooth surrogate of the sequence's Lipschitz constant. Before
    differencing, each subject's sequence is rescaled channel by channel to
    ``[0, 1]``, so a negative weight cannot be satisfied by simply scaling
    the sequence up. Padding and the points hidden from the encoder are
    left out: only consecutive *seen* tokens are compared.

    On irregular times the differences are divided by the time gaps (times
    on ``[0, 1]``): the quantity is the mean squared slope, which for an
    equally spaced sequence is the slides' ``L_Lip`` divided by the
    squared spacing.

    Parameters
    ----------
    weight : float, default=1.0
        Signed multiplier: the LipReg paper *subtracts* it for transformers
        (they prefer less continuous input: use a negative weight) and adds
        it for state-space models.
    on : {"embedding", "output"}, default="embedding"
        ``"embedding"``: the encoder's input token sequence (B, L, d) at
        the observation times; ``"output"``: the output curve on the grid.
    decay : float, default=0.0
        Spectral-bias form ``weight * exp(-decay * epoch)``: a weight that
        fades over training (0 keeps it constant).

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import LipReg, RegularizerContext
    >>> grid = torch.linspace(0, 1, 5)
    >>> ramp = grid.unsqueeze(0)
    >>> ctx = RegularizerContext(None, 0, 0, None, None, None, grid, ramp, ramp)
    >>> LipReg(on="output").penalty(ctx)  # slope 1 after rescaling to [0, 1]
    tensor(1.)
    """

    def __init__(self, weight=1.0, on="embedding", decay=0.0):
        super().__init__(weight)
        self.on = on
        self.decay = decay

    def check(self):
        super().check()
        if self.on not in ("embedding", "output"):
            raise ValueError(f"{self!r}: on must be 'embedding' or 'output'")
        if not isinstance(self.decay, numbers.Real) or self.decay < 0:
            raise ValueError(f"{self!r}: decay must be >= 0, got {self.decay!r}")

    def weight_at(self, epoch):
        return self.weight * math.exp(-self.decay * epoch)

    def penalty(self, context):
        if self.on == "embedding":
            x = context.embedding.float()
            times, valid = context.times.float(), context.mask
        else:
            x = context.curve.float().unsqueeze(-1)
            times = context.grid.float().expand(x.shape[0], -1)
            valid = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        x = _normalise_per_channel(x, valid)
        slope, pair = _successive(x, times, valid)
        weight = pair.unsqueeze(-1).to(slope.dtype)
        return (slope.pow(2) * weight).sum() / (weight.sum() * x.shape[-1]).clamp_min(1)


class NormStabilizer(Regularizer):
    """Norm stabilizer: mean over time of ``(||h_t|| - ||h_{t-1}||)^2``.

    Krueger & Memisevic's penalty on a layer's hidden states, here along
    the sequence of observation tokens (encoder layers) or grid points
    (decoder layers); padding and hidden tokens are left out.

    Parameters
    ----------
    weight : float, default=1.0
        Multiplier in the loss.
    layer : str, default="decoder.-1"
        ``"encoder.<i>"`` or ``"decoder.<i>"``; negative ``i`` counts from
        the last layer.

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import NormStabilizer, RegularizerContext
    >>> h = torch.tensor([[[3.0, 4.0], [0.0, 5.0], [5.0, 0.0]]])  # norms 5, 5, 5
    >>> ctx = RegularizerContext(None, 0, 0, None, None, None, None, None, None,
    ...                          hidden={"decoder.0": h})
    >>> NormStabilizer(layer="decoder.0").penalty(ctx)
    tensor(0.)
    """

    needs_hidden = True

    def __init__(self, weight=1.0, layer="decoder.-1"):
        super().__init__(weight)
        self.layer = layer

    def _key(self, hidden):
        part, _, index = str(self.layer).partition(".")
        keys = sorted(
            (k for k in hidden if k.startswith(part + ".")),
            key=lambda k: int(k.split(".")[1]),
        )
        try:
            return keys[int(index)]
        except (ValueError, IndexError):
            raise ValueError(
                f"{self!r}: no layer {self.layer!r}; available: {sorted(hidden)}"
            ) from None

    def check(self):
        super().check()
        part, _, index = str(self.layer).partition(".")
        if part not in ("encoder", "decoder") or not index.lstrip("-").isdigit():
            raise ValueError(
                f"{self!r}: layer must look like 'encoder.0' or 'decoder.-1'"
            )

    def penalty(self, context):
        key = self._key(context.hidden)
        norms = context.hidden[key].float().norm(dim=-1)
        if key.startswith("encoder"):
            valid = context.mask
        else:
            valid = torch.ones_like(norms, dtype=torch.bool)
        pair = (valid[:, 1:] & valid[:, :-1]).to(norms.dtype)
        jumps = (norms[:, 1:] - norms[:, :-1]).pow(2)
        return (jumps * pair).sum() / pair.sum().clamp_min(1)


# sup_x |f'(x)|: the bound on the activation's slope in Wu & Moody's gamma.
_ACTIVATION_SLOPE = {
    torch.nn.ReLU: 1.0,
    torch.nn.GELU: 1.1289,  # the peak of GELU', at x = sqrt(2)
    torch.nn.Tanh: 1.0,
    torch.nn.Sigmoid: 0.25,
    torch.nn.Identity: 1.0,
}


def feed_forward_blocks(module):
    """The (input Linear, activation, output Linear) triples of a module's MLPs.

    A block is an ``nn.Sequential`` whose first and last layers are
    ``nn.Linear`` with one activation in between (dropout allowed).
    """
    blocks = []
    for sub in module.modules():
        if not isinstance(sub, torch.nn.Sequential):
            continue
        layers = [m for m in sub if not isinstance(m, torch.nn.Dropout)]
        if (
            len(layers) == 3
            and isinstance(layers[0], torch.nn.Linear)
            and isinstance(layers[2], torch.nn.Linear)
            and type(layers[1]) in _ACTIVATION_SLOPE
        ):
            blocks.append(tuple(layers))
    return blocks


class SmoothingRegularizer(Regularizer):
    """Wu & Moody's smoothing regularizer: the output sensitivity of the MLPs.

    For a feed-forward block ``x -> U f(V x)`` the output moves by at most
    ``rho ||dx||`` when the input moves by ``dx``, with ``rho = gamma ||U||
    ||V||`` (Frobenius norms) and ``gamma = sup |f'|`` (1 for ReLU, about
    1.13 for GELU). The penalty is the sum of ``rho`` over every
    feed-forward block of the network (Wu & Moody 1996, eq. 17, the
    feed-forward case).

    Parameters
    ----------
    weight : float, default=1e-3
        Multiplier in the loss.

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import RegularizerContext, SmoothingRegularizer
    >>> mlp = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(),
    ...                           torch.nn.Linear(3, 1))
    >>> ctx = RegularizerContext(mlp, 0, 0, None, None, None, None, None, None)
    >>> value = SmoothingRegularizer().penalty(ctx)
    >>> bool(torch.isclose(value, mlp[2].weight.norm() * mlp[0].weight.norm()))
    True
    """

    def __init__(self, weight=1e-3):
        super().__init__(weight)

    def penalty(self, context):
        blocks = feed_forward_blocks(context.module)
        if not blocks:
            raise ValueError(f"{self!r}: the module has no feed-forward blocks")
        return sum(
            _ACTIVATION_SLOPE[type(act)] * out.weight.norm() * inp.weight.norm()
            for inp, act, out in blocks
        )
