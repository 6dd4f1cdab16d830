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

import inspect
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "Regularizer",
    "RegularizerContext",
    "Roughness",
    "WeightDecay",
    "regularizer_names",
]


@dataclass
class RegularizerContext:
    """What a training step exposes to regularizers.

    Attributes
    ----------
    module : torch.nn.Module
        The model being trained (a ``VTModule`` or a ``SANDModule``, whose
        transformer is ``module.vt``).
    epoch : int
        Current epoch, from 0.
    step : int
        Optimizer steps taken so far.
    times : Tensor of shape (B, L)
        Observation times of the encoder tokens, mapped to [0, 1].
    mask : bool Tensor of shape (B, L)
        True for tokens the encoder saw (not padding, not hidden).
    embedding : Tensor of shape (B, L, d)
        The encoder's input embedding sequence.
    grid : Tensor of shape (M,)
        The training grid on the [0, 1] time scale.
    curve : Tensor of shape (B, M)
        The model's output curve on the grid: VT's ``T~`` for a VT,
        SAND's curve for SAND.
    vt_curve : Tensor of shape (B, M)
        VT's ``T~`` (the same as ``curve`` for a VT).
    derivative : Tensor of shape (B, M) or None
        SAND's ``D~`` (None for a VT).
    hidden : dict of str to Tensor
        Layer outputs ``encoder.<i>`` (B, L, d) and ``decoder.<i>`` (B, M,
        d); empty unless a regularizer sets ``needs_hidden``.
    extra : dict
        Free room for future needs.
    """

    module: torch.nn.Module
    epoch: int
    step: int
    times: torch.Tensor
    mask: torch.Tensor
    embedding: torch.Tensor
    grid: torch.Tensor
    curve: torch.Tensor
    vt_curve: torch.Tensor
    derivative: torch.Tensor | None = None
    hidden: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)


class Regularizer:
    """Base class of the loss penalties.

    Subclasses store their constructor arguments under the same names (so
    :meth:`get_params` and ``repr`` work) and implement :meth:`penalty`.

    Parameters
    ----------
    weight : float, default=1.0
        Multiplier of the penalty in the loss (may be negative where a
        method calls for it).

    Attributes
    ----------
    needs_hidden : bool
        Class attribute: whether :meth:`penalty` reads ``context.hidden``.
    """

    needs_hidden = False

    def __init__(self, weight=1.0):
        self.weight = weight

    @property
    def name(self):
        """Key of the penalty in ``history_`` (after ``"reg/"``)."""
        return type(self).__name__.lower()

    def penalty(self, context):
        """Return the unweighted penalty, a scalar tensor.

        Parameters
        ----------
        context : RegularizerContext
            What the training step computed.

        Returns
        -------
        Tensor of shape ()
        """
        raise NotImplementedError

    def check(self):
        """Validate the parameters (called before training); raise ValueError."""
        w = self.weight
        if (
            not isinstance(w, numbers.Real)
            or isinstance(w, bool)
            or not math.isfinite(w)
        ):
            raise ValueError(f"{self!r}: weight must be a finite number, got {w!r}")

    def __call__(self, context):
        return self.penalty(context)

    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep=False):
        """Constructor arguments as a dict (scikit-learn style)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set constructor arguments; returns self."""
        valid = self._param_names()
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"invalid parameter {key!r} for {type(self).__name__}")
            setattr(self, key, value)
        return self

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other):
        return type(self) is type(other) and self.get_params() == other.get_params()

    __hash__ = None


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


def regularizer_names(regularizers):
    """History keys for a list of regularizers, made unique with ``_<i>`` suffixes."""
    names, seen = [], {}
    for reg in regularizers:
        base = f"reg/{reg.name}"
        count = seen.get(base, 0)
        seen[base] = count + 1
        names.append(base if count == 0 else f"{base}_{count}")
    return names


def check_regularizers(regularizers) -> list[Any]:
    """Validate a ``regularizers`` parameter; returns a list (empty for None)."""
    if regularizers is None:
        return []
    if isinstance(regularizers, Regularizer):
        regularizers = [regularizers]
    regs = list(regularizers)
    for reg in regs:
        if not callable(getattr(reg, "penalty", None)) or not hasattr(reg, "weight"):
            raise TypeError(
                f"regularizers must have a weight and a penalty(context) method "
                f"(see fdaimpute.nn.regularizers.Regularizer); got {reg!r}"
            )
        if hasattr(reg, "check"):
            reg.check()
    return regs
