"""Simulated functional data with known truth: the SAND paper's process and others.

A *process* is a finite basis expansion ``X(t) = mean(t) + sum_k xi_k b_k(t)``
with independent scores ``xi_k`` of variance ``score_var[k]``, observed with
Gaussian noise of standard deviation ``noise_sd``. Its covariance is known in
closed form, which is what :mod:`fdaimpute.oracle` uses.

Examples
--------
>>> import fdaimpute as fi
>>> sim = fi.simulate.sand_paper(n=200, n_obs="8-12", random_state=0)
>>> len(sim.train.data), len(sim.validation.data), len(sim.test.data)
(180, 10, 10)
>>> sim.test.truth.shape
(10, 101)
"""

from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass

import numpy as np

from fdaimpute.data import IrregularData

__all__ = [
    "BasisProcess",
    "FourierProcess",
    "Simulation",
    "Split",
    "parse_n_obs",
    "sample",
    "sand_paper",
]

_SCORE_LAWS = ("exp", "gauss", "t5")
_NAMED_SPARSITY = {"dense": (30, 30), "sparse": (8, 12), "ssparse": (3, 5)}


class BasisProcess:
    """A random function ``mean(t) + sum_k xi_k b_k(t)`` with independent scores.

    Parameters
    ----------
    mean : callable
        ``mean(t)`` for an array ``t``.
    basis : callable
        ``basis(t)`` returns an array of shape ``(len(t), n_basis)``.
    score_var : array-like of shape (n_basis,)
        Variance of each score.
    scores : {"exp", "gauss", "t5"}, default="gauss"
        Law of the standardised scores: centred Exp(1), N(0, 1) or Student
        t with 5 degrees of freedom rescaled to unit variance.
    noise_sd : float, default=0.0
        Standard deviation of the measurement error.
    domain : tuple of float, default=(0.0, 1.0)
        The time interval the process lives on.
    """

    def __init__(
        self, mean, basis, score_var, scores="gauss", noise_sd=0.0, domain=(0.0, 1.0)
    ):
        if scores not in _SCORE_LAWS:
            raise ValueError(f"scores must be one of {_SCORE_LAWS}, got {scores!r}")
        if noise_sd < 0:
            raise ValueError(f"noise_sd must be >= 0, got {noise_sd}")
        self._mean = mean
        self._basis = basis
        self.score_var = np.asarray(score_var, dtype=np.float64)
        self.scores = scores
        self.noise_sd = float(noise_sd)
        self.domain = (float(domain[0]), float(domain[1]))

    def mean(self, t):
        """Mean function at times ``t``."""
        t = np.asarray(t, dtype=np.float64)
        return np.broadcast_to(np.asarray(self._mean(t), dtype=np.float64), t.shape)

    def basis(self, t):
        """Basis functions at times ``t``, shape ``(len(t), n_basis)``."""
        return np.asarray(
            self._basis(np.asarray(t, dtype=np.float64)), dtype=np.float64
        )

    def covariance(self, s, t):
        """Covariance ``Cov(X(s_a), X(t_b))``, shape ``(len(s), len(t))``."""
        return (self.basis(s) * self.score_var) @ self.basis(t).T

    def variance(self, t):
        """Pointwise variance ``Var X(t)``."""
        b = self.basis(t)
        return (b * b) @ self.score_var

    def derivative(self, scores, t, eps=1e-6):
        """Derivatives of the curves with these scores (central differences)."""
        return (
            self.curves(scores, np.asarray(t) + eps)
            - self.curves(scores, np.asarray(t) - eps)
        ) / (2 * eps)

    def sample_scores(self, n, random_state=None):
        """Draw the scores of ``n`` subjects, shape ``(n, n_basis)``."""
        rng = np.random.default_rng(random_state)
        shape = (n, self.score_var.size)
        if self.scores == "exp":
            z = rng.exponential(1.0, shape) - 1.0
        elif self.scores == "gauss":
            z = rng.standard_normal(shape)
        else:
            z = rng.standard_t(5, shape) / np.sqrt(5.0 / 3.0)
        return z * np.sqrt(self.score_var)

    def curves(self, scores, t):
        """Curves with the given scores at times ``t``, shape ``(n, len(t))``."""
        return self.mean(t) + np.asarray(scores) @ self.basis(t).T

    def __repr__(self):
        return (
            f"{type(self).__name__}(n_basis={self.score_var.size}, "
            f"scores={self.scores!r}, noise_sd={self.noise_sd:.4g})"
        )


