"""Long tables (one row per observation) to and from IrregularData's storage."""

from __future__ import annotations

import numpy as np

from fdaimpute._core.coerce import check_not_datetime, first_non_numeric
from fdaimpute._core.ids import subject_codes, subject_label


def require_pandas(what):
    """Import pandas, or raise an ImportError saying that ``what`` needs it."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - exercised only without pandas
        raise ImportError(f"{what} needs pandas: pip install pandas") from None
    return pd


def flat_from_long(df, id="id", time="time", value="value"):
    """Storage from a long table; subjects in order of first appearance.

    Returns ``(times, values, offsets, ids)``; see
    :meth:`IrregularData.from_long <fdaimpute.IrregularData.from_long>`.
    """
    columns = list(df.keys())
    for role, name in (("id", id), ("time", time), ("value", value)):
        if name not in columns:
            raise ValueError(
                f"column {name!r} (the {role} column) is not in the table; "
                f"columns are {columns}"
            )
    check_not_datetime(df[time], f"the times (column {time!r})")
    t = np.asarray(df[time])
    y = np.asarray(df[value])
    subject, ids = subject_codes(df[id], id)
    for arr, col in ((t, time), (y, value)):
        if arr.dtype.kind not in "biuf":
            try:
                arr.astype(np.float64)
            except (TypeError, ValueError):
                bad = first_non_numeric(arr)
                i = int(subject[bad])
                raise TypeError(
                    f"{subject_label(ids, i)}: column {col!r} must be numeric, "
                    f"got {arr[bad]!r}"
                ) from None
    t = t.astype(np.float64)
    y = y.astype(np.float64)
    order = np.argsort(subject, kind="stable")
    counts = np.bincount(subject, minlength=ids.size)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return t[order], y[order], offsets, ids


def long_frame(data, id="id", time="time", value="value"):
    """A long ``pandas.DataFrame`` of ``data``: one row per observation."""
    pd = require_pandas("IrregularData.to_long")
    return pd.DataFrame(
        {
            id: np.repeat(data.ids, data.n_obs),
            time: data.times.copy(),
            value: data.values.copy(),
        }
    )
