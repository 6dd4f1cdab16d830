"""The regularizer interface: the step context, the base class, list checks.

Concrete penalties are in :mod:`fdaimpute.nn.regularizers`, which also
re-exports everything here.
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
    "check_regularizers",
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
        Current epoch, from 0 at the first fit (a warm start continues the
        count).
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

    Notes
    -----
    For a module of ``p`` variables, each subject's variables are rows of
    their own (``B`` is the number of subjects times ``p``, row ``b * p +
    j`` is variable ``j`` of subject ``b``): each variable's curve on the
    grid, its observations' times with ``mask`` true only at those of
    variable ``j``, the embedding and encoder outputs (observation tokens
    only) repeated for each variable, and each variable's grid queries of
    the decoder. So a penalty along time never joins two variables.
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

    def weight_at(self, epoch):
        """Multiplier of the penalty at ``epoch`` (constant unless overridden)."""
        return self.weight

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
