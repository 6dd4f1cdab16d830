"""Several functional variables driven by one vector of Gaussian scores.

Variable ``j`` of a subject is ``X_j(t) = mean_j(t) + sum_m xi_m b_jm(t)``
with one score vector ``xi`` (independent, variance ``score_var[m]``) for
all variables, observed with noise of SD ``noise_sd[j]``. Which scores a
variable loads on sets the coupling: the same ones for every variable make
the variables share their randomness (one fills in another); disjoint
blocks make them independent. The cross-covariances are in closed form,
``Cov(X_j(s), X_k(t)) = b_j(s) diag(score_var) b_k(t)^T``, so the best
linear predictor given every observation of every variable is exact
(:class:`fdaimpute.oracle.MultivariateConditionalMean`).
"""

from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass

import numpy as np

from fdaimpute._sim.sampling import check_size, parse_n_obs
from fdaimpute.multivariate import MultivariateIrregularData


class MultivariateBasisProcess:
    """``p`` random functions sharing one vector of Gaussian scores.

    Parameters
    ----------
    means : list of callable
        ``means[j](t)``: variable ``j``'s mean at an array of times.
    bases : list of callable
        ``bases[j](t)``: its loadings on every score, shape ``(len(t), M)``.
    score_var : array-like of shape (M,)
        Variance of each score.
    noise_sd : array-like of shape (p,)
        Measurement-error SD of each variable.
    variables : list of str, default=None
        Names; default ``"x0", "x1", ...``.
    domain : tuple of float, default=(0.0, 1.0)
        The time interval.
    covariate_mean : callable, default=None
        ``covariate_mean(j, t, covariates)``: the shift of variable ``j``'s
        mean at times ``t`` (shape (m,)) for subjects whose covariates are
        ``covariates`` (a dict of arrays of shape (m,), one entry per time);
        ``None``: no covariate effect.
    """

    def __init__(
        self,
        means,
        bases,
        score_var,
        noise_sd,
        variables=None,
        domain=(0.0, 1.0),
        covariate_mean=None,
    ):
        if len(means) != len(bases):
            raise ValueError("means and bases need one entry per variable each")
        self.means = list(means)
        self.bases = list(bases)
        self.score_var = np.asarray(score_var, dtype=np.float64)
        self.noise_sd = np.broadcast_to(
            np.asarray(noise_sd, dtype=np.float64), (len(means),)
        ).copy()
        if np.any(self.noise_sd < 0):
            raise ValueError(f"noise_sd must be >= 0, got {self.noise_sd}")
        p = len(means)
        self.variables = (
            [f"x{j}" for j in range(p)] if variables is None else list(variables)
        )
        self.domain = (float(domain[0]), float(domain[1]))
        self.covariate_mean = covariate_mean

    @property
    def n_variables(self):
        """Number of variables ``p``."""
        return len(self.means)

    def mean(self, j, t):
        """Variable ``j``'s mean at times ``t``."""
        t = np.asarray(t, dtype=np.float64)
        return np.broadcast_to(np.asarray(self.means[j](t), dtype=np.float64), t.shape)

    def covariate_shift(self, j, t, covariates):
        """Variable ``j``'s mean shift at ``t`` (0 without covariate effect)."""
        t = np.asarray(t, dtype=np.float64)
        if self.covariate_mean is None:
            return np.zeros(t.shape)
        return np.asarray(self.covariate_mean(j, t, covariates), dtype=np.float64)

    def subject_shifts(self, covariates, t):
        """Every variable's mean shift of each subject at ``t``, (n, p, len(t)).

        ``covariates`` holds one value per subject (zeros without an effect).
        """
        t = np.asarray(t, dtype=np.float64)
        if self.covariate_mean is None:
            n = len(next(iter(covariates.values()))) if covariates else 0
            return np.zeros((n, self.n_variables, t.size))
        n = len(next(iter(covariates.values())))
        tiled = np.tile(t, n)
        per_time = {k: np.repeat(np.asarray(v), t.size) for k, v in covariates.items()}
        return np.stack(
            [
                self.covariate_shift(j, tiled, per_time).reshape(n, t.size)
                for j in range(self.n_variables)
            ],
            axis=1,
        )

    def with_noise_sd(self, noise_sd):
        """A copy of the process (of its class) with other noise SDs."""
        out = copy.copy(self)
        out.noise_sd = np.broadcast_to(
            np.asarray(noise_sd, dtype=np.float64), (self.n_variables,)
        ).copy()
        return out

    def basis(self, j, t):
        """Variable ``j``'s loadings at times ``t``, shape ``(len(t), M)``."""
        return np.asarray(self.bases[j](np.asarray(t, dtype=np.float64)), float)

    def cross_covariance(self, j, k, s, t):
        """``Cov(X_j(s_a), X_k(t_b))``, shape ``(len(s), len(t))``."""
        return (self.basis(j, s) * self.score_var) @ self.basis(k, t).T

    def sample_scores(self, n, random_state=None):
        """Gaussian scores of ``n`` subjects, shape ``(n, M)``."""
        rng = np.random.default_rng(random_state)
        return rng.standard_normal((n, self.score_var.size)) * np.sqrt(self.score_var)

    def curves(self, scores, t):
        """Every variable's curves at ``t``, shape ``(n, p, len(t))``."""
        return np.stack(
            [
                self.mean(j, t) + np.asarray(scores) @ self.basis(j, t).T
                for j in range(self.n_variables)
            ],
            axis=1,
        )

    def derivative(self, scores, t, eps=1e-6):
        """Derivatives of :meth:`curves` (central differences)."""
        t = np.asarray(t, dtype=np.float64)
        return (self.curves(scores, t + eps) - self.curves(scores, t - eps)) / (2 * eps)

    def __repr__(self):
        return (
            f"MultivariateBasisProcess({self.n_variables} variables "
            f"{self.variables}, {self.score_var.size} scores)"
        )


