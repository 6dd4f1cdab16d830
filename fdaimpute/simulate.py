"""Simulated functional data with known truth: the SAND paper's process and others.

A *basis process* is a finite expansion ``X(t) = mean(t) + sum_k xi_k b_k(t)``
with independent scores ``xi_k`` of variance ``score_var[k]``, observed with
Gaussian noise of standard deviation ``noise_sd``. Its covariance is known in
closed form, which is what :mod:`fdaimpute.oracle` uses.

The *non-linear processes* :class:`PhaseProcess` (bumps at random places)
and :class:`WarpedProcess` (a template under a random time warp) are not
short basis expansions: the best linear predictor (PACE's target) is far from
the conditional mean there. Their mean and covariance are Monte Carlo
estimates on a fine grid (:class:`MonteCarloProcess`), which the linear
oracle uses. :func:`phase_variation` and :func:`time_warping` draw them as
:func:`sand_paper` draws the paper's process.

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

import numbers

import numpy as np

from fdaimpute._sim.coupled_process import QuadraticCouplingProcess
from fdaimpute._sim.multivariate_process import (
    MultivariateBasisProcess,
    MultivariateSimulation,
    MultivariateSplit,
    sample_multivariate,
    shared_fourier_process,
)
from fdaimpute._sim.nonlinear_process import (
    MonteCarloProcess,
    PhaseProcess,
    WarpedProcess,
)
from fdaimpute._sim.sampling import Simulation, Split, parse_n_obs, sample

__all__ = [
    "BasisProcess",
    "FourierProcess",
    "MonteCarloProcess",
    "MultivariateBasisProcess",
    "MultivariateSimulation",
    "MultivariateSplit",
    "PhaseProcess",
    "QuadraticCouplingProcess",
    "Simulation",
    "Split",
    "WarpedProcess",
    "parse_n_obs",
    "phase_variation",
    "multivariate_gaussian",
    "nonlinear_coupling",
    "shared_fourier_process",
    "sample",
    "sample_multivariate",
    "sand_paper",
    "time_warping",
]

_SCORE_LAWS = ("exp", "gauss", "t5", "bimodal")
# "bimodal": a random sign times 0.95 plus N(0, 0.3^2) noise, unit variance
_BIMODAL_CENTRE, _BIMODAL_SD = 0.95, np.sqrt(1 - 0.95**2)


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
    scores : {"exp", "gauss", "t5", "bimodal"}, default="gauss"
        Law of the standardised scores: centred Exp(1), N(0, 1), Student
        t with 5 degrees of freedom rescaled to unit variance, or
        ``"bimodal"``: ``+-0.95`` with equal chances plus ``N(0, 0.31**2)``
        (unit variance, two well separated clusters; the conditional mean
        is then far from linear in the data).
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
        elif self.scores == "t5":
            z = rng.standard_t(5, shape) / np.sqrt(5.0 / 3.0)
        else:
            sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
            z = _BIMODAL_CENTRE * sign + _BIMODAL_SD * rng.standard_normal(shape)
        return z * np.sqrt(self.score_var)

    def curves(self, scores, t):
        """Curves with the given scores at times ``t``, shape ``(n, len(t))``."""
        return self.mean(t) + np.asarray(scores) @ self.basis(t).T

    def evaluate(self, scores, t):
        """Curve of row ``j`` of ``scores`` at time ``t[j]``, shape ``(len(t),)``."""
        return self.mean(t) + np.einsum("ij,ij->i", self.basis(t), scores)

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
    scores : {"exp", "gauss", "t5", "bimodal"}, default="exp"
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
    scores : {"exp", "gauss", "t5", "bimodal"}, default="exp"
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


def _draw_sim(process, n, n_obs, snr, noise, times, off_grid, n_grid, split, seed):
    a, b = process.domain
    return sample(
        process,
        n,
        n_obs,
        grid=np.linspace(a, b, n_grid),
        times=times,
        off_grid=off_grid,
        split=split,
        snr=snr if noise else None,
        random_state=seed,
    )


_SIM_PARAMS = """
    n : int, default=10_000
        Number of subjects (split 90/5/5 in order).
    n_obs : int, str or pair, default="8-12"
        Observations per subject; see :func:`parse_n_obs`.
    noise : bool, default=True
        Add measurement error.
    snr : float, default=4.0
        Signal-to-noise ratio defining the noise SD (the SAND paper's rule:
        grid average of the across-subject SD of the curves over ``snr``).
    times : {"uniform", "clustered"}, default="uniform"
        Sampling of the observation times; see :func:`sample`.
    off_grid : bool, default=False
        Continuous observation times instead of grid points.
    n_grid : int, default=101
        Points of the evaluation grid on ``[0, 1]``.
    split : tuple of 3 floats, default=(0.9, 0.05, 0.05)
        Train/validation/test shares.
    random_state : int, Generator or None
        Seed of the data (the process's Monte Carlo moments use their own
        fixed seed).

    Returns
    -------
    Simulation"""


def phase_variation(
    n=10_000,
    n_obs="8-12",
    *,
    shift=0.12,
    noise=True,
    snr=4.0,
    times="uniform",
    off_grid=False,
    n_grid=101,
    split=(0.9, 0.05, 0.05),
    random_state=None,
):
    args = (n, n_obs, snr, noise, times, off_grid, n_grid, split, random_state)
    return _draw_sim(PhaseProcess(shift=shift), *args)


phase_variation.__doc__ = f"""Two bumps at random places (a :class:`PhaseProcess`).

    Parameters
    ----------
    shift : float, default=0.12
        How far each bump moves (half-width of its uniform range).{_SIM_PARAMS}

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.phase_variation(n=200, n_obs="3-5", random_state=0)
    >>> sim.test.truth.shape
    (10, 101)
    """


def time_warping(
    n=10_000,
    n_obs="8-12",
    *,
    warp_sd=0.8,
    amplitude_sd=0.2,
    noise=True,
    snr=4.0,
    times="uniform",
    off_grid=False,
    n_grid=101,
    split=(0.9, 0.05, 0.05),
    random_state=None,
):
    process = WarpedProcess(warp_sd=warp_sd, amplitude_sd=amplitude_sd)
    args = (n, n_obs, snr, noise, times, off_grid, n_grid, split, random_state)
    return _draw_sim(process, *args)


time_warping.__doc__ = f"""Two peaks under random warps (a :class:`WarpedProcess`).

    Parameters
    ----------
    warp_sd : float, default=0.8
        SD of the warp parameter.
    amplitude_sd : float, default=0.2
        SD of the amplitude around 1.{_SIM_PARAMS}

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.time_warping(n=200, n_obs="8-12", random_state=0)
    >>> sim.test.scores.shape
    (10, 2)
    """


def multivariate_gaussian(
    n=2_000,
    n_variables=3,
    n_obs=None,
    *,
    coupling="shared",
    n_harmonics=3,
    scales=None,
    snr=4.0,
    n_grid=101,
    split=(0.9, 0.05, 0.05),
    covariates=False,
    random_state=None,
):
    """Several Gaussian functional variables with a known cross-covariance.

    Variable ``j`` is ``s_j [m_j(t) + sum_k (a_k sin(2 pi k t + theta_j) +
    b_k cos(2 pi k t + theta_j)) / k]`` on ``[0, 1]`` with ``theta_j = j
    pi / 4``, scales ``s_j`` (1, 4, 0.25, 2, 0.5 by default: the variables
    live on different scales) and Gaussian unit-variance coefficients.
    With ``coupling="shared"`` every variable uses the same coefficients, so
    any one of them determines the others; with ``"independent"`` each has
    its own. Each variable is observed at its own times, with noise SD its
    curves' average SD over ``snr``. The multivariate oracle is exact for
    this process (:class:`fdaimpute.oracle.MultivariateConditionalMean`).

    Parameters
    ----------
    n : int, default=2_000
        Number of subjects.
    n_variables : int, default=3
        Number of variables ``p`` (at most 5 with the default scales).
    n_obs : list, default=None
        One sparsity per variable (see :func:`parse_n_obs`); default: the
        first variable sparse (``"2-4"``), the others ``"8-12"``.
    coupling : {"shared", "independent"}, default="shared"
        Whether the variables share their coefficients.
    n_harmonics : int, default=3
        Frequencies ``K``.
    scales : array-like, default=None
        The scales ``s_j``.
    snr : float, default=4.0
        Signal-to-noise ratio of each variable.
    n_grid : int, default=101
        Grid of the truth and of the observation times.
    split : tuple of 3 floats, default=(0.9, 0.05, 0.05)
        Train/validation/test shares.
    covariates : bool, default=False
        Give every subject an ``"age"`` (normal, mean 50, SD 10) and a
        ``"group"`` (``"a"``, ``"b"``, ``"c"`` with probabilities 0.5, 0.3,
        0.2) that shift each variable's mean: ``s_j [0.8 (age - 50) / 10
        cos(pi t) + 0.8 t [group b] - 0.8 sin(pi t) [group c]]``. The mean
        is then linear in the covariates with varying coefficients, and the
        oracle (:class:`fdaimpute.oracle.MultivariateConditionalMean`) knows
        it.
    random_state : int, Generator or None
        Seed.

    Returns
    -------
    MultivariateSimulation
        ``train``, ``validation`` and ``test`` (each with ``data``, a
        :class:`~fdaimpute.MultivariateIrregularData`, and
        ``truth`` of shape ``(n, p, n_grid)``), ``grid`` and ``process``.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.multivariate_gaussian(n=100, random_state=0)
    >>> sim.train.truth.shape
    (90, 3, 101)
    >>> int(sim.train.data.counts[:, 0].max()) <= 4
    True
    """
    if n_obs is None:
        n_obs = ["2-4"] + ["8-12"] * (n_variables - 1)
    process = shared_fourier_process(
        n_variables, n_harmonics, coupling=coupling, scales=scales
    )
    rng = np.random.default_rng(random_state)
    given = None
    if covariates:
        process = _with_covariate_mean(process, scales)
        given = {
            "age": np.round(rng.normal(50.0, 10.0, n), 1),
            "group": rng.choice(np.array(["a", "b", "c"]), n, p=[0.5, 0.3, 0.2]),
        }
    return sample_multivariate(
        process,
        n,
        n_obs,
        grid=np.linspace(0.0, 1.0, n_grid),
        split=split,
        snr=snr,
        covariates=given,
        random_state=rng if covariates else random_state,
    )


def nonlinear_coupling(
    n=2_000,
    n_obs=("8-12", "2-4"),
    *,
    linear_weight=0.5,
    n_harmonics=3,
    scales=(1.0, 4.0),
    snr=4.0,
    n_grid=101,
    split=(0.9, 0.05, 0.05),
    random_state=None,
):
    """Two variables, the second partly the square of the first's random path.

    ``x0`` is a Gaussian path ``Z`` (a Fourier expansion, as in
    :func:`multivariate_gaussian`) around its mean; ``x1`` mixes ``Z``
    (share ``linear_weight``) with ``Z^2 - E Z^2`` (see
    :class:`QuadraticCouplingProcess`). The square is uncorrelated with
    ``Z``, so the best linear predictor of ``x1`` -- the multivariate oracle
    :class:`fdaimpute.oracle.MultivariateConditionalMean`, and what
    multivariate PACE estimates -- learns from ``x0`` only its linear share,
    while the best predictor of all (:func:`fdaimpute.oracle.posterior_mean`)
    reads ``Z`` off the dense ``x0`` and fills in the sparse ``x1`` almost
    exactly. A model that learns the coupling (a network) can go below the
    linear oracle here.

    Parameters
    ----------
    n : int, default=2_000
        Number of subjects.
    n_obs : pair, default=("8-12", "2-4")
        The sparsity of ``x0`` and of ``x1`` (see :func:`parse_n_obs`).
    linear_weight : float, default=0.5
        Share of ``x1``'s random part that is linear in the path, in
        ``[0, 1]`` (1: a Gaussian pair, the linear oracle is the best
        predictor; 0: ``x1`` and ``x0`` are uncorrelated).
    n_harmonics : int, default=3
        Frequencies of the path.
    scales : pair of float, default=(1.0, 4.0)
        The variables' scales.
    snr : float, default=4.0
        Signal-to-noise ratio of each variable.
    n_grid : int, default=101
        Grid of the truth and of the observation times.
    split : tuple of 3 floats, default=(0.9, 0.05, 0.05)
        Train/validation/test shares.
    random_state : int, Generator or None
        Seed.

    Returns
    -------
    MultivariateSimulation
        As :func:`multivariate_gaussian`; ``scores`` of each split are the
        full vectors ``(xi, eta)``.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.nonlinear_coupling(n=100, random_state=0)
    >>> sim.train.truth.shape
    (90, 2, 101)
    >>> int(sim.train.data.counts[:, 1].max()) <= 4
    True
    """
    if not isinstance(n_obs, (list, tuple)) or len(n_obs) != 2:
        raise ValueError(f"n_obs needs two sparsities (x0, x1), got {n_obs!r}")
    process = QuadraticCouplingProcess(n_harmonics, linear_weight, scales)
    return sample_multivariate(
        process,
        n,
        list(n_obs),
        grid=np.linspace(0.0, 1.0, n_grid),
        split=split,
        snr=snr,
        random_state=random_state,
    )


def _with_covariate_mean(process, scales=None):
    """``process`` with the age and group effects of :func:`multivariate_gaussian`."""
    p = process.n_variables
    scales = [1.0, 4.0, 0.25, 2.0, 0.5][:p] if scales is None else scales
    scales = np.broadcast_to(np.asarray(scales, float), (p,))

    def shift(j, t, covariates):
        age = (np.asarray(covariates["age"], dtype=float) - 50.0) / 10.0
        group = np.asarray(covariates["group"]).astype(str)
        out = 0.8 * age * np.cos(np.pi * t)
        out = out + 0.8 * t * (group == "b") - 0.8 * np.sin(np.pi * t) * (group == "c")
        return scales[j] * out

    return MultivariateBasisProcess(
        process.means,
        process.bases,
        process.score_var,
        process.noise_sd,
        process.variables,
        process.domain,
        shift,
    )
