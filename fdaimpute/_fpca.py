"""Numerical core of PACE: binned moments, 2-D smoothing, eigen-analysis, CE scores.

Everything here works on *binned* data: observations are assigned to bin
centres (exactly, when the centres are the distinct observation times, or
by linear binning onto a regular grid), so the cost and memory of the
covariance step are O(n_bins^2), independent of the number of subjects
and of sum n_i^2. Local-linear fits on bins are exact for data sitting on
the centres, and accurate to O((bin width / bandwidth)^2) otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.linalg import eigh

from fdaimpute._linalg import group_by_count
from fdaimpute._local_linear import (
    _kernel_matrices,
    local_linear_binned,
)

# ---------------------------------------------------------------------- #
# binning


@dataclass
class Bins:
    """Assignment of observations to bin centres.

    ``index[j, q]`` and ``weight[j, q]`` (q < p) give the bins of observation
    ``j`` and its share in each (``p = 1`` for exact binning, 2 for linear
    binning; shares sum to one).
    """

    centres: np.ndarray
    index: np.ndarray
    weight: np.ndarray
    exact: bool

    def spread(self, values):
        """Sum ``values`` (one per observation) into the bins."""
        return np.bincount(
            self.index.ravel(),
            (self.weight * np.asarray(values)[:, None]).ravel(),
            minlength=self.centres.size,
        )

    def interpolate(self, on_centres):
        """Values at the observations of a function known at the centres."""
        return np.sum(self.weight * on_centres[self.index], axis=1)

    def subset(self, mask):
        return Bins(self.centres, self.index[mask], self.weight[mask], self.exact)


def make_bins(times, *, n_bins=None, lo=None, hi=None):
    """Exact bins at the distinct times (``n_bins=None``) or linear binning.

    Parameters
    ----------
    times : ndarray of shape (n_obs,)
        Observation times.
    n_bins : int or None
        ``None``: one bin per distinct time (exact). An int: that many
        equally spaced centres on ``[lo, hi]`` with linear binning (each
        observation split between its two neighbouring centres).
    lo, hi : float
        Range of the regular centres (default: range of ``times``).

    Returns
    -------
    Bins
    """
    times = np.asarray(times, dtype=np.float64)
    if n_bins is None:
        centres, inverse = np.unique(times, return_inverse=True)
        return Bins(centres, inverse.reshape(-1, 1), np.ones((times.size, 1)), True)
    lo = times.min() if lo is None else lo
    hi = times.max() if hi is None else hi
    centres = np.linspace(lo, hi, int(n_bins))
    step = (hi - lo) / (n_bins - 1)
    pos = np.clip((times - lo) / step, 0.0, n_bins - 1)
    left = np.minimum(np.floor(pos).astype(np.int64), n_bins - 2)
    frac = pos - left
    index = np.stack([left, left + 1], axis=1)
    weight = np.stack([1.0 - frac, frac], axis=1)
    return Bins(centres, index, weight, False)


@dataclass
class CovMoments:
    """Binned raw-covariance sums on ``centres x centres``.

    ``count``, ``total`` and ``total_sq`` are the (weighted) number of raw
    products (y_ij - mu)(y_ik - mu), their sum and the sum of their squares,
    over pairs ``j != k`` (or all pairs without measurement error); ``diag_*``
    are the same over ``j == k`` on the centres (1-D).
    """

    centres: np.ndarray
    count: np.ndarray
    total: np.ndarray
    total_sq: np.ndarray
    diag_count: np.ndarray
    diag_total: np.ndarray
    diag_total_sq: np.ndarray


def covariance_moments(bins, resid, subject, n_subjects, *, include_diagonal=False):
    """Sum the raw covariances of each subject's residual pairs into bins.

    With ``Z[i, b] = sum_j w_jb r_ij`` the all-pairs sums are ``Z^T Z``; the
    ``j == k`` terms are removed afterwards, so no pair is ever materialised.
    """
    n_bins = bins.centres.size
    p = bins.index.shape[1]
    rows = np.repeat(subject, p)
    cols = bins.index.ravel()
    w = bins.weight
    r = np.asarray(resid)[:, None]

    def gram(values):
        z = sp.csr_matrix((values.ravel(), (rows, cols)), shape=(n_subjects, n_bins))
        return np.asarray((z.T @ z).todense())

    def self_pairs(values):
        # sum over observations of w_ja w_jb values_j on cell (a, b)
        cell = (bins.index[:, :, None] * n_bins + bins.index[:, None, :]).ravel()
        prod = (w[:, :, None] * w[:, None, :] * values[:, None, None]).ravel()
        return np.bincount(cell, prod, minlength=n_bins * n_bins).reshape(
            n_bins, n_bins
        )

    r2 = r[:, 0] ** 2
    count = gram(w)
    total = gram(w * r)
    total_sq = gram(w * r * r)
    if not include_diagonal:
        count -= self_pairs(np.ones_like(r2))
        total -= self_pairs(r2)
        total_sq -= self_pairs(r2 * r2)
        np.clip(count, 0.0, None, out=count)
    return CovMoments(
        bins.centres,
        count,
        total,
        total_sq,
        bins.spread(np.ones_like(r2)),
        bins.spread(r2),
        bins.spread(r2 * r2),
    )


# ---------------------------------------------------------------------- #
# local-linear smoothing on binned data


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


def smooth_surface(moments, points, bandwidth, kernel="gaussian"):
    """2-D local-linear smoother of the raw covariances at ``points x points``.

    Product kernel with one bandwidth in both directions; each moment sum
    is a pair of matrix products, ``K_a W K_b^T``.

    Returns
    -------
    ndarray of shape (len(points), len(points))
        Symmetrised estimate.
    """
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
    rhs = np.stack([t00, t10, t01], -1)
    fit = _solve3(mat, rhs, "covariance smoothing", bandwidth)
    return 0.5 * (fit + fit.T)


def smooth_diagonal_rotated(moments, points, bandwidth, kernel="gaussian"):
    """Smooth the off-diagonal raw covariances *at* the diagonal ``(t, t)``.

    Local fit in rotated coordinates ``u = (s + t)/sqrt(2)`` (along the
    diagonal, linear) and ``v = (s - t)/sqrt(2)`` (across it, quadratic and
    even), so the estimate at the diagonal is not pulled down by the ridge
    of the covariance there. This is fdapace's estimate of ``Var X(t)``.
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
        self._out = (g + h, g - h + n_g - 1)

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

    def _right(self, left, kv):
        # only outputs with m + n = n_g - 1 (mod 2) are needed
        out = np.zeros((left.shape[0], kv.shape[0]))
        for m0 in (0, 1):
            cols = slice((self.n_g - 1 - m0) % 2, None, 2)
            out[m0::2, cols] = left[m0::2] @ kv[cols].T
        return out[self._out]

    def __call__(self, h_along, h_across, *, ridge=True, return_hat=False):
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
        """
        ku = _kernel_matrices(self.u_in, self.u_out, h_along, self.kernel, 2)
        kv = _kernel_matrices(
            self.v_in, self.v_out, h_across, self.kernel, 4 if ridge else 2
        )
        lc = [self._left(ku[a], self.count) for a in range(3)]
        lt = [self._left(ku[a], self.total) for a in range(2)]
        design = [(0, 0), (1, 0), (0, 1)] + ([(0, 2)] if ridge else [])
        size = len(design)
        mat = np.empty((self.n_g, self.n_g, size, size))
        rhs = np.empty((self.n_g, self.n_g, size))
        cache = {}
        for i, (a1, b1) in enumerate(design):
            rhs[..., i] = self._right(lt[a1], kv[b1])
            for j, (a2, b2) in enumerate(design[i:], start=i):
                key = (a1 + a2, b1 + b2)
                if key not in cache:
                    cache[key] = self._right(lc[key[0]], kv[key[1]])
                mat[..., i, j] = mat[..., j, i] = cache[key]
        what, h = "covariance smoothing", max(h_along, h_across)
        fit = _solve_intercept(mat[..., :3, :3], rhs[..., :3], what, h)
        hat = _hat(mat[..., :3, :3]) if return_hat else None
        if ridge:
            v = self.v_out[self._out[1]]
            weight = np.exp(-0.5 * (v / (3.0 * h_across)) ** 2)
            near = weight > 1e-3
            fit[near] += weight[near] * (
                _solve_intercept(mat[near], rhs[near], what, h) - fit[near]
            )
            if return_hat:
                hat[near] += weight[near] * (_hat(mat[near]) - hat[near])
        fit = 0.5 * (fit + fit.T)
        return (fit, hat) if return_hat else fit


def _hat(mat):
    """``(M^-1)[0, 0]``: weight of a unit observation at the point on its own fit."""
    e0 = np.zeros(mat.shape[-1])
    e0[0] = 1.0
    return np.linalg.solve(mat, np.broadcast_to(e0, mat.shape[:-1])[..., None])[
        ..., 0, 0
    ]


def regular_step(x, rtol=1e-6):
    """Spacing of ``x`` if it is an equally spaced grid, else None."""
    x = np.asarray(x, dtype=np.float64)
    if x.size < 2:
        return None
    d = np.diff(x)
    step = (x[-1] - x[0]) / (x.size - 1)
    if step > 0 and np.all(np.abs(d - step) <= rtol * step):
        return float(step)
    return None


def _solve_intercept(mat, rhs, what, bandwidth):
    """Intercepts of batched symmetric positive (semi)definite systems."""
    diag = np.diagonal(mat, axis1=-2, axis2=-1)
    if np.any(~(diag > 0)):
        raise ValueError(
            f"{what}: no raw covariances near some work-grid point for "
            f"bandwidth {bandwidth:.4g}; use a larger bandwidth"
        )
    scale = 1.0 / np.sqrt(diag)
    scaled = mat * scale[..., :, None] * scale[..., None, :]
    cond_ok = np.linalg.det(scaled) > 1e-12
    if np.any(~cond_ok):
        raise ValueError(
            f"{what}: too few distinct raw covariances near some work-grid "
            f"point for bandwidth {bandwidth:.4g}; use a larger bandwidth"
        )
    sol = np.linalg.solve(scaled, (rhs * scale)[..., None])[..., 0]
    return sol[..., 0] * scale[..., 0]


# ---------------------------------------------------------------------- #
# eigen-analysis


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

    Returns
    -------
    values : ndarray
        All positive eigenvalues, decreasing.
    phi : ndarray of shape (n_grid, min(max_components, len(values)))
        Eigenfunctions of the leading eigenvalues.
    """
    w = quadrature_weights(grid, rule)
    root = np.sqrt(w)
    values, vectors = eigh(cov * root[:, None] * root[None, :])
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    positive = values > 0
    if not positive.any():
        raise ValueError(
            "the smoothed covariance has no positive eigenvalue; the data "
            "show no variation between subjects (zero variance?)"
        )
    values = values[positive]
    k = min(int(max_components), values.size)
    phi = vectors[:, :k] / root[:, None]
    phi = phi / np.sqrt(_trapezoid(phi**2, grid))
    return values, phi