class FourierProcess(BasisProcess):
    """The SAND paper's process: ``sum_k [a_k sin(2 pi k t) + b_k cos(2 pi k t)] / k``.

    Mean zero, covariance ``C(s, t) = sum_k cos(2 pi k (s - t)) / k**2``.

    Parameters
    ----------
    n_harmonics : int, default=20
        Number of frequencies ``K``.
    scores : {"exp", "gauss", "t5"}, default="exp"
        Law of the unit-variance coefficients ``a_k``, ``b_k``.
    noise_sd : float, default=0.0
        Standard deviation of the measurement error.
    """

    def __init__(self, n_harmonics=20, scores="exp", noise_sd=0.0):
        if not isinstance(n_harmonics, numbers.Integral) or n_harmonics < 1:
            raise ValueError(
                f"n_harmonics must be a positive integer, got {n_harmonics}"
            )
        self.n_harmonics = int(n_harmonics)
        k = np.arange(1, self.n_harmonics + 1)

        def basis(t):
            arg = 2 * np.pi * np.multiply.outer(t, k)
            return np.concatenate([np.sin(arg) / k, np.cos(arg) / k], axis=-1)

        super().__init__(
            mean=lambda t: np.zeros_like(t),
            basis=basis,
            score_var=np.ones(2 * self.n_harmonics),
            scores=scores,
            noise_sd=noise_sd,
        )

    def covariance(self, s, t):
        """Closed form ``sum_k cos(2 pi k (s - t)) / k**2``."""
        k = np.arange(1, self.n_harmonics + 1)
        diff = np.subtract.outer(np.asarray(s, float), np.asarray(t, float))
        return np.cos(2 * np.pi * np.multiply.outer(diff, k)) @ (1.0 / k**2)


@dataclass
class Split:
    """One part (train, validation or test) of a simulation.

    Attributes
    ----------
    data : IrregularData
        The noisy sparse observations.
    truth : ndarray of shape (n_subjects, n_grid)
        The noise-free curves on the simulation's grid.
    scores : ndarray of shape (n_subjects, n_basis)
        The true scores, to evaluate the truth anywhere with
        ``process.curves(scores, t)``.
    """

    data: IrregularData
    truth: np.ndarray
    scores: np.ndarray


@dataclass
class Simulation:
    """A simulated data set: three splits, the grid and the process."""

    train: Split
    validation: Split
    test: Split
    grid: np.ndarray
    process: BasisProcess

    @property
    def noise_sd(self):
        """Standard deviation of the measurement error."""
        return self.process.noise_sd

    def __repr__(self):
        return (
            f"Simulation(train={len(self.train.data)}, "
            f"validation={len(self.validation.data)}, test={len(self.test.data)}, "
            f"grid={self.grid.size} points, process={self.process!r})"
        )


def parse_n_obs(n_obs):
    """Read a sparsity specification as an inclusive range ``(lo, hi)``.

    Accepts an int (``30``), a string range (``"8-12"``), a pair
    (``(3, 5)``) or a name: ``"dense"`` (30), ``"sparse"`` (8-12) or
    ``"ssparse"`` (3-5).
    """
    if isinstance(n_obs, numbers.Integral) and not isinstance(n_obs, bool):
        lo = hi = int(n_obs)
    elif isinstance(n_obs, str):
        if n_obs in _NAMED_SPARSITY:
            lo, hi = _NAMED_SPARSITY[n_obs]
        else:
            parts = n_obs.replace(" ", "").split("-")
            try:
                lo, hi = (int(parts[0]), int(parts[-1])) if len(parts) <= 2 else (0, -1)
            except ValueError:
                lo, hi = 0, -1
    elif isinstance(n_obs, (tuple, list)) and len(n_obs) == 2:
        lo, hi = int(n_obs[0]), int(n_obs[1])
    else:
        lo, hi = 0, -1
    if lo < 1 or hi < lo:
        raise ValueError(
            f"n_obs must be a positive int, 'lo-hi', (lo, hi) or one of "
            f"{sorted(_NAMED_SPARSITY)}; got {n_obs!r}"
        )
    return lo, hi


