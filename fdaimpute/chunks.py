"""Long CSV and Parquet files read in chunks of whole subjects.

:class:`CSVChunks` (and :class:`ParquetChunks`, its Parquet counterpart)
reads a long table (one row per observation) a block of rows at a time and
yields :class:`~fdaimpute.data.IrregularData` chunks in
which no subject is split: the rows of the last subject of a block are held
back and joined to the next block. It can be read again and again, which is
what :meth:`fdaimpute.PACEImputer.fit_chunks` needs, and each chunk can
also be passed to ``transform`` to impute a large file piece by piece.
"""

from __future__ import annotations

import numpy as np

from fdaimpute._core.frames import require_pandas
from fdaimpute._io.csv_options import long_csv_chunks
from fdaimpute._io.parquet import long_batches
from fdaimpute.data import IrregularData

__all__ = ["CSVChunks", "ParquetChunks"]


class CSVChunks:
    """A long CSV file as chunks of whole subjects, sorted by subject id.

    The rows must be sorted by subject id, so that each subject's rows are
    contiguous: increasing as text (as ``sort -t, -k1,1`` sorts them) or,
    where the ids are numbers, as numbers (as ``DataFrame.sort_values``
    sorts a numeric column); within a subject any order. A file that breaks
    this raises a :class:`ValueError` naming the subject. Ids are read as
    the text in the file: ``007`` and ``7`` are two subjects, ``NA`` is a
    subject. The rows are checked as :meth:`IrregularData.read_csv
    <fdaimpute.IrregularData.read_csv>` checks them (no field beyond the
    header, an id on every row).

    Parameters
    ----------
    path : str or path-like
        The file.
    id, time, value : str, default="id", "time", "value"
        Column names.
    chunksize : int, default=1_000_000
        Rows read at a time (a chunk holds about that many, plus the rows of
        the subject that straddles the block's end).
    **kwargs
        Passed to :func:`pandas.read_csv` (not ``chunksize`` or ``usecols``).

    Examples
    --------
    >>> import os, tempfile
    >>> import pandas as pd
    >>> from fdaimpute.chunks import CSVChunks
    >>> path = os.path.join(tempfile.mkdtemp(), "obs.csv")
    >>> pd.DataFrame({"id": [1, 1, 1, 2, 2, 3], "time": [0, 1, 2, 0, 2, 1],
    ...               "value": [0.5, 1.0, 0.7, 0.2, 0.3, 0.9]}).to_csv(path)
    >>> [chunk.ids.tolist() for chunk in CSVChunks(path, chunksize=2)]
    [['1'], ['2'], ['3']]
    """

    def __init__(
        self, path, id="id", time="time", value="value", chunksize=1_000_000, **kwargs
    ):
        _check_chunksize(chunksize)
        for name in ("chunksize", "usecols", "iterator"):
            if name in kwargs:
                raise TypeError(f"CSVChunks sets {name} itself; do not pass it")
        self.path = path
        self.columns = (id, time, value)
        self.chunksize = int(chunksize)
        self.kwargs = kwargs

    def __iter__(self):
        """Yield IrregularData chunks of whole subjects, in file order."""
        pd = require_pandas("CSVChunks")
        blocks = long_csv_chunks(
            pd, self.path, self.columns[0], self.chunksize, self.kwargs, self.columns
        )
        yield from _whole_subjects(blocks, self.columns, pd)


