"""Two-dimensional local-linear smoothers of binned raw covariances.

:func:`smooth_surface` is the isotropic product-kernel smoother (fdapace's),
:class:`RotatedSmoother` the default one, with its own bandwidth along and
across the diagonal, and :func:`smooth_diagonal_rotated` the rotated fit at
the diagonal that fdapace uses for the noise variance.
"""

from __future__ import annotations

import numpy as np

from fdaimpute._numerics.local_linear import _kernel_matrices
from fdaimpute._pace.binning import regular_step


def _isotropic_system(moments, points, bandwidth, kernel):
    """Normal equations of the product-kernel local-linear fit at ``points^2``."""
    k0, k1, k2 = _kernel_matrices(moments.centres, points, bandwidth, kernel, 2)
    a0, a1, a2 = k0 @ moments.count, k1 @ moments.count, k2 @ moments.count
    s00, s10, s01 = a0 @ k0.T, a1 @ k0.T, a0 @ k1.T
    s20, s11, s02 = a2 @ k0.T, a1 @ k1.T, a0 @ k2.T
    b0, b1 = k0 @ moments.total, k1 @ moments.total
    t00, t10, t01 = b0 @ k0.T, b1 @ k0.T, b0 @ k1.T
    mat = np.stack(
        [
            np.stack([s00, s10, s01], -1),
            np.stack([s10, s20, s11], -1),
            np.stack([s01, s11, s02], -1),
        ],
        -2,
    )
    return mat, np.stack([t00, t10, t01], -1)


def smooth_surface(moments, points, bandwidth, kernel="gaussian"):
    """2-D local-linear smoother of the raw covariances at ``points x points``.

    Product kernel with one bandwidth in both directions; each moment sum
    is a pair of matrix products, ``K_a W K_b^T``.

    Parameters
    ----------
    moments : CovMoments
        Binned raw covariances.
    points : ndarray of shape (G,)
        Output grid.
    bandwidth : float
        Bandwidth in both directions.
    kernel : str, default="gaussian"
        Kernel name.

    Returns
    -------
    ndarray of shape (G, G)
        Symmetrised estimate.
    """
    mat, rhs = _isotropic_system(moments, points, bandwidth, kernel)
    fit = _solve3(mat, rhs, "covariance smoothing", bandwidth)
    return 0.5 * (fit + fit.T)


def surface_with_hat(moments, points, bandwidth, kernel):
    """:func:`smooth_surface` unsymmetrised, and each point's weight on its own fit.

    Returns
    -------
    fit, hat : ndarray of shape (G, G)
    """
    mat, rhs = _isotropic_system(moments, points, bandwidth, kernel)
    fit = _solve3(mat, rhs, "covariance smoothing", bandwidth)
    e0 = np.zeros(3)
    e0[0] = 1.0
    hat = np.linalg.solve(mat, np.broadcast_to(e0, mat.shape[:-1])[..., None])
    return fit, hat[..., 0, 0]


def _solve3(a, rhs, what, bandwidth):
    """Intercept of batched symmetric 3x3 systems; a clear error if singular."""
    scale = np.abs(a[..., 0, 0]) * np.abs(a[..., 1, 1]) * np.abs(a[..., 2, 2])
    det = np.linalg.det(a)
    bad = ~(np.abs(det) > 1e-10 * scale) | ~(scale > 0)
    if np.any(bad):
        raise ValueError(
            f"{what}: too few raw covariances near some work-grid point for "
            f"bandwidth {bandwidth:.4g}; use a larger bandwidth"
        )
    return np.linalg.solve(a, rhs[..., None])[..., 0, 0]


