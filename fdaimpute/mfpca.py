"""mFPCA: reduced-rank functional PCA by maximum likelihood (Peng & Paul, 2009)."""

from __future__ import annotations

from functools import partial
from itertools import chain

import numpy as np

from fdaimpute._core.docstrings import shared_docs
from fdaimpute._core.params import Interval, Options
from fdaimpute._core.validation import check_spread_over_time
from fdaimpute._fpca.spline_bands import held_out_bands
from fdaimpute._fpca.spline_predict import SplineModelPredictor
from fdaimpute._fpca.splines import check_basis_sizes
from fdaimpute._mfpca.fit import fit_mfpca, other_sizes
from fdaimpute._numerics.linalg import one_blas_thread
from fdaimpute.base import BaseImputer

__all__ = ["MFPCAImputer"]

#: Other basis sizes and ranks tried when the chosen fit is implausible.
_PLAUSIBLE_TRIES = 6
#: Fewest B-splines of a basis (a surface penalised by second differences
#: needs three).
_SMALLEST_BASIS = 3

_OPTIONS = (
    "n_basis",
    "n_basis_mean",
    "degree",
    "n_components",
    "max_components",
    "max_iter",
    "tol",
)


@shared_docs(
    "holds the eigenfunctions at their end values and continues the mean "
    "along its end tangent"
)
class MFPCAImputer(SplineModelPredictor, BaseImputer):
    """Reduced-rank functional PCA fitted by maximum likelihood (mFPCA).

    The model of James, Hastie & Sugar (2000) fitted as Peng & Paul (2009)
    do: each centred curve lies in the span of ``M`` cubic B-splines made
    orthonormal in L2, ``X_i(t) - mu(t) = e(t)^T C xi_i`` with ``C``
    (``M x K``) having orthonormal columns, scores ``xi_i ~ N(0, Lambda)``
    and observations ``y_ij = X_i(t_ij) + eps_ij``, ``eps ~ N(0, s2)``.
    The covariance ``e(s)^T C Lambda C^T e(t)`` has rank ``K`` by
    construction and its eigenfunctions are ``e^T C``. ``C``, ``Lambda``
    and ``s2`` maximise the Gaussian likelihood of the observations by
    Riemannian L-BFGS on the Stiefel manifold of ``C`` (log-parameters
    for ``Lambda`` and ``s2``), started from FACE's covariance surface on
    the same B-splines (rank ``K`` from rank ``K - 1``'s optimum). Curves
    are predicted as in PACE: scores by conditional expectation,
    ``mu + Phi xi_i``.

    Parameters
    ----------
    %(grid)s
    n_basis : int or "auto", default="auto"
        B-splines ``M`` spanning the eigenfunctions (equally spaced knots
        over the training range), or the size among 6, 8, 12, 16 and 20 whose
        best rank has the least criterion (BIC, or the approximate
        leave-one-curve-out score when ``n_components="cv"``), trying them
        in turn and stopping at the first increase (the mean does not
        depend on ``M``, so the likelihoods are of the same centred data),
        or before a size with a direction the observation times barely see
        (its curves would swing where no one is observed). If the chosen
        size and rank still give some training subject a curve outside the
        data's range widened by half of it (the warning of ``transform``),
        the other sizes (the smaller ones, below 6 one B-spline fewer at a
        time down to ``degree + 1``, and the larger ones the design sees)
        and their ranks are tried in the order of the criterion, at most
        six, then the rank-one fits of those sizes, then the same with
        piecewise-linear B-splines (``degree_`` 1), and the first that gives
        none is kept (if none does, the one whose worst curve leaves the
        range least). When another size or rank is kept, ``bic_`` holds its
        BIC alone.
    n_basis_mean : int, default=20
        B-splines of the mean (a P-spline, its smoothing chosen as
        FACE's ``lambda_mean="auto"``: over subjects below 1,000 of them).
    degree : int, default=3
        Degree of the B-splines (3: cubic).
    n_components : int, "bic" or "cv", default="bic"
        Rank ``K``, or the rule that chooses it, trying ``K = 1, 2, ...``
        and stopping at the first increase: ``"bic"`` minimises
        ``-2 loglik + p log n`` (``p = MK - K(K+1)/2 + K + 1``); ``"cv"``
        minimises Peng & Paul's approximate leave-one-curve-out score,
        ``-loglik + trace(I^-1 J)`` (``I`` the Fisher information, ``J`` the
        sum of the curves' squared scores). On sparse curves the
        approximation misses much of the optimism of large models and
        chooses them too often (see Notes).
    max_components : int, default=20
        Largest rank tried by ``"bic"`` and ``"cv"`` (capped at ``n_basis``).
    max_iter : int, default=200
        Iterations of the optimiser per rank.
    tol : float, default=1e-8
        The optimiser stops when an iteration lowers the negative
        log-likelihood by less than ``tol`` relative to its size.
    %(extrapolate)s
    %(keep_observed)s

    Attributes
    ----------
    mean_ : ndarray of shape (n_grid,)
    covariance_ : ndarray of shape (n_grid, n_grid)
        The rank-``K`` covariance on ``grid_``.
    eigenvalues_ : ndarray of shape (K,)
    eigenfunctions_ : ndarray of shape (n_grid, K)
        Unit L2 norm over the range, mutually orthogonal.
    noise_variance_ : float
        Maximum-likelihood measurement-error variance.
    predictor_noise_variance_ : float
        The noise variance the predictor uses: ``noise_variance_`` times the
        factor (1, 2, 4, ..., 32), or the share (1, 2, 5 or 10%) of the
        hidden points' variance, that best predicts points hidden from
        refits of the model (see Notes).
    n_components_ : int
    n_basis_ : int
        Basis size used.
    degree_ : int
        Degree of the B-splines used: ``degree``, or 1 where the fall-back
        from implausible curves (see ``n_basis``) kept piecewise-linear ones.
    loglik_ : float
        Maximised log-likelihood of the centred observations (in the data's
        units; the fit itself works on standardised data, see Notes).
    start_loglik_ : float
        Log-likelihood at the starting values (below ``loglik_``).
    bic_ : dict
        BIC of every rank tried on the kept basis (of the standardised
        values: differences between ranks are those of the data's units).
    cv_ : dict
        Approximate leave-one-curve-out score (on the scale of minus the
        log-likelihood) of every rank tried on the chosen basis; only with
        ``n_components="cv"``.
    n_iter_ : int
        Iterations of the optimiser at the chosen rank.
    converged_ : bool
    %(grid_)s
    time_range_ : tuple of float
    n_subjects_fit_ : int

    See Also
    --------
    FACEImputer : the penalised surface that starts the optimiser.
    PACEImputer : local-linear covariance, the same predictor.

    Notes
    -----
    *Units.* The fit works on standardised data: times mapped onto [0, 1]
    by the training range, values centred on their mean and divided by
    their standard deviation. Its smoothing, tolerances and starting values
    therefore see the same numbers in any units, and the curves, bands and
    derivatives change with the units exactly as the data do (to rounding),
    as PACE's do.

    Each subject enters the likelihood through ``S_i = E_i^T E_i``,
    ``E_i^T r_i`` and ``r_i^T r_i`` only, and Woodbury's identity reduces
    its covariance to a ``K x K`` system, so one evaluation costs
    ``O(n M^2 K)`` on stacked arrays, whatever the number of observations
    per subject. After the fit, the model is refitted at its basis size and
    rank with points hidden (every point once over five folds on small data);
    the hidden points choose the predictor's noise variance (a likelihood
    fit on a few hundred sparse subjects can put noise into the covariance,
    and curves then swing between visits) and weigh what the bands add to
    the posterior variance: the left-out components' share and the model's
    own error, and their time profile, as for FACE. A band for a new
    observation at ``t`` adds ``noise_variance_at(t)``.

    The approximate leave-one-curve-out score is a first-order expansion:
    leaving curve ``i`` out moves the fit by about ``I^-1 g_i``. With few
    observations per curve and many parameters (``M = 20``, ``K = 6`` on
    210 curves of 3-5 points) the true leave-one-curve-out optimism is
    several times the expansion's, so ``"cv"`` picks models that BIC,
    and exact leave-one-curve-out refits, reject. ``"bic"`` is the default
    for that reason (docs/mfpca.md has the measurements).

    References
    ----------
    .. [1] Peng, J. and Paul, D. (2009). A geometric approach to maximum
       likelihood estimation of the functional principal components from
       sparse longitudinal data. JCGS 18, 995-1015.
    .. [2] James, G., Hastie, T. and Sugar, C. (2000). Principal component
       models for sparse functional data. Biometrika 87, 587-602.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> from fdaimpute.mfpca import MFPCAImputer
    >>> sim = fi.simulate.sand_paper(n=200, n_obs="8-12", random_state=0)
    >>> model = MFPCAImputer(n_components=3).fit(sim.train.data)
    >>> curves, std = model.transform(sim.test.data, return_std=True)
    >>> curves.shape, bool((std > 0).all())
    ((10, 101), True)
    """

    _param_constraints = {
        **BaseImputer._param_constraints,
        "n_basis": [Interval("int", 2), Options("auto")],
        "n_basis_mean": [Interval("int", 2)],
        "degree": [Interval("int", 1, 5)],
        "n_components": [Interval("int", 1), Options("cv", "bic")],
        "max_components": [Interval("int", 1)],
        "max_iter": [Interval("int", 1)],
        "tol": [Interval("real", 0, closed="neither")],
    }

    def __init__(
        self,
        *,
        grid=None,
        n_basis="auto",
        n_basis_mean=20,
        degree=3,
        n_components="bic",
        max_components=20,
        max_iter=200,
        tol=1e-8,
        extrapolate=False,
        keep_observed=False,
    ):
        self.grid = grid
        self.n_basis = n_basis
        self.n_basis_mean = n_basis_mean
        self.degree = degree
        self.n_components = n_components
        self.max_components = max_components
        self.max_iter = max_iter
        self.tol = tol
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed

    def _fit(self, data):
        check_basis_sizes(
            "MFPCAImputer",
            {"n_basis": self.n_basis, "n_basis_mean": self.n_basis_mean},
            max(self.degree + 1, _SMALLEST_BASIS),
            f"degree={self.degree}",
        )
        check_spread_over_time(data.time_range, "cannot fit a curve")
        options = {name: getattr(self, name) for name in _OPTIONS}
        times, values = self._standardise(data)
        result = self._fit_model(data, times, values, options)
        if self.n_basis == "auto" and self._excursion(data):
            self._fall_back_to_plausible(data, times, values, options, result)

    def _fall_back_to_plausible(self, data, times, values, options, best):
        """Refit at the next-best basis sizes and ranks while some training
        subject's curve leaves the data's widened range.

        A basis whose fit swings far outside the data for some training
        subject (late in the range, where few are observed) gives way to the
        other sizes and ranks in the order of their criterion, at most
        ``_PLAUSIBLE_TRIES`` of them, then to the rank-one fits of the other
        sizes, then to the same ladder with piecewise-linear B-splines
        (:meth:`_linear_refits`), the most constrained models (see
        :meth:`~fdaimpute.base.BaseImputer._refit_while_implausible`).
        """
        chosen = (self.n_basis_, self.n_components_)
        table = _criteria_by_rank(chosen[0], best, options)
        table.update(
            self._criteria(
                data, times, values, options, other_sizes(chosen[0], self.degree, times)
            )
        )
        table.pop(chosen, None)
        refits = self._ladder(data, times, values, options, table)
        if self.degree > 1:  # a generator: its fits are made only if reached
            linear = self._linear_refits(data, times, values, options, chosen)
            refits = chain(refits, linear)
        self._refit_while_implausible(partial(self._excursion, data), refits)

    def _criteria(self, data, times, values, options, sizes):
        """``{(size, k): criterion}`` of the fits at each of ``sizes``."""
        table = {}
        for size in sizes:
            with one_blas_thread():
                fit = fit_mfpca(
                    times, values, data.offsets, (0.0, 1.0), dict(options, n_basis=size)
                )
            table.update(_criteria_by_rank(size, fit, options))
        return table

    def _ladder(self, data, times, values, options, table):
        """Refits of the ``(size, k)`` of ``table`` in the fall-back's order:
        the best ``_PLAUSIBLE_TRIES`` by criterion, then the rank-one fits."""
        ranked = sorted(table, key=table.get)
        pairs = ranked[:_PLAUSIBLE_TRIES]
        pairs += [pair for pair in ranked[_PLAUSIBLE_TRIES:] if pair[1] == 1]
        for size, k in pairs:
            yield partial(
                self._fit_model,
                data,
                times,
                values,
                dict(options, n_basis=size, n_components=k),
            )

    def _linear_refits(self, data, times, values, options, chosen):
        """The fall-back's ladder with piecewise-linear B-splines.

        Where every cubic fit tried still swings outside the data for some
        subject, it is the cubic pieces that do it: an eigenfunction fitted
        where few subjects are observed bends back beyond their last visits
        (90 of Blackmore's girls: every cubic size and rank took a girl seen
        at 8, 10 and 14.9 years past the widened range by 17.9; piecewise
        linear ones of 5 functions did not).
        """
        linear = dict(options, degree=1)
        sizes = [chosen[0], *other_sizes(chosen[0], 1, times)]
        sizes = [size for size in sizes if size >= _SMALLEST_BASIS]
        table = self._criteria(data, times, values, linear, sizes)
        yield from self._ladder(data, times, values, linear, table)

    def _fit_model(self, data, times, values, options):
        """Fit the model and its bands; set the model's attributes."""
        with one_blas_thread():
            result = fit_mfpca(times, values, data.offsets, (0.0, 1.0), options)
        model = self._model = result.model
        refit = dict(options, n_basis=model.cov_knots.size - model.degree - 1)
        refit["n_components"] = model.n_components
        heldout = {}
        with one_blas_thread():
            model.band_weight, model.band_misfit, noise, profile = held_out_bands(
                times,
                values,
                data.offsets,
                (0.0, 1.0),
                refit,
                fit_mfpca,
                model.noise_variance,
                tune_noise=True,
                noise_variance=model.noise_variance,
                heldout=heldout,
            )
        self._keep_heldout(heldout)
        spread = self._scale[3]
        self.noise_variance_ = model.noise_variance * spread**2
        model.noise_variance, model.band_profile = noise, profile
        self.predictor_noise_variance_ = model.noise_variance * spread**2
        self._set_model_attributes(model, self.grid_)
        # the density of the values in the data's units
        shift = data.values.size * np.log(spread)
        self.loglik_ = result.loglik - shift
        self.start_loglik_ = result.start_loglik - shift
        if self.n_components == "cv":
            self.cv_ = {k: cv for k, (cv, _) in result.criteria.items()}
        elif hasattr(self, "cv_"):
            del self.cv_
        self.bic_ = {k: bic for k, (_, bic) in result.criteria.items()}
        self.n_iter_, self.converged_ = result.n_iter, result.converged
        self.n_basis_ = model.cov_knots.size - model.degree - 1
        self.degree_ = model.degree
        return result


def _criteria_by_rank(size, fit, options):
    """``{(size, k): criterion}`` of each rank of one fit at basis ``size``:
    its approximate CV score with ``n_components="cv"``, else its BIC."""
    column = 0 if options["n_components"] == "cv" else 1
    return {(size, k): c[column] for k, c in fit.criteria.items()}
