"""Conditional neural process (Garnelo et al., ICML 2018) on ragged batches.

A subject's observed ``(t_j, y_j)`` are its *context*. An encoder MLP maps
each ``[y_j, t_j, enc(t_j)]`` to ``r_j``; their mean over the context (padding
masked) is the subject's representation ``r``. A decoder MLP maps
``[r, t*, enc(t*)]`` at any target time ``t*`` to a mean and a standard
deviation (``min_sd + (1 - min_sd) softplus(.)``). Training draws a random
context in each batch (:func:`sample_context`) and minimises the Gaussian
negative log-likelihood of all of the subject's points under the decoder's
predictions (:class:`CNPTrainer`, the shared :class:`~fdaimpute.nn.Trainer`
with three hooks replaced).

The decoder is evaluated at each target time on its own, so a CNP needs no
grid: curves are read at any times, and with a smooth activation (SiLU) the
curve is smooth in ``t*`` with an exact derivative by automatic
differentiation (:func:`predict_cnp`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fdaimpute.nn.batching import RaggedTensors
from fdaimpute.nn.encoding import sinusoidal_encoding
from fdaimpute.nn.training import Trainer

__all__ = [
    "CNPModule",
    "CNPOutput",
    "CNPTrainer",
    "gaussian_nll",
    "predict_cnp",
    "sample_context",
]

#: Floor of the decoder's standard deviation (standardised units).
MIN_SD = 0.01


@dataclass(eq=False)
class CNPOutput:
    """What a :class:`CNPModule` returns at its target times.

    Attributes
    ----------
    mean, variance : Tensor of shape (B, T)
        The decoder's predictive mean and variance of an observation at
        each target time (the variance includes the measurement noise).
    representation : Tensor of shape (B, r_dim)
        Each subject's pooled context representation ``r``.
    """

    mean: torch.Tensor
    variance: torch.Tensor
    representation: torch.Tensor


def _mlp(n_in, hidden, n_layers, n_out):
    layers, width = [], n_in
    for _ in range(n_layers):
        layers += [nn.Linear(width, hidden), nn.SiLU()]
        width = hidden
    layers.append(nn.Linear(width, n_out))
    return nn.Sequential(*layers)


class CNPModule(nn.Module):
    """The encoder, mean pooling and decoder of a conditional neural process.

    Parameters
    ----------
    hidden_dim : int, default=128
        Width of the hidden layers of both MLPs.
    n_layers : int, default=3
        Hidden layers of each MLP (the encoder and the decoder).
    r_dim : int, default=128
        Length of ``r_j`` and ``r``.
    encoding_dim : int, default=16
        Sinusoidal features of the time fed to both MLPs beside ``t`` itself
        (:func:`~fdaimpute.nn.sinusoidal_encoding`; 0: ``t`` alone).
    encoding_scale : float, default=100.0
        Its ``scale`` (the transformers use ``M - 1``, i.e. 100 on their
        default 101-point grid).
    min_sd : float, default=0.01
        Floor of the predictive standard deviation.

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn.cnp import CNPModule
    >>> net = CNPModule(hidden_dim=8, n_layers=1, r_dim=4, encoding_dim=4)
    >>> t = torch.rand(2, 5)
    >>> out = net(t, torch.randn(2, 5), torch.ones(2, 5, dtype=torch.bool), t)
    >>> out.mean.shape, bool((out.variance > 0).all())
    (torch.Size([2, 5]), True)
    """

    def __init__(
        self,
        hidden_dim=128,
        n_layers=3,
        r_dim=128,
        encoding_dim=16,
        encoding_scale=100.0,
        min_sd=MIN_SD,
    ):
        super().__init__()
        if encoding_dim < 0 or encoding_dim % 2:
            raise ValueError(
                f"encoding_dim must be a non-negative even integer, got {encoding_dim}"
            )
        self.hidden_dim = int(hidden_dim)
        self.n_layers = int(n_layers)
        self.r_dim = int(r_dim)
        self.encoding_dim = int(encoding_dim)
        self.encoding_scale = float(encoding_scale)
        self.min_sd = float(min_sd)
        n_time = 1 + self.encoding_dim
        self.encoder = _mlp(1 + n_time, self.hidden_dim, self.n_layers, self.r_dim)
        # the decoder's first layer on [r, time features], split in two so
        # the r part is computed once per subject, not once per target
        self.decoder_r = nn.Linear(self.r_dim, self.hidden_dim)
        self.decoder_t = nn.Linear(n_time, self.hidden_dim, bias=False)
        self.decoder = _mlp(self.hidden_dim, self.hidden_dim, self.n_layers - 1, 2)

    def time_features(self, t):
        """``[t, enc(t)]``, shape ``t.shape + (1 + encoding_dim,)``."""
        feats = t.unsqueeze(-1)
        if self.encoding_dim:
            enc = sinusoidal_encoding(t, self.encoding_dim, self.encoding_scale)
            feats = torch.cat([feats, enc], dim=-1)
        return feats

    def encode(self, times, values, visible):
        """Per-observation representations ``r_j``, shape (B, L, r_dim).

        Their mean over the visible observations is ``r``
        (:meth:`represent`); ``visible`` is unused here and accepted so the
        signature matches the transformers' (see
        :func:`~fdaimpute.nn.pooled_encoding`).
        """
        x = torch.cat([values.unsqueeze(-1), self.time_features(times)], dim=-1)
        return self.encoder(x)

    def represent(self, times, values, visible):
        """``r``: the mean of ``r_j`` over the visible observations, (B, r_dim).

        A subject with no visible observation gets ``r = 0``.
        """
        tokens = self.encode(times, values, visible)
        mask = visible.unsqueeze(-1).to(tokens.dtype)
        count = mask.sum(dim=1).clamp(min=1.0)
        return (tokens * mask).sum(dim=1) / count

    def decode(self, r, targets):
        """Predictive mean and variance at ``targets``.

        Parameters
        ----------
        r : Tensor of shape (B, r_dim)
            Representations.
        targets : Tensor of shape (B, T) or (T,)
            Target times, per subject or shared.

        Returns
        -------
        mean, variance : Tensor of shape (B, T)
        """
        if targets.dim() == 1:
            targets = targets.expand(r.shape[0], -1)
        h = self.decoder_r(r).unsqueeze(1) + self.decoder_t(self.time_features(targets))
        mean, raw = self.decoder(F.silu(h)).unbind(-1)
        sd = self.min_sd + (1.0 - self.min_sd) * F.softplus(raw)
        return mean, sd.square()

    def forward(self, times, values, visible, targets, **ignored):
        """Condition on the ``visible`` observations; predict at ``targets``.

        Parameters
        ----------
        times, values : Tensor of shape (B, L)
            Observations (times on [0, 1], standardised values).
        visible : bool Tensor of shape (B, L)
            The context: the observations ``r`` is pooled over.
        targets : Tensor of shape (B, T) or (T,)
            Where to predict.
        **ignored
            Keyword arguments of the transformers' signature (``anchors``,
            ``return_hidden``), accepted and unused.

        Returns
        -------
        CNPOutput
        """
        r = self.represent(times, values, visible)
        mean, variance = self.decode(r, targets)
        return CNPOutput(mean, variance, r)

    def parameter_groups(self):
        """One group: every parameter (clipped together by the trainer)."""
        return [list(self.parameters())]

    def extra_repr(self):
        return (
            f"hidden_dim={self.hidden_dim}, n_layers={self.n_layers}, "
            f"r_dim={self.r_dim}, encoding_dim={self.encoding_dim}, "
            f"min_sd={self.min_sd:g}"
        )


def sample_context(valid, generator=None):
    """A random context per subject: ``k_i`` of its points, uniform on 1..n_i.

    The CNP's training draw (Garnelo et al.): the context size is uniform,
    the points a uniformly random subset; every point stays a target.

    Parameters
    ----------
    valid : bool Tensor of shape (B, L)
        Real observations.
    generator : torch.Generator, default=None
        Random source (on ``valid``'s device).

    Returns
    -------
    bool Tensor of shape (B, L)
        True at the context points (at least one per non-empty subject).

    Examples
    --------
    >>> import torch
    >>> from fdaimpute.nn.cnp import sample_context
    >>> valid = torch.ones(3, 6, dtype=torch.bool)
    >>> n = sample_context(valid, torch.Generator().manual_seed(0)).sum(1)
    >>> bool(((n >= 1) & (n <= 6)).all())
    True
    """
    b, width = valid.shape
    dev = valid.device
    counts = valid.sum(dim=1)
    size = torch.rand(b, generator=generator, device=dev) * counts
    k = (size.long() + 1).clamp(max=counts)
    keys = torch.where(
        valid, torch.rand(b, width, generator=generator, device=dev), 2.0
    )
    rank = keys.argsort(dim=1).argsort(dim=1)
    return (rank < k.unsqueeze(1)) & valid


def gaussian_nll(mean, variance, target, mask):
    """Mean Gaussian negative log-likelihood over the ``mask``-ed points."""
    nll = 0.5 * (
        math.log(2 * math.pi) + variance.log() + (target - mean).square() / variance
    )
    return torch.where(mask, nll, 0.0).sum() / mask.sum().clamp(min=1)


class CNPTrainer(Trainer):
    """The shared training loop with the CNP's context draw and likelihood.

    Three hooks of :class:`~fdaimpute.nn.Trainer` are replaced:

    - :meth:`visible_mask`: the context is a random subset of each
      subject's points (:func:`sample_context`);
    - :meth:`forward`: the module predicts at the batch's own observation
      times (no grid);
    - :meth:`compute_loss`: Gaussian negative log-likelihood at all the
      subject's points (the ``train_loss`` of the history).

    :meth:`read` gives the predictive mean, so the validation criterion is
    the held-out points' squared error, as for the transformers. Everything
    else (batching, Adam and its schedule, clipping, early stopping, the
    best-state restore and the divergence guard) is the Trainer's. It takes
    the Trainer's arguments; ``amp``, ``anchors`` and ``regularizers`` are
    not used by a CNP.
    """

    graph_safe = False  # not measured under CUDA graphs

    def visible_mask(self, batch):
        return sample_context(batch.valid, self.generator)

    def forward(self, batch, return_hidden=False):
        net = (
            getattr(self, "model", self.module) if self.module.training else self.module
        )
        return net(batch.times, batch.values, batch.visible, batch.times)

    def compute_loss(self, out, batch):
        loss = gaussian_nll(out.mean, out.variance, batch.values, batch.valid)
        return loss, {"nll": loss}

    def read(self, out, batch):
        return out.mean


def predict_cnp(
    module, data, targets, *, batch_size=256, variance=False, derivative=False
):
    """Predictive means (variances, derivatives) with each whole subject as context.

    Parameters
    ----------
    module : CNPModule
        A trained module (put in eval mode here).
    data : RaggedTensors
        Subjects (the context), on the module's device.
    targets : Tensor of shape (M,) or RaggedTensors
        Times shared by every subject, or each subject's own times (a
        RaggedTensors with one row per subject; its values are ignored).
    batch_size : int, default=256
        Subjects per forward pass.
    variance : bool, default=False
        Also return the predictive variance.
    derivative : bool, default=False
        Also return the mean's derivative in the target time, by automatic
        differentiation through the decoder.

    Returns
    -------
    dict of str to Tensor
        ``"mean"`` and, if asked, ``"variance"`` and ``"derivative"``, on the
        CPU in float64: shape (n, M) for shared targets, or flat and aligned
        with ``targets``' observations for per-subject ones.
    """
    module.eval()
    ragged = isinstance(targets, RaggedTensors)
    shape = (targets.times.shape[0],) if ragged else (len(data), targets.shape[0])
    names = ["mean"] + ["variance"] * variance + ["derivative"] * derivative
    out = {name: torch.empty(shape, dtype=torch.float64) for name in names}
    offsets = targets.offsets.cpu() if ragged else None
    for index in data.counts_cpu.argsort(stable=True).split(batch_size):
        batch = data.batch(index)
        with torch.no_grad():
            r = module.represent(batch.times, batch.values, batch.valid)
        if ragged:
            query = targets.batch(index)
            t, mask = query.times, query.valid.cpu()
            flat = (offsets[index].unsqueeze(1) + torch.arange(mask.shape[1]))[mask]
        else:
            t = targets.expand(len(index), -1)
        # a graph only for the derivative (d mean / d t*, per target)
        with torch.set_grad_enabled(derivative):
            t = t.detach().clone().requires_grad_(derivative)
            mean, var = module.decode(r, t)
            parts = {"mean": mean, "variance": var}
            if derivative:
                (parts["derivative"],) = torch.autograd.grad(mean.sum(), t)
        for name in names:
            value = parts[name].detach().to("cpu", torch.float64)
            if ragged:
                out[name][flat] = value[mask]
            else:
                out[name][index] = value
    return out