def smooth_diagonal_rotated(moments, points, bandwidth, kernel="gaussian"):
    """Smooth the off-diagonal raw covariances *at* the diagonal ``(t, t)``.

    Local fit in rotated coordinates ``u = (s + t)/sqrt(2)`` (along the
    diagonal, linear) and ``v = (s - t)/sqrt(2)`` (across it, quadratic and
    even), so the estimate at the diagonal is not pulled down by the ridge
    of the covariance there. This is fdapace's estimate of ``Var X(t)``.

    Returns
    -------
    ndarray of shape (len(points),)
    """
    k = _kernel_matrices(moments.centres, points, bandwidth, kernel, 4)

    def diag_moment(mat, a, b):
        return np.einsum("gb,gb->g", k[a] @ mat, k[b])

    m = {}
    for a in range(5):
        for b in range(5 - a):
            m[a, b] = diag_moment(moments.count, a, b)
    y = {
        (a, b): diag_moment(moments.total, a, b)
        for a, b in ((0, 0), (1, 0), (0, 1), (2, 0), (1, 1), (0, 2))
    }
    s2 = np.sqrt(2.0)
    v2 = (m[2, 0] - 2 * m[1, 1] + m[0, 2]) / 2
    u1 = (m[1, 0] + m[0, 1]) / s2
    v4 = (m[4, 0] - 4 * m[3, 1] + 6 * m[2, 2] - 4 * m[1, 3] + m[0, 4]) / 4
    v2u1 = (m[3, 0] - m[2, 1] - m[1, 2] + m[0, 3]) / (2 * s2)
    u2 = (m[2, 0] + 2 * m[1, 1] + m[0, 2]) / 2
    mat = np.stack(
        [
            np.stack([m[0, 0], v2, u1], -1),
            np.stack([v2, v4, v2u1], -1),
            np.stack([u1, v2u1, u2], -1),
        ],
        -2,
    )
    rhs = np.stack(
        [
            y[0, 0],
            (y[2, 0] - 2 * y[1, 1] + y[0, 2]) / 2,
            (y[1, 0] + y[0, 1]) / s2,
        ],
        -1,
    )
    return _solve3(mat, rhs, "diagonal smoothing", bandwidth)


