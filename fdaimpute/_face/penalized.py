"""Penalised least squares from sufficient statistics, with a closed-form GCV path.

The fit minimises ``|y - X beta|^2 + lam beta^T P beta`` given only
``X^T X``, ``X^T y``, ``y^T y`` and the number of rows ``n``. Both matrices
are diagonalised at once: with ``X^T X + kappa P = R^T R`` (Cholesky) and
``R^-T X^T X R^-1 = U diag(m) U^T`` (``0 <= m <= 1``, and then
``R^-T kappa P R^-1 = U diag(1 - m) U^T``), every quantity of the fit at
``lam`` is a sum over the ``p`` directions, with ``d = m + (lam / kappa) (1 - m)``:

    beta = R^-1 U (f / d),  f = U^T R^-T X^T y,
    RSS  = y^T y - 2 sum f^2 / d + sum m f^2 / d^2,
    df   = sum m / d,

so one ``O(p^3)`` decomposition serves every candidate ``lam`` at ``O(p)``
each, whatever ``n`` is (Xiao et al., 2018, section 3). Factoring
``X^T X + kappa P`` rather than ``X^T X`` alone keeps the decomposition
well conditioned where the data leave coefficients undetermined (a
tensor-product surface on a few subjects' times): a factor of a nearly
singular ``X^T X`` made the fit follow the rounding of the machine's BLAS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, eigh, solve_triangular
from scipy.optimize import minimize_scalar

# Relative ridge making X^T X + kappa P positive definite where neither the
# data nor the penalty determine some coefficients (only then).
_RIDGE = 1e-10
# Candidate log10(lam), relative to trace(X^T X) / trace(P).
_LOG_RANGE = (-10.0, 8.0)
_N_GRID = 73


@dataclass
class PenalizedFit:
    """A penalised least-squares fit.

    Attributes
    ----------
    coef : ndarray of shape (p,)
    lam : float
        The smoothing parameter used.
    df : float
        Effective degrees of freedom (trace of the hat matrix).
    gcv : float
        The GCV score at ``lam``.
    """

    coef: np.ndarray
    lam: float
    df: float
    gcv: float


class PenalizedPath:
    """Every fit ``lam -> beta(lam)`` of one penalised least-squares problem.

    Parameters
    ----------
    xtx : ndarray of shape (p, p)
    xty : ndarray of shape (p,)
    yty : float
    n : float
        Number of rows of ``X`` (the GCV's sample size).
    penalty : ndarray of shape (p, p)
        Positive semi-definite penalty matrix ``P``.
    """

    def __init__(self, xtx, xty, yty, n, penalty):
        p = xtx.shape[0]
        scale = max(np.trace(xtx) / p, np.finfo(float).tiny)
        self._kappa = scale / max(np.trace(penalty) / p, np.finfo(float).tiny)
        both = xtx + self._kappa * penalty
        try:
            factor, _ = cho_factor(both, lower=False)
        except np.linalg.LinAlgError:
            factor, _ = cho_factor(both + _RIDGE * scale * np.eye(p), lower=False)
        self._r = np.triu(factor)
        left = solve_triangular(self._r, xtx, trans="T")
        inner = solve_triangular(self._r, left.T, trans="T")
        m, self._u = eigh((inner + inner.T) / 2)
        self._m = np.clip(m, 0.0, 1.0)
        self._f = self._u.T @ solve_triangular(self._r, xty, trans="T")
        self._yty, self._n = float(yty), float(n)

    def _terms(self, lam):
        """``f / d`` and ``m / d`` of each direction at ``lam``."""
        d = self._m + (lam / self._kappa) * (1.0 - self._m)
        d = np.maximum(d, np.finfo(float).tiny)
        return self._f / d, self._m / d

    def _gcv(self, gamma, df):
        """GCV of the fit with direction coefficients ``gamma`` and ``df``."""
        if df >= self._n:
            return np.inf
        rss = self._yty - 2.0 * self._f @ gamma + (self._m * gamma) @ gamma
        return self._n * max(rss, 0.0) / (self._n - df) ** 2

    def criterion(self, lam):
        """GCV ``n RSS / (n - df)^2`` at ``lam`` (``inf`` where ``df >= n``)."""
        gamma, shrink = self._terms(lam)
        return self._gcv(gamma, shrink.sum())

    def fit(self, lam):
        """The fit at a given ``lam``."""
        gamma, shrink = self._terms(lam)
        coef = solve_triangular(self._r, self._u @ gamma)
        df = float(shrink.sum())
        return PenalizedFit(coef, float(lam), df, self._gcv(gamma, df))

    def candidates(self):
        """The grid of ``log10(lam)`` searched by :meth:`select`."""
        return np.log10(self._kappa) + np.linspace(*_LOG_RANGE, _N_GRID)

    def select(self):
        """The fit at the ``lam`` minimising GCV (grid search, then refined)."""
        logs = self.candidates()
        scores = np.array([self.criterion(10.0**x) for x in logs])
        if not np.isfinite(scores).any():
            raise ValueError(
                "no smoothing parameter leaves degrees of freedom for the "
                "residuals; too few observations for this many basis functions"
            )
        best = int(np.argmin(scores))
        step = logs[1] - logs[0]
        found = minimize_scalar(
            lambda x: self.criterion(10.0**x),
            bounds=(logs[best] - step, logs[best] + step),
            method="bounded",
            options={"xatol": 1e-3},
        )
        x = found.x if found.fun <= scores[best] else logs[best]
        return self.fit(10.0**x)


def held_out_error(coef, xtx, xty, yty):
    """``|y - X coef|^2`` of held-out rows from their sufficient statistics."""
    return float(yty - 2.0 * coef @ xty + coef @ xtx @ coef)