def _trapezoid(y, x):
    """Trapezoid rule along axis 0."""
    d = np.diff(x)
    return np.tensordot(d, 0.5 * (y[1:] + y[:-1]), axes=(0, 0))


# ---------------------------------------------------------------------- #
# conditional expectation (BLUP) of the scores


def posterior_scores(
    resid,
    basis,
    offsets,
    lam,
    sigma2,
    *,
    n_scores=None,
    with_cov=False,
    time_index=None,
):
    """Conditional expectation of the scores, batched by number of observations.

    ``Sigma_i = Phi_i Lambda Phi_i^T + sigma2 I`` uses all ``len(lam)``
    components; scores (and their covariance) are returned for the first
    ``n_scores`` of them.

    Parameters
    ----------
    resid : ndarray of shape (n_obs,)
        ``y - mu(t)`` of every observation.
    basis : ndarray of shape (n_obs, p) or (n_times, p)
        Eigenfunctions at the observation times, or at the distinct times
        when ``time_index`` is given.
    offsets : ndarray of shape (n_subjects + 1,)
        CSR offsets.
    lam : ndarray of shape (p,)
        Eigenvalues.
    sigma2 : float
        Measurement-error variance.
    n_scores : int, default=None
        Number of leading scores to return (default ``p``).
    with_cov : bool, default=False
        Also return the posterior covariance of the returned scores.
    time_index : ndarray of shape (n_obs,), default=None
        Row of ``basis`` of each observation. With few distinct times each
        ``Sigma_i`` is then gathered from one precomputed matrix.

    Returns
    -------
    mean : ndarray of shape (n_subjects, n_scores)
    cov : ndarray of shape (n_subjects, n_scores, n_scores)
        Only when ``with_cov``.
    """
    p = lam.size
    q = p if n_scores is None else int(n_scores)
    n = offsets.size - 1
    mean = np.zeros((n, q))
    cov = np.zeros((n, q, q)) if with_cov else None
    if with_cov:
        cov[:] = np.diag(lam[:q])
    full = None
    if time_index is not None:
        full = (basis * lam) @ basis.T
    for rows, obs in group_by_count(offsets):
        ti = obs if time_index is None else time_index[obs]
        b = basis[ti]  # (g, m, p)
        r = resid[obs]  # (g, m)
        m = obs.shape[1]
        if m > p and sigma2 > 0:
            # Woodbury: (Phi^T Phi + sigma2 Lambda^-1)^-1 Phi^T r, p x p systems
            a = np.swapaxes(b, 1, 2) @ b
            a[:, np.arange(p), np.arange(p)] += sigma2 / lam
            rhs = np.einsum("gmp,gm->gp", b, r)[..., None]
            if with_cov:
                eye = np.broadcast_to(np.eye(p), a.shape)
                rhs = np.concatenate([rhs, eye], axis=2)
            sol = np.linalg.solve(a, rhs)
            mean[rows] = sol[:, :q, 0]
            if with_cov:
                cov[rows] = sigma2 * sol[:, :q, 1 : q + 1]
            continue
        if full is None:
            sigma = (b * lam) @ np.swapaxes(b, 1, 2)
        else:
            sigma = full[ti[:, :, None], ti[:, None, :]]
        trace = np.trace(sigma, axis1=1, axis2=2).max() if len(rows) else 0.0
        jitter = max(sigma2, 1e-10 * max(trace, 1e-300) / m)
        sigma[:, np.arange(m), np.arange(m)] += jitter
        blq = b[..., :q] * lam[:q]
        rhs = np.concatenate([r[..., None], blq], axis=2) if with_cov else r[..., None]
        sol = np.linalg.solve(sigma, rhs)
        mean[rows] = np.einsum("gmp,gm->gp", blq, sol[..., 0])
        if with_cov:
            cov[rows] = np.diag(lam[:q]) - np.swapaxes(blq, 1, 2) @ sol[..., 1:]
    if with_cov:
        return mean, cov
    return mean


