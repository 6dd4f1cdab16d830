"""Transformer imputers: VT and SAND (Hong et al., NeurIPS 2024) as estimators.

The torch core lives in :mod:`fdaimpute.nn`; this module only handles data,
parameters and persistence, and imports torch lazily (inside methods), so
``import fdaimpute`` stays fast and works without touching torch.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from sklearn.utils import check_random_state

from fdaimpute._interpolate import interpolate_c1_rows, interpolate_rows
from fdaimpute._validation import (
    check_positive_int,
    check_positive_number,
    rounding_slack,
)
from fdaimpute.base import BaseImputer
from fdaimpute.noise import noise_variance

__all__ = ["PRESETS", "SANDImputer", "VTImputer"]

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
        "sand_heads": 2,
        "sand_head_dim": 64,
        "sand_encoding_dim": 120,
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
        "sand_heads": 2,
        "sand_head_dim": 64,
        "sand_encoding_dim": 120,
    },
}

_SIZE_PARAMS = (
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
)
_SAND_PARAMS = ("sand_heads", "sand_head_dim", "sand_encoding_dim")
_TORCH_STATE = "_module_state"
_HEAD_STATE = "_error_head_state"


def _resolve_device(device):
    import torch

    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"invalid device {device!r}: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was requested but CUDA is not available")
    return dev


def _cpu_weights(module):
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


class _NeuralImputer(BaseImputer):
    """Shared machinery of :class:`VTImputer` and :class:`SANDImputer`."""

    _kind = "vt"

    # ------------------------------------------------------------------ #
    # parameters
    def _config(self):
        """Effective settings: explicit parameters over the preset's."""
        if self.preset not in PRESETS:
            raise ValueError(
                f"preset must be one of {sorted(PRESETS)}, got {self.preset!r}"
            )
        base = PRESETS[self.preset]
        names = _SIZE_PARAMS + (_SAND_PARAMS if self._kind == "sand" else ())
        cfg = {}
        for name in names:
            value = getattr(self, name)
            cfg[name] = base[name] if value is None else value
        for name in (
            "d_model",
            "n_heads",
            "dim_feedforward",
            "max_epochs",
            "batch_size",
        ):
            check_positive_int(cfg[name], name)
        check_positive_int(cfg["encoder_layers"], "encoder_layers", minimum=0)
        check_positive_int(cfg["decoder_layers"], "decoder_layers")
        for name in ("encoding_dim",) + (
            ("sand_encoding_dim",) if self._kind == "sand" else ()
        ):
            check_positive_int(cfg[name], name, minimum=2)
            if cfg[name] % 2:
                raise ValueError(f"{name} must be even, got {cfg[name]}")
        if self._kind == "sand":
            check_positive_int(cfg["sand_heads"], "sand_heads")
            check_positive_int(cfg["sand_head_dim"], "sand_head_dim")
            if self.anchors not in (None, "mean", "two-sided"):
                raise ValueError(
                    f"anchors must be None, 'mean' or 'two-sided', got {self.anchors!r}"
                )
            if self.sand_lr is not None:
                check_positive_number(self.sand_lr, "sand_lr")
            if self.sand_init not in ("identity", "random"):
                raise ValueError(
                    f"sand_init must be 'identity' or 'random', got {self.sand_init!r}"
                )
        if cfg["d_model"] % cfg["n_heads"]:
            raise ValueError(
                f"d_model ({cfg['d_model']}) must be divisible by n_heads "
                f"({cfg['n_heads']})"
            )
        if not 0.0 <= cfg["dropout"] < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {cfg['dropout']}")
        check_positive_number(cfg["lr"], "lr")
        if cfg["lr_schedule"] not in ("cosine", "constant"):
            raise ValueError(
                "lr_schedule must be 'cosine' or 'constant', "
                f"got {cfg['lr_schedule']!r}"
            )
        if cfg["patience"] is not None:
            check_positive_int(cfg["patience"], "patience")
        frac = self.validation_fraction
        if not (isinstance(frac, numbers.Real) and 0.0 <= frac < 1.0):
            raise ValueError(f"validation_fraction must be in [0, 1), got {frac!r}")
        check_positive_int(self.predict_batch_size, "predict_batch_size")
        if self.clip_grad is not None and not self.clip_grad > 0:
            raise ValueError(
                f"clip_grad must be positive or None, got {self.clip_grad}"
            )
        if self.amp not in ("auto", True, False):
            raise ValueError(f"amp must be 'auto', True or False, got {self.amp!r}")
        return cfg

    def _module_config(self, cfg, m):
        vt = {
            "d_model": cfg["d_model"],
            "n_heads": cfg["n_heads"],
            "encoder_layers": cfg["encoder_layers"],
            "decoder_layers": cfg["decoder_layers"],
            "dim_feedforward": cfg["dim_feedforward"],
            "dropout": float(cfg["dropout"]),
            "encoding_dim": cfg["encoding_dim"],
            "encoding_scale": float(m - 1),
        }
        out = {"kind": self._kind, "vt": vt}
        if self._kind == "sand":
            out["sand"] = {
                "n_heads": cfg["sand_heads"],
                "head_dim": cfg["sand_head_dim"],
                "encoding_dim": cfg["sand_encoding_dim"],
                # up to half the grid's Nyquist frequency, down to a quarter
                # cycle over the range (see SANDLayer)
                "encoding_scale": math.pi * (m - 1) / 2,
                "encoding_base": 100.0,
                "whiten": True,
                "curve_in_scores": False,
            }
        return out

    @staticmethod
    def _build_module(config):
        from fdaimpute.nn import SANDLayer, SANDModule, VTModule

        vt = VTModule(**config["vt"])
        if config["kind"] == "sand":
            return SANDModule(vt, SANDLayer(**config["sand"]))
        return vt

    # ------------------------------------------------------------------ #
    # data
    def _model_grid(self):
        """The grid the network outputs: ``grid_``, widened to cover the data."""
        grid, (lo, hi) = self.grid_, self.time_range_
        slack = rounding_slack(self.time_range_)
        if grid[0] <= lo + slack and grid[-1] >= hi - slack:
            return grid
        a, b = min(lo, grid[0]), max(hi, grid[-1])
        return np.linspace(a, b, max(grid.size, 101))

    def _tensors(self, data, device):
        from fdaimpute.nn import RaggedTensors

        t = (data.times - self.time_offset_) / self.time_scale_
        y = (data.values - self.value_mean_) / self.value_scale_
        return RaggedTensors(t, y, data.offsets, device=device)

    def _grid_tensor(self, grid, device):
        import torch

        g = (np.asarray(grid) - self.time_offset_) / self.time_scale_
        return torch.as_tensor(g, dtype=torch.float32, device=device)

    # ------------------------------------------------------------------ #
    # fitting
    def _fit(self, data):
        import torch

        from fdaimpute.nn import hide_observations
        from fdaimpute.nn.regularizers import check_regularizers

        cfg = self._config()
        regularizers = check_regularizers(self.regularizers)
        device = _resolve_device(self.device)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        warm = self.warm_start and hasattr(self, "module_")
        if not warm:
            lo, hi = self.time_range_
            if hi <= lo:
                raise ValueError(
                    "all training observations are at one time; a neural imputer "
                    "needs observations spread over time"
                )
            self.time_offset_, self.time_scale_ = lo, hi - lo
            self.value_mean_ = float(data.values.mean())
            scale = float(data.values.std())
            self.value_scale_ = scale if scale > 0 else 1.0
            self.model_grid_ = self._model_grid()
        grid = self._grid_tensor(self.model_grid_, device)

        n = len(data)
        n_val = int(round(self.validation_fraction * n)) if n > 1 else 0
        if self.validation_fraction > 0 and n > 1:
            n_val = min(max(n_val, 1), n - 1)
        perm = rng.permutation(n)
        # the held-out subjects both choose the epoch and calibrate the error
        # model: splitting them in two made the SDs worse on fresh subjects
        # and removed no measurable optimism (bench_uncertainty --holdout)
        held_out = np.sort(perm[:n_val])
        self.split_ = {
            "train": np.sort(perm[n_val:]),
            "selection": held_out,
            "calibration": held_out,
        }
        train = data.take(self.split_["train"])
        valid = data.take(held_out)
        amp = device.type == "cuda" if self.amp == "auto" else bool(self.amp)

        devices = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            if warm:
                module = self.module_.to(device)
            else:
                self.module_config_ = self._module_config(cfg, self.model_grid_.size)
                module = self._build_module(self.module_config_).to(device)
                if getattr(self, "sand_init", "random") == "identity":
                    module.sand.init_identity(grid)
            train_t = self._tensors(train, device)
            valid_t = valid_hidden = None
            if n_val:
                valid_t = self._tensors(valid, device)
                # fixed held-out points of the validation subjects
                gen = torch.Generator(device=device).manual_seed(seed + 7)
                batch = valid_t.batch(torch.arange(len(valid_t)))
                hidden = hide_observations(batch.valid, gen)
                flat = valid_t.offsets[:-1].unsqueeze(1) + torch.arange(
                    batch.valid.shape[1], device=device
                )
                valid_hidden = torch.zeros(
                    valid_t.times.shape[0], dtype=torch.bool, device=device
                )
                valid_hidden[flat[hidden]] = True
                if not bool(valid_hidden.any()):  # every subject has one point
                    valid_t = valid_hidden = None
            offset = len(self.history_["epoch"]) if warm else 0
            trainer = self._make_trainer(
                module, grid, cfg, regularizers, amp, seed, start_epoch=offset
            )
            trainer.fit(train_t, valid_t, valid_hidden)

            calib_t = None
            if n_val and not trainer.interrupted:
                calib_t = self._tensors(valid, device)
            self._fit_uncertainty(module, grid, data, calib_t, seed)

        history = dict(self.history_) if warm else {}
        for key, values in trainer.history.items():
            history.setdefault(key, [None] * offset).extend(values)
        self.module_ = module
        self.history_ = history
        self.best_epoch_ = trainer.best_epoch
        self.n_epochs_ = len(history["epoch"])
        self.stop_reason_ = trainer.stop_reason
        self.interrupted_ = trainer.interrupted
        self.device_ = device
        self.n_parameters_ = sum(p.numel() for p in module.parameters())
        self.config_ = {**cfg, "validation_fraction": self.validation_fraction}
        self.mean_ = self._mean_curve(data)
        return self

    def _mean_curve(self, data, chunk=4096):
        """The average imputed curve of ``data``'s subjects on ``grid_``."""
        total = np.zeros(self.grid_.size)
        for start in range(0, len(data), chunk):
            part = data.take(np.arange(start, min(start + chunk, len(data))))
            total += self._transform_grid(part, self.grid_).sum(axis=0)
        return total / len(data)

    def fit(self, X, y=None):
        """Fit the imputer on training subjects.

        A fit that raises (including a ``KeyboardInterrupt`` before the
        first epoch completes) leaves the estimator unfitted, even if it was
        fitted before (with ``warm_start`` the network was already changed
        in place). A ``KeyboardInterrupt`` after one or more epochs stops
        training instead: the best epoch so far is kept, ``interrupted_``
        is True, a ``UserWarning`` names the epochs, the error model is not
        fitted (``return_std`` raises) and ``fit`` returns normally.

        Parameters
        ----------
        X : IrregularData, long DataFrame, list of (t, y) pairs or 2-D array
            Training subjects (see the class description for the formats).
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted imputer.
        """
        return super().fit(X, y)

    def _fit_uncertainty(self, module, grid, data, calib_t, seed):
        """Noise variance (all subjects) and error-variance head (held out)."""
        from fdaimpute.nn.uncertainty import fit_error_head

        try:
            self.noise_variance_ = noise_variance(data)
        except ValueError:
            # too few within-subject pairs: the std will include the noise
            self.noise_variance_ = 0.0
        self.error_head_ = None
        if calib_t is not None:
            self.error_head_ = fit_error_head(
                module,
                calib_t,
                grid,
                self.noise_variance_ / self.value_scale_**2,
                anchors=getattr(self, "anchors", None),
                seed=seed + 11,
            )

    def _make_trainer(self, module, grid, cfg, regularizers, amp, seed, start_epoch=0):
        """Build the :class:`~fdaimpute.nn.Trainer` (override to customise)."""
        from fdaimpute.nn import Trainer

        return Trainer(
            module,
            grid,
            max_epochs=cfg["max_epochs"],
            batch_size=cfg["batch_size"],
            lr=cfg["lr"],
            lr_schedule=cfg["lr_schedule"],
            patience=cfg["patience"],
            clip_grad=self.clip_grad,
            regularizers=regularizers,
            sand_lr=getattr(self, "sand_lr", None),
            anchors=getattr(self, "anchors", None),
            amp=amp,
            seed=seed,
            verbose=self.verbose,
            start_epoch=start_epoch,
        )

    # ------------------------------------------------------------------ #
    # inference
    def _model_curves(self, data, derivative=True, std=False):
        """Curves, SAND derivatives (or None) and, with ``std``, error SDs.

        All on ``model_grid_``, in data units.
        """
        import torch

        from fdaimpute.nn import predict_curves

        head = None
        if std:
            head = getattr(self, "error_head_", None)
            if head is None and getattr(self, "interrupted_", False):
                raise ValueError(
                    f"this {type(self).__name__} has no uncertainty estimate: its "
                    "training was interrupted before the error model was fitted; "
                    "fit again to use return_std"
                )
            if head is None:
                raise ValueError(
                    f"this {type(self).__name__} has no uncertainty estimate: it "
                    "is calibrated on held-out subjects, so fit with "
                    "validation_fraction > 0 (and subjects with 2 or more points)"
                )
        shape = (len(data), self.model_grid_.size)
        curves = np.empty(shape)
        deriv = np.empty(shape) if derivative and self._kind == "sand" else None
        sd = np.empty(shape) if std else None
        buffers = tuple(
            None if a is None else torch.from_numpy(a) for a in (curves, deriv, sd)
        )
        with torch.inference_mode():
            predict_curves(
                self.module_,
                self._tensors(data, self.device_),
                self._grid_tensor(self.model_grid_, self.device_),
                batch_size=self.predict_batch_size,
                anchors=getattr(self, "anchors", None),
                derivative=deriv is not None,
                error_head=head,
                out=buffers,
            )
        curves *= self.value_scale_
        curves += self.value_mean_
        if deriv is not None:
            deriv *= self.value_scale_ / self.time_scale_
        if std:
            sd *= self.value_scale_
            return curves, deriv, sd
        return curves, deriv

    def _evaluate(self, curves, deriv, times, counts):
        """The model's curve at per-subject times (see the class Notes)."""
        if deriv is None or getattr(self, "anchors", None) == "two-sided":
            return interpolate_rows(curves, self.model_grid_, times, counts)
        return interpolate_c1_rows(curves, deriv, self.model_grid_, times, counts)

    def _on_model_grid(self, grid):
        mg = self.model_grid_
        return grid.shape == mg.shape and np.allclose(grid, mg, rtol=0, atol=1e-12)

    def _transform_grid(self, data, grid, return_std=False):
        on_grid = self._on_model_grid(grid)
        res = self._model_curves(data, derivative=not on_grid, std=return_std)
        curves, deriv = res[:2]
        if on_grid:
            return (curves, res[2]) if return_std else curves
        n = len(data)
        flat, counts = np.tile(grid, n), np.full(n, grid.size)
        out = self._evaluate(curves, deriv, flat, counts).reshape(n, grid.size)
        if not return_std:
            return out
        sd = interpolate_rows(res[2], self.model_grid_, flat, counts)
        return out, sd.reshape(n, grid.size)

    def _predict_ragged(self, data, times, offsets):
        curves, deriv = self._model_curves(data)
        return self._evaluate(curves, deriv, times, np.diff(offsets))

    def _derivative_grid(self, data, grid):
        curves, deriv = self._model_curves(data)
        if deriv is None:
            deriv = np.gradient(curves, self.model_grid_, axis=1)
        if self._on_model_grid(grid):
            return deriv
        n = len(data)
        out = interpolate_rows(
            deriv, self.model_grid_, np.tile(grid, n), np.full(n, grid.size)
        )
        return out.reshape(n, grid.size)

    # ------------------------------------------------------------------ #
    # persistence
    def __getstate__(self):
        state = self.__dict__.copy()
        module = state.pop("module_", None)
        if module is not None:
            state[_TORCH_STATE] = _cpu_weights(module)
        head = state.pop("error_head_", None)
        if head is not None:
            state[_HEAD_STATE] = (head.n_features, head.width, _cpu_weights(head))
        state.pop("device_", None)
        return state

    def __setstate__(self, state):
        weights = state.pop(_TORCH_STATE, None)
        head = state.pop(_HEAD_STATE, None)
        self.__dict__.update(state)
        if weights is None:
            return
        try:
            device = _resolve_device(self.device)
        except ValueError:
            warnings.warn(
                f"device {self.device!r} is not available here; using the CPU",
                UserWarning,
                stacklevel=2,
            )
            device = _resolve_device("cpu")
        module = self._build_module(self.module_config_)
        module.load_state_dict(weights)
        self.module_ = module.to(device).eval()
        self.device_ = device
        self.error_head_ = None
        if head is not None:
            from fdaimpute.nn.uncertainty import ErrorVarianceHead

            n_features, width, head_weights = head
            error_head = ErrorVarianceHead(n_features, width)
            error_head.load_state_dict(head_weights)
            self.error_head_ = error_head.to(device).eval()


