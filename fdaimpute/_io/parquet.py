"""Parquet files: long tables in, imputed curves out (needs ``pyarrow``).

Ids are read as text, as :meth:`IrregularData.read_csv
<fdaimpute.IrregularData.read_csv>` reads them, so that the same table gives
the same subjects from either format. Curves are written a block of subjects
at a time, one row group per block, into a temporary file that replaces the
target only once complete.
"""

from __future__ import annotations

import os

import numpy as np

from fdaimpute._core.ids import grouped_runs, hashed_codes

__all__ = [
    "is_parquet",
    "long_batches",
    "read_columns",
    "read_long",
    "read_storage",
    "require_pyarrow",
    "write_curve_blocks",
]

SUFFIXES = (".parquet", ".pq", ".parq")


def is_parquet(path):
    """Whether ``path`` names a Parquet file (by its suffix) or a folder of them."""
    path = os.fspath(path)
    if path.lower().endswith(SUFFIXES):
        return True
    return os.path.isdir(path) and any(
        name.lower().endswith(SUFFIXES) for name in os.listdir(path)
    )


def require_pyarrow(what):
    """Import ``pyarrow.parquet``, or raise an ImportError saying who needs it."""
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - exercised only without pyarrow
        raise ImportError(
            f"{what} needs pyarrow: pip install 'fdaimpute[parquet]'"
        ) from None
    return pq


def _check_columns(path, found, wanted):
    for role, name in zip(("id", "time", "value"), wanted):
        if name not in found:
            raise ValueError(
                f"column {name!r} (the {role} column) is not in {path}; "
                f"columns are {list(found)}"
            )


def _text_ids(ids):
    """A pyarrow id column as text (numbers written as they read)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type):
        return ids
    if pa.types.is_dictionary(ids.type):
        ids = ids.cast(ids.type.value_type)
    return pc.cast(ids, pa.string())


def _as_frame(table, id_column):
    """A pyarrow table as pandas, the id column as text."""
    where = table.schema.get_field_index(id_column)
    table = table.set_column(where, id_column, _text_ids(table.column(id_column)))
    return table.to_pandas()


def _read_table(path, columns):
    pq = require_pyarrow("reading Parquet")
    if os.path.isdir(path):
        table = pq.read_table(path)
        _check_columns(path, table.column_names, columns)
        return table.select(list(columns))
    _check_columns(path, pq.read_schema(path).names, columns)
    return pq.read_table(path, columns=list(columns))


def _is_plain_number(column):
    import pyarrow as pa

    kind = column.type
    number = pa.types.is_integer(kind) or pa.types.is_floating(kind)
    return number and not column.null_count


def read_long(path, columns):
    """The long table of a Parquet file (or folder) as pandas, ids as text.

    Parameters
    ----------
    path : str or path-like
        The file, or a folder of files read as one table.
    columns : tuple of str
        The id, time and value column names.
    """
    return _as_frame(_read_table(path, columns), columns[0])


def read_storage(path, columns):
    """IrregularData's storage of a long Parquet table, or its pandas frame.

    Where the ids have no gaps and the times and values are plain numbers
    (the usual case) the subjects are found without a Python object per
    row, in order of first appearance: as the runs of equal ids where each
    subject's rows are together, otherwise by Arrow's hash of the ids;
    returns ``(times, values, offsets, ids)``. Otherwise returns the table as
    pandas, for :meth:`IrregularData.from_long
    <fdaimpute.IrregularData.from_long>` to check and report.
    """
    table = _read_table(path, columns)
    ids, times, values = (table.column(name) for name in columns)
    plain = table.num_rows > 0 and not ids.null_count
    if not (plain and _is_plain_number(times) and _is_plain_number(values)):
        return _as_frame(table, columns[0])
    t, y = _floats(times), _floats(values)
    ids = _text_ids(ids)
    runs = grouped_runs(ids)
    if runs is not None:  # each subject's rows together: no reordering
        starts, labels = runs
        return t, y, np.append(starts, table.num_rows), labels
    subject, labels = hashed_codes(ids.combine_chunks())
    order = np.argsort(subject, kind="stable")
    counts = np.bincount(subject, minlength=labels.size)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return t[order], y[order], offsets, labels


def _floats(column):
    """A pyarrow number column as a float64 array of its own.

    One chunk converts without a copy to a read-only view of Arrow's
    buffer; several are joined into a new array, which is not copied again.
    """
    out = column.to_numpy()
    return out.astype(np.float64, copy=not out.flags.writeable)


def long_batches(path, columns, batch_size):
    """The rows of one Parquet file as pandas frames of ``batch_size`` rows.

    Without ``pre_buffer=False`` pyarrow keeps every row group it has read
    until the file is closed: reading 10^8 rows in batches held 1.8 GiB.
    """
    pq = require_pyarrow("ParquetChunks")
    with pq.ParquetFile(path, pre_buffer=False) as handle:
        _check_columns(path, handle.schema_arrow.names, columns)
        import pyarrow as pa

        for batch in handle.iter_batches(batch_size=batch_size, columns=list(columns)):
            yield _as_frame(pa.Table.from_batches([batch]), columns[0])


def curve_table(ids, grid, curves, std, layout, names, variables=None):
    """One block of curves as a pyarrow table (wide or long, as the CSV)."""
    import pyarrow as pa

    from fdaimpute._core.columns import curve_columns

    ids = np.asarray(ids).astype(str)
    return pa.table(curve_columns(ids, grid, curves, std, layout, names, variables))


def read_columns(path, columns):
    """Those of ``columns`` that a Parquet file (or folder) has, as pandas.

    The first of ``columns`` is the id, read as text. A column the file
    lacks is left out, for the reader to name (with the columns it has).
    """
    pq = require_pyarrow("reading Parquet")
    if os.path.isdir(path):
        found = pq.ParquetDataset(path).schema.names
    else:
        found = pq.read_schema(path).names
    present = [c for c in dict.fromkeys(columns) if c in found]
    table = pq.read_table(path, columns=present)
    if columns[0] in present:
        return _as_frame(table, columns[0])
    return table.to_pandas()


def write_curve_blocks(path, tables, overwrite):
    """Write pyarrow tables (same schema) as one Parquet file, atomically."""
    pq = require_pyarrow("writing Parquet")
    from fdaimpute._io.files import atomic_path

    with atomic_path(path, overwrite) as tmp:
        writer = None
        try:
            for table in tables:
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table)
        finally:
            if writer is not None:
                writer.close()