def cumulative_predictions(
    resid_fit, basis_fit, offsets_fit, basis_new, offsets_new, lam, sigma2
):
    """Predictions at held-out times for every number of components at once.

    For subject ``i`` with visible residuals ``r`` at basis rows ``Phi`` and
    held-out basis rows ``Phi_h``, the prediction with the first ``K``
    components is ``Phi_h[:, :K] (Phi[:, :K]^T Phi[:, :K] + sigma2
    Lambda_K^-1)^-1 Phi[:, :K]^T r``. With ``L`` the Cholesky factor of the
    full ``p x p`` matrix, the ``K``-component system has factor
    ``L[:K, :K]``, so all ``K = 1..p`` predictions are the cumulative sums
    over ``k`` of ``(L^-1 Phi_h^T)[k] (L^-1 Phi^T r)[k]``.

    Returns
    -------
    ndarray of shape (n_new_obs, p)
        Column ``K - 1``: the prediction (minus the mean) with ``K`` components.
    """
    p = lam.size
    out = np.zeros((basis_new.shape[0], p))
    counts_new = np.diff(offsets_new)
    ridge = sigma2 / lam
    for rows, obs in group_by_count(offsets_fit):
        b = basis_fit[obs]
        a = np.swapaxes(b, 1, 2) @ b
        jitter = 1e-10 * np.trace(a, axis1=1, axis2=2)[:, None] / p
        a[:, np.arange(p), np.arange(p)] += ridge + jitter
        chol = np.linalg.cholesky(a)
        rhs_r = np.einsum("gmp,gm->gp", b, resid_fit[obs])
        sub_counts = counts_new[rows]
        for m_new in np.unique(sub_counts):
            if m_new == 0:
                continue
            sel = np.flatnonzero(sub_counts == m_new)
            idx = offsets_new[rows[sel]][:, None] + np.arange(m_new)
            rhs = np.concatenate(
                [rhs_r[sel][..., None], np.swapaxes(basis_new[idx], 1, 2)], axis=2
            )
            sol = _forward_substitution(chol[sel], rhs)  # L^-1 [Phi^T r, Phi_h^T]
            contrib = np.swapaxes(sol[..., 1:], 1, 2) * sol[:, None, :, 0]
            out[idx] = np.cumsum(contrib, axis=2)
    return out


