"""The conditional neural process imputer (Garnelo et al., ICML 2018).

The torch core (network, context draw, likelihood, inference) lives in
:mod:`fdaimpute.nn.cnp`; the estimator reuses the neural imputers' base
class (:mod:`fdaimpute._neural.base`) for scaling, the validation split,
training, divergence handling and persistence. Torch is imported lazily.
"""

from __future__ import annotations

import numpy as np

from fdaimpute._core.docstrings import shared_docs
from fdaimpute._core.params import Interval
from fdaimpute._neural.base import _NeuralImputer
from fdaimpute._neural.config import VT_CONSTRAINTS
from fdaimpute.base import BaseImputer

__all__ = ["CNPImputer"]

#: Sinusoidal time features fed to the CNP's MLPs beside the time itself.
ENCODING_DIM = 16
#: Their scale (see :class:`~fdaimpute.nn.cnp.CNPModule`).
ENCODING_SCALE = 100.0

_SHARED = (
    "max_epochs",
    "batch_size",
    "lr",
    "patience",
    "validation_fraction",
    "device",
    "random_state",
)
#: Accepted values of CNPImputer's parameters.
CNP_CONSTRAINTS = {
    **BaseImputer._param_constraints,
    **{name: VT_CONSTRAINTS[name] for name in _SHARED},
    "hidden_dim": [Interval("int", 1)],
    "n_layers": [Interval("int", 1)],
    "r_dim": [Interval("int", 1)],
    "max_epochs": [Interval("int", 1)],
    "batch_size": [Interval("int", 1)],
    "lr": [Interval("real", 0, closed="neither")],
}