_COMMON_PARAMS_DOC = """
    preset : {"cpu", "paper"}, default="cpu"
        Source of every size and training setting left at ``None``:
        ``"cpu"`` trains in minutes on a laptop CPU (3 encoder layers, one
        decoder layer, width 32, 2 heads, 100 epochs, batches of 64, lr
        1e-3 with cosine decay, no early stopping); ``"paper"`` is the SAND
        paper's released configuration (6 + 6 layers, width 128, 2 heads,
        dropout 0.15, encoding 120, 5,000 epochs, batches of 256, lr 3e-4),
        meant for a GPU.
    d_model : int, default=None
        Width of the transformer's tokens.
    n_heads : int, default=None
        Attention heads (must divide ``d_model``).
    encoder_layers : int, default=None
        Encoder depth (self-attention among the observations).
    decoder_layers : int, default=None
        Decoder depth (self-attention among grid queries, cross-attention
        to the observations).
    dim_feedforward : int, default=None
        Hidden width of the feed-forward blocks.
    dropout : float, default=None
        Dropout in the transformer.
    encoding_dim : int, default=None
        Features of the sinusoidal time encoding (even).
    max_epochs : int, default=None
        Passes over the training subjects.
    batch_size : int, default=None
        Subjects per optimizer step.
    lr : float, default=None
        Adam's (peak) learning rate.
    lr_schedule : {"cosine", "constant"}, default=None
        ``"cosine"``: linear warm-up over 2% of the steps (at least 100, or
        half of a shorter run), then cosine decay to 2% of ``lr`` at
        ``max_epochs``.
    patience : int, default=None
        Stop after this many epochs without a better validation error (the
        CPU preset runs all epochs, as the cosine schedule improves most at
        the end; the best epoch is kept either way).
    validation_fraction : float, default=0.1
        Share of the training subjects held out (``split_``) to choose the
        epoch whose weights are kept (about a third of their points, 1 to
        half of each subject's, are hidden and predicted from the rest) and
        then to fit the error model behind ``return_std``. ``0`` keeps the
        epoch with the lowest training loss and gives no ``return_std``.
    clip_grad : float or None, default=1.0
        Clip the gradient's global norm (SAND's layer and the transformer
        separately).
    regularizers : list of Regularizer, default=None
        Penalties added to the loss, e.g. ``[Roughness(1.0)]``; see
        :mod:`fdaimpute.nn.regularizers`. Their unweighted values per epoch
        are recorded in ``history_["reg/<name>"]``.
    device : str, default="auto"
        ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``,
        ``"cuda:1"``...
    amp : {"auto", True, False}, default="auto"
        Mixed-precision training (float16 autocast with gradient scaling);
        only ever used on CUDA, where ``"auto"`` turns it on. Inference is
        always float32.
    predict_batch_size : int, default=256
        Subjects per forward pass in ``transform``; memory does not grow
        with the number of subjects beyond the output.
    random_state : int, RandomState or None, default=None
        Seeds initialisation, shuffling, hiding and the validation split;
        the same seed gives identical curves on the same device and thread
        count.
    verbose : bool, default=False
        Show a progress bar over epochs with the losses.
    warm_start : bool, default=False
        Continue training the fitted network (same scaler, time map and
        grid) instead of starting afresh; the optimizer restarts.
    grid : int or array-like, default=None
        Output grid: 101 points over the training times by default.
    extrapolate : {False, True, "clip"}, default=False
        Times outside the training range: ``False`` refuses them (a grid may
        overhang the range by half its end spacing), ``True`` lets the method
        extrapolate, ``"clip"`` holds each curve constant beyond the range.
    keep_observed : bool, default=False
        Output observed values as they are where a grid time equals an
        observation time (otherwise observed cells are smoothed too)."""

