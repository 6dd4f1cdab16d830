"""The oracle: conditional expectation with the process's true covariance.

For a process with known mean, covariance and noise variance, the best
linear predictor of ``X_i(s)`` from subject ``i``'s observations is

    mu(s) + C(s, t_i) (C(t_i, t_i) + sigma^2 I)^{-1} (y_i - mu(t_i)),

the limit that benchmarks report against (it is the exact conditional mean
when the scores are Gaussian). For a basis process the covariance is in closed
form; for the non-linear processes (:class:`~fdaimpute.simulate.PhaseProcess`,
:class:`~fdaimpute.simulate.WarpedProcess`) it is their Monte Carlo
covariance, used through all its non-negligible eigenpairs, so the oracle is
still the best linear predictor (up to Monte Carlo error) -- and there it is
far from the conditional mean, which :func:`posterior_mean` approximates.
"""

from __future__ import annotations

import numbers

import numpy as np

from fdaimpute._core.params import Instance, validate_params
from fdaimpute._core.validation import resolve_grid
from fdaimpute._fpca.scores import posterior_scores
from fdaimpute._pace.joint import posterior_scores_by_variable
from fdaimpute.base import BaseImputer
from fdaimpute.data import IrregularData
from fdaimpute.multivariate import MultivariateIrregularData
from fdaimpute.simulate import (
    BasisProcess,
    MonteCarloProcess,
    MultivariateBasisProcess,
    QuadraticCouplingProcess,
)

__all__ = ["ConditionalMean", "MultivariateConditionalMean", "posterior_mean"]


class ConditionalMean(BaseImputer):
    """Best linear predictor of each curve given the true process.

    Needs no fitting: ``transform`` works at once (``fit`` is accepted for
    use in pipelines and does nothing but check the input).

    Parameters
    ----------
    process : BasisProcess, PhaseProcess or WarpedProcess
        The data-generating process, with its ``noise_sd``. For a
        non-linear process (a ``MonteCarloProcess``) the oracle uses the
        eigen-decomposition of its Monte Carlo covariance: a Gaussian process
        with the same mean and covariance, whose conditional mean is the best
        linear predictor and whose ``return_std`` is that predictor's
        conditional SD (its root mean squared error given the times).
    grid : int or array-like, default=None
        Output grid; defaults to 101 points on the process's domain.
    extrapolate : {False, True, "clip"}, default=False
        Times outside the training range: refuse them, evaluate the process
        there (``True``), or hold each curve constant beyond the range.

    Attributes
    ----------
    grid_ : ndarray of shape (n_grid,)
        The output grid.
    mean_ : ndarray of shape (n_grid,)
        The process's mean curve on ``grid_``.
    noise_variance_ : float
        The process's measurement-error variance.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.sand_paper(n=400, n_obs="8-12", random_state=0)
    >>> oracle = fi.oracle.ConditionalMean(sim.process)
    >>> curves = oracle.transform(sim.test.data)
    >>> curves.shape
    (20, 101)
    """

    # no keep_observed: the oracle's parameters are the process, grid and extrapolate
    _param_constraints = {
        "process": [
            Instance(
                (BasisProcess, MonteCarloProcess),
                "a BasisProcess or MonteCarloProcess (fdaimpute.simulate)",
            )
        ]
    }

    def __init__(self, process, *, grid=None, extrapolate=False):
        self.process = process
        self.grid = grid
        self.extrapolate = extrapolate

    def __sklearn_is_fitted__(self):
        return True

    @property
    def time_range_(self):
        return self.process.domain

    @property
    def grid_(self):
        grid = 101 if self.grid is None else self.grid
        return resolve_grid(grid, self.process.domain)

    @property
    def mean_(self):
        """The process's mean curve on ``grid_``."""
        return self.process.mean(self.grid_)

    @property
    def noise_variance_(self):
        """The process's measurement-error variance."""
        return float(self.process.noise_sd**2)

    def fit(self, X=None, y=None):
        """Check the parameters and the input (if any); the oracle learns nothing."""
        validate_params(self)
        if X is not None:
            self._check_transform_input(X)
        return self

    def _fit(self, data):
        pass

    def _linear_process(self):
        """The process itself, or the Gaussian process with its mean and covariance."""
        proc = self.process
        if isinstance(proc, BasisProcess):
            return proc
        return BasisProcess(
            proc.mean,
            proc.eigenbasis,
            proc.eigenvalues,
            noise_sd=proc.noise_sd,
            domain=proc.domain,
        )

    def _posterior(self, data, with_cov=False):
        """Posterior mean (and covariance, else None) of the scores: PACE's code."""
        proc = self._linear_process()
        out = posterior_scores(
            data.values - proc.mean(data.times),
            proc.basis(data.times),
            data.offsets,
            proc.score_var,
            proc.noise_sd**2,
            with_cov=with_cov,
            woodbury=False,
        )
        return out if with_cov else (out, None)

    def _transform_grid(self, data, grid, return_std=False):
        mean_xi, cov_xi = self._posterior(data, with_cov=return_std)
        proc = self._linear_process()
        basis = proc.basis(grid)
        curves = proc.mean(grid) + mean_xi @ basis.T
        if not return_std:
            return curves
        var = np.einsum("mp,npq,mq->nm", basis, cov_xi, basis)
        return curves, np.sqrt(np.clip(var, 0.0, None))

    def _derivative_grid(self, data, grid):
        mean_xi, _ = self._posterior(data)
        return self._linear_process().derivative(mean_xi, grid)

    def _predict_ragged(self, data, times, offsets):
        mean_xi, _ = self._posterior(data)
        subject = np.repeat(np.arange(len(data)), np.diff(offsets))
        return self._linear_process().evaluate(mean_xi[subject], times)


