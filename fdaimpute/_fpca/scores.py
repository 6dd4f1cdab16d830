"""Scores by conditional expectation (the best linear predictor), and their likelihood.

The oracle (:class:`fdaimpute.oracle.ConditionalMean`) uses the same
:func:`posterior_scores` with the true eigenpairs.
"""

from __future__ import annotations

import numpy as np

from fdaimpute._numerics.linalg import (
    CHUNK_SUBJECTS,
    PARALLEL_MIN_OBSERVATIONS,
    chunks_by_count,
    group_by_count,
    n_workers,
    pool_small_groups,
    run_tasks,
)


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
    woodbury=True,
    rest_basis=None,
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
    woodbury : bool, default=True
        For subjects with more observations than components (and
        ``sigma2 > 0``), solve the ``p x p`` system of the Woodbury identity
        instead of the ``n_i x n_i`` one: faster, equal up to rounding.
    rest_basis : ndarray of shape (n_obs or n_times, J), default=None
        With ``with_cov``: further eigenfunctions ``Psi`` (rows as
        ``basis``) that the predictor leaves out; then also return
        ``Psi_i^T Sigma_i^{-1} Phi_i Lambda`` for the returned scores, from
        which :func:`truncated_error_variance` adds what they contribute
        to the error.

    Returns
    -------
    mean : ndarray of shape (n_subjects, n_scores)
    cov : ndarray of shape (n_subjects, n_scores, n_scores)
        Only when ``with_cov``.
    cross : ndarray of shape (n_subjects, J, n_scores)
        Only when ``rest_basis`` is given.
    """
    p = lam.size
    q = p if n_scores is None else int(n_scores)
    n = offsets.size - 1
    mean = np.zeros((n, q))
    cov = np.zeros((n, q, q)) if with_cov else None
    if with_cov:
        cov[:] = np.diag(lam[:q])
    cross = None
    if rest_basis is not None:
        cross = np.zeros((n, rest_basis.shape[1], q))
    full = scaled = None
    if time_index is not None:
        full = (basis * lam) @ basis.T
        scaled = basis[:, :q] * lam[:q]  # rows of Phi Lambda, gathered below

    def solve(rows, obs, jitter):
        # each task writes the rows of its own subjects only
        ti = obs if time_index is None else time_index[obs]
        r = resid[obs]  # (g, m)
        m = obs.shape[1]
        if jitter is None:
            b = basis[ti]  # (g, m, p)
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
            if cross is not None:
                # Sigma^-1 Phi Lambda = Phi (Phi^T Phi + sigma2 Lambda^-1)^-1
                weights = b @ sol[:, :, 1 : q + 1]
                cross[rows] = np.swapaxes(rest_basis[ti], 1, 2) @ weights
            return
        if full is None:
            b = basis[ti]  # (g, m, p)
            sigma = (b * lam) @ np.swapaxes(b, 1, 2)
            blq = b[..., :q] * lam[:q]
        else:
            sigma = full[ti[:, :, None], ti[:, None, :]]
            blq = scaled[ti]
        sigma[:, np.arange(m), np.arange(m)] += jitter
        rhs = np.concatenate([r[..., None], blq], axis=2) if with_cov else r[..., None]
        sol = np.linalg.solve(sigma, rhs)
        mean[rows] = np.einsum("gmp,gm->gp", blq, sol[..., 0])
        if with_cov:
            cov[rows] = np.diag(lam[:q]) - np.swapaxes(blq, 1, 2) @ sol[..., 1:]
        if cross is not None:
            cross[rows] = np.swapaxes(rest_basis[ti], 1, 2) @ sol[..., 1:]

    # the jitter of a count's systems is set by the largest trace among all
    # of them, before they are cut into pieces for the threads
    diagonal = np.einsum("tp,tp,p->t", basis, basis, lam)  # diag of Phi Lambda Phi^T
    tasks = []
    for rows, obs in group_by_count(offsets):
        m = obs.shape[1]
        jitter = None
        if not (woodbury and m > p and sigma2 > 0):
            ti = obs if time_index is None else time_index[obs]
            trace = diagonal[ti].sum(axis=1).max() if len(rows) else 0.0
            jitter = max(sigma2, 1e-10 * max(trace, 1e-300) / m)
        for start in range(0, rows.size, CHUNK_SUBJECTS):
            piece = slice(start, start + CHUNK_SUBJECTS)
            tasks.append((rows[piece], obs[piece], jitter))
    run_tasks(solve, tasks, parallel=offsets[-1] >= PARALLEL_MIN_OBSERVATIONS)
    if cross is not None:
        return mean, cov, cross
    if with_cov:
        return mean, cov
    return mean


def truncated_error_variance(basis, rest, cov, cross, rest_lam):
    """Pointwise error variance of a predictor that leaves components out.

    The curve is ``Phi xi + Psi eta`` with ``Cov(eta) = diag(rest_lam)``,
    and the scores ``xi`` are predicted from a model without ``eta`` (which
    is predicted as zero). The prediction error's variance at a time with
    basis rows ``phi``, ``psi`` is ``phi^T (C + Q^T M Q) phi
    - 2 phi^T Q^T M psi + psi^T M psi``, with ``C`` the model's posterior
    covariance of ``xi``, ``M = diag(rest_lam)`` and ``Q = Psi_i^T
    Sigma_i^{-1} Phi_i Lambda`` (``cross``): the left-out components act as
    extra noise on the observations, are correlated with the scores'
    error, and are missing from the curve.

    Parameters
    ----------
    basis : ndarray of shape (G, K)
        The predictor's eigenfunctions at the output times.
    rest : ndarray of shape (G, J)
        The left-out eigenfunctions there.
    cov : ndarray of shape (n, K, K)
        Posterior covariance of the scores under the predictor's model.
    cross : ndarray of shape (n, J, K)
        ``Q`` of each subject (from :func:`posterior_scores`).
    rest_lam : ndarray of shape (J,)
        The left-out eigenvalues.

    Returns
    -------
    ndarray of shape (n, G)
    """
    weighted = cross * rest_lam[:, None]  # M Q
    inner = cov + np.swapaxes(cross, 1, 2) @ weighted
    var = np.einsum("gk,nkl,gl->ng", basis, inner, basis)
    var -= 2.0 * np.einsum(
        "ngj,gj->ng", np.einsum("gk,njk->ngj", basis, weighted), rest
    )
    var += (rest**2) @ rest_lam
    return var


def cumulative_predictions(
    resid_fit,
    basis_fit,
    offsets_fit,
    basis_new,
    offsets_new,
    lam,
    sigma2,
    *,
    index_fit=None,
    index_new=None,
):
    """Predictions at held-out times for every number of components at once.

    For subject ``i`` with visible residuals ``r`` at basis rows ``Phi`` and
    held-out basis rows ``Phi_h``, the prediction with the first ``K``
    components is ``Phi_h[:, :K] (Phi[:, :K]^T Phi[:, :K] + sigma2
    Lambda_K^-1)^-1 Phi[:, :K]^T r``. With ``L`` the Cholesky factor of the
    full ``p x p`` matrix, the ``K``-component system has factor
    ``L[:K, :K]``, so all ``K = 1..p`` predictions are the cumulative sums
    over ``k`` of ``(L^-1 Phi_h^T)[k] (L^-1 Phi^T r)[k]``.

    Parameters
    ----------
    resid_fit : ndarray of shape (n_fit_obs,)
        Visible residuals, concatenated by subject.
    basis_fit : ndarray of shape (n_fit_obs, p) or (n_rows, p)
        The basis at the visible times, or a table of rows of it when
        ``index_fit`` gives each visible observation's row.
    offsets_fit : ndarray of shape (n_subjects + 1,)
        CSR offsets of the visible observations.
    basis_new, offsets_new
        The same for the held-out observations (rows: ``index_new``).
    lam : ndarray of shape (p,)
        Eigenvalues.
    sigma2 : float
        Noise variance of the predictor.
    index_fit, index_new : ndarray of int, default=None
        Row of the table of each visible and held-out observation (with few
        distinct times, no ``(n_obs, p)`` copy of the basis is made).

    Returns
    -------
    ndarray of shape (n_new_obs, p)
        Column ``K - 1``: the prediction (minus the mean) with ``K`` components.
    """
    p = lam.size
    out = np.zeros((offsets_new[-1], p))

    def fit_rows(obs):
        return basis_fit[obs if index_fit is None else index_fit[obs]]

    def new_rows(obs):
        return basis_new[obs if index_new is None else index_new[obs]]

    counts_new = np.diff(offsets_new)
    ridge = sigma2 / lam
    # the observation-space recursion divides by sigma2: only where the
    # noise is not negligible against the leading eigenvalue
    noisy = p > 0 and sigma2 > OBSERVATION_SPACE_MIN_NOISE * lam.max()
    few = np.diff(offsets_fit) * OBSERVATION_SPACE_RATIO <= p
    few &= noisy

    def predict_few(rows, obs):
        # slots padded with -1 (pooled groups) get zero residual and basis
        # rows, which leave every prediction as it is
        absent = obs < 0
        take = np.where(absent, 0, obs)
        basis = fit_rows(take)
        basis[absent] = 0.0
        resid = np.where(absent, 0.0, resid_fit[take])
        new = (new_rows, offsets_new[rows], counts_new[rows])
        _predict_in_observation_space(resid, basis, new, lam, sigma2, out)

    lower = np.tril_indices(p)  # L's rows one after another

    def predict(rows, obs):
        # each task writes the rows of its own subjects only
        g = rows.size
        # the p x p systems formed and factored a slice at a time (a slice's
        # matrices stay in cache), each as it would be alone; L's lower
        # triangle kept with the subjects on the last axis, as the forward
        # substitution reads it
        chol = np.empty((lower[0].size, g))
        rhs_r = np.empty((g, p))
        for start in range(0, g, FACTOR_SUBJECTS):
            part = slice(start, start + FACTOR_SUBJECTS)
            b = fit_rows(obs[part])
            a = np.swapaxes(b, 1, 2) @ b
            jitter = 1e-10 * np.trace(a, axis1=1, axis2=2)[:, None] / p
            a[:, np.arange(p), np.arange(p)] += ridge + jitter
            chol[:, part] = np.linalg.cholesky(a)[:, lower[0], lower[1]].T
            rhs_r[part] = np.einsum("gmp,gm->gp", b, resid_fit[obs[part]])
        sub_counts = counts_new[rows]
        hidden_counts = np.unique(sub_counts)
        for m_new in hidden_counts:
            if m_new == 0:
                continue
            if hidden_counts.size == 1:  # all of them: no copies
                sel, factor, right_r = slice(None), chol, rhs_r
            else:
                sel = np.flatnonzero(sub_counts == m_new)
                factor, right_r = chol[:, sel], rhs_r[sel]
            idx = offsets_new[rows[sel]][:, None] + np.arange(m_new)
            # [Phi^T r, Phi_h^T] of each subject, the batch on the last axis
            right = np.empty((p, 1 + m_new, idx.shape[0]))
            right[:, 0] = right_r.T
            right[:, 1:] = new_rows(idx).transpose(2, 1, 0)
            sol = _forward_substitution(factor, right)  # L^-1 [Phi^T r, Phi_h^T]
            terms = sol[:, 1:] * sol[:, :1]  # (p, m_new, g)
            for k in range(1, p):  # cumulative over k: long passes
                terms[k] += terms[k - 1]
            out[idx] = terms.transpose(2, 1, 0)

    # (``few`` depends on the count alone: a group is wholly in or out)
    size = OBSERVATION_SPACE_CHUNK
    run_tasks(
        predict_few,
        pool_small_groups(
            (c for c in chunks_by_count(offsets_fit, size) if few[c[0][0]]), size
        ),
    )
    # the Cholesky path's subjects in as many pieces as a multiple of the
    # threads (each thread an equal share), of at most CHUNK_SUBJECTS each
    size = CHUNK_SUBJECTS
    n_factored = int(np.count_nonzero(~few))
    if n_factored and offsets_fit[-1] >= PARALLEL_MIN_OBSERVATIONS:
        workers = n_workers()
        pieces = workers * -(-n_factored // (workers * CHUNK_SUBJECTS))
        size = -(-n_factored // pieces)
    run_tasks(
        predict, [c for c in chunks_by_count(offsets_fit, size) if not few[c[0][0]]]
    )
    return out


#: The held-out predictions of every ``K`` come from the recursion in
#: observation space for subjects with ``m`` visible points when ``m`` times
#: this is at most ``p`` (it costs ``p m^2`` per subject against the ``p^3 / 3``
#: of the ``p x p`` Cholesky factor; on 3,000 subjects with ``p = 50`` it was
#: 3.7 times faster at ``m = 3``, 1.5 times at ``m = 8``, slower from ``m = 12``,
#: when it ran with the subjects on the first axis; measured again with both
#: as they are now, on 1,500 subjects with 3 hidden points, ``p = 50``, one
#: thread: the recursion took 15 / 21 / 23 / 27 / 39 / 67 ms at ``m`` = 6 / 8
#: / 10 / 12 / 16 / 24, the Cholesky path 29-33 ms at each, so the crossover
#: is near ``m = 13``; 5 moves no subject of the paper's designs across it).
OBSERVATION_SPACE_RATIO = 5
#: Least ``sigma2 / lambda_1`` for that recursion (it starts from
#: ``I / sigma2``; below this, rounding could grow with ``lambda_1 / sigma2``).
OBSERVATION_SPACE_MIN_NOISE = 1e-6
#: Subjects per task of that recursion.
OBSERVATION_SPACE_CHUNK = 1024
#: Subjects whose ``p x p`` systems are formed and factored at once in the
#: Cholesky path (their matrices stay in cache: at ``p = 50`` a slice of 64
#: factored 1.6 times as fast per subject as one of 512).
FACTOR_SUBJECTS = 64


def _predict_in_observation_space(resid, basis, hidden, lam, sigma2, out):
    """:func:`cumulative_predictions` of subjects with ``m`` visible points each.

    With ``K`` components the prediction at a hidden time with basis row
    ``phi_h`` is ``w_K^T S_K^{-1} r``, where ``S_K = sigma2 I + sum_{k<=K}
    lambda_k beta_k beta_k^T`` (``beta_k``: the subject's column ``k`` of
    the basis at its ``m`` visible times) and ``w_K = sum_{k<=K} lambda_k
    phi_h[k] beta_k``. ``S_K^{-1}`` follows from ``S_{K-1}^{-1}`` by the
    Sherman-Morrison formula: ``p`` updates of ``m x m`` matrices instead of
    a ``p x p`` factorisation per subject; ``w_K`` of every hidden point is
    updated along with it.

    Parameters
    ----------
    resid : ndarray of shape (g, m)
        Visible residuals of ``g`` subjects.
    basis : ndarray of shape (g, m, p)
        Their basis rows.
    hidden : tuple
        ``(new_rows, starts_new, counts_new)``: a function from hidden
        points' positions to their basis rows (``(..., p)``), where each of
        these subjects' hidden points start and how many there are
        (``(g,)`` each).
    lam : ndarray of shape (p,)
    sigma2 : float
    out : ndarray of shape (n_new_obs, p)
        Written at the rows of these subjects' hidden points.
    """
    new_rows, starts_new, counts_new = hidden
    g, m, p = basis.shape
    # subjects on the last axis: every step below is an elementwise pass
    # with a long contiguous inner loop (on (g, m, m) NumPy's inner loops
    # would have length m)
    columns = np.ascontiguousarray(basis.transpose(2, 1, 0))  # beta_k: (p, m, g)
    r = np.ascontiguousarray(resid.T)  # (m, g)
    inverse = np.zeros((m, m, g))
    inverse[np.arange(m), np.arange(m)] = 1.0 / sigma2
    solved = r / sigma2  # S_K^{-1} r
    update = np.empty((m, m, g))
    # hidden slot h of each subject (slots past its count are zero and dropped)
    slot = np.arange(counts_new.max(initial=0))[:, None]
    valid = slot < counts_new
    rows = np.where(valid, starts_new + slot, 0)
    phi = new_rows(rows)  # (h, g, p)
    phi[~valid] = 0.0
    phi = np.ascontiguousarray(phi.transpose(2, 0, 1)) * lam[:, None, None]
    w = np.zeros((slot.size, m, g))  # w_K of every hidden slot
    pred = np.empty((p, slot.size, g))
    for k in range(p):
        beta = columns[k]
        u = np.einsum("ijg,jg->ig", inverse, beta)
        denom = 1.0 / lam[k] + np.einsum("ig,ig->g", beta, u)
        np.multiply(u[:, None], (u / denom)[None], out=update)
        inverse -= update
        solved = solved - u * (np.einsum("ig,ig->g", u, r) / denom)
        w += phi[k][:, None] * beta
        pred[k] = np.einsum("hmg,mg->hg", w, solved)
    out[rows[valid]] = pred.transpose(1, 2, 0)[valid]


def _forward_substitution(chol, right):
    """Solve ``L x = rhs`` for a batch of lower-triangular ``L``, row by row.

    The batch is on the last axis of ``L``'s rows (``chol``: the lower
    triangle row after row, ``(p (p + 1) / 2, g)``), of the right-hand sides
    (``(p, c, g)``) and of the solution: every step is then a pass with a
    long contiguous inner loop (over a ``(g, p, c)`` layout NumPy's inner
    loops would have length ``c``).
    """
    out = np.empty_like(right)
    start = 0  # row j of L: chol[start : start + j + 1]
    for j in range(right.shape[0]):
        acc = right[j]
        if j:
            acc = acc - np.einsum("kg,kcg->cg", chol[start : start + j], out[:j])
        out[j] = acc / chol[start + j]
        start += j + 1
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
