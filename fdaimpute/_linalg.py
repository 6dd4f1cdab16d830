"""Small numerical helpers shared by the statistical estimators."""

from __future__ import annotations

from functools import cache

import numpy as np


def group_by_count(offsets):
    """Group subjects by their number of observations, for batched solves.

    Parameters
    ----------
    offsets : ndarray of shape (n_subjects + 1,)
        CSR offsets of an IrregularData.

    Yields
    ------
    rows : ndarray of shape (g,)
        Positions of the subjects with ``m`` observations.
    obs : ndarray of shape (g, m)
        Indices of their observations in the flat arrays.
    """
    counts = np.diff(offsets)
    for m in np.unique(counts):
        rows = np.flatnonzero(counts == m)
        yield rows, offsets[rows][:, None] + np.arange(m)


@cache
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_blas_thread():
    """A context in which BLAS runs on one thread.

    Many tiny solves (one per subject) run faster on one thread. The
    libraries are looked up once per process, not on every call (which
    costs milliseconds: it scans the loaded shared objects).
    """
    return _blas_controller().limit(limits=1, user_api="blas")
