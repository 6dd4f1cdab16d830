"""Reading a trained module: curves at observation times, and batched inference."""

from __future__ import annotations

import torch

from fdaimpute.nn.channels import channel_grid, channel_times
from fdaimpute.nn.integration import interpolate_c1, interpolate_linear

__all__ = ["pooled_encoding", "predict_curves", "read_at"]


def read_at(out, grid, times, anchors=None, variable=None):
    """The model's curve at observation times: ``(vt, sand or None)``, each (B, L).

    VT's curve is read by linear interpolation between grid points; SAND's
    by its own C1 piecewise-quadratic interpolation (exact on the grid), or
    linearly with two-sided anchors (whose curve has kinks at the anchors).

    Parameters
    ----------
    out : ModuleOutput
        A module's output on ``grid``.
    grid : Tensor of shape (M,)
        Its grid.
    times : Tensor of shape (B, L)
        Where to read each row.
    anchors : {None, "mean", "two-sided"}, default=None
        SAND's integration constant.
    variable : long Tensor of shape (B, L), default=None
        Each time's variable, for a module of several (whose curves are
        ``(B, p * M)``): each time is read from its variable's curve.

    Returns
    -------
    vt : Tensor of shape (B, L)
        VT's curve ``T~``.
    sand : Tensor of shape (B, L) or None
        SAND's curve (None for a VT).
    """
    if variable is not None:
        p = out["curve"].shape[1] // grid.shape[0]
        grid, times = channel_grid(grid, p), channel_times(times, variable, grid)
    vt = interpolate_linear(out["curve"].float(), grid, times)
    if "sand" not in out:
        return vt, None
    if anchors == "two-sided":
        return vt, interpolate_linear(out["sand"].float(), grid, times)
    return vt, interpolate_c1(
        out["sand"].float(), out["derivative"].float(), grid, times
    )


@torch.no_grad()
def predict_curves(
    module,
    data,
    grid,
    *,
    batch_size=1024,
    anchors=None,
    amp=False,
    derivative=True,
    error_head=None,
    out=None,
):
    """Curves (and SAND derivatives) on ``grid`` for every subject of ``data``.

    Subjects are processed in batches sorted by length (little padding); the
    memory used does not grow with the number of subjects beyond the output.

    Parameters
    ----------
    module : VTModule or SANDModule
        A trained module (put in eval mode here).
    data : RaggedTensors
        Subjects, on the module's device.
    grid : Tensor of shape (M,)
        Output grid.
    batch_size : int, default=1024
        Subjects per forward pass.
    anchors : {None, "mean", "two-sided"}, default=None
        SAND's integration constant.
    amp : bool, default=False
        Float16 autocast (CUDA only).
    derivative : bool, default=True
        Also return SAND's derivative.
    error_head : ErrorVarianceHead, default=None
        Also return the pointwise error standard deviation it predicts
        (see :mod:`fdaimpute.nn.uncertainty`).
    out : tuple of CPU tensors of shape (n, M), default=None
        Buffers to fill (any float dtype): curves, derivatives and, with
        ``error_head``, standard deviations (the last two may be None), e.g.
        views of NumPy arrays, so no full-size temporary is made.

    Returns
    -------
    curves : Tensor of shape (n, M)
        On the CPU, float32: VT's ``T~`` or SAND's curve (``(n, p * M)``,
        variable-major, for a module of ``p`` variables, as the
        derivatives).
    deriv : Tensor of shape (n, M) or None
        SAND's ``D~`` (None for a VT or without ``derivative``).
    std : Tensor of shape (n, M)
        Only with ``error_head``: the error standard deviation
        (standardised units).
    """
    module.eval()
    n, m = len(data), grid.shape[0] * getattr(module, "n_variables", 1)
    curves, deriv, std = (*out, None)[:3] if out is not None else (None,) * 3
    curves = torch.empty(n, m) if curves is None else curves
    if error_head is not None and std is None:
        std = torch.empty(n, m)
    has_derivative = False  # a VT's output has none
    order = data.counts_cpu.argsort(stable=True)
    use_amp = bool(amp) and grid.device.type == "cuda"
    for index in order.split(batch_size):
        batch = data.batch(index)
        extra = batch.extra_inputs
        with torch.autocast("cuda", dtype=torch.float16, enabled=use_amp):
            res = module(
                batch.times, batch.values, batch.visible, grid, anchors=anchors, **extra
            )
        curves[index] = res.output.to("cpu", curves.dtype)
        if derivative and res.derivative is not None:
            has_derivative = True
            deriv = torch.empty(n, m) if deriv is None else deriv
            deriv[index] = res.derivative.to("cpu", deriv.dtype)
        if error_head is not None:
            var = error_head.on_grid(
                res, grid, batch.times, batch.valid, variable=batch.variable
            )
            std[index] = var.sqrt().to("cpu", std.dtype)
    deriv = deriv if has_derivative else None
    if error_head is not None:
        return curves, deriv, std
    return curves, deriv


@torch.no_grad()
def pooled_encoding(module, data, *, batch_size=1024):
    """Each subject's encoder tokens averaged over its observations: (n, d).

    A fixed-length summary of what the network read from a subject, for use
    as features by downstream models.

    Parameters
    ----------
    module : VTModule or SANDModule
        A trained module (put in eval mode here).
    data : RaggedTensors
        Subjects, on the module's device.
    batch_size : int, default=1024
        Subjects per forward pass.

    Returns
    -------
    Tensor of shape (n, d)
        On the CPU, float32.
    """
    module.eval()
    pooled = None
    for index in data.counts_cpu.argsort(stable=True).split(batch_size):
        batch = data.batch(index)
        tokens = module.encode(
            batch.times, batch.values, batch.visible, **batch.extra_inputs
        ).float()
        valid = batch.valid.unsqueeze(-1)
        total = tokens.masked_fill(~valid, 0.0).sum(dim=1)
        mean = total / valid.sum(dim=1)
        if pooled is None:
            pooled = torch.empty(len(data), mean.shape[1])
        pooled[index] = mean.cpu()
    return pooled
