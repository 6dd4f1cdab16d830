"""A PACE fit from chunks of subjects, read three times, never all in memory.

Each step of the whole fit (:func:`~fdaimpute._pace.fit.fit_pace`) reads the
observations only through sums that add over subjects, so a fit on chunks
holding whole subjects gives the same model:

1. *survey*: ids (each subject in one chunk), observation counts, the time
   and value ranges, and the distinct times (as many as the choice of bins
   needs). Then the bins, ``K``'s cap and the held-out points of the
   cross-validation are fixed, drawing from the random state exactly as the
   whole fit does (the draws need only the counts).
2. *means*: the binned sums of the mean (all points, and the visible ones
   for the cross-validation), and a histogram of the within-subject lags
   of the difference-based noise estimate.
3. *covariances*: the binned raw-covariance sums around each mean, the
   validation subjects' observations (a few thousand subjects at most),
   and the sums of the noise estimate's shortest pairs.

Memory is O(n_subjects) for the counts and ids, O(n_bins^2) for the sums,
and one chunk at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fdaimpute._ids import subject_label
from fdaimpute._local_linear import local_linear_binned
from fdaimpute._pace import bandwidth as bw
from fdaimpute._pace.binning import Bins, covariance_moments, make_bins, regular_step
from fdaimpute._pace.cv import (
    heldout_folds,
    n_validation,
    ragged_subset,
    select_on_folds,
)
from fdaimpute._pace.fit import finish_fit
from fdaimpute._pace.result import MeanCurve, PooledMoments
from fdaimpute._validation import as_irregular
from fdaimpute.data import IrregularData
from fdaimpute.noise import intercept_from_sums, n_kept, neighbour_pairs, power_sums

LAG_BINS = 4096  # histogram of the noise estimate's lags (pass 2)
_UNSUPPORTED = {
    "bandwidth_mean": ("cv",),
    "bandwidth_cov": ("gcv",),
    "n_components": ("aic", "bic"),
}


def check_options(params):
    """Refuse the rules that need every observation at once."""
    for name, rules in _UNSUPPORTED.items():
        value = params[name]
        if isinstance(value, str) and value in rules:
            raise ValueError(
                f"{name}={value!r} needs all observations in memory and is not "
                "available with fit_chunks; use fit, or another rule"
            )


def reader(chunks):
    """A function returning a new iterator over ``chunks`` at each call."""
    if isinstance(chunks, IrregularData) or hasattr(chunks, "iloc"):
        raise TypeError(
            "fit_chunks takes several chunks (a list, a CSVChunks or a function "
            "returning an iterator of them), not one data set; use fit for one"
        )
    if callable(chunks):
        return chunks
    try:
        is_iterator = iter(chunks) is chunks
    except TypeError:
        raise TypeError(
            "chunks must be a list of chunks, a fdaimpute.chunks.CSVChunks or a "
            f"function returning an iterator of chunks; got {type(chunks).__name__}"
        ) from None
    if is_iterator:
        raise TypeError(
            "chunks is an iterator, which can be read once, and fit_chunks reads "
            "the chunks three times; pass a list, a fdaimpute.chunks.CSVChunks "
            "or a function returning a new iterator"
        )
    return lambda: iter(chunks)


def _each(read):
    """The non-empty chunks as IrregularData, with their first subject and point."""
    first_subject, first_obs = 0, 0
    for number, chunk in enumerate(read()):
        data = as_irregular(chunk)
        if data is None:
            raise TypeError(
                f"chunk {number}: expected IrregularData, a long DataFrame or a "
                f"list of (times, values) pairs, got {type(chunk).__name__}"
            )
        if len(data):
            yield data, first_subject, first_obs
            first_subject += len(data)
            first_obs += data.times.size


@dataclass
class Survey:
    """What the first pass learns about the chunks."""

    ids: np.ndarray
    counts: np.ndarray
    time_range: tuple
    value_range: tuple
    distinct: np.ndarray | None  # None: more than the pass kept

    @property
    def n_subjects(self):
        """Number of subjects."""
        return self.counts.size


def survey(read, max_distinct=None):
    """Pass 1: ids, counts, ranges and (up to ``max_distinct``) distinct times.

    Raises
    ------
    ValueError
        With no data, or a subject id in more than one chunk.
    """
    ids, counts, distinct = [], [], np.empty(0)
    t_lo = v_lo = np.inf
    t_hi = v_hi = -np.inf
    for data, _, _ in _each(read):
        ids.append(data.ids)
        counts.append(data.n_obs)
        t_lo, t_hi = min(t_lo, data.times.min()), max(t_hi, data.times.max())
        v_lo, v_hi = min(v_lo, data.values.min()), max(v_hi, data.values.max())
        if distinct is not None:
            distinct = np.union1d(distinct, data.times)
            if max_distinct is not None and distinct.size > max_distinct:
                distinct = None
    if not counts:
        raise ValueError("no data: the chunks hold no subjects")
    ids = np.concatenate(ids)
    _check_unique(ids)
    return Survey(
        ids,
        np.concatenate(counts),
        (float(t_lo), float(t_hi)),
        (float(v_lo), float(v_hi)),
        distinct,
    )


def _check_unique(ids):
    order = np.argsort(ids, kind="stable")
    repeated = order[1:][ids[order[1:]] == ids[order[:-1]]]
    if repeated.size:
        names = ", ".join(subject_label(ids, i) for i in repeated[:3])
        raise ValueError(
            f"subject {names} appears in more than one chunk; each subject must "
            "lie within one chunk (chunks given without ids number their "
            "subjects from 0 each: give them ids)"
        )


def check_survey(found):
    """The checks of the whole fit's ``check_training_data``, on the survey."""
    if not np.any(found.counts >= 2):
        raise ValueError(
            "every subject has a single observation: the covariance cannot "
            "be estimated (PACE needs subjects with at least 2 observations)"
        )
    if found.distinct is not None and found.distinct.size < 3:
        raise ValueError(
            f"only {found.distinct.size} distinct observation time(s); PACE "
            "needs at least 3 to smooth the mean and covariance on a work grid"
        )
    if not found.value_range[1] > found.value_range[0]:
        raise ValueError(
            "all observed values are equal (zero variance); "
            "there is nothing to decompose"
        )


