"""Pointwise uncertainty of a trained VT or SAND module.

A small network, the *error-variance head*, maps what the trained module
knows at a time ``t`` (its decoder state there, how many observations lie
near ``t``, how many the subject has and, for SAND, how far SAND's curve is
from VT's) to the variance of the imputation error ``X(t) - f(t)``. It is
fitted after the imputer, on held-out subjects: some of their observations
are hidden from the frozen module (one per subject, or as in training), and
the head maximises the Gaussian likelihood of the residuals at the hidden
points, whose variance is the error variance plus the noise variance
``sigma^2`` (given, e.g. from :func:`fdaimpute.noise.noise_variance`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fdaimpute.nn.batching import hide_observations
from fdaimpute.nn.sand import _locate
from fdaimpute.nn.training import _forward, read_at

__all__ = ["ErrorVarianceHead", "error_features", "fit_error_head"]


class ErrorVarianceHead(nn.Module):
    """Positive error variance from the features of :func:`error_features`.

    ``log v = g(state, disagreement) - a * near - b * wide - c * log(count)
    + bias`` with ``a, b, c >= 0``: the variance falls with the density of
    observations around ``t`` (at two bandwidths) and with their number
    whatever ``g`` (a two-layer network) learns, which keeps the head sane
    when it is fitted on few subjects.

    Parameters
    ----------
    n_features : int
        Length of a feature vector (the decoder state's width + 4).
    width : int, default=32
        Hidden units of ``g``.
    """

    def __init__(self, n_features, width=32):
        super().__init__()
        self.n_features = int(n_features)
        self.width = int(width)
        n_free = self.n_features - 3
        self.net = nn.Sequential(
            nn.Linear(n_free, self.width), nn.GELU(), nn.Linear(self.width, 1)
        )
        # raw (pre-softplus) slopes of the two densities and of log(count)
        self.slopes = nn.Parameter(torch.zeros(3))
        self.bias = nn.Parameter(torch.zeros(()))

    def log_variance(self, features):
        """``log v``, shape ``features.shape[:-1]``."""
        free = torch.cat([features[..., :-4], features[..., -1:]], dim=-1)
        a, b, c = F.softplus(self.slopes)
        near, wide, count = features[..., -4:-1].unbind(-1)
        structured = -(a * near + b * wide + c * count)
        return self.net(free).squeeze(-1) + structured + self.bias

    def forward(self, features):
        """Error variance, shape ``features.shape[:-1]`` (standardised units)."""
        return self.log_variance(features).clamp(-30.0, 30.0).exp()

    def on_grid(self, out, grid, times, visible):
        """Error variance (B, M) at the grid points, from a module's output."""
        return self(error_features(out, grid, times, visible))


# bandwidths (on the [0, 1] time scale) of the two local densities
_DENSITY_BANDWIDTHS = (0.03, 0.15)


def _densities(times, visible, query):
    """``log(1 + sum_j exp(-((t - t_j) / h)^2 / 2))`` over visible ``t_j``.

    One feature per bandwidth of ``_DENSITY_BANDWIDTHS``: how many
    observations lie near ``t``. Unlike the distance to the nearest one, this
    hardly differs between a grid point next to an observation and a point
    hidden between two, so the head carries over from the hidden points it
    is fitted on to the grid it is used on.
    """
    diff = query.unsqueeze(-1) - times.unsqueeze(1)
    seen = visible.unsqueeze(1)
    out = []
    for h in _DENSITY_BANDWIDTHS:
        weight = torch.where(seen, torch.exp(-0.5 * (diff / h) ** 2), 0.0)
        out.append(torch.log1p(weight.sum(dim=-1)))
    return out


def error_features(out, grid, times, visible, query=None):
    """Features of the error-variance head at query times.

    Parameters
    ----------
    out : dict
        A VT or SAND module's output (needs ``state`` and ``curve``).
    grid : Tensor of shape (M,)
        The grid of ``out``.
    times : Tensor of shape (B, L)
        Observation times.
    visible : bool Tensor of shape (B, L)
        The observations the module saw.
    query : Tensor of shape (B, Q), default=None
        Where to compute the features (default: the grid points); the
        decoder state is interpolated linearly between grid points.

    Returns
    -------
    Tensor of shape (B, Q, d + 4)
        Float32 features: the decoder state (d), the two local densities
        of visible observations, the log of their number, and SAND's curve
        minus VT's (0 for a VT).
    """
    state = out["state"].float()
    b, m, d = state.shape
    if "sand" in out:
        disagree = out["sand"].float() - out["curve"].float()
    else:
        disagree = torch.zeros(b, m, device=state.device)
    if query is None:
        query = grid.expand(b, m)
    else:
        pos, step, dt = _locate(grid, query)
        frac = (dt / step).clamp(0.0, 1.0)
        index = pos.unsqueeze(-1).expand(-1, -1, d)
        left, right = state.gather(1, index), state.gather(1, index + 1)
        state = left + frac.unsqueeze(-1) * (right - left)
        disagree = disagree.gather(1, pos) + frac * (
            disagree.gather(1, pos + 1) - disagree.gather(1, pos)
        )
    near, wide = _densities(times, visible, query)
    count = torch.log(visible.sum(dim=1).clamp(min=1).float())
    extra = torch.stack(
        [near, wide, count.unsqueeze(1).expand_as(near), disagree], dim=-1
    )
    return torch.cat([state, extra], dim=-1)


def _hide_one(valid, generator):
    """Hide one random observation of each subject with two or more."""
    counts = valid.sum(dim=1)
    u = torch.rand(valid.shape[0], generator=generator, device=valid.device)
    pick = (u * counts).long()
    cols = torch.arange(valid.shape[1], device=valid.device)
    return (cols == pick.unsqueeze(1)) & valid & (counts >= 2).unsqueeze(1)


def _nll(variance, noise, resid2):
    total = variance + noise
    return 0.5 * (torch.log(total) + resid2 / total).mean()


def fit_error_head(
    module,
    data,
    grid,
    noise_variance,
    *,
    anchors=None,
    min_residuals=20_000,
    max_draws=32,
    steps=500,
    lr=1e-2,
    width=32,
    batch_size=512,
    seed=0,
):
    """Fit an :class:`ErrorVarianceHead` on held-out subjects.

    Each draw hides observations of every subject (one each in even draws,
    as in training in odd ones), runs the frozen module on the rest and
    records the features and squared residuals at the hidden points; draws
    repeat until ``min_residuals`` residuals (or ``max_draws`` draws). The
    head is fitted by Adam on 80% of the residuals (grouped by subject) and
    the state with the best Gaussian likelihood on the other 20% is kept.

    Parameters
    ----------
    module : VTModule or SANDModule
        The trained module (left unchanged).
    data : RaggedTensors
        Held-out subjects.
    grid : Tensor of shape (M,)
        The module's grid.
    noise_variance : float
        Measurement-noise variance (standardised units).
    anchors : {None, "mean", "two-sided"}, default=None
        SAND's integration constant, as in training.
    min_residuals, max_draws : int
        When to stop drawing.
    steps : int, default=500
        Adam steps (full batch).
    lr : float, default=1e-2
        Adam's learning rate.
    width : int, default=32
        Hidden units of the head.
    batch_size : int, default=512
        Subjects per forward pass.
    seed : int, default=0
        Seed of the hiding and of the head's initialisation.

    Returns
    -------
    ErrorVarianceHead or None
        None when no subject has two observations (nothing can be hidden).
    """
    device = grid.device
    gen = torch.Generator(device=device).manual_seed(seed)
    feats, resid2, groups = [], [], []
    n_resid = 0
    module.eval()
    with torch.no_grad():
        for draw in range(max_draws):
            for index in torch.arange(len(data)).split(batch_size):
                batch = data.batch(index)
                if draw % 2:
                    hidden = hide_observations(batch.valid, gen)
                else:
                    hidden = _hide_one(batch.valid, gen)
                if not bool(hidden.any()):
                    continue
                batch.visible = batch.valid & ~hidden
                out = _forward(module, batch, grid, anchors)
                vt, sand = read_at(out, grid, batch.times, anchors)
                resid = batch.values - (vt if sand is None else sand)
                f = error_features(out, grid, batch.times, batch.visible, batch.times)
                feats.append(f[hidden])
                resid2.append(resid[hidden].float().pow(2))
                groups.append(batch.index.unsqueeze(1).expand_as(hidden)[hidden])
            n_resid = sum(r.numel() for r in resid2)
            if not resid2 or n_resid >= min_residuals:
                break
    if not resid2:
        return None
    x, r2, g = torch.cat(feats), torch.cat(resid2), torch.cat(groups)
    cpu_gen = torch.Generator().manual_seed(seed)
    held = (torch.rand(len(data), generator=cpu_gen) < 0.2).to(device)[g]
    if bool(held.all()) or not bool(held.any()):
        held = torch.arange(r2.numel(), device=device) % 5 == 0
    noise = torch.tensor(float(noise_variance), device=device)

    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        head = ErrorVarianceHead(x.shape[1], width).to(device)
    start = (r2[~held].mean() - noise).clamp(min=0.1 * float(r2.mean()))
    with torch.no_grad():
        head.net[-1].weight.mul_(0.1)
        head.net[-1].bias.zero_()
        head.bias.fill_(float(torch.log(start)))
    opt = torch.optim.Adam(head.parameters(), lr=lr, weight_decay=1e-4)
    best, best_state = math.inf, None
    for step in range(steps):
        loss = _nll(head(x[~held]), noise, r2[~held])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 9 or step == steps - 1:
            with torch.no_grad():
                score = float(_nll(head(x[held]), noise, r2[held]))
            if score < best:
                best = score
                best_state = {k: v.clone() for k, v in head.state_dict().items()}
    if best_state is not None:
        head.load_state_dict(best_state)
    return head.eval()