class RotatedSmoother:
    """Local fit of the raw covariances in rotated coordinates, on a regular grid.

    Coordinates ``u = (s + t)/sqrt(2)`` (along the diagonal) and ``v = (s -
    t)/sqrt(2)`` (across it), a product kernel with its own bandwidth in
    each direction, and a local polynomial that is linear in ``u`` and
    quadratic in ``v``. Covariance surfaces are typically much smoother
    along the diagonal than across it (a rough process has a ridge there),
    so a long bandwidth along and a short one across removes most of the
    smoothing bias of an isotropic smoother at the same variance; the
    quadratic term lets the fit follow the ridge to the diagonal, which
    the raw products ``j != k`` never reach.

    With regular bins ``c_p = lo + p * step`` every cell ``(p, q)`` sits at
    ``u`` index ``p + q`` and ``v`` index ``p - q``, and the work-grid point
    ``(g, h)`` at ``g + h`` and ``g - h``: the kernel is separable in
    ``(u, v)``, so each moment sum is two matrix products.

    Parameters
    ----------
    moments : CovMoments
        Binned raw covariances on a regular grid of centres.
    work_grid : ndarray of shape (G,)
        Regular output grid.
    kernel : str
        Kernel name.
    """

    def __init__(self, moments, work_grid, kernel="gaussian"):
        centres = moments.centres
        n_b = centres.size
        self.step = regular_step(centres)
        if self.step is None:
            raise ValueError(
                "the rotated covariance smoother needs bins on a regular grid; "
                "use binning='auto' or an integer number of bins"
            )
        n_g = work_grid.size
        if n_g > 2 and regular_step(work_grid) is None:
            raise ValueError("the work grid must be equally spaced")
        self.kernel = kernel
        self.n_b, self.n_g = n_b, n_g
        root2 = np.sqrt(2.0)
        lo = centres[0]
        self.u_in = (2 * lo + np.arange(2 * n_b - 1) * self.step) / root2
        self.v_in = (np.arange(2 * n_b - 1) - (n_b - 1)) * self.step / root2
        d = (work_grid[-1] - work_grid[0]) / max(n_g - 1, 1)
        self.u_out = (2 * work_grid[0] + np.arange(2 * n_g - 1) * d) / root2
        self.v_out = (np.arange(2 * n_g - 1) - (n_g - 1)) * d / root2
        p, q = np.meshgrid(np.arange(n_b), np.arange(n_b), indexing="ij")
        self._cells = ((p + q).ravel(), (p - q + n_b - 1).ravel())
        self.count = self._to_uv(moments.count)
        self.total = self._to_uv(moments.total)
        g, h = np.meshgrid(np.arange(n_g), np.arange(n_g), indexing="ij")
        self._all = (g.ravel(), h.ravel())
        self._lower = np.tril_indices(n_g)

    def _to_uv(self, cells):
        out = np.zeros((2 * self.n_b - 1, 2 * self.n_b - 1))
        out[self._cells] = cells.ravel()
        return out

    def _left(self, ku, w):
        # only cells with i + j = n_b - 1 (mod 2) are non-zero
        out = np.zeros((ku.shape[0], w.shape[1]))
        for i0 in (0, 1):
            cols = slice((self.n_b - 1 - i0) % 2, None, 2)
            out[:, cols] = ku[:, i0::2] @ w[i0::2, cols]
        return out

    def _right(self, left, kv, points, v0):
        # kv holds the rows of v indices v0, v0 + 1, ...; only outputs with
        # m + n = n_g - 1 (mod 2) are needed
        out = np.zeros((left.shape[0], kv.shape[0]))
        for m0 in (0, 1):
            cols = slice((self.n_g - 1 - m0 - v0) % 2, None, 2)
            out[m0::2, cols] = left[m0::2] @ kv[cols].T
        return out[points]

    def __call__(
        self, h_along, h_across, *, ridge=True, return_hat=False, symmetric=True
    ):
        """Smoothed covariance on ``work_grid x work_grid``.

        With ``ridge`` the fit is quadratic across the diagonal near it and
        linear farther out, blended with weight ``exp(-v^2 / (2 (3 h)^2))``
        (``h`` the bandwidth across): the quadratic term is there to follow a
        ridge on the diagonal, and away from it only adds variance (and
        wild extrapolation where raw covariances are scarce, e.g. far from
        the diagonal in designs with clustered times). Without ``ridge`` the
        fit is linear in both directions (isotropic bandwidths then give
        the usual product-kernel local-linear smoother).

        With ``return_hat``, also the weight of a unit raw covariance at each
        output point on the fit there (the smoother's diagonal, for GCV).
        A symmetric surface (the default) is fitted at the points on and
        below the diagonal and mirrored: the raw products of a covariance
        are symmetric, and so is its fit. ``symmetric=False`` fits every
        point (for a cross-covariance, whose raw products are not
        symmetric).
        """
        # a symmetric surface is fitted at the points on and below the
        # diagonal (v >= 0) and mirrored
        g, h = self._lower if symmetric else self._all
        v0 = self.n_g - 1 if symmetric else 0
        points = (g + h, g - h + self.n_g - 1 - v0)
        ku = _kernel_matrices(self.u_in, self.u_out, h_along, self.kernel, 2)
        kv = _kernel_matrices(
            self.v_in, self.v_out[v0:], h_across, self.kernel, 4 if ridge else 2
        )
        lc = [self._left(ku[a], self.count) for a in range(3)]
        lt = [self._left(ku[a], self.total) for a in range(2)]
        design = [(0, 0), (1, 0), (0, 1)] + ([(0, 2)] if ridge else [])
        size = len(design)
        mat = np.empty((g.size, size, size))
        rhs = np.empty((g.size, size))
        cache = {}
        for i, (a1, b1) in enumerate(design):
            rhs[:, i] = self._right(lt[a1], kv[b1], points, v0)
            for j, (a2, b2) in enumerate(design[i:], start=i):
                key = (a1 + a2, b1 + b2)
                if key not in cache:
                    cache[key] = self._right(lc[key[0]], kv[key[1]], points, v0)
                mat[:, i, j] = mat[:, j, i] = cache[key]
        what, h_max = "covariance smoothing", max(h_along, h_across)
        fit, hat = _intercepts(mat[:, :3, :3], rhs[:, :3], what, h_max, return_hat)
        if ridge:
            v = self.v_out[v0:][points[1]]
            weight = np.exp(-0.5 * (v / (3.0 * h_across)) ** 2)
            near = weight > 1e-3
            fit_q, hat_q = _intercepts(mat[near], rhs[near], what, h_max, return_hat)
            fit[near] += weight[near] * (fit_q - fit[near])
            if return_hat:
                hat[near] += weight[near] * (hat_q - hat[near])
        fit = self._on_grid(fit, g, h, symmetric)
        if return_hat:
            return fit, self._on_grid(hat, g, h, symmetric)
        return fit

    def _on_grid(self, values, g, h, symmetric):
        """Values at the points ``(g, h)`` as a work-grid matrix (mirrored)."""
        out = np.empty((self.n_g, self.n_g))
        out[g, h] = values
        if symmetric:
            out[h, g] = values
        return out


