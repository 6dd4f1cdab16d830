"""B-spline bases, difference penalties and the symmetric (vech) parametrisation."""

from __future__ import annotations

import numpy as np
from scipy.interpolate import BSpline
from scipy.sparse import csr_matrix


def equal_knots(lo, hi, n_basis, degree):
    """Knot vector of ``n_basis`` B-splines of ``degree`` with equally spaced knots.

    The boundary knots are repeated ``degree + 1`` times, so the basis spans
    exactly ``[lo, hi]`` and sums to one there.
    """
    n_interior = n_basis - degree - 1
    inner = np.linspace(lo, hi, n_interior + 2)
    return np.concatenate([np.full(degree, lo), inner, np.full(degree, hi)])


def design(times, knots, degree):
    """Sparse design matrix ``B[j, a] = b_a(t_j)`` (CSR), times inside the knots."""
    return BSpline.design_matrix(np.asarray(times, float), knots, degree).tocsr()


def evaluate(knots, coef, degree, times, derivative=0, outside="constant"):
    """Spline(s) with coefficients ``coef`` (shape (c,) or (c, K)) at ``times``.

    Beyond the knot range the spline is held at its end value
    (``outside="constant"``) or continued along its end tangent
    (``"linear"``), never as the end polynomial piece.
    """
    t = np.asarray(times, float)
    lo, hi = knots[0], knots[-1]
    inside = np.clip(t, lo, hi)
    spline = BSpline(knots, coef, degree)
    slope = spline.derivative(1)
    if derivative == 0:
        value = spline(inside)
        if outside == "linear":
            step = (t - inside).reshape((-1,) + (1,) * (value.ndim - 1))
            value = value + step * slope(inside)
        return value
    value = spline.derivative(derivative)(inside) if derivative > 1 else slope(inside)
    beyond = (t != inside).reshape((-1,) + (1,) * (value.ndim - 1))
    if outside == "constant" or derivative > 1:
        return np.where(beyond, 0.0, value)
    return value


def difference_penalty(n_basis, order):
    """``D^T D``, ``D`` the ``order``-th differences of ``n_basis`` coefficients."""
    d = np.diff(np.eye(n_basis), n=order, axis=0)
    return d.T @ d


def gram(knots, degree):
    """``G[a, b] = int b_a(t) b_b(t) dt`` over the knot range, exactly.

    Gauss-Legendre quadrature with ``degree + 1`` nodes per knot interval
    integrates the products (polynomials of degree ``2 degree``) exactly.
    """
    breaks = np.unique(knots)
    nodes, weights = np.polynomial.legendre.leggauss(degree + 1)
    half = np.diff(breaks) / 2
    mid = (breaks[1:] + breaks[:-1]) / 2
    t = (mid[:, None] + half[:, None] * nodes).ravel()
    w = (half[:, None] * weights).ravel()
    b = design(t, knots, degree)
    return np.asarray((b.T @ b.multiply(w[:, None])).todense())


def duplication(c):
    """Sparse ``D`` with ``vec(Theta) = D vech(Theta)`` for symmetric ``c x c`` Theta.

    ``vech`` lists the entries ``a <= b`` row by row (``np.triu_indices``).
    """
    rows_a, cols_b = np.triu_indices(c)
    h = rows_a.size
    index = np.arange(h)
    rows = np.concatenate([rows_a * c + cols_b, cols_b * c + rows_a])
    cols = np.concatenate([index, index])
    off = rows_a != cols_b
    keep = np.concatenate([np.ones(h, bool), off])
    return csr_matrix((np.ones(keep.sum()), (rows[keep], cols[keep])), shape=(c * c, h))


def unvech(theta, c):
    """The symmetric ``c x c`` matrix whose upper triangle is ``theta``."""
    out = np.zeros((c, c))
    out[np.triu_indices(c)] = theta
    return out + np.triu(out, 1).T


def check_basis_sizes(owner, sizes, least, why):
    """Raise a ValueError naming the basis size below ``least``.

    Parameters
    ----------
    owner : str
        The imputer's class name, for the message.
    sizes : dict of str to int or "auto"
        The basis-size parameters by name (``"auto"`` is not checked).
    least : int
        The smallest size the spline degree (and penalty) allow.
    why : str
        The parameters that set ``least``, e.g. ``"degree=3"``.
    """
    for name, value in sizes.items():
        if value != "auto" and value < least:
            raise ValueError(
                f"{owner}: {name}={value} is too small for {why}; "
                f"it must be at least {least}"
            )