@shared_docs("evaluates the decoder there (an MLP's extrapolation, unreliable)")
class CNPImputer(_NeuralImputer):
    """Conditional neural process imputer (Garnelo et al., 2018).

    Each subject's observations are the *context*: an encoder MLP maps every
    ``[y_j, t_j, enc(t_j)]`` to a vector ``r_j`` and their mean ``r``
    summarises the subject; a decoder MLP maps ``[r, t*, enc(t*)]`` at any
    time ``t*`` to a Gaussian predictive mean and variance. Training follows
    the paper: in every batch each subject keeps a random context (``k``
    of its ``n_i`` points, ``k`` uniform on ``1..n_i``) and the loss is the
    Gaussian negative log-likelihood of *all* its points. The imputed curve
    is the decoder's mean with the whole subject as context. Values are
    standardised and times mapped to [0, 1] inside, as in the other neural
    imputers; ``enc`` is a fixed 16-feature sinusoidal encoding of the time
    (:func:`~fdaimpute.nn.sinusoidal_encoding`).

    Parameters
    ----------
    hidden_dim : int, default=128
        Width of the hidden layers of the encoder and the decoder.
    n_layers : int, default=3
        Hidden layers of each MLP (SiLU activations).
    r_dim : int, default=128
        Length of the representation ``r``.
    max_epochs : int, default=100
        Passes over the training subjects.
    batch_size : int, default=16
        Subjects per optimizer step. Smaller than the transformers' 64: a
        CNP needs many steps before its decoder starts to use ``r`` (in
        ``docs/cnp.md`` the held-out error sits near the mean curve's for
        the first ~2,000 steps).
    lr : float, default=1e-3
        Adam's peak learning rate (linear warm-up over 2% of the steps, at
        least 100 or half of a shorter run, then cosine decay to 2% of it
        at ``max_epochs``).
    patience : int or None, default=None
        Stop after this many epochs without a better validation error (the
        best epoch is kept either way).
    validation_fraction : float or "auto", default=0.1
        Share of the training subjects held out (``split_``) to choose the
        epoch whose weights are kept: 1 to half of each one's points are
        hidden, predicted from the rest, and scored by squared error.
        ``"auto"``: 50 subjects, but at least 10% and at most 30% of them.
        ``0``: keep the epoch with the lowest training loss.
    device : str or torch.device, default="auto"
        ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``,
        ``"cuda:1"``...
    random_state : int, RandomState or None, default=None
        Seeds initialisation, the validation split and the context draws;
        the same seed gives identical curves on the same device and thread
        count.
    %(grid)s
    %(extrapolate)s
    %(keep_observed)s

    Attributes
    ----------
    module_ : CNPModule
        The trained network (in eval mode).
    module_config_ : dict
        Its constructor arguments.
    history_ : dict of list
        Per epoch: ``epoch``, ``train_loss`` (the Gaussian negative
        log-likelihood per point, standardised units), ``valid_loss`` (the
        held-out points' mean squared error, standardised units), ``lr``,
        ``seconds``.
    best_epoch_ : int
        The epoch whose weights were kept.
    n_epochs_ : int
        Epochs run.
    stop_reason_ : str
        ``"max_epochs"``, ``"early stopping"``, ``"non-finite loss"`` (the
        best finite epoch is kept, with a warning) or ``"interrupted"``.
    interrupted_ : bool
        Whether training stopped on a ``KeyboardInterrupt``; the best epoch
        so far is kept.
    config_ : dict
        The settings used (``hidden_dim``, ``n_layers``, ``r_dim``,
        ``max_epochs``, ``batch_size``, ``lr``, ``lr_schedule``,
        ``patience``, ``validation_fraction``, and ``visible_weight``,
        always 1: the likelihood scores context and target points alike).
    split_ : dict of ndarray
        Positions among the training subjects of the ``"train"`` subjects
        and of the held-out ones (``"selection"``, also under
        ``"calibration"``).
    mean_ : ndarray of shape (n_grid,)
        The average imputed curve of the training subjects on ``grid_``.
    %(grid_)s
    time_range_ : tuple of float
        Training time range, mapped to [0, 1] inside the network.
    value_mean_, value_scale_ : float
        Standardisation of the values.
    noise_variance_ : float
        Estimated variance of the measurement noise (data units; see
        :func:`fdaimpute.noise.noise_variance`), subtracted from the
        decoder's variance for ``return_std``.
    device_ : torch.device
        Where the network lives.
    n_parameters_ : int
        Trainable parameters.

    See Also
    --------
    VTImputer, SANDImputer : Transformer imputers on a grid.
    PACEImputer : The conditional expectation under a Gaussian model.

    Notes
    -----
    **Training machinery.** The class subclasses the neural imputers' base
    (scaling, the subject split, seeding, device handling, the record of
    the fit, save/load) and trains with the shared
    :class:`~fdaimpute.nn.Trainer`, whose hooks fit a CNP:
    :class:`~fdaimpute.nn.cnp.CNPTrainer` replaces only the choice of
    visible points (the random context), the forward pass (predict at the
    batch's observation times, no grid) and the loss (Gaussian negative
    log-likelihood); batching, Adam with its schedule, gradient clipping
    (global norm 1), early stopping on the held-out subjects, the
    best-state restore and the divergence guard (a non-finite loss or
    weight restores the best finite epoch with a warning, or raises a
    ``FloatingPointError`` if the first epoch already diverged) are the
    Trainer's. The transformers' extras (statistical base, regularizers,
    mixed precision, warm start, the error-variance head) do not apply.

    **Evaluation.** The decoder is evaluated at every requested time
    directly: ``transform`` on any grid and ``predict_at`` at any times
    involve no interpolation. ``derivative`` is the exact derivative of the
    decoder's mean in ``t*`` (automatic differentiation; the SiLU network
    is smooth), in data units.

    **Uncertainty.** The decoder's variance is that of a new *observation*
    at ``t*`` (curve plus measurement noise), learned by likelihood. Since
    ``transform(X, return_std=True)`` reports, like the other imputers, the
    standard deviation of the *curve*, the estimated noise variance
    ``noise_variance_`` is subtracted, with the result floored at the
    decoder's own floor (SD 0.01 in standardised units): the SD is
    ``sqrt(max(v(t*) - sigma^2, 0.01^2 s^2))`` with ``s`` the value scale.
    Add ``noise_variance_`` back for a prediction interval of a new
    observation. The variance is a single network's belief, not calibrated
    on held-out subjects (coverage is measured in ``docs/cnp.md``).

    References
    ----------
    Garnelo, Rosenbaum, Maddison, Ramalho, Saxton, Shanahan, Teh, Rezende
    & Eslami. Conditional neural processes. ICML 2018.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.sand_paper(n=100, n_obs="8-12", random_state=0)
    >>> cnp = fi.CNPImputer(hidden_dim=16, r_dim=16, max_epochs=2, random_state=0)
    >>> cnp.fit(sim.train.data).transform(sim.test.data).shape
    (5, 101)
    """

    _param_constraints = CNP_CONSTRAINTS
    _preset_params = ()

    # Settings of the shared machinery that a CNP fixes (not parameters).
    preset = None
    base = None
    regularizers = None
    amp = False
    warm_start = False
    calibration_folds = None
    clip_grad = 1.0
    verbose = False
    predict_batch_size = 256
    lr_schedule = "cosine"

    def __init__(
        self,
        *,
        hidden_dim=128,
        n_layers=3,
        r_dim=128,
        max_epochs=100,
        batch_size=16,
        lr=1e-3,
        patience=None,
        validation_fraction=0.1,
        device="auto",
        random_state=None,
        grid=None,
        extrapolate=False,
        keep_observed=False,
    ):
        self.hidden_dim = hidden_dim
        self.n_layers = n_layers
        self.r_dim = r_dim
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.device = device
        self.random_state = random_state
        self.grid = grid
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed

    # ------------------------------------------------------------------ #
    # hooks of _NeuralImputer
    def _config(self):
        names = ("hidden_dim", "n_layers", "r_dim", "max_epochs", "batch_size", "lr")
        cfg = {name: getattr(self, name) for name in names}
        cfg["lr_schedule"] = self.lr_schedule
        cfg["patience"] = self.patience
        # a neural process scores its targets, context points among them, alike
        cfg["visible_weight"] = 1.0
        return cfg

    def _module_config(self, cfg, m):
        cnp = {
            "hidden_dim": cfg["hidden_dim"],
            "n_layers": cfg["n_layers"],
            "r_dim": cfg["r_dim"],
            "encoding_dim": ENCODING_DIM,
            "encoding_scale": ENCODING_SCALE,
        }
        return {"kind": "cnp", "cnp": cnp}

    @staticmethod
    def _build_module(config):
        from fdaimpute.nn.cnp import CNPModule

        return CNPModule(**config["cnp"])

    def _after_build(self, module, grid):
        pass

    def _n_encoder_features(self):
        return self.module_config_["cnp"]["r_dim"]

    @staticmethod
    def _trainer_class():
        from fdaimpute.nn.cnp import CNPTrainer

        return CNPTrainer

    def _fit_uncertainty(self, modules, data, calib, settings):
        """The noise variance only: the decoder models the rest."""
        self._fit_noise_variance(data)
        self.error_head_ = None

    # ------------------------------------------------------------------ #
    # inference
    def encode(self, X):
        """Each subject's representation ``r``, for downstream models.

        The encoder's ``r_j`` averaged over all the subject's observations:
        what the decoder is conditioned on (see
        :class:`~fdaimpute.FeatureExtractor`).

        Parameters
        ----------
        X : IrregularData, long DataFrame, list of (t, y) pairs or 2-D array
            Subjects.

        Returns
        -------
        ndarray or DataFrame of shape (n_subjects, r_dim)
            A DataFrame indexed by subject id with columns ``encoder_1`` ...
            after ``set_output(transform="pandas")``.
        """
        return super().encode(X)

    def _predict(self, data, targets, *, variance=False, derivative=False):
        """:func:`~fdaimpute.nn.cnp.predict_cnp` in data units (NumPy arrays).

        ``targets`` is a 1-D array of times shared by all subjects or a
        ``(times, offsets)`` pair of per-subject times, in data units.
        """
        from fdaimpute.nn import RaggedTensors
        from fdaimpute.nn.cnp import predict_cnp

        if isinstance(targets, tuple):
            times, offsets = targets
            t = (times - self.time_offset_) / self.time_scale_
            query = RaggedTensors(t, np.zeros_like(t), offsets, device=self.device_)
        else:
            query = self._grid_tensor(targets, self.device_)
        res = predict_cnp(
            self.module_,
            self._tensors(data, self.device_),
            query,
            batch_size=self.predict_batch_size,
            variance=variance,
            derivative=derivative,
        )
        res = {k: v.numpy() for k, v in res.items()}
        res["mean"] = res["mean"] * self.value_scale_ + self.value_mean_
        if variance:
            res["sd"] = self._curve_sd(res.pop("variance"))
        if derivative:
            res["derivative"] *= self.value_scale_ / self.time_scale_
        return res

    def _curve_sd(self, variance):
        """The curve's SD from the decoder's variance (standardised units)."""
        from fdaimpute.nn.cnp import MIN_SD

        noise = self.noise_variance_ / self.value_scale_**2
        return np.sqrt(np.maximum(variance - noise, MIN_SD**2)) * self.value_scale_

    def _transform_grid(self, data, grid, return_std=False):
        res = self._predict(data, np.asarray(grid, dtype=float), variance=return_std)
        return (res["mean"], res["sd"]) if return_std else res["mean"]

    def _predict_ragged(self, data, times, offsets):
        return self._predict(data, (times, offsets))["mean"]

    def _derivative_grid(self, data, grid):
        res = self._predict(data, np.asarray(grid, dtype=float), derivative=True)
        return res["derivative"]