def _intercepts(mat, rhs, what, bandwidth, return_hat=False):
    """Intercepts of batched symmetric positive definite systems ``mat x = rhs``.

    Each system is scaled to a unit diagonal and factored as ``L D L^T``
    with the batch as the fast axis (a few vector operations per entry of
    a 3x3 or 4x4 system, where a LAPACK call per system costs more than
    its arithmetic). A clear error names the bandwidth where a system is
    empty or nearly singular (scaled determinant at most ``1e-12``).

    Returns
    -------
    intercept : ndarray of shape (n,)
    hat : ndarray of shape (n,) or None
        ``(mat^-1)[0, 0]``, the weight of a unit observation at the point
        on its own fit (for generalised cross-validation), with
        ``return_hat``.
    """
    k = mat.shape[-1]
    if mat.shape[0] == 0:
        return np.zeros(0), np.zeros(0) if return_hat else None
    diag = np.diagonal(mat, axis1=-2, axis2=-1)
    if np.any(~(diag > 0)):
        raise ValueError(
            f"{what}: no raw covariances near some work-grid point for "
            f"bandwidth {bandwidth:.4g}; use a larger bandwidth"
        )
    scale = 1.0 / np.sqrt(diag)
    a = np.moveaxis(mat * scale[:, :, None] * scale[:, None, :], 0, -1)
    low = [[None] * k for _ in range(k)]
    piv = []
    # a singular system's zero pivot is refused below, not divided by
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(k):
            d = a[j, j] - sum(low[j][m] ** 2 * piv[m] for m in range(j))
            piv.append(d)
            for i in range(j + 1, k):
                low[i][j] = (
                    a[i, j] - sum(low[i][m] * low[j][m] * piv[m] for m in range(j))
                ) / d
    det = np.prod(piv, axis=0)
    if np.any(~(np.min(piv, axis=0) > 0) | ~(det > 1e-12)):
        raise ValueError(
            f"{what}: too few distinct raw covariances near some work-grid "
            f"point for bandwidth {bandwidth:.4g}; use a larger bandwidth"
        )

    def first(b):
        # forward through L, divide by D, back through L^T to the first entry
        z = []
        for i in range(k):
            z.append(b[i] - sum(low[i][m] * z[m] for m in range(i)))
        x = [zi / di for zi, di in zip(z, piv)]
        for i in range(k - 1, -1, -1):
            x[i] = x[i] - sum(low[m][i] * x[m] for m in range(i + 1, k))
        return x[0]

    intercept = first(list((rhs * scale).T)) * scale[:, 0]
    if not return_hat:
        return intercept, None
    unit = [np.ones_like(piv[0])] + [np.zeros_like(piv[0])] * (k - 1)
    return intercept, first(unit) * scale[:, 0] ** 2
