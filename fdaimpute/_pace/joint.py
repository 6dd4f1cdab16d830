"""Scores of a multivariate model: several variables, each with its own noise.

An observation ``j`` of subject ``i`` has a variable ``v_j`` and a time
``t_j``; its row of the model's basis is variable ``v_j``'s loadings at
``t_j`` and its noise variance is ``sigma2[v_j]``. Dividing each
observation's residual and basis row by its noise SD turns the model into
one with unit noise everywhere, with the same conditional expectation and
posterior covariance of the scores; :func:`posterior_scores` then applies
unchanged.
"""

from __future__ import annotations

import numpy as np

from fdaimpute._fpca.scores import posterior_scores


def posterior_scores_by_variable(
    resid,
    basis,
    offsets,
    lam,
    noise_var,
    *,
    n_scores=None,
    with_cov=False,
    rest_basis=None,
    time_index=None,
):
    """Conditional expectation of the scores with one noise variance per observation.

    Parameters
    ----------
    resid : ndarray of shape (n_obs,)
        Residuals from each observation's variable's mean.
    basis : ndarray of shape (n_obs, K) or (n_rows, K)
        Each observation's row of loadings, or a table of rows indexed by
        ``time_index``.
    offsets : ndarray of shape (n_subjects + 1,)
        CSR offsets of the subjects.
    lam : ndarray of shape (K,)
        Score variances.
    noise_var : ndarray of shape (n_obs,)
        Noise variance of each observation (positive).
    n_scores, with_cov, rest_basis, time_index
        As :func:`~fdaimpute._fpca.scores.posterior_scores`; with
        ``time_index``, ``noise_var`` must be constant on each table row
        (the rows are distinct (variable, time) pairs).

    Returns
    -------
    As :func:`~fdaimpute._fpca.scores.posterior_scores`.
    """
    sd = np.sqrt(noise_var)
    if time_index is None:
        row_sd = sd
    else:
        row_sd = np.ones(basis.shape[0])
        row_sd[time_index] = sd
    scaled_rest = None if rest_basis is None else rest_basis / row_sd[:, None]
    return posterior_scores(
        resid / sd,
        basis / row_sd[:, None],
        offsets,
        lam,
        1.0,
        n_scores=n_scores,
        with_cov=with_cov,
        time_index=time_index,
        rest_basis=scaled_rest,
    )
