"""Held-out folds: which validation subjects hide which observations.

PACE's cross-validation, FACE's and mFPCA's band calibration and
AutoImputer's comparison of methods all score predictions of observations a
fit did not see; this module draws them.
"""

from __future__ import annotations

import numpy as np

HIDE_FRACTION = 0.2
# Fewer hidden points than this in one draw: every observation of the
# validation subjects is hidden once, over N_FOLDS folds.
TARGET_HIDDEN = 2000
N_FOLDS = 5
MAX_SUBJECTS = 3000


def hide_points(offsets, rng, max_subjects=MAX_SUBJECTS, fraction=HIDE_FRACTION):
    """Pick validation subjects and the observations each one hides.

    Returns
    -------
    val : ndarray of int
        Validation subjects (sorted), each with at least two observations.
    hidden : ndarray of int
        Positions of the hidden observations, increasing (at least one per
        validation subject, and each keeps at least one).
    """
    counts = np.diff(offsets)
    eligible = np.flatnonzero(counts >= 2)
    n_val = min(eligible.size, max_subjects)
    val = np.sort(rng.choice(eligible, n_val, replace=False))
    m = counts[val]
    n_hide = np.clip(np.rint(fraction * m).astype(np.int64), 1, m - 1)
    owner = np.repeat(np.arange(n_val), m)
    local = np.arange(owner.size) - np.repeat(np.cumsum(m) - m, m)
    order = np.lexsort((rng.random(owner.size), owner))
    rank = np.empty(owner.size, dtype=np.int64)
    rank[order] = local
    obs = np.repeat(offsets[val], m) + local
    return val, obs[rank < n_hide[owner]]


def heldout_folds(offsets, rng, max_subjects=MAX_SUBJECTS):
    """Validation subjects and the observations each fold hides.

    One draw of :func:`hide_points` when it hides at least
    ``TARGET_HIDDEN`` observations (large data: one fold is enough and
    cheapest). Otherwise - a few hundred subjects or fewer - the score of
    one random draw depends on which points it happened to hide (on 231
    girls with 2-5 visits each, the chosen bandwidths ranged over a factor
    of 20 with the seed and the held-out error by 20%), so every
    observation of the validation subjects is hidden exactly once over
    ``N_FOLDS`` folds laid out systematically: subject ``v``'s ``j``-th
    observation (in time order) goes to fold ``(j + v) mod N_FOLDS``. A fold
    then hides at most ``ceil(n_i / N_FOLDS)`` of a subject's points (every
    subject keeps one visible in every fold) and early, middle and late
    times alike; the layout depends on the data alone, not on ``rng``.

    Returns
    -------
    val : ndarray of int
        Validation subjects (sorted).
    folds : list of ndarray of int
        Positions of each fold's hidden observations, increasing.
    """
    val, hidden = hide_points(offsets, rng, max_subjects)
    if hidden.size >= TARGET_HIDDEN or val.size == 0:
        return val, [hidden]
    m = np.diff(offsets)[val]
    owner = np.repeat(np.arange(val.size), m)
    local = np.arange(owner.size) - np.repeat(np.cumsum(m) - m, m)
    fold = (local + owner) % N_FOLDS
    obs = np.repeat(offsets[val], m) + local
    folds = [obs[fold == f] for f in range(N_FOLDS)]
    return val, [f for f in folds if f.size]


def ragged_subset(mask, offsets, val):
    """Offsets and flat indices of the ``mask`` observations of subjects ``val``."""
    per = np.add.reduceat(mask.astype(np.int64), offsets[:-1])
    per = np.where(np.diff(offsets) > 0, per, 0)[val]
    starts = offsets[val]
    m = np.diff(offsets)[val]
    idx = np.repeat(starts, m) + (np.arange(m.sum()) - np.repeat(np.cumsum(m) - m, m))
    idx = idx[mask[idx]]
    return np.concatenate([[0], np.cumsum(per)]), idx
