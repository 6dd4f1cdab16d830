"""Drawing sparse noisy samples from a process: splits, sparsity, noise.

:func:`sample` works with any process that has ``domain``, ``noise_sd``,
``sample_scores(n, rng)``, ``curves(scores, t)`` and ``evaluate(scores, t)``
(one time per row of ``scores``): the basis processes of
:mod:`fdaimpute.simulate` and its non-linear processes alike.
"""

from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass

import numpy as np

from fdaimpute.data import IrregularData

_NAMED_SPARSITY = {"dense": (30, 30), "sparse": (8, 12), "ssparse": (3, 5)}


@dataclass
class Split:
    """One part (train, validation or test) of a simulation.

    Attributes
    ----------
    data : IrregularData
        The noisy sparse observations.
    truth : ndarray of shape (n_subjects, n_grid)
        The noise-free curves on the simulation's grid.
    scores : ndarray of shape (n_subjects, n_params)
        The true scores (a basis process) or random parameters (a
        non-linear process), to evaluate the truth anywhere with
        ``process.curves(scores, t)``.
    """

    data: IrregularData
    truth: np.ndarray
    scores: np.ndarray


@dataclass
class Simulation:
    """A simulated data set: three splits, the grid and the process.

    Attributes
    ----------
    train, validation, test : Split
        The three parts, in the order the subjects were drawn.
    grid : ndarray of shape (n_grid,)
        Times of the noise-free curves ``Split.truth``.
    process : BasisProcess, PhaseProcess or WarpedProcess
        The process, with the ``noise_sd`` actually used.
    """

    train: Split
    validation: Split
    test: Split
    grid: np.ndarray
    process: object

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
    elif (
        isinstance(n_obs, (tuple, list))
        and len(n_obs) == 2
        and all(isinstance(v, numbers.Integral) for v in n_obs)
    ):
        lo, hi = int(n_obs[0]), int(n_obs[1])
    else:
        lo, hi = 0, -1
    if lo < 1 or hi < lo:
        raise ValueError(
            f"n_obs must be a positive int, 'lo-hi', (lo, hi) or one of "
            f"{sorted(_NAMED_SPARSITY)}; got {n_obs!r}"
        )
    return lo, hi


def check_size(n, snr):
    """Refuse a number of subjects ``n`` or a signal-to-noise ratio ``snr``
    that cannot make a simulation (with ``snr``, the noise is set from the
    curves' SD across subjects, which needs two)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"n must be an int, got {n!r}")
    if n < (2 if snr is not None else 1):
        need = (
            "2 (the noise is set from the curves' SD across subjects)"
            if snr is not None
            else "1"
        )
        raise ValueError(f"n must be at least {need}, got {n}")
    if snr is not None and (
        isinstance(snr, bool)
        or not isinstance(snr, numbers.Real)
        or not np.isfinite(snr)
        or snr <= 0
    ):
        raise ValueError(f"snr must be a positive number, got {snr!r}")


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
    process : BasisProcess, PhaseProcess or WarpedProcess
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
    check_size(n, snr)
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
    signal = process.evaluate(scores[subject], obs_t)
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