class ParquetChunks:
    """A long Parquet file as chunks of whole subjects, sorted by subject id.

    The Parquet counterpart of :class:`CSVChunks`, with the same rules: rows
    sorted by subject id (as text or as numbers), ids read as text, no
    subject split between chunks. The file is read a batch of rows at a
    time (needs ``pyarrow``).

    Parameters
    ----------
    path : str or path-like
        The file.
    id, time, value : str, default="id", "time", "value"
        Column names.
    chunksize : int, default=1_000_000
        Rows read at a time (a chunk holds about that many, plus the rows of
        the subject that straddles the batch's end).

    Examples
    --------
    >>> import os, tempfile
    >>> import pandas as pd
    >>> from fdaimpute.chunks import ParquetChunks
    >>> path = os.path.join(tempfile.mkdtemp(), "obs.parquet")
    >>> pd.DataFrame({"id": [1, 1, 1, 2, 2, 3], "time": [0, 1, 2, 0, 2, 1],
    ...               "value": [0.5, 1.0, 0.7, 0.2, 0.3, 0.9]}).to_parquet(path)
    >>> [chunk.ids.tolist() for chunk in ParquetChunks(path, chunksize=2)]
    [['1'], ['2'], ['3']]
    """

    def __init__(self, path, id="id", time="time", value="value", chunksize=1_000_000):
        _check_chunksize(chunksize)
        self.path = path
        self.columns = (id, time, value)
        self.chunksize = int(chunksize)

    def __iter__(self):
        """Yield IrregularData chunks of whole subjects, in file order."""
        pd = require_pandas("ParquetChunks")
        blocks = long_batches(self.path, self.columns, self.chunksize)
        yield from _whole_subjects(blocks, self.columns, pd)


def _whole_subjects(blocks, columns, pd):
    """IrregularData chunks of whole subjects from long frames sorted by id.

    The rows of the last subject of a block are held back and joined to the
    next block; the order of the ids is checked (``_check_sorted``).
    """
    id_col = columns[0]
    held, order = None, None
    for block in blocks:
        if held is not None:
            block = pd.concat([held, block], ignore_index=True)
        if len(block) == 0:
            continue
        ids = block[id_col]
        order = _check_sorted(_run_heads(ids), order)
        tail = (ids == ids.iloc[-1]).to_numpy()
        held = block[tail]
        if not tail.all():
            yield IrregularData.from_long(block[~tail], *columns)
    if held is not None and len(held):
        yield IrregularData.from_long(held, *columns)


def _run_heads(ids):
    """The first id of each run of equal ids in ``ids`` (a Series).

    Ids sorted as text or as numbers are those whose runs' heads are: the
    checks of ``_check_sorted`` then look at one id per subject, not one
    per row (they converted every Arrow-held id to a Python object).
    """
    if len(ids) < 2:
        return ids
    ahead = ids.iloc[1:].reset_index(drop=True)
    behind = ids.iloc[:-1].reset_index(drop=True)
    same = (ahead == behind).to_numpy(dtype=bool, na_value=False)
    return ids[np.concatenate([[True], ~same])]


def _check_sorted(ids, order=None):
    """Raise unless ``ids`` (a Series) are sorted as text or as numbers.

    ``order`` is the order earlier blocks were found in (``"text"``,
    ``"number"`` or None while both fitted): every block must keep it, so
    that no subject comes back after another. Returns the order.
    """
    text_sorted = order != "number" and ids.is_monotonic_increasing
    numeric = ids if ids.dtype.kind in "iuf" else None
    if order != "text" and numeric is None:
        try:
            numeric = ids.astype(float)
        except (TypeError, ValueError):
            numeric = None
    number_sorted = numeric is not None and numeric.is_monotonic_increasing
    if text_sorted and number_sorted:
        return order
    if text_sorted:
        return "text"
    if number_sorted:
        return "number"
    values = ids.to_numpy()
    try:
        where = np.flatnonzero(values[1:] < values[:-1])[0] + 1
    except (TypeError, IndexError):  # labels of mixed types do not compare
        where = 0
    raise ValueError(
        f"the rows are not sorted by subject id (subject {values[where]!r} "
        f"comes after {values[max(where - 1, 0)]!r}); CSVChunks needs the rows "
        "sorted by id, as text or as numbers, so that each subject's rows are "
        "contiguous"
    )


def _check_chunksize(chunksize):
    """Refuse a ``chunksize`` that is not a positive integer."""
    if not (isinstance(chunksize, (int, np.integer)) and chunksize >= 1):
        raise ValueError(f"chunksize must be a positive integer, got {chunksize!r}")
