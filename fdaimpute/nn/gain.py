"""Generative adversarial imputation nets (GAIN) on a matrix with missing cells.

Yoon, Jordon & van der Schaar (ICML 2018). Rows are samples, columns
features scaled to [0, 1]; ``mask`` is 1 where a cell is observed. The
generator sees the row with noise in its missing cells and the mask, and
outputs a complete row; the discriminator sees the imputed row (observed
cells kept, missing cells from the generator) and a *hint*, and outputs
per-cell logits of "observed". The hint ``B * mask``, with ``B`` a
Bernoulli(``hint_rate``) draw per cell, marks a random share of the
observed cells as observed and leaves every other cell at 0. As in the
authors' released code, the discriminator minimises its cross-entropy over
all cells and the generator ``-log D`` over the missing cells (both
averaged over all cells of the batch) plus ``alpha`` times the mean squared
error of its output at the observed cells. (The paper's losses instead
count only the cells whose hint is withheld, with the hint 0.5 there.)

This module is pure torch (no scikit-learn); the estimator is
:class:`fdaimpute.gain.GAINImputer`.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["NOISE_SCALE", "gain_network", "impute_rows", "train_gain"]

#: Missing cells are filled with uniform noise on [0, NOISE_SCALE] (data in [0, 1]).
NOISE_SCALE = 0.01


def gain_network(n_features, hidden_size):
    """A generator or discriminator: ``[row, mask or hint] -> n_features``.

    Two hidden ReLU layers of ``hidden_size`` units and a linear output
    (the generator's output goes through a sigmoid, the discriminator's is
    a logit). Weights are He-normal, biases zero.

    Parameters
    ----------
    n_features : int
        Columns of the matrix.
    hidden_size : int
        Width of the hidden layers.

    Returns
    -------
    torch.nn.Sequential
    """
    net = nn.Sequential(
        nn.Linear(2 * n_features, hidden_size),
        nn.ReLU(),
        nn.Linear(hidden_size, hidden_size),
        nn.ReLU(),
        nn.Linear(hidden_size, n_features),
    )
    for layer in net:
        if isinstance(layer, nn.Linear):
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            nn.init.zeros_(layer.bias)
    return net


def _generate(generator, x, mask, rng=None):
    """The generator's complete rows for ``x`` (zeros where missing).

    Missing cells get uniform noise from ``rng``, or its mean without one.
    """
    if rng is None:
        noise = torch.full_like(x, NOISE_SCALE / 2)
    else:
        noise = torch.rand(x.shape, generator=rng, device=x.device) * NOISE_SCALE
    filled = mask * x + (1 - mask) * noise
    return torch.sigmoid(generator(torch.cat([filled, mask], dim=1)))


def train_gain(
    generator,
    discriminator,
    x,
    mask,
    *,
    max_iter,
    batch_size,
    alpha,
    hint_rate,
    lr,
    rng,
    held_out=None,
    patience=None,
    log_every=25,
):
    """Train both networks by alternating Adam steps on random mini-batches.

    Each iteration draws ``batch_size`` rows without replacement, takes a
    discriminator step on the generator's (detached) imputation, then a
    generator step against the updated discriminator. With ``held_out``,
    every ``log_every`` iterations the generator imputes cells hidden from
    training; the generator that imputed them best is kept, and training
    stops once ``patience`` iterations pass without a better one.

    Parameters
    ----------
    generator, discriminator : torch.nn.Module
        Networks of :func:`gain_network`, on the device of ``x``.
    x : torch.Tensor of shape (n, d)
        Scaled data, 0 in missing cells.
    mask : torch.Tensor of shape (n, d)
        1.0 where observed, else 0.0.
    max_iter : int
        Most iterations (mini-batches).
    batch_size : int
        Rows per mini-batch (all rows if fewer).
    alpha : float
        Weight of the observed cells' squared error in the generator's loss.
    hint_rate : float
        Probability that the hint reveals a cell's mask.
    lr : float
        Adam's learning rate (both networks).
    rng : torch.Generator
        Source of the batches, noise and hints, on the device of ``x``.
    held_out : tuple of torch.Tensor, default=None
        ``(rows, values, cells)``: the rows of ``x`` holding hidden cells,
        their scaled values (shape ``(len(rows), d)``) and a 0/1 indicator
        of the hidden cells (missing in ``mask``). ``None``: no early
        stopping; the last generator is kept.
    patience : int, default=None
        Iterations without a better held-out error before stopping
        (``None``: never stop early).
    log_every : int, default=25
        Record the mean losses over each block of this many iterations (and
        the held-out error at its end).

    Returns
    -------
    history : dict of list
        ``"iteration"`` (the last of each block), ``"discriminator"`` (its
        cross-entropy), ``"adversarial"`` (the generator's adversarial
        loss), ``"reconstruction"`` (the observed cells' mean squared
        error, on the [0, 1] scale) and, with ``held_out``,
        ``"held_out"`` (the hidden cells' mean squared error).
    best_iter : int
        The iteration whose generator is kept (the last without
        ``held_out``; 0 if the untrained one was best).
    """
    n = x.shape[0]
    size = min(int(batch_size), n)
    opt_g = torch.optim.Adam(generator.parameters(), lr=lr)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=lr)
    keys = ["iteration", "discriminator", "adversarial", "reconstruction"]
    history = {key: [] for key in keys + (["held_out"] if held_out else [])}
    best_iter, best_error, best_state = max_iter, math.inf, None
    if held_out is not None:
        best_iter, best_error = 0, _held_out_error(generator, x, mask, held_out)
        best_state = _copy_state(generator)
    totals = torch.zeros(3, device=x.device)
    for it in range(1, max_iter + 1):
        rows = torch.randperm(n, generator=rng, device=x.device)[:size]
        xb, mb = x[rows], mask[rows]
        reveal = torch.rand(xb.shape, generator=rng, device=x.device) < hint_rate
        hint = reveal.to(xb.dtype) * mb

        out = _generate(generator, xb, mb, rng)
        x_hat = mb * xb + (1 - mb) * out

        logits = discriminator(torch.cat([x_hat.detach(), hint], dim=1))
        d_loss = F.binary_cross_entropy_with_logits(logits, mb)
        opt_d.zero_grad(set_to_none=True)
        d_loss.backward()
        opt_d.step()

        logits = discriminator(torch.cat([x_hat, hint], dim=1))
        # -log D at the missing cells: the generator wants them called observed
        adversarial = (F.softplus(-logits) * (1 - mb)).mean()
        reconstruction = ((out - xb) ** 2 * mb).sum() / mb.sum().clamp_min(1.0)
        g_loss = adversarial + alpha * reconstruction
        opt_g.zero_grad(set_to_none=True)
        g_loss.backward()
        opt_g.step()

        totals += torch.stack([d_loss, adversarial, reconstruction]).detach()
        if it % log_every and it != max_iter:
            continue
        block = (it - 1) % log_every + 1
        for key, value in zip(keys, [it, *(totals / block).tolist()]):
            history[key].append(value)
        totals.zero_()
        if held_out is None:
            continue
        error = _held_out_error(generator, x, mask, held_out)
        history["held_out"].append(error)
        if error < best_error:
            best_iter, best_error, best_state = it, error, _copy_state(generator)
        elif patience is not None and it - best_iter >= patience:
            break
    if best_state is not None:
        generator.load_state_dict(best_state)
    generator.eval()
    discriminator.eval()
    return history, best_iter


def _copy_state(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@torch.no_grad()
def _held_out_error(generator, x, mask, held_out):
    """Mean squared error of the generator at the hidden cells."""
    rows, values, cells = held_out
    out = _generate(generator, x[rows], mask[rows])
    return (((out - values) ** 2 * cells).sum() / cells.sum()).item()


@torch.no_grad()
def impute_rows(generator, x, mask, batch_size=65536):
    """The generator's complete rows for ``x``, in blocks of rows.

    The missing cells hold the mean of the training noise, so each row's
    output depends on that row alone.

    Parameters
    ----------
    generator : torch.nn.Module
        A trained generator.
    x, mask : torch.Tensor of shape (n, d)
        As in :func:`train_gain`.
    batch_size : int, default=65536
        Rows per forward pass.

    Returns
    -------
    torch.Tensor of shape (n, d)
        The generator's output in every cell, observed ones included.
    """
    parts = [
        _generate(generator, xb, mb)
        for xb, mb in zip(x.split(batch_size), mask.split(batch_size))
    ]
    return torch.cat(parts)
