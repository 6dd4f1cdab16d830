"""The VT + SAND module: SAND's layer smoothing a transformer's curve."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from fdaimpute.nn.batching import anchor_weights
from fdaimpute.nn.channels import (
    channel_gate,
    channel_masks,
    fold_channels,
    module_inputs,
    unfold_channels,
)
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
    base_gate : bool, default=False
        Add SAND's own ``base_gate`` (starting at 0; one weight per
        variable with several); needed, with ``vt`` built with
        ``base_gate=True``, to use a base.

    Attributes
    ----------
    base_curves : callable or None
        The statistical base (see :class:`~fdaimpute.nn.VTModule`). With a
        base, SAND smooths the transformer's own curve (before VT's gate),
        and the output mixes SAND's curve ``S`` and derivative ``D`` with
        the base's ``b`` and ``b'`` through SAND's gate ``g``:
        ``b + g * (S - b)`` and ``b' + g * (D - b')``. The output is the
        base while ``g = 0`` and stays C1 whenever the base is.

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

    def __init__(self, vt, sand, detach=True, base_gate=False):
        super().__init__()
        self.vt = vt
        self.sand = sand
        self.detach = detach
        if base_gate:
            p = self.n_variables
            self.base_gate = nn.Parameter(torch.zeros(() if p == 1 else (p,)))

    def parameter_groups(self):
        """The transformer's parameters, then the SAND layer's (two lists).

        SAND's input is detached, so the two solve separate problems: the
        trainer clips their gradients separately and may give SAND its own
        learning rate. SAND's ``base_gate`` is with the transformer's: it
        weighs the network against the base, as the transformer's own gate
        does, and at SAND's slow rate (the CPU preset's ``sand_lr=1e-5``)
        it could not leave the base.
        """
        params = dict(self.named_parameters())
        own = [n for n in params if n.startswith("sand.")]
        rest = [p for n, p in params.items() if n not in own]
        return [rest, [params[n] for n in own]]

    @property
    def n_variables(self):
        """Variables per subject (the transformer's)."""
        return getattr(self.vt, "n_variables", 1)

    @property
    def n_covariates(self):
        """Subject covariates the transformer reads."""
        return getattr(self.vt, "n_covariates", 0)

    def encode(self, t, y, mask, variable=None, covariates=None):
        """The transformer's encoder tokens (see :meth:`VTModule.encode`)."""
        return self.vt.encode(t, y, mask, variable, covariates)

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
        variable=None,
        covariates=None,
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
        variable : long Tensor of shape (B, L), default=None
            Each observation's variable, for a transformer of several. SAND
            then smooths each variable's curve as a curve of its own,
            anchored at that variable's observations (a subject with none of
            a variable anchors its curve at the middle of the grid); explicit
            ``anchors`` are then ``(B * p, M)``, one row per curve.
        covariates : Tensor of shape (B, c), default=None
            Each subject's covariates, for a transformer built with them.

        Returns
        -------
        ModuleOutput
            VT's output with ``sand`` and ``derivative`` set (with a base,
            also in its ``network``: SAND's smoothing of the network's own
            curve).

        Notes
        -----
        SAND always runs in float32, outside any autocast region: it is
        cheap, and its derivative operator (a sum of many terms that cancel,
        scaled by ``gain``) and the cumulative sum lose too much in float16.
        """
        p = self.n_variables
        if anchors is None or isinstance(anchors, str):
            if p > 1:
                if variable is None:
                    raise ValueError(
                        f"a module of {p} variables needs each observation's variable"
                    )
                t_rows, mask_rows = channel_masks(t, mask, variable, p)
                anchors, anchor_mode = self._anchor_weights(
                    t_rows, mask_rows, grid, anchors
                )
            else:
                anchors, anchor_mode = self._anchor_weights(t, mask, grid, anchors)
        extra = module_inputs(p, variable, covariates)
        if base is None and self.base_curves is not None:
            base = self.base_curves(t, y, mask, grid, **extra)
        if base is not None and not hasattr(self, "base_gate"):
            raise ValueError("a base needs a module built with base_gate=True")
        out = self.vt(t, y, mask, grid, return_hidden=return_hidden, base=base, **extra)
        rough = out.curve if base is None else out.network.curve
        rough = rough.detach() if self.detach else rough
        # (the only autocast the trainer uses is CUDA's)
        with torch.autocast("cuda", enabled=False):
            smooth, deriv = self.sand(
                fold_channels(rough.float(), p),
                grid,
                anchors=anchors,
                anchor_mode=anchor_mode,
            )
        smooth, deriv = unfold_channels(smooth, p), unfold_channels(deriv, p)
        if base is None:
            return replace(out, sand=smooth, derivative=deriv)
        gate = channel_gate(self.base_gate, grid.shape[0])
        network = replace(out.network, sand=smooth, derivative=deriv)
        if self.vt.mix_detached:
            smooth, deriv = smooth.detach(), deriv.detach()
        return replace(
            out,
            sand=base[0] + gate * (smooth - base[0]),
            derivative=base[1] + gate * (deriv - base[1]),
            network=network,
        )

    @staticmethod
    def _anchor_weights(t, mask, grid, rule):
        """SANDLayer's anchors and mode for an anchoring rule."""
        if rule is None:
            return None, "two-sided"
        if rule not in ANCHORS:
            raise ValueError(f"anchors must be one of {ANCHORS}, got {rule!r}")
        weights = anchor_weights(t, mask, grid, nearest=rule == "two-sided")
        empty = ~mask.any(dim=1)
        if bool(empty.any()):
            # a curve of a variable the subject was never seen on: its level
            # is the transformer's at the middle of the grid
            weights[empty, grid.shape[0] // 2] = 1.0
        if rule == "two-sided":
            weights = weights > 0
        return weights, rule
