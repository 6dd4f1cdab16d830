"""A whole FACE fit on flat arrays: mean, covariance surface, eigenpairs, noise."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import eigh

from fdaimpute._face.moments import pair_moments
from fdaimpute._face.penalized import PenalizedPath, held_out_error
from fdaimpute._fpca.eigen import choose_n_components
from fdaimpute._fpca.spline_model import FACEModel
from fdaimpute._fpca.splines import (
    design,
    difference_penalty,
    duplication,
    equal_knots,
    gram,
    unvech,
)

# Eigenvalues below this share of the data's variance count as zero.
_EIGEN_TOL = 1e-10
#: Below this many subjects the ``"auto"`` smoothing parameters of the mean
#: and of the covariance surface are cross-validated over subjects (GCV above).
AUTO_CV_SUBJECTS = 1000
# Held-out errors within this share of the least count as equal.
_TIE = 1e-6
# Least noise variance, as a share of the mean squared residual: keeps each
# subject's covariance matrix well conditioned for noise-free data.
_NOISE_FLOOR = 1e-6


@dataclass
class FACEFit:
    """A fitted model and what was chosen on the way."""

    model: FACEModel
    lambda_mean: float
    lambda_cov: float
    df_mean: float
    df_cov: float
    fve: np.ndarray


def resolve_auto(lam, n_subjects):
    """A smoothing rule ``"auto"`` made concrete for ``n_subjects`` subjects.

    ``"cv"`` (folds of subjects) below ``AUTO_CV_SUBJECTS`` subjects,
    ``"gcv"`` from there on; any other ``lam`` is returned as it is.
    """
    if lam != "auto":
        return lam
    return "cv" if n_subjects < AUTO_CV_SUBJECTS else "gcv"


def _solve(path, lam):
    return path.select() if lam == "gcv" else path.fit(float(lam))


def fit_mean(times, values, knots, degree, order, lam, offsets=None, n_folds=5):
    """P-spline mean: B-splines on ``knots``, ``order``-th difference penalty.

    ``lam`` is a number, ``"gcv"``, or ``"cv"``: ``n_folds``-fold
    cross-validation over subjects (``offsets`` gives them; subject ``i`` is
    in fold ``i % n_folds``), each fold's observations predicted by the fit
    to the others'. GCV treats every observation as independent; where the
    subjects are seen at a few shared ages, the observations of one subject
    move together and GCV can follow them, with a mean that swings between
    the ages no one is observed at. Holding out whole subjects does not.
    ``"cv"`` with fewer than ``n_folds`` subjects is GCV.

    Returns the fit and the mean at ``times``.
    """
    distinct, inverse = np.unique(times, return_inverse=True)
    b = design(distinct, knots, degree)
    penalty = difference_penalty(b.shape[1], order)
    if lam == "cv" and offsets is not None and offsets.size - 1 >= n_folds:
        fold = _observation_folds(offsets, n_folds)
        folds = [
            _mean_equations(b, inverse[fold == f], values[fold == f])
            for f in range(n_folds)
        ]
        stats = _add(folds)
        fit = PenalizedPath(*stats, penalty).fit(
            _cross_validated_lambda(folds, stats, penalty)
        )
    else:
        path = PenalizedPath(*_mean_equations(b, inverse, values), penalty)
        fit = _solve(path, "gcv" if lam == "cv" else lam)
    return fit, (b @ fit.coef)[inverse]


def _observation_folds(offsets, n_folds):
    """The fold of each observation: subject ``i``'s are in fold ``i % n_folds``."""
    counts = np.diff(offsets)
    return np.repeat(np.arange(counts.size) % n_folds, counts)


def _mean_equations(b, rows, values):
    """``(X^T X, X^T y, y^T y, n)`` of the mean's regression on the design
    rows ``rows`` of ``b`` (one per observation)."""
    counts = np.bincount(rows, minlength=b.shape[0])
    sums = np.bincount(rows, values, minlength=b.shape[0])
    xtx = (b.T @ b.multiply(counts[:, None])).toarray()
    return xtx, b.T @ sums, float(values @ values), values.size


