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
4. *check*, when asked for (``check_curves``): with cross-validated
   covariance bandwidths, how far the worst training curve leaves the
   data's widened range (:func:`excursion`); where it does, the next-best
   bandwidths are fitted from the sums of passes 2 and 3 and checked with
   one more pass each, as the whole fit does.

Memory is O(n_subjects) for the counts and ids, O(n_bins^2) for the sums,
and one chunk at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fdaimpute._core.ids import id_hashes
from fdaimpute._core.validation import as_irregular
from fdaimpute._fpca.folds import heldout_folds, ragged_subset
from fdaimpute._numerics.local_linear import local_linear_binned
from fdaimpute._numerics.noise_difference import (
    intercept_from_sums,
    n_kept,
    neighbour_pairs,
    power_sums,
)
from fdaimpute._pace import bandwidth as bw
from fdaimpute._pace.binning import (
    Bins,
    CovMoments,
    covariance_moments,
    make_bins,
    regular_step,
)
from fdaimpute._pace.cv import n_validation, select_on_folds
from fdaimpute._pace.fit import finish_fit, is_rule
from fdaimpute._pace.result import MeanCurve, PooledMoments
from fdaimpute.data import IrregularData

LAG_BINS = 4096  # histogram of the noise estimate's lags (pass 2)
# the defaults of fdaimpute.noise.noise_variance, as the whole fit uses them
NOISE_MAX_LAG, NOISE_SHARE, NOISE_MIN_PAIRS = 3, 0.2, 50
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
            "the chunks several times; pass a list, a fdaimpute.chunks.CSVChunks "
            "or a function returning a new iterator"
        )
    return lambda: iter(chunks)


def _each(read):
    """The non-empty chunks as IrregularData, with their first subject and point."""
    first_subject, first_obs = 0, 0
    for number, chunk in enumerate(read()):
        data = as_chunk(chunk, number)
        if len(data):
            yield data, first_subject, first_obs
            first_subject += len(data)
            first_obs += data.times.size


def as_chunk(chunk, number):
    """``chunk`` as IrregularData (a TypeError naming chunk ``number`` if not)."""
    data = as_irregular(chunk)
    if data is None:
        raise TypeError(
            f"chunk {number}: expected IrregularData, a long DataFrame or a "
            f"list of (times, values) pairs, got {type(chunk).__name__}"
        )
    return data


@dataclass
class Survey:
    """What the first pass learns about the chunks."""

    id_hashes: np.ndarray | None  # uint64; None: not gathered (see survey_chunk)
    counts: np.ndarray
    time_range: tuple
    value_range: tuple
    distinct: np.ndarray | None  # None: more than the pass kept

    @property
    def n_subjects(self):
        """Number of subjects."""
        return self.counts.size


def survey_chunk(data, max_distinct=None, with_ids=True):
    """Pass 1 on one chunk: its ids' hashes, counts, ranges and distinct times.

    The ids are kept as 64-bit hashes (for the check that no subject is in
    two chunks): text ids as Python objects cost about 60 bytes a subject
    and stay allocated. ``with_ids=False`` leaves them out (``id_hashes``
    None), where a cluster's partitions are known to hold whole, distinct
    subjects.
    """
    distinct = np.unique(data.times)
    if max_distinct is not None and distinct.size > max_distinct:
        distinct = None
    return Survey(
        id_hashes(data.ids) if with_ids else None,
        data.n_obs,
        (float(data.times.min()), float(data.times.max())),
        (float(data.values.min()), float(data.values.max())),
        distinct,
    )


def combine_surveys(parts, max_distinct=None):
    """The survey of consecutive runs of chunks, given in order (None: none).

    Each per-subject array is put together once, not chunk by chunk (which
    copied the subjects read so far at every chunk).
    """
    parts = [part for part in parts if part is not None]
    if not parts:
        return None
    distinct = parts[0].distinct
    for part in parts[1:]:
        if distinct is None or part.distinct is None:
            distinct = None
            break
        distinct = np.union1d(distinct, part.distinct)
        if max_distinct is not None and distinct.size > max_distinct:
            distinct = None
            break
    with_ids = all(part.id_hashes is not None for part in parts)
    return Survey(
        np.concatenate([part.id_hashes for part in parts]) if with_ids else None,
        np.concatenate([part.counts for part in parts]),
        (
            min(part.time_range[0] for part in parts),
            max(part.time_range[1] for part in parts),
        ),
        (
            min(part.value_range[0] for part in parts),
            max(part.value_range[1] for part in parts),
        ),
        distinct,
    )


