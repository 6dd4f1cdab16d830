"""GAINImputer: generative adversarial imputation of a binned grid (a baseline)."""

from __future__ import annotations

import copy

import numpy as np
from sklearn.utils import check_random_state

from fdaimpute._core.docstrings import shared_docs
from fdaimpute._core.params import RANDOM_STATE, Interval
from fdaimpute._neural.config import _Device
from fdaimpute._neural.persistence import TorchStatePickling, resolve_device
from fdaimpute._numerics.binned_grid import BinnedGridMixin
from fdaimpute.base import BaseImputer

__all__ = ["GAINImputer"]


@shared_docs()
class GAINImputer(TorchStatePickling, BinnedGridMixin, BaseImputer):
    """Generative adversarial imputation nets (GAIN) on binned times (baseline).

    The method of Yoon, Jordon & van der Schaar (2018), applied as in the
    SAND paper: observations are averaged into time bins (as in
    :class:`~fdaimpute.MICEImputer`), giving a subject x bin matrix with
    missing cells; each column is min-max scaled to [0, 1] over its
    observed cells. A generator ``G([x~, m])`` (``x~``: the row with
    uniform noise on [0, 0.01] in its missing cells, ``m``: the mask)
    outputs a complete row; a discriminator ``D([x^, h])`` sees the imputed
    row ``x^ = m x + (1 - m) G`` and a hint ``h = b m`` (``b`` a
    Bernoulli(``hint_rate``) draw per cell, so ``h`` marks some of the
    observed cells as such) and outputs, per cell, the probability that it
    was observed. As in the authors' released code, ``D`` minimises its
    cross-entropy over all cells and ``G`` minimises ``-log D`` at the
    missing cells plus ``alpha`` times its mean squared error at the observed
    cells (the paper's losses count only cells whose hint is withheld; see
    ``docs/gain.md``). Both networks have two hidden ReLU layers and are
    trained by alternating Adam steps on mini-batches of subjects. The
    curve is the linear interpolation of the imputed row between the bin
    centres, constant beyond the first and last centres.

    GAIN knows nothing of time: columns are exchangeable features and the
    curves are not smooth. It is the SAND paper's GAIN baseline (whose
    MSE was 1.4 to 3.9 times PACE's), not a recommended imputer.

    Parameters
    ----------
    %(grid)s
    n_bins : int or None, default=None
        Number of time bins; by default one bin per distinct training time
        when there are at most 101 of them, else 51 equal-width bins. Bins
        that no training subject observes are merged into a neighbour, so
        every column has data and curves interpolate across the gap.
    max_iter : int, default=10000
        Most training iterations (mini-batches), the reference
        implementation's number. With early stopping (the default) runs
        end much sooner: see ``validation_fraction``.
    validation_fraction : float, default=0.1
        Share of the observed bins hidden from training (drawn at random
        among subjects with two or more observed bins, each keeping one).
        Every 25 iterations the generator imputes them; the generator with
        the lowest squared error there is kept, and training stops after
        ``n_iter_no_change`` iterations without a better one. GAIN's
        adversarial term pulls the imputed cells away from the data once
        the observed cells are fitted, and the sparser the data the sooner:
        on the SAND paper's process at n = 1,000 the held-out error is
        lowest after about 350 iterations at 30 observations per subject and
        50 at 3-5; at n = 10,000 and 8-12 observations, 3,000 iterations
        give 16 times the error of the column means (``docs/gain.md``).
        ``0``: no bins are hidden and the generator after ``max_iter``
        iterations is kept (the reference implementation's way).
    n_iter_no_change : int or None, default=1000
        Iterations without a better held-out error before training stops;
        ``None``: run ``max_iter`` iterations and keep the best generator.
    batch_size : int, default=128
        Subjects per mini-batch (all subjects when there are fewer).
    alpha : float, default=100
        Weight of the reconstruction error at observed cells in the
        generator's loss, relative to its adversarial loss.
    hint_rate : float, default=0.9
        Probability that the hint marks an observed cell as observed (the
        other cells, missing or not, read 0 in the hint). With 1 the hint
        is the mask itself.
    lr : float, default=0.001
        Adam's learning rate (both networks).
    hidden_size : int or None, default=None
        Width of both networks' hidden layers; ``None``: the number of bins
        (as in the reference implementation).
    device : str, torch.device or None, default="auto"
        Where to train and impute; ``"auto"`` or ``None``: CUDA when
        available, else the CPU.
    random_state : int, RandomState or None, default=None
        Seed of the weights, batches, hints and noise of training. On the
        CPU a fixed seed gives identical fits; on CUDA results may differ in
        the last bits between runs. ``transform`` puts the training noise's
        mean (0.005 on the [0, 1] scale) in the missing cells instead of a
        random draw, so a subject's curve depends on its own data only.
    %(extrapolate)s
    keep_observed : bool, default=False
        ``False``: every bin of the row is the generator's output (observed
        bins are reconstructed too). ``True``: observed bins keep their
        binned values (GAIN's usual output ``m x + (1 - m) G``), and the
        observed values are output as they are where a grid time equals an
        observation time.

    Attributes
    ----------
    bin_edges_ : ndarray of shape (n_bins + 1,)
        Edges of the time bins.
    bin_centres_ : ndarray of shape (n_bins,)
        Times the imputed matrix's columns stand for.
    column_min_, column_scale_ : ndarray of shape (n_bins,)
        The min-max scaling: a bin's value ``v`` enters the networks as
        ``(v - column_min_) / column_scale_`` (scale 1 for a column whose
        observed values are all equal).
    module_ : torch.nn.Module
        The trained generator (the discriminator is not kept).
    module_config_ : dict
        Its size: ``n_features`` and ``hidden_size``.
    history_ : dict of list
        Mean losses over each block of 25 iterations: ``"iteration"`` (the
        block's last), ``"discriminator"`` (cross-entropy),
        ``"adversarial"`` and ``"reconstruction"`` (squared error on the
        [0, 1] scale), and with held-out bins ``"held_out"`` (their squared
        error on that scale at the block's end).
    best_iter_ : int
        The iteration whose generator is kept (0: the untrained one imputed
        the held-out bins best).
    device_ : torch.device
        The device of ``module_``.
    n_iter_ : int
        Training iterations run.
    mean_ : ndarray of shape (n_grid,)
        Mean of the training subjects' imputed curves on ``grid_``. GAIN
        estimates no noise variance.
    %(grid_)s
    time_range_ : tuple of float
        Range of the training times.
    n_subjects_fit_ : int
        Number of training subjects.

    See Also
    --------
    MICEImputer : chained equations on the same binned matrix.

    Notes
    -----
    GAIN estimates no uncertainty: ``transform(X, return_std=True)`` raises
    :class:`NotImplementedError`. ``derivative`` returns the slope of the
    piecewise-linear curve, as :class:`~fdaimpute.MICEImputer` does: at a
    bin centre the slope of the segment to its right (at the last centre
    the one to its left), 0 beyond the outer centres. Every subject passed
    to ``transform`` needs at least one observation (the input checks
    refuse an empty subject, naming it).

    Values of new subjects outside a column's training range scale outside
    [0, 1]; the generator's output stays within it (a sigmoid), so
    reconstructed cells stay within the training range of their column.

    References
    ----------
    .. [1] Yoon, J., Jordon, J. and van der Schaar, M. (2018). GAIN: missing
       data imputation using generative adversarial nets. ICML, PMLR 80,
       5689-5698.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.sand_paper(n=300, n_obs=30, random_state=0)
    >>> gain = fi.GAINImputer(grid=sim.grid, max_iter=200, random_state=0)
    >>> gain.fit(sim.train.data).transform(sim.test.data).shape
    (15, 101)
    """

    _param_constraints = {
        **BaseImputer._param_constraints,
        "n_bins": [Interval("int", 2), None],
        "max_iter": [Interval("int", 1)],
        "validation_fraction": [Interval("real", 0, 1, closed="left")],
        "n_iter_no_change": [Interval("int", 1), None],
        "batch_size": [Interval("int", 1)],
        "alpha": [Interval("real", 0)],
        "hint_rate": [Interval("real", 0, 1)],
        "lr": [Interval("real", 0, closed="neither")],
        "hidden_size": [Interval("int", 1), None],
        "device": [_Device(), None],
        "random_state": RANDOM_STATE,
    }

    def __init__(
        self,
        *,
        grid=None,
        n_bins=None,
        max_iter=10_000,
        validation_fraction=0.1,
        n_iter_no_change=1000,
        batch_size=128,
        alpha=100.0,
        hint_rate=0.9,
        lr=1e-3,
        hidden_size=None,
        device="auto",
        random_state=None,
        extrapolate=False,
        keep_observed=False,
    ):
        self.grid = grid
        self.n_bins = n_bins
        self.max_iter = max_iter
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.batch_size = batch_size
        self.alpha = alpha
        self.hint_rate = hint_rate
        self.lr = lr
        self.hidden_size = hidden_size
        self.device = device
        self.random_state = random_state
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed

    # ------------------------------------------------------------------ #
    # the hooks of TorchStatePickling
    @staticmethod
    def _build_module(config):
        from fdaimpute.nn.gain import gain_network

        return gain_network(config["n_features"], config["hidden_size"])

    def _attach_base(self, module):
        """GAIN has no statistical base."""

    def __setstate__(self, state):
        super().__setstate__(state)
        # GAIN has no error model (TorchStatePickling sets one for VT and SAND)
        self.__dict__.pop("error_head_", None)

    # ------------------------------------------------------------------ #
    def _fit(self, data):
        import torch

        from fdaimpute.nn.gain import gain_network, train_gain

        device = resolve_device(self.device)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        self._fit_bins(data)
        binned = self._binned(data)
        observed = ~np.isnan(binned)
        self.column_min_ = np.nanmin(binned, axis=0)
        scale = np.nanmax(binned, axis=0) - self.column_min_
        self.column_scale_ = np.where(scale > 0, scale, 1.0)
        hidden = _hide_cells(observed, self.validation_fraction, rng)
        x, mask = self._tensors(binned, observed & ~hidden, device)
        held_out = None
        if hidden.any():
            rows = np.flatnonzero(hidden.any(axis=1))
            values, cells = self._tensors(binned[rows], hidden[rows], device)
            held_out = (torch.as_tensor(rows, device=device), values, cells)
        n_features = binned.shape[1]
        hidden_size = n_features if self.hidden_size is None else self.hidden_size
        self.module_config_ = {
            "n_features": n_features,
            "hidden_size": int(hidden_size),
        }
        devices = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            generator = self._build_module(self.module_config_).to(device)
            discriminator = gain_network(n_features, int(hidden_size)).to(device)
            self.history_, self.best_iter_ = train_gain(
                generator,
                discriminator,
                x,
                mask,
                max_iter=self.max_iter,
                batch_size=self.batch_size,
                alpha=float(self.alpha),
                hint_rate=float(self.hint_rate),
                lr=float(self.lr),
                rng=torch.Generator(device=device).manual_seed(seed),
                held_out=held_out,
                patience=self.n_iter_no_change,
            )
        self.module_ = generator
        self.device_ = device
        self.n_iter_ = int(self.history_["iteration"][-1])
        filled = self._complete(binned, observed)
        mean_row = filled.mean(axis=0, keepdims=True)
        self.mean_ = self._interpolate(mean_row, self.grid_)[0]

    def _tensors(self, binned, observed, device, double=False):
        """The scaled matrix (0 where missing) and the mask as tensors."""
        import torch

        dtype = torch.float64 if double else torch.float32
        scaled = np.where(observed, (binned - self.column_min_) / self.column_scale_, 0)
        as_tensor = lambda a: torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
        return as_tensor(scaled), as_tensor(observed)

    def _complete(self, binned, observed):
        """The imputed matrix in data units, from a binned matrix and its mask.

        The generator runs in double precision here, so that a subject's row
        does not change (beyond 1e-12 or so) with the other rows passed
        with it, as float32 products can.
        """
        from fdaimpute.nn.gain import impute_rows

        generator = copy.deepcopy(self.module_).double()
        x, mask = self._tensors(binned, observed, self.device_, double=True)
        out = impute_rows(generator, x, mask).cpu().numpy()
        out = out * self.column_scale_ + self.column_min_
        if self.keep_observed:
            out = np.where(observed, binned, out)
        return out

    def _filled(self, data):
        binned = self._binned(data)
        return self._complete(binned, ~np.isnan(binned))


def _hide_cells(observed, fraction, rng):
    """Observed cells to hold out: each with probability ``fraction``.

    Only rows with two or more observed cells lose any, and each keeps at
    least one.
    """
    if not fraction:
        return np.zeros_like(observed)
    draw = rng.random_sample(observed.shape) < fraction
    hide = observed & draw & (observed.sum(axis=1, keepdims=True) >= 2)
    emptied = np.flatnonzero(~(observed & ~hide).any(axis=1) & observed.any(axis=1))
    hide[emptied, np.argmax(observed[emptied], axis=1)] = False
    return hide