def _normal_equations(moments, dup, diagonal):
    """``(X^T X, X^T y, y^T y, n)`` of the surface regression on ``vech(theta)``.

    With ``diagonal`` the raw variances join the regression with one more
    unpenalised coefficient, the noise variance, on an indicator of the
    diagonal (it comes last).
    """
    pairs, diag = moments
    if not diagonal:
        xtx = np.asarray(dup.T @ (dup.T @ pairs.xtx).T)
        return xtx, dup.T @ pairs.xty, pairs.yty, pairs.n_pairs
    xtx = np.asarray(dup.T @ (dup.T @ (pairs.xtx + diag.xtx)).T)
    cross = dup.T @ diag.basis_sum
    h = xtx.shape[0]
    full = np.empty((h + 1, h + 1))
    full[:h, :h] = xtx
    full[:h, h] = full[h, :h] = cross
    full[h, h] = diag.n_obs
    xty = np.append(dup.T @ (pairs.xty + diag.xty), diag.sum_y)
    return full, xty, pairs.yty + diag.yty, pairs.n_pairs + diag.n_obs


def _add(stats):
    return tuple(sum(s[i] for s in stats) for i in range(4))


def _fold_stats(times, resid, offsets, knots, degree, n_folds, dup, diagonal):
    """Normal equations of each fold of subjects (see :func:`_observation_folds`)."""
    counts = np.diff(offsets)
    fold = np.arange(counts.size) % n_folds
    obs_fold = _observation_folds(offsets, n_folds)
    out = []
    for f in range(n_folds):
        mask = obs_fold == f
        sub = np.concatenate([[0], np.cumsum(counts[fold == f])])
        moments = pair_moments(times[mask], resid[mask], sub, knots, degree)
        out.append(_normal_equations(moments, dup, diagonal))
    return out


def _cross_validated_lambda(folds, total, penalty):
    """``lam`` minimising the held-out squared error of the ``folds``' data.

    ``total`` is the folds' statistics summed (:func:`_add`).
    """
    logs, error = None, None
    for held in folds:
        rest = [t - h for t, h in zip(total, held)]
        path = PenalizedPath(rest[0], rest[1], rest[2], max(rest[3], 1.0), penalty)
        if logs is None:
            logs = path.candidates()
            error = np.zeros(logs.size)
        for i, x in enumerate(logs):
            coef = path.fit(10.0**x).coef
            error[i] += held_out_error(coef, held[0], held[1], held[2])
    # the smoothest of the candidates within rounding of the least error: where
    # the error is flat (every large lam leaves the unpenalised fit) the choice
    # does not then follow rounding, e.g. of the time unit
    least = error.min()
    best = np.flatnonzero(error <= least + _TIE * abs(least))
    return 10.0 ** logs[int(best[-1])]


def fit_surface(
    times, resid, offsets, knots, degree, order, lam, *, diagonal=True, n_folds=5
):
    """Symmetric tensor-product P-spline fit of the raw covariances.

    The penalty is ``(P (x) I + I (x) P)`` on ``vec(theta)``, ``P`` the
    difference penalty, one ``lam`` for both directions (the surface is
    symmetric). The off-diagonal products are regressed on the surface;
    with ``diagonal`` the raw variances too, on the surface plus the noise
    variance. ``lam="cv"`` chooses ``lam`` by ``n_folds``-fold
    cross-validation over subjects (each fold's raw covariances predicted
    from the others' fit), ``"gcv"`` by GCV over the raw covariances.

    Returns
    -------
    theta : ndarray of shape (c, c)
        The symmetric coefficients.
    fit : PenalizedFit
        The fit of ``vech(theta)`` (and the noise variance, last).
    """
    c = knots.size - degree - 1
    dup = duplication(c)
    one = difference_penalty(c, order)
    eye = np.eye(c)
    penalty = np.asarray(dup.T @ (dup.T @ (np.kron(one, eye) + np.kron(eye, one))).T)
    if diagonal:
        penalty = np.pad(penalty, ((0, 1), (0, 1)))
    use_cv = lam == "cv" and offsets.size - 1 >= n_folds
    if use_cv:
        folds = _fold_stats(
            times, resid, offsets, knots, degree, n_folds, dup, diagonal
        )
        stats = _add(folds)
    else:
        stats = _normal_equations(
            pair_moments(times, resid, offsets, knots, degree), dup, diagonal
        )
    counts = np.diff(offsets)
    if not np.any(counts > 1):
        raise ValueError(
            "no subject has two observations: the covariance cannot be "
            "estimated from products of residuals at different times"
        )
    path = PenalizedPath(*stats, penalty)
    if use_cv:
        fit = path.fit(_cross_validated_lambda(folds, stats, penalty))
    elif isinstance(lam, str):
        fit = path.select()
    else:
        fit = path.fit(float(lam))
    h = c * (c + 1) // 2
    return unvech(fit.coef[:h], c), fit