_COMMON_ATTRS_DOC = """
    module_ : torch.nn.Module
        The trained network (in eval mode).
    module_config_ : dict
        Its constructor arguments.
    history_ : dict of list
        Per epoch: ``epoch``, ``train_loss``, ``valid_loss`` (MSE of
        standardised values), ``lr``, ``seconds``, ``reg/<name>``.
    best_epoch_ : int
        The epoch whose weights were kept.
    n_epochs_ : int
        Epochs run.
    stop_reason_ : str
        ``"max_epochs"``, ``"early stopping"``, ``"non-finite loss"`` (the
        best finite epoch is kept, with a warning) or ``"interrupted"``.
    interrupted_ : bool
        Whether training stopped on a ``KeyboardInterrupt`` (see
        :meth:`fit`); the best epoch so far is kept and ``error_head_`` is
        None.
    config_ : dict
        The settings used: every size and training parameter (``d_model``,
        ``n_heads``, ``encoder_layers``, ``decoder_layers``,
        ``dim_feedforward``, ``dropout``, ``encoding_dim``, ``max_epochs``,
        ``batch_size``, ``lr``, ``lr_schedule``, ``patience``, SAND's
        ``sand_*``) resolved from ``preset`` and the explicit parameters,
        and ``validation_fraction``.
    split_ : dict of ndarray
        Positions among the training subjects of the ``"train"`` subjects
        and of the held-out ones that chose the epoch (``"selection"``) and
        fitted ``error_head_`` (``"calibration"``; the same subjects, see
        the Notes).
    mean_ : ndarray of shape (n_grid,)
        The mean curve on ``grid_``: the average of the imputed curves of
        the subjects passed to ``fit``.
    grid_ : ndarray
        Output grid.
    model_grid_ : ndarray
        The grid the network outputs (``grid_`` unless that does not cover
        the training times).
    time_range_ : tuple of float
        Training time range, mapped to [0, 1] inside the network.
    value_mean_, value_scale_ : float
        Standardisation of the values.
    noise_variance_ : float
        Estimated variance of the measurement noise (data units; see
        :func:`fdaimpute.noise.noise_variance`).
    error_head_ : ErrorVarianceHead or None
        The error model behind ``transform(X, return_std=True)``, fitted on
        the held-out subjects (None without them); see
        :mod:`fdaimpute.nn.uncertainty`.
    device_ : torch.device
        Where the network lives.
    n_parameters_ : int
        Trainable parameters."""


