"""Two functional variables coupled through a non-linear function of one path.

A Gaussian path ``Z(t) = sum_m xi_m phi_m(t)`` (Fourier, unit-variance
coefficients) drives both variables: the first sees ``Z`` itself, the
second a mix of ``Z`` and ``Z^2 - E Z^2``. The square is a finite expansion
in products of the basis, ``Z^2 - E Z^2 = sum_{a <= b} eta_ab psi_ab`` with
``eta_ab = xi_a xi_b - [a = b]`` and ``psi_ab = (2 - [a = b]) phi_a phi_b``;
the ``eta`` are uncorrelated with each other and with the ``xi`` (Gaussian
third moments vanish), with variances 1 (``a < b``) and 2 (``a = b``). So the
pair is a :class:`MultivariateBasisProcess` in the scores ``(xi, eta)``
whose second moments are those of the process: its multivariate oracle is
the best *linear* predictor. The scores are not Gaussian, and the best
predictor of all (:func:`fdaimpute.oracle.posterior_mean`) uses the first
variable's path to fill in the second's square, which no linear predictor
can: with ``linear_weight = 0`` the two variables are uncorrelated at every
pair of times, and the linear oracle learns nothing about one from the other.
"""

from __future__ import annotations

import numpy as np

from fdaimpute._sim.multivariate_process import MultivariateBasisProcess


class QuadraticCouplingProcess(MultivariateBasisProcess):
    """A Gaussian path and a variable mixing it with its centred square.

    ``X_0(t) = s_0 [sin(pi t) + Z(t) / sqrt(v)]`` and ``X_1(t) = s_1
    [t / 2 + w Z(t) / sqrt(v) + sqrt(1 - w^2) (Z(t)^2 - v) / (sqrt(2) v)]``
    with ``Z(t) = sum_{k=1}^{H} (a_k sin(2 pi k t) + b_k cos(2 pi k t)) / k``,
    ``v = Var Z(t) = sum_k 1 / k^2`` and unit-variance Gaussian ``a_k,
    b_k``; both random parts have unit variance at every time.

    Parameters
    ----------
    n_harmonics : int, default=3
        Frequencies ``H`` of the path.
    linear_weight : float, default=0.5
        ``w`` in ``[0, 1]``: the share of the second variable that is linear
        in the path (1: a Gaussian pair; 0: only the square).
    scales : pair of float, default=(1.0, 4.0)
        ``s_0, s_1``.
    noise_sd : float or pair, default=0.0
        Measurement-error SD of each variable.
    variables : list of str, default=None
        Names; default ``"x0", "x1"``.

    Attributes
    ----------
    n_latent : int
        Number of Gaussian scores ``xi`` (``2 H``); they come first in every
        score vector, the products ``eta`` after them.
    linear_variables : tuple of int
        The variables that are linear in ``xi`` alone (``(0,)``; also the
        second when ``w = 1``).
    """

    def __init__(
        self,
        n_harmonics=3,
        linear_weight=0.5,
        scales=(1.0, 4.0),
        noise_sd=0.0,
        variables=None,
    ):
        if not 0.0 <= float(linear_weight) <= 1.0:
            raise ValueError(f"linear_weight must be in [0, 1], got {linear_weight!r}")
        scales = np.broadcast_to(np.asarray(scales, dtype=np.float64), (2,)).copy()
        k = np.arange(1, int(n_harmonics) + 1)
        m = 2 * k.size
        a, b = np.triu_indices(m)
        w = float(linear_weight)
        v = float(np.sum(1.0 / k**2))

        def path_basis(t):
            arg = 2 * np.pi * np.multiply.outer(np.asarray(t, float), k)
            return np.concatenate([np.sin(arg) / k, np.cos(arg) / k], axis=-1)

        def square_basis(t):
            phi = path_basis(t)
            return np.where(a == b, 1.0, 2.0) * phi[:, a] * phi[:, b]

        def basis0(t):
            zeros = np.zeros((np.size(t), a.size))
            return scales[0] * np.hstack([path_basis(t) / np.sqrt(v), zeros])

        def basis1(t):
            linear = w * path_basis(t) / np.sqrt(v)
            square = np.sqrt(1.0 - w * w) * square_basis(t) / (np.sqrt(2.0) * v)
            return scales[1] * np.hstack([linear, square])

        def mean0(t):
            return scales[0] * np.sin(np.pi * np.asarray(t, float))

        def mean1(t):
            return scales[1] * 0.5 * np.asarray(t, float)

        score_var = np.concatenate([np.ones(m), np.where(a == b, 2.0, 1.0)])
        super().__init__(
            [mean0, mean1],
            [basis0, basis1],
            score_var,
            noise_sd,
            ["x0", "x1"] if variables is None else variables,
        )
        self.n_harmonics = int(n_harmonics)
        self.linear_weight = w
        self.scales = scales
        self.n_latent = m
        self.linear_variables = (0, 1) if w == 1.0 else (0,)
        self._pairs = (a, b)

    def sample_scores(self, n, random_state=None):
        """Scores ``(xi, eta)`` of ``n`` subjects from Gaussian ``xi``, ``(n, M)``."""
        rng = np.random.default_rng(random_state)
        return self.scores_of_latent(rng.standard_normal((n, self.n_latent)))

    def scores_of_latent(self, xi):
        """The full score vectors ``(xi, eta)`` of latent draws ``xi``.

        Parameters
        ----------
        xi : ndarray of shape (..., n_latent)

        Returns
        -------
        ndarray of shape (..., n_latent + n_latent (n_latent + 1) / 2)
        """
        a, b = self._pairs
        eta = xi[..., a] * xi[..., b] - (a == b)
        return np.concatenate([xi, eta], axis=-1)

    def __repr__(self):
        return (
            f"QuadraticCouplingProcess(n_harmonics={self.n_harmonics}, "
            f"linear_weight={self.linear_weight})"
        )
