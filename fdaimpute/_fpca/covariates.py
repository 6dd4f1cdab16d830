"""Subject covariates: their numeric design and a varying-coefficient mean.

A covariate-adjusted mean ``mu(t, z) = mu0(t) + sum_k z_k beta_k(t)`` (a
varying-coefficient model, as in Jiang & Wang 2010) needs two things:

- a numeric design ``z`` from the covariates as users hold them
  (:class:`CovariateDesign`): a numeric covariate is centred on its
  training mean (so that ``mu0`` is the mean curve of an average subject);
  a categorical one is one-hot encoded against a reference level (its most
  frequent training level, ties to the first in sorted order), one column
  per other level;
- the coefficient curves ``beta_k`` (:func:`varying_coefficients`): at each
  point ``t0`` of a grid, one weighted least-squares fit of every
  observation on ``[1, z] x [1, t - t0]`` with kernel weights ``K((t -
  t0) / h)``, the local-linear smoother of one curve applied to each
  coefficient at once.

The coefficients at ``t0`` are learnt from the subjects observed near
``t0`` only, so they say nothing about covariate values none of those
subjects has: on a small study, the patients followed longest are often
the youngest, and a linear age effect fitted on them, applied to an old
patient late in the range, drew curves far below any observed value.
:func:`covariate_support` records the range of each design column among
the observations near each time, and :func:`effect_at` holds a subject's
design inside it (as ``extrapolate="clip"`` holds a time inside the
training range).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.interpolate import PchipInterpolator

from fdaimpute._core.ids import missing_mask, subject_label
from fdaimpute._numerics.interpolate import spline_columns
from fdaimpute._numerics.local_linear import _kernel_powers, get_kernel

#: Ridge on the local normal equations, relative to their trace (keeps a
#: window where a level is absent solvable; its coefficient then shrinks to 0).
_RIDGE = 1e-8
#: Kernel evaluations held at once (bounds memory).
_MAX_PAIRS = 2_000_000
#: Effective subjects a varying-coefficient fit wants near a time, per
#: coefficient (the bandwidth widens until it has them).
SUBJECTS_PER_COEFFICIENT = 5
#: The widest bandwidth the widening reaches, in multiples of the first.
_MAX_WIDENING = 64.0
#: How far from a time, in coefficient bandwidths, observations count
#: towards the covariates' support there.
SUPPORT_REACH = 2.0
#: The support's bounds are this many subjects in from the extremes.
SUPPORT_SUBJECTS = 3
#: Subjects' effects computed at once on a grid (bounds memory).
_EFFECT_BLOCK = 4096


def _is_numeric(column):
    return np.asarray(column).dtype.kind in "biuf"


class CovariateDesign:
    """The numeric design of subject covariates, learnt on training subjects.

    Parameters
    ----------
    encoding : dict
        ``name -> {"kind": "numeric", "centre": float}`` or ``name ->
        {"kind": "categorical", "reference": str, "levels": [str, ...]}``
        (the other levels, one design column each), in the design's order.
        Built by :meth:`learn`; a plain dict so that it saves as data.
    """

    def __init__(self, encoding):
        self.encoding = encoding

    @classmethod
    def learn(cls, covariates, names, ids=None):
        """The design of the covariates ``names`` from training values.

        Parameters
        ----------
        covariates : dict of str to ndarray
            The training subjects' covariates (one value per subject).
        names : list of str
            Which covariates enter the mean.
        ids : ndarray, default=None
            The subjects' labels, to name one in an error.

        Returns
        -------
        CovariateDesign
        """
        encoding = {}
        for name in names:
            column = _column(covariates, name, "training", ids)
            if _is_numeric(column):
                encoding[name] = {
                    "kind": "numeric",
                    "centre": float(np.mean(column.astype(np.float64))),
                }
                continue
            labels = column.astype(str)
            levels, counts = np.unique(labels, return_counts=True)
            reference = str(levels[np.argmax(counts)])
            encoding[name] = {
                "kind": "categorical",
                "reference": reference,
                "levels": [str(v) for v in levels if v != reference],
            }
        return cls(encoding)

    @property
    def columns(self):
        """Names of the design's columns (``"age"``, ``"sex=m"``, ...)."""
        out = []
        for name, code in self.encoding.items():
            if code["kind"] == "numeric":
                out.append(name)
            else:
                out += [f"{name}={level}" for level in code["levels"]]
        return out

    def matrix(self, covariates, ids=None):
        """The design ``Z`` of some subjects, shape (n_subjects, n_columns).

        Parameters
        ----------
        covariates : dict of str to ndarray
            The subjects' covariates.
        ids : ndarray, default=None
            The subjects' labels, to name one in an error.

        Raises
        ------
        ValueError
            A covariate the fit used is absent, missing for a subject, not
            numeric where it was, or holds a level unseen in training.
        """
        blocks = []
        for name, code in self.encoding.items():
            column = _column(covariates, name, "these", ids)
            who = _label(ids)
            if code["kind"] == "numeric":
                if not _is_numeric(column):
                    raise ValueError(
                        f"covariate {name!r} was numeric in training, got "
                        f"values of type {column.dtype}"
                    )
                blocks.append(column.astype(np.float64)[:, None] - code["centre"])
                continue
            labels = column.astype(str)
            known = set(code["levels"]) | {code["reference"]}
            unseen = np.flatnonzero(~np.isin(labels, list(known)))
            if unseen.size:
                i = int(unseen[0])
                raise ValueError(
                    f"{who(i)}: covariate {name!r} has level {column[i]!r}, not "
                    f"seen in training (levels {sorted(known)})"
                )
            blocks.append(
                (labels[:, None] == np.asarray(code["levels"])[None, :]).astype(float)
            )
        n = len(next(iter(covariates.values()))) if covariates else 0
        return np.concatenate(blocks, axis=1) if blocks else np.zeros((n, 0))

    def values(self, z):
        """The covariates of a design ``z``: the inverse of :meth:`matrix`.

        Parameters
        ----------
        z : ndarray of shape (n_subjects, n_columns)

        Returns
        -------
        dict of str to ndarray
            Numeric covariates as floats, categorical ones as their levels
            (the reference where a row's one-hot columns are all zero).
        """
        out, at = {}, 0
        for name, code in self.encoding.items():
            if code["kind"] == "numeric":
                out[name] = z[:, at] + code["centre"]
                at += 1
                continue
            k = len(code["levels"])
            block = z[:, at : at + k]
            labels = np.asarray([code["reference"], *code["levels"]], dtype=object)
            pick = np.where(block.max(axis=1) > 0.5, block.argmax(axis=1) + 1, 0)
            out[name] = labels[pick]
            at += k
        return out