class VTImputer(_NeuralImputer):
    __doc__ = f"""Vanilla transformer imputer (the SAND paper's VT).

    Each subject's observations ``[y, t, enc(t)]`` are the encoder's tokens;
    each output grid point ``[s, enc(s)]`` is a decoder query that attends
    to the other queries and to the observations; a linear head gives the
    curve on the grid. Training is self-supervised: in each batch every
    subject hides 1 to half of its points from the encoder (a random subset
    or a contiguous run) and the loss is the mean squared error at all its
    points. Values are standardised and times mapped to [0, 1] inside.

    Parameters
    ----------{_COMMON_PARAMS_DOC}

    Attributes
    ----------{_COMMON_ATTRS_DOC}

    See Also
    --------
    SANDImputer : VT followed by self-attention on derivatives (smoother).

    Notes
    -----
    Off-grid times (``predict_at``, other grids): the curve is the network's
    output on ``model_grid_`` interpolated linearly (the decoder is not
    re-run at new queries, since its queries attend to each other).
    ``derivative`` is by finite differences of that curve
    (:func:`numpy.gradient`: second-order central inside, one-sided at the
    ends).

    ``transform(X, return_std=True)`` gives the pointwise SD of the
    imputation error from an error model fitted after training on the
    held-out subjects (:mod:`fdaimpute.nn.uncertainty`; needs
    ``validation_fraction > 0``); off the network's grid it is interpolated
    linearly. These subjects also chose the epoch, which could make their
    errors optimistic; measured on fresh subjects the band covers as often
    as on them, while calibrating on a disjoint half instead lowered the
    coverage on fresh subjects (fewer subjects to fit the error model;
    ``benchmarks/bench_uncertainty.py --holdout``, ``docs/neural.md``).

    References
    ----------
    Hong, Yao, Mueller & Wang. SAND: Smooth imputation of sparse and noisy
    functional data with transformer networks. NeurIPS 2024.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> from fdaimpute.neural import VTImputer
    >>> sim = fi.simulate.sand_paper(n=100, n_obs="8-12", random_state=0)
    >>> vt = VTImputer(d_model=16, encoder_layers=1, dim_feedforward=32,
    ...                max_epochs=2, random_state=0)
    >>> curves = vt.fit(sim.train.data).transform(sim.test.data)
    >>> curves.shape
    (5, 101)
    """

    _kind = "vt"

    def __init__(
        self,
        *,
        preset="cpu",
        d_model=None,
        n_heads=None,
        encoder_layers=None,
        decoder_layers=None,
        dim_feedforward=None,
        dropout=None,
        encoding_dim=None,
        max_epochs=None,
        batch_size=None,
        lr=None,
        lr_schedule=None,
        patience=None,
        validation_fraction=0.1,
        clip_grad=1.0,
        regularizers=None,
        device="auto",
        amp="auto",
        predict_batch_size=256,
        random_state=None,
        verbose=False,
        warm_start=False,
        grid=None,
        extrapolate=False,
        keep_observed=False,
    ):
        self.preset = preset
        self.d_model = d_model
        self.n_heads = n_heads
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        self.dim_feedforward = dim_feedforward
        self.dropout = dropout
        self.encoding_dim = encoding_dim
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.clip_grad = clip_grad
        self.regularizers = regularizers
        self.device = device
        self.amp = amp
        self.predict_batch_size = predict_batch_size
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.grid = grid
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed


