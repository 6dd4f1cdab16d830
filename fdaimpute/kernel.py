"""KernelImputer: each subject smoothed on its own, shrunk toward the pooled mean."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from sklearn.base import clone

from fdaimpute._core.docstrings import shared_docs
from fdaimpute._core.noise_at import NoiseAtMixin
from fdaimpute._core.params import Interval, Options
from fdaimpute._core.state import check_array, check_number
from fdaimpute._core.validation import check_spread_over_time
from fdaimpute._fpca.heldout import band_profile
from fdaimpute._numerics.local_linear import (
    KERNELS,
    bandwidth_grid,
    bandwidth_scores,
    min_count_bandwidth,
    moment_sums,
    solve_local_linear,
    subject_moment_sums,
    weight_norms,
)
from fdaimpute._numerics.noise_difference import difference_estimate_or_none
from fdaimpute._numerics.smoother_bands import fit_band_model, leave_one_out
from fdaimpute.base import BaseImputer
from fdaimpute.multivariate import SeveralVariablesMixin
from fdaimpute.smoothing import bin_data

__all__ = ["KernelImputer"]

# Pull toward the mean (in observations) where a window is degenerate.
_RIDGE_FLOOR = 1e-9
_SHRINKAGE_GRID = (0.0, 0.03, 0.1, 0.3, 1.0, 3.0)
# Knots of the bands' (log) time profile over the time range.
_MISFIT_KNOTS = 3
# Step of the central differences that give the curves' slopes, as a share
# of the bandwidth.
_SLOPE_STEP = 1e-3


@shared_docs()
class KernelImputer(NoiseAtMixin, SeveralVariablesMixin, BaseImputer):
    """Per-subject local-linear smoothing, shrunk toward the pooled mean curve.

    At each output time ``s`` subject ``i``'s curve is the intercept ``a`` of

        min_{a, b}  sum_j K((t_ij - s) / h) (y_ij - a - b (t_ij - s))^2
                    + lam [(a - mu(s))^2 + h^2 (b - mu'(s))^2],

    where ``mu`` is the local-linear mean of all training subjects pooled.
    The penalty acts like ``lam`` pseudo-observations at the mean curve
    (kernels are scaled so that ``K(0) = 1``): where a subject has data it
    barely matters, where it has none the curve returns to the mean. With
    ``shrinkage=0`` this is the plain local-linear smoother of each subject
    (the SAND paper's "1DS" baseline), exact for straight lines.
    ``derivative`` is the slope of that curve ``a(s)`` (by central
    differences a thousandth of a bandwidth apart), not the local slope
    ``b(s)``: both estimate the curve's derivative, but only ``a'`` is the
    derivative of what ``transform`` returns.

    Parameters
    ----------
    %(grid)s
    kernel : {"gaussian", "epanechnikov"}, default="gaussian"
        Smoothing kernel.
    bandwidth : float, "cv" or "gcv", default="cv"
        Per-subject bandwidth ``h``; ``"cv"`` chooses it by leave-one-out
        cross-validation, ``"gcv"`` by generalised cross-validation.
    selection : {"pooled", "subject"}, default="pooled"
        Choose one bandwidth (and shrinkage) for all subjects by pooling the
        criterion over training subjects, or one per subject (chosen on the
        subject being imputed, also at transform time). Pooled is more
        stable when subjects have few points.
    shrinkage : float or "auto", default="auto"
        The weight ``lam`` of the mean curve, in observations; ``"auto"``
        chooses it with the bandwidth among (0, 0.03, 0.1, 0.3, 1, 3).
    n_bandwidths : int, default=15
        Number of candidate bandwidths (geometric grid) for the search.
    %(extrapolate)s
    %(keep_observed)s

    Attributes
    ----------
    bandwidth_ : float
        Chosen pooled bandwidth. With ``selection="subject"``, the fallback
        for subjects too sparse for their own criterion.
    shrinkage_ : float
        Chosen pooled shrinkage (same fallback role; at least 1 then).
    mean_bandwidth_ : float
        Bandwidth of the pooled mean curve (chosen by GCV).
    mean_ : ndarray of shape (n_grid,)
        The pooled mean curve on ``grid_``: the local-linear smooth of all
        training observations, the curve a subject without data returns to.
    noise_variance_ : float
        Estimated measurement-error variance, the mean over the training
        times of ``noise_variance_at`` (see Notes). After a fit on
        several variables, an ndarray of shape ``(p,)``: each variable's.
    %(grid_)s
    time_range_ : tuple of float
        Range of the training times.
    n_subjects_fit_ : int
        Number of training subjects.
    variables_ : list of str
        Only after a fit on several variables: their names, in the order
        of the output's blocks.
    value_ranges_ : list of tuple of float
        Only after a fit on several variables: each variable's training
        range; ``transform`` warns, naming the subject and the variable,
        when a curve leaves it widened by half of it.
    variable_imputers_ : list of KernelImputer
        Only after a fit on several variables: each variable's smoother,
        fitted on that variable alone (its ``bandwidth_``, ``shrinkage_``
        and mean). ``mean_`` is then their means, variable-major,
        ``noise_variance_`` theirs, and ``bandwidth_`` and the like are not
        set.

    See Also
    --------
    PACEImputer : borrows strength across subjects through the covariance.

    Notes
    -----
    The criterion for each candidate is computed from the subject's own
    points with the exact leave-one-out (or GCV) formulas of a linear
    smoother; all subjects are processed together in vectorised chunks.

    *Uncertainty.* The curve is linear in the subject's values, ``f(s) =
    sum_j l_j(s) y_ij + w(s) mu(s)`` (``w`` the share of the mean curve).
    ``transform(X, return_std=True)`` gives the SD of the curve's error,

        sd(s)^2 = g(s) [(sigma^2 + kappa) ||l(s)||^2 + tau0^2 + tau1^2 w(s)]:

    the noise the fit averages, misfits (a smoothing bias that grows as the
    weights spread, as past a subject's points, and one that does not)
    and, where the curve leans on the mean, the subject's departure from
    it; the SD is therefore larger far from a subject's observations.
    ``g`` is a time profile (log-linear between the ends and the middle of
    the time range, of geometric mean 1 over the observations). A new
    observation at ``s`` adds the noise ``noise_variance_at(s) = g(s)
    sigma^2``, so a 95% prediction interval is ``f(s) +- 1.96 sqrt(sd(s)^2
    + noise_variance_at(s))``. ``sigma^2`` is the within-subject difference
    estimate (:func:`fdaimpute.noise.noise_variance`), capped at the level
    that alone explains the leave-one-out residuals; ``g``, ``kappa``,
    ``tau0^2`` and ``tau1^2`` are fitted by Gaussian likelihood on the
    exact leave-one-out residuals of the training observations (each
    predicted by its subject's fit without it, of variance ``g [sigma^2 +
    (sigma^2 + kappa) ||l_-j||^2 + tau0^2 + tau1^2 w_-j]``), so the bands
    are calibrated on points the fits did not see. ``g`` then takes a
    further factor per third of the time range (linear between their
    centres) that makes the 95% intervals of the left-out points there
    cover a new point 95% of the time, as PACE's bands do: the likelihood
    fits variances, and where the errors are not Gaussian a variance does
    not make the coverage.
    After a fit on several variables, each variable has its own bands.

    *Several variables.* Fitted on a
    :class:`~fdaimpute.multivariate.MultivariateIrregularData`, each
    variable is smoothed on its own, exactly as a fit on that variable
    alone would smooth it (its own bandwidth and shrinkage); a subject
    never observed on a variable gets that variable's mean curve. The
    output has one block of grid columns per variable, as
    :class:`~fdaimpute.MultivariatePACEImputer`'s (``transform_3d`` gives
    ``(n_subjects, p, n_grid)``, pandas output a ``(variable, time)``
    MultiIndex, ``predict_at`` each observation's own time and variable).

    Examples
    --------
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.sand_paper(n=300, n_obs="8-12", random_state=0)
    >>> imp = fi.KernelImputer(grid=sim.grid).fit(sim.train.data)
    >>> imp.transform(sim.test.data).shape
    (15, 101)
    """

    _param_constraints = {
        **BaseImputer._param_constraints,
        "kernel": [Options(*KERNELS)],
        "bandwidth": [Interval("real", 0, closed="neither"), Options("cv", "gcv")],
        "selection": [Options("pooled", "subject")],
        "shrinkage": [Interval("real", 0), Options("auto")],
        "n_bandwidths": [Interval("int", 1)],
    }

    def __init__(
        self,
        *,
        grid=None,
        kernel="gaussian",
        bandwidth="cv",
        selection="pooled",
        shrinkage="auto",
        n_bandwidths=15,
        extrapolate=False,
        keep_observed=False,
    ):
        self.grid = grid
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.selection = selection
        self.shrinkage = shrinkage
        self.n_bandwidths = n_bandwidths
        self.extrapolate = extrapolate
        self.keep_observed = keep_observed

    # ------------------------------------------------------------------ #
    def _fit(self, data):
        check_spread_over_time(self.time_range_, "cannot smooth a curve")
        centres, weight, sum_y, sum_y2 = bin_data(data.times, data.values)
        candidates = _candidate_bandwidths(centres, self.n_bandwidths, self.kernel)
        floor = min_count_bandwidth(centres, weight, self.kernel)
        if candidates[-1] <= floor:
            candidates = np.array([floor])
        elif candidates[0] < floor:
            candidates = np.geomspace(floor, candidates[-1], candidates.size)
        within = sum_y2 - sum_y * (sum_y / weight)
        scores = bandwidth_scores(
            centres, weight, sum_y, within, candidates, self.kernel
        )
        if not np.isfinite(scores).any():
            raise ValueError(
                "no candidate bandwidth gives a defined fit; widen the range"
            )
        self.mean_bandwidth_ = float(candidates[int(np.argmin(scores))])
        self._mean_bins = (centres, weight, sum_y)
        self._candidates = _candidate_bandwidths(
            np.unique(data.times), self.n_bandwidths, self.kernel
        )
        self.mean_ = self._mean_at(self.grid_)[0]
        # With per-subject selection these serve subjects whose own criterion
        # is undefined (too few points).
        self.bandwidth_, self.shrinkage_ = self._select(data, pooled=True)
        self._bands = self._fit_bands(data)
        self.noise_variance_ = float(np.mean(self._bands.noise_at(data.times)))

    def _check_state(self):
        super()._check_state()
        if not hasattr(self, "grid_"):
            return
        if self._several():
            p = len(self.variables_)
            if len(self.variable_imputers_) != p:
                raise ValueError(f"variable_imputers_ does not hold {p} imputers")
            check_array(self.noise_variance_, "noise_variance_", (p,), nonnegative=True)
            return
        for name in ("mean_bandwidth_", "bandwidth_"):
            check_number(getattr(self, name), name, positive=True)
        check_number(self.shrinkage_, "shrinkage_")
        check_number(self.noise_variance_, "noise_variance_")
        check_array(self._candidates, "_candidates", (None,), nonnegative=True)
        n = check_array(self._mean_bins[0], "_mean_bins[0]", (None,)).size
        check_array(self._mean_bins[1], "_mean_bins[1]", (n,), nonnegative=True)
        check_array(self._mean_bins[2], "_mean_bins[2]", (n,))
        self._bands.check("_bands")

    def _fit_bands(self, data):
        """The bands' variance model, fitted on the leave-one-out residuals."""
        fit, _, hat, (norm2, prior) = self._local_fits(
            data, data.times, data.offsets, squares=True
        )
        keep, resid, norm2, prior = leave_one_out(data.values - fit, hat, norm2, prior)
        # None (too few pairs, or sums that underflow): the residuals alone set
        # the noise level
        noise = difference_estimate_or_none(data.times, data.values, data.subject_index)
        times = data.times[keep]
        model = fit_band_model(
            resid, norm2, prior, times, self.time_range_, _MISFIT_KNOTS, noise
        )
        # the likelihood fits variances; the 95% intervals' coverage of the
        # left-out points is then calibrated per third of the range, as PACE's
        profile = band_profile(
            times,
            resid,
            model.predictive_variance(times, norm2, prior),
            self.time_range_,
        )
        return replace(model, calibration=profile)

    def _noise_at(self, times):
        if self._several():
            raise TypeError(
                "KernelImputer fitted on several variables: use each variable's "
                "imputer in variable_imputers_"
            )
        return self._bands.noise_at(times)

    def _fit_variables(self, data):
        """Each variable's own smoother, fitted on that variable alone."""
        self.variable_imputers_ = []
        for _, part, _ in self._variable_parts(data):
            # the parent checks grids and times against the whole range
            one = clone(self).set_params(
                grid=self.grid_, extrapolate=True, keep_observed=False
            )
            self.variable_imputers_.append(one.fit(part))
        if len(self.variable_imputers_) != data.n_variables:
            missing = data.variables[~data.counts.any(axis=0)].tolist()
            raise ValueError(f"variable(s) {missing} are never observed")
        self.mean_ = np.concatenate([one.mean_ for one in self.variable_imputers_])
        self.noise_variance_ = np.array(
            [one.noise_variance_ for one in self.variable_imputers_]
        )

    def _variable_curves(self, data, grid, derivative):
        n, g = len(data), grid.size
        out = np.empty((n, len(self.variable_imputers_) * g))
        for j, one in enumerate(self.variable_imputers_):
            # a subject without the variable: its mean (or slope)
            if derivative:
                out[:, j * g : (j + 1) * g] = one._mean_slope(grid)
            else:
                out[:, j * g : (j + 1) * g] = one._mean_at(grid)[0]
        for j, part, rows in self._variable_parts(data):
            one = self.variable_imputers_[j]
            hook = one._derivative_grid if derivative else one._transform_grid
            out[rows, j * g : (j + 1) * g] = one._in_blocks(
                lambda block, hook=hook: hook(block, grid), part, g
            )
        return out

    def _variable_std(self, data, grid):
        """Each variable's pointwise SD (its own bands), variable-major."""
        n, g = len(data), grid.size
        out = np.empty((n, len(self.variable_imputers_) * g))
        for j, one in enumerate(self.variable_imputers_):
            # a subject without the variable: the band of a fit on no data
            out[:, j * g : (j + 1) * g] = one._band_without_data(grid)
        for j, part, rows in self._variable_parts(data):
            one = self.variable_imputers_[j]
            out[rows, j * g : (j + 1) * g] = one._in_blocks(
                lambda block, one=one: one._transform_grid(block, grid, True)[1],
                part,
                g,
            )
        return out

    def _band_without_data(self, grid):
        """The SD of the mean curve as a subject's curve, where it has no data."""
        # no observation: no weights on data, all on the mean
        none, all_ = np.zeros(grid.size), np.ones(grid.size)
        return np.sqrt(self._bands.curve_variance(grid, none, all_))

    def _variable_values(self, data):
        values = np.empty(data.times.size)
        for j, part, _ in self._variable_parts(data):
            values[data.variable == j] = self.variable_imputers_[j]._evaluate(
                part, part.times, part.offsets
            )
        return values

    def _mean_at(self, t):
        """Pooled mean curve and its slope at times ``t``."""
        h = self.mean_bandwidth_
        sums = moment_sums(*self._mean_bins, t, h, self.kernel)
        fit, slope, _ = solve_local_linear(sums, h, ridge=_RIDGE_FLOOR, points=t)
        return fit, slope

    def _mean_slope(self, t):
        """Slope of the pooled mean curve at times ``t`` (see ``_derivative_grid``)."""
        step = _SLOPE_STEP * self.mean_bandwidth_
        up, down = self._mean_at(np.concatenate([t + step, t - step]))[0].reshape(2, -1)
        return (up - down) / (2 * step)

    def _shrinkage_candidates(self):
        if self.shrinkage == "auto":
            return np.asarray(_SHRINKAGE_GRID)
        return np.asarray([float(self.shrinkage)])

    def _select(self, data, pooled):
        """Choose (h, lam) pooled over subjects, or per subject (arrays)."""
        lams = self._shrinkage_candidates()
        hs = (
            self._candidates
            if isinstance(self.bandwidth, str)
            else np.asarray([float(self.bandwidth)])
        )
        if hs.size == 1 and lams.size == 1:
            if pooled:
                return float(hs[0]), float(lams[0])
            return np.full(len(data), hs[0]), np.full(len(data), lams[0])
        mu, dmu = self._mean_at(data.times)
        counts = data.n_obs
        subject = data.subject_index
        # crit[c, i]: criterion pieces of candidate c for subject i.
        rss = np.empty((hs.size, lams.size, len(data)))
        trace = np.empty_like(rss)
        loo = np.empty_like(rss)
        for a, h in enumerate(hs):
            sums = _moments(
                data, data.times, data.offsets, np.full(len(data), h), self.kernel
            )
            for b, lam in enumerate(lams):
                fit, _, hat = _solve(sums, lam, h, mu, dmu)
                resid = data.values - fit
                safe = np.where(hat < 1.0 - 1e-6, 1.0 - hat, np.nan)
                rss[a, b] = np.bincount(subject, resid**2, minlength=len(data))
                trace[a, b] = np.bincount(subject, hat, minlength=len(data))
                loo[a, b] = np.bincount(
                    subject, (resid / safe) ** 2, minlength=len(data)
                )
        if self.bandwidth == "gcv":
            if pooled:
                total, tr = counts.sum(), trace.sum(-1)
                with np.errstate(divide="ignore", invalid="ignore"):
                    crit = np.where(
                        tr < total, rss.sum(-1) * total / (total - tr) ** 2, np.inf
                    )
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    crit = np.where(
                        trace < counts, rss * counts / (counts - trace) ** 2, np.inf
                    )
        else:
            crit = loo.sum(-1) if pooled else loo
        crit = np.where(np.isfinite(crit), crit, np.inf)
        if pooled:
            a, b = np.unravel_index(np.argmin(crit), crit.shape)
            if not np.isfinite(crit[a, b]):
                raise ValueError(
                    "no candidate bandwidth gives a defined fit; subjects have too "
                    "few distinct times - set bandwidth and shrinkage explicitly"
                )
            return float(hs[a]), float(lams[b])
        flat = crit.reshape(-1, len(data))
        best = np.argmin(flat, axis=0)
        # Subjects whose criterion is undefined or uninformative (under three
        # observations) take the pooled choice.
        undefined = ~np.isfinite(flat[best, np.arange(len(data))]) | (counts < 3)
        a, b = np.unravel_index(best, crit.shape[:2])
        h_sub, lam_sub = hs[a], lams[b]
        h_sub[undefined] = self.bandwidth_
        lam_sub[undefined] = max(self.shrinkage_, 1.0)
        return h_sub, lam_sub

    def _bandwidths(self, data):
        if self.selection == "pooled":
            n = len(data)
            return np.full(n, self.bandwidth_), np.full(n, self.shrinkage_)
        return self._select(data, pooled=False)

    def _local_fits(self, data, times, offsets, squares=False, bandwidths=None):
        """Each query's penalised local-linear fit over its own subject's data.

        The query times ``times`` of subject ``i`` are
        ``times[offsets[i]:offsets[i + 1]]``; ``bandwidths`` the subjects'
        ``(h, lam)`` if already chosen. Returns the intercept, slope and hat
        value at each query and, with ``squares``, the weight norms
        ``(norm2, prior)`` of ``weight_norms`` (else None).
        """
        h, lam = self._bandwidths(data) if bandwidths is None else bandwidths
        # the mean at each distinct time once (a grid repeats for every subject)
        distinct, inverse = np.unique(times, return_inverse=True)
        mu, dmu = (part[inverse] for part in self._mean_at(distinct))
        sums = _moments(data, times, offsets, h, self.kernel, squares=squares)
        q_subject = np.repeat(np.arange(len(data)), np.diff(offsets))
        q_h, q_lam = h[q_subject], lam[q_subject]
        fit, slope, hat = _solve(sums, q_lam, q_h, mu, dmu)
        norms = None
        if squares:
            norms = weight_norms(sums, q_h, ridge=q_lam, floor=_RIDGE_FLOOR)
        return fit, slope, hat, norms

    def _evaluate(self, data, times, offsets, return_std=False):
        fit, _, _, norms = self._local_fits(data, times, offsets, squares=return_std)
        if return_std:
            return fit, np.sqrt(self._bands.curve_variance(times, *norms))
        return fit

    def _grid_query(self, data, grid):
        n = len(data)
        return np.tile(grid, n), np.arange(n + 1) * grid.size

    def _transform_grid(self, data, grid, return_std=False):
        times, offsets = self._grid_query(data, grid)
        if return_std:
            fit, std = self._evaluate(data, times, offsets, return_std=True)
            return fit.reshape(len(data), grid.size), std.reshape(len(data), grid.size)
        return self._evaluate(data, times, offsets).reshape(len(data), grid.size)

    def _derivative_grid(self, data, grid):
        """Slope of the curves of ``_transform_grid``.

        Central differences of the intercept ``a(s)``, ``_SLOPE_STEP`` of the
        smaller of the subject's and the pooled mean's bandwidths apart: ``a``
        is smooth on that scale, so their error is of the order of
        ``_SLOPE_STEP ** 2`` of the slope's (with the Epanechnikov kernel
        ``a'`` jumps where a point or bin meets a window's edge, and there
        the difference gives the mean of the two sides). The local slope
        ``b(s)`` is another estimate of the derivative, but not the slope of
        the returned curve (on Blackmore the two differed by 95% of the
        slope, with opposite signs in 15% of the grid cells).
        """
        n, g = len(data), grid.size
        h, lam = self._bandwidths(data)
        step = _SLOPE_STEP * np.minimum(h, self.mean_bandwidth_)[:, None]
        times = np.concatenate([grid + step, grid - step], axis=1)
        offsets = np.arange(n + 1) * 2 * g
        fit, _, _, _ = self._local_fits(
            data, times.ravel(), offsets, bandwidths=(h, lam)
        )
        up, down = fit.reshape(n, 2, g).transpose(1, 0, 2)
        return (up - down) / (2 * step)

    def _predict_ragged(self, data, times, offsets):
        return self._evaluate(data, times, offsets)


def _candidate_bandwidths(times, n, kernel):
    """Geometric bandwidth grid from a fine resolution to half the range."""
    return bandwidth_grid(
        times,
        n,
        gap="finest",
        gap_factor=1.0 if kernel == "epanechnikov" else 2.0,
        resolution=200,
        top=2,
        growth=2,
    )


def _moments(data, q_times, q_offsets, h, kernel, squares=False):
    """Moment sums of each query over its own subject's data (``h`` per subject)."""
    return subject_moment_sums(
        data.times,
        data.values,
        data.offsets,
        q_times,
        q_offsets,
        h,
        kernel,
        squares=squares,
    )


def _solve(sums, lam, h, mu, dmu):
    """Intercept, slope and hat value of the ridge-penalised systems.

    Where a window holds under two points the 2x2 system is singular: a tiny
    pull toward the mean is added there only, so exact fits stay exact.
    """
    return solve_local_linear(
        sums, h, ridge=lam, prior=mu, prior_slope=dmu, floor=_RIDGE_FLOOR
    )