def eigenpairs(theta, knots, degree, tol):
    """Positive eigenpairs of the operator with kernel ``b(s)^T theta b(t)``.

    With ``G`` the basis's Gram matrix, eigenfunctions ``b^T a`` solve
    ``G^(1/2) theta G^(1/2) u = lam u``, ``a = G^(-1/2) u``: exact, no grid.
    """
    g_val, g_vec = eigh(gram(knots, degree))
    g_val = np.clip(g_val, np.finfo(float).tiny, None)
    half = (g_vec * np.sqrt(g_val)) @ g_vec.T
    inv_half = (g_vec / np.sqrt(g_val)) @ g_vec.T
    values, vectors = eigh(half @ theta @ half)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    keep = values > tol
    coef = inv_half @ vectors[:, keep]
    # sign: each eigenfunction's largest coefficient in absolute value positive
    peak = coef[np.argmax(np.abs(coef), axis=0), np.arange(coef.shape[1])]
    return values[keep], coef * np.where(peak >= 0, 1.0, -1.0)


def noise_variance(times, resid, knots, degree, theta, floor):
    """Mean raw variance minus the mean of the fitted surface's diagonal there.

    With the raw variances in the surface regression this is the fitted
    noise coefficient itself (its normal equation). The surface is taken
    before its negative eigenvalues are dropped: dropping them raises the
    diagonal and would bias the estimate down.
    """
    distinct, counts = np.unique(times, return_counts=True)
    b = design(distinct, knots, degree)
    diagonal = np.sum((b @ theta) * b.toarray(), axis=1) @ counts / resid.size
    return max(float(np.mean(resid**2) - diagonal), floor)


def fit_face(times, values, offsets, time_range, options):
    """Fit FACE on flat arrays.

    Parameters
    ----------
    times, values : ndarray of shape (n_obs,)
    offsets : ndarray of shape (n_subjects + 1,)
    time_range : tuple of float
    options : dict
        ``n_basis``, ``n_basis_mean``, ``degree``, ``penalty_order``,
        ``lambda_mean``, ``lambda_cov``, ``n_components``, ``fve_threshold``,
        ``max_components``.

    Returns
    -------
    FACEFit
    """
    lo, hi = time_range
    degree, order = options["degree"], options["penalty_order"]
    mean_knots = equal_knots(lo, hi, options["n_basis_mean"], degree)
    mean, mean_obs = fit_mean(
        times, values, mean_knots, degree, order, options["lambda_mean"], offsets
    )
    resid = values - mean_obs
    cov_knots = equal_knots(lo, hi, options["n_basis"], degree)
    theta, surface = fit_surface(
        times,
        resid,
        offsets,
        cov_knots,
        degree,
        order,
        options["lambda_cov"],
        diagonal=options.get("diagonal", True),
    )
    scale = max(float(np.var(values)), np.finfo(float).tiny)
    eig_values, eig_coef = eigenpairs(theta, cov_knots, degree, _EIGEN_TOL * scale)
    total = eig_values.sum()
    fve = np.cumsum(eig_values) / total if total > 0 else np.zeros(0)
    k = 0
    if eig_values.size:
        rule = options["n_components"]
        k = choose_n_components(
            rule, eig_values, fve, fve_threshold=options["fve_threshold"]
        )
        if options["max_components"] is not None:
            k = min(k, int(options["max_components"]))
    floor = _NOISE_FLOOR * max(float(np.mean(resid**2)), np.finfo(float).tiny)
    sigma2 = noise_variance(times, resid, cov_knots, degree, theta, floor)
    model = FACEModel(
        degree=degree,
        mean_knots=mean_knots,
        mean_coef=mean.coef,
        cov_knots=cov_knots,
        theta=theta,
        eigenvalues=eig_values,
        eigen_coef=eig_coef,
        n_components=int(k),
        noise_variance=sigma2,
    )
    return FACEFit(model, mean.lam, surface.lam, mean.df, surface.df, fve[:k])
