"""A whole mFPCA fit on flat arrays: mean, starting values, ML fit, choice of K.

The mean is FACE's P-spline mean (GCV). The starting covariance is FACE's
tensor-product P-spline surface on the same B-splines as the reduced-rank
model, carried to the orthonormal basis (``P0 = R theta R^T``); its
leading eigenpair and FACE's noise variance start rank 1, and rank ``K``
starts from rank ``K - 1``'s optimum plus ``P0``'s ``K``-th eigenvector,
so each fit needs few iterations. The fitted model is a
:class:`fdaimpute._fpca.spline_model.FACEModel` (spline mean, spline
eigenfunctions), so prediction, derivatives and bands are FACE's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import eigh

from fdaimpute._face.fit import fit_mean, fit_surface, resolve_auto
from fdaimpute._face.fit import noise_variance as surface_noise
from fdaimpute._fpca.spline_model import FACEModel
from fdaimpute._fpca.splines import equal_knots
from fdaimpute._mfpca.basis import OrthonormalBasis
from fdaimpute._mfpca.likelihood import SubjectStats
from fdaimpute._mfpca.optimize import maximize_likelihood
from fdaimpute._mfpca.selection import approximate_cv

_NOISE_FLOOR = 1e-6
# Basis sizes tried by n_basis="auto" (the best by the rank's rule is kept).
_AUTO_SIZES = (6, 8, 12, 16, 20)
# A direction of the basis whose mean square over the observation times is
# below this share of its L2 norm (1 on a uniform design) is barely seen.
_BARELY_SEEN = 0.01


@dataclass
class MFPCAFit:
    """A fitted model and what was chosen on the way.

    Attributes
    ----------
    model : FACEModel
    loglik : float
        Maximised log-likelihood of the centred observations.
    start_loglik : float
        Log-likelihood at the starting values.
    criteria : dict
        ``{K: (approximate leave-one-curve-out score, BIC)}`` of every rank
        tried on the chosen basis (the score is ``None`` unless the rule is
        ``"cv"``).
    n_iter : int
    converged : bool
    history : list of float
        Negative log-likelihood along the optimisation (non-increasing).
    """

    model: FACEModel
    loglik: float
    start_loglik: float
    criteria: dict
    n_iter: int
    converged: bool
    history: list


def n_parameters(m, k):
    """Free parameters of rank ``k`` in ``m`` dimensions: C, lambda, sigma^2."""
    return m * k - k * (k + 1) // 2 + k + 1


def _start(p0, s2, k, floor):
    """Leading ``k`` eigenpairs of ``p0`` (positive), and ``log s2``."""
    values, vectors = eigh((p0 + p0.T) / 2)
    order = np.argsort(values)[::-1][:k]
    lam = np.clip(values[order], floor, None)
    return vectors[:, order], np.log(lam), np.log(max(s2, floor))


def _extend(previous, direction, log_lam):
    """Rank ``k - 1``'s optimum plus one new direction: a warm start for ``k``."""
    coef = previous.coef
    new = direction - coef @ (coef.T @ direction)
    norm = np.linalg.norm(new)
    if norm < 1e-8:  # the new direction is in the old span: any orthogonal one
        q, _ = np.linalg.qr(coef, mode="complete")
        new, norm = q[:, coef.shape[1]], 1.0
    coef = np.column_stack([coef, new / norm])
    return coef, np.append(previous.log_lam, log_lam), previous.log_s2


def _fit_rank(times, resid, offsets, basis, degree, options):
    """ML fits of increasing rank on one basis; the best by the rule, or the given rank.

    Returns the chosen rank's criterion value (the approximate
    leave-one-curve-out score when the rule is ``"cv"``, else BIC), the rank,
    the optimiser's result and ``{K: (CV score or None, BIC)}`` of every
    rank tried.
    """
    theta, _ = fit_surface(times, resid, offsets, basis.knots, degree, 2, "gcv")
    scale = max(float(np.mean(resid**2)), np.finfo(float).tiny)
    floor = _NOISE_FLOOR * scale
    s2 = surface_noise(times, resid, basis.knots, degree, theta, floor)
    p0 = basis.from_spline(theta)
    stats = SubjectStats.from_observations(basis.rows(times), resid, offsets)
    rule = options["n_components"]
    most = min(basis.size, options["max_components"] or basis.size)
    searching = rule in ("cv", "bic")
    ranks = range(1, most + 1) if searching else [min(int(rule), basis.size)]
    n_subjects = offsets.size - 1
    best, criteria, previous = None, {}, None
    for k in ranks:
        coef, log_lam, log_s2 = _start(p0, s2, k, floor)
        if previous is not None:
            coef, log_lam, log_s2 = _extend(previous, coef[:, -1], log_lam[-1])
        result = maximize_likelihood(
            stats,
            coef,
            log_lam,
            log_s2,
            max_iter=options["max_iter"],
            tol=options["tol"],
        )
        nll = result.history[-1]
        bic = 2 * nll + n_parameters(basis.size, k) * np.log(max(n_subjects, 2))
        cv = None
        if rule == "cv":
            cv = approximate_cv(stats, result.coef, result.log_lam, result.log_s2)
            cv = float(cv.score)
        criteria[k] = (cv, float(bic))
        value = bic if cv is None else cv
        previous = result
        if best is None or value < best[0]:
            best = (value, k, result)
        elif searching:
            break  # stop at the first increase
    return (*best, criteria)


