"""The base class of the neural imputers: data, training steps, inference.

:class:`_NeuralImputer` knows nothing of its subclasses: what differs
between the VT and SAND estimators (extra parameters, the network, its
initialisation, trainer options, anchoring) comes from small hooks that
:class:`~fdaimpute.neural.VTImputer` and
:class:`~fdaimpute.neural.SANDImputer` override. Torch is imported inside
methods only, so ``import fdaimpute`` does not load it.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
from sklearn.base import clone
from sklearn.utils import check_random_state

from fdaimpute._core.noise_at import NoiseAtMixin
from fdaimpute._core.validation import check_spread_over_time, rounding_slack
from fdaimpute._neural.config import PRESETS, SIZE_PARAMS
from fdaimpute._neural.crossfit import cross_fit, n_folds
from fdaimpute._neural.features import EncoderFeaturesMixin
from fdaimpute._neural.persistence import TorchStatePickling, resolve_device
from fdaimpute._neural.phases import FitPhases
from fdaimpute._numerics.interpolate import interpolate_c1_rows, interpolate_rows
from fdaimpute.base import BaseImputer
from fdaimpute.noise import noise_variance

#: ``validation_fraction="auto"`` holds out this many subjects, within 10-30%.
AUTO_VALIDATION_SUBJECTS = 50
#: Draws of hidden points on which the comparison subjects judge the best
#: epoch against the base: each subject's error rests on more of its points
#: than one draw hides (see ``_train``).
COMPARISON_DRAWS = 8
#: A kept network whose held-out error on the standardised values exceeds
#: this (the training mean scores about 1) learnt nothing: fit warns (with
#: validation subjects; without, the score is the training loss).
UNLEARNT_ERROR = 2.0


@dataclass(frozen=True)
class FitSettings:
    """What one neural fit trains with, resolved once at the start of ``fit``.

    Attributes
    ----------
    config : dict
        The resolved settings (:meth:`_NeuralImputer._config`).
    regularizers : tuple
        The checked regularizers.
    amp : bool or str
        Mixed precision (``"auto"`` is settled by the trainer).
    seed : int
        Drawn from ``random_state``; each step of the fit offsets it.
    device : torch.device
        Where the networks train.
    grid : Tensor of shape (M,)
        The model grid in standardised time.
    """

    config: dict
    regularizers: tuple
    amp: bool | str
    seed: int
    device: object
    grid: object


class _NeuralImputer(
    TorchStatePickling, EncoderFeaturesMixin, NoiseAtMixin, BaseImputer
):
    """Shared machinery of :class:`VTImputer` and :class:`SANDImputer`."""

    #: Parameters filled from the preset when left at ``None``.
    _preset_params = SIZE_PARAMS
    #: Whether the network outputs a derivative (SAND's ``D~``).
    _has_derivative = False
    #: What models saved before the ``norm`` parameter existed used.
    norm = "layer"
    #: What models saved before ``calibration_folds`` existed used.
    calibration_folds = None
    #: What models saved before ``visible_weight`` existed were trained with.
    visible_weight = 1.0
    #: What models saved before ``covariates`` existed read (none).
    covariates = None
    #: No time budget (CNP's default; VT and SAND take it as a parameter).
    max_time = None
    #: Eager training steps (CNP's; VT and SAND take it as a parameter).
    cuda_graph = False

    #: How the network's weight in the mix with the base is set (the
    #: Trainer's ``base_weight``).
    _base_weight = "detached"

    # ------------------------------------------------------------------ #
    # hooks
    def _check_config(self, cfg):
        """Checks across parameters of the resolved settings ``cfg``."""
        if cfg["d_model"] % cfg["n_heads"]:
            raise ValueError(
                f"d_model ({cfg['d_model']}) must be divisible by n_heads "
                f"({cfg['n_heads']})"
            )
        check_even(cfg, "encoding_dim")

    def _module_config(self, cfg, m):
        """Constructor arguments of the network for an ``m``-point grid."""
        vt = {
            "d_model": cfg["d_model"],
            "n_heads": cfg["n_heads"],
            "encoder_layers": cfg["encoder_layers"],
            "decoder_layers": cfg["decoder_layers"],
            "dim_feedforward": cfg["dim_feedforward"],
            "dropout": float(cfg["dropout"]),
            "encoding_dim": cfg["encoding_dim"],
            "encoding_scale": float(m - 1),
            "norm": self.norm,
            "base_gate": self.base_ is not None,
        }
        if self._n_variables() > 1:
            vt["n_variables"] = self._n_variables()
        if self._n_covariates():
            vt["n_covariates"] = self._n_covariates()
        return {"kind": "vt", "vt": vt}

    @staticmethod
    def _build_module(config):
        """The network of a :meth:`_module_config` (untrained)."""
        from fdaimpute.nn import VTModule

        return VTModule(**config["vt"])

    def _after_build(self, module, grid):
        """Initialise a freshly built ``module`` for the training ``grid``."""

    def _anchor_rule(self):
        """The integration constant of SAND's curve (None: no anchoring)."""
        return None

    def _trainer_options(self):
        """Extra keyword arguments of the :class:`~fdaimpute.nn.Trainer`."""
        return {}

    def _finish_fold(self, module, grid):
        """Adjust a cross-fitted network after its training (see ``cross_fit``)."""

    @staticmethod
    def _trainer_class():
        """The training loop: :class:`~fdaimpute.nn.Trainer` or a subclass."""
        from fdaimpute.nn import Trainer

        return Trainer

    # ------------------------------------------------------------------ #
    # parameters
    def _config(self):
        """Effective settings: explicit parameters over the preset's."""
        if self.preset not in PRESETS:
            raise ValueError(
                f"preset must be one of {sorted(PRESETS)}, got {self.preset!r}"
            )
        base = PRESETS[self.preset]
        cfg = {}
        for name in self._preset_params:
            value = getattr(self, name)
            cfg[name] = base[name] if value is None else value
        self._check_config(cfg)
        return cfg

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

    def _n_variables(self):
        """Variables the network imputes together (1 here)."""
        return 1

    def _n_covariates(self):
        """Covariate columns the network reads (none here)."""
        return 0

    def _covariate_matrix(self, data):
        """The subjects' covariates as the network reads them (None here)."""
        return None

    def _standardised(self, data):
        """The values standardised, and each one's variable (None here)."""
        return (data.values - self.value_mean_) / self.value_scale_, None

    def _tensors(self, data, device):
        from fdaimpute.nn import RaggedTensors

        t = (data.times - self.time_offset_) / self.time_scale_
        y, variable = self._standardised(data)
        return RaggedTensors(
            t,
            y,
            data.offsets,
            device=device,
            variable=variable,
            covariates=self._covariate_matrix(data),
        )

    def _grid_tensor(self, grid, device):
        import torch

        g = (np.asarray(grid) - self.time_offset_) / self.time_scale_
        return torch.as_tensor(g, dtype=torch.float32, device=device)

    # ------------------------------------------------------------------ #
    # fitting, step by step
    def _fit(self, data):
        from fdaimpute.nn.regularizers import check_regularizers

        cfg = self._config()
        regularizers = check_regularizers(self.regularizers)
        device = resolve_device(self.device)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        warm = self.warm_start and hasattr(self, "module_")
        if not warm:
            self._fit_scaling(data)
        settings = FitSettings(
            config=cfg,
            regularizers=tuple(regularizers),
            # "auto" is settled by the trainer (bfloat16 only with a CUDA graph)
            amp=self.amp,
            seed=seed,
            device=device,
            grid=self._grid_tensor(self.model_grid_, device),
        )
        train, valid = self._split(data, rng)
        folds = n_folds(self.calibration_folds, len(data), warm) if len(valid) else 0
        with_base = not warm and self.base is not None
        phases = FitPhases(type(self).__name__, with_base + 2 + folds, self.verbose)
        try:
            self._fit_phases(data, train, valid, settings, folds, warm, phases)
        finally:
            phases.close()
        self.device_ = device
        self.config_ = {**cfg, "validation_fraction": self._validation_share(len(data))}
        if self._n_variables() > 1:
            self.mean_ = self._variable_mean(data)
        else:
            self.mean_ = self._mean_curve(data)
        return self

    def _fit_phases(self, data, train, valid, settings, folds, warm, phases):
        """Base, training, cross-fitting and calibration, each a phase of the bar."""
        import torch

        cfg, seed, device = settings.config, settings.seed, settings.device
        if not warm:
            self.base_ = None
            if self.base is not None:
                label = f"base ({self._base_name()}) on {len(train)} subjects"
                with phases.phase(label):
                    self.base_ = self._fit_base(
                        train, seed, fallback=self.base == "auto"
                    )
            if self.base_ is None:
                # no base to judge the network against: every held-out
                # subject chooses the epoch
                self.split_["selection"] = self.split_["calibration"]
                self.split_["comparison"] = self.split_["calibration"][:0]
        devices = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            if warm:
                module = self.module_.to(device)
            else:
                self.module_config_ = self._module_config(cfg, self.model_grid_.size)
                module = self._new_module(settings.grid, device)
            self._attach_base(module)
            offset = len(self.history_["epoch"]) if warm else 0
            trainer = self._make_trainer(module, settings, start_epoch=offset)
            with phases.phase(f"training on {len(train)} subjects"):
                self._train(trainer, train, data, settings)
            self._record(trainer, module, offset, warm)
            modules, calib = [module], None
            if len(valid) and not trainer.interrupted:
                calib = [self._tensors(valid, device)]
                if folds:
                    # the folds' networks follow the schedule the budget set
                    planned = {**cfg, "max_epochs": trainer.planned_epochs}
                    fold_settings = replace(settings, config=planned)

                    def fit_fold(subjects, fold):
                        label = f"cross-fitting, network {fold + 1} of {folds}"
                        with phases.phase(label):
                            return self._fold_network(subjects, fold, fold_settings)

                    modules, calib = cross_fit(
                        data,
                        folds,
                        seed,
                        fit_fold,
                        partial(self._tensors, device=device),
                    )
            with phases.phase("calibrating the bands"):
                self._fit_uncertainty(modules, data, calib, settings)
        if self.base_ is not None and not warm:
            # the network's own curves do not depend on the base: whether it
            # is kept alone or mixed with the network, the base is refitted on
            # every subject (after the error model was calibrated honestly)
            phases.add()
            kept = "base kept, " if self._base_kept(offset) else "base "
            with phases.phase(f"{kept}refitted on all {len(data)} subjects"):
                self.base_ = self._fit_base(data, seed)
            self._attach_base(module)
        self._adopt_base_noise()

    def _kept_base(self):
        """Which variables' curves are the base's (its weight 0 there): a bool
        array of shape (p,), all False without a base."""
        weight = getattr(self, "base_weight_", None)
        if getattr(self, "base_", None) is None or weight is None:
            return np.zeros(self._n_variables(), dtype=bool)
        return np.atleast_1d(np.asarray(weight) == 0)

    def _adopt_base_noise(self):
        """Where the curves are the base's, so are the noise variance and
        the bands: the base's own estimate replaces the network's."""
        kept = self._kept_base()
        if not kept.any():
            return
        base_noise = getattr(self.base_, "noise_variance_", None)
        if base_noise is None:
            return
        if np.ndim(self.noise_variance_) == 0:
            self.noise_variance_ = float(base_noise)
        else:
            self.noise_variance_ = np.where(kept, base_noise, self.noise_variance_)

    def _base_std(self, data, grid):
        """The base's SDs on ``grid`` (None where the base gives none)."""
        try:
            _, sd = self.base_.transform(data, return_std=True, grid=grid)
        except NotImplementedError:
            return None
        return np.asarray(sd, dtype=np.float64)

    def _noise_at(self, times):
        # the base's profile where the imputer kept it, else noise_variance_
        if self._n_variables() > 1:
            raise TypeError(
                f"this {type(self).__name__} was fitted on several variables: "
                "noise_variance_ holds each variable's noise variance"
            )
        if self._kept_base().all() and hasattr(self.base_, "noise_variance_at"):
            return np.asarray(self.base_.noise_variance_at(times), dtype=np.float64)
        return np.full(times.shape, float(self.noise_variance_))

    def _base_kept(self, offset):
        """Whether the base is kept alone: no epoch from ``offset`` on beat it."""
        return self.best_epoch_ < offset

    def _base_name(self):
        """What ``base`` fits: PACE, the kernel smoother or the given imputer."""
        if isinstance(self.base, str):
            return "PACE" if self.base in ("auto", "pace") else "kernel smoother"
        return type(self.base).__name__

    def _fit_scaling(self, data):
        """The time map to [0, 1], the value standardisation and the grid."""
        check_spread_over_time(
            self.time_range_, "a neural imputer needs observations spread over time"
        )
        lo, hi = self.time_range_
        self.time_offset_, self.time_scale_ = lo, hi - lo
        self._fit_value_scaling(data)
        self.model_grid_ = self._model_grid()

    def _fit_value_scaling(self, data):
        """``value_mean_`` and ``value_scale_``: the values' mean and SD."""
        self.value_mean_ = float(data.values.mean())
        scale = float(data.values.std())
        self.value_scale_ = scale if scale > 0 else 1.0

    def _validation_share(self, n):
        """The share of ``n`` subjects held out (``validation_fraction``)."""
        if self.validation_fraction != "auto":
            return self.validation_fraction
        return max(0.1, min(0.3, AUTO_VALIDATION_SUBJECTS / max(n, 1)))

    def _split(self, data, rng):
        """Hold out ``validation_fraction`` of the subjects; sets ``split_``."""
        n = len(data)
        share = self._validation_share(n)
        n_val = int(round(share * n)) if n > 1 else 0
        if share > 0 and n > 1:
            n_val = min(max(n_val, 1), n - 1)
        perm = rng.permutation(n)
        # the held-out subjects both choose the epoch and calibrate the error
        # model: splitting them in two made the SDs worse on fresh subjects
        # and removed no measurable optimism (bench_uncertainty --holdout)
        held_out = np.sort(perm[:n_val])
        selection, comparison = held_out, held_out[:0]
        if self.base is not None and n_val >= 2:
            # with a base, half of them choose the epoch and the other half
            # judge it against the base: the best of many epochs looks better
            # on the subjects that chose it than it is
            selection = np.sort(perm[: n_val - n_val // 2])
            comparison = np.sort(perm[n_val - n_val // 2 : n_val])
        self.split_ = {
            "train": np.sort(perm[n_val:]),
            "selection": selection,
            "comparison": comparison,
            "calibration": held_out,
        }
        return data.take(self.split_["train"]), data.take(held_out)

    def _fit_base(self, train, seed, fallback=False):
        """The statistical base fitted on the training subjects (or None).

        With ``fallback``, a base that cannot be fitted on ``train`` gives
        None (the network alone) and a warning instead of an error.
        """
        if self.base is None:
            return None
        base = self._base_imputer(seed)
        # validation subjects and the widened model grid may reach beyond
        # the training subjects' range
        base.set_params(extrapolate="clip")
        try:
            return base.fit(train)
        except ValueError as err:
            if fallback:
                warnings.warn(
                    f"base='auto': {type(base).__name__} could not be fitted on "
                    f"the {len(train)} training subjects ({err}); the network is "
                    "trained alone (base_ is None)",
                    UserWarning,
                    stacklevel=4,
                )
                return None
            raise ValueError(
                f"the statistical base {type(base).__name__} could not be fitted "
                f"on the {len(train)} training subjects ({err}); pass base=None "
                "to train the network alone"
            ) from err

    def _base_imputer(self, seed):
        """The unfitted base ``base`` names."""
        if not isinstance(self.base, str):
            return clone(self.base)
        if self.base in ("auto", "pace"):
            from fdaimpute.pace import PACEImputer

            return PACEImputer(random_state=self._base_seed(seed))
        from fdaimpute.kernel import KernelImputer

        return KernelImputer()

    def _base_seed(self, seed):
        """The base's ``random_state``: the imputer's own when an int (so a
        base kept as it is equals that imputer fitted on the same subjects),
        else ``seed``."""
        state = self.random_state
        return state if isinstance(state, numbers.Integral) else seed

    def _attach_base(self, module, base=None):
        """Give ``module`` the curves of ``base`` (default: the fitted ``base_``)."""
        from fdaimpute.nn.base_curves import EstimatorBase

        if base is None:
            base = getattr(self, "base_", None)
        if base is not None:
            module.base_curves = EstimatorBase(
                base,
                self.time_offset_,
                self.time_scale_,
                self.value_mean_,
                self.value_scale_,
                derivative=self._has_derivative,
                **self._base_inputs(),
            )

    def _base_inputs(self):
        """More arguments of the base's EstimatorBase (none here)."""
        return {}

    def _new_module(self, grid, device):
        """A fresh network of ``module_config_``, initialised for ``grid``."""
        module = self._build_module(self.module_config_).to(device)
        self._after_build(module, grid)
        return module

    def _train(self, trainer, train, data, settings):
        """Run ``trainer`` on the training subjects and the held-out ones.

        ``split_["selection"]`` chooses the epoch; with a base,
        ``split_["comparison"]`` judges it against the base, on
        ``COMPARISON_DRAWS`` draws of hidden points pooled per subject (a
        draw hides up to half of a subject's points, often in one run, so
        one draw makes each subject's error, and the test, noisy).
        """
        from fdaimpute.nn.validation import hide_validation_observations

        def held_out(key, offset, draws=1):
            if not len(self.split_[key]):
                return None, None
            tensors = self._tensors(data.take(self.split_[key]), settings.device)
            hidden = [
                hide_validation_observations(tensors, settings.seed + offset + 7919 * d)
                for d in range(draws)
            ]
            if hidden[0] is None:  # every subject has one point
                return None, None
            return tensors, hidden[0] if draws == 1 else hidden

        valid_t, hidden = held_out("selection", 7)
        check_t, check_hidden = held_out("comparison", 13, COMPARISON_DRAWS)
        trainer.fit(
            self._tensors(train, settings.device),
            valid_t,
            hidden,
            check_t,
            check_hidden,
        )

    def _fold_network(self, train, fold, settings):
        """The network of cross-fitting's ``fold``, trained on ``train`` alone.

        Built and trained as the imputer's network was (its base refitted on
        ``train``), on the same schedule, and stopped at the epoch the
        imputer kept (by then the training loss is lowest, or near); not
        trained when the imputer kept its starting state.
        """
        import torch

        torch.manual_seed(settings.seed + 101 * (fold + 1))
        module = self._new_module(settings.grid, settings.device)
        if self.base_ is not None:
            self._attach_base(module, self._fit_base(train, settings.seed))
        if self.best_epoch_ >= 0:
            trainer = self._make_trainer(
                module,
                replace(settings, seed=settings.seed + fold + 1),
                stop_epoch=self.best_epoch_,
            )
            trainer.fit(self._tensors(train, settings.device))
            self._finish_fold(module, settings.grid)
            if self._base_weight == "held-out" and self.base_ is not None:
                # the imputer's weight, chosen on its held-out subjects
                gates = dict(self.module_.named_parameters())
                for name, param in module.named_parameters():
                    if name.endswith("base_gate"):
                        param.data.copy_(gates[name].data)
        return module

    def _record(self, trainer, module, offset, warm):
        """Keep the trained network and the (continued) history."""
        history = dict(self.history_) if warm else {}
        for key, values in trainer.history.items():
            history.setdefault(key, [None] * offset).extend(values)
        self.module_ = module
        self.history_ = history
        self.best_epoch_ = trainer.best_epoch
        held_out = any(v is not None for v in trainer.history.get("valid_loss", ()))
        if held_out and trainer.best_epoch >= 0 and trainer.best_loss > UNLEARNT_ERROR:
            warnings.warn(
                f"{type(self).__name__}: the best epoch's held-out error is "
                f"{trainer.best_loss:.3g} on the standardised values, where the "
                "training mean scores about 1: the network learnt nothing and its "
                "curves are not to be trusted; lower lr or check the data",
                UserWarning,
                stacklevel=2,
            )
        self.start_gain_ = trainer.start_gain
        gate = getattr(module, "base_gate", None)
        if gate is not None:
            gate = gate.detach().cpu().numpy().astype(np.float64)
            gate = float(gate) if gate.ndim == 0 else gate
        self.base_weight_ = gate
        self.n_epochs_ = len(history["epoch"])
        self.stop_reason_ = trainer.stop_reason
        graphed = trainer.graphed
        self.cuda_graph_ = graphed is not None and graphed.graph is not None
        self.interrupted_ = trainer.interrupted
        self.n_parameters_ = sum(p.numel() for p in module.parameters())

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

    def _fit_noise_variance(self, data):
        """``noise_variance_`` of all subjects (0 when it cannot be estimated)."""
        try:
            self.noise_variance_ = noise_variance(data)
        except ValueError:
            # too few within-subject pairs: the SD will include the noise
            self.noise_variance_ = 0.0

    def _fit_uncertainty(self, modules, data, calib, settings):
        """Noise variance (all subjects) and error-variance head.

        The head is fitted on the residuals of each of ``modules`` on the
        subjects of ``calib`` paired with it, which it did not see (the
        imputer's network and the held-out subjects, or cross-fitted
        networks and folds); no head when ``calib`` is None.
        """
        from fdaimpute.nn.uncertainty import fit_error_head

        self._fit_noise_variance(data)
        self.error_head_ = None
        if calib is not None:
            self.error_head_ = fit_error_head(
                modules if len(modules) > 1 else modules[0],
                calib if len(calib) > 1 else calib[0],
                settings.grid,
                self.noise_variance_ / self.value_scale_**2,
                anchors=self._anchor_rule(),
                seed=settings.seed + 11,
            )

    def _make_trainer(self, module, settings, *, start_epoch=0, stop_epoch=None):
        """Build the :class:`~fdaimpute.nn.Trainer` (override to customise).

        A run given a ``stop_epoch`` has a fixed length: no ``max_time``.
        """
        cfg = settings.config
        return self._trainer_class()(
            module,
            settings.grid,
            max_epochs=cfg["max_epochs"],
            max_time=self.max_time if stop_epoch is None else None,
            batch_size=cfg["batch_size"],
            lr=cfg["lr"],
            lr_schedule=cfg["lr_schedule"],
            patience=cfg["patience"],
            clip_grad=self.clip_grad,
            regularizers=settings.regularizers,
            visible_weight=cfg["visible_weight"],
            anchors=self._anchor_rule(),
            amp=settings.amp,
            cuda_graph=self.cuda_graph,
            seed=settings.seed,
            verbose=self.verbose,
            start_epoch=start_epoch,
            stop_epoch=stop_epoch,
            keep_start=self.base_ is not None,
            base_weight=self._base_weight,
            **self._trainer_options(),
        )

    # ------------------------------------------------------------------ #
    # inference
    def _predict_batch_size(self):
        """``predict_batch_size``, with ``"auto"`` resolved for ``device_``."""
        if self.predict_batch_size != "auto":
            return self.predict_batch_size
        return 4096 if self.device_.type == "cuda" else 256

    def _model_curves(self, data, derivative=True, std=False):
        """Curves, SAND derivatives (or None) and, with ``std``, error SDs.

        All on ``model_grid_``, in data units.
        """
        import torch

        from fdaimpute.nn import predict_curves

        head = self._error_head() if std else None
        p = self._n_variables()
        shape = (len(data), p * self.model_grid_.size)
        curves = np.empty(shape)
        deriv = np.empty(shape) if derivative and self._has_derivative else None
        sd = np.empty(shape) if std else None
        buffers = tuple(
            None if a is None else torch.from_numpy(a) for a in (curves, deriv, sd)
        )
        with torch.inference_mode():
            predict_curves(
                self.module_,
                self._tensors(data, self.device_),
                self._grid_tensor(self.model_grid_, self.device_),
                batch_size=self._predict_batch_size(),
                anchors=self._anchor_rule(),
                derivative=deriv is not None,
                error_head=head,
                out=buffers,
            )
        # each variable's block by its own scale (one block for one variable)
        blocks = curves.reshape(len(data), p, -1)
        blocks *= np.reshape(self.value_scale_, (-1, 1))
        blocks += np.reshape(self.value_mean_, (-1, 1))
        if deriv is not None:
            deriv.reshape(len(data), p, -1)[...] *= (
                np.reshape(self.value_scale_, (-1, 1)) / self.time_scale_
            )
        if std:
            sd.reshape(len(data), p, -1)[...] *= np.reshape(self.value_scale_, (-1, 1))
            return curves, deriv, sd
        return curves, deriv

    def _error_head(self):
        """The fitted error model, or a ValueError saying why there is none."""
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
        return head

    def _evaluate(self, curves, deriv, times, counts):
        """The model's curve at per-subject times (see the class Notes)."""
        if deriv is None or self._anchor_rule() == "two-sided":
            return interpolate_rows(curves, self.model_grid_, times, counts)
        return interpolate_c1_rows(curves, deriv, self.model_grid_, times, counts)

    def _on_model_grid(self, grid):
        mg = self.model_grid_
        return grid.shape == mg.shape and np.allclose(grid, mg, rtol=0, atol=1e-12)

    def _curves_on(self, curves, deriv, grid):
        """Curves on ``model_grid_`` (with SAND's derivatives or None) on ``grid``."""
        if self._on_model_grid(grid):
            return curves
        n = len(curves)
        flat, counts = np.tile(grid, n), np.full(n, grid.size)
        return self._evaluate(curves, deriv, flat, counts).reshape(n, grid.size)

    def _slopes_on(self, curves, deriv, grid):
        """The slopes of curves on ``model_grid_`` on ``grid``.

        With SAND's derivatives, the slope of the curve ``_evaluate`` gives
        between the grid's points; without (a VT, whose curve is linear
        between them), the finite differences of the curve, linear between
        the grid's points and, beyond its ends, the end segments' slopes
        (along which the curve goes on).
        """
        mg, n = self.model_grid_, len(curves)
        if self._on_model_grid(grid):
            return np.gradient(curves, mg, axis=1) if deriv is None else deriv
        flat, counts = np.tile(grid, n), np.full(n, grid.size)
        if deriv is None:
            slopes = np.gradient(curves, mg, axis=1)
            out = interpolate_rows(slopes, mg, np.clip(flat, mg[0], mg[-1]), counts)
        elif self._anchor_rule() == "two-sided":
            out = interpolate_rows(deriv, mg, flat, counts)
        else:
            out = interpolate_c1_rows(curves, deriv, mg, flat, counts, derivative=True)
        return out.reshape(n, grid.size)

    def _transform_grid(self, data, grid, return_std=False):
        on_grid = self._on_model_grid(grid)
        base_sd = None
        if return_std and self._kept_base().all():
            base_sd = self._base_std(data, grid)
        own_sd = return_std and base_sd is None
        res = self._model_curves(data, derivative=not on_grid, std=own_sd)
        out = self._curves_on(res[0], res[1], grid)
        if not return_std:
            return out
        return out, base_sd if base_sd is not None else self._std_on(res[2], grid)

    def _std_on(self, sd, grid):
        """Error SDs on ``model_grid_`` on ``grid`` (linear between its points)."""
        if self._on_model_grid(grid):
            return sd
        n = len(sd)
        flat, counts = np.tile(grid, n), np.full(n, grid.size)
        return interpolate_rows(sd, self.model_grid_, flat, counts).reshape(n, -1)

    def _predict_ragged(self, data, times, offsets):
        curves, deriv = self._model_curves(data)
        return self._evaluate(curves, deriv, times, np.diff(offsets))

    def _derivative_grid(self, data, grid):
        return self._slopes_on(*self._model_curves(data), grid)


def check_even(cfg, name):
    """Raise a ValueError unless the setting ``cfg[name]`` is even."""
    if cfg[name] % 2:
        raise ValueError(f"{name} must be even, got {cfg[name]}")
