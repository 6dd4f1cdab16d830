"""Training and inference loops for the VT and SAND modules.

Training hides part of each subject's points from the encoder
(self-supervision) and scores the curve at all of them; batches come from
:mod:`fdaimpute.nn.batching`.

The loop is split into small steps that a subclass may override:
:meth:`Trainer.fit` -> :meth:`Trainer.run_epoch` -> :meth:`Trainer.train_step`
-> :meth:`Trainer.forward` and :meth:`Trainer.compute_loss`, with
:meth:`Trainer.validate` and the :meth:`Trainer.on_epoch_end` hook.
"""

from __future__ import annotations

import math
import time
import warnings

import torch

from fdaimpute.nn.batching import anchor_weights, hide_observations
from fdaimpute.nn.regularizers import RegularizerContext, regularizer_names
from fdaimpute.nn.sand import interpolate_c1, interpolate_linear

__all__ = ["Trainer", "predict_curves", "read_at"]


def _forward(module, batch, grid, anchors, return_hidden=False):
    """Run a VTModule or SANDModule on a batch (encoder sees ``visible``)."""
    if not hasattr(module, "sand"):
        return module(batch.times, batch.values, batch.visible, grid, return_hidden)
    weights = None
    if anchors is not None:
        weights = anchor_weights(
            batch.times, batch.visible, grid, nearest=anchors == "two-sided"
        )
        if anchors == "two-sided":
            weights = weights > 0
    return module(
        batch.times,
        batch.values,
        batch.visible,
        grid,
        anchors=weights,
        anchor_mode=anchors or "two-sided",
        return_hidden=return_hidden,
    )


def read_at(out, grid, times, anchors=None):
    """The model's curve at observation times: ``(vt, sand or None)``, each (B, L).

    VT's curve is read by linear interpolation between grid points; SAND's
    by its own C1 piecewise-quadratic interpolation (exact on the grid), or
    linearly with two-sided anchors (whose curve has kinks at the anchors).
    """
    vt = interpolate_linear(out["curve"].float(), grid, times)
    if "sand" not in out:
        return vt, None
    if anchors == "two-sided":
        return vt, interpolate_linear(out["sand"].float(), grid, times)
    return vt, interpolate_c1(
        out["sand"].float(), out["derivative"].float(), grid, times
    )


def _adam(groups):
    """Adam, fused into one kernel where this torch and device support it.

    The fused step gives the same update up to rounding and avoids the
    per-parameter loop, whose overhead is large on a model of many small
    tensors.
    """
    try:
        return torch.optim.Adam(groups, fused=True)
    except (RuntimeError, TypeError):  # torch < 2.4 on CPU, or another device
        return torch.optim.Adam(groups, foreach=True)


def _masked_mse(pred, target, mask):
    diff = torch.where(mask, pred - target, 0.0)
    return diff.pow(2).sum() / mask.sum().clamp(min=1)


