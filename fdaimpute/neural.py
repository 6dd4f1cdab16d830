"""Transformer imputers: VT and SAND (Hong et al., NeurIPS 2024) as estimators.

The torch core lives in :mod:`fdaimpute.nn` and the machinery shared by both
estimators in :mod:`fdaimpute._neural`; this module holds the two public
classes, which differ only through the base class's hooks. Torch is
imported lazily (inside methods), so ``import fdaimpute`` stays fast and
works without touching torch.
"""

from __future__ import annotations

import math

from fdaimpute._neural.base import _NeuralImputer, check_even
from fdaimpute._neural.config import (
    PRESETS,
    SAND_CONSTRAINTS,
    SAND_PARAMS,
    SIZE_PARAMS,
    VT_CONSTRAINTS,
)
from fdaimpute._neural.docs import COMMON_ATTRS_DOC, COMMON_PARAMS_DOC
from fdaimpute._neural.variables import NeuralVariablesMixin

__all__ = ["PRESETS", "SANDImputer", "VTImputer"]


class VTImputer(NeuralVariablesMixin, _NeuralImputer):
    __doc__ = f"""Vanilla transformer imputer (the SAND paper's VT).

    Each subject's observations ``[y, t, enc(t)]`` are the encoder's tokens;
    each output grid point ``[s, enc(s)]`` is a decoder query that attends
    to the other queries and to the observations; a linear head gives the
    curve on the grid. Training is self-supervised: in each batch every
    subject hides 1 to half of its points from the encoder (a random subset
    or a contiguous run) and the loss is the mean squared error at all its
    points, the visible ones weighted by ``visible_weight``. Values are
    standardised and times mapped to [0, 1] inside.

    Parameters
    ----------{COMMON_PARAMS_DOC}

    Attributes
    ----------{COMMON_ATTRS_DOC}

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
    >>> sim = fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0)
    >>> vt = VTImputer(d_model=16, encoder_layers=1, dim_feedforward=32,
    ...                max_epochs=2, random_state=0)
    >>> curves = vt.fit(sim.train.data).transform(sim.test.data)
    >>> curves.shape
    (3, 101)
    """

    _param_constraints = VT_CONSTRAINTS

    def __init__(
        self,
        *,
        preset="cpu",
        base="auto",
        covariates=None,
        d_model=None,
        n_heads=None,
        encoder_layers=None,
        decoder_layers=None,
        dim_feedforward=None,
        dropout=None,
        norm="layer",
        encoding_dim=None,
        max_epochs=None,
        batch_size=None,
        lr=None,
        lr_schedule=None,
        patience=None,
        max_time=None,
        visible_weight=None,
        validation_fraction=0.1,
        calibration_folds="auto",
        clip_grad=1.0,
        regularizers=None,
        device="auto",
        amp="auto",
        cuda_graph="auto",
        predict_batch_size="auto",
        random_state=None,
        verbose=False,
        warm_start=False,
        grid=None,
        extrapolate=False,
        keep_observed=False,
    ):
        self.preset = preset
        self.base = base
        self.covariates = covariates
        self.d_model = d_model
        self.n_heads = n_heads
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        self.dim_feedforward = dim_feedforward
        self.dropout = dropout
        self.norm = norm
        self.encoding_dim = encoding_dim
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.patience = patience
        self.max_time = max_time
        self.visible_weight = visible_weight
        self.validation_fraction = validation_fraction
        self.calibration_folds = calibration_folds
        self.clip_grad = clip_grad
        self.regularizers = regularizers
        self.device = device
        self.amp = amp
        self.cuda_graph = cuda_graph
        self.predict_batch_size = predict_batch_size
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.grid = grid
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed


