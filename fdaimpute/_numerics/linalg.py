"""Small numerical helpers shared by the statistical estimators."""

from __future__ import annotations

import threading
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


def pool_small_groups(chunks, size, small=64):
    """Groups of fewer than ``small`` subjects pooled, up to ``size`` a pool.

    Batched work on a group of a few subjects costs mostly the interpreter's
    overhead per operation; a pool of such groups is one batch whose
    observation indices are padded on the right with ``-1`` to its largest
    count (a caller treats those slots as absent).

    Parameters
    ----------
    chunks : iterable of (rows, obs)
        As yielded by :func:`group_by_count` or :func:`chunks_by_count`.
    size : int
        Most subjects in a pool.
    small : int, default=64
        Groups of at least this many subjects are passed on unchanged.

    Yields
    ------
    rows : ndarray of shape (g,)
    obs : ndarray of shape (g, m)
        Padded with ``-1`` in pooled groups.
    """
    pool = []

    def flush():
        width = max(obs.shape[1] for _, obs in pool)
        rows = np.concatenate([r for r, _ in pool])
        padded = np.full((rows.size, width), -1, dtype=np.int64)
        start = 0
        for _, obs in pool:
            padded[start : start + obs.shape[0], : obs.shape[1]] = obs
            start += obs.shape[0]
        pool.clear()
        return rows, padded

    pooled = 0
    for rows, obs in chunks:
        if rows.size >= small:
            yield rows, obs
            continue
        if pool and pooled + rows.size > size:
            yield flush()
            pooled = 0
        pool.append((rows, obs))
        pooled += rows.size
    if pool:
        yield flush()


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


#: Subjects per task when batched solves are shared among threads.
CHUNK_SUBJECTS = 512


def n_workers():
    """Threads for batched solves: the cores this process may use."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def chunks_by_count(offsets, size=CHUNK_SUBJECTS):
    """:func:`group_by_count`, each group cut into pieces of ``size`` subjects."""
    for rows, obs in group_by_count(offsets):
        for start in range(0, rows.size, size):
            yield rows[start : start + size], obs[start : start + size]


_WORKER = threading.local()


#: Fewer observations than this in a batch of solves: threads cost more
#: (about a millisecond to start a pool) than they save
#: (``benchmarks/bench_pace.py --scores-threads``).
PARALLEL_MIN_OBSERVATIONS = 16384


def run_tasks(function, tasks, *, parallel=True):
    """``function(*task)`` for every task, on the available cores.

    NumPy's batched linear algebra releases the interpreter lock, so tasks
    run in parallel on threads (each with one BLAS thread, see
    :func:`one_blas_thread`). The results come back in the tasks' order.
    Called from inside a task, or with ``parallel=False`` (work too small
    to share), it runs the tasks in the calling thread.
    """
    tasks = list(tasks)
    workers = min(n_workers(), len(tasks)) if parallel else 1
    if workers <= 1 or getattr(_WORKER, "busy", False):
        return [function(*task) for task in tasks]
    from concurrent.futures import ThreadPoolExecutor

    def work(task):
        _WORKER.busy = True
        try:
            return function(*task)
        finally:
            _WORKER.busy = False

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(work, tasks))
