"""Reading a long CSV with ``pandas.read_csv``: exactly, and with the checks
pandas does not make.

pandas makes the first column an index when the rows have one field more
than the header (every column then shifts by one), and with
``index_col=False`` or ``usecols`` it drops the fields beyond the header
with at most a warning. :func:`read_long_csv` and :func:`long_csv_chunks`
read no index and refuse such rows, naming the line; they read the id
column as the text in the file (``NA`` is a subject) and refuse an empty
id. Both read every column and keep those asked for after: ``usecols``
would turn pandas' count of the fields off. One trailing comma on every
row (an empty field beyond the header) is read as pandas reads it, as
nothing.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import warnings

from fdaimpute._core.ids import ids_as_text

__all__ = ["long_csv_chunks", "read_long_csv", "read_options"]

# pandas' warning (index_col=False) that fields beyond the header were dropped
_LOST_FIELDS = "Length of header or names does not match length of data"
# pandas' error for a row longer than the first
_TOO_MANY = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")
# Options by which a caller sets the missing-value markers itself
_NA_OPTIONS = ("na_values", "keep_default_na", "na_filter")
# Options under which the csv module would not see the rows pandas sees
_OTHER_LAYOUT = (
    "header",
    "names",
    "skiprows",
    "comment",
    "compression",
    "quotechar",
    "escapechar",
    "lineterminator",
    "skipinitialspace",
    "usecols",
)
_COMPRESSED = (".gz", ".bz2", ".zip", ".xz", ".zst", ".tar")


# The texts pandas.read_csv documents as missing by default
_DOCUMENTED_NA_MARKERS = (
    "",
    "#N/A",
    "#N/A N/A",
    "#NA",
    "-1.#IND",
    "-1.#QNAN",
    "-NaN",
    "-nan",
    "1.#IND",
    "1.#QNAN",
    "<NA>",
    "N/A",
    "NA",
    "NULL",
    "NaN",
    "None",
    "n/a",
    "nan",
    "null",
)


def read_options(kwargs, id_column, pd, header=None):
    """``kwargs`` for ``pd.read_csv``: ids as text, floats as written, no index.

    Before pandas 3.1 the C parser's default float conversion can differ
    from the written number in the last bit (seen on pandas 3.0.6: 29 of
    558 times written by ``to_csv`` read back one bit off);
    ``float_precision="round_trip"`` gives the exact value. pandas 3.1
    parses exactly by default and deprecates the option. A caller's own
    ``dtype``, ``float_precision`` or ``index_col`` is kept.

    Parameters
    ----------
    kwargs : dict
        The caller's options.
    id_column : str
        The subject column.
    pd : module
        pandas.
    header : list of str, default=None
        The file's columns. Given, and unless the caller sets the missing
        values (``na_values``, ``keep_default_na``, ``na_filter``), the id
        column reads only an empty field as missing (``NA``, ``None``,
        ``null`` are ids) and the other columns pandas' default markers
        (an empty field beyond the header too).

    Returns
    -------
    dict
    """
    options = dict(kwargs)
    options["dtype"] = ids_as_text(options.get("dtype"), id_column)
    options.setdefault("index_col", False)
    if _version(pd.__version__) < (3, 1):
        options.setdefault("float_precision", "round_trip")
    by_column = options.get("engine") != "pyarrow"  # which takes no dict
    if header is not None and by_column and not any(n in options for n in _NA_OPTIONS):
        markers = _default_na_markers()
        options["keep_default_na"] = False
        options["na_values"] = {c: markers for c in header if c != id_column}
        options["na_values"][id_column] = [""]
        # a trailing comma's empty field, keyed by position: pandas drops
        # a column of them only where they read as missing
        options["na_values"][len(header)] = [""]
    return options


def _default_na_markers():
    """The texts pandas reads as missing by default, sorted.

    pandas keeps them in a private module; where that moves, the list its
    documentation gives (pandas 2.x and 3.0) stands in.
    """
    try:
        from pandas._libs.parsers import STR_NA_VALUES
    except ImportError:
        return sorted(_DOCUMENTED_NA_MARKERS)
    return sorted(STR_NA_VALUES)


def read_long_csv(pd, path, id_column, kwargs=None, columns=None):
    """A long CSV file as a DataFrame, read under :func:`read_options`.

    Parameters
    ----------
    pd : module
        pandas.
    path : str, path-like or file-like
        The file.
    id_column : str
        The subject column.
    kwargs : dict, default=None
        Passed to ``pd.read_csv``.
    columns : list of str, default=None
        The columns to keep, in this order; all when None.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    ValueError
        If a row has more fields than the header, or no subject id (the
        message names its line), or the file lacks one of ``columns``.
    """
    options, header = _prepared(pd, path, id_column, kwargs)
    with _refusing_extra_fields(pd, path, options, header):
        frame = pd.read_csv(path, **options)
    return _checked(frame, path, options, header, id_column, columns)


def long_csv_chunks(pd, path, id_column, chunksize, kwargs=None, columns=None):
    """:func:`read_long_csv` a block of ``chunksize`` rows at a time.

    Yields
    ------
    pandas.DataFrame
        The rows of a block, with the checks of :func:`read_long_csv`.
    """
    options, header = _prepared(pd, path, id_column, kwargs)
    reader = pd.read_csv(path, chunksize=chunksize, **options)
    with reader:
        while True:
            with _refusing_extra_fields(pd, path, options, header):
                frame = next(reader, None)
            if frame is None:
                return
            yield _checked(frame, path, options, header, id_column, columns)


def _prepared(pd, path, id_column, kwargs):
    """The options of ``pd.read_csv`` and the file's header (None for a buffer)."""
    kwargs = dict(kwargs or {})
    header = None
    if isinstance(path, (str, os.PathLike)):
        head = {k: v for k, v in kwargs.items() if k not in ("chunksize", "iterator")}
        head.update(nrows=0, index_col=False)
        header = [str(c) for c in pd.read_csv(path, **head).columns]
    return read_options(kwargs, id_column, pd, header), header


