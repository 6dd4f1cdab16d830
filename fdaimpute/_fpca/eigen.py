"""Eigen-analysis of a smoothed covariance surface, and the choice of ``K``."""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from scipy.linalg import eigh

from fdaimpute._fpca.scores import neg2_loglik


def quadrature_weights(grid, rule):
    """Quadrature weights on ``grid``: ``"trapezoid"`` or ``"uniform"`` (fdapace)."""
    if rule == "uniform":
        return np.full(grid.size, grid[1] - grid[0])
    w = np.zeros(grid.size)
    d = np.diff(grid)
    w[:-1] += d / 2
    w[1:] += d / 2
    return w


def eigen_analysis(cov, grid, *, max_components, rule="trapezoid"):
    """Eigenpairs of the integral operator with kernel ``cov`` on ``grid``.

    Solves ``int C(s, t) phi(t) dt = lambda phi(s)`` by quadrature, keeps
    the positive eigenvalues and normalises ``int phi^2 = 1`` by the
    trapezoid rule (as fdapace does).

    Parameters
    ----------
    cov : ndarray of shape (G, G)
        Covariance surface on ``grid``.
    grid : ndarray of shape (G,)
        Its grid.
    max_components : int
        Most eigenfunctions to return.
    rule : {"trapezoid", "uniform"}, default="trapezoid"
        Quadrature rule of the operator.

    Returns
    -------
    values : ndarray
        All positive eigenvalues, decreasing.
    phi : ndarray of shape (G, min(max_components, len(values)))
        Eigenfunctions of the leading eigenvalues.
    """
    values, phi = weighted_eigenpairs(
        cov,
        quadrature_weights(grid, rule),
        max_components,
        "the smoothed covariance has no positive eigenvalue; the data "
        "show no variation between subjects (zero variance?)",
    )
    phi = phi / np.sqrt(trapezoid(phi**2, grid))
    return values, phi


def weighted_eigenpairs(cov, weights, max_components, empty_message):
    """Positive eigenvalues and leading eigenvectors of a quadrature operator.

    The operator ``C diag(weights)``, solved in its symmetric form
    ``W^1/2 C W^1/2``.

    Returns
    -------
    values : ndarray
        All positive eigenvalues, decreasing.
    phi : ndarray of shape (G, min(max_components, len(values)))
        The operator's eigenvectors of the leading ones, not normalised.

    Raises
    ------
    ValueError
        ``empty_message``, when no eigenvalue is positive.
    """
    root = np.sqrt(weights)
    values, vectors = eigh(cov * root[:, None] * root[None, :])
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    positive = values > 0
    if not positive.any():
        raise ValueError(empty_message)
    values = values[positive]
    k = min(int(max_components), values.size)
    return values, vectors[:, :k] / root[:, None]


def trapezoid(y, x):
    """Trapezoid rule along axis 0."""
    d = np.diff(x)
    return np.tensordot(d, 0.5 * (y[1:] + y[:-1]), axes=(0, 0))


def orient_by_peak(phi):
    """Signs making each eigenfunction's largest absolute value positive."""
    peak = phi[np.argmax(np.abs(phi), axis=0), np.arange(phi.shape[1])]
    return phi * np.where(peak >= 0, 1.0, -1.0)


def orient_by_mean(phi, mean):
    """Signs making each eigenfunction's inner product with ``mean`` >= 0 (fdapace)."""
    return phi * np.where(mean @ phi >= 0, 1.0, -1.0)


def choose_n_components(
    rule, eigenvalues, fve, *, k_cv=None, fve_threshold=0.99, loglik_data=None
):
    """The number of components of PACEImputer's ``n_components`` rule.

    Parameters
    ----------
    rule : int or {"cv", "fve", "aic", "bic"}
        A number (capped at the available components, with a warning),
        cross-validation's choice ``k_cv``, the first ``K`` whose fraction
        of variance explained reaches ``fve_threshold``, or fdapace's AIC /
        BIC (stop at the first increase).
    eigenvalues : ndarray of shape (p,)
        The available eigenvalues.
    fve : ndarray of shape (p,)
        Cumulative fraction of variance explained.
    k_cv : int, default=None
        ``K`` chosen by cross-validation (for ``"cv"``).
    fve_threshold : float, default=0.99
        Threshold of ``"fve"``.
    loglik_data : tuple, default=None
        For AIC / BIC: ``(resid, basis, offsets, sigma2)`` of the training
        observations, ``basis`` holding all ``p`` eigenfunctions.

    Returns
    -------
    int
    """
    available = eigenvalues.size
    if isinstance(rule, numbers.Integral):
        if rule > available:
            warnings.warn(
                f"n_components={rule} but only {available} positive "
                f"eigenvalue(s) are available; using {available}",
                UserWarning,
                stacklevel=6,
            )
        return min(int(rule), available)
    if rule == "cv":
        return min(int(k_cv), available)
    if rule == "fve":
        buff = 100 * np.finfo(float).eps
        hit = np.flatnonzero(fve >= fve_threshold - buff)
        return int(hit[0]) + 1 if hit.size else available
    resid, basis, offsets, sigma2 = loglik_data
    n_subjects = offsets.size - 1
    penalty = 2.0 if rule == "aic" else np.log(n_subjects)
    best_k, best = 1, np.inf
    for k in range(1, available + 1):
        crit = (
            neg2_loglik(resid, basis[:, :k], offsets, eigenvalues[:k], sigma2)
            + penalty * k
        )
        if crit > best:
            break
        best_k, best = k, crit
    return best_k
