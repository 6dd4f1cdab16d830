"""Subject covariates: their numeric design and a varying-coefficient mean.

A covariate-adjusted mean ``mu(t, z) = mu0(t) + sum_k z_k beta_k(t)`` (a
varying-coefficient model, as in Jiang & Wang 2010) needs three things:

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
  coefficient at once;
- which effects vary in time at all (:func:`choose_varying`): an effect
  may instead be one constant (a partially linear model), as held-out
  subjects decide.

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

import warnings

import numpy as np
from scipy import sparse
from scipy.interpolate import PchipInterpolator

from fdaimpute._core.coerce import first_non_numeric
from fdaimpute._core.ids import missing_mask, subject_label
from fdaimpute._fpca.folds import N_FOLDS
from fdaimpute._numerics.interpolate import spline_columns
from fdaimpute._numerics.local_linear import _kernel_powers, get_kernel

#: Norm of a design column's residual on the columns before it (all scaled
#: to norm 1) below which it counts as their linear combination.
IDENTIFIABLE_TOLERANCE = 1e-8
#: Ridge on the local normal equations, each column scaled to its own moments
#: (keeps a window where a level is absent solvable; its coefficient then
#: shrinks to 0).
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
#: From this many subjects on, one fold of held-out subjects chooses which
#: effects vary in time (:func:`choose_varying`).
ONE_FOLD_SUBJECTS = 1500
#: A level of a categorical covariate held by fewer subjects has a constant
#: effect: its time course would be that of a few subjects' curves.
MIN_HOLDERS = 10
#: Up to this many covariates, every subset of them is a candidate set of
#: time-varying effects; beyond it, none, each alone, and all.
EVERY_SUBSET = 4


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
                _check_finite(column, name, ids)
                encoding[name] = {
                    "kind": "numeric",
                    "centre": float(np.mean(column.astype(np.float64))),
                }
                continue
            labels = column.astype(str)
            levels, counts = np.unique(labels, return_counts=True)
            reference = str(levels[np.argmax(counts)])
            if levels.size == 1:
                raise ValueError(
                    f"covariate {name!r} is {reference!r} for every training "
                    "subject, so its effect cannot be estimated; leave it out of "
                    "covariates"
                )
            rare = [
                str(v)
                for v, c in zip(levels, counts)
                if c < SUPPORT_SUBJECTS and v != reference
            ]
            if rare:
                _warn_pooled(name, rare, reference, levels.size, labels.size)
            encoding[name] = {
                "kind": "categorical",
                "reference": reference,
                "levels": [str(v) for v in levels if v != reference and v not in rare],
                "pooled": rare,
            }
        design = cls(encoding)
        design.check_identifiable(covariates)
        return design

    def check_identifiable(self, covariates):
        """Raise unless every design column is identifiable beside the others.

        A numeric covariate constant over the subjects, or a column that is
        a linear combination of the intercept and the columns before it
        (the same covariate given twice, a level and its complement, more
        levels than subjects), would leave the effects undetermined: the
        local fits would split them arbitrarily between the columns.

        Raises
        ------
        ValueError
            Naming the column and what it is a combination of.
        """
        z = self.matrix(covariates)
        x = np.concatenate([np.ones((z.shape[0], 1)), z], axis=1)
        names = ["the intercept", *self.columns]
        norm = np.linalg.norm(x, axis=0)
        if np.any(norm == 0):
            k = int(np.flatnonzero(norm == 0)[0])
            raise ValueError(
                f"covariate column {names[k]!r} is constant over the training "
                "subjects, so its effect cannot be estimated; leave it out of "
                "covariates"
            )
        x = x / norm
        # |R_kk|: the distance of column k from the span of the columns before it
        distance = np.abs(np.diagonal(np.linalg.qr(x, mode="r")))
        dependent = np.flatnonzero(distance <= IDENTIFIABLE_TOLERANCE)
        if dependent.size or x.shape[1] > x.shape[0]:
            # (beyond as many columns as subjects, every column depends)
            k = int(dependent[0]) if dependent.size else x.shape[0]
            coef, *_ = np.linalg.lstsq(x[:, :k], x[:, k], rcond=None)
            used = [
                names[i] if i == 0 else repr(names[i])
                for i in np.flatnonzero(np.abs(coef) > 1e-6)
            ]
            raise ValueError(
                f"covariate column {names[k]!r} is a linear combination of "
                f"{', '.join(used) or 'the others'} over the training "
                "subjects (the same covariate given twice, a level and its "
                "complement, or more levels than subjects), so the effects "
                "cannot be told apart; leave one of them out of covariates"
            )

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

    @property
    def groups(self):
        """Each covariate's design columns, as index arrays, in order."""
        out, at = [], 0
        for code in self.encoding.values():
            width = 1 if code["kind"] == "numeric" else len(code["levels"])
            out.append(np.arange(at, at + width))
            at += width
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
                    i = first_non_numeric(column)
                    raise ValueError(
                        f"{who(i)}: covariate {name!r} was numeric in training, "
                        f"got {column[i]!r}; convert the column to numbers (e.g. "
                        "pandas.to_numeric)"
                    )
                _check_finite(column, name, ids)
                blocks.append(column.astype(np.float64)[:, None] - code["centre"])
                continue
            labels = column.astype(str)
            pooled = code.get("pooled", [])
            known = set(code["levels"]) | {code["reference"], *pooled}
            unseen = np.flatnonzero(~np.isin(labels, list(known)))
            if unseen.size:
                i = int(unseen[0])
                raise ValueError(
                    f"{who(i)}: covariate {name!r} has level {str(labels[i])!r}, not "
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
            pick = np.zeros(z.shape[0], dtype=np.int64)
            if k:
                pick = np.where(block.max(axis=1) > 0.5, block.argmax(axis=1) + 1, 0)
            out[name] = labels[pick]
            at += k
        return out


def _check_finite(column, name, ids):
    """Raise for an infinite value of a numeric covariate, naming the subject."""
    bad = np.flatnonzero(~np.isfinite(column.astype(np.float64)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{_label(ids)(i)}: covariate {name!r} is {column[i]}; covariates "
            "must be finite"
        )


def _warn_pooled(name, rare, reference, n_levels, n_subjects):
    """Warn that the levels ``rare`` of ``name`` count as its ``reference``."""
    shown = ", ".join(map(repr, rare[:5])) + (", ..." if len(rare) > 5 else "")
    hint = ""
    if n_levels > n_subjects / 2:
        hint = (
            f" ({n_levels} levels among {n_subjects} subjects: if {name!r} holds "
            "numbers, convert it to numbers, e.g. with pandas.to_numeric)"
        )
    warnings.warn(
        f"covariate {name!r}: {len(rare)} level(s) ({shown}) held by fewer than "
        f"{SUPPORT_SUBJECTS} training subjects have no effect of their own; "
        f"their subjects count as the reference level {reference!r}{hint}",
        UserWarning,
        stacklevel=4,
    )


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
            f"{_label(ids)(i)}: covariate {name!r} is missing; a model that "
            "reads covariates needs every subject's values of them"
        )
    return column


def varying_coefficients(times, values, design, grid, bandwidth, kernel, varying=None):
    """Local-linear varying-coefficient fit of ``values ~ [1, z] beta(t)``.

    With ``varying``, the columns it marks False get one constant
    coefficient each (a partially linear model): the profile estimate of
    Speckman (1988), the constants fitted by least squares to what the
    varying part's smoother leaves of the values and of their columns, the
    varying coefficients then to the values less the constant part.

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
    varying : ndarray of bool of shape (q,), default=None
        Which columns' coefficients vary in time (None: all).

    Returns
    -------
    ndarray of shape (q + 1, G)
        ``mu0`` (row 0) and ``beta_1 .. beta_q`` at ``grid`` (constant
        along the row where a coefficient does not vary).
    """
    moments = local_moments(times, values, design, grid, bandwidth, kernel)
    if varying is None:
        varying = np.ones(design.shape[1], dtype=bool)
    return solve_coefficients(moments, times, values, design, grid, varying)


def local_moments(times, values, design, grid, bandwidth, kernel):
    """The local-linear normal equations of ``values ~ [1, z]`` at each grid time.

    Parameters are those of :func:`varying_coefficients`.

    Returns
    -------
    gram : ndarray of shape (G, 2 (q + 1), 2 (q + 1))
        ``[[M0, M1], [M1, M2]]`` with ``M_a = sum K d^a x x^T``.
    rhs : ndarray of shape (G, 2 (q + 1))
        ``[sum K x y, sum K d x y]``.

    Any subset of the columns' equations is a sub-block of these, so every
    choice of varying columns is solved from one pass over the data.
    """
    x = np.concatenate([np.ones((times.size, 1)), design], axis=1)
    q1 = x.shape[1]
    widths = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), grid.shape)
    outer = (x[:, :, None] * x[:, None, :]).reshape(times.size, q1 * q1)
    xy = x * values[:, None]
    gram = np.empty((grid.size, 2 * q1, 2 * q1))
    rhs = np.empty((grid.size, 2 * q1))
    step = max(1, _MAX_PAIRS // max(times.size, 1))
    for start in range(0, grid.size, step):
        part = slice(start, start + step)
        k0, k1, k2 = _kernel_powers(
            times[None, :] - grid[part, None], widths[part, None], kernel, 2
        )
        m0, m1, m2 = (k @ outer for k in (k0, k1, k2))
        gram[part] = np.block(
            [
                [m0.reshape(-1, q1, q1), m1.reshape(-1, q1, q1)],
                [m1.reshape(-1, q1, q1), m2.reshape(-1, q1, q1)],
            ]
        )
        rhs[part] = np.concatenate([k0 @ xy, k1 @ xy], axis=1)
    return gram, rhs


def solve_coefficients(moments, times, values, design, grid, varying):
    """The coefficient curves from :func:`local_moments`, some held constant.

    See :func:`varying_coefficients` (whose parameters these are, with
    ``moments`` the output of :func:`local_moments` on the same data).
    """
    gram, rhs = moments
    q1 = gram.shape[1] // 2
    keep = np.flatnonzero(np.concatenate([[True], varying]))
    fixed = np.flatnonzero(~np.asarray(varying, dtype=bool)) + 1
    rows = np.concatenate([keep, q1 + keep])
    sub = gram[np.ix_(np.arange(grid.size), rows, rows)]
    # the right-hand sides of the values and of each constant column, whose
    # moments are columns of the gram (x is its own response there)
    right = np.concatenate([rhs[:, rows, None], gram[:, rows][:, :, fixed]], axis=2)
    # each column on the scale of its own moments (a covariate's units
    # change nothing), with a small ridge for the times few subjects reach
    diag = np.diagonal(sub, axis1=1, axis2=2)
    unit = 1.0 / np.sqrt(np.where(diag > 0, diag, 1.0))
    sub = sub * unit[:, :, None] * unit[:, None, :] + _RIDGE * np.eye(rows.size)
    coef = np.linalg.solve(sub, right * unit[:, :, None])
    coef = (coef * unit[:, :, None])[:, : keep.size]  # (G, |keep|, 1 + |fixed|)
    out = np.zeros((q1, grid.size))
    if fixed.size:
        x = np.concatenate([np.ones((times.size, 1)), design], axis=1)
        smoothed = np.stack(
            [
                np.einsum("ok,ok->o", x[:, keep], spline_columns(grid, c, times))
                for c in np.moveaxis(coef, 2, 0)
            ],
            axis=1,
        )
        left = x[:, fixed] - smoothed[:, 1:]
        norm = np.linalg.norm(left, axis=0)
        norm = np.where(norm > 0, norm, 1.0)
        constants = np.linalg.lstsq(left / norm, values - smoothed[:, 0], rcond=None)
        constants = constants[0] / norm
        out[fixed] = constants[:, None]
        varying_part = coef[:, :, 0] - coef[:, :, 1:] @ constants
    else:
        varying_part = coef[:, :, 0]
    out[keep] = varying_part.T
    return out


def choose_varying(times, values, design, subject, grid, bandwidth, kernel, groups):
    """Which covariates' effects vary in time, by held-out subjects.

    Each candidate (a subset of the covariates whose coefficients vary,
    the others constant: :func:`varying_coefficients`) predicts the
    observations of subjects it was not fitted on from their covariates
    alone (their design held inside the support of the subjects it was
    fitted on), as in the leave-subjects-out cross-validation of Rice &
    Silverman (1991). Subjects are dealt into ``N_FOLDS`` folds in order
    (one fold from ``ONE_FOLD_SUBJECTS`` on). The candidate with the lowest
    held-out error is chosen (on a tie, the one with fewer varying
    columns): on a small study a time-varying effect is fitted to the few
    subjects seen late, and is kept only where the held-out subjects say
    it predicts better. A level of a categorical covariate held by fewer
    than ``MIN_HOLDERS`` subjects (or a reference level held by fewer) is
    never let vary: with three men among 40 patients, the men's effect
    late was one man's curve, and held-out subjects, as few, could not
    tell.

    Parameters
    ----------
    times, values, design, grid, bandwidth, kernel
        As for :func:`varying_coefficients`.
    subject : ndarray of int of shape (n_obs,)
        Each observation's subject (0 to n_subjects - 1).
    groups : list of ndarray of int
        The design columns of each covariate (a categorical covariate's
        levels vary or stay constant together).

    Returns
    -------
    ndarray of bool of shape (q,)
        Whether each column's coefficient varies in time.
    """
    q = design.shape[1]
    n = int(subject.max()) + 1 if subject.size else 0
    candidates = _candidates(_may_vary(groups, design, subject), q)
    if len(candidates) == 1:
        return candidates[0]
    folds = np.arange(n) % N_FOLDS
    errors = []
    for f in range(1 if n >= ONE_FOLD_SUBJECTS else N_FOLDS):
        held = folds[subject] == f
        if not held.any() or held.all():
            continue
        fit = ~held
        t, y, z, who = times[fit], values[fit], design[fit], subject[fit]
        moments = local_moments(t, y, z, grid, bandwidth, kernel)
        support = covariate_support(t, z, who, grid, SUPPORT_REACH * _first(bandwidth))
        x = np.concatenate([np.ones((held.sum(), 1)), design[held]], axis=1)
        fold = []
        for varying in candidates:
            beta = solve_coefficients(moments, t, y, z, grid, varying)
            held_support = hold_constant(support, z, who, varying)
            guess = effect_at(beta, held_support, grid, times[held], x)
            fold.append((values[held] - guess) ** 2)
        errors.append(np.stack(fold, axis=1))
    if not errors:  # too few subjects to hold any out: nothing says an effect varies
        return candidates[0]
    # the first of the lowest: fewest varying columns on a tie
    return candidates[int(np.argmin(np.concatenate(errors).mean(axis=0)))]


def _may_vary(groups, design, subject):
    """The covariates whose effect may vary in time: a categorical one only
    when each of its levels, the reference included, is held by at least
    ``MIN_HOLDERS`` subjects."""
    _, first = np.unique(subject, return_index=True)
    z = design[first]
    out = []
    for columns in groups:
        block = z[:, columns]
        if _indicators(block).all():
            holders = np.concatenate([block.sum(axis=0), [np.sum(block.sum(1) == 0)]])
            if holders.min() < MIN_HOLDERS:
                continue
        out.append(columns)
    return out


def _indicators(design):
    """Which columns of ``design`` hold only 0 and 1 (a level's indicator)."""
    return np.all((design == 0) | (design == 1), axis=0)


def _first(bandwidth):
    """The coefficients' bandwidth where it is narrowest (the mean's, before
    any widening)."""
    return float(np.min(bandwidth))


def _candidates(groups, q):
    """Subsets of covariates whose effects vary, as column masks: every
    subset when there are at most ``EVERY_SUBSET`` covariates, otherwise
    none, each alone and all; fewest varying columns first."""
    k = len(groups)
    if k <= EVERY_SUBSET:
        subsets = [[g for g in range(k) if (m >> g) & 1] for m in range(2**k)]
    else:
        subsets = [[], *([g] for g in range(k)), list(range(k))]
    masks = []
    for chosen in subsets:
        mask = np.zeros(q, dtype=bool)
        for g in chosen:
            mask[groups[g]] = True
        masks.append(mask)
    order = sorted(range(len(masks)), key=lambda i: int(masks[i].sum()))
    return [masks[i] for i in order]


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
    indicator = _indicators(design)
    columns = np.arange(design.shape[1])
    out = np.empty((2, design.shape[1], grid.size))
    for g, (a, b) in enumerate(zip(start, stop)):  # over grid points
        _, first = np.unique(who[a:b], return_index=True)
        values = np.sort(z[a:b][first], axis=0)
        m = np.where(indicator, min(SUPPORT_SUBJECTS, (values.shape[0] + 1) // 2), 1)
        out[0, :, g] = values[m - 1, columns]
        out[1, :, g] = values[-m, columns]
    return out


def hold_constant(support, design, subject, varying):
    """The support with each constant coefficient's column held over all times.

    A constant coefficient is learnt from every time at once, so a
    subject's design is held inside the range of all subjects (for an
    indicator column, where ``SUPPORT_SUBJECTS`` of them hold the level),
    the same at every time, rather than that of the subjects near each time.

    Parameters
    ----------
    support : ndarray of shape (2, q, G)
        :func:`covariate_support`.
    design : ndarray of shape (n_obs, q)
        Each observation's subject's design row.
    subject : ndarray of shape (n_obs,)
        Each observation's subject.
    varying : ndarray of bool of shape (q,)
        Which columns' coefficients vary in time.

    Returns
    -------
    ndarray of shape (2, q, G)
    """
    fixed = np.flatnonzero(~np.asarray(varying, dtype=bool))
    if not fixed.size:
        return support
    _, first = np.unique(subject, return_index=True)
    everyone = covariate_support(
        np.zeros(first.size), design[first][:, fixed], first, np.zeros(1), 1.0
    )
    out = support.copy()
    out[:, fixed, :] = everyone
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