def _forward_substitution(chol, rhs):
    """Solve ``L x = rhs`` for a batch of lower-triangular ``L``, row by row."""
    out = np.empty_like(rhs)
    for j in range(chol.shape[1]):
        acc = rhs[:, j]
        if j:
            acc = acc - np.einsum("gk,gkc->gc", chol[:, j, :j], out[:, :j])
        out[:, j] = acc / chol[:, j, j, None]
    return out


def neg2_loglik(resid, basis, offsets, lam, sigma2):
    """Minus twice the Gaussian log-likelihood (without 2 pi), as fdapace's AIC/BIC."""
    total = 0.0
    for _, obs in group_by_count(offsets):
        b = basis[obs]
        r = resid[obs]
        m = obs.shape[1]
        sigma = (b * lam) @ np.swapaxes(b, 1, 2)
        sigma[:, np.arange(m), np.arange(m)] += max(sigma2, 1e-12)
        sign, logdet = np.linalg.slogdet(sigma)
        quad = np.einsum("gm,gm->g", r, np.linalg.solve(sigma, r[..., None])[..., 0])
        total += float(np.sum(logdet + quad))
    return total


def cv_mean_bandwidth(
    bins, values, subject, n_subjects, candidates, kernel, rng, n_folds=5
):
    """Bandwidth of the mean by K-fold cross-validation over subjects."""
    fold_of_subject = rng.permutation(n_subjects) % n_folds
    fold = fold_of_subject[subject]
    ones = np.ones(values.size)
    sums = []
    for f in range(n_folds):
        part = bins.subset(fold == f)
        sums.append(
            (
                part.spread(ones[fold == f]),
                part.spread(values[fold == f]),
                part.spread(values[fold == f] ** 2),
            )
        )
    w_all = sum(s[0] for s in sums)
    s_all = sum(s[1] for s in sums)
    best, best_score = None, np.inf
    for h in candidates:
        score = 0.0
        try:
            for w_f, s_f, q_f in sums:
                fit = local_linear_binned(
                    bins.centres, w_all - w_f, s_all - s_f, bins.centres, h, kernel
                )
                score += np.sum(q_f - 2 * fit * s_f + fit * fit * w_f)
        except ValueError:
            continue
        if score < best_score:
            best, best_score = float(h), score
    if best is None:
        raise ValueError("no candidate mean bandwidth gives a defined fit")
    return best


