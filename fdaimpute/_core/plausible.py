"""Warnings for curves a user should not trust: far outside the data, or imputed
from observations beyond the training range."""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from fdaimpute._core.ids import subject_label

#: A curve may leave the training values' range by this share of it.
WIDEN = 0.5
#: New subjects may be observed this share of the training range beyond it.
OBSERVATION_SLACK = 0.1


#: Whether the warnings of implausible curves are off (see :func:`silenced`).
_SILENCED = ContextVar("implausible_curves_silenced", default=False)


@contextmanager
def silenced():
    """No warnings of implausible curves inside this block.

    For an imputer working inside another one - a network's statistical base,
    asked for the curves of a training batch whose subjects show only the
    points the encoder sees - whose output the outer imputer checks and
    names by the user's subject ids itself.
    """
    token = _SILENCED.set(True)
    try:
        yield
    finally:
        _SILENCED.reset(token)


def value_range(values):
    """``(min, max)`` of the training values, as floats."""
    return float(np.min(values)), float(np.max(values))


def warn_implausible(curves, data, grid, time_range, values_range, name):
    """Warn, naming subjects, when a curve leaves the widened range of the data.

    Inside the training time range, every curve should stay within the
    training values' range widened by ``WIDEN`` of it on each side, or
    within the subject's own observations widened the same way where they
    reach farther (the data then say so).

    Parameters
    ----------
    curves : ndarray of shape (n_subjects, n_grid)
    data : IrregularData
        The subjects imputed.
    grid : ndarray of shape (n_grid,)
    time_range : tuple of float
        Training time range.
    values_range : tuple of float or None
        Training values' range (None: no check, e.g. an old model file).
    name : str
        The imputer's class name, for the message.
    """
    if _SILENCED.get():
        return
    found = _outside(curves, data.values, data.offsets, grid, time_range, values_range)
    if found is not None:
        _warn(found, data.ids, grid, name)


def warn_implausible_variables(curves, data, grid, time_range, values_ranges, name):
    """:func:`warn_implausible` for each variable's block of columns.

    Each variable's curves are judged against that variable's training range
    and the subject's own observations of it; a subject not observed on a
    variable (whose curve there comes from the others, or is the mean) is
    judged against the training range alone.

    Parameters
    ----------
    curves : ndarray of shape (n_subjects, p * n_grid)
        Variable-major blocks.
    data : MultivariateIrregularData
        The subjects imputed.
    grid : ndarray of shape (n_grid,)
    time_range : tuple of float
    values_ranges : list of tuple of float, or None
        Each variable's training range (None: no check).
    name : str
        The imputer's class name.
    """
    if values_ranges is None or _SILENCED.get():
        return
    for j, found in _outside_variables(curves, data, grid, time_range, values_ranges):
        if found is not None:
            _warn(found, data.ids, grid, f"{name} ({data.variables[j]})")


def excursion_variables(curves, data, grid, time_range, values_ranges):
    """:func:`excursion` of the worst variable, from curves already computed.

    Parameters
    ----------
    curves : ndarray of shape (n_subjects, p * n_grid)
        Variable-major blocks on ``grid``.
    data : MultivariateIrregularData
    grid : ndarray of shape (n_grid,)
    time_range : tuple of float
    values_ranges : list of tuple of float, or None

    Returns
    -------
    float
        The largest share of a variable's training range by which a curve
        leaves its widened range (0.0 when none does, or no ranges).
    """
    if values_ranges is None:
        return 0.0
    found = _outside_variables(curves, data, grid, time_range, values_ranges)
    return max(
        (_beyond(f, values_ranges[j]) for j, f in found if f is not None),
        default=0.0,
    )


def _outside_variables(curves, data, grid, time_range, values_ranges):
    """``(j, _outside(...))`` for each variable's block of ``curves``."""
    n, width = len(data), grid.size
    for j in range(len(data.variables)):
        keep = data.variable == j
        counts = np.bincount(data.subject_index[keep], minlength=n)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        block = curves[:, j * width : (j + 1) * width]
        yield (
            j,
            _outside(
                block, data.values[keep], offsets, grid, time_range, values_ranges[j]
            ),
        )


def _warn(found, ids, grid, name):
    """The warning of :func:`warn_implausible` for what ``_outside`` found."""
    rows, _, part, low, high, inside = found
    # the farthest excursion of any subject's curve
    excess = _excess(found)
    at, col = np.unravel_index(int(np.argmax(excess)), excess.shape)
    i, col = int(rows[at]), int(col)
    others = f" and {rows.size - 1} other subject(s)" if rows.size > 1 else ""
    warnings.warn(
        f"{name}: the imputed curve of {subject_label(ids, i)}{others} "
        f"leaves the training data's range widened by half of it "
        f"([{low[i]:.4g}, {high[i]:.4g}]) inside the observed time range "
        f"({part[i, col]:.4g} at time {grid[inside][col]:.4g}); do not trust "
        "it as it is: check that subject's observations, or use a model that "
        "follows single observations less closely (AutoImputer chooses one on "
        "held-out points; for PACE fewer n_components or a wider bandwidth_cov)",
        UserWarning,
        stacklevel=4,
    )


