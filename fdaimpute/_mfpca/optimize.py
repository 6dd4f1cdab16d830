"""Maximum likelihood on the Stiefel manifold: Riemannian L-BFGS with a QR retraction.

The unknowns are ``C`` (``M x K``, orthonormal columns: a point of the
Stiefel manifold), ``log lambda`` and ``log sigma^2`` (unconstrained). The
search space is their product, with the Euclidean metric of the embedding:

- the Riemannian gradient in ``C`` is the Euclidean one projected on the
  tangent space, ``G - C sym(C^T G)``; in the log-parameters it is the
  plain gradient;
- a step ``xi`` is retracted by ``C <- qf(C + xi)`` (the Q factor of a QR
  decomposition, signs fixed so the R factor has a positive diagonal);
- the L-BFGS memory (steps and gradient changes) is carried to the new
  point by projecting it on the new tangent space (vector transport by
  projection), and the two-loop recursion gives a quasi-Newton direction;
- an Armijo backtracking line search makes every accepted step decrease
  the negative log-likelihood, so the likelihood never decreases.

Each iteration costs one likelihood-and-gradient evaluation (plus one per
backtracking step), ``O(n M^2 K)`` on stacked arrays.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from fdaimpute._mfpca.likelihood import nll_and_gradient

_MEMORY = 10
_ARMIJO = 1e-4
_MAX_HALVINGS = 40
# Log-parameters are kept in a range where exp() and the solves stay finite.
_LOG_BOUND = 60.0


@dataclass
class StiefelResult:
    """The optimum and the path to it.

    Attributes
    ----------
    coef : ndarray of shape (M, K)
    log_lam : ndarray of shape (K,)
    log_s2 : float
    history : list of float
        Negative log-likelihood at the start and after every iteration
        (non-increasing).
    converged : bool
    """

    coef: np.ndarray
    log_lam: np.ndarray
    log_s2: float
    history: list = field(default_factory=list)
    converged: bool = False


def qf(a):
    """Q factor of ``a`` with the signs making ``R``'s diagonal positive."""
    q, r = np.linalg.qr(a)
    signs = np.where(np.diagonal(r) < 0, -1.0, 1.0)
    return q * signs


def _project(coef, v):
    """Projection of an ``M x K`` matrix on the tangent space at ``coef``."""
    sym = coef.T @ v
    return v - coef @ ((sym + sym.T) / 2)


class _Tangent:
    """A tangent vector: a matrix part and a vector part (log-parameters)."""

    __slots__ = ("mat", "vec")

    def __init__(self, mat, vec):
        self.mat, self.vec = mat, vec

    def dot(self, other):
        return float(np.sum(self.mat * other.mat) + self.vec @ other.vec)

    def scale(self, a):
        return _Tangent(a * self.mat, a * self.vec)

    def add(self, other, a=1.0):
        return _Tangent(self.mat + a * other.mat, self.vec + a * other.vec)

    def moved_to(self, coef):
        return _Tangent(_project(coef, self.mat), self.vec)


def _evaluate(stats, coef, theta, scale):
    try:
        value, g_c, g_lam, g_s2 = nll_and_gradient(stats, coef, theta[:-1], theta[-1])
    except np.linalg.LinAlgError:
        return np.inf, None
    if not np.isfinite(value):
        return np.inf, None
    grad = _Tangent(_project(coef, g_c) * scale, np.append(g_lam, g_s2) * scale)
    return value * scale, grad


def _direction(grad, memory):
    """The L-BFGS two-loop recursion: ``-H grad``."""
    q = grad.scale(1.0)
    alphas = []
    pairs = [(s, y, s.dot(y)) for s, y in memory]
    pairs = [(s, y, 1.0 / sy) for s, y, sy in pairs if sy > 0]
    for s, y, rho in reversed(pairs):
        a = rho * s.dot(q)
        alphas.append(a)
        q = q.add(y, -a)
    if pairs:
        s, y, rho = pairs[-1]
        q = q.scale(1.0 / (rho * y.dot(y)))
    for (s, y, rho), a in zip(pairs, reversed(alphas)):
        b = rho * y.dot(q)
        q = q.add(s, a - b)
    return q.scale(-1.0)


def maximize_likelihood(stats, coef, log_lam, log_s2, *, max_iter=500, tol=1e-9):
    """Maximise the likelihood from a starting point.

    Parameters
    ----------
    stats : SubjectStats
    coef : ndarray of shape (M, K)
        Starting ``C`` (made orthonormal first).
    log_lam : ndarray of shape (K,)
    log_s2 : float
    max_iter : int, default=500
    tol : float, default=1e-9
        Stop when an iteration lowers the mean negative log-likelihood per
        observation by less than ``tol`` (relative to ``max(1, |value|)``),
        or the gradient's norm falls below ``tol``.

    Returns
    -------
    StiefelResult
    """
    scale = 1.0 / max(float(stats.count.sum()), 1.0)
    coef = qf(np.asarray(coef, float))
    theta = np.append(np.asarray(log_lam, float), float(log_s2))
    theta = np.clip(theta, -_LOG_BOUND, _LOG_BOUND)
    value, grad = _evaluate(stats, coef, theta, scale)
    if grad is None:
        raise np.linalg.LinAlgError("the likelihood is not finite at the start")
    history = [value / scale]
    memory = deque(maxlen=_MEMORY)
    converged = False
    for _ in range(max_iter):
        direction = _direction(grad, memory)
        slope = direction.dot(grad)
        if not slope < 0:
            memory.clear()
            direction, slope = grad.scale(-1.0), -grad.dot(grad)
        step = 1.0 if memory else min(1.0, 1.0 / np.sqrt(grad.dot(grad)))
        for _ in range(_MAX_HALVINGS):
            new_coef = qf(coef + step * direction.mat)
            new_theta = np.clip(theta + step * direction.vec, -_LOG_BOUND, _LOG_BOUND)
            new_value, new_grad = _evaluate(stats, new_coef, new_theta, scale)
            if new_value <= value + _ARMIJO * step * slope:
                break
            step /= 2
        else:
            converged = True  # no decrease along a descent direction: stationary
            break
        s = direction.scale(step).moved_to(new_coef)
        y = new_grad.add(grad.moved_to(new_coef), -1.0)
        memory = deque(
            ((a.moved_to(new_coef), b.moved_to(new_coef)) for a, b in memory),
            maxlen=_MEMORY,
        )
        if s.dot(y) > 1e-12 * np.sqrt(s.dot(s) * y.dot(y)):
            memory.append((s, y))
        drop = value - new_value
        coef, theta, value, grad = new_coef, new_theta, new_value, new_grad
        history.append(value / scale)
        if drop < tol * max(1.0, abs(value)) or np.sqrt(grad.dot(grad)) < tol:
            converged = True
            break
    return StiefelResult(coef, theta[:-1], float(theta[-1]), history, converged)
