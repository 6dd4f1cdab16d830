"""The oracle: conditional expectation with the process's true covariance.

For a process with known mean, covariance and noise variance, the best
linear predictor of ``X_i(s)`` from subject ``i``'s observations is

    mu(s) + C(s, t_i) (C(t_i, t_i) + sigma^2 I)^{-1} (y_i - mu(t_i)),

the limit that benchmarks report against (it is the exact conditional mean
when the scores are Gaussian).
"""

from __future__ import annotations

import numpy as np

from fdaimpute._pace.scores import posterior_scores
from fdaimpute._params import Instance, validate_params
from fdaimpute._validation import resolve_grid
from fdaimpute.base import BaseImputer
from fdaimpute.simulate import BasisProcess

__all__ = ["ConditionalMean"]


class ConditionalMean(BaseImputer):
    """Best linear predictor of each curve given the true process.

    Needs no fitting: ``transform`` works at once (``fit`` is accepted for
    use in pipelines and does nothing but check the input).

    Parameters
    ----------
    process : fdaimpute.simulate.BasisProcess
        The data-generating process, with its ``noise_sd``.
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
        "process": [Instance(BasisProcess, "a BasisProcess (fdaimpute.simulate)")]
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

    def _posterior(self, data, with_cov=False):
        """Posterior mean (and covariance, else None) of the scores: PACE's code."""
        proc = self.process
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
        basis = self.process.basis(grid)
        curves = self.process.mean(grid) + mean_xi @ basis.T
        if not return_std:
            return curves
        var = np.einsum("mp,npq,mq->nm", basis, cov_xi, basis)
        return curves, np.sqrt(np.clip(var, 0.0, None))

    def _derivative_grid(self, data, grid):
        mean_xi, _ = self._posterior(data)
        return self.process.derivative(mean_xi, grid)

    def _predict_ragged(self, data, times, offsets):
        mean_xi, _ = self._posterior(data)
        subject = np.repeat(np.arange(len(data)), np.diff(offsets))
        b = self.process.basis(times)
        return self.process.mean(times) + np.einsum("ip,ip->i", b, mean_xi[subject])