def gcv_cov_bandwidth(
    times,
    resid,
    subject,
    n_subjects,
    work_grid,
    kernel,
    *,
    include_diagonal=False,
    n_candidates=12,
):
    """Isotropic covariance bandwidth by generalised cross-validation.

    The surface is fitted at the bin centres; the residual sum of squares
    of the raw covariances and the trace of the smoother (each cell's
    weight on its own fit) give ``GCV = RSS / (1 - dof / N)^2``. Bins are
    the distinct times when there are at most 201, else 201 linear bins.
    """
    distinct = np.unique(times)
    bins = make_bins(times) if distinct.size <= 201 else make_bins(times, n_bins=201)
    mom = covariance_moments(
        bins, resid, subject, n_subjects, include_diagonal=include_diagonal
    )
    c = bins.centres
    span = c[-1] - c[0]
    h_min = max(np.max(np.diff(c)), span / 500)
    best, best_score = None, np.inf
    n = mom.count.sum()
    for h in np.geomspace(h_min, span / 4, n_candidates):
        try:
            fit, hat = _surface_with_hat(mom, c, h, kernel)
        except ValueError:
            continue
        rss = np.sum(mom.total_sq - 2 * fit * mom.total + fit * fit * mom.count)
        dof = np.sum(mom.count * hat)
        if dof >= n:
            continue
        score = rss / n / (1 - dof / n) ** 2
        if score < best_score:
            best, best_score = float(h), score
    if best is None:
        raise ValueError(
            "no candidate covariance bandwidth gives a defined fit; "
            "the data are too sparse"
        )
    return best