@dataclass
class MultivariateSplit:
    """One part of a multivariate simulation.

    Attributes
    ----------
    data : MultivariateIrregularData
        The noisy sparse observations.
    truth : ndarray of shape (n_subjects, p, n_grid)
        The noise-free curves on the simulation's grid.
    scores : ndarray of shape (n_subjects, M)
        The true scores.
    """

    data: MultivariateIrregularData
    truth: np.ndarray
    scores: np.ndarray


@dataclass
class MultivariateSimulation:
    """A simulated multivariate data set: three splits, the grid and the process.

    Attributes
    ----------
    train, validation, test : MultivariateSplit
        The parts, in the order the subjects were drawn.
    grid : ndarray of shape (n_grid,)
        Times of ``truth``.
    process : MultivariateBasisProcess
        The process with the noise SDs actually used.
    """

    train: MultivariateSplit
    validation: MultivariateSplit
    test: MultivariateSplit
    grid: np.ndarray
    process: MultivariateBasisProcess


def sample_multivariate(
    process,
    n,
    n_obs,
    *,
    grid=None,
    split=(0.9, 0.05, 0.05),
    snr=None,
    covariates=None,
    random_state=None,
):
    """Draw ``n`` subjects, each variable observed at its own grid times.

    Parameters
    ----------
    process : MultivariateBasisProcess
        The process.
    n : int
        Number of subjects.
    n_obs : list
        One sparsity per variable (an int, ``"lo-hi"`` or a pair; see
        :func:`fdaimpute.simulate.parse_n_obs`): each subject's count on
        that variable is uniform on the range, its times drawn uniformly
        without replacement from ``grid``, independently of the other
        variables' times.
    grid : array-like, default=None
        Grid of the true curves and of the observation times; 101 points
        on the domain by default.
    split : tuple of 3 floats, default=(0.9, 0.05, 0.05)
        Shares of train, validation and test subjects, in order.
    snr : float, default=None
        If given, each variable's noise SD is the grid average of its
        curves' SD over ``snr`` (in a copy of ``process``).
    covariates : dict of str to array-like, default=None
        The subjects' covariates (one value each); the curves include the
        process's ``covariate_mean`` for them, and the data carry them.
    random_state : int, Generator or None
        Seed.

    Returns
    -------
    MultivariateSimulation
    """
    check_size(n, snr)
    rng = np.random.default_rng(random_state)
    p = process.n_variables
    if not isinstance(n_obs, (list, tuple)) or len(n_obs) != p:
        raise ValueError(
            f"n_obs needs one sparsity per variable ({p}), such as "
            f"{['8-12'] * p}; got {n_obs!r}"
        )
    ranges = [parse_n_obs(v) for v in n_obs]
    a, b = process.domain
    grid = np.linspace(a, b, 101) if grid is None else np.asarray(grid, dtype=float)
    if max(hi for _, hi in ranges) > grid.size:
        raise ValueError("more observations per subject than grid points")
    if len(split) != 3 or min(split) < 0 or not np.isclose(sum(split), 1.0):
        raise ValueError(f"split must be three shares summing to 1: {split}")
    scores = process.sample_scores(n, rng)
    truth = process.curves(scores, grid)
    if covariates is not None:
        covariates = {k: np.asarray(v) for k, v in covariates.items()}
        truth = truth + process.subject_shifts(covariates, grid)
    if snr is not None:
        sd = truth.std(axis=0, ddof=1).mean(axis=1)
        process = process.with_noise_sd(sd / snr)
    times, values, variable, subject = [], [], [], []
    for j, (lo, hi) in enumerate(ranges):
        counts = rng.integers(lo, hi + 1, size=n)
        keys = rng.random((n, grid.size))
        order = np.argsort(keys, axis=1)
        cols = np.where(np.arange(grid.size) < counts[:, None], order, grid.size)
        cols.sort(axis=1)
        cols = cols[cols < grid.size]
        who = np.repeat(np.arange(n), counts)
        signal = truth[who, j, cols]
        times.append(grid[cols])
        values.append(signal + process.noise_sd[j] * rng.standard_normal(cols.size))
        variable.append(np.full(cols.size, j))
        subject.append(who)
    subject = np.concatenate(subject)
    order = np.argsort(subject, kind="stable")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(subject, minlength=n))])
    data = MultivariateIrregularData(
        np.concatenate(times)[order],
        np.concatenate(values)[order],
        np.concatenate(variable)[order],
        offsets,
        process.variables,
        covariates=covariates,
    )
    n_train = int(round(split[0] * n))
    n_val = int(round(split[1] * n))
    cuts = [(0, n_train), (n_train, n_train + n_val), (n_train + n_val, n)]
    parts = [
        MultivariateSplit(data.take(np.arange(lo, hi)), truth[lo:hi], scores[lo:hi])
        for lo, hi in cuts
    ]
    return MultivariateSimulation(*parts, grid, process)