def survey(read, max_distinct=None):
    """Pass 1: ids, counts, ranges and (up to ``max_distinct``) distinct times.

    Raises
    ------
    ValueError
        With no data, or a subject id in more than one chunk.
    """
    parts = [survey_chunk(data, max_distinct) for data, _, _ in _each(read)]
    return finish_survey(combine_surveys(parts, max_distinct), read)


def finish_survey(found, read=None):
    """``found`` once every chunk is in (raises with no data or a repeated id).

    Ids whose hashes repeat are looked up again in the chunks of ``read``
    (read once more) to tell a subject in two chunks, which is refused, from
    two ids that share a hash.
    """
    if found is None:
        raise ValueError("no data: the chunks hold no subjects")
    hashes = found.id_hashes
    if hashes is not None and read is not None:
        distinct, counts = np.unique(hashes, return_counts=True)
        shared = distinct[counts > 1]
        if shared.size:
            _check_unique(read, shared)
    return found


def _check_unique(read, shared):
    """Raise naming the subjects in more than one chunk, among the ids
    whose hashes are in ``shared``."""
    seen, repeated = {}, []
    for number, (data, _, _) in enumerate(_each(read)):
        ids = np.asarray(data.ids)
        for i in np.flatnonzero(np.isin(id_hashes(ids), shared)):
            label = ids[i].item() if hasattr(ids[i], "item") else ids[i]
            if label in seen:
                repeated.append(f"{label!r} (chunks {seen[label]} and {number})")
            else:
                seen[label] = number
    if repeated:
        raise ValueError(
            f"subject {', '.join(repeated[:3])} appears in more than one chunk; "
            "each subject must lie within one chunk (chunks given without ids "
            "number their subjects from 0 each: give them ids)"
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


def _added(first, then):
    """The sum of two CovMoments (either may be None), as a new object."""
    if first is None or then is None:
        return then if first is None else first
    names = ("count", "total", "total_sq", "diag_count", "diag_total", "diag_total_sq")
    sums = {name: getattr(first, name) + getattr(then, name) for name in names}
    return CovMoments(first.centres, **sums)


def _mean(numerics, template, sums, rule):
    h = bw.mean_bandwidth(rule, template, sums, None, None, 0, numerics.kernel, None)
    weight, total = sums[0], sums[1]
    centres = template.centres
    at_bins = local_linear_binned(centres, weight, total, centres, h, numerics.kernel)
    return MeanCurve(centres, weight, total, float(h), numerics.kernel), at_bins


# ---------------------------------------------------------------------- #
# the work on one chunk, and the sum of two chunks' results; a serial loop
# (fit_chunks) and a cluster (fdaimpute.cluster) run the same functions
def _lag_bins(data, span, max_lag=NOISE_MAX_LAG):
    lag, half = neighbour_pairs(data.times, data.values, data.subject_index, max_lag)
    where = np.minimum((lag / span * LAG_BINS).astype(np.int64), LAG_BINS - 1)
    return lag, half, where


def _visible(n_obs, hidden):
    mask = np.ones(n_obs, dtype=bool)
    mask[hidden] = False
    return mask


@dataclass
class MeanSums:
    """Pass 2 on some chunks: the binned mean sums per key, the lag histogram."""

    sums: dict  # "all" or fold number -> (weights, values, squares) per bin
    lags: np.ndarray | None


def mean_sums(data, template, hidden, lag_span):
    """Pass 2 on one chunk.

    Parameters
    ----------
    data : IrregularData
        The chunk.
    template : Bins
        The bins (:func:`template_bins`).
    hidden : list of ndarray
        Per fold, the chunk's hidden points (positions within the chunk).
    lag_span : float or None
        The time span for the noise estimate's lag histogram (None: none).
    """
    bins = _bins_of(data.times, template)
    parts = {"all": (bins, data.values)}
    for f, hid in enumerate(hidden):
        vis = _visible(data.times.size, hid)
        parts[f] = (bins.subset(vis), data.values[vis])
    sums = {
        key: (b.spread(np.ones_like(y)), b.spread(y), b.spread(y * y))
        for key, (b, y) in parts.items()
    }
    lags = None
    if lag_span is not None:
        lags = np.bincount(_lag_bins(data, lag_span)[2], minlength=LAG_BINS)
    return MeanSums(sums, lags)


def add_mean_sums(first, then):
    """The pass-2 sums of two runs of chunks."""
    sums = {
        key: tuple(a + b for a, b in zip(first.sums[key], then.sums[key]))
        for key in first.sums
    }
    lags = None if first.lags is None else first.lags + then.lags
    return MeanSums(sums, lags)


@dataclass
class CovSums:
    """Pass 3 on some chunks, in chunk order."""

    moments: dict  # "all" or fold number -> CovMoments
    fit_parts: list  # per fold: [(times, residuals, counts)] of validation subjects
    new_parts: list
    noise: np.ndarray | None  # power sums of the pairs below the cut (8,)
    edge: list  # [(lags, halves)] of the pairs in the cut's histogram bin


def cov_sums(data, template, at_bins, hidden, validation, include_diagonal, cut):
    """Pass 3 on one chunk.

    Parameters
    ----------
    data : IrregularData
        The chunk.
    template : Bins
        The bins.
    at_bins : dict
        ``"all"`` or fold number -> the mean at the bins.
    hidden : list of ndarray
        Per fold, the chunk's hidden points (positions within the chunk).
    validation : ndarray
        The chunk's validation subjects (positions within the chunk).
    include_diagonal : bool
        Whether the covariance sums keep the ``j == k`` products.
    cut : tuple or None
        ``(span, histogram bin)`` of the noise estimate's pairs (None: none).
    """
    bins = _bins_of(data.times, template)
    subject = data.subject_index
    n = len(data)
    resid = data.values - bins.interpolate(at_bins["all"])
    moments = {
        "all": covariance_moments(
            bins, resid, subject, n, include_diagonal=include_diagonal
        )
    }
    fit_parts, new_parts = [], []
    for f, hid in enumerate(hidden):
        vis = _visible(data.times.size, hid)
        resid = data.values - bins.interpolate(at_bins[f])
        moments[f] = covariance_moments(
            bins.subset(vis),
            resid[vis],
            subject[vis],
            n,
            include_diagonal=include_diagonal,
        )
        split = []
        for mask in (vis, ~vis):
            off, idx = ragged_subset(mask, data.offsets, validation)
            split.append([(data.times[idx], resid[idx], np.diff(off))])
        fit_parts.append(split[0])
        new_parts.append(split[1])
    noise, edge = None, []
    if cut is not None:
        lag, half, where = _lag_bins(data, cut[0])
        below = where < cut[1]
        noise = np.zeros(8)
        noise[7] = np.inf
        if below.any():
            noise = power_sums(lag[below], half[below])
        at = where == cut[1]
        edge = [(lag[at], half[at])]
    return CovSums(moments, fit_parts, new_parts, noise, edge)


def add_cov_sums(first, then):
    """The pass-3 sums of two consecutive runs of chunks."""
    noise = None
    if first.noise is not None:
        noise = np.concatenate(
            [first.noise[:7] + then.noise[:7], [min(first.noise[7], then.noise[7])]]
        )
    return CovSums(
        {k: _added(first.moments[k], then.moments[k]) for k in first.moments},
        [a + b for a, b in zip(first.fit_parts, then.fit_parts)],
        [a + b for a, b in zip(first.new_parts, then.new_parts)],
        noise,
        first.edge + then.edge,
    )


def _noise_estimate(keep, total):
    """The difference-based estimate (the pairs not longer than the ``keep``-th
    shortest) from the pass-3 sums, or None where it is not finite."""
    lag = np.concatenate([e[0] for e in total.edge])
    half = np.concatenate([e[1] for e in total.edge])
    need = keep - int(total.noise[0])
    width = np.partition(lag, need - 1)[need - 1]
    kept = lag <= width * (1.0 + 1e-9)  # ties but for rounding, as in fit
    # lags over many orders of magnitude can underflow the sums: then None,
    # as from difference_estimate_or_none, and the fitted noise stands alone
    with np.errstate(all="ignore"):
        part = power_sums(lag[kept], half[kept])
        sums = np.concatenate(
            [total.noise[:7] + part[:7], [min(total.noise[7], part[7])]]
        )
        estimate = intercept_from_sums(sums, width)
    return float(estimate) if np.isfinite(estimate) else None


@dataclass
class Place:
    """Where a chunk lies among all: its first subject and point, its sizes."""

    first_subject: int
    first_obs: int
    n_subjects: int
    n_obs: int


def serial(read):
    """Run a pass over the chunks of ``read`` one at a time, in this process.

    Returns ``run(work, local, add, **shared)``: the sum by ``add`` over
    the chunks of ``work(chunk, **shared, **local(place))``.
    """

    def run(work, local, add, **shared):
        total = None
        for data, first_subject, first_obs in _each(read):
            place = Place(first_subject, first_obs, len(data), data.times.size)
            part = work(data, **shared, **local(place))
            total = part if total is None else add(total, part)
        return total

    return run


def fit_passes(run, found, numerics, options, rng):
    """Passes 2 and 3 and the fit, after :func:`survey`.

    Parameters
    ----------
    run : callable
        ``run(work, local, add, **shared)`` applies ``work`` to every chunk
        (with the ``shared`` arguments and those ``local(place)`` gives for
        the chunk's :class:`Place`) and sums the results with ``add``, the
        earlier chunks first (:func:`serial`, or a cluster's map and reduce).
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
    fit : PACEFit
    refit : callable
        ``refit(bandwidth_cov)``: the fit at other covariance bandwidths, as
        the whole fit at those bandwidths gives, from the same passes (no
        chunk is read again).
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
    use_cv = any(is_rule(options[k], "cv") for k in ("bandwidth_cov", "n_components"))
    val, folds = np.empty(0, np.int64), []
    if use_cv:
        offsets = np.concatenate([[0], np.cumsum(counts)])
        val, folds = heldout_folds(offsets, rng, n_validation(counts, max_k))
    keep = span = None
    if tune_noise:
        n_pairs = int(
            sum(np.maximum(counts - k, 0).sum() for k in range(1, NOISE_MAX_LAG + 1))
        )
        span = found.time_range[1] - found.time_range[0]
        try:
            keep = n_kept(n_pairs, NOISE_SHARE, NOISE_MIN_PAIRS)
        except ValueError:
            span = None

    def hidden_in(place):
        lo, hi = place.first_obs, place.first_obs + place.n_obs
        return [h[slice(*np.searchsorted(h, [lo, hi]))] - lo for h in folds]

    def local_means(place):
        return {"hidden": hidden_in(place)}

    def local_covs(place):
        lo = place.first_subject
        here = val[slice(*np.searchsorted(val, [lo, lo + place.n_subjects]))] - lo
        return {"hidden": hidden_in(place), "validation": here}

    # pass 2: mean sums, lag histogram
    total = run(mean_sums, local_means, add_mean_sums, template=template, lag_span=span)
    means = {
        k: _mean(numerics, template, s, options["bandwidth_mean"])
        for k, s in total.sums.items()
    }

    # pass 3: covariance sums, validation subjects, noise pairs
    cut = None
    if span is not None:
        cut = (span, int(np.searchsorted(np.cumsum(total.lags), keep)))
    total = run(
        cov_sums,
        local_covs,
        add_cov_sums,
        template=template,
        at_bins={k: m[1] for k, m in means.items()},
        include_diagonal=not numerics.measurement_error,
        cut=cut,
    )

    def pooled(key):
        mean, at_bins = means[key]
        n = found.n_subjects
        moments = total.moments[key]
        return PooledMoments(template, mean, at_bins, None, None, None, n, moments)

    difference_noise = None if cut is None else _noise_estimate(keep, total)
    # the folds' sums and validation subjects, for every refit's search
    on_folds = [
        (pooled(f), _joined(total.fit_parts[f]), _joined(total.new_parts[f]))
        for f in range(len(folds))
    ]

    def refit(bandwidth_cov):
        choice = (bandwidth_cov, None, None)
        if is_rule(bandwidth_cov, "cv") or is_rule(options["n_components"], "cv"):
            choice = select_on_folds(
                numerics,
                on_folds,
                bandwidth_cov=bandwidth_cov,
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

    return refit(options["bandwidth_cov"]), refit


def excursion(data, estimator):
    """The plausibility check's pass on one chunk: how far the worst curve
    of its subjects leaves the range ``transform`` warns outside of (see
    :meth:`fdaimpute.base.BaseImputer._excursion`)."""
    return estimator._excursion(data)


def no_local(place):
    """No per-chunk arguments (the ``local`` of a pass that needs none)."""
    return {}


def _joined(parts):
    """Times, residuals and offsets of the validation subjects, in order."""
    counts = np.concatenate([p[2] for p in parts])
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([[0], np.cumsum(counts)]),
    )
