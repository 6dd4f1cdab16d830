"""Local-linear smoothing in one dimension: the engine of the kernel imputer and PACE.

Fits work from weights and weighted sums at locations (raw observations, or
bins with their counts and sums), so the same code serves raw and binned data.
"""

from __future__ import annotations

import numpy as np

from fdaimpute.smoothing import get_kernel


def _kernel_matrices(centres, points, bandwidth, kernel, order):
    """``[K_0, ..., K_order]`` with ``K_a[g, b] = K((c_b - x_g)/h) (c_b - x_g)^a``."""
    kern = get_kernel(kernel)
    d = centres[None, :] - points[:, None]
    mats = [kern(d / bandwidth)]
    for _ in range(order):
        mats.append(mats[-1] * d)
    return mats


# ``-K'(u) / u`` of each kernel: d/dt K((c - t) / h) = (c - t) / h^2 times it
_KERNEL_SLOPE = {
    "gaussian": lambda u: np.exp(-0.5 * u * u),
    "epanechnikov": lambda u: 2.0 * (np.abs(u) < 1.0),
}


def local_linear_binned(
    centres, weight, total, points, bandwidth, kernel, *, derivative=False
):
    """1-D local-linear fit from bin weights and bin sums (empty bins allowed).

    With ``derivative=True`` also returns the exact derivative of the fitted
    function ``t -> m(t)`` (not the local slope coefficient, which differs
    from it wherever the design is uneven), so that a curve built from the
    fit and its derivative agree.
    """
    points = np.asarray(points, dtype=np.float64)
    n_sums = 10 if derivative else 5
    sums = np.empty((n_sums, points.size))
    step = max(1, 2_000_000 // max(centres.size, 1))  # bounds the kernel matrices
    h2 = float(bandwidth) ** 2
    for start in range(0, points.size, step):
        part = slice(start, start + step)
        k0, k1, k2 = _kernel_matrices(centres, points[part], bandwidth, kernel, 2)
        sums[:5, part] = [k0 @ weight, k1 @ weight, k2 @ weight, k0 @ total, k1 @ total]
        if derivative:
            d = centres[None, :] - points[part, None]
            g1 = _KERNEL_SLOPE[kernel](d / bandwidth) * d / h2
            g2 = g1 * d
            sums[5:8, part] = [g1 @ weight, g2 @ weight, (g2 * d) @ weight]
            sums[8:, part] = [g1 @ total, g2 @ total]
    s0, s1, s2, t0, t1 = sums[:5]
    det = s0 * s2 - s1 * s1
    if np.any(~(det > 1e-12 * np.maximum(s0 * s2, np.finfo(float).tiny))):
        raise ValueError(
            f"local-linear fit undefined with bandwidth {bandwidth:.4g} (fewer "
            "than two distinct times in a window); use a larger bandwidth"
        )
    num = s2 * t0 - s1 * t1
    est = num / det
    if not derivative:
        return est
    # d/dt of K_a = K(u) d^a is G(u) d^(a+1) / h^2 - a K(u) d^(a-1)
    g1w, g2w, g3w, g1s, g2s = sums[5:]
    ds0, ds1, ds2 = g1w, g2w - s0, g3w - 2 * s1
    dt0, dt1 = g1s, g2s - t0
    dnum = ds2 * t0 + s2 * dt0 - ds1 * t1 - s1 * dt1
    ddet = ds0 * s2 + s0 * ds2 - 2 * s1 * ds1
    return est, (dnum - est * ddet) / det


def gcv_mean_bandwidth(centres, weight, total, total_sq, candidates, kernel):
    """GCV choice of the mean bandwidth on binned pooled data."""
    n = weight.sum()
    best, best_score = None, np.inf
    keep = weight > 0
    c, w, s = centres[keep], weight[keep], total[keep]
    for h in candidates:
        k0, k1, k2 = _kernel_matrices(c, c, h, kernel, 2)
        s0, s1, s2 = k0 @ w, k1 @ w, k2 @ w
        det = s0 * s2 - s1 * s1
        if np.any(~(det > 1e-12 * np.maximum(s0 * s2, np.finfo(float).tiny))):
            continue
        fit = (s2 * (k0 @ s) - s1 * (k1 @ s)) / det
        rss = total_sq[keep].sum() - 2 * np.dot(fit, s) + np.dot(fit * fit, w)
        dof = np.sum(w * s2 / det)  # each unit's weight on its own fit, K(0) = 1
        if dof >= n:
            continue
        score = rss / n / (1.0 - dof / n) ** 2
        if score < best_score:
            best, best_score = float(h), score
    if best is None:
        raise ValueError("no candidate mean bandwidth gives a defined fit")
    return best
