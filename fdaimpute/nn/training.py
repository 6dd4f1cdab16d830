"""The training loop of the VT and SAND modules.

Training hides part of each subject's points from the encoder
(self-supervision) and scores the curve at all of them; batches come from
:mod:`fdaimpute.nn.batching`. Batched inference and reading a module's
curve at observation times live in :mod:`fdaimpute.nn.inference` (and are
importable from here too).

The loop is split into small steps that a subclass may override:
:meth:`Trainer.fit` -> :meth:`Trainer.run_epoch` ->
:meth:`Trainer.training_batches` (which hides points with
:meth:`Trainer.visible_mask`) and :meth:`Trainer.train_step` ->
:meth:`Trainer.forward` and :meth:`Trainer.compute_loss`, with
:meth:`Trainer.validate` (which reads the forward pass's prediction at the
observation times with
:meth:`Trainer.read`), the :meth:`Trainer.on_epoch_end` hook and
:meth:`Trainer.finish`, run once after the epochs. The
conditional neural process (:mod:`fdaimpute.nn.cnp`) is one such subclass.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from dataclasses import replace

import torch

from fdaimpute.nn import distributed
from fdaimpute.nn.base_curves import module_base
from fdaimpute.nn.batching import hide_observations, shuffled_batches
from fdaimpute.nn.channels import channel_masks, fold_channels, module_inputs
from fdaimpute.nn.graphed import GraphedStep, graph_unsupported
from fdaimpute.nn.inference import read_at
from fdaimpute.nn.optim import make_adam, make_schedule, set_total_steps
from fdaimpute.nn.regularizers import RegularizerContext, regularizer_names
from fdaimpute.nn.validation import held_out_error

__all__ = ["Trainer"]

#: Training subjects whose statistical base one call computes: the batches
#: of such a group are hidden from first, then their base's curves come from
#: one call instead of one per batch (each call has fixed costs, and on a GPU
#: it waits for the device).
BASE_GROUP_SUBJECTS = 4096

#: How the weight of the network's curve in a mix with a base is set.
BASE_WEIGHTS = ("detached", "held-out", "trained")

#: Draws of the validation subjects' hidden points the held-out weight is
#: fitted on (one draw hides up to half of a subject's points, often a run).
WEIGHT_DRAWS = 8


def _autocast_dtype(name):
    """The autocast type of ``amp`` on CUDA: bfloat16 where supported."""
    if name is None:
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    dtypes = {"bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in dtypes:
        raise ValueError(
            f"amp must be True, False or one of {sorted(dtypes)}, got {name!r}"
        )
    return dtypes[name]


def _weighted_mse(pred, target, weight):
    diff = torch.where(weight > 0, pred - target, 0.0)
    return (weight * diff.pow(2)).sum() / weight.sum().clamp(min=1e-12)


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
    max_time : float or None, default=None
        Wall-clock budget of the epochs, in seconds. After each epoch the
        run is re-planned: the epochs that still fit in the budget at the
        mean epoch time so far (at most ``max_epochs`` in all), with the
        learning-rate schedule stretched or shrunk to end at the last of
        them. Training stops with ``stop_reason = "max_time"`` when the
        plan is done. The budget covers the epochs (validation included),
        not the set-up or the final comparison of ``keep_start``.
    clip_grad : float or None, default=1.0
        Clip the gradient's global norm (the transformer's and SAND's
        separately).
    regularizers : list, default=()
        Penalties (see :mod:`fdaimpute.nn.regularizers`).
    visible_weight : float, default=1.0
        Weight in the data loss of the points the encoder sees, relative to
        the points hidden from it (:meth:`point_weights`). ``1`` scores all
        points alike, as the SAND paper does; below 1 the loss rewards less
        the reproduction of noise at points the network is shown, and more
        the prediction of points it is not.
    anchors : {None, "mean", "two-sided"}, default=None
        SAND's integration constant (see :class:`~fdaimpute.nn.SANDLayer`).
    amp : bool, "auto", "bfloat16" or "float16", default=False
        Mixed precision on CUDA (ignored elsewhere). ``True``: bfloat16
        autocast where the GPU supports it, else float16 autocast with
        gradient scaling; a type name forces that type (float16 always
        with gradient scaling). ``"auto"``: bfloat16 when the steps run
        from a CUDA graph (where the casts cost no launches), else none.
    cuda_graph : bool or "auto", default=False
        Capture the training step in a CUDA graph and replay it (see
        :mod:`fdaimpute.nn.graphed`): much faster for small networks on a
        GPU, whose steps are bound by launching kernels. Batches are then
        padded to the longest subject and an epoch's partial last batch is
        left out. Where a graph cannot be used (CPU, several processes,
        regularizers, float16 loss scaling, a statistical base) training
        is eager: silently with ``"auto"``, with a warning naming the
        reason with ``True``.
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
    stop_epoch : int or None, default=None
        Number of the last epoch to run (counted as in ``history``): a
        shorter run on the schedule planned for ``max_epochs``, as when
        the first epochs of an earlier run are repeated. ``None``: no such
        stop.
    keep_start : bool, default=False
        Score the module on the validation subjects before training and
        keep that starting state (``best_epoch = start_epoch - 1``) unless
        an epoch beats it by ``start_margin`` standard errors (and, with
        ``start_level`` below 1, across subjects). With a statistical base
        mixed in by a weight that starts at zero, the start *is* the base,
        so training cannot end worse than the base on the validation
        subjects.
    start_margin : float, default=1.0
        With ``keep_start``: how many standard errors (paired over
        validation subjects, :func:`~fdaimpute.nn.validation.paired_gain`)
        the best epoch's held-out error must be below the start's to be
        kept. It guards against an epoch that won on the validation points
        by chance, which matters when there are few validation subjects.
    start_level : float, default=1.0
        With ``keep_start`` and below 1: the best epoch must also lower the
        subjects' errors consistently, a one-sided Wilcoxon signed-rank
        test over the validation subjects
        (:func:`~fdaimpute.nn.validation.signed_rank_p`) with a p-value
        below this. The default ``1`` leaves the test off: the errors are
        squared, and a mix that lowers them on some subjects and leaves the
        rest alone is a real gain, which the test turned down (on every
        split of all UK electricity households at 30 readings, where the
        mix was up to 4% below PACE: ``docs/benchmarks.md``, gate-power).
    base_weight : {"detached", "held-out", "trained"}, default="detached"
        With a statistical base (a module with ``base_gate``): how the
        weight of the network's curve in the mix is set. ``"detached"``:
        the network learns from its own curves, as without a base, and the
        gate from the mix's error on the training subjects (which reaches
        the gate alone); the epoch is chosen by the mix's error.
        ``"trained"``: the same, except that the mix's error trains the
        network too, which then serves the mix as well as the data (where
        the weight is below 1 the mix's error asks the network to overshoot
        the data). ``"held-out"``: the network is trained, and its epoch
        chosen, on its own error alone; then the weight is the
        least-squares one at the validation subjects' hidden points
        (``WEIGHT_DRAWS`` draws pooled; clipped to [0, 1], per variable; 1
        without validation subjects). ``keep_start``'s comparison then
        judges the mix against the base. ``docs/benchmarks.md``,
        base-weight, compares the three.

    Attributes
    ----------
    history : dict of list
        One entry per epoch: ``epoch``, ``train_loss``, ``valid_loss``,
        ``lr``, ``seconds``, ``reg/<name>``.
    best_epoch : int
        Epoch whose state was kept (``start_epoch - 1``: the starting
        state, see ``keep_start``).
    start_gain : tuple of float, list or None
        With ``keep_start``: how much the best epoch's held-out error was
        below the start's, that gain in standard errors, and the
        signed-rank test's p-value (None if no epoch had a lower error or
        nothing was validated). A module of several variables is judged on
        each variable apart: a list of such tuples (None for a variable
        with no hidden point), and a variable whose gain falls short gets
        its base gates set to zero instead (the start on every variable
        only when all fall short).
    stop_reason : str
        ``"max_epochs"``, ``"max_time"``, ``"stop_epoch"``,
        ``"early stopping"``, ``"callback"`` (:meth:`on_epoch_end`),
        ``"non-finite loss"`` or ``"interrupted"``.
    interrupted : bool
        Whether :meth:`fit` stopped on a ``KeyboardInterrupt``.

    Notes
    -----
    Under a ``torch.distributed`` process group (e.g. ``torchrun``) every
    rank runs this loop on the same data; each global batch is dealt out to
    the ranks and the gradients averaged (DistributedDataParallel), losses
    are averaged over ranks and only rank 0 shows progress (see
    :mod:`fdaimpute.nn.distributed`).

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

    #: Whether the step may be captured in a CUDA graph (``cuda_graph``).
    graph_safe = True

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
        max_time=None,
        clip_grad=1.0,
        regularizers=(),
        visible_weight=1.0,
        anchors=None,
        amp=False,
        cuda_graph=False,
        bucket=16,
        seed=0,
        verbose=False,
        start_epoch=0,
        stop_epoch=None,
        keep_start=False,
        start_margin=1.0,
        start_level=1.0,
        base_weight="detached",
    ):
        if base_weight not in BASE_WEIGHTS:
            raise ValueError(
                f"base_weight must be one of {BASE_WEIGHTS}, got {base_weight!r}"
            )
        self.module = module
        self.grid = grid
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.sand_lr = sand_lr
        self.lr_schedule = lr_schedule
        self.patience = patience
        self.max_time = None if max_time is None else float(max_time)
        self.clip_grad = clip_grad
        self.regularizers = list(regularizers)
        self.reg_names = regularizer_names(self.regularizers)
        self.visible_weight = float(visible_weight)
        self.anchors = anchors
        self.device = grid.device
        # "auto" is settled in configure, once it is known whether a graph runs
        self.amp_auto = amp == "auto"
        self.amp = bool(amp) and not self.amp_auto and self.device.type == "cuda"
        named = amp if isinstance(amp, str) and not self.amp_auto else None
        self.amp_dtype = _autocast_dtype(named) if self.amp else torch.float16
        self.cuda_graph = cuda_graph if cuda_graph == "auto" else bool(cuda_graph)
        self.graphed = None
        self.bucket = bucket
        self.rank, self.world_size = distributed.world()
        self.verbose = verbose and self.rank == 0
        self.seed = int(seed)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.cpu_generator = torch.Generator().manual_seed(seed + 1)
        self.history = {}
        self.best_epoch = None
        self.best_loss = math.inf
        self.best_state = None
        self.step = 0
        self.planned_epochs = max_epochs
        self.start_epoch = int(start_epoch)
        self.stop_epoch = None if stop_epoch is None else int(stop_epoch)
        self.keep_start = bool(keep_start)
        self.start_margin = float(start_margin)
        self.start_level = float(start_level)
        self.start_state = None
        self.start_gain = None
        self.base_weight = base_weight
        # while True, the network's own output is what is trained and scored
        self.network_only = False
        self.epoch = self.start_epoch
        self.stop_reason = None
        self.interrupted = False

    # ------------------------------------------------------------------ #
    # set-up
    def configure(self, n_train):
        """Build the optimizer, LR schedule and gradient scaler.

        The module's :meth:`parameter_groups` are clipped separately; with
        ``sand_lr``, the second group (SAND's layer) takes that rate.
        Returns whether the steps will run from a CUDA graph.
        """
        self.clip_groups = self.module.parameter_groups()
        if len(self.clip_groups) > 1 and self.sand_lr is not None:
            groups = [
                {"params": self.clip_groups[0], "lr": self.lr},
                {"params": self.clip_groups[1], "lr": self.sand_lr},
            ]
        else:
            groups = [{"params": list(self.module.parameters()), "lr": self.lr}]
        graph = False
        if self.cuda_graph:
            reason = graph_unsupported(self, n_train)
            graph = reason is None
            if not graph and self.cuda_graph is True:
                warnings.warn(
                    f"cuda_graph: {reason}; training is eager",
                    UserWarning,
                    stacklevel=3,
                )
        if self.amp_auto and graph and torch.cuda.is_bf16_supported():
            self.amp, self.amp_dtype = True, torch.bfloat16
        self.optimizer = make_adam(groups, capturable=graph)
        self.steps_per_epoch = (
            n_train // self.batch_size
            if graph
            else math.ceil(n_train / self.batch_size)
        )
        steps = max(1, self.max_epochs * self.steps_per_epoch)
        self.scheduler = make_schedule(self.optimizer, self.lr_schedule, steps)
        # bfloat16 has float32's range: only float16 needs the loss scaled
        scaled = self.amp and self.amp_dtype == torch.float16
        self.scaler = torch.amp.GradScaler("cuda", enabled=scaled)
        self.model = self.module
        if self.world_size > 1:
            self.model = distributed.wrap(self.module, self.device)
        return graph

    def batches(self, data):
        """Index tensors of one epoch's batches (shuffled, length-bucketed)."""
        batches = shuffled_batches(
            data, self.batch_size, self.bucket, self.cpu_generator
        )
        return [distributed.shard(i, self.rank, self.world_size) for i in batches]

    # ------------------------------------------------------------------ #
    # one step
    def forward(self, batch, return_hidden=False):
        """Model outputs for a batch (autocast on CUDA when ``amp``)."""
        # training goes through DistributedDataParallel when there is one
        net = (
            getattr(self, "model", self.module) if self.module.training else self.module
        )
        extra = batch.extra_inputs
        with torch.autocast("cuda", dtype=self.amp_dtype, enabled=self.amp):
            return net(
                batch.times,
                batch.values,
                batch.visible,
                self.grid,
                anchors=self.anchors,
                return_hidden=return_hidden,
                **extra,
            )

    def visible_mask(self, batch):
        """Which observations of a training batch the encoder sees.

        Each subject hides 1 to half of its points
        (:func:`~fdaimpute.nn.hide_observations`); the loss scores all
        (:meth:`point_weights`).
        """
        return batch.valid & ~hide_observations(batch.valid, self.generator)

    def point_weights(self, batch):
        """Weights of a training batch's points in the data loss, (B, L).

        1 at the points hidden from the encoder, ``visible_weight`` at those
        it sees, 0 at padding.
        """
        weight = batch.valid.to(batch.values.dtype)
        if self.visible_weight != 1:
            weight = torch.where(batch.visible, self.visible_weight * weight, weight)
        return weight

    def read(self, out, batch):
        """The prediction of ``out`` at ``batch.times``, (B, L): SAND's or VT's curve.

        What :meth:`validate` scores at the hidden validation points.
        """
        if self.network_only and out.network is not None:
            out = out.network
        vt, sand = read_at(out, self.grid, batch.times, self.anchors, batch.variable)
        return vt if sand is None else sand

    def compute_loss(self, out, batch):
        """Data loss: MSE of VT (and SAND) at the observed points.

        Each point counts with its :meth:`point_weights`.
        Returns the total and a dict of its parts. VT and SAND terms are
        summed; SAND's input is detached, so each part of the network learns
        from its own term only. With a statistical base, the network's own
        curves (before the gates mix them with the base's) are scored too,
        as ``network`` terms: the gates start at zero, and without these
        terms the network would learn only the small, noisy remainder the
        base leaves.
        """
        parts = {}
        outputs = [("", out)]
        if out.network is not None:
            outputs.append(("network ", out.network))
            if self.network_only:
                outputs = outputs[1:]
        weight = self.point_weights(batch)
        for prefix, output in outputs:
            vt, sand = read_at(
                output, self.grid, batch.times, self.anchors, batch.variable
            )
            parts[prefix + "vt"] = _weighted_mse(vt, batch.values, weight)
            if sand is not None:
                parts[prefix + "sand"] = _weighted_mse(sand, batch.values, weight)
        return sum(parts.values()), parts

    def context(self, out, batch):
        """The :class:`RegularizerContext` of a training step.

        With several variables each subject's variables are rows of their
        own (see :class:`RegularizerContext`).
        """
        times, mask, embedding = batch.times, batch.visible, out.embedding
        if self.network_only and out.network is not None:
            out = replace(out.network, hidden=out.hidden)
        curves = (out.output, out.curve, out.derivative)
        hidden = out.hidden or {}
        p = getattr(self.module, "n_variables", 1)
        if p > 1:
            times, mask = channel_masks(batch.times, batch.visible, batch.variable, p)
            embedding = embedding.repeat_interleave(p, dim=0)
            curves = tuple(None if c is None else fold_channels(c, p) for c in curves)
            hidden = {
                # the grid queries of each variable; the observation tokens
                # (without the covariates' one) once per variable
                key: fold_channels(value, p)
                if key.startswith("decoder")
                else value[:, : batch.times.shape[1]].repeat_interleave(p, dim=0)
                for key, value in hidden.items()
            }
        return RegularizerContext(
            module=self.module,
            epoch=self.epoch,
            step=self.step,
            times=times,
            mask=mask,
            embedding=embedding,
            grid=self.grid,
            curve=curves[0],
            vt_curve=curves[1],
            derivative=curves[2],
            hidden=hidden,
        )

    def train_step(self, batch):
        """Forward, loss (+ penalties), backward, clip, step.

        ``batch.visible`` holds what the encoder sees
        (:meth:`training_batches` draws it). Returns the data loss, the
        total (with weighted penalties) and the unweighted penalties
        (tensors).
        """
        need_hidden = any(getattr(r, "needs_hidden", False) for r in self.regularizers)
        out = self.forward(batch, return_hidden=need_hidden)
        loss, _ = self.compute_loss(out, batch)
        total = loss
        if self.world_size > 1:
            total = total * distributed.observation_weight(
                float(self.point_weights(batch).sum()), self.device, self.world_size
            )
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
        graphed = self.graphed
        steps = graphed.batches(data) if graphed else self.training_batches(data)
        for item in steps:  # graphed: index tensors; eager: batches
            if graphed is not None:
                loss = total = graphed(data, item)
                penalties = []
                self.scheduler.step()
                self.step += 1
            else:
                loss, total, penalties = self.train_step(item)
            data_loss += loss
            objective += total.float()
            if penalties:
                regs += torch.stack(penalties).float()
            n_batches += 1
        finite = torch.stack(
            [objective.isfinite()]
            + [p.isfinite().all() for p in self.module.parameters()]
        ).all()
        size = self.world_size
        finite = distributed.all_finite(bool(finite), self.device, size)
        loss = distributed.mean_over_ranks(
            (data_loss / n_batches).item(), self.device, size
        )
        return loss, finite, (regs / n_batches).tolist()

    def training_batches(self, data):
        """One epoch's training batches, each with its hidden points drawn.

        With a statistical base (the module's ``base_curves``), the batches
        of about :data:`BASE_GROUP_SUBJECTS` subjects are drawn first and
        their base computed in one call (``Batch.base``); the points hidden
        are those of drawing batch by batch.
        """
        base_curves = module_base(self.module)
        group, size = [], 0
        for index in self.batches(data):
            batch = data.batch(index)
            batch.visible = self.visible_mask(batch)
            if base_curves is None:
                yield batch
                continue
            group.append(batch)
            size += batch.times.shape[0]
            if size >= BASE_GROUP_SUBJECTS:
                yield from self._with_base(group, base_curves)
                group, size = [], 0
        if group:
            yield from self._with_base(group, base_curves)

    @torch.no_grad()
    def _with_base(self, group, base_curves):
        """The batches of ``group`` with their base computed in one call."""
        width = max(batch.times.shape[1] for batch in group)

        def stacked(name):
            parts = [getattr(batch, name) for batch in group]
            if parts[0] is None:
                return None
            if name == "covariates":  # one row per subject
                return torch.cat(parts)
            out = parts[0].new_zeros((sum(x.shape[0] for x in parts), width))
            row = 0
            for x in parts:
                out[row : row + x.shape[0], : x.shape[1]] = x
                row += x.shape[0]
            return out

        extra = module_inputs(
            getattr(self.module, "n_variables", 1),
            stacked("variable"),
            stacked("covariates"),
        )
        curve, slope = base_curves(
            stacked("times"), stacked("values"), stacked("visible"), self.grid, **extra
        )
        sizes = [batch.times.shape[0] for batch in group]
        slopes = [None] * len(group) if slope is None else slope.split(sizes)
        for batch, c, d in zip(group, curve.split(sizes), slopes):
            batch.base = (c, d)
            yield batch

    @torch.no_grad()
    def validate(self, data, hidden):
        """Held-out error: the output's MSE at the ``hidden`` validation points.

        ``hidden`` is a bool tensor aligned with ``data``'s flat observations.
        The criterion is SAND's error for a SAND module, VT's for a VT.
        """
        self.module.eval()
        return held_out_error(
            self.forward,
            data,
            hidden,
            self.grid,
            self.anchors,
            self.batch_size,
            read=self.read,
        )

    # ------------------------------------------------------------------ #
    # loop
    def fit(self, train, valid=None, valid_hidden=None, check=None, check_hidden=None):
        """Train; keep the best state (by validation loss, else training loss).

        Parameters
        ----------
        train : RaggedTensors
            Training subjects.
        valid : RaggedTensors, default=None
            Validation subjects.
        valid_hidden : bool Tensor, default=None
            Observations of ``valid`` to predict (see :meth:`validate`).
        check : RaggedTensors, default=None
            With ``keep_start``: other held-out subjects on which the best
            epoch is compared with the start (default: ``valid``). The
            subjects that chose the epoch favour it.
        check_hidden : bool Tensor or list of bool Tensor, default=None
            The observations of ``check`` to predict; with several draws,
            each subject's errors are pooled over them
            (:func:`~fdaimpute.nn.validation.pooled_subject_errors`).

        Returns
        -------
        self
        """
        with self._training_mix() as held_out:
            trained = self._run(train, valid, valid_hidden)
        if held_out and trained:
            self.module.load_state_dict(self.best_state)
            self._choose_base_weight(valid, valid_hidden)
            self.best_state = self._state_copy()
        if self.start_state is not None and self.best_epoch >= self.start_epoch:
            if check is None:
                check, check_hidden = valid, valid_hidden
            self._check_gain(check, check_hidden)
        if self.best_state is not None:
            self.module.load_state_dict(self.best_state)
        self.module.eval()
        return self

    def _run(self, train, valid, valid_hidden):
        """Configure, train and :meth:`finish`; whether an epoch was kept."""
        if self.configure(len(train)):
            self.graphed = GraphedStep(self, train)
        keys = ["epoch", "train_loss", "valid_loss", "lr", "seconds", *self.reg_names]
        for key in keys:
            self.history.setdefault(key, [])
        bar = None
        if self.verbose:
            from tqdm.auto import tqdm

            bar = tqdm(total=self.max_epochs, desc=type(self.module).__name__)
        if self.keep_start and valid is not None:
            self.start_state = self._state_copy()
            self._keep_if_best(self.validate(valid, valid_hidden), self.start_epoch - 1)
        try:
            self._epochs(train, valid, valid_hidden, keys, bar)
        except KeyboardInterrupt:
            if self.best_state is None:
                raise
            self._interrupted()
        finally:
            if bar is not None:
                bar.close()
        trained = self.best_state is not None and self.best_epoch >= self.start_epoch
        if trained and valid is not None and not self.interrupted:
            self.module.load_state_dict(self.best_state)
            if self.finish(valid, valid_hidden):
                self.best_state = self._state_copy()
        return trained

    @contextlib.contextmanager
    def _training_mix(self):
        """While training, what the mix's error reaches (see ``base_weight``).

        Yields whether the weight is then chosen on held-out points
        (``"held-out"`` with a base): meanwhile the network's own curves are
        trained and scored, and the gates take no gradient.
        """
        with_base = module_base(self.module) is not None
        held_out = with_base and self.base_weight == "held-out"
        detached = with_base and self.base_weight == "detached"
        vt = getattr(self.module, "vt", self.module)
        gates = self._gates() if held_out else []
        for gate in gates:
            # no gradient reaches it (and DistributedDataParallel must know)
            gate.requires_grad_(False)
        self.network_only = held_out
        if detached:
            vt.mix_detached = True
        try:
            yield held_out
        finally:
            self.network_only = False
            if detached:
                vt.mix_detached = False
            for gate in gates:
                gate.requires_grad_(True)

    def _gates(self):
        """The module's base gates (the weights of the network in the mix)."""
        return [p for n, p in self.module.named_parameters() if _is_gate(n)]

    @torch.no_grad()
    def _choose_base_weight(self, valid, hidden):
        """Set the base gates to the least-squares weight of the network's curve.

        On the validation subjects' ``hidden`` points and ``WEIGHT_DRAWS - 1``
        more draws of them, per variable: the weight ``w`` in [0, 1] of
        ``base + w (network - base)`` with the least squared error. Without
        validation subjects, 1 (the network's curve alone: nothing to weigh
        it by).
        """
        from fdaimpute.nn.validation import (
            _held_out_batches,
            hide_validation_observations,
        )

        n_var = getattr(self.module, "n_variables", 1)
        gates = self._gates()
        if valid is None:
            for gate in gates:
                gate.fill_(1.0)
            return
        self.module.eval()

        def errors(drawn):
            """Prediction less value at the points drawn, and their variables."""
            found = [
                (err[held].double().cpu(), None if var is None else var[held].cpu())
                for _, held, err, var in _held_out_batches(
                    self.forward,
                    valid,
                    drawn,
                    self.grid,
                    self.anchors,
                    self.batch_size,
                    self.read,
                )
            ]
            err = torch.cat([e for e, _ in found])
            if n_var == 1:
                return err, torch.zeros(err.shape, dtype=torch.long)
            return err, torch.cat([v for _, v in found]).long()

        draws = [hidden] + [
            hide_validation_observations(valid, self.seed + 7919 * d + 3)
            for d in range(1, WEIGHT_DRAWS)
        ]
        for gate in gates:
            gate.zero_()
        sums = torch.zeros(2, n_var, dtype=torch.float64)
        for drawn in draws:
            base, variable = errors(drawn)
            self.network_only = True
            d = errors(drawn)[0] - base
            self.network_only = False
            sums[0].index_add_(0, variable, -base * d)
            sums[1].index_add_(0, variable, d * d)
        cross, square = (
            [
                distributed.sum_over_ranks(float(x), self.device, self.world_size)
                for x in row
            ]
            for row in sums
        )
        weight = [
            0.0 if q <= 0 else min(max(c / q, 0.0), 1.0) for c, q in zip(cross, square)
        ]
        for gate in gates:
            value = torch.tensor(weight if gate.ndim else weight[0], dtype=gate.dtype)
            gate.copy_(value.to(gate.device))

    def _check_gain(self, valid, hidden):
        """Go back to the start unless the best epoch beat it clearly."""
        from fdaimpute.nn.validation import pooled_subject_errors

        self.module.eval()
        n_var = getattr(self.module, "n_variables", 1)

        def errors(state):
            self.module.load_state_dict(state)
            return pooled_subject_errors(
                self.forward,
                valid,
                hidden,
                self.grid,
                self.anchors,
                self.batch_size,
                read=self.read,
                n_variables=n_var if n_var > 1 else None,
            )

        best, start = errors(self.best_state), errors(self.start_state)
        if n_var > 1:
            self._check_gain_by_variable(best, start)
            return
        self.start_gain, beaten = self._start_beaten(best, start)
        if not beaten:
            self.best_state = self.start_state
            self.best_epoch = self.start_epoch - 1

    def _start_beaten(self, best, start):
        """The gain of ``best`` over ``start`` (subjects' errors), and whether
        it clears ``start_margin`` and ``start_level``."""
        from fdaimpute.nn.validation import paired_gain, signed_rank_p

        gain = (*paired_gain(best, start), signed_rank_p(best, start))
        short = gain[1] < self.start_margin or gain[2] >= self.start_level
        return gain, not short

    def _check_gain_by_variable(self, best, start):
        """:meth:`_check_gain` for each variable of a module of several.

        ``best`` and ``start`` hold each subject's errors per variable. A
        variable on which the best epoch did not beat the start clearly
        gets its base gates set to zero (the base's curve); if no variable
        is left, the start is kept.
        """
        gains, lost = [], []
        for j in range(best[0].shape[1]):
            scored = best[1][:, j] > 0
            if not scored.any():
                gains.append(None)
                lost.append(j)
                continue
            ours = (best[0][scored, j], best[1][scored, j])
            theirs = (start[0][scored, j], start[1][scored, j])
            gain, beaten = self._start_beaten(ours, theirs)
            gains.append(gain)
            if not beaten:
                lost.append(j)
        self.start_gain = gains
        if len(lost) == len(gains):
            self.best_state = self.start_state
            self.best_epoch = self.start_epoch - 1
            return
        for name, value in self.best_state.items():
            if _is_gate(name):
                value[lost] = 0.0

    def _epochs(self, train, valid, valid_hidden, keys, bar):
        """Run the epochs, recording each, until a stopping rule holds."""
        since_best = 0
        self.planned_epochs = self.max_epochs
        started = time.perf_counter()
        for epoch in range(self.start_epoch, self.start_epoch + self.max_epochs):
            self.epoch = epoch
            start = time.perf_counter()
            lr = float(self.optimizer.param_groups[0]["lr"])
            train_loss, finite, penalties = self.run_epoch(train)
            valid_loss = (
                self.validate(valid, valid_hidden) if valid is not None else None
            )
            valid_loss = distributed.mean_over_ranks(
                valid_loss, self.device, self.world_size
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
                return
            since_best = 0 if self._keep_if_best(score, epoch) else since_best + 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(
                    loss=f"{train_loss:.4f}",
                    valid="-" if valid_loss is None else f"{valid_loss:.4f}",
                    best=self.best_epoch,
                )
            if self.on_epoch_end(record):
                self.stop_reason = "callback"
                return
            if self.stop_epoch is not None and epoch >= self.stop_epoch:
                self.stop_reason = "stop_epoch"
                return
            if self.patience is not None and since_best >= self.patience:
                self.stop_reason = "early stopping"
                return
            if self.max_time is not None:
                done = epoch - self.start_epoch + 1
                self._replan(time.perf_counter() - started, done, bar)
                if done >= self.planned_epochs < self.max_epochs:
                    self.stop_reason = "max_time"
                    return
        self.stop_reason = "max_epochs"

    def _replan(self, elapsed, done, bar):
        """Fit the run's length (and its schedule) to what is left of ``max_time``.

        The epoch time is the mean of the epochs so far, after the first
        (which carries one-off costs) once there are three.
        """
        if done >= 3:
            first = self.history["seconds"][-done]
            per_epoch = (elapsed - first) / (done - 1)
        else:
            per_epoch = elapsed / done
        left = self.max_time - elapsed
        fits = done + int(left // per_epoch) if left > 0 and per_epoch > 0 else done
        planned = min(self.max_epochs, max(done, fits))
        # every rank must run the same number of steps
        planned = int(distributed.min_over_ranks(planned, self.device, self.world_size))
        if planned != self.planned_epochs:
            self.planned_epochs = planned
            set_total_steps(self.scheduler, planned * self.steps_per_epoch)
            if bar is not None:
                bar.total = planned
                bar.refresh()

    def _keep_if_best(self, score, epoch):
        """Keep a copy of the weights if ``score`` is the best so far."""
        if not score < self.best_loss:
            return False
        self.best_state = self._state_copy()
        self.best_loss, self.best_epoch = score, epoch
        return True

    def _state_copy(self):
        return {k: v.detach().clone() for k, v in self.module.state_dict().items()}

    def on_epoch_end(self, record):
        """Hook called after each epoch with its history record; return True to stop."""
        return False

    def finish(self, valid, hidden):
        """Hook run once on the best epoch's state, before ``keep_start``'s comparison.

        Called only when an epoch was kept and there are validation subjects
        (``valid`` with its ``hidden`` observations, as in :meth:`validate`);
        it may change the module. Return True if it did (the changed state is
        then kept). :class:`~fdaimpute.nn.sand_smoothing.SANDTrainer` chooses
        SAND's smoothing here.
        """
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
            clipping = (
                f"clip gradients harder (clip_grad={self.clip_grad})"
                if self.clip_grad
                else "clip gradients (clip_grad)"
            )
            raise FloatingPointError(
                f"the training loss became non-finite in epoch {epoch} before any "
                f"finite epoch; lower lr, {clipping} or check the data"
            )
        warnings.warn(
            f"the loss became non-finite in epoch {epoch}; training stopped and the "
            f"best state (epoch {self.best_epoch}) was restored",
            UserWarning,
            stacklevel=4,
        )
        self.stop_reason = "non-finite loss"


def _is_gate(name):
    """Whether a parameter's name is that of a base gate."""
    return name.split(".")[-1] == "base_gate"