def smaller_size(size, degree):
    """The next size below ``size`` that ``n_basis="auto"`` may fall back to.

    The sizes it searches, then one function fewer at a time down to the
    smallest spline basis of ``degree`` (``degree + 1`` functions, one
    polynomial piece); None below that.
    """
    below = [s for s in _AUTO_SIZES if s < size]
    if below:
        return below[-1]
    return size - 1 if size - 1 >= degree + 1 else None


def other_sizes(size, degree, times):
    """The basis sizes beside ``size`` that a fall-back from it may try.

    The smaller ones :func:`smaller_size` steps through, then the larger
    sizes of ``n_basis="auto"``'s list up to the first whose basis the
    observation ``times`` (on ``[0, 1]``) barely see.
    """
    out, smaller = [], smaller_size(size, degree)
    while smaller is not None:
        out.append(smaller)
        smaller = smaller_size(smaller, degree)
    for larger in (s for s in _AUTO_SIZES if s > size):
        if barely_seen(OrthonormalBasis.build(0.0, 1.0, larger, degree), times):
            break
        out.append(larger)
    return out


def barely_seen(basis, times):
    """Whether the design sees some direction of ``basis`` only barely.

    The eigenvalues of ``mean_j e(t_j) e(t_j)^T`` are the mean squares over
    the observations of the basis's orthonormal directions. A direction
    never seen (eigenvalue 0, e.g. more functions than distinct times) is
    harmless: the likelihood is flat along it and the fit keeps its start.
    One seen only barely is not: a huge eigenvalue on a function nearly
    zero at every observation fits a few of them, and curves swing where
    no one is observed (on 90 girls seen at ages 8, 10, 12 and 14 and once
    later, 8 B-splines had such a direction between the early ages, with
    eigenvalue 3,000 and curves down to -60 hours a week; 6 had none).
    """
    distinct, counts = np.unique(times, return_counts=True)
    rows = basis.rows(distinct)
    seen = np.linalg.eigvalsh((rows * (counts / times.size)[:, None]).T @ rows)
    return bool(np.any((seen > 1e-9 * seen[-1]) & (seen < _BARELY_SEEN)))


def fit_mfpca(times, values, offsets, time_range, options):
    """Fit the reduced-rank model by maximum likelihood on flat arrays.

    Parameters
    ----------
    times, values : ndarray of shape (n_obs,)
    offsets : ndarray of shape (n_subjects + 1,)
    time_range : tuple of float
    options : dict
        ``n_basis``, ``n_basis_mean``, ``degree``, ``n_components`` (int,
        ``"cv"`` or ``"bic"``), ``max_components``, ``max_iter``, ``tol``.

    Returns
    -------
    MFPCAFit
    """
    lo, hi = time_range
    degree = options["degree"]
    mean_knots = equal_knots(lo, hi, options["n_basis_mean"], degree)
    rule = resolve_auto("auto", offsets.size - 1)
    mean, mean_obs = fit_mean(times, values, mean_knots, degree, 2, rule, offsets)
    resid = values - mean_obs
    sizes = _AUTO_SIZES if options["n_basis"] == "auto" else (options["n_basis"],)
    best = None
    for size in sizes:
        basis = OrthonormalBasis.build(lo, hi, size, degree)
        if best is not None and barely_seen(basis, times):
            break
        value, k, result, criteria = _fit_rank(
            times, resid, offsets, basis, degree, options
        )
        if best is None or value < best[0]:
            best = (value, k, result, criteria, basis)
        else:
            break  # stop at the first increase
    _, k, result, criteria, basis = best
    lam = np.exp(result.log_lam)
    order = np.argsort(lam)[::-1]
    lam, coef = lam[order], result.coef[:, order]
    eigen_coef = basis.spline_coef(coef)
    peak = eigen_coef[np.argmax(np.abs(eigen_coef), axis=0), np.arange(k)]
    eigen_coef = eigen_coef * np.where(peak >= 0, 1.0, -1.0)
    model = FACEModel(
        degree=degree,
        mean_knots=mean_knots,
        mean_coef=mean.coef,
        cov_knots=basis.knots,
        theta=(eigen_coef * lam) @ eigen_coef.T,
        eigenvalues=lam,
        eigen_coef=eigen_coef,
        n_components=int(k),
        noise_variance=float(np.exp(result.log_s2)),
    )
    return MFPCAFit(
        model,
        -float(result.history[-1]),
        -float(result.history[0]),
        criteria,
        len(result.history) - 1,
        result.converged,
        result.history,
    )
