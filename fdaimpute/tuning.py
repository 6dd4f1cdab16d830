"""Choosing a regularizer's weight on a validation set."""

from __future__ import annotations

import copy
import time

import numpy as np
from sklearn.base import clone

from fdaimpute.metrics import held_out_error, mse

__all__ = ["select_regularizer_weight"]


def select_regularizer_weight(
    estimator,
    X_train,
    X_validation,
    weights,
    *,
    regularizer=0,
    truth=None,
    fraction=0.2,
    random_state=0,
):
    """Fit one copy of ``estimator`` per weight and keep the best on validation.

    This is how the SAND paper tuned its VTP baseline: a small log grid of
    penalty weights, judged on the validation subjects.

    Parameters
    ----------
    estimator : VTImputer or SANDImputer
        An unfitted estimator whose ``regularizers`` list holds the penalty.
    X_train : IrregularData or accepted input
        Training subjects.
    X_validation : IrregularData or accepted input
        Validation subjects.
    weights : array-like of float
        Candidate weights, e.g. ``np.logspace(0, 3, 4)``.
    regularizer : int, default=0
        Position of the penalty in ``estimator.regularizers``.
    truth : ndarray of shape (n_validation, n_grid), default=None
        True validation curves on the estimator's grid (simulations): the
        criterion is then their MSE. Otherwise it is the error on held-out
        observations of the validation subjects
        (:func:`fdaimpute.metrics.held_out_error`).
    fraction : float, default=0.2
        Share of each validation subject's points held out (without
        ``truth``).
    random_state : int, default=0
        Seed of the held-out points.

    Returns
    -------
    best : estimator
        The fitted copy with the lowest validation error.
    results : list of dict
        ``weight``, ``error`` and ``fit_seconds`` of every candidate.

    Examples
    --------
    >>> import fdaimpute as fi
    >>> from fdaimpute.regularizers import Roughness
    >>> sim = fi.simulate.sand_paper(n=120, n_obs="8-12", random_state=0)
    >>> vtp = fi.VTImputer(base=None, regularizers=[Roughness()], max_epochs=2,
    ...                    random_state=0)
    >>> best, results = fi.tuning.select_regularizer_weight(
    ...     vtp, sim.train.data, sim.validation.data, [1.0, 100.0])
    >>> len(results)
    2
    """
    regs = list(getattr(estimator, "regularizers", None) or [])
    if not regs:
        raise ValueError("estimator.regularizers is empty: nothing to tune")
    if not -len(regs) <= regularizer < len(regs):
        raise ValueError(
            f"regularizer index {regularizer} out of range for {len(regs)} penalties"
        )
    weights = np.asarray(weights, dtype=float).ravel()
    if weights.size == 0 or not np.all(np.isfinite(weights)):
        raise ValueError("weights must be a non-empty array of finite numbers")
    best, best_error, results = None, np.inf, []
    for weight in weights:
        candidate = clone(estimator)
        penalties = copy.deepcopy(regs)
        penalties[regularizer].set_params(weight=float(weight))
        candidate.set_params(regularizers=penalties)
        start = time.perf_counter()
        candidate.fit(X_train)
        seconds = time.perf_counter() - start
        if truth is not None:
            error = mse(truth, candidate.transform(X_validation))
        else:
            error = held_out_error(
                candidate, X_validation, fraction, random_state=random_state
            )
        results.append(
            {"weight": float(weight), "error": error, "fit_seconds": seconds}
        )
        if error < best_error:
            best, best_error = candidate, error
    return best, results