def _label(ids):
    def name(i):
        return subject_label(ids, i) if ids is not None else f"subject {i}"

    return name


def _column(covariates, name, which, ids):
    """One covariate of ``covariates`` as an array, refusing missing values."""
    if name not in covariates:
        have = sorted(covariates)
        raise ValueError(
            f"covariate {name!r} is needed but {which} subjects do not carry it "
            f"(their covariates: {have}); give it, e.g. "
            f"MultivariateIrregularData.from_long(df, covariates=[{name!r}, ...])"
        )
    column = np.asarray(covariates[name])
    missing = missing_mask(column)
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise ValueError(
            f"{_label(ids)(i)}: covariate {name!r} is missing; the "
            "covariate-adjusted mean needs every subject's covariates"
        )
    return column


def varying_coefficients(times, values, design, grid, bandwidth, kernel):
    """Local-linear varying-coefficient fit of ``values ~ [1, z] beta(t)``.

    Parameters
    ----------
    times, values : ndarray of shape (n_obs,)
        The observations.
    design : ndarray of shape (n_obs, q)
        Each observation's subject's design row ``z``.
    grid : ndarray of shape (G,)
        Where to estimate the coefficients.
    bandwidth : float or ndarray of shape (G,)
        Kernel bandwidth, or one per grid time
        (:func:`coefficient_bandwidths`).
    kernel : str
        Kernel name.

    Returns
    -------
    ndarray of shape (q + 1, G)
        ``mu0`` (row 0) and ``beta_1 .. beta_q`` at ``grid``.
    """
    x = np.concatenate([np.ones((times.size, 1)), design], axis=1)
    q1 = x.shape[1]
    widths = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), grid.shape)
    outer = (x[:, :, None] * x[:, None, :]).reshape(times.size, q1 * q1)
    xy = x * values[:, None]
    out = np.empty((q1, grid.size))
    step = max(1, _MAX_PAIRS // max(times.size, 1))
    for start in range(0, grid.size, step):
        part = slice(start, start + step)
        k0, k1, k2 = _kernel_powers(
            times[None, :] - grid[part, None], widths[part, None], kernel, 2
        )
        m0, m1, m2 = (k @ outer for k in (k0, k1, k2))
        gram = np.block(
            [
                [m0.reshape(-1, q1, q1), m1.reshape(-1, q1, q1)],
                [m1.reshape(-1, q1, q1), m2.reshape(-1, q1, q1)],
            ]
        )
        rhs = np.concatenate([k0 @ xy, k1 @ xy], axis=1)
        trace = np.trace(gram, axis1=1, axis2=2)
        gram += (_RIDGE * trace / (2 * q1))[:, None, None] * np.eye(2 * q1)
        coef = np.linalg.solve(gram, rhs[:, :, None])[:, :q1, 0]
        out[:, part] = coef.T
    return out


def effective_subjects(times, subject, grid, widths, kernel):
    """Kernel-weighted effective number of subjects at each grid time.

    ``(sum_i w_i)^2 / sum_i w_i^2`` with ``w_i`` the kernel weight of
    subject ``i``'s observations at the time (bandwidth ``widths[g]``):
    the number of subjects that would weigh as much if each weighed alike.

    Parameters
    ----------
    times : ndarray of shape (n_obs,)
    subject : ndarray of shape (n_obs,)
        Each observation's subject (integer labels).
    grid, widths : ndarray of shape (G,)
        Times and their bandwidths.
    kernel : str

    Returns
    -------
    ndarray of shape (G,)
    """
    return _effective_subjects(_owners(subject), times, grid, widths, kernel)


def _owners(subject):
    """The observations-by-subjects indicator matrix (sparse)."""
    _, labels = np.unique(subject, return_inverse=True)
    return sparse.csr_matrix(
        (np.ones(labels.size), (np.arange(labels.size), labels)),
        shape=(labels.size, int(labels.max()) + 1),
    )


def _effective_subjects(owner, times, grid, widths, kernel):
    out = np.empty(grid.size)
    step = max(1, _MAX_PAIRS // max(times.size, 1))
    for start in range(0, grid.size, step):
        part = slice(start, start + step)
        weight = get_kernel(kernel)(
            (times[None, :] - grid[part, None]) / widths[part, None]
        )
        per_subject = np.asarray((owner.T @ weight.T).T)
        total = per_subject.sum(axis=1)
        out[part] = total**2 / np.maximum((per_subject**2).sum(axis=1), 1e-300)
    return out


def coefficient_bandwidths(times, subject, grid, bandwidth, kernel, n_coef):
    """The bandwidth of a varying-coefficient fit at each grid time.

    ``bandwidth``, widened (by factors of 1.25) at a grid time until the
    subjects observed near it weigh as much as ``SUBJECTS_PER_COEFFICIENT``
    subjects per coefficient (at most half of all subjects):
    :func:`effective_subjects`. Where few subjects are observed (late in a
    small study) the coefficients would otherwise be fitted to two or three
    subjects' values. Where enough are, the bandwidth is ``bandwidth``.

    Parameters
    ----------
    times : ndarray of shape (n_obs,)
    subject : ndarray of shape (n_obs,)
        Each observation's subject (integer labels).
    grid : ndarray of shape (G,)
    bandwidth : float
    kernel : str
    n_coef : int
        Coefficients of the fit (``q + 1``).

    Returns
    -------
    ndarray of shape (G,)
    """
    owner = _owners(subject)
    target = min(SUBJECTS_PER_COEFFICIENT * n_coef, 0.5 * owner.shape[1])
    widths = np.full(grid.size, float(bandwidth))
    short = np.arange(grid.size)
    while short.size:
        found = _effective_subjects(owner, times, grid[short], widths[short], kernel)
        short = short[(found < target) & (widths[short] < _MAX_WIDENING * bandwidth)]
        widths[short] *= 1.25
    return widths


def covariate_support(times, design, subject, grid, reach):
    """Range of each design column among the subjects observed near each time.

    The bounds are the smallest and largest value among the subjects with
    an observation within ``reach`` of the time; for an indicator column
    (values 0 and 1: a level of a categorical covariate), the
    ``SUPPORT_SUBJECTS``-th smallest and largest (fewer where fewer
    subjects are observed: then the middle one), so that a level held by
    one or two subjects near a time is not taken as support there: its
    effect is then that of the reference level.

    Parameters
    ----------
    times : ndarray of shape (n_obs,)
        The observations' times.
    design : ndarray of shape (n_obs, q)
        Each observation's subject's design row ``z`` (no intercept).
    subject : ndarray of shape (n_obs,)
        Each observation's subject (any integer labels).
    grid : ndarray of shape (G,)
        Where the coefficients live.
    reach : float
        Observations within ``reach`` of a grid time count there; where
        none does, those at the nearest observed time count.

    Returns
    -------
    ndarray of shape (2, q, G)
        The lower (``[0]``) and upper (``[1]``) bound of each column.
    """
    order = np.argsort(times, kind="stable")
    t, z, who = times[order], design[order], subject[order]
    start = np.searchsorted(t, grid - reach, side="left")
    stop = np.searchsorted(t, grid + reach, side="right")
    nearest = np.clip(np.searchsorted(t, grid), 1, t.size - 1)
    nearest -= (grid - t[nearest - 1]) < (t[nearest] - grid)
    empty = start >= stop
    start = np.where(empty, np.searchsorted(t, t[nearest], side="left"), start)
    stop = np.where(empty, np.searchsorted(t, t[nearest], side="right"), stop)
    indicator = np.all((design == 0) | (design == 1), axis=0)
    columns = np.arange(design.shape[1])
    out = np.empty((2, design.shape[1], grid.size))
    for g, (a, b) in enumerate(zip(start, stop)):  # over grid points
        _, first = np.unique(who[a:b], return_index=True)
        values = np.sort(z[a:b][first], axis=0)
        m = np.where(indicator, min(SUPPORT_SUBJECTS, (values.shape[0] + 1) // 2), 1)
        out[0, :, g] = values[m - 1, columns]
        out[1, :, g] = values[-m, columns]
    return out


def effect_at(beta, support, grid, times, design):
    """``[1, z]^T beta(t)`` at each observation, ``z`` held inside the support.

    Parameters
    ----------
    beta : ndarray of shape (q + 1, G)
        ``mu0`` (or its correction) and the coefficient curves on ``grid``.
    support : ndarray of shape (2, q, G) or None
        :func:`covariate_support` on ``grid``; None holds nothing (a model
        saved before the support was kept).
    grid : ndarray of shape (G,)
    times : ndarray of shape (n_obs,)
    design : ndarray of shape (n_obs, q + 1)
        ``[1, z]`` of each observation's subject.

    Returns
    -------
    ndarray of shape (n_obs,)
    """
    coef = spline_columns(grid, beta.T, times)
    z = np.clip(design[:, 1:], *_bounds(support, grid, times))
    return coef[:, 0] + np.einsum("ok,ok->o", z, coef[:, 1:])


def effect_curves(beta, support, grid, design, times, derivative=False):
    """``[1, z]^T beta(t)`` of each subject on ``times``, ``z`` held inside
    the support (or its derivative in ``t``).

    Parameters
    ----------
    beta, support, grid
        As for :func:`effect_at`.
    design : ndarray of shape (n_subjects, q + 1)
        ``[1, z]`` of each subject.
    times : ndarray of shape (T,)
    derivative : bool, default=False
        The derivative: where a subject's ``z`` is held at a bound, the
        bound's slope in time enters it.

    Returns
    -------
    ndarray of shape (n_subjects, T)
    """
    coef = spline_columns(grid, beta.T, times)
    low, high = _bounds(support, grid, times)
    if derivative:
        slope = spline_columns(grid, beta.T, times, derivative=True)
        low_slope, high_slope = _bounds(support, grid, times, derivative=True)
    out = np.empty((design.shape[0], times.size))
    for start in range(0, design.shape[0], _EFFECT_BLOCK):
        z = design[start : start + _EFFECT_BLOCK, None, 1:]
        held = np.clip(z, low, high)
        if not derivative:
            part = coef[:, 0] + np.einsum("itk,tk->it", held, coef[:, 1:])
        else:
            moving = np.where(z < low, low_slope, np.where(z > high, high_slope, 0.0))
            part = (
                slope[:, 0]
                + np.einsum("itk,tk->it", held, slope[:, 1:])
                + np.einsum("itk,tk->it", moving, coef[:, 1:])
            )
        out[start : start + _EFFECT_BLOCK] = part
    return out


def _bounds(support, grid, times, derivative=False):
    """The support's bounds (or their slopes) at ``times``, each (T, q):
    monotone cubic between grid points (continuous slopes, no overshoot),
    constant beyond its ends; without a support, unbounded."""
    if support is None:
        if derivative:
            return np.zeros((times.size, 1)), np.zeros((times.size, 1))
        return np.full((times.size, 1), -np.inf), np.full((times.size, 1), np.inf)
    inside = np.clip(times, grid[0], grid[-1])
    out = []
    for side in support:
        spline = PchipInterpolator(grid, side, axis=1)
        if not derivative:
            out.append(spline(inside).T)
            continue
        keep = (times >= grid[0]) & (times <= grid[-1])
        out.append(np.where(keep[:, None], spline(inside, 1).T, 0.0))
    return tuple(out)