def allow_observations_near_range(data, time_range, rounding=0.0):
    """Warn about new subjects observed a little beyond the training range.

    Observations up to ``OBSERVATION_SLACK`` of the range beyond it are used
    as they are (as in cross-validation, where a test subject's last visit
    can come after every training subject's); the warning says how far.
    Those within ``rounding`` of the range count as inside it (no warning).

    Returns
    -------
    bool
        Whether every observation lies within that slack (else the caller
        refuses them as before).
    """
    lo, hi = time_range
    slack = OBSERVATION_SLACK * (hi - lo)
    below = data.times < lo - rounding
    above = data.times > hi + rounding
    if not (below.any() or above.any()):
        return True
    if data.times.min() < lo - slack or data.times.max() > hi + slack:
        return False
    beyond = np.maximum(lo - data.times, data.times - hi)
    j = int(np.argmax(beyond))
    i = int(data.subject_index[j])
    n_subjects = np.unique(data.subject_index[below | above]).size
    others = f" (and {n_subjects - 1} other subject(s))" if n_subjects > 1 else ""
    warnings.warn(
        f"{subject_label(data.ids, i)}{others} is observed at time "
        f"{data.times[j]:g}, {beyond[j]:.3g} beyond the training range "
        f"[{lo:g}, {hi:g}] ({100 * beyond[j] / (hi - lo):.1f}% of its length); "
        "those observations are used as they are. Queries beyond the range "
        "still need extrapolate=True or 'clip'",
        UserWarning,
        stacklevel=4,
    )
    return True


def implausible_rows(curves, data, grid, time_range, values_range):
    """Rows of ``curves`` that :func:`warn_implausible` would warn about.

    Parameters are those of :func:`warn_implausible` (``name`` aside).

    Returns
    -------
    ndarray of int
        The subjects' positions, in order (empty when every curve is plausible).
    """
    found = _outside(curves, data.values, data.offsets, grid, time_range, values_range)
    return np.zeros(0, dtype=int) if found is None else found[0]


def excursion(curves_on, data, time_range, values_range, n_grid=101):
    """How far the worst curve leaves the range :func:`warn_implausible` allows.

    Parameters
    ----------
    curves_on : callable
        ``curves_on(grid)`` gives the curves of ``data``'s subjects on
        ``grid``, an array of shape (n_subjects, n_grid).
    data : IrregularData
        The subjects.
    time_range, values_range
        As for :func:`warn_implausible`.
    n_grid : int, default=101
        Points of the grid spanning ``time_range`` the curves are judged on.

    Returns
    -------
    float
        The largest distance of a curve beyond its subject's widened range,
        as a share of the training values' range: 0.0 when every curve would
        pass without a warning (or there is no range to judge by).
    """
    grid = np.linspace(*time_range, n_grid)
    found = _outside(
        curves_on(grid), data.values, data.offsets, grid, time_range, values_range
    )
    return 0.0 if found is None else _beyond(found, values_range)


def _beyond(found, values_range):
    """The largest distance beyond the widened range in what ``_outside``
    found, as a share of ``values_range``."""
    beyond = _excess(found).max()
    return float(beyond / max(values_range[1] - values_range[0], np.finfo(float).tiny))


def _excess(found):
    """How far each offending subject's curve lies beyond its widened range
    at each point of what ``_outside`` found (``-inf`` where it is inside)."""
    rows, bad, part, low, high, _ = found
    part = part[rows]
    excess = np.maximum(low[rows, None] - part, part - high[rows, None])
    return np.where(bad[rows], excess, -np.inf)


def _outside(curves, values, offsets, grid, time_range, values_range):
    """Where curves leave the widened range (None when none does or no check).

    Returns the offending rows, the mask of offending points inside the time
    range, those columns of ``curves``, each subject's lower and upper bound,
    and the mask of grid points inside the time range.
    """
    if values_range is None or curves.size == 0:
        return None
    inside = (grid >= time_range[0]) & (grid <= time_range[1])
    if not inside.any():
        return None
    lo, hi = values_range
    has = np.diff(offsets) > 0
    own_lo = np.full(has.size, lo)
    own_hi = np.full(has.size, hi)
    if has.any():
        starts = offsets[:-1][has]
        own_lo[has] = np.minimum(lo, np.minimum.reduceat(values, starts))
        own_hi[has] = np.maximum(hi, np.maximum.reduceat(values, starts))
    # (a rounding tolerance where the values are all equal)
    rounding = 1e-9 * np.maximum(np.abs(own_lo), np.abs(own_hi))
    half = np.maximum(WIDEN * (own_hi - own_lo), rounding)
    part = curves[:, inside]
    low, high = own_lo - half, own_hi + half
    bad = (part < low[:, None]) | (part > high[:, None])
    rows = np.flatnonzero(bad.any(axis=1))
    if not rows.size:
        return None
    return rows, bad, part, low, high, inside