def sample(
    process,
    n,
    n_obs,
    *,
    grid=None,
    times="uniform",
    off_grid=False,
    split=(0.9, 0.05, 0.05),
    snr=None,
    random_state=None,
):
    """Draw ``n`` subjects from ``process`` observed sparsely with noise.

    Parameters
    ----------
    process : BasisProcess
        The random function (including ``noise_sd``).
    n : int
        Number of subjects.
    n_obs : int, str or pair
        Observations per subject, uniform on an inclusive range; see
        :func:`parse_n_obs`.
    grid : array-like, default=None
        Grid of the true curves (and of the observation times unless
        ``off_grid``); defaults to 101 points on the process's domain.
    times : {"uniform", "clustered"}, default="uniform"
        ``"uniform"``: times drawn uniformly without replacement.
        ``"clustered"``: each subject's times concentrate around its own
        random centre (weights of a normal density with SD 15% of the
        domain), still without replacement.
    off_grid : bool, default=False
        Draw continuous times (off any grid) instead of grid points.
    split : tuple of 3 floats, default=(0.9, 0.05, 0.05)
        Shares of train, validation and test subjects, taken in order.
    snr : float, default=None
        If given, the noise SD is the grid average of the across-subject SD
        of the simulated curves divided by ``snr`` (the SAND paper's rule),
        replacing ``process.noise_sd`` in the returned simulation's process
        (a copy; ``process`` itself is not changed).
    random_state : int, Generator or None
        Seed.

    Returns
    -------
    Simulation
    """
    rng = np.random.default_rng(random_state)
    lo, hi = parse_n_obs(n_obs)
    a, b = process.domain
    grid = np.linspace(a, b, 101) if grid is None else np.asarray(grid, dtype=float)
    if times not in ("uniform", "clustered"):
        raise ValueError(f"times must be 'uniform' or 'clustered', got {times!r}")
    if not off_grid and hi > grid.size:
        raise ValueError(
            f"cannot draw {hi} distinct times from a {grid.size}-point grid"
        )
    if len(split) != 3 or min(split) < 0 or not np.isclose(sum(split), 1.0):
        raise ValueError(
            f"split must be three non-negative shares summing to 1: {split}"
        )

    scores = process.sample_scores(n, rng)
    counts = rng.integers(lo, hi + 1, size=n)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    subject = np.repeat(np.arange(n), counts)
    if off_grid:
        u = rng.random((n, hi))
        if times == "clustered":
            u = rng.random((n, 1)) + 0.15 * rng.standard_normal((n, hi))
            u = np.clip(1.0 - np.abs(1.0 - np.abs(u)), 0.0, 1.0)  # reflect into [0, 1]
        u = np.where(np.arange(hi) < counts[:, None], u, np.inf)
        u.sort(axis=1)
        obs_t = a + (b - a) * u[np.isfinite(u)]
    else:
        keys = rng.random((n, grid.size))
        if times == "clustered":
            centre = rng.random((n, 1)) * (b - a) + a
            logw = -0.5 * ((grid - centre) / (0.15 * (b - a))) ** 2
            keys = logw - np.log(-np.log(keys))  # Gumbel top-k = weighted sampling
        order = np.argsort(-keys, axis=1)
        cols = np.where(np.arange(grid.size) < counts[:, None], order, grid.size)
        cols.sort(axis=1)
        obs_t = grid[cols[cols < grid.size]]
    truth = process.curves(scores, grid)
    if snr is not None:
        process = copy.copy(process)
        process.noise_sd = float(truth.std(axis=0, ddof=1).mean() / snr)
    basis_obs = process.basis(obs_t)
    signal = process.mean(obs_t) + np.einsum("ij,ij->i", basis_obs, scores[subject])
    noise = process.noise_sd * rng.standard_normal(obs_t.size)
    data = IrregularData(obs_t, signal + noise, offsets)

    n_train = int(round(split[0] * n))
    n_val = int(round(split[1] * n))
    cuts = [(0, n_train), (n_train, n_train + n_val), (n_train + n_val, n)]
    parts = []
    for start, stop in cuts:
        idx = np.arange(start, stop)
        part = data.take(idx)
        part.ids = idx
        parts.append(Split(part, truth[idx], scores[idx]))
    return Simulation(*parts, grid=grid, process=process)


def sand_paper(
    n=10_000,
    n_obs=30,
    *,
    scores="exp",
    n_harmonics=20,
    noise=True,
    snr=4.0,
    times="uniform",
    off_grid=False,
    n_grid=101,
    split=(0.9, 0.05, 0.05),
    random_state=None,
):
    """The SAND paper's simulation (Hong et al., NeurIPS 2024).

    ``X_i(t) = sum_{k=1}^{K} [a_ik sin(2 pi k t) + b_ik cos(2 pi k t)] / k``
    on ``[0, 1]`` with iid unit-variance coefficients; noise SD is the
    average over the grid of the across-subject SD of ``X(t)`` divided by
    ``snr`` (computed from the simulated curves, as the paper does).

    Parameters
    ----------
    n : int, default=10_000
        Number of subjects (split 90/5/5 in order).
    n_obs : int, str or pair, default=30
        Observations per subject: 30, ``"8-12"`` or ``"3-5"`` in the paper.
    scores : {"exp", "gauss", "t5"}, default="exp"
        Law of the coefficients.
    n_harmonics : int, default=20
        ``K``; the paper also ran ``K = 5``.
    noise : bool, default=True
        Add measurement error.
    snr : float, default=4.0
        Signal-to-noise ratio defining the noise SD.
    times : {"uniform", "clustered"}, default="uniform"
        Sampling of the observation times; see :func:`sample`.
    off_grid : bool, default=False
        Continuous observation times instead of grid points.
    n_grid : int, default=101
        Points of the evaluation grid on ``[0, 1]``.
    split : tuple of 3 floats, default=(0.9, 0.05, 0.05)
        Train/validation/test shares.
    random_state : int, Generator or None
        Seed.

    Returns
    -------
    Simulation
    """
    grid = np.linspace(0.0, 1.0, n_grid)
    return sample(
        FourierProcess(n_harmonics, scores),
        n,
        n_obs,
        grid=grid,
        times=times,
        off_grid=off_grid,
        split=split,
        snr=snr if noise else None,
        random_state=random_state,
    )
