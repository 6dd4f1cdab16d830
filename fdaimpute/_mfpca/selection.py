"""Approximate leave-one-curve-out cross-validation of a fitted rank.

Peng & Paul (2009) choose the basis size and the rank by the negative
log-likelihood of each curve under the parameters fitted without it,
``CV = sum_i l_i(theta_(-i))``, approximated from the full fit alone. With
``L = sum_i l_i`` minimised at ``theta``, dropping curve ``i`` moves the
optimum by about ``H^-1 g_i`` (``g_i`` the curve's score, ``H`` the
information), so ``l_i(theta_(-i)) ~ l_i(theta) + g_i^T H^-1 g_i`` and

    CV ~ L(theta) + trace(H^-1 J),    J = sum_i g_i g_i^T.

``H`` here is the Fisher information, ``0.5 sum_i tr(Sigma_i^-1 dSigma_i
Sigma_i^-1 dSigma_i)``, which for a Gaussian model needs no third
derivatives and is positive semi-definite. When the model holds,
``J ~ H`` and the penalty is the number of free parameters (AIC); when
the rank is too small, the curves' scores are over-dispersed and the
penalty grows.

The parameters are a chart of the rank-``K`` matrices ``P = C Lambda C^T``
around the fit: ``P(A, L) = G L G^T`` with ``G = C + C_perp A`` (``A`` of
shape ``(M - K) x K``, ``L`` symmetric ``K x K``), plus ``log s2``. Its
``MK - K(K - 1)/2 + 1`` coordinates are free, and at ``A = 0``,
``L = Lambda`` they give the fitted model. Every per-curve quantity comes
from the statistics of :class:`~fdaimpute._mfpca.likelihood.SubjectStats`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import null_space, pinvh

from fdaimpute._mfpca.likelihood import factor, noise_gradient, subject_nll

# Subjects per block when the Fisher information's Kronecker sums are formed.
_BLOCK_SUBJECTS = 4096


@dataclass(frozen=True)
class CVScore:
    """The approximate leave-one-curve-out score of one fit.

    Attributes
    ----------
    nll : float
        Negative log-likelihood at the fit, ``L(theta)``.
    penalty : float
        ``trace(H^-1 J)``, the estimated optimism of ``nll``.
    n_parameters : int
        Free parameters of the rank (the penalty under the model).
    """

    nll: float
    penalty: float
    n_parameters: int

    @property
    def score(self):
        """``nll + penalty``: the approximate ``sum_i l_i(theta_(-i))``."""
        return self.nll + self.penalty


def _directions(coef, lam):
    """The chart's tangent directions ``dP``, one ``vec(dP)`` per row."""
    m, k = coef.shape
    perp = null_space(coef.T)  # (M, M - K)
    rows = []
    for j in range(k):  # A_aj: perp_a (lam_j c_j)^T and its transpose
        d = perp.T[:, :, None] * (lam[j] * coef[:, j])[None, None, :]
        rows.append(d + np.swapaxes(d, 1, 2))
    for j in range(k):  # L_jl: c_j c_l^T and its transpose (once if j = l)
        for col in range(j, k):
            d = np.outer(coef[:, j], coef[:, col])
            rows.append((d if col == j else d + d.T)[None])
    return np.concatenate(rows).reshape(-1, m * m)


def _subject_terms(stats, coef, lam, s2):
    """Per subject: ``F = E^T Sigma^-1 E``, ``G = dl/dP``, ``dl/dlog s2``,
    ``E^T Sigma^-2 E`` and ``tr Sigma^-2``."""
    m = coef.shape[0]
    sc, csc, zt, winv, v, _ = factor(stats, coef, lam, s2)
    # R = I - S C W^-1 C^T: E^T Sigma^-1 = R E^T / s2.
    reduce = np.eye(m) - np.einsum("nak,nkl,bl->nab", sc, winv, coef)
    fisher_p = reduce @ stats.gram / s2
    fisher_p = (fisher_p + np.swapaxes(fisher_p, 1, 2)) / 2
    u = (stats.cross - np.einsum("nak,nk->na", sc, v)) / s2
    grad_p = 0.5 * (fisher_p - u[:, :, None] * u[:, None, :])
    grad_log_s2 = noise_gradient(stats, s2, csc, zt, winv, v) * s2
    second_p = reduce @ stats.gram @ np.swapaxes(reduce, 1, 2) / s2**2
    wb = winv @ csc
    trace2 = (
        stats.count - 2.0 * np.einsum("nkk->n", wb) + np.einsum("nkl,nlk->n", wb, wb)
    ) / s2**2
    return fisher_p, grad_p, grad_log_s2, second_p, trace2


def approximate_cv(stats, coef, log_lam, log_s2):
    """The approximate leave-one-curve-out score of a rank-``K`` fit.

    Parameters
    ----------
    stats : SubjectStats
    coef : ndarray of shape (M, K)
        Orthonormal columns, at the likelihood's optimum.
    log_lam : ndarray of shape (K,)
    log_s2 : float

    Returns
    -------
    CVScore
    """
    lam, s2 = np.exp(np.asarray(log_lam, float)), float(np.exp(log_s2))
    m = coef.shape[0]
    dirs = _directions(coef, lam)  # (p_P, M^2)
    n_p = dirs.shape[0]
    info = np.zeros((n_p + 1, n_p + 1))
    score = np.zeros((n_p + 1, n_p + 1))
    for lo in range(0, len(stats), _BLOCK_SUBJECTS):
        block = stats.take(slice(lo, lo + _BLOCK_SUBJECTS))
        fisher_p, grad_p, grad_s, second_p, trace2 = _subject_terms(
            block, coef, lam, s2
        )
        n = len(block)
        # sum_i vec(F_i) Kronecker: [(a, c), (b, d)] = sum_i F_i[a, c] F_i[b, d].
        flat = fisher_p.reshape(n, m * m)
        kron = (flat.T @ flat).reshape(m, m, m, m).transpose(0, 2, 1, 3)
        info[:n_p, :n_p] += 0.5 * dirs @ kron.reshape(m * m, m * m) @ dirs.T
        cross = 0.5 * s2 * dirs @ second_p.sum(axis=0).reshape(-1)
        info[:n_p, n_p] += cross
        info[n_p, :n_p] += cross
        info[n_p, n_p] += 0.5 * s2**2 * trace2.sum()
        grads = np.column_stack([grad_p.reshape(n, -1) @ dirs.T, grad_s])
        score += grads.T @ grads
    penalty = float(np.sum(pinvh(info) * score))
    nll = float(subject_nll(stats, coef, lam, s2).sum())
    return CVScore(nll, penalty, n_p + 1)
