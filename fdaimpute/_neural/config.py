"""Presets, parameter lists and declared constraints of the neural imputers."""

from __future__ import annotations

from fdaimpute._core.params import RANDOM_STATE, Boolean, Instance, Interval, Options
from fdaimpute.base import BaseImputer

__all__ = [
    "PRESETS",
    "SAND_CONSTRAINTS",
    "SAND_PARAMS",
    "SIZE_PARAMS",
    "VT_CONSTRAINTS",
]

#: Settings chosen by ``preset`` for parameters left at ``None``.
PRESETS = {
    # Trains in minutes on a laptop CPU for n ~ 2,000 and transforms fast:
    # one decoder layer (its self-attention over the shared grid queries is
    # computed once per batch), work spent in the cheap encoder instead.
    "cpu": {
        "d_model": 32,
        "n_heads": 2,
        "encoder_layers": 3,
        "decoder_layers": 1,
        "dim_feedforward": 64,
        "dropout": 0.0,
        "encoding_dim": 32,
        "max_epochs": 100,
        "batch_size": 64,
        "lr": 1e-3,
        "lr_schedule": "cosine",
        "patience": None,
        "visible_weight": 0.2,
        "sand_heads": 2,
        "sand_head_dim": 64,
        "sand_encoding_dim": 120,
        # SAND's layer learns slowly and its smoothing is chosen on held-out
        # points: trained at ``lr`` it overfit and made the curves rougher
        # than VT's (docs/benchmarks.md, section sand-defaults)
        "sand_lr": 1e-5,
        "sand_smoothing": "auto",
    },
    # Measured best of four settings in four minutes on one H200 at
    # n = 10,000 (docs/benchmarks.md, neural-gpu): the paper's depth and
    # width, the CPU preset's training recipe, batches of 256 (fewer,
    # larger steps suit a GPU, more so with cuda_graph).
    "gpu": {
        "d_model": 128,
        "n_heads": 2,
        "encoder_layers": 6,
        "decoder_layers": 6,
        "dim_feedforward": 512,
        "dropout": 0.0,
        "encoding_dim": 32,
        "max_epochs": 200,
        "batch_size": 256,
        "lr": 1e-3,
        "lr_schedule": "cosine",
        "patience": None,
        "visible_weight": 0.2,
        "sand_heads": 2,
        "sand_head_dim": 64,
        "sand_encoding_dim": 120,
        # SAND's layer as measured on the H200 (at ``lr``, from the start at
        # ridge 1e-5); the CPU preset's choice is not measured on a GPU yet
        "sand_lr": None,
        "sand_smoothing": 1e-5,
    },
    # The SAND paper's released code: 6 + 6 layers, width 128, 2 heads,
    # dropout 0.15, p = 120, Adam at 3e-4, batches of 256, 5,000 epochs.
    "paper": {
        "d_model": 128,
        "n_heads": 2,
        "encoder_layers": 6,
        "decoder_layers": 6,
        "dim_feedforward": 512,
        "dropout": 0.15,
        "encoding_dim": 120,
        "max_epochs": 5000,
        "batch_size": 256,
        "lr": 3e-4,
        "lr_schedule": "constant",
        "patience": 500,
        "visible_weight": 1.0,
        "sand_heads": 2,
        "sand_head_dim": 64,
        "sand_encoding_dim": 120,
        "sand_lr": None,
        "sand_smoothing": 1e-5,
    },
}

#: Parameters resolved from the preset when left at ``None`` (VT's; SAND
#: adds :data:`SAND_PARAMS`).
SIZE_PARAMS = (
    "d_model",
    "n_heads",
    "encoder_layers",
    "decoder_layers",
    "dim_feedforward",
    "dropout",
    "encoding_dim",
    "max_epochs",
    "batch_size",
    "lr",
    "lr_schedule",
    "patience",
    "visible_weight",
)
#: (``sand_lr`` None: the transformer's ``lr``.)
SAND_PARAMS = (
    "sand_heads",
    "sand_head_dim",
    "sand_encoding_dim",
    "sand_lr",
    "sand_smoothing",
)