class SANDImputer(NeuralVariablesMixin, _NeuralImputer):
    __doc__ = f"""SAND: a transformer imputer with self-attention on derivatives.

    A :class:`VTImputer` network produces a rough curve ``T~`` on the grid;
    the SAND layer maps ``[T~ - T~_1, enc(s)]`` through softmax-free
    attention to a derivative ``D~`` and integrates it (cumulative
    trapezoidal rule) from ``T~_1``. The output is continuously
    differentiable with derivative ``D~``. Training minimises the mean
    squared error of ``T~`` and of SAND's curve at all observed points
    (the visible ones weighted by ``visible_weight``), with ``T~``
    detached as SAND's input (so the transformer learns from its own term
    only); the kept epoch is the one where SAND best predicts held-out
    points of validation subjects.

    Parameters
    ----------{COMMON_PARAMS_DOC}
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
        Peak learning rate of the SAND layer's parameters (the transformer
        keeps ``lr``). None: the preset's, ``1e-5`` in the CPU preset (at
        the transformer's rate the layer overfit and made the curves
        rougher than VT's, ``docs/neural.md``), the transformer's ``lr`` in
        the others.
    sand_init : {{"identity", "random"}}, default="identity"
        SAND's starting weights. ``"identity"``: solved in closed form so
        that SAND starts by passing ``T~`` through its smooth span (see
        :meth:`~fdaimpute.nn.SANDLayer.init_identity`) and training only
        has to learn the correction; ``"random"``: PyTorch's default
        initialisation (the paper's).
    sand_smoothing : float or "auto", default=None
        How much SAND's closed-form start smooths ``T~``: the ridge of its
        least-squares problem, relative to its largest squared singular
        value (larger damps more high frequencies). A number: SAND starts
        there and trains. ``"auto"``: SAND starts at ``3e-4`` and trains;
        after the epochs, the trained layer and the closed-form starts at
        ridges ``1e-5`` to ``1e-2`` are compared on the validation
        subjects' hidden points and the best is kept (``sand_smoothing_``).
        None: the preset's, ``"auto"`` in the CPU preset and ``1e-5`` (the
        start of earlier versions) in the others. Only used with
        ``sand_init="identity"``; without validation subjects, ``"auto"``
        keeps the trained layer.

    Attributes
    ----------{COMMON_ATTRS_DOC}
    sand_smoothing_ : float or None
        The ridge of the closed-form start that SAND's layer was reset to
        after training (``sand_smoothing="auto"``), or None where the
        trained layer was kept (or, with a base, the network's state before
        training).

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
    grid points is the cubic with the values and derivatives of both (cubic
    Hermite interpolation): for SAND's own output, built by the trapezoidal
    rule, the integral of the linear interpolation of ``D~``, a C1
    piecewise quadratic; mixed with a base, it still passes through every
    grid value. The same rule gives the loss at off-grid observation times
    during training. With ``anchors="two-sided"`` it is interpolated
    linearly instead. ``derivative`` returns ``D~`` on the grid (in data
    units) and the slope of that curve between grid points.

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
    >>> sim = fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0)
    >>> sand = SANDImputer(d_model=16, encoder_layers=1, dim_feedforward=32,
    ...                    sand_head_dim=8, max_epochs=2, random_state=0)
    >>> sand.fit(sim.train.data).derivative(sim.test.data).shape
    (3, 101)
    """

    _param_constraints = SAND_CONSTRAINTS
    _preset_params = SIZE_PARAMS + SAND_PARAMS
    _has_derivative = True
    #: What models saved before ``sand_smoothing`` existed started from.
    sand_smoothing = 1e-5

    def _check_config(self, cfg):
        super()._check_config(cfg)
        check_even(cfg, "sand_encoding_dim")

    def _module_config(self, cfg, m):
        config = super()._module_config(cfg, m)
        config["kind"] = "sand"
        config["sand"] = {
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
        return config

    @staticmethod
    def _build_module(config):
        from fdaimpute.nn import SANDLayer, SANDModule, VTModule

        return SANDModule(
            VTModule(**config["vt"]),
            SANDLayer(**config["sand"]),
            base_gate=config["vt"].get("base_gate", False),
        )

    def _after_build(self, module, grid):
        super()._after_build(module, grid)
        if self.sand_init == "identity":
            module.sand.init_identity(grid, ridge=self._start_ridge())

    def _start_ridge(self):
        """The ridge of SAND's closed-form start (``sand_smoothing``)."""
        from fdaimpute.nn.sand_smoothing import AUTO_START

        smoothing = self._config()["sand_smoothing"]
        return AUTO_START if smoothing == "auto" else smoothing

    def _anchor_rule(self):
        return self.anchors

    @staticmethod
    def _trainer_class():
        from fdaimpute.nn import SANDTrainer

        return SANDTrainer

    def _trainer_options(self):
        cfg = self._config()
        choose = self.sand_init == "identity" and cfg["sand_smoothing"] == "auto"
        return {"sand_lr": cfg["sand_lr"], "smoothing": "auto" if choose else None}

    def _record(self, trainer, module, offset, warm):
        super()._record(trainer, module, offset, warm)
        self.sand_smoothing_ = trainer.smoothing_

    def _finish_fold(self, module, grid):
        # the cross-fitted networks smooth as the imputer's does
        if getattr(self, "sand_smoothing_", None) is not None:
            module.sand.init_identity(grid, ridge=self.sand_smoothing_)

    def __init__(
        self,
        *,
        preset="cpu",
        base="auto",
        covariates=None,
        d_model=None,
        n_heads=None,
        encoder_layers=None,
        decoder_layers=None,
        dim_feedforward=None,
        dropout=None,
        norm="layer",
        encoding_dim=None,
        sand_heads=None,
        sand_head_dim=None,
        sand_encoding_dim=None,
        anchors=None,
        sand_lr=None,
        sand_init="identity",
        sand_smoothing=None,
        max_epochs=None,
        batch_size=None,
        lr=None,
        lr_schedule=None,
        patience=None,
        max_time=None,
        visible_weight=None,
        validation_fraction=0.1,
        calibration_folds="auto",
        clip_grad=1.0,
        regularizers=None,
        device="auto",
        amp="auto",
        cuda_graph="auto",
        predict_batch_size="auto",
        random_state=None,
        verbose=False,
        warm_start=False,
        grid=None,
        extrapolate=False,
        keep_observed=False,
    ):
        self.preset = preset
        self.base = base
        self.covariates = covariates
        self.d_model = d_model
        self.n_heads = n_heads
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        self.dim_feedforward = dim_feedforward
        self.dropout = dropout
        self.norm = norm
        self.encoding_dim = encoding_dim
        self.sand_heads = sand_heads
        self.sand_head_dim = sand_head_dim
        self.sand_encoding_dim = sand_encoding_dim
        self.anchors = anchors
        self.sand_lr = sand_lr
        self.sand_init = sand_init
        self.sand_smoothing = sand_smoothing
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.patience = patience
        self.max_time = max_time
        self.visible_weight = visible_weight
        self.validation_fraction = validation_fraction
        self.calibration_folds = calibration_folds
        self.clip_grad = clip_grad
        self.regularizers = regularizers
        self.device = device
        self.amp = amp
        self.cuda_graph = cuda_graph
        self.predict_batch_size = predict_batch_size
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.grid = grid
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed
