"""Penalised least squares from sufficient statistics, with a closed-form GCV path.

The fit minimises ``|y - X beta|^2 + lam beta^T P beta`` given only
``X^T X``, ``X^T y``, ``y^T y`` and the number of rows ``n``. With
``X^T X = R^T R`` (Cholesky) and ``R^-T P R^-1 = U diag(s) U^T``, every
quantity of the fit at ``lam`` is a sum over the ``p`` eigenvalues:

    beta = R^-1 U (f / (1 + lam s)),  f = U^T R^-T X^T y,
    RSS  = y^T y - 2 sum f^2 / (1 + lam s) + sum f^2 / (1 + lam s)^2,
    df   = sum 1 / (1 + lam s),

so one ``O(p^3)`` decomposition serves every candidate ``lam`` at ``O(p)``
each, whatever ``n`` is (Xiao et al., 2018, section 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, eigh, solve_triangular
from scipy.optimize import minimize_scalar

# Relative ridge making X^T X positive definite where the data do not
# determine some coefficients (the penalty then decides them).
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
        factor, _ = cho_factor(xtx + _RIDGE * scale * np.eye(p), lower=False)
        self._r = np.triu(factor)
        left = solve_triangular(self._r, penalty, trans="T")
        inner = solve_triangular(self._r, left.T, trans="T")
        s, self._u = eigh((inner + inner.T) / 2)
        self._s = np.clip(s, 0.0, None)
        self._f = self._u.T @ solve_triangular(self._r, xty, trans="T")
        self._yty, self._n = float(yty), float(n)
        self._scale = scale / max(np.trace(penalty) / p, np.finfo(float).tiny)

    def _shrink(self, lam):
        return 1.0 / (1.0 + lam * self._s)

    def criterion(self, lam):
        """GCV ``n RSS / (n - df)^2`` at ``lam`` (``inf`` where ``df >= n``)."""
        shrink = self._shrink(lam)
        f2 = self._f**2
        rss = self._yty - 2.0 * f2 @ shrink + f2 @ shrink**2
        df = shrink.sum()
        if df >= self._n:
            return np.inf
        return self._n * max(rss, 0.0) / (self._n - df) ** 2

    def fit(self, lam):
        """The fit at a given ``lam``."""
        shrink = self._shrink(lam)
        coef = solve_triangular(self._r, self._u @ (self._f * shrink))
        return PenalizedFit(coef, float(lam), float(shrink.sum()), self.criterion(lam))

    def candidates(self):
        """The grid of ``log10(lam)`` searched by :meth:`select`."""
        return np.log10(self._scale) + np.linspace(*_LOG_RANGE, _N_GRID)

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
