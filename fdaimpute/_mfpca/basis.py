"""A cubic B-spline basis made orthonormal in L2 over the time range.

With ``G = R^T R`` the Cholesky factorisation of the B-splines' Gram matrix
(exact, :func:`fdaimpute._fpca.splines.gram`), the functions
``e(t) = R^-T b(t)`` are orthonormal: ``int e e^T = R^-T G R^-1 = I``. A
function ``e(t)^T c`` is then the spline ``b(t)^T R^-1 c``, so orthonormal
columns of ``C`` give orthonormal functions and every spline tool (values,
derivatives, the behaviour beyond the range) applies to ``R^-1 C``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cholesky, solve_triangular

from fdaimpute._fpca.splines import design, equal_knots, gram


@dataclass
class OrthonormalBasis:
    """``n_basis`` orthonormalised B-splines of ``degree`` on ``[lo, hi]``.

    Attributes
    ----------
    knots : ndarray
        Knot vector of the underlying B-splines (equally spaced).
    degree : int
    factor : ndarray of shape (n_basis, n_basis)
        Upper-triangular ``R`` with ``G = R^T R``.
    """

    knots: np.ndarray
    degree: int
    factor: np.ndarray

    @classmethod
    def build(cls, lo, hi, n_basis, degree=3):
        """The basis of ``n_basis`` functions over ``[lo, hi]``."""
        knots = equal_knots(lo, hi, n_basis, degree)
        return cls(knots, degree, cholesky(gram(knots, degree), lower=False))

    @property
    def size(self):
        """Number of basis functions ``M``."""
        return self.factor.shape[0]

    def rows(self, times):
        """``e(t)^T`` at each time inside the range, shape ``(len(times), M)``."""
        b = design(times, self.knots, self.degree).toarray()
        return solve_triangular(self.factor, b.T, trans="T").T

    def spline_coef(self, coef):
        """B-spline coefficients ``R^-1 c`` of the function(s) ``e^T c``."""
        return solve_triangular(self.factor, coef)

    def from_spline(self, theta):
        """``R theta R^T``: a kernel ``b^T theta b`` in the orthonormal basis."""
        return self.factor @ theta @ self.factor.T