@contextlib.contextmanager
def _refusing_extra_fields(pd, path, options, header):
    """Turn pandas' warning or error about fields beyond the header into a
    ValueError naming the first such line."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "error", message=_LOST_FIELDS, category=pd.errors.ParserWarning
        )
        try:
            yield
        except pd.errors.ParserWarning:
            raise ValueError(_extra_fields_message(path, options, header)) from None
        except pd.errors.ParserError as exc:
            found = _TOO_MANY.search(str(exc))
            if found is None:
                raise
            line, saw = int(found.group(2)), int(found.group(3))
            message = _extra_fields_message(path, options, header, line, saw)
            raise ValueError(message) from None


def _extra_fields_message(path, options, header, line=None, saw=None):
    """What a row with more fields than the header is, and where (``line``
    and its number of fields ``saw`` where pandas said)."""

    def extra(fields, number):
        if line is not None:
            return number == line
        return len(fields) > len(header) and any(
            f.strip() for f in fields[len(header) :]
        )

    found = None if header is None else _find_row(path, options, extra)
    columns = "its header"
    if header is not None:
        columns = f"the {len(header)} columns of its header ({', '.join(header)})"
    advice = "give every column a name in the header, or remove the extra fields"
    if found is not None:
        number, fields = found
        return (
            f"line {number} of {path} has {len(fields)} fields "
            f"({','.join(fields)!r}), more than {columns}; {advice}"
        )
    if line is None:
        return f"a row of {path} has more fields than {columns}; {advice}"
    return f"line {line} of {path} has {saw} fields, more than {columns}; {advice}"


def _checked(frame, path, options, header, id_column, columns):
    """``frame``'s ``columns``, after refusing a row without a subject id."""
    if id_column in frame.columns:
        missing = frame[id_column].isna().to_numpy()
        if missing.any():
            raise ValueError(
                _empty_id_message(frame, missing, path, options, header, id_column)
            )
    if columns is None:
        return frame
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise ValueError(
            f"column {absent[0]!r} is not in {path}; its columns are "
            f"{[str(c) for c in frame.columns]}"
        )
    return frame[list(columns)]


def _empty_id_message(frame, missing, path, options, header, id_column):
    """Where the first row without a subject id is, and what it holds."""
    found = None
    if header is not None and id_column in header:
        position = header.index(id_column)

        def empty(fields, number):
            return position >= len(fields) or not fields[position]

        found = _find_row(path, options, empty)
    if found is None:
        row = frame.iloc[int(missing.argmax())].to_dict()
        return f"a row of {path} has no subject id ({row}); every row needs one"
    number, fields = found
    return (
        f"line {number} of {path} has no subject id ({','.join(fields)!r}); "
        "every row needs one"
    )


def _find_row(path, options, test):
    """``(line number, fields)`` of the first data row of the CSV file at
    ``path`` for which ``test(fields, line number)`` is true.

    Read by the ``csv`` module, on the error path only. None where it would
    not read the rows pandas reads (a buffer, a compressed file, options
    that change where the rows are) or no row passes.
    """
    sep = options.get("sep", options.get("delimiter")) or ","
    if (
        not isinstance(path, (str, os.PathLike))
        or any(options.get(name) is not None for name in _OTHER_LAYOUT)
        or len(sep) != 1
        or os.fspath(path).lower().endswith(_COMPRESSED)
    ):
        return None
    encoding = options.get("encoding") or "utf-8"
    with open(path, newline="", encoding=encoding, errors="replace") as fh:
        rows = csv.reader(fh, delimiter=sep)
        header = next((fields for fields in rows if fields), None)
        if header is None:
            return None
        for fields in rows:
            if fields and test(fields, rows.line_num):
                return rows.line_num, fields
    return None


def _version(text):
    """``(major, minor)`` of a version string such as ``"3.0.6"`` or ``"3.1.0rc1"``.

    Not scikit-learn's ``parse_version``: ``import fdaimpute`` reaches this
    module and loads no scikit-learn (``tests/test_imports.py``).
    """
    major, minor = (text.split(".") + ["0"])[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)
