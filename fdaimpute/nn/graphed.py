"""Training steps replayed from a CUDA graph: one launch instead of hundreds.

On a GPU the training step of the small VT and SAND networks is bound by the
host: each of several hundred kernels is launched from Python and runs for
microseconds. Captured once in a CUDA graph (forward, loss, backward,
gradient clipping and the fused Adam step), a step is replayed with one
launch.

A graph needs fixed shapes and no host synchronisation inside the step, so
in this mode

- every batch is padded to the longest subject of the training data and
  holds exactly ``batch_size`` subjects: an epoch's last, partial batch is
  left out (the shuffle puts other subjects there each epoch);
- the observations hidden from the encoder are drawn before the step, as
  in eager training, and copied into the graph's input buffers;
- the learning rate lives in a device tensor that the schedule updates in
  place.

The first steps run eagerly on a side stream (as capture requires), then
the step is captured; if capture fails, training goes on eagerly with a
warning. :func:`graph_unsupported` says why a trainer cannot use a graph.
"""

from __future__ import annotations

import warnings

import torch

from fdaimpute.nn.base_curves import module_base
from fdaimpute.nn.batching import Batch, shuffled_batches

__all__ = ["GraphedStep", "graph_unsupported"]

#: Eager steps before the capture (kernels pick their algorithms, the
#: optimizer creates its state, lazily built caches fill).
WARMUP_STEPS = 3


def graph_unsupported(trainer, n_train):
    """Why ``trainer`` cannot train from a CUDA graph (None if it can).

    Parameters
    ----------
    trainer : Trainer
        A configured trainer.
    n_train : int
        Training subjects.

    Returns
    -------
    str or None
    """
    module = trainer.module
    if trainer.device.type != "cuda":
        return "CUDA graphs need a CUDA device"
    if not getattr(trainer, "graph_safe", False):
        return f"{type(trainer).__name__} does not support CUDA graphs"
    if trainer.world_size > 1:
        return "training across processes runs eagerly"
    if trainer.regularizers:
        return "regularizers run eagerly"
    if trainer.amp and trainer.amp_dtype == torch.float16:
        return "float16 loss scaling runs eagerly (use bfloat16)"
    if module_base(module) is not None:
        return "a statistical base is computed on the CPU"
    if trainer.anchors == "two-sided":
        return "two-sided anchors check their pattern on the host"
    if getattr(module, "n_variables", 1) > 1:
        return "several variables run eagerly"
    if getattr(module, "n_covariates", 0):
        return "covariates run eagerly"
    if n_train < trainer.batch_size:
        return "fewer training subjects than batch_size"
    return None


class GraphedStep:
    """Run a :class:`~fdaimpute.nn.Trainer`'s steps from one captured CUDA graph.

    Parameters
    ----------
    trainer : Trainer
        The trainer, configured with a capturable optimizer.
    data : RaggedTensors
        The training subjects: their longest sets the padded width.
    capture : bool, default=True
        ``False`` runs the same fixed-shape steps eagerly (for tests on
        machines without a GPU).
    """

    def __init__(self, trainer, data, capture=True):
        self.trainer = trainer
        self.width = int(data.counts_cpu.max())
        self.capture = capture
        self.graph = None
        self.failed = None
        self.steps_run = 0
        b, w, dev = trainer.batch_size, self.width, trainer.device
        self.static = Batch(
            index=None,
            times=torch.zeros(b, w, device=dev),
            values=torch.zeros(b, w, device=dev),
            valid=torch.zeros(b, w, dtype=torch.bool, device=dev),
            visible=torch.zeros(b, w, dtype=torch.bool, device=dev),
        )
        self.loss = None
        # the graph reads each group's rate from a tensor the schedule fills;
        # made after the schedule, whose base rates stay plain numbers
        self.lr = []
        for group in trainer.optimizer.param_groups:
            group["lr"] = torch.tensor(float(group["lr"]), device=dev)
            self.lr.append(group["lr"])

    def batches(self, data):
        """The epoch's batches as in eager training, without the partial one."""
        t = self.trainer
        out = shuffled_batches(data, t.batch_size, t.bucket, t.cpu_generator)
        return [index for index in out if index.numel() == t.batch_size]

    def __call__(self, data, index):
        """One training step on the subjects at ``index``; returns the data loss."""
        t = self.trainer
        batch = data.batch(index, width=self.width)
        batch.visible = t.visible_mask(batch)
        for name in ("times", "values", "valid", "visible"):
            getattr(self.static, name).copy_(getattr(batch, name))
        self._sync_lr()
        if self.graph is not None:
            self.graph.replay()
            loss = self.loss.clone()
        elif self.capture and self.failed is None and self.steps_run >= WARMUP_STEPS:
            loss = self._capture()
        elif self.capture and self.failed is None:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                loss = self._eager()
            torch.cuda.current_stream().wait_stream(side)
        else:
            loss = self._eager()
        self.steps_run += 1
        return loss

    def _body(self):
        t = self.trainer
        out = t.forward(self.static)
        loss, _ = t.compute_loss(out, self.static)
        loss.backward()
        if t.clip_grad:
            for params in t.clip_groups:
                torch.nn.utils.clip_grad_norm_(params, t.clip_grad)
        t.optimizer.step()
        return loss.detach()

    def _eager(self):
        self.trainer.optimizer.zero_grad(set_to_none=True)
        return self._body()

    def _capture(self):
        """Capture the step (which also runs it once); eager if that fails."""
        self.trainer.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.loss = self._body()
        except Exception as exc:  # noqa: BLE001 - any failure falls back to eager
            self.failed = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"capturing the training step in a CUDA graph failed "
                f"({self.failed}); training goes on eagerly",
                UserWarning,
                stacklevel=4,
            )
            torch.cuda.synchronize()
            return self._eager()
        self.graph = graph
        # capturing records the step without running it
        graph.replay()
        return self.loss.clone()

    def _sync_lr(self):
        """Keep each group's learning rate in the tensor the graph reads."""
        groups = self.trainer.optimizer.param_groups
        for group, tensor in zip(groups, self.lr):
            if group["lr"] is not tensor:  # a schedule that assigned a float
                tensor.fill_(float(group["lr"]))
                group["lr"] = tensor