def gcv_rotated_bandwidth(
    times,
    resid,
    subject,
    n_subjects,
    lo,
    hi,
    kernel,
    *,
    include_diagonal=False,
    n_candidates=10,
):
    """Isotropic bandwidth of the rotated smoother by generalised CV.

    Fits on a regular grid of at most 101 bins (exact when the times are
    on such a grid) and uses each bin's weight on its own fit as the trace.
    """
    distinct = np.unique(times)
    if distinct.size <= 101 and regular_step(distinct):
        bins = make_bins(times)
    else:
        bins = make_bins(times, n_bins=101, lo=lo, hi=hi)
    mom = covariance_moments(
        bins, resid, subject, n_subjects, include_diagonal=include_diagonal
    )
    c = bins.centres
    span = c[-1] - c[0]
    smoother = RotatedSmoother(mom, c, "gaussian" if kernel is None else kernel)
    n = mom.count.sum()
    h_dense = span * np.sqrt(20.0 / (2 * np.pi * max(n, 1.0)))
    h_min = max(0.7 * (c[1] - c[0]), h_dense, span * 1e-3)
    best, best_score = None, np.inf
    for h in np.geomspace(min(h_min, span / 8), span / 2, n_candidates):
        try:
            fit, hat = smoother(h, h, return_hat=True)
        except (ValueError, np.linalg.LinAlgError):
            continue
        rss = np.sum(mom.total_sq - 2 * fit * mom.total + fit * fit * mom.count)
        dof = np.sum(mom.count * hat)
        if not 0 <= dof < n:
            continue
        score = rss / n / (1 - dof / n) ** 2
        if score < best_score:
            best, best_score = float(h), score
    if best is None:
        raise ValueError(
            "no candidate covariance bandwidth gives a defined fit; "
            "the data are too sparse"
        )
    return best


def _surface_with_hat(moments, points, bandwidth, kernel):
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
    fit = _solve3(mat, np.stack([t00, t10, t01], -1), "covariance smoothing", bandwidth)
    e0 = np.zeros(3)
    e0[0] = 1.0
    hat = np.linalg.solve(mat, np.broadcast_to(e0, mat.shape[:-1])[..., None])
    return fit, hat[..., 0, 0]
