"""Pointwise uncertainty of a trained VT or SAND module.

A small network, the *error-variance head*, maps what is known at a time
``t`` (how many observations lie near ``t`` and how far the nearest is, how
many the subject has and, for SAND, how far SAND's curve is from VT's) to
the variance of the imputation error ``X(t) - f(t)``. It is fitted after the
imputer, on held-out subjects, by Gaussian likelihood with the noise
variance ``sigma^2`` given (e.g. from :func:`fdaimpute.noise.noise_variance`):

- at observations hidden from the frozen module (one per subject, or as in
  training) the residual's variance is ``v(t) + sigma^2``;
- at a visible observation, whose own noise the curve partly follows, it is
  ``v(t) + sigma^2 (1 - 2 L)``, with the leverage ``L`` (the curve's change
  per unit change of that value) measured by perturbing it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fdaimpute.nn.batching import hide_observations
from fdaimpute.nn.channels import channel_masks, fold_channels
from fdaimpute.nn.inference import read_at
from fdaimpute.nn.integration import interpolate_linear

__all__ = ["ErrorVarianceHead", "error_features", "fit_error_head"]

# perturbation of a standardised value that measures the curve's sensitivity
_DELTA = 0.05
#: Most of the hidden points' mean squared residual the noise may explain.
NOISE_SHARE_CAP = 0.5


class ErrorVarianceHead(nn.Module):
    """Positive error variance from the features of :func:`error_features`.

    ``log v = g(disagreement) - a * near - b * wide - c * log(count)
    + e * gap + bias`` with ``a, b, c, e >= 0`` and ``g`` a small two-layer
    network: the variance falls with the density of observations around
    ``t`` (at two bandwidths) and with their number, and grows with the
    distance to the nearest one.

    With several variables the features also hold the variable (one-hot,
    read by ``g``): each variable has its own level and ``g``.

    Parameters
    ----------
    n_features : int, default=5
        Length of a feature vector: 5, or ``5 + p`` for a module of ``p``
        variables.
    width : int, default=32
        Hidden units of ``g``.

    Notes
    -----
    The network's internal state is deliberately not an input. The head is
    fitted with some observations hidden and used with all of them visible;
    a head reading the state learned how the state looks in the first
    setting and underestimated the error in the second (measured in
    ``docs/neural.md``).
    """

    def __init__(self, n_features=5, width=32):
        super().__init__()
        self.n_features = int(n_features)
        self.width = int(width)
        self.net = nn.Sequential(
            nn.Linear(self.n_features - _N_STRUCTURED, self.width),
            nn.GELU(),
            nn.Linear(self.width, 1),
        )
        # raw (pre-softplus) slopes of near, wide, log(count) and gap
        self.slopes = nn.Parameter(torch.zeros(_N_STRUCTURED))
        self.bias = nn.Parameter(torch.zeros(()))

    def log_variance(self, features):
        """``log v``, shape ``features.shape[:-1]``."""
        free = features[..., :-_N_STRUCTURED]
        a, b, c, e = F.softplus(self.slopes)
        near, wide, count, gap = features[..., -_N_STRUCTURED:].unbind(-1)
        structured = e * gap - (a * near + b * wide + c * count)
        return self.net(free).squeeze(-1) + structured + self.bias

    def forward(self, features):
        """Error variance, shape ``features.shape[:-1]`` (standardised units)."""
        return self.log_variance(features).clamp(-30.0, 30.0).exp()

    @property
    def n_variables(self):
        """The number of variables of the module the head was fitted for."""
        return max(1, self.n_features - _N_STRUCTURED - 1)

    def on_grid(self, out, grid, times, visible, variable=None):
        """Error variance at the grid points, from a module's output.

        Shape (B, M), or (B, p * M) variable-major for a module of ``p``
        variables (``variable``: each observation's, as the module read it).
        """
        features = error_features(
            out, grid, times, visible, variable=variable, n_variables=self.n_variables
        )
        return self(features)


# bandwidths (on the [0, 1] time scale) of the two local densities
_DENSITY_BANDWIDTHS = (0.03, 0.15)
# features entering the head's log-variance linearly (near, wide, count, gap)
_N_STRUCTURED = 4


def _neighbourhood(times, visible, query, m):
    """Local densities of the visible observations, and the nearest one's distance.

    Returns ``log(1 + sum_j exp(-((t - t_j) / h)^2 / 2))`` over visible
    ``t_j`` for each bandwidth ``h`` of ``_DENSITY_BANDWIDTHS``, then
    ``log(1 + (M - 1) min_j |t - t_j|)`` (the distance in grid steps).
    """
    diff = (query.unsqueeze(-1) - times.unsqueeze(1)).abs()
    seen = visible.unsqueeze(1)
    out = []
    for h in _DENSITY_BANDWIDTHS:
        weight = torch.where(seen, torch.exp(-0.5 * (diff / h) ** 2), 0.0)
        out.append(torch.log1p(weight.sum(dim=-1)))
    nearest = torch.where(seen, diff, math.inf).amin(dim=-1).clamp(max=1.0)
    out.append(torch.log1p(nearest * (m - 1)))
    return out


def error_features(
    out, grid, times, visible, query=None, *, variable=None, n_variables=1
):
    """Features of the error-variance head at query times.

    Parameters
    ----------
    out : ModuleOutput or dict
        A VT or SAND module's output (``curve``, and ``sand`` for SAND).
    grid : Tensor of shape (M,)
        The grid of ``out``.
    times : Tensor of shape (B, L)
        Observation times.
    visible : bool Tensor of shape (B, L)
        The observations the module saw.
    query : Tensor of shape (B, Q), default=None
        Where to compute the features (default: the grid points).
    variable : long Tensor of shape (B, L), default=None
        Each observation's variable, for a module of several.
    n_variables : int, default=1
        The module's number of variables ``p``. With several, each
        variable's curve has the features of its own observations, and the
        variable (one-hot) follows the first feature; at ``query`` times
        (then those of the observations) each point is its variable's.

    Returns
    -------
    Tensor of shape (B, Q, 5), or (B, Q, 5 + p) with several variables
        Float32 features: SAND's curve minus VT's (0 for a VT), the two
        local densities of visible observations, the log of their number
        and the distance to the nearest one (see
        :func:`_neighbourhood`). Without ``query`` and with several
        variables, ``Q = p * M``: the grid of each variable in turn.
    """
    if n_variables > 1:
        p = n_variables
        return _variable_features(out, grid, times, visible, query, variable, p)
    curve = out["curve"].float()
    b, m = curve.shape
    if "sand" in out:
        disagree = out["sand"].float() - curve
    else:
        disagree = torch.zeros_like(curve)
    if query is None:
        query = grid.expand(b, m)
    else:
        disagree = interpolate_linear(disagree, grid, query)
    near, wide, gap = _neighbourhood(times, visible, query, m)
    count = torch.log(visible.sum(dim=1).clamp(min=1).float())
    return torch.stack(
        [disagree, near, wide, count.unsqueeze(1).expand_as(near), gap], dim=-1
    ).float()


def _variable_features(out, grid, times, visible, query, variable, p):
    """:func:`error_features` of a module of ``p`` variables."""
    if variable is None:
        raise ValueError(f"a module of {p} variables needs each observation's variable")
    b = times.shape[0]
    keys = [key for key in ("curve", "sand") if key in out]
    folded = {key: fold_channels(out[key], p) for key in keys}
    rows_t, rows_seen = channel_masks(times, visible, variable, p)
    rows_query = None if query is None else query.repeat_interleave(p, dim=0)
    feats = error_features(folded, grid, rows_t, rows_seen, rows_query)
    feats = feats.reshape(b, p, -1, feats.shape[-1])
    onehot = torch.eye(p, device=feats.device)[None, :, None, :]
    onehot = onehot.expand(b, p, feats.shape[2], p)
    feats = torch.cat([feats[..., :1], onehot, feats[..., 1:]], dim=-1)
    if query is None:
        return feats.reshape(b, -1, feats.shape[-1])
    own = variable.clamp(0, p - 1)[:, None, :, None]
    return feats.gather(1, own.expand(-1, 1, -1, feats.shape[-1])).squeeze(1)


def _pick_one(mask, generator, min_count=1):
    """One random True of each row of ``mask`` with ``min_count`` or more."""
    keys = torch.rand(mask.shape, generator=generator, device=mask.device)
    pick = torch.where(mask, keys, -1.0).argmax(dim=1, keepdim=True)
    one = torch.zeros_like(mask).scatter_(1, pick, True)
    return one & mask & (mask.sum(dim=1, keepdim=True) >= min_count)


def _nll(variance, noise, resid2, floor):
    total = (variance + noise).clamp(min=floor)
    return 0.5 * (torch.log(total) + resid2 / total).mean()


def _read(module, batch, grid, anchors):
    out = module(
        batch.times,
        batch.values,
        batch.visible,
        grid,
        anchors=anchors,
        **batch.extra_inputs,
    )
    vt, sand = read_at(out, grid, batch.times, anchors, batch.variable)
    return out, vt if sand is None else sand


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
    records the features and squared residuals at the hidden points and at
    one visible point per subject (with its leverage, see the module
    docstring); draws repeat until ``min_residuals`` residuals (or
    ``max_draws`` draws). The head is fitted by Adam on the residuals of 80%
    of the subjects, first its monotone part alone, then whole, and the
    state with the best Gaussian likelihood on the other 20% is kept.

    Parameters
    ----------
    module : VTModule or SANDModule, or a list of them
        The trained module (left unchanged); a list pairs modules with the
        subjects each did not see (cross-fitting), whose residuals are
        pooled.
    data : RaggedTensors, or a list of them (one per module)
        Held-out subjects.
    grid : Tensor of shape (M,)
        The module's grid.
    noise_variance : float or array of shape (p,)
        Measurement-noise variance (standardised units); one per variable
        for a module of ``p`` variables.
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
    pairs = list(zip(module, data)) if isinstance(module, list) else [(module, data)]
    p = getattr(pairs[0][0], "n_variables", 1)
    parts, first = [], 0
    for part_module, part_data in pairs:
        part_module.eval()
        with torch.no_grad():
            drawn = _draw_residuals(
                part_module,
                part_data,
                grid,
                anchors,
                gen,
                -(-min_residuals // len(pairs)),
                max_draws,
                batch_size,
                p,
            )
        if drawn is not None:
            # subject numbers run on across the parts
            parts.append((drawn[0], drawn[1], drawn[2] + first, *drawn[3:]))
        first += len(part_data)
    if not parts:
        return None
    x, r2, g, noise_share, var = (torch.cat(column) for column in zip(*parts))
    noise_by_variable = torch.as_tensor(
        noise_variance, dtype=r2.dtype, device=device
    ).reshape(-1)
    noise_by_variable = noise_by_variable.expand(p).clone()
    for j in range(p):
        hidden_r2 = r2[(noise_share >= 1.0) & (var == j)]
        if hidden_r2.numel():
            # a noise estimate above what the hidden residuals show (a
            # difference estimate on sparse subjects can exceed the data's
            # variance) would leave the curve no variance at all: it keeps at
            # least half of them
            cap = NOISE_SHARE_CAP * hidden_r2.mean()
            noise_by_variable[j] = torch.minimum(noise_by_variable[j], cap)
    noise = noise_by_variable[var] * noise_share
    floor = 1e-3 * float(r2.mean())
    cpu_gen = torch.Generator().manual_seed(seed)
    held = (torch.rand(first, generator=cpu_gen) < 0.2).to(device)[g]
    if bool(held.all()) or not bool(held.any()):
        held = torch.arange(r2.numel(), device=device) % 5 == 0

    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        head = ErrorVarianceHead(x.shape[1], width).to(device)
    start = (r2[~held].mean() - noise[~held].mean()).clamp(min=floor)
    with torch.no_grad():
        head.net[-1].weight.zero_()
        head.net[-1].bias.zero_()
        head.bias.fill_(float(torch.log(start)))

    def loss_on(rows):
        return _nll(head(x[rows]), noise[rows], r2[rows], floor)

    return _train_head(head, loss_on, ~held, held, steps, lr)


def _draw_residuals(
    module, data, grid, anchors, gen, min_residuals, max_draws, size, n_variables=1
):
    """Features, squared residuals, owners, noise shares and variables (see
    fit_error_head).

    Returns None when nothing could be hidden.
    """
    feats, resid2, noise_share, groups, variables = [], [], [], [], []
    for draw in range(max_draws):
        for index in torch.arange(len(data)).split(size):
            batch = data.batch(index)
            if draw % 2:
                hidden = hide_observations(batch.valid, gen)
            else:
                hidden = _pick_one(batch.valid, gen, min_count=2)
            if not bool(hidden.any()):
                continue
            batch.visible = batch.valid & ~hidden
            out, pred = _read(module, batch, grid, anchors)
            f = error_features(
                out,
                grid,
                batch.times,
                batch.visible,
                batch.times,
                variable=batch.variable,
                n_variables=n_variables,
            )
            # the sensitivity of the curve to one visible value: near an
            # observation, the curve's error includes a share of its noise
            probe = _pick_one(batch.visible, gen)
            values = batch.values
            batch.values = values + _DELTA * probe
            leverage = (_read(module, batch, grid, anchors)[1] - pred) / _DELTA
            batch.values = values
            owner = batch.index.unsqueeze(1).expand_as(hidden)
            variable = batch.variable
            if variable is None:
                variable = torch.zeros_like(owner)
            shares = (torch.ones_like(pred), 1.0 - 2.0 * leverage)
            for where, share in zip((hidden, probe), shares):
                feats.append(f[where])
                resid2.append((values - pred)[where].float().pow(2))
                noise_share.append(share[where].float())
                groups.append(owner[where])
                variables.append(variable[where])
        if not resid2 or sum(r.numel() for r in resid2) >= min_residuals:
            break
    if not resid2:
        return None
    return (
        torch.cat(feats),
        torch.cat(resid2),
        torch.cat(groups),
        torch.cat(noise_share).float(),
        torch.cat(variables),
    )


def _train_head(head, loss_on, fit, held, steps, lr):
    """Adam on ``fit`` rows, keeping the state best on the ``held`` rows."""
    # first the structured part alone (g = 0), then everything, keeping the
    # state with the best likelihood on the held-out subjects
    structured = torch.optim.Adam([head.slopes, head.bias], lr=5 * lr)
    for _ in range(steps // 2):
        structured.zero_grad(set_to_none=True)
        loss_on(fit).backward()
        structured.step()
    opt = torch.optim.Adam(head.parameters(), lr=lr, weight_decay=1e-4)
    with torch.no_grad():
        best = float(loss_on(held))
    best_state = {k: v.clone() for k, v in head.state_dict().items()}
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        loss_on(fit).backward()
        opt.step()
        if step % 10 == 9:
            with torch.no_grad():
                score = float(loss_on(held))
            if score < best:
                best = score
                best_state = {k: v.clone() for k, v in head.state_dict().items()}
    head.load_state_dict(best_state)
    return head.eval()
