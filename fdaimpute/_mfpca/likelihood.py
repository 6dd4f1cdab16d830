"""The Gaussian log-likelihood of the centred curves, per subject in K x K algebra.

Subject ``i`` has residuals ``r_i`` (``n_i`` of them) and orthonormal-basis
rows ``E_i``; its covariance is ``Sigma_i = E_i C Lambda C^T E_i^T + s2 I``.
Only the statistics ``S_i = E_i^T E_i``, ``z_i = E_i^T r_i``,
``q_i = r_i^T r_i`` and ``n_i`` enter. With ``A_i = E_i C`` and
``W_i = C^T S_i C + s2 Lambda^-1`` (``K x K``), Woodbury's identity gives

    r^T Sigma^-1 r   = (q - zt^T W^-1 zt) / s2,           zt = C^T z,
    log det Sigma    = (n - K) log s2 + sum log lambda + log det W,

so every subject costs a ``K x K`` Cholesky factorisation, whatever
``n_i``; all subjects are solved at once on stacked arrays. The gradient
with respect to ``P = C Lambda C^T`` is
``0.5 sum_i (E_i^T Sigma_i^-1 E_i - u_i u_i^T)``, ``u_i = E_i^T Sigma_i^-1 r_i``,
again in the statistics alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix

_LOG_2PI = float(np.log(2.0 * np.pi))
# Observations per block when the per-observation outer products are formed.
_BLOCK_OBS = 100_000


@dataclass
class SubjectStats:
    """Per-subject sufficient statistics of the likelihood.

    Attributes
    ----------
    gram : ndarray of shape (n, M, M)
        ``S_i = E_i^T E_i``.
    cross : ndarray of shape (n, M)
        ``z_i = E_i^T r_i``.
    sq : ndarray of shape (n,)
        ``q_i = r_i^T r_i``.
    count : ndarray of shape (n,)
        ``n_i``.
    """

    gram: np.ndarray
    cross: np.ndarray
    sq: np.ndarray
    count: np.ndarray

    @classmethod
    def from_observations(cls, rows, resid, offsets):
        """The statistics from basis rows ``E`` (n_obs, M) and residuals."""
        n, m = offsets.size - 1, rows.shape[1]
        counts = np.diff(offsets)
        subject = np.repeat(np.arange(n), counts)
        gram = np.zeros((n, m * m))
        for lo in range(0, rows.shape[0], _BLOCK_OBS):
            hi = min(lo + _BLOCK_OBS, rows.shape[0])
            e = rows[lo:hi]
            which = csr_matrix(
                (np.ones(hi - lo), (subject[lo:hi], np.arange(hi - lo))),
                shape=(n, hi - lo),
            )
            gram += which @ (e[:, :, None] * e[:, None, :]).reshape(hi - lo, -1)
        which = csr_matrix(
            (np.ones(subject.size), (subject, np.arange(subject.size))),
            shape=(n, subject.size),
        )
        cross = which @ (rows * resid[:, None])
        sq = np.bincount(subject, resid * resid, minlength=n)
        return cls(gram.reshape(n, m, m), cross, sq, counts.astype(float))

    def take(self, index):
        """The statistics of the subjects at ``index``."""
        return SubjectStats(
            self.gram[index], self.cross[index], self.sq[index], self.count[index]
        )

    def __len__(self):
        return self.sq.size


def factor(stats, coef, lam, s2):
    """``S C``, ``C^T S C``, ``C^T z``, ``W^-1``, ``W^-1 C^T z`` and ``log det W``."""
    sc = stats.gram @ coef  # (n, M, K)
    # batched matrix products (BLAS) rather than einsum, which loops in C here
    csc = coef.T @ sc
    csc = (csc + np.swapaxes(csc, 1, 2)) / 2
    zt = stats.cross @ coef  # (n, K)
    w = csc.copy()
    k = coef.shape[1]
    w[:, np.arange(k), np.arange(k)] += s2 / lam
    chol = np.linalg.cholesky(w)
    logdet = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
    eye = np.broadcast_to(np.eye(k), w.shape)
    winv = np.linalg.solve(w, eye)
    winv = (winv + np.swapaxes(winv, 1, 2)) / 2
    v = (winv @ zt[..., None])[..., 0]
    return sc, csc, zt, winv, v, logdet


def subject_nll(stats, coef, lam, s2):
    """Negative log-likelihood of each subject, shape ``(n,)``."""
    k = coef.shape[1]
    _, _, zt, _, v, logdet = factor(stats, coef, lam, s2)
    quad = (stats.sq - np.einsum("nk,nk->n", zt, v)) / s2
    return 0.5 * (
        stats.count * _LOG_2PI
        + (stats.count - k) * np.log(s2)
        + np.log(lam).sum()
        + logdet
        + quad
    )


def nll_and_gradient(stats, coef, log_lam, log_s2):
    """Total negative log-likelihood and its Euclidean gradient.

    Parameters
    ----------
    stats : SubjectStats
    coef : ndarray of shape (M, K)
        ``C`` (orthonormal columns, though the formulas do not need it).
    log_lam : ndarray of shape (K,)
    log_s2 : float

    Returns
    -------
    value : float
    grad_coef : ndarray of shape (M, K)
    grad_log_lam : ndarray of shape (K,)
    grad_log_s2 : float
    """
    lam, s2 = np.exp(log_lam), float(np.exp(log_s2))
    k = coef.shape[1]
    sc, csc, zt, winv, v, logdet = factor(stats, coef, lam, s2)
    quad = (stats.sq - np.einsum("nk,nk->n", zt, v)) / s2
    value = 0.5 * float(
        np.sum(
            stats.count * _LOG_2PI
            + (stats.count - k) * np.log(s2)
            + np.log(lam).sum()
            + logdet
            + quad
        )
    )
    # 2 dL/dP = sum_i E^T Sigma^-1 E - u u^T
    scw = sc @ winv  # (n, M, K)
    # sum_n scw_n sc_n^T as one product over the subjects and components
    m = coef.shape[0]
    inner = stats.gram.sum(axis=0) - (
        scw.transpose(1, 0, 2).reshape(m, -1) @ sc.transpose(1, 0, 2).reshape(m, -1).T
    )
    u = stats.cross - (sc @ v[..., None])[..., 0]
    grad_p = 0.5 * (inner / s2 - (u.T @ u) / s2**2)
    grad_p = (grad_p + grad_p.T) / 2
    gp_c = grad_p @ coef
    grad_coef = 2.0 * gp_c * lam
    grad_lam = np.einsum("ak,ak->k", coef, gp_c)
    grad_s2 = float(np.sum(noise_gradient(stats, s2, csc, zt, winv, v)))
    return value, grad_coef, grad_lam * lam, grad_s2 * s2


def noise_gradient(stats, s2, csc, zt, winv, v):
    """Each subject's ``dl_i/ds2 = 0.5 (tr Sigma_i^-1 - |Sigma_i^-1 r_i|^2)``.

    ``csc``, ``zt``, ``winv`` and ``v`` are those of :func:`factor`.
    """
    trace = (stats.count - np.einsum("nkl,nlk->n", winv, csc)) / s2
    norm2 = (
        stats.sq
        - 2.0 * np.einsum("nk,nk->n", zt, v)
        + np.einsum("nk,nk->n", v, (csc @ v[..., None])[..., 0])
    ) / s2**2
    return 0.5 * (trace - norm2)