def template_bins(found, binning, n_work_grid, max_exact=None):
    """The bins the whole fit's ``choose_bins`` would pick (without their points)."""
    lo, hi = found.time_range
    n_bins = 2 * (n_work_grid - 1) + 1
    distinct = found.distinct
    exact = binning is False or (
        binning == "auto"
        and distinct is not None
        and (
            (distinct.size <= n_bins and regular_step(distinct) is not None)
            or (max_exact is not None and distinct.size <= max_exact)
        )
    )
    if exact:
        return Bins(distinct, np.empty((0, 1), np.int64), np.empty((0, 1)), True)
    n = n_bins if binning == "auto" else int(binning)
    return make_bins(np.array([lo, hi]), n_bins=n, lo=lo, hi=hi).subset(
        np.zeros(2, bool)
    )


def _bins_of(times, template):
    centres = template.centres
    if template.exact:
        index = np.searchsorted(centres, times).reshape(-1, 1)
        return Bins(centres, index, np.ones((times.size, 1)), True)
    return make_bins(times, n_bins=centres.size, lo=centres[0], hi=centres[-1])


def _add(total, part):
    """Sum two CovMoments (``total`` may be None)."""
    if total is None:
        return part
    fields = ("count", "total", "total_sq", "diag_count", "diag_total")
    for name in (*fields, "diag_total_sq"):
        getattr(total, name).__iadd__(getattr(part, name))
    return total


def _mean(numerics, template, sums, rule):
    h = bw.mean_bandwidth(rule, template, sums, None, None, 0, numerics.kernel, None)
    weight, total = sums[0], sums[1]
    centres = template.centres
    at_bins = local_linear_binned(centres, weight, total, centres, h, numerics.kernel)
    return MeanCurve(centres, weight, total, float(h), numerics.kernel), at_bins


class _NoiseSums:
    """The difference-based noise estimate over passes 2 and 3 (see noise.py)."""

    def __init__(self, n_pairs, span, max_lag=3, share=0.2, min_pairs=50):
        self.max_lag, self.span = max_lag, span
        self.keep = n_kept(n_pairs, share, min_pairs)
        self.hist = np.zeros(LAG_BINS)
        self.sums = np.zeros(8)
        self.sums[7] = np.inf
        self.edge = []

    def _pairs(self, data, subject):
        lag, half = neighbour_pairs(data.times, data.values, subject, self.max_lag)
        where = np.minimum((lag / self.span * LAG_BINS).astype(np.int64), LAG_BINS - 1)
        return lag, half, where

    def count(self, data, subject):
        """Pass 2: the histogram of the lags."""
        self.hist += np.bincount(self._pairs(data, subject)[2], minlength=LAG_BINS)

    def add(self, data, subject):
        """Pass 3: sums below the histogram bin of the cut, the pairs within it."""
        if not hasattr(self, "cut"):
            self.cut = int(np.searchsorted(np.cumsum(self.hist), self.keep))
        lag, half, where = self._pairs(data, subject)
        below = where < self.cut
        if below.any():
            part = power_sums(lag[below], half[below])
            self.sums[:7] += part[:7]
            self.sums[7] = min(self.sums[7], part[7])
        at = where == self.cut
        self.edge.append((lag[at], half[at]))

    def estimate(self):
        """The estimate (the pairs not longer than the ``keep``-th shortest)."""
        lag = np.concatenate([e[0] for e in self.edge])
        half = np.concatenate([e[1] for e in self.edge])
        need = self.keep - int(self.sums[0])
        width = np.partition(lag, need - 1)[need - 1]
        kept = lag <= width * (1.0 + 1e-9)  # ties but for rounding, as in fit
        part = power_sums(lag[kept], half[kept])
        sums = np.concatenate([self.sums[:7] + part[:7], [min(self.sums[7], part[7])]])
        return intercept_from_sums(sums, width)


