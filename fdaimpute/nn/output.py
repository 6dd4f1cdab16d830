"""What the VT and SAND modules return: one output type for both."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

import torch

__all__ = ["ModuleOutput"]


@dataclass(eq=False)
class ModuleOutput(Mapping):
    """What a :class:`~fdaimpute.nn.VTModule` or a ``SANDModule`` returns.

    It is also a read-only mapping from the names of the fields that are
    set (not None) to their values, so ``out["curve"]`` and
    ``"sand" in out`` work as with a dict.

    Attributes
    ----------
    curve : Tensor of shape (B, M)
        The transformer's curve ``T~`` on the grid.
    embedding : Tensor of shape (B, L, d)
        The encoder's input tokens.
    sand : Tensor of shape (B, M) or None
        SAND's curve (None for a VT).
    derivative : Tensor of shape (B, M) or None
        SAND's derivative ``D~`` (None for a VT).
    hidden : dict of str to Tensor or None
        Layer outputs ``encoder.<i>`` (B, L, d) and ``decoder.<i>`` (B, M,
        d); None unless the forward pass was asked for them.
    network : ModuleOutput or None
        With a statistical base: the network's own output (its ``curve``,
        and for SAND its ``sand`` and ``derivative``), before the gate mixes
        it with the base's; None without a base.
    """

    curve: torch.Tensor
    embedding: torch.Tensor
    sand: torch.Tensor | None = None
    derivative: torch.Tensor | None = None
    hidden: dict | None = None
    network: ModuleOutput | None = None

    @property
    def output(self):
        """The module's output curve: SAND's curve for SAND, else ``T~``."""
        return self.curve if self.sand is None else self.sand

    def _present(self):
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]

    def __getitem__(self, key):
        if key not in self._present():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(self._present())

    def __len__(self):
        return len(self._present())