def posterior_mean(process, data, grid=None, *, n_draws=20_000, random_state=0):
    """Conditional mean of each curve, by importance sampling from the prior.

    Draws ``n_draws`` curves from ``process`` and weights each by the
    Gaussian likelihood of a subject's observations; the weighted average is
    a consistent estimate of ``E[X_i(t) | y_i]``, the best predictor of all,
    linear or not. It is a reference for benchmarks on the non-linear
    processes, practical when the process has few random parameters.

    For a :class:`~fdaimpute.simulate.QuadraticCouplingProcess` (several
    variables, :func:`~fdaimpute.simulate.nonlinear_coupling`) the draws of
    the Gaussian path come instead from its exact posterior given the
    variables that are linear in it (``n_draws`` per subject), weighted by
    the likelihood of the other variables' observations: the proposal
    already sits where a dense linear variable puts the path.

    Parameters
    ----------
    process : BasisProcess, PhaseProcess, WarpedProcess or QuadraticCouplingProcess
        The data-generating process; its ``noise_sd`` must be positive.
    data : IrregularData or MultivariateIrregularData
        The subjects' observations (of every variable, for a process of
        several).
    grid : array-like, default=None
        Output times; defaults to 101 points on the process's domain.
    n_draws : int, default=20_000
        Number of draws (per subject for a process of several variables).
    random_state : int, Generator or None, default=0
        Seed of the draws.

    Returns
    -------
    ndarray of shape (n_subjects, n_grid) or (n_subjects, p * n_grid)
        With several variables, variable-major blocks as
        :meth:`MultivariateConditionalMean.transform`.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.time_warping(n=200, n_obs="8-12", random_state=0)
    >>> fi.oracle.posterior_mean(sim.process, sim.test.data, n_draws=2000).shape
    (10, 101)
    """
    if not isinstance(n_draws, numbers.Integral) or n_draws < 1:
        raise ValueError(f"n_draws must be a positive integer, got {n_draws!r}")
    if grid is None:
        grid = np.linspace(*process.domain, 101)
    grid = np.asarray(grid, dtype=np.float64)
    if isinstance(process, QuadraticCouplingProcess):
        return _coupled_posterior_mean(process, data, grid, n_draws, random_state)
    if not isinstance(data, IrregularData):
        raise TypeError(f"data must be an IrregularData, got {type(data).__name__}")
    if not process.noise_sd > 0:
        raise ValueError("posterior_mean needs a process with noise_sd > 0")
    draws = process.sample_scores(n_draws, random_state)
    sigma2 = process.noise_sd**2
    on_grid = process.curves(draws, grid)
    offsets = np.asarray(data.offsets)
    n = offsets.size - 1
    subject = np.repeat(np.arange(n), np.diff(offsets))
    out = np.empty((n, grid.size))
    times, inv = np.unique(data.times, return_inverse=True)
    # the draws at every distinct time at once when that is small enough
    at_times = process.curves(draws, times) if n_draws * times.size <= 2**24 else None
    batch = max(1, 2**22 // n_draws)
    for start in range(0, n, batch):
        stop = min(start + batch, n)
        lo, hi = offsets[start], offsets[stop]
        y, who = data.values[lo:hi], subject[lo:hi] - start
        if at_times is None:
            cols, idx = np.unique(data.times[lo:hi], return_inverse=True)
            f = process.curves(draws, cols)
        else:
            cols, idx = np.unique(inv[lo:hi], return_inverse=True)
            f = at_times[:, cols]
        # sum_j (f(t_j) - y_j)^2 per subject as matrix products over distinct times
        pos = idx * (stop - start) + who
        shape = (cols.size, stop - start)
        count = np.bincount(pos, minlength=cols.size * shape[1]).reshape(shape)
        ysum = np.bincount(pos, y, minlength=count.size).reshape(shape)
        yy = np.bincount(who, y * y, minlength=shape[1])
        loglik = -0.5 * ((f * f) @ count - 2 * f @ ysum + yy) / sigma2
        w = np.exp(np.maximum(loglik - loglik.max(axis=0), -700.0))
        out[start:stop] = (w / w.sum(axis=0)).T @ on_grid
    return out


def _coupled_posterior_mean(process, data, grid, n_draws, random_state):
    """:func:`posterior_mean` of a :class:`QuadraticCouplingProcess`."""
    _check_variables(process, data, "data")
    if not np.all(process.noise_sd > 0):
        raise ValueError("posterior_mean needs a process with noise_sd > 0")
    m, n = process.n_latent, len(data)
    resid, basis, noise = _observed_terms(process, data, {})
    # the exact Gaussian posterior of the path given the linear variables
    linear = np.isin(data.variable, process.linear_variables)
    kept = np.concatenate([[0], np.cumsum(linear)])[np.asarray(data.offsets)]
    seen = np.diff(kept) > 0  # the others keep the prior
    centre, cov = np.zeros((n, m)), np.broadcast_to(np.eye(m), (n, m, m)).copy()
    if seen.any():
        centre[seen], cov[seen] = posterior_scores_by_variable(
            resid[linear],
            basis[linear, :m],
            np.concatenate([[0], kept[1:][seen]]),
            np.ones(m),
            noise[linear],
            with_cov=True,
        )
    root = np.linalg.cholesky(cov + 1e-12 * np.eye(m))
    rng = np.random.default_rng(random_state)
    other = ~linear
    subject = np.asarray(data.subject_index)
    out_basis, out_mean = _grid_terms(process, grid)
    scores = np.empty((n, process.score_var.size))
    batch = max(1, 2**22 // (n_draws * process.score_var.size))
    for start in range(0, n, batch):
        stop = min(start + batch, n)
        z = rng.standard_normal((stop - start, n_draws, m))
        xi = centre[start:stop, None, :] + np.einsum(
            "iab,isb->isa", root[start:stop], z
        )
        full = process.scores_of_latent(xi)
        loglik = np.zeros((stop - start, n_draws))
        rows = np.flatnonzero(other & (subject >= start) & (subject < stop))
        if rows.size:
            who = subject[rows] - start
            fitted = np.einsum("rm,rsm->rs", basis[rows], full[who])
            sq = (resid[rows, None] - fitted) ** 2 / noise[rows, None]
            np.add.at(loglik, who, -0.5 * sq)
        w = np.exp(loglik - loglik.max(axis=1, keepdims=True))
        scores[start:stop] = np.einsum("is,ism->im", w / w.sum(1, keepdims=True), full)
    return out_mean + scores @ out_basis.T


def _check_variables(process, data, name):
    """Refuse ``data`` unless it holds the process's variables."""
    if not isinstance(data, MultivariateIrregularData):
        raise TypeError(
            f"{name} must be a MultivariateIrregularData, got {type(data).__name__}"
        )
    p = process.n_variables
    if data.n_variables != p:
        raise ValueError(f"{name} has {data.n_variables} variables, the process {p}")


def _observed_terms(process, data, covariates):
    """Each observation's residual from its subject's mean, loadings and noise.

    ``covariates`` holds one value per subject ({} without an effect).
    Returns ``resid`` (n_obs,), ``basis`` (n_obs, M) and the noise variance
    of each observation (n_obs,).
    """
    basis = np.empty((data.times.size, process.score_var.size))
    resid = np.empty(data.times.size)
    per_obs = {k: v[data.subject_index] for k, v in covariates.items()}
    for j in range(process.n_variables):
        on = data.variable == j
        basis[on] = process.basis(j, data.times[on])
        shift = process.covariate_shift(
            j, data.times[on], {k: v[on] for k, v in per_obs.items()}
        )
        resid[on] = data.values[on] - process.mean(j, data.times[on]) - shift
    return resid, basis, process.noise_sd[data.variable] ** 2


def _grid_terms(process, grid):
    """Every variable's loadings and mean on ``grid``, variable-major."""
    p = process.n_variables
    basis = np.concatenate([process.basis(j, grid) for j in range(p)])
    mean = np.concatenate([process.mean(j, grid) for j in range(p)])
    return basis, mean


class MultivariateConditionalMean:
    """Best linear predictor of every variable's curve given all observations.

    For a :class:`~fdaimpute.simulate.MultivariateBasisProcess` the
    covariance of all of a subject's observations, of every variable, is
    known, and the conditional expectation of each variable's curve given
    them all is exact (the best predictor of all, the process being
    Gaussian). Where the process's mean depends on subject covariates
    (``covariate_mean``), each subject's own mean is used: the
    covariate-aware oracle. Needs no fitting.

    Parameters
    ----------
    process : MultivariateBasisProcess
        The process, with positive noise SDs.
    grid : int or array-like, default=None
        Output grid; 101 points on the process's domain by default.

    Attributes
    ----------
    grid_ : ndarray of shape (n_grid,)
        The output grid.
    variables_ : list of str
        The variables, in the order of the output's blocks.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.multivariate_gaussian(n=100, random_state=0)
    >>> oracle = fi.oracle.MultivariateConditionalMean(sim.process)
    >>> oracle.transform(sim.test.data).shape  # 3 variables x 101 times
    (5, 303)
    """

    def __init__(self, process, *, grid=None):
        if not isinstance(process, MultivariateBasisProcess):
            raise TypeError(
                "process must be a MultivariateBasisProcess, got "
                f"{type(process).__name__}"
            )
        if not np.all(process.noise_sd > 0):
            raise ValueError("the multivariate oracle needs positive noise SDs")
        self.process = process
        self.grid = grid

    @property
    def grid_(self):
        grid = 101 if self.grid is None else self.grid
        return resolve_grid(grid, self.process.domain)

    @property
    def variables_(self):
        return list(self.process.variables)

    def fit(self, X=None, y=None):
        """Nothing to learn; returns self."""
        return self

    def _posterior(self, data, with_cov):
        _check_variables(self.process, data, "X")
        resid, basis, noise = _observed_terms(
            self.process, data, self._covariates(data)
        )
        return posterior_scores_by_variable(
            resid, basis, data.offsets, self.process.score_var, noise, with_cov=with_cov
        )

    def _covariates(self, data):
        """The subjects' covariates the process's mean needs ({} if none)."""
        if self.process.covariate_mean is None:
            return {}
        if not data.covariates:
            raise ValueError(
                "the process's mean depends on covariates, and X carries none"
            )
        return data.covariates

    def transform(self, X, return_std=False):
        """Each variable's conditional mean on ``grid_``, variable-major.

        Parameters
        ----------
        X : MultivariateIrregularData
            Subjects.
        return_std : bool, default=False
            Also return the conditional SD of each curve value.

        Returns
        -------
        curves : ndarray of shape (n_subjects, p * n_grid)
            Block ``j`` (columns ``j * n_grid`` to ``(j + 1) * n_grid``) is
            variable ``j``; ``curves.reshape(n, p, n_grid)`` separates them.
        std : ndarray of shape (n_subjects, p * n_grid)
            Only with ``return_std``.
        """
        out = self._posterior(X, return_std)
        scores, cov = out if return_std else (out, None)
        grid = self.grid_
        proc = self.process
        basis, mean = _grid_terms(proc, grid)
        curves = mean + scores @ basis.T
        if proc.covariate_mean is not None:
            shifts = proc.subject_shifts(self._covariates(X), grid)
            curves = curves + shifts.reshape(len(X), -1)
        if not return_std:
            return curves
        var = np.einsum("gk,nkl,gl->ng", basis, cov, basis)
        return curves, np.sqrt(np.clip(var, 0.0, None))