class SANDImputer(_NeuralImputer):
    __doc__ = f"""SAND: a transformer imputer with self-attention on derivatives.

    A :class:`VTImputer` network produces a rough curve ``T~`` on the grid;
    the SAND layer maps ``[T~ - T~_1, enc(s)]`` through softmax-free
    attention to a derivative ``D~`` and integrates it (cumulative
    trapezoidal rule) from ``T~_1``. The output is continuously
    differentiable with derivative ``D~``. Training minimises the mean
    squared error of ``T~`` and of SAND's curve at all observed points,
    with ``T~`` detached as SAND's input (so the transformer learns from
    its own term only); the kept epoch is the one where SAND best predicts
    held-out points of validation subjects.

    Parameters
    ----------{_COMMON_PARAMS_DOC}
    sand_heads : int, default=None
        SAND's attention heads (2 in both presets).
    sand_head_dim : int, default=None
        SAND's ``h_d`` (64 in both presets, as in the paper).
    sand_encoding_dim : int, default=None
        Features of the grid encoding SAND sees (120 in both presets, as in
        the paper); SAND's smoother has rank at most this plus one.
    anchors : {{None, "mean", "two-sided"}}, default=None
        Integration constant. ``None``: the paper's ``T~_1 + Intg(D~)``.
        ``"mean"``: the constant that best matches ``T~`` at the subject's
        observed times (the average of the curves anchored at each of
        them); the curve stays C1. ``"two-sided"``: integrate from the
        nearest observed grid point on each side and blend by distance (the
        released code's anchors; the curve passes through ``T~`` at observed
        points and its derivative jumps there).
    sand_lr : float, default=None
        Peak learning rate of the SAND layer's parameters (default:
        ``lr``); the transformer keeps ``lr``.
    sand_init : {{"identity", "random"}}, default="identity"
        SAND's starting weights. ``"identity"``: solved in closed form so
        that SAND starts by passing ``T~`` through its smooth span (see
        :meth:`~fdaimpute.nn.SANDLayer.init_identity`) and training only
        has to learn the correction; ``"random"``: PyTorch's default
        initialisation (the paper's).

    Attributes
    ----------{_COMMON_ATTRS_DOC}

    See Also
    --------
    VTImputer : The transformer alone.

    Notes
    -----
    SAND's layer departs from the paper's literal one in three ways that
    make it learn much faster and remove an accuracy floor (measured in
    ``docs/neural.md``): its grid encoding reaches half the grid's Nyquist
    frequency, is whitened (an orthonormal basis of the same span), and
    alone forms the queries and keys (the curve enters through the values
    only), so ``D~`` is a learned affine smoothing-differentiation operator
    applied to ``T~`` (see
    :class:`~fdaimpute.nn.SANDLayer`).

    Off-grid times (``predict_at``, other grids): SAND's curve between two
    grid points is the integral of the linear interpolation of ``D~``, a
    C1 piecewise quadratic that matches the trapezoidal integral at the
    grid points; the same rule gives the loss at off-grid observation times
    during training. With ``anchors="two-sided"`` it is interpolated
    linearly instead. ``derivative`` returns ``D~`` (in data units,
    interpolated linearly between grid points).

    ``transform(X, return_std=True)`` gives the pointwise SD of the
    imputation error from an error model fitted after training on the
    held-out subjects (:mod:`fdaimpute.nn.uncertainty`; needs
    ``validation_fraction > 0``); off the network's grid it is interpolated
    linearly. These subjects also chose the epoch, which could make their
    errors optimistic; measured on fresh subjects the band covers as often
    as on them, while calibrating on a disjoint half instead lowered the
    coverage on fresh subjects (fewer subjects to fit the error model;
    ``benchmarks/bench_uncertainty.py --holdout``, ``docs/neural.md``).

    References
    ----------
    Hong, Yao, Mueller & Wang. SAND: Smooth imputation of sparse and noisy
    functional data with transformer networks. NeurIPS 2024.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> from fdaimpute.neural import SANDImputer
    >>> sim = fi.simulate.sand_paper(n=100, n_obs="8-12", random_state=0)
    >>> sand = SANDImputer(d_model=16, encoder_layers=1, dim_feedforward=32,
    ...                    sand_head_dim=8, max_epochs=2, random_state=0)
    >>> sand.fit(sim.train.data).derivative(sim.test.data).shape
    (5, 101)
    """

    _kind = "sand"

    def __init__(
        self,
        *,
        preset="cpu",
        d_model=None,
        n_heads=None,
        encoder_layers=None,
        decoder_layers=None,
        dim_feedforward=None,
        dropout=None,
        encoding_dim=None,
        sand_heads=None,
        sand_head_dim=None,
        sand_encoding_dim=None,
        anchors=None,
        sand_lr=None,
        sand_init="identity",
        max_epochs=None,
        batch_size=None,
        lr=None,
        lr_schedule=None,
        patience=None,
        validation_fraction=0.1,
        clip_grad=1.0,
        regularizers=None,
        device="auto",
        amp="auto",
        predict_batch_size=256,
        random_state=None,
        verbose=False,
        warm_start=False,
        grid=None,
        extrapolate=False,
        keep_observed=False,
    ):
        self.preset = preset
        self.d_model = d_model
        self.n_heads = n_heads
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        self.dim_feedforward = dim_feedforward
        self.dropout = dropout
        self.encoding_dim = encoding_dim
        self.sand_heads = sand_heads
        self.sand_head_dim = sand_head_dim
        self.sand_encoding_dim = sand_encoding_dim
        self.anchors = anchors
        self.sand_lr = sand_lr
        self.sand_init = sand_init
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.clip_grad = clip_grad
        self.regularizers = regularizers
        self.device = device
        self.amp = amp
        self.predict_batch_size = predict_batch_size
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.grid = grid
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed
