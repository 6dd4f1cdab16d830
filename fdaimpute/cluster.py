"""Fits and imputation as Dask jobs, on a long Dask DataFrame of observations.

A Dask DataFrame is cut into partitions, each a pandas DataFrame held by one
worker. Here every partition must hold whole subjects: the rows of a
subject that straddles two partitions (a cut through a sorted file) are
moved into the partition where the subject starts, and a frame whose
subjects are scattered over partitions is sorted by id first (a shuffle);
both say so in a warning. Subjects then come in the order they first
appear, as :meth:`IrregularData.from_long
<fdaimpute.IrregularData.from_long>` orders them (in id order after a
sort).

- :meth:`PACEImputer.fit_dask <fdaimpute.PACEImputer.fit_dask>` runs the
  passes of :meth:`~fdaimpute.PACEImputer.fit_chunks` (survey, mean sums,
  covariance sums) on every partition where it lies, with the very
  functions that handle a chunk, and adds the partitions' sums on the
  workers in a tree: only the sums travel, never the observations.
- :func:`transform` and :func:`predict_at` impute the subjects of each
  partition with a fitted imputer shipped once to every worker, and return
  a Dask DataFrame of curves.

Everything runs on the active ``dask.distributed`` client (a
``LocalCluster`` or a scheduler's address), or on Dask's default scheduler
without one. Needs ``dask[dataframe]`` (``pip install 'fdaimpute[dask]'``).
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from functools import partial, reduce

import numpy as np

from fdaimpute._core.columns import curve_columns
from fdaimpute._core.ids import subject_codes
from fdaimpute._pace import chunked as _chunked
from fdaimpute.data import IrregularData

__all__ = ["local_cluster", "predict_at", "transform", "whole_subject_frames"]

#: Partial sums added in one task of the reduction tree.
FAN_IN = 8

#: Partitions whose per-subject results (id hashes, observation counts) are
#: computed at once. Workers hold such results until the client takes the
#: whole batch, so the batch, not the frame, bounds what they hold (at 10^8
#: observations a worker's peak was 433 MiB with 64, 444-475 with 128:
#: ``benchmarks/results/dask/n1e8_gather_2026-11-28.txt``).
GATHER_BATCH = 64


#: glibc's allocator settings for the worker processes of :func:`local_cluster`.
#: Dask starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which also fixes
#: glibc's mmap threshold at 128 KiB: every NumPy array larger than that is
#: then mapped and page-faulted afresh, and PACE's passes ran 1.5x slower
#: (``benchmarks/bench_dask.py``). An mmap threshold of 32 MiB (glibc's own
#: ceiling) and a trim threshold of 64 MiB keep the freed memory for reuse.
WORKER_MALLOC = {
    "MALLOC_MMAP_THRESHOLD_": 32 * 2**20,
    "MALLOC_TRIM_THRESHOLD_": 64 * 2**20,
}


def require_dask(what):
    """Import ``dask`` and ``dask.dataframe``, or say who needs them."""
    try:
        import dask
        import dask.dataframe as dd
    except ImportError:  # pragma: no cover - exercised only without dask
        raise ImportError(f"{what} needs dask: pip install 'fdaimpute[dask]'") from None
    return dask, dd


def local_cluster(n_workers, threads_per_worker=1, **options):
    """A ``distributed.LocalCluster`` whose workers suit fdaimpute's passes.

    Its worker processes start with ``WORKER_MALLOC``'s allocator
    settings in place of Dask's ``MALLOC_TRIM_THRESHOLD_=65536`` (unless the
    environment sets them): with Dask's, every array over 128 KiB is mapped
    and page-faulted afresh each time, and :meth:`PACEImputer.fit_dask
    <fdaimpute.PACEImputer.fit_dask>` ran 1.5x slower on the same workers.
    A freed block's memory is then kept for reuse, up to 64 MiB per worker.

    Parameters
    ----------
    n_workers : int
        Worker processes.
    threads_per_worker : int, default=1
        Threads per worker (the passes are NumPy work that holds the GIL
        between BLAS calls: one thread per process, one process per core).
    **options
        Passed to ``distributed.LocalCluster`` (not ``processes=False``,
        whose workers share this process's allocator).

    Returns
    -------
    distributed.LocalCluster

    Examples
    --------
    >>> from distributed import Client
    >>> from fdaimpute.cluster import local_cluster
    >>> with local_cluster(2, dashboard_address=":0") as cluster, Client(cluster):
    ...     pass  # fit_dask, transform, predict_at run on it  # doctest: +SKIP
    """
    dask, _ = require_dask("local_cluster")
    from distributed import LocalCluster

    if options.get("processes", True) is False:
        raise ValueError(
            "local_cluster starts worker processes; for threads in this process "
            "use distributed.LocalCluster(processes=False)"
        )
    key = "distributed.nanny.pre-spawn-environ"
    environ = {**dask.config.get(key, {}), **WORKER_MALLOC}
    with dask.config.set({key: environ}):
        return LocalCluster(
            n_workers=n_workers, threads_per_worker=threads_per_worker, **options
        )


# ---------------------------------------------------------------------- #
# whole subjects in each partition
def _scan_ids(frame, id_column):
    """What the plan needs of a partition's subjects (None for no rows).

    ``(summary, last_at)``. The summary, ``(hashes, first, head_whole,
    last)``: a 64-bit hash of each subject id in order of appearance, the
    first and last rows' subjects, and whether the first subject's rows all
    lead the partition; ``last_at``: the position of the last row's subject
    among the partition's subjects. Hashes, not the ids, travel to the
    client: at 10^7 subjects the ids as Python objects added about 0.55 GiB
    to its peak (``benchmarks/bench_dask.py`` at 10^8 observations).
    """
    ids = frame[id_column]
    if len(ids) == 0:
        return None
    _check_ids(frame, id_column)
    codes, labels = subject_codes(ids, id_column)
    later = np.flatnonzero(codes != 0)
    head_whole = later.size == 0 or not np.any(codes[later[0] :] == 0)
    last_at = int(codes[-1])
    return (_id_hashes(labels), labels[0], head_whole, labels[last_at]), last_at


def _check_ids(frame, id_column):
    """Raise if a subject id of the partition ``frame`` is missing."""
    missing = frame[id_column].isna().to_numpy()
    if missing.any():
        raise ValueError(
            f"column {id_column!r} has missing subject ids (at row "
            f"{frame.index[int(np.argmax(missing))]!r} of a partition)"
        )


def _id_hashes(ids):
    """A 64-bit hash of each subject id (an array of uint64)."""
    import pandas as pd

    return pd.util.hash_pandas_object(pd.Index(ids), index=False).to_numpy()


def _plan(summaries, check_duplicates=True):
    """How to move rows so that each partition holds whole subjects.

    Returns ``(drop, take, last)``: partition ``k`` loses its leading rows
    of subject ``drop[k]`` and gains the leading rows of subject ``last[k]``
    of the partitions in ``take[k]``. None when a move cannot do it (a
    subject's rows are spread beyond neighbouring partitions' edges). A
    subject is recognised in other partitions by its id's hash: two ids
    sharing one (odds about n^2 / 2^65 for n subjects) look like a spread
    subject and lead to the sort, which is safe; ``check_duplicates=False``
    trusts the layout (after that sort).
    """
    n = len(summaries)
    drop, take, last = [None] * n, [[] for _ in range(n)], [None] * n
    own, owner, carried = [], None, None
    for k, found in enumerate(summaries):
        if found is None:
            continue
        hashes, first, head_whole, last[k] = found
        start = 0
        if owner is not None and first == carried:
            if not head_whole:
                return None
            drop[k], start = carried, 1
            take[owner].append(k)
        own.append(hashes[start:])
        if hashes.size > start:
            owner, carried = k, last[k]
    import pandas as pd

    if check_duplicates and own and pd.Index(np.concatenate(own)).has_duplicates:
        return None
    return drop, take, last


def _leading(frame, id_column, label):
    """Number of leading rows of subject ``label``."""
    same = (frame[id_column] == label).to_numpy()
    return same.size if same.all() else int(np.argmin(same))


def _regroup(frame, id_column, drop, carried, *followers):
    """A partition without its leading rows of ``drop``, with the leading
    rows of ``carried`` of the ``followers``."""
    import pandas as pd

    if drop is not None:
        frame = frame.iloc[_leading(frame, id_column, drop) :]
    heads = [f.iloc[: _leading(f, id_column, carried)] for f in followers]
    return pd.concat([frame, *heads]) if heads else frame


def _check_columns(df, columns):
    for role, name in zip(("id", "time", "value"), columns):
        if name not in df.columns:
            raise ValueError(
                f"column {name!r} (the {role} column) is not in the frame; "
                f"columns are {list(df.columns)}"
            )


def _gathered(dask, tasks):
    """The results of ``tasks``, computed ``GATHER_BATCH`` at a time."""
    out = []
    for start in range(0, len(tasks), GATHER_BATCH):
        out.extend(dask.compute(*tasks[start : start + GATHER_BATCH]))
    return out


def _scanned(dask, df, id, scan, ids_only, stacklevel):
    """``scan`` of every partition, sorting by ``id`` first if need be.

    ``scan(partition)`` gives None for no rows, else a tuple whose first
    item is the partition's summary (see :func:`_scan_ids`); ``ids_only``
    gives it the id column alone. When the summaries show subjects
    scattered over partitions, the frame is sorted by ``id`` (a shuffle,
    with a warning) and scanned again.

    Returns
    -------
    parts : list of dask.delayed.Delayed
        The partitions (of the sorted frame after a sort).
    scans : list
        ``scan`` of each partition.
    plan : tuple
        :func:`_plan` of the summaries.
    """

    def scan_all(frame):
        parts = frame.to_delayed()
        source = frame[[id]].to_delayed() if ids_only else parts
        return parts, _gathered(dask, [dask.delayed(scan)(p) for p in source])

    def summaries(scans):
        return [None if found is None else found[0] for found in scans]

    parts, scans = scan_all(df)
    plan = _plan(summaries(scans))
    if plan is None:
        warnings.warn(
            f"the rows of some subjects lie in several partitions; sorting the "
            f"frame by {id!r} (a shuffle) so that each partition holds whole "
            "subjects, which then come in id order",
            UserWarning,
            stacklevel=stacklevel,
        )
        parts, scans = scan_all(df.sort_values(id))
        plan = _plan(summaries(scans), check_duplicates=False)
        if plan is None:  # pragma: no cover - a sort puts each id in one place
            raise RuntimeError(f"sorting by {id!r} left subjects split")
    return parts, scans, plan


def _moved(plan):
    """Whether ``plan`` moves any rows."""
    return any(plan[1])


def _regrouped(dask, parts, plan, id, stacklevel):
    """The partitions with the moves of ``plan`` made (delayed), warning of them."""
    drop, take, last = plan
    if not _moved(plan):
        return parts
    k = next(k for k, j in enumerate(take) if j)
    warnings.warn(
        f"{sum(len(j) for j in take)} partition edge(s) cut through a subject "
        f"(the first: subject {last[k]}, partitions {k} and {take[k][0]}); "
        "moving each such subject's rows into the partition where it starts",
        UserWarning,
        stacklevel=stacklevel,
    )
    return [
        dask.delayed(_regroup)(p, id, drop[k], last[k], *[parts[j] for j in take[k]])
        for k, p in enumerate(parts)
    ]


def whole_subject_frames(df, id="id", stacklevel=2):
    """The partitions of ``df`` as pandas frames of whole subjects (delayed).

    A subject split between consecutive partitions is moved into the
    partition where it starts; a frame whose subjects are scattered is
    sorted by ``id`` first (a shuffle). Either way a :class:`UserWarning`
    says so.

    Parameters
    ----------
    df : dask.dataframe.DataFrame
        One row per observation.
    id : str, default="id"
        The subject column.
    stacklevel : int, default=2
        Of the warnings: 2 points at the caller.

    Returns
    -------
    list of dask.delayed.Delayed
        One pandas DataFrame per partition (some may be empty).
    """
    dask, _ = require_dask("whole_subject_frames")
    scan = partial(_scan_ids, id_column=id)
    parts, _, plan = _scanned(dask, df, id, scan, True, stacklevel + 1)
    return _regrouped(dask, parts, plan, id, stacklevel + 1)


def _irregular(frame, columns, duplicates):
    if len(frame) == 0:
        return None
    return IrregularData.from_long(frame, *columns, duplicates=duplicates)


# ---------------------------------------------------------------------- #
# the passes of the PACE fit
def _survey(data, max_distinct):
    if data is None:
        return None
    # the plan's hashes check that no subject is in two partitions
    return _chunked.survey_chunk(data, max_distinct, with_ids=False)


def _scan(frame, columns, duplicates, max_distinct):
    """The first pass on one partition as it lies (None for no rows).

    ``(summary, survey, last_at)``: the summary of its ids and ``last_at``
    (see :func:`_scan_ids`), and the survey of its subjects.
    """
    found = _scan_ids(frame, columns[0])
    if found is None:
        return None
    summary, last_at = found
    return (
        summary,
        _survey(_irregular(frame, columns, duplicates), max_distinct),
        last_at,
    )


def _surveys_after_moves(scans, plan):
    """Each partition's survey once ``plan`` has moved its rows.

    A subject moved to the partition where it starts loses its leading
    count in the partitions it leaves and adds it to the count there (at
    the position of the subject of that partition's last row). The ranges
    and distinct times stay with the partitions read: their union is the
    same. A partition left without subjects keeps a survey of none.
    """
    drop, take, _ = plan
    surveys = []
    for k, found in enumerate(scans):
        if found is None:
            surveys.append(None)
            continue
        _, part, last_at = found
        counts = part.counts[1:] if drop[k] is not None else part.counts.copy()
        if take[k]:
            at = last_at - (drop[k] is not None)
            counts[at] += sum(scans[j][1].counts[0] for j in take[k])
        surveys.append(replace(part, counts=counts))
    return surveys


def _on_frame(frame, columns, duplicates, work, *args, **kwargs):
    """``work`` on the subjects of one partition (a pandas frame)."""
    return work(_irregular(frame, columns, duplicates), *args, **kwargs)


def _in_order(add, *parts):
    return reduce(add, parts)


def _tree(dask, tasks, add):
    """The sum of ``tasks`` by ``add`` in a tree of tasks, in order."""
    while len(tasks) > 1:
        tasks = [
            dask.delayed(_in_order)(add, *tasks[i : i + FAN_IN])
            for i in range(0, len(tasks), FAN_IN)
        ]
    return tasks[0]


def partition_passes(df, columns, duplicates="raise", persist=False):
    """The survey and the runner of :func:`fdaimpute._pace.chunked.fit_passes`
    over the partitions of ``df`` (see :meth:`PACEImputer.fit_dask
    <fdaimpute.PACEImputer.fit_dask>`).

    The survey reads each partition as it lies once, for both the plan of
    :func:`whole_subject_frames` and the survey of its subjects; the
    surveys of partitions that gain or lose a subject's rows are then
    corrected on the client. With ``duplicates="average"``, where a move
    may join a subject's duplicated times, the partitions are surveyed
    afresh after the moves instead.
    """
    dask, _ = require_dask("PACEImputer.fit_dask")
    _check_columns(df, columns)
    places, frames = [], []

    def apply(work, k, *args, **kwargs):
        if persist:
            return dask.delayed(work)(frames[k], *args, **kwargs)
        # one task reads, makes the subjects and works: no task per step
        return dask.delayed(_on_frame)(
            frames[k], columns, duplicates, work, *args, **kwargs
        )

    def survey(max_distinct):
        scan = partial(
            _scan, columns=columns, duplicates=duplicates, max_distinct=max_distinct
        )
        # warnings point at the caller of fit_dask
        parts, scans, plan = _scanned(dask, df, columns[0], scan, False, 5)
        frames[:] = _regrouped(dask, parts, plan, columns[0], 5)
        if persist:
            made = [dask.delayed(_irregular)(f, columns, duplicates) for f in frames]
            frames[:] = dask.persist(*made)
        if duplicates == "average" and _moved(plan):
            found = _gathered(
                dask, [apply(_survey, k, max_distinct) for k in range(len(frames))]
            )
        else:
            found = _surveys_after_moves(scans, plan)
        first_subject, first_obs = 0, 0
        places.clear()
        for k, part in enumerate(found):
            if part is None or part.n_subjects == 0:
                continue
            n_obs = int(part.counts.sum())
            place = _chunked.Place(first_subject, first_obs, part.n_subjects, n_obs)
            places.append((k, place))
            first_subject, first_obs = (
                first_subject + part.n_subjects,
                first_obs + n_obs,
            )
        return _chunked.finish_survey(_chunked.combine_surveys(found, max_distinct))

    def run(work, local, add, **shared):
        shared = {name: dask.delayed(value) for name, value in shared.items()}
        tasks = [apply(work, k, **shared, **local(place)) for k, place in places]
        return dask.compute(_tree(dask, tasks, add))[0]

    return survey, run


# ---------------------------------------------------------------------- #
# imputation
def _ship(dask, est):
    """``est`` once on every worker of the active client (else in the graph)."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return dask.delayed(est)
    return client.scatter(est, broadcast=True, hash=False)


def _frame(columns, id_dtype):
    import pandas as pd

    frame = pd.DataFrame(columns)
    first = next(iter(columns))
    frame[first] = frame[first].astype(id_dtype)
    return frame


def _curves(frame, est, columns, duplicates, grid, return_std, layout, meta):
    data = _irregular(frame, columns, duplicates)
    if data is None:
        return meta
    out = est.transform(data, grid=grid, return_std=return_std)
    curves, std = out if return_std else (out, None)
    table = curve_columns(data.ids, grid, curves, std, layout, columns)
    return _frame(table, meta.dtypes.iloc[0])


def _values_at(frame, est, columns, duplicates, times, meta):
    data = _irregular(frame, columns, duplicates)
    if data is None:
        return meta
    if times is None:
        return _frame(est.predict_at(data).to_long(*columns), meta.dtypes.iloc[0])
    values = np.asarray(est.predict_at(data, times))
    table = curve_columns(data.ids, times, values, None, "wide", columns)
    return _frame(table, meta.dtypes.iloc[0])


def _job(df, columns, what):
    dask, dd = require_dask(what)
    _check_columns(df, columns)
    return dask, dd, whole_subject_frames(df, columns[0], stacklevel=4)


def transform(
    est,
    df,
    id="id",
    time="time",
    value="value",
    *,
    grid=None,
    return_std=False,
    layout="wide",
    duplicates="raise",
):
    """Impute the subjects of a Dask DataFrame with a fitted imputer, as a job.

    The imputer is shipped once to every worker; each partition's subjects
    are imputed where the partition lies (with ``est.transform``).

    Parameters
    ----------
    est : fitted imputer
        Any fitted fdaimpute imputer (PACE, FACE, Kernel, the networks on
        CPU).
    df : dask.dataframe.DataFrame
        One row per observation.
    id, time, value : str, default="id", "time", "value"
        Column names.
    grid : int or array-like, default=None
        Where to evaluate; defaults to ``est.grid_``.
    return_std : bool, default=False
        Also give the pointwise standard deviations (``"std(t=...)"``
        columns, or a ``"std"`` column in the long layout).
    layout : {"wide", "long"}, default="wide"
        One row per subject (the id, then ``"t=<time>"`` columns), or one
        row per subject and grid time (id, time, value), as the command
        line writes them.
    duplicates : {"raise", "average"}, default="raise"
        What to do with two observations of a subject at one time.

    Returns
    -------
    dask.dataframe.DataFrame
        The curves: one row (wide) or ``n_grid`` rows (long) per subject, in
        the order the subjects come (see the module's notes), ids kept.
    """
    if layout not in ("wide", "long"):
        raise ValueError(f"layout must be 'wide' or 'long', got {layout!r}")
    columns = (id, time, value)
    dask, dd, frames = _job(df, columns, "fdaimpute.cluster.transform")
    grid = est._query_grid(grid)
    empty = np.empty((0, grid.size))
    table = curve_columns(
        df._meta[id].to_numpy(),
        grid,
        empty,
        empty if return_std else None,
        layout,
        columns,
    )
    meta = _frame(table, df._meta[id].dtype)
    model = _ship(dask, est)
    parts = [
        dask.delayed(_curves)(
            f, model, columns, duplicates, grid, return_std, layout, meta
        )
        for f in frames
    ]
    return dd.from_delayed(parts, meta=meta, verify_meta=False)


def predict_at(
    est, df, id="id", time="time", value="value", *, times=None, duplicates="raise"
):
    """Evaluate the subjects' imputed curves at given times, as a Dask job.

    Parameters
    ----------
    est : fitted imputer
        Any fitted fdaimpute imputer.
    df : dask.dataframe.DataFrame
        One row per observation.
    id, time, value : str, default="id", "time", "value"
        Column names.
    times : None or array-like of shape (n_times,), default=None
        ``None``: each subject at its own observation times, as a long
        frame (id, time and the imputed value); else the same times for
        every subject, as a wide frame (the id, then ``"t=<time>"``).
    duplicates : {"raise", "average"}, default="raise"
        What to do with two observations of a subject at one time.

    Returns
    -------
    dask.dataframe.DataFrame
    """
    columns = (id, time, value)
    dask, dd, frames = _job(df, columns, "fdaimpute.cluster.predict_at")
    ids = df._meta[id].to_numpy()
    if times is None:
        table = {id: ids, time: np.empty(0), value: np.empty(0)}
    else:
        times = np.asarray(times, dtype=np.float64)
        if times.ndim != 1:
            raise ValueError("times must be None or one 1-D array for all subjects")
        empty = np.empty((0, times.size))
        table = curve_columns(ids, times, empty, None, "wide", columns)
    meta = _frame(table, df._meta[id].dtype)
    model = _ship(dask, est)
    parts = [
        dask.delayed(_values_at)(f, model, columns, duplicates, times, meta)
        for f in frames
    ]
    return dd.from_delayed(parts, meta=meta, verify_meta=False)
