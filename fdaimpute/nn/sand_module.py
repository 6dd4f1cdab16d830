"""The VT + SAND module: SAND's layer smoothing a transformer's curve."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from fdaimpute.nn.batching import anchor_weights
from fdaimpute.nn.integration import ANCHORS

__all__ = ["SANDModule"]


class SANDModule(nn.Module):
    """VT followed by SAND: ``SAND(T~)`` with ``T~`` from a :class:`VTModule`.

    Parameters
    ----------
    vt : VTModule
        The transformer producing ``T~``.
    sand : SANDLayer
        The smoothing layer.
    detach : bool, default=True
        Feed SAND a detached ``T~`` (the paper's training: VT learns from
        its own loss only).

    Attributes
    ----------
    base_curves : callable or None
        The statistical base (see :class:`~fdaimpute.nn.VTModule`). With a
        base, ``T~`` is the base's curve plus VT's correction, and SAND
        smooths the correction only: its curve is the base's plus SAND's
        integral of the correction, its derivative the base's plus SAND's
        ``D~`` of the correction, so the output stays C1 whenever the base
        is.

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn import SANDLayer, SANDModule, VTModule
    >>> model = SANDModule(VTModule(d_model=16, n_heads=2, encoding_dim=8),
    ...                    SANDLayer(head_dim=8, encoding_dim=8))
    >>> t = torch.rand(2, 4)
    >>> out = model(t, torch.randn(2, 4), torch.ones(2, 4, dtype=torch.bool),
    ...             torch.linspace(0, 1, 11))
    >>> sorted(out)
    ['curve', 'derivative', 'embedding', 'sand']
    """

    base_curves = None

    def __init__(self, vt, sand, detach=True):
        super().__init__()
        self.vt = vt
        self.sand = sand
        self.detach = detach

    def parameter_groups(self):
        """The transformer's parameters, then the SAND layer's (two lists).

        SAND's input is detached, so the two solve separate problems: the
        trainer clips their gradients separately and may give SAND its own
        learning rate.
        """
        rest = [p for n, p in self.named_parameters() if not n.startswith("sand.")]
        return [rest, list(self.sand.parameters())]

    def encode(self, t, y, mask):
        """The transformer's encoder tokens (see :meth:`VTModule.encode`)."""
        return self.vt.encode(t, y, mask)

    def forward(
        self,
        t,
        y,
        mask,
        grid,
        anchors=None,
        anchor_mode="two-sided",
        return_hidden=False,
        base=None,
    ):
        """Run VT, then SAND.

        Parameters
        ----------
        t, y, mask, grid, return_hidden
            As for :meth:`VTModule.forward`.
        anchors : {None, "mean", "two-sided"} or Tensor of shape (B, M), default=None
            The integration constant. A rule: ``None`` (plain SAND,
            ``T~_1 + Intg(D~)``), ``"mean"`` or ``"two-sided"``, anchored
            at the grid points near the observations ``mask`` lets through
            (see :func:`~fdaimpute.nn.anchor_weights`). Or explicit anchors
            per grid point, passed to :class:`SANDLayer` with
            ``anchor_mode``.
        anchor_mode : {"two-sided", "mean"}, default="two-sided"
            How explicit anchors pin the integral (ignored for a rule).
        base : tuple of two Tensors of shape (B, M), default=None
            The base's curve and derivative, when the caller has them
            already; otherwise :attr:`base_curves` gives them (if set).

        Returns
        -------
        ModuleOutput
            VT's output with ``sand`` and ``derivative`` set.

        Notes
        -----
        SAND always runs in float32, outside any autocast region: it is
        cheap, and its derivative operator (a sum of many terms that cancel,
        scaled by ``gain``) and the cumulative sum lose too much in float16.
        """
        if anchors is None or isinstance(anchors, str):
            anchors, anchor_mode = self._anchor_weights(t, mask, grid, anchors)
        if base is None and self.base_curves is not None:
            base = self.base_curves(t, y, mask, grid)
        out = self.vt(t, y, mask, grid, return_hidden=return_hidden, base=base)
        rough = out.curve.detach() if self.detach else out.curve
        # (the only autocast the trainer uses is CUDA's)
        with torch.autocast("cuda", enabled=False):
            rough = rough.float()
            if base is not None:
                rough = rough - base[0]
            smooth, deriv = self.sand(
                rough, grid, anchors=anchors, anchor_mode=anchor_mode
            )
        if base is not None:
            smooth, deriv = smooth + base[0], deriv + base[1]
        return replace(out, sand=smooth, derivative=deriv)

    @staticmethod
    def _anchor_weights(t, mask, grid, rule):
        """SANDLayer's anchors and mode for an anchoring rule."""
        if rule is None:
            return None, "two-sided"
        if rule not in ANCHORS:
            raise ValueError(f"anchors must be one of {ANCHORS}, got {rule!r}")
        weights = anchor_weights(t, mask, grid, nearest=rule == "two-sided")
        if rule == "two-sided":
            weights = weights > 0
        return weights, rule