class Trainer:
    """Fit a VTModule or SANDModule by self-supervised masked imputation.

    Parameters
    ----------
    module : torch.nn.Module
        A :class:`~fdaimpute.nn.VTModule` or :class:`~fdaimpute.nn.SANDModule`,
        already on ``device``.
    grid : Tensor of shape (M,)
        Training grid on the [0, 1] time scale.
    max_epochs : int, default=100
        Passes over the training subjects.
    batch_size : int, default=64
        Subjects per optimizer step.
    lr : float, default=1e-3
        Adam's peak learning rate.
    sand_lr : float, default=None
        Peak learning rate of the SAND layer's parameters (default ``lr``).
    lr_schedule : {"cosine", "constant"}, default="cosine"
        ``"cosine"``: linear warm-up over the first 2% of steps (at least
        100, or half of a shorter run), then cosine decay to 2% of ``lr`` at
        ``max_epochs``.
    patience : int or None, default=None
        Stop after this many epochs without a better validation loss.
    clip_grad : float or None, default=1.0
        Clip the gradient's global norm (the transformer's and SAND's
        separately).
    regularizers : list, default=()
        Penalties (see :mod:`fdaimpute.nn.regularizers`).
    anchors : {None, "mean", "two-sided"}, default=None
        SAND's integration constant (see :class:`~fdaimpute.nn.SANDLayer`).
    amp : bool, default=False
        Mixed precision (float16 autocast and gradient scaling); CUDA only.
    bucket : int, default=16
        Sort subjects by length within chunks of ``bucket`` batches, which
        cuts padding when ``n_i`` varies (0 disables it).
    seed : int, default=0
        Seed of the shuffling and hiding.
    verbose : bool, default=False
        Show a progress bar with the losses.
    start_epoch : int, default=0
        Number of the first epoch (epochs already trained, for a warm
        start): epoch numbers in ``history``, ``best_epoch`` and the
        regularizers' weight schedules continue from it.

    Attributes
    ----------
    history : dict of list
        One entry per epoch: ``epoch``, ``train_loss``, ``valid_loss``,
        ``lr``, ``seconds``, ``reg/<name>``.
    best_epoch : int
        Epoch whose state was kept.
    stop_reason : str
        ``"max_epochs"``, ``"early stopping"``, ``"callback"``,
        ``"non-finite loss"`` or ``"interrupted"``.
    interrupted : bool
        Whether :meth:`fit` stopped on a ``KeyboardInterrupt``.

    Notes
    -----
    Faults during :meth:`fit`:

    - a non-finite loss or weight after an epoch stops training and
      restores the best state so far with a ``UserWarning`` naming the
      epoch; if no epoch was finite it raises ``FloatingPointError``
      naming the epoch;
    - a ``KeyboardInterrupt`` (Ctrl-C) stops training and restores the best
      state so far with a ``UserWarning`` naming the epoch reached and the
      best epoch (the interrupted epoch is not recorded); if no epoch had
      completed the interrupt propagates.
    """

    def __init__(
        self,
        module,
        grid,
        *,
        max_epochs=100,
        batch_size=64,
        lr=1e-3,
        sand_lr=None,
        lr_schedule="cosine",
        patience=None,
        clip_grad=1.0,
        regularizers=(),
        anchors=None,
        amp=False,
        bucket=16,
        seed=0,
        verbose=False,
        start_epoch=0,
    ):
        self.module = module
        self.grid = grid
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.sand_lr = sand_lr
        self.lr_schedule = lr_schedule
        self.patience = patience
        self.clip_grad = clip_grad
        self.regularizers = list(regularizers)
        self.reg_names = regularizer_names(self.regularizers)
        self.anchors = anchors
        self.device = grid.device
        self.amp = bool(amp) and self.device.type == "cuda"
        self.bucket = bucket
        self.verbose = verbose
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.cpu_generator = torch.Generator().manual_seed(seed + 1)
        self.history = {}
        self.best_epoch = None
        self.best_loss = math.inf
        self.best_state = None
        self.step = 0
        self.start_epoch = int(start_epoch)
        self.epoch = self.start_epoch
        self.stop_reason = None
        self.interrupted = False

    # ------------------------------------------------------------------ #
    # set-up
    def configure(self, n_train):
        """Build the optimizer, LR schedule and gradient scaler."""
        sand = getattr(self.module, "sand", None)
        if sand is None:
            self.clip_groups = [list(self.module.parameters())]
        else:
            # SAND's input is detached: the transformer and SAND solve separate
            # problems, so their gradients are clipped separately (one
            # global norm would let SAND's large early gradients stall VT)
            rest = [
                p
                for n, p in self.module.named_parameters()
                if not n.startswith("sand.")
            ]
            self.clip_groups = [rest, list(sand.parameters())]
        if sand is not None and self.sand_lr is not None:
            groups = [
                {"params": self.clip_groups[0], "lr": self.lr},
                {"params": self.clip_groups[1], "lr": self.sand_lr},
            ]
        else:
            groups = [{"params": list(self.module.parameters()), "lr": self.lr}]
        self.optimizer = _adam(groups)
        steps = max(1, self.max_epochs * math.ceil(n_train / self.batch_size))
        # 2% of the steps, but at least 100 (or half of a short run): the
        # first full-size Adam steps can throw SAND's layer far off
        warmup = max(1, int(0.02 * steps), min(100, steps // 2))
        if self.lr_schedule == "cosine":

            def factor(step):
                if step < warmup:
                    return (step + 1) / warmup
                progress = min(1.0, (step - warmup) / max(1, steps - warmup))
                return 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * progress))

        elif self.lr_schedule == "constant":

            def factor(step):
                return 1.0

        else:
            raise ValueError(
                f"lr_schedule must be 'cosine' or 'constant', got {self.lr_schedule!r}"
            )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp)

    def batches(self, data):
        """Index tensors of one epoch's batches (shuffled, length-bucketed)."""
        n = len(data)
        perm = torch.randperm(n, generator=self.cpu_generator)
        if self.bucket and data.counts_cpu.min() != data.counts_cpu.max():
            chunk = self.batch_size * self.bucket
            parts = []
            for start in range(0, n, chunk):
                idx = perm[start : start + chunk]
                parts.append(idx[data.counts_cpu[idx].argsort(stable=True)])
            perm = torch.cat(parts)
        out = list(perm.split(self.batch_size))
        order = torch.randperm(len(out), generator=self.cpu_generator)
        return [out[i] for i in order]

    # ------------------------------------------------------------------ #
    # one step
    def forward(self, batch, return_hidden=False):
        """Model outputs for a batch (autocast on CUDA when ``amp``)."""
        with torch.autocast("cuda", dtype=torch.float16, enabled=self.amp):
            return _forward(self.module, batch, self.grid, self.anchors, return_hidden)

    def compute_loss(self, out, batch):
        """Data loss: MSE of VT (and SAND) at all observed points.

        Returns the total and a dict of its parts. VT and SAND terms are
        summed; SAND's input is detached, so each part of the network learns
        from its own term only.
        """
        vt, sand = read_at(out, self.grid, batch.times, self.anchors)
        parts = {"vt": _masked_mse(vt, batch.values, batch.valid)}
        if sand is not None:
            parts["sand"] = _masked_mse(sand, batch.values, batch.valid)
        return sum(parts.values()), parts

    def context(self, out, batch):
        """The :class:`RegularizerContext` of a training step."""
        curve = out.get("sand", out["curve"])
        return RegularizerContext(
            module=self.module,
            epoch=self.epoch,
            step=self.step,
            times=batch.times,
            mask=batch.visible,
            embedding=out["embedding"],
            grid=self.grid,
            curve=curve,
            vt_curve=out["curve"],
            derivative=out.get("derivative"),
            hidden=out.get("hidden", {}),
        )

    def train_step(self, batch):
        """Hide, forward, loss (+ penalties), backward, clip, step.

        Returns the data loss, the total (with weighted penalties) and the
        unweighted penalties (tensors).
        """
        hidden = hide_observations(batch.valid, self.generator)
        batch.visible = batch.valid & ~hidden
        need_hidden = any(getattr(r, "needs_hidden", False) for r in self.regularizers)
        out = self.forward(batch, return_hidden=need_hidden)
        loss, _ = self.compute_loss(out, batch)
        total = loss
        penalties = []
        if self.regularizers:
            ctx = self.context(out, batch)
            for reg in self.regularizers:
                value = reg.penalty(ctx)
                penalties.append(value.detach())
                total = total + reg.weight_at(self.epoch) * value
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(total).backward()
        if self.clip_grad:
            self.scaler.unscale_(self.optimizer)
            for params in self.clip_groups:
                torch.nn.utils.clip_grad_norm_(params, self.clip_grad)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.step += 1
        return loss.detach(), total.detach(), penalties

    def run_epoch(self, data):
        """One pass over the training data.

        Returns the mean data loss, whether the whole objective and the
        weights stayed finite, and the mean penalties.
        """
        self.module.train()
        data_loss = torch.zeros((), device=self.device)
        objective = torch.zeros((), device=self.device)
        regs = torch.zeros(len(self.regularizers), device=self.device)
        n_batches = 0
        for index in self.batches(data):
            loss, total, penalties = self.train_step(data.batch(index))
            data_loss += loss
            objective += total.float()
            if penalties:
                regs += torch.stack(penalties).float()
            n_batches += 1
        finite = torch.stack(
            [objective.isfinite()]
            + [p.isfinite().all() for p in self.module.parameters()]
        ).all()
        return (data_loss / n_batches).item(), bool(finite), (regs / n_batches).tolist()

    @torch.no_grad()
    def validate(self, data, hidden):
        """Held-out error: the output's MSE at the ``hidden`` validation points.

        ``hidden`` is a bool tensor aligned with ``data``'s flat observations.
        The criterion is SAND's error for a SAND module, VT's for a VT.
        """
        self.module.eval()
        total, count = 0.0, 0
        for index in torch.arange(len(data)).split(max(self.batch_size, 512)):
            batch = data.batch(index)
            flat = (
                data.offsets[batch.index].unsqueeze(1)
                + torch.arange(batch.valid.shape[1], device=self.device)
            ).clamp(max=hidden.shape[0] - 1)
            held = hidden[flat] & batch.valid
            batch.visible = batch.valid & ~held
            out = self.forward(batch)
            vt, sand = read_at(out, self.grid, batch.times, self.anchors)
            pred = vt if sand is None else sand
            err = torch.where(held, pred - batch.values, 0.0)
            total += float(err.pow(2).sum())
            count += int(held.sum())
        return total / max(count, 1)

    # ------------------------------------------------------------------ #
    # loop
    def fit(self, train, valid=None, valid_hidden=None):
        """Train; keep the best state (by validation loss, else training loss).

        Parameters
        ----------
        train : RaggedTensors
            Training subjects.
        valid : RaggedTensors, default=None
            Validation subjects.
        valid_hidden : bool Tensor, default=None
            Observations of ``valid`` to predict (see :meth:`validate`).

        Returns
        -------
        self
        """
        self.configure(len(train))
        keys = ["epoch", "train_loss", "valid_loss", "lr", "seconds", *self.reg_names]
        for key in keys:
            self.history.setdefault(key, [])
        bar = None
        if self.verbose:
            from tqdm.auto import tqdm

            bar = tqdm(total=self.max_epochs, desc=type(self.module).__name__)
        since_best = 0
        try:
            for epoch in range(self.start_epoch, self.start_epoch + self.max_epochs):
                self.epoch = epoch
                start = time.perf_counter()
                lr = self.optimizer.param_groups[0]["lr"]
                train_loss, finite, penalties = self.run_epoch(train)
                valid_loss = (
                    self.validate(valid, valid_hidden) if valid is not None else None
                )
                record = {
                    "epoch": epoch,
                    "train_loss": train_loss,
                    "valid_loss": valid_loss,
                    "lr": lr,
                    "seconds": time.perf_counter() - start,
                }
                record.update(zip(self.reg_names, penalties))
                for key in keys:
                    self.history[key].append(record[key])
                score = valid_loss if valid is not None else train_loss
                if not (finite and math.isfinite(train_loss) and math.isfinite(score)):
                    self._diverged(epoch)
                    break
                if score < self.best_loss:
                    state = {
                        k: v.detach().clone()
                        for k, v in self.module.state_dict().items()
                    }
                    self.best_state, self.best_loss, self.best_epoch = (
                        state,
                        score,
                        epoch,
                    )
                    since_best = 0
                else:
                    since_best += 1
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(
                        loss=f"{train_loss:.4f}",
                        valid="-" if valid_loss is None else f"{valid_loss:.4f}",
                        best=self.best_epoch,
                    )
                if self.on_epoch_end(record):
                    self.stop_reason = "callback"
                    break
                if self.patience is not None and since_best >= self.patience:
                    self.stop_reason = "early stopping"
                    break
            else:
                self.stop_reason = "max_epochs"
        except KeyboardInterrupt:
            if self.best_state is None:
                raise
            self._interrupted()
        finally:
            if bar is not None:
                bar.close()
        if self.best_state is not None:
            self.module.load_state_dict(self.best_state)
        self.module.eval()
        return self

    def on_epoch_end(self, record):
        """Hook called after each epoch with its history record; return True to stop."""
        return False

    def _interrupted(self):
        # an interrupt between two appends leaves the epoch's record partial
        done = min(len(v) for v in self.history.values())
        for values in self.history.values():
            del values[done:]
        self.interrupted = True
        self.stop_reason = "interrupted"
        warnings.warn(
            f"training was interrupted (KeyboardInterrupt) in epoch {self.epoch}; "
            f"the best state so far (epoch {self.best_epoch}) was restored",
            UserWarning,
            stacklevel=3,
        )

    def _diverged(self, epoch):
        if self.best_state is None:
            raise FloatingPointError(
                f"the training loss became non-finite in epoch {epoch} before any "
                "finite epoch; lower lr, enable gradient clipping or check the data"
            )
        warnings.warn(
            f"the loss became non-finite in epoch {epoch}; training stopped and the "
            f"best state (epoch {self.best_epoch}) was restored",
            UserWarning,
            stacklevel=3,
        )
        self.stop_reason = "non-finite loss"


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
        On the CPU, float32: VT's ``T~`` or SAND's curve.
    deriv : Tensor of shape (n, M) or None
        SAND's ``D~`` (None for a VT or without ``derivative``).
    std : Tensor of shape (n, M)
        Only with ``error_head``: the error standard deviation
        (standardised units).
    """
    module.eval()
    n, m = len(data), grid.shape[0]
    is_sand = hasattr(module, "sand")
    if out is None:
        curves = torch.empty(n, m)
        deriv = torch.empty(n, m) if is_sand and derivative else None
        std = torch.empty(n, m) if error_head is not None else None
    else:
        curves, deriv, std = (*out, None)[:3]
        deriv = deriv if is_sand and derivative else None
    order = data.counts_cpu.argsort(stable=True)
    use_amp = bool(amp) and grid.device.type == "cuda"
    for index in order.split(batch_size):
        batch = data.batch(index)
        with torch.autocast("cuda", dtype=torch.float16, enabled=use_amp):
            res = _forward(module, batch, grid, anchors)
        curves[index] = res["sand" if is_sand else "curve"].to("cpu", curves.dtype)
        if deriv is not None:
            deriv[index] = res["derivative"].to("cpu", deriv.dtype)
        if error_head is not None:
            var = error_head.on_grid(res, grid, batch.times, batch.valid)
            std[index] = var.sqrt().to("cpu", std.dtype)
    if error_head is not None:
        return curves, deriv, std
    return curves, deriv
