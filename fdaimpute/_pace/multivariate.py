"""Multivariate PACE: cross-covariances, the joint eigen-analysis and the model.

Each variable ``j`` has its univariate PACE fit (mean ``mu_j``, smoothed
covariance ``C_jj`` on its work grid ``g_j``, noise variance). The
cross-covariance ``C_jk(s, t) = Cov(X_j(s), X_k(t))`` is smoothed from the
raw cross-products ``r_ij(s) r_ik(t)`` of every pair of a subject's
observations of the two variables (all pairs: the variables' measurement
errors are independent, so no pair is biased), binned like PACE's own raw
covariances and smoothed like them in rotated coordinates (along and across
the diagonal, where stationary-like surfaces change least and most), on a
work grid over the whole time range, then carried to ``g_j x g_k``.

The joint operator acts on the stacked grids ``g_1, ..., g_p``, each
variable divided by its scale ``s_j`` (the root of its average variance,
relative to the geometric mean over variables, so one variable alone is
left unchanged). Its eigenvectors ``phi_m = (phi_m^1, ..., phi_m^p)``, of
unit norm summed over the variables, give each variable's loadings
``psi_m^j = s_j phi_m^j``: ``X_j = mu_j + sum_m xi_m psi_m^j`` with one
score vector ``xi`` shared by all variables.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
from scipy.interpolate import BSpline

from fdaimpute._core.state import check_array, check_number, check_profile
from fdaimpute._fpca.eigen import (
    orient_by_peak,
    quadrature_weights,
    trapezoid,
    weighted_eigenpairs,
)
from fdaimpute._fpca.folds import heldout_folds
from fdaimpute._fpca.heldout import band_profile, fit_band_weights, profile_factor
from fdaimpute._fpca.scores import cumulative_predictions, truncated_error_variance
from fdaimpute._numerics.interpolate import spline_columns
from fdaimpute._pace.bandwidth import mean_bandwidth
from fdaimpute._pace.binning import CovMoments, bins_on
from fdaimpute._pace.joint import posterior_scores_by_variable
from fdaimpute._pace.surface import RotatedSmoother

#: Most distinct (variable, time) pairs gathered from one table of basis rows.
MAX_TABLE_ROWS = 4000


def cross_moments(bins, resid, variable, subject, n_subjects, j, k):
    """Binned sums of the raw cross-products of variables ``j`` and ``k``.

    Parameters
    ----------
    bins : Bins
        Bins of every observation (all variables share the centres).
    resid : ndarray of shape (n_obs,)
        Residuals from each observation's variable's mean.
    variable, subject : ndarray of int of shape (n_obs,)
        Variable and subject of each observation.
    n_subjects : int
        Number of subjects.
    j, k : int
        The two variables (``j != k``).

    Returns
    -------
    count, total : ndarray of shape (n_bins, n_bins)
        Weighted number and sum of the products ``r_ij(s) r_ik(t)``, ``s``
        binned on the rows and ``t`` on the columns.
    """
    n_bins = bins.centres.size

    def sparse(select, values):
        q = bins.index.shape[1]
        rows = np.repeat(subject[select], q)
        cols = bins.index[select].ravel()
        vals = (bins.weight[select] * values[:, None]).ravel()
        return sp.csr_matrix((vals, (rows, cols)), shape=(n_subjects, n_bins))

    on_j, on_k = variable == j, variable == k
    ones_j, ones_k = np.ones(on_j.sum()), np.ones(on_k.sum())
    count = (sparse(on_j, ones_j).T @ sparse(on_k, ones_k)).toarray()
    total = (sparse(on_j, resid[on_j]).T @ sparse(on_k, resid[on_k])).toarray()
    return count, total


def smooth_cross(count, total, centres, work_grid, bandwidth, kernel):
    """Local-linear fit of binned cross-products in rotated coordinates.

    The fit of :class:`~fdaimpute._pace.surface.RotatedSmoother` (its own
    bandwidth along and across the diagonal, linear along, quadratic across
    near the diagonal and linear farther out), not symmetrised
    (``C_jk(s, t)`` need not equal ``C_jk(t, s)``). The quadratic term
    follows the curvature across the diagonal, where the products are most
    numerous (on the simulated shared process it lowered the error of the
    sparse variable by about 2% over a linear fit).

    Parameters
    ----------
    count, total : ndarray of shape (n_bins, n_bins)
        From :func:`cross_moments` (bins on a regular grid).
    centres : ndarray of shape (n_bins,)
        Bin centres.
    work_grid : ndarray of shape (G,)
        Regular output grid, for both arguments.
    bandwidth : tuple of float
        ``(along, across)``.
    kernel : str
        Kernel name.

    Returns
    -------
    ndarray of shape (G, G)
        ``C_jk`` at ``(work_grid[a], work_grid[b])``.
    """
    empty = np.zeros(centres.size)
    moments = CovMoments(centres, count, total, count, empty, empty, empty)
    smoother = RotatedSmoother(moments, work_grid, kernel)
    along, across = bandwidth
    return smoother(float(along), float(across), ridge=True, symmetric=False)


def regrid(surface, grid, rows, cols):
    """A surface on ``grid x grid`` at ``rows x cols`` (cubic splines)."""
    if np.array_equal(rows, grid) and np.array_equal(cols, grid):
        return surface
    on_rows = spline_columns(grid, surface, rows)
    return spline_columns(grid, on_rows.T, cols).T


def variable_scales(covariances, grids):
    """Each variable's scale: root average variance over the geometric mean.

    Returns
    -------
    ndarray of shape (p,)
        ``s_j = sqrt(v_j / exp(mean log v))`` with ``v_j`` the average of
        ``C_jj(t, t)`` over the work grid; 1 for a single variable.
    """
    var = np.array(
        [
            max(trapezoid(np.clip(np.diag(c), 0.0, None), g) / (g[-1] - g[-0]), 1e-300)
            for c, g in zip(covariances, grids)
        ]
    )
    return np.sqrt(var / np.exp(np.mean(np.log(var))))


def joint_eigen(blocks, grids, scales, max_components):
    """Eigenpairs of the joint covariance operator of the scaled variables.

    Parameters
    ----------
    blocks : list of list of ndarray
        ``blocks[j][k]`` is ``C_jk`` on ``grids[j] x grids[k]``.
    grids : list of ndarray
        The variables' work grids.
    scales : ndarray of shape (p,)
        The variables' scales.
    max_components : int
        Most eigenpairs to return.

    Returns
    -------
    values : ndarray
        The positive eigenvalues (at most ``max_components``), decreasing.
    phi : ndarray of shape (sum of grid sizes, len(values))
        Stacked eigenfunctions of the scaled variables, unit norm (sum of
        the variables' trapezoid integrals), each one's largest absolute
        value positive.
    fve : ndarray
        Cumulative fraction of variance explained (of all positive ones).
    """
    weights = np.concatenate([quadrature_weights(g, "trapezoid") for g in grids])
    scale = np.concatenate([np.full(g.size, s) for g, s in zip(grids, scales)])
    cov = np.block(blocks) / np.outer(scale, scale)
    cov = 0.5 * (cov + cov.T)
    values, phi = weighted_eigenpairs(
        cov,
        weights,
        max_components,
        "the joint covariance has no positive eigenvalue; the data show "
        "no variation between subjects",
    )
    k = phi.shape[1]
    norm = np.zeros(k)
    start = 0
    for g in grids:
        norm += trapezoid(phi[start : start + g.size] ** 2, g)
        start += g.size
    phi = orient_by_peak(phi / np.sqrt(norm))
    fve = np.cumsum(values[:k]) / values.sum()
    return values[:k], phi, fve


@dataclass(frozen=True)
class MultivariatePACEModel:
    """What imputation needs of a fitted multivariate PACE model.

    Attributes
    ----------
    means : list of MeanCurve
        Each variable's mean.
    work_grids : list of ndarray
        Each variable's work grid.
    scales : ndarray of shape (p,)
        The variables' scales ``s_j``.
    eigenvalues : ndarray of shape (K,)
        The scores' variances.
    loadings : list of ndarray
        ``loadings[j]`` of shape (G_j, K): ``psi^j`` on the work grid.
    rest_eigenvalues : ndarray of shape (J,)
        The further positive eigenvalues the predictor leaves out.
    rest_loadings : list of ndarray
        Their loadings, ``rest_loadings[j]`` of shape (G_j, J).
    noise_variance : ndarray of shape (p,)
        Each variable's noise variance in the predictor.
    rest_weight : float
        Share of the left-out components' variance the bands carry.
    misfit_variance : ndarray of shape (p,)
        Each variable's model-error variance added to its bands.
    band_profiles : list
        Each variable's band profile ``(knots, factor)`` or None.
    """

    means: list
    work_grids: list
    scales: np.ndarray
    eigenvalues: np.ndarray
    loadings: list
    rest_eigenvalues: np.ndarray
    rest_loadings: list
    noise_variance: np.ndarray
    rest_weight: float
    misfit_variance: np.ndarray
    band_profiles: list

    @property
    def n_variables(self):
        """Number of variables."""
        return len(self.means)

    @property
    def n_components(self):
        """Number of components ``K``."""
        return self.eigenvalues.size

    def check(self, name):
        """Raise ValueError if the shapes or signs are not a model's
        (``name``: the attribute holding it, for the message)."""
        p = self.n_variables
        k = check_array(
            self.eigenvalues, f"{name}.eigenvalues", (None,), nonnegative=True
        ).size
        rest = check_array(
            self.rest_eigenvalues, f"{name}.rest_eigenvalues", (None,), nonnegative=True
        ).size
        for field in ("work_grids", "loadings", "rest_loadings", "band_profiles"):
            if len(getattr(self, field)) != p:
                raise ValueError(
                    f"{name}.{field} does not have {p} items, one a variable"
                )
        for j in range(p):
            self.means[j].check(f"{name}.means[{j}]")
            g = check_array(self.work_grids[j], f"{name}.work_grids[{j}]", (None,)).size
            check_array(self.loadings[j], f"{name}.loadings[{j}]", (g, k))
            check_array(self.rest_loadings[j], f"{name}.rest_loadings[{j}]", (g, rest))
            check_profile(self.band_profiles[j], f"{name}.band_profiles[{j}]")
        check_array(self.scales, f"{name}.scales", (p,), nonnegative=True)
        check_array(
            self.noise_variance, f"{name}.noise_variance", (p,), nonnegative=True
        )
        check_array(
            self.misfit_variance, f"{name}.misfit_variance", (p,), nonnegative=True
        )
        check_number(self.rest_weight, f"{name}.rest_weight")

    def band_factor(self, j, times):
        """Variable ``j``'s factor of the bands' variance at ``times``."""
        return profile_factor(self.band_profiles[j], times)

    # ------------------------------------------------------------------ #
    # evaluation
    def _rows(self, times, variable, which, derivative=False):
        """Each observation's row of loadings (``which``: "main" or "rest")."""
        loads = self.loadings if which == "main" else self.rest_loadings
        width = loads[0].shape[1]
        out = np.empty((times.size, width))
        for j in range(self.n_variables):
            on = variable == j
            if on.any():
                out[on] = spline_columns(
                    self.work_grids[j], loads[j], times[on], derivative=derivative
                )
        return out

    def _table(self, times, variable, with_rest):
        """Basis rows of the distinct (variable, time) pairs, and each one's row."""
        # the distinct times of each variable in turn: the pairs in
        # (variable, time) order, without sorting the pairs as rows
        index = np.empty(times.size, dtype=np.int64)
        distinct = []
        for j in range(self.n_variables):
            on = variable == j
            uniq, inverse = np.unique(times[on], return_inverse=True)
            index[on] = inverse.ravel() + sum(u.size for u in distinct)
            distinct.append(uniq)
        if sum(u.size for u in distinct) > MAX_TABLE_ROWS:
            rest = self._rows(times, variable, "rest") if with_rest else None
            return self._rows(times, variable, "main"), rest, None
        var = np.repeat(np.arange(self.n_variables), [u.size for u in distinct])
        at = np.concatenate(distinct)
        rest = self._rows(at, var, "rest") if with_rest else None
        return self._rows(at, var, "main"), rest, index

    def residuals(self, times, values, variable):
        """``y - mu_v(t)`` of every observation."""
        resid = np.empty(times.size)
        for j in range(self.n_variables):
            on = variable == j
            if on.any():
                resid[on] = values[on] - self.means[j](times[on])
        return resid

    def scores(self, times, values, variable, offsets, with_cov=False):
        """Conditional expectation of the shared scores (and their covariance)."""
        resid = self.residuals(times, values, variable)
        basis, _, index = self._table(times, variable, False)
        return posterior_scores_by_variable(
            resid,
            basis,
            offsets,
            self.eigenvalues,
            self.noise_variance[variable],
            with_cov=with_cov,
            time_index=index,
        )

    def grid_basis(self, grid, which="main", derivative=False):
        """Stacked loadings of every variable at ``grid``, shape (p * G, width)."""
        loads = self.loadings if which == "main" else self.rest_loadings
        return np.concatenate(
            [
                spline_columns(w, load, grid, derivative=derivative)
                for w, load in zip(self.work_grids, loads)
            ]
        )

    def grid_mean(self, grid, derivative=False):
        """Every variable's mean (or its slope) at ``grid``, stacked."""
        return np.concatenate([m(grid, derivative=derivative) for m in self.means])

    def curves(self, scores, grid):
        """``mu_j + psi^j xi`` at ``grid`` for every variable, shape (n, p * G)."""
        return self.grid_mean(grid) + scores @ self.grid_basis(grid).T

    def slopes(self, scores, grid):
        """The derivative of :meth:`curves`."""
        return (
            self.grid_mean(grid, derivative=True)
            + scores @ self.grid_basis(grid, derivative=True).T
        )

    def error_variance(self, times, values, variable, offsets, grid):
        """Scores and the variance of each curve's error at ``grid``, (n, p * G).

        The posterior variance of the ``K`` scores, plus what the left-out
        components (weighted by ``rest_weight``) contribute, plus each
        variable's misfit variance, times its band profile.
        """
        resid = self.residuals(times, values, variable)
        rest_lam = self.rest_weight * self.rest_eigenvalues
        with_rest = bool(rest_lam.size) and self.rest_weight > 0
        basis, rest, index = self._table(times, variable, with_rest)
        out = posterior_scores_by_variable(
            resid,
            basis,
            offsets,
            self.eigenvalues,
            self.noise_variance[variable],
            with_cov=True,
            time_index=index,
            rest_basis=rest,
        )
        main = self.grid_basis(grid)
        if with_rest:
            scores, cov, cross = out
            var = truncated_error_variance(
                main, self.grid_basis(grid, "rest"), cov, cross, rest_lam
            )
        else:
            scores, cov = out
            var = np.einsum("gk,nkl,gl->ng", main, cov, main)
        g = grid.size
        for j in range(self.n_variables):
            block = slice(j * g, (j + 1) * g)
            var[:, block] += self.misfit_variance[j]
            var[:, block] *= self.band_factor(j, grid)
        return scores, var


def heldout_errors(model_all, data, rng, *, max_subjects=3000):
    """Held-out errors of the predictor with each number of leading components.

    The hidden observations are laid out as in univariate PACE's
    cross-validation (:func:`~fdaimpute._fpca.folds.heldout_folds`): on large
    data, one random draw of a fifth of the observations of up to
    ``max_subjects`` subjects; where that hides fewer than
    ``TARGET_HIDDEN`` observations (a few hundred subjects), every
    observation of every validation subject is hidden exactly once over
    ``N_FOLDS`` systematic folds, so that which points are hidden does not
    depend on the seed. Each fold's hidden values are predicted from the
    subject's other observations of every variable with the first ``K``
    components, for every ``K`` at once; each squared error is divided by
    its variable's raw variance (so that every variable counts alike).

    Parameters
    ----------
    model_all : MultivariatePACEModel
        The model with every kept component (none left out).
    data : MultivariateIrregularData
        The training subjects.
    rng : numpy.random.RandomState
        Draws the subjects and the hidden observations of one draw.
    max_subjects : int, default=3000
        Most validation subjects.

    Returns
    -------
    errors : ndarray of shape (n_hidden, K_max)
        Relative squared error of each hidden observation for ``K = 1 ..
        K_max``, weighted so that each variable's hidden points have the
        same total weight (their column means are the variables' average).
    owner : ndarray of int of shape (n_hidden,)
        The validation subject of each hidden observation.
    n_folds : int
        Number of folds (1: one random draw).
    """
    subject = data.subject_index
    times, variable = data.times, data.variable
    resid = model_all.residuals(times, data.values, variable)
    rows = model_all._rows(times, variable, "main")
    sd = np.sqrt(model_all.noise_variance[variable])
    raw = np.array(
        [
            max(np.mean(resid[variable == j] ** 2), 1e-300)
            if np.any(variable == j)
            else 1.0
            for j in range(model_all.n_variables)
        ]
    )
    errors, owners, var_hidden = [], [], []
    for val, hide, vis in _fold_masks(data, rng, max_subjects):
        pred = cumulative_predictions(
            resid[vis] / sd[vis],
            rows[vis] / sd[vis, None],
            _offsets_of(data, vis, val),
            rows[hide],
            _offsets_of(data, hide, val),
            model_all.eigenvalues,
            1.0,
        )
        errors.append((resid[hide, None] - pred) ** 2 / raw[variable[hide], None])
        owners.append(subject[hide])
        var_hidden.append(variable[hide])
    errors, owner = np.concatenate(errors), np.concatenate(owners)
    var_hidden = np.concatenate(var_hidden)
    per_variable = np.bincount(var_hidden, minlength=model_all.n_variables)
    present = per_variable > 0
    weight = var_hidden.size / (present.sum() * per_variable[var_hidden])
    owner = np.searchsorted(val, owner)
    return errors * weight[:, None], owner, len(owners)


def _fold_masks(data, rng, max_subjects):
    """Each fold of :func:`~fdaimpute._fpca.folds.heldout_folds` as masks.

    Yields the validation subjects (sorted) and the masks of the fold's
    hidden observations and of their subjects' visible ones.
    """
    val, folds = heldout_folds(data.offsets, rng, max_subjects)
    in_val = np.zeros(len(data), dtype=bool)
    in_val[val] = True
    subject = data.subject_index
    for hidden_at in folds:
        hide = np.zeros(subject.size, dtype=bool)
        hide[hidden_at] = True
        yield val, hide, ~hide & in_val[subject]


def _offsets_of(data, mask, val):
    """CSR offsets of the observations in ``mask`` of the subjects ``val``."""
    counts = np.bincount(data.subject_index[mask], minlength=len(data))[val]
    return np.concatenate([[0], np.cumsum(counts)])


def heldout_band_terms(model, data, rng, *, max_subjects=3000):
    """Each hidden observation's residual and its curve's posterior variance.

    The observations are hidden as for :func:`heldout_errors`; each fold's
    hidden values are predicted by ``model`` from the subject's other
    observations of every variable.

    Returns
    -------
    variable, times, resid, kept : ndarray of shape (n_hidden,)
        The hidden observations' variables and times, their values less the
        prediction, and the prediction's posterior variance (the ``K``
        scores' covariance mapped through the loadings).
    """
    subject = data.subject_index
    times, variable = data.times, data.variable
    parts = []
    for val, hide, vis in _fold_masks(data, rng, max_subjects):
        mean, cov = model.scores(
            times[vis],
            data.values[vis],
            variable[vis],
            _offsets_of(data, vis, val),
            with_cov=True,
        )
        owner = np.searchsorted(val, subject[hide])
        rows = model._rows(times[hide], variable[hide], "main")
        resid = model.residuals(times[hide], data.values[hide], variable[hide])
        resid = resid - np.einsum("ok,ok->o", rows, mean[owner])
        kept = np.einsum("ok,okl,ol->o", rows, cov[owner], rows)
        parts.append((variable[hide], times[hide], resid, kept))
    return tuple(np.concatenate(column) for column in zip(*parts))


def calibrate_joint_bands(model, judged, rng, time_range):
    """``model`` with each variable's band terms fitted to held-out points.

    ``judged`` pairs models with subjects to hide observations of (as for
    :func:`heldout_errors`), ideally subjects a model's refinement did not
    see. Per variable, the model-error variance ``tau_j^2`` maximises the
    Gaussian likelihood of the hidden residuals with variance ``kept +
    tau_j^2 + sigma_j^2`` (:func:`~fdaimpute._fpca.heldout.fit_band_weights`),
    and the time profile is :func:`~fdaimpute._fpca.heldout.band_profile` of
    them; the left-out components' share is inside ``tau_j^2``
    (``rest_weight`` 0). A variable with no hidden point keeps its terms.
    """
    parts = []
    for judge, subjects in judged:
        var, at, res, post = heldout_band_terms(judge, subjects, rng)
        parts.append((var, at, res, post, judge.noise_variance[var]))
    variable, times, resid, kept, noise = map(np.concatenate, zip(*parts))
    misfit = model.misfit_variance.copy()
    profiles = list(model.band_profiles)
    for j in range(model.n_variables):
        on = variable == j
        if not on.any():
            continue
        _, misfit[j] = fit_band_weights(
            resid[on], kept[on], np.zeros(on.sum()), noise[on], has_rest=False
        )
        variance = kept[on] + misfit[j] + noise[on]
        profiles[j] = band_profile(times[on], resid[on], variance, time_range)
    return replace(
        model, misfit_variance=misfit, band_profiles=profiles, rest_weight=0.0
    )


def _loading_basis(work, size, times):
    """A clamped cubic B-spline basis of ``size`` functions on ``work``'s range.

    Returns the basis at ``times`` and on ``work`` (sparse matrices of
    ``size`` columns; each row of the first has four entries, in adjacent
    columns).
    """
    lo, hi = work[0], work[-1]
    knots = np.concatenate([[lo] * 3, np.linspace(lo, hi, size - 2), [hi] * 3])
    design = BSpline.design_matrix(np.clip(times, lo, hi), knots, 3).tocsr()
    on_work = BSpline.design_matrix(np.clip(work, lo, hi), knots, 3).tocsr()
    return design, on_work


def _expected_gram(design, second):
    """``sum_o (b_o b_o^T) kron E[xi xi^T]_o``, shape ``(g, k, g, k)``.

    ``design`` (n, g) holds each observation's four adjacent basis values
    ``b_o``; ``second`` (n, k, k) the second moments of its subject's
    scores. Observations are taken by knot interval, where the four columns
    are the same, so each interval is one dense product.
    """
    n, g = design.shape
    k = second.shape[1]
    first = design.indices.reshape(n, 4)[:, 0]
    weight = design.data.reshape(n, 4)
    pairs = (weight[:, :, None] * weight[:, None, :]).reshape(n, 16)
    moments = second.reshape(n, k * k)
    order = np.argsort(first, kind="stable")
    starts, edges = np.unique(first[order], return_index=True)
    gram = np.zeros((g, g, k, k))
    for start, lo, hi in zip(starts, edges, np.append(edges[1:], n)):
        rows = order[lo:hi]
        block = (pairs[rows].T @ moments[rows]).reshape(4, 4, k, k)
        gram[start : start + 4, start : start + 4] += block
    return gram.transpose(0, 2, 1, 3)


def _refit_means(model, data, scores):
    """Each variable's mean smoothed again from ``y - psi_v(t)^T E[xi_i]``.

    The M-step of the means. What the shared scores predict of each
    observation is taken off before smoothing, so a sparse variable's mean
    is no longer off by the average curve of the few subjects seen near
    each time, which its dense partners' scores know. The values left are
    close to independent (noise and the scores' error), so the bandwidth is
    chosen again by generalised cross-validation on the variable's bins.
    """
    rows = model._rows(data.times, data.variable, "main")
    descored = data.values - np.einsum("ok,ok->o", rows, scores)
    means = []
    for j, old in enumerate(model.means):
        on = data.variable == j
        bins = bins_on(old.centres, data.times[on])
        y = descored[on]
        sums = (bins.spread(np.ones(y.size)), bins.spread(y), bins.spread(y * y))
        # the GCV rule uses neither the subjects nor a random state
        h = mean_bandwidth("gcv", bins, sums, y, None, None, old.kernel, None)
        weight, total, _ = sums
        means.append(replace(old, weight=weight, total=total, bandwidth=float(h)))
    return means


def refine(model, data, n_knots):
    """One expectation-maximisation step of the means, loadings and noise variances.

    With the scores' conditional moments ``E[xi_i]``, ``E[xi_i xi_i^T]``
    under ``model`` (the E-step), each variable's mean is smoothed again
    from its observations less what the scores predict of them
    (``_refit_means``); then its loadings on its work grid are the
    least-squares solution of ``y - mu_v(t) ~ b(t)^T L_v xi_i`` in
    expectation (``b(t)`` a clamped cubic B-spline basis of ``n_knots[v]``
    functions with equally spaced knots, read on the work grid), and its
    noise variance the expected mean squared residual; the scores are then
    rotated to be uncorrelated, with the variances of their second moments.
    The smoothed covariances give the start; the step fits the loadings to
    all observations of all variables at once, which the pairwise smoothing
    of cross-products does not.

    Parameters
    ----------
    model : MultivariatePACEModel
        The model to refine (its ``rest_*`` are kept as they are).
    data : MultivariateIrregularData
        The training subjects.
    n_knots : list of int or None
        Each variable's number of basis functions (at least 4, at most its
        work grid's size); None refits the means only.

    Returns
    -------
    MultivariatePACEModel
    """
    mean, cov = model.scores(
        data.times, data.values, data.variable, data.offsets, with_cov=True
    )
    n, k = mean.shape
    second = cov + mean[:, :, None] * mean[:, None, :]
    subject = data.subject_index
    model = replace(model, means=_refit_means(model, data, mean[subject]))
    if n_knots is None:
        return model
    resid = model.residuals(data.times, data.values, data.variable)
    loadings, noise = [], []
    for j in range(model.n_variables):
        on = np.flatnonzero(data.variable == j)
        work = model.work_grids[j]
        g = int(min(work.size, max(n_knots[j], 4)))
        design, on_work = _loading_basis(work, g, data.times[on])
        who = subject[on]
        cross = design.T @ (resid[on, None] * mean[who])
        gram = _expected_gram(design, second[who]).reshape(g * k, g * k)
        gram[np.diag_indices_from(gram)] += 1e-8 * np.trace(gram) / (g * k)
        knots = np.linalg.solve(gram, cross.reshape(g * k)).reshape(g, k)
        loads = on_work @ knots
        loadings.append(loads)
        rows = spline_columns(work, loads, data.times[on])
        fitted = np.einsum("ok,ok->o", rows, mean[who])
        spread_var = np.einsum("ok,okl,ol->o", rows, cov[who], rows)
        noise.append(np.mean((resid[on] - fitted) ** 2 + spread_var))
    refined = replace(model, loadings=loadings, noise_variance=np.array(noise))
    mean, cov = refined.scores(
        data.times, data.values, data.variable, data.offsets, with_cov=True
    )
    values, vectors = np.linalg.eigh((mean.T @ mean + cov.sum(axis=0)) / n)
    order = np.argsort(values)[::-1]
    values, vectors = np.clip(values[order], 1e-300, None), vectors[:, order]
    return replace(
        refined,
        eigenvalues=values,
        loadings=[x @ vectors for x in loadings],
    )