class _RegularizerList:
    """None of the other kinds: a Regularizer or an iterable of them.

    Only the kind is checked here (without importing torch); each element
    is checked when training starts (``penalty`` and ``weight`` required).
    """

    def accepts_kind(self, value):
        """Whether ``value`` is one penalty or a non-string iterable."""
        if callable(getattr(value, "penalty", None)):
            return True
        return not isinstance(value, (str, bytes)) and hasattr(value, "__iter__")

    is_satisfied_by = accepts_kind

    def __str__(self):
        return "a Regularizer or a list of them"


class _Device:
    """A device name such as ``"cpu"`` or ``"cuda:1"``, or a ``torch.device``.

    The name itself is checked when training starts (it needs torch).
    """

    def accepts_kind(self, value):
        """Whether ``value`` is a string or a ``torch.device``."""
        kind = type(value)
        return isinstance(value, str) or (
            kind.__module__ == "torch" and kind.__name__ == "device"
        )

    is_satisfied_by = accepts_kind

    def __str__(self):
        return "a device name such as 'cpu' or 'cuda:1', or a torch.device"


_POSITIVE_INT = [Interval("int", 1), None]

#: Accepted values of VTImputer's parameters (``None``: from the preset).
VT_CONSTRAINTS = {
    **BaseImputer._param_constraints,
    "preset": [Options(*PRESETS)],
    "covariates": [Instance((list, tuple), "a list of covariate names"), None],
    "base": [
        Options("auto", "pace", "kernel"),
        Instance(BaseImputer, "an imputer"),
        None,
    ],
    "d_model": _POSITIVE_INT,
    "n_heads": _POSITIVE_INT,
    "encoder_layers": [Interval("int", 0), None],
    "decoder_layers": _POSITIVE_INT,
    "dim_feedforward": _POSITIVE_INT,
    "dropout": [Interval("real", 0, 1, closed="left"), None],
    "norm": [Options("layer", "batch", "rms"), None],
    "encoding_dim": [Interval("int", 2), None],
    "max_epochs": _POSITIVE_INT,
    "batch_size": _POSITIVE_INT,
    "lr": [Interval("real", 0, closed="neither"), None],
    "lr_schedule": [Options("cosine", "constant"), None],
    "patience": _POSITIVE_INT,
    "max_time": [Interval("real", 0, closed="neither"), None],
    "visible_weight": [Interval("real", 0, 1, closed="both"), None],
    "validation_fraction": [Interval("real", 0, 1, closed="left"), Options("auto")],
    "calibration_folds": [Interval("int", 2), Options("auto"), None],
    "clip_grad": [Interval("real", 0, closed="neither"), None],
    "regularizers": [_RegularizerList(), None],
    "device": [_Device(), None],
    "amp": [Options("auto", "bfloat16", "float16"), Boolean()],
    "cuda_graph": [Options("auto"), Boolean()],
    "predict_batch_size": [Interval("int", 1), Options("auto")],
    "random_state": RANDOM_STATE,
    "verbose": [Boolean(), Interval("int", 0)],
    "warm_start": [Boolean()],
}

#: SANDImputer's: VT's and those of the SAND layer.
SAND_CONSTRAINTS = {
    **VT_CONSTRAINTS,
    "sand_heads": _POSITIVE_INT,
    "sand_head_dim": _POSITIVE_INT,
    "sand_encoding_dim": [Interval("int", 2), None],
    "anchors": [Options("mean", "two-sided"), None],
    "sand_lr": [Interval("real", 0, closed="neither"), None],
    "sand_init": [Options("identity", "random")],
    "sand_smoothing": [Interval("real", 0, closed="neither"), Options("auto"), None],
}