def shared_fourier_process(
    n_variables=3, n_harmonics=3, *, coupling="shared", scales=None
):
    """Variables built on one Fourier basis, each with its own phase and scale.

    Variable ``j`` is ``scale_j [mean_j(t) + sum_k (a_k sin(2 pi k t +
    theta_j) + b_k cos(2 pi k t + theta_j)) / k]``, ``theta_j = j pi / 4``,
    unit-variance Gaussian coefficients. ``coupling="shared"``: one set of
    coefficients for all variables (each variable is a known linear
    transform of any other); ``"independent"``: each its own set.

    Returns
    -------
    MultivariateBasisProcess
    """
    if coupling not in ("shared", "independent"):
        raise ValueError(
            f"coupling must be 'shared' or 'independent', got {coupling!r}"
        )
    defaults = [1.0, 4.0, 0.25, 2.0, 0.5]
    if isinstance(n_variables, bool) or not isinstance(n_variables, numbers.Integral):
        raise TypeError(f"n_variables must be an int, got {n_variables!r}")
    if n_variables < 1 or (scales is None and n_variables > len(defaults)):
        raise ValueError(
            f"n_variables must be 1 to {len(defaults)} with the default scales "
            f"(give scales for more), got {n_variables}"
        )
    scales = defaults[:n_variables] if scales is None else scales
    scales = np.asarray(scales, dtype=float)
    if scales.ndim > 1 or scales.size not in (1, n_variables):
        raise ValueError(f"scales needs one value per variable ({n_variables})")
    if not np.all(np.isfinite(scales)) or np.any(scales <= 0):
        raise ValueError(f"scales must be positive, got {scales.tolist()}")
    scales = np.broadcast_to(scales, (n_variables,)).copy()
    k = np.arange(1, n_harmonics + 1)
    m = 2 * n_harmonics
    n_scores = m if coupling == "shared" else m * n_variables

    def make(j):
        theta = j * np.pi / 4
        start = 0 if coupling == "shared" else j * m

        def basis(t):
            arg = 2 * np.pi * np.multiply.outer(t, k) + theta
            out = np.zeros((np.size(t), n_scores))
            block = np.concatenate([np.sin(arg) / k, np.cos(arg) / k], axis=-1)
            out[:, start : start + m] = scales[j] * block.reshape(np.size(t), m)
            return out

        def mean(t):
            return scales[j] * (np.sin(np.pi * t + theta) + 0.5 * j * t)

        return mean, basis

    pieces = [make(j) for j in range(n_variables)]
    return MultivariateBasisProcess(
        [pc[0] for pc in pieces],
        [pc[1] for pc in pieces],
        np.ones(n_scores),
        0.0,
    )