def fit_chunks(read, found, numerics, options, rng):
    """Passes 2 and 3 and the fit, after :func:`survey`.

    Parameters
    ----------
    read : callable
        Returns a new iterator over the chunks.
    found : Survey
        The first pass.
    numerics : DefaultNumerics or FdapaceNumerics
        The numerics (work grid over ``found.time_range``).
    options : dict
        ``binning``, ``bandwidth_mean``, ``bandwidth_cov``, ``n_components``,
        ``fve_threshold``, ``max_components``, ``noise_variance``.
    rng : numpy.random.RandomState
        The random state, drawn as the whole fit draws it.

    Returns
    -------
    PACEFit
    """
    template = template_bins(
        found,
        options["binning"],
        numerics.work_grid.size,
        max_exact=numerics.max_exact_bins,
    )
    numerics.check_bins(template)
    counts, max_k = found.counts, options["max_components"]
    tune_noise = options["noise_variance"] == "auto" and numerics.measurement_error
    use_cv = any(
        isinstance(options[k], str) and options[k] == "cv"
        for k in ("bandwidth_cov", "n_components")
    )
    val, folds = None, []
    if use_cv:
        offsets = np.concatenate([[0], np.cumsum(counts)])
        val, folds = heldout_folds(offsets, rng, n_validation(counts, max_k))
    noise = None
    if tune_noise:
        n_pairs = int(sum(np.maximum(counts - k, 0).sum() for k in (1, 2, 3)))
        span = found.time_range[1] - found.time_range[0]
        try:
            noise = _NoiseSums(n_pairs, span)
        except ValueError:
            noise = None

    def visible_of(data, first_obs, hidden_at):
        lo, hi = np.searchsorted(hidden_at, [first_obs, first_obs + data.times.size])
        mask = np.ones(data.times.size, dtype=bool)
        mask[hidden_at[lo:hi] - first_obs] = False
        return mask

    # pass 2: mean sums, lag histogram
    sums = {"all": None, **{f: None for f in range(len(folds))}}
    for data, _, first_obs in _each(read):
        bins = _bins_of(data.times, template)
        parts = {"all": (bins, data.values)}
        for f, hidden_at in enumerate(folds):
            vis = visible_of(data, first_obs, hidden_at)
            parts[f] = (bins.subset(vis), data.values[vis])
        for key, (b, y) in parts.items():
            new = (b.spread(np.ones_like(y)), b.spread(y), b.spread(y * y))
            old = sums[key]
            sums[key] = new if old is None else tuple(o + n for o, n in zip(old, new))
        if noise is not None:
            noise.count(data, data.subject_index)
    means = {
        k: _mean(numerics, template, s, options["bandwidth_mean"])
        for k, s in sums.items()
        if s is not None
    }

    # pass 3: covariance sums, validation subjects, noise pairs
    include_diagonal = not numerics.measurement_error
    moments = {k: None for k in means}
    fit_parts = [[] for _ in folds]
    new_parts = [[] for _ in folds]
    for data, first_subject, first_obs in _each(read):
        bins = _bins_of(data.times, template)
        subject = data.subject_index
        n = len(data)
        resid = data.values - bins.interpolate(means["all"][1])
        part = covariance_moments(
            bins, resid, subject, n, include_diagonal=include_diagonal
        )
        moments["all"] = _add(moments["all"], part)
        for f, hidden_at in enumerate(folds):
            vis = visible_of(data, first_obs, hidden_at)
            resid = data.values - bins.interpolate(means[f][1])
            part = covariance_moments(
                bins.subset(vis),
                resid[vis],
                subject[vis],
                n,
                include_diagonal=include_diagonal,
            )
            moments[f] = _add(moments[f], part)
            lo, hi = np.searchsorted(val, [first_subject, first_subject + n])
            here = val[lo:hi] - first_subject
            for mask, store in ((vis, fit_parts[f]), (~vis, new_parts[f])):
                off, idx = ragged_subset(mask, data.offsets, here)
                store.append((data.times[idx], resid[idx], np.diff(off)))
        if noise is not None:
            noise.add(data, subject)

    def pooled(key):
        mean, at_bins = means[key]
        n = found.n_subjects
        return PooledMoments(template, mean, at_bins, None, None, None, n, moments[key])

    difference_noise = None if noise is None else noise.estimate()
    choice = (options["bandwidth_cov"], None, None)
    if use_cv:
        choice = select_on_folds(
            numerics,
            [
                (pooled(f), _joined(fit_parts[f]), _joined(new_parts[f]))
                for f in range(len(folds))
            ],
            bandwidth_cov=options["bandwidth_cov"],
            n_components=options["n_components"],
            max_k=max_k,
            tune_noise=tune_noise,
            difference_noise=difference_noise,
        )
    return finish_fit(
        numerics,
        pooled("all"),
        choice,
        difference_noise,
        n_components=options["n_components"],
        fve_threshold=options["fve_threshold"],
        max_components=max_k,
    )


def _joined(parts):
    """Times, residuals and offsets of the validation subjects, in order."""
    counts = np.concatenate([p[2] for p in parts])
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([[0], np.cumsum(counts)]),
    )
