"""Subject ids: validation, missing labels, numbering, names in messages."""

from __future__ import annotations

import numpy as np


def subject_label(ids, i):
    """Human-readable name of subject ``i`` for error messages."""
    if ids is None:
        return f"subject at position {i}"
    label = ids[i]
    label = label.item() if hasattr(label, "item") else label
    return f"subject {label!r} (position {i})"


def id_hashes(ids):
    """A 64-bit hash of each id's text (uint64): equal ids hash alike.

    Ids are hashed as text so that the same id hashes alike whatever array
    holds it (an int in an int array or among strings); ids whose texts
    agree (``1`` and ``"1"``) then share a hash, which a caller resolves
    by comparing the ids themselves.
    """
    import pandas as pd

    text = pd.Index(np.asarray(ids).astype(str), dtype=object)
    return pd.util.hash_pandas_object(text, index=False).to_numpy()


def _is_missing(v):
    """Whether one label is missing: None, NaN, NaT or pandas.NA."""
    if v is None:
        return True
    try:
        return bool(v != v)  # NaN, NaT
    except (TypeError, ValueError):  # pandas.NA has no truth value
        return True


def missing_mask(ids):
    """Which entries of a 1-D id array are missing (NaN, NaT, None, pandas.NA)."""
    if ids.dtype.kind in "fc":
        return np.isnan(ids)
    if ids.dtype.kind in "mM":
        return np.isnat(ids)
    if ids.dtype == object:
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - exercised only without pandas
            return np.fromiter((_is_missing(v) for v in ids), bool, count=ids.size)
        return pd.isna(ids)  # None, NaN, NaT and pandas.NA, without a Python loop
    return np.zeros(ids.shape, dtype=bool)


def as_id_array(ids):
    """Subject labels as a 1-D array that keeps each label as given.

    NumPy would turn ``[1, "a"]`` into strings and a list of tuples into a
    2-D array; labels of mixed types or tuples are kept in an object array.
    """
    if isinstance(ids, np.ndarray):
        return ids
    if hasattr(ids, "to_numpy"):  # pandas Index or Series
        return ids.to_numpy()
    values = list(ids)
    kinds = {type(v) for v in values}
    if len(kinds) == 1 and not kinds & {tuple, list}:
        return np.asarray(values)
    return np.fromiter(values, dtype=object, count=len(values))


def check_ids(ids, n):
    """Validate subject ids: one per subject, none missing, all distinct."""
    ids = as_id_array(ids)
    if ids.ndim != 1 or ids.shape[0] != n:
        raise ValueError(
            f"ids must have one entry per subject: expected {n}, got shape {ids.shape}"
        )
    missing = missing_mask(ids)
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise ValueError(
            f"subject at position {i} has a missing id ({ids[i]!r}); "
            "every subject needs a label"
        )
    if _known_distinct(ids):
        return ids
    try:
        uniq, counts = np.unique(ids, return_counts=True)
        repeated = uniq[counts > 1][:5].tolist()
    except TypeError:  # labels of mixed types do not sort
        seen, repeated = set(), []
        for v in ids.tolist():
            if v in seen and v not in repeated:
                repeated.append(v)
            seen.add(v)
    if repeated:
        raise ValueError(f"ids must be unique; repeated: {repeated[:5]}")
    return ids


def _known_distinct(ids):
    """Whether object labels are known to be distinct, by a hash of them.

    False means "not known": numbers, or labels pandas cannot hash, go to
    the sort that also names the repeated ones.
    """
    if ids.dtype != object:
        return False
    try:
        import pandas as pd

        return bool(pd.Index(ids, dtype=object).is_unique)
    except (ImportError, TypeError):
        return False


def codes_by_first_appearance(labels):
    """Number labels 0, 1, ... in order of first appearance.

    Returns the code of each entry and the distinct labels in that order.
    """
    if labels.dtype == object:
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - exercised only without pandas
            pass
        else:  # a hash in order of first appearance, not a sort of objects
            codes, distinct = pd.factorize(labels, sort=False)
            return codes.astype(np.int64), np.asarray(distinct, dtype=object)
    try:
        uniq, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    except TypeError:  # labels of mixed types do not sort
        codes, distinct = {}, []
        for v in labels.tolist():
            if v not in codes:
                codes[v] = len(distinct)
                distinct.append(v)
        subject = np.fromiter(
            (codes[v] for v in labels.tolist()), dtype=np.int64, count=labels.size
        )
        return subject, np.fromiter(distinct, dtype=object, count=len(distinct))
    order = np.argsort(first, kind="stable")
    rank = np.empty(uniq.size, dtype=np.int64)
    rank[order] = np.arange(uniq.size)
    return rank[inverse.ravel()], uniq[order]


def arrow_text(column):
    """A pandas column of ids as a pyarrow text array, if Arrow holds it so.

    Only for columns Arrow already holds as text without gaps (pandas'
    pyarrow-backed strings, as Parquet, Dask and pandas 3 give them), so
    that their subjects are found without a Python object per row; None
    otherwise.
    """
    array = getattr(column, "array", None)
    if not hasattr(array, "__arrow_array__"):
        return None
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - exercised only without pyarrow
        return None
    text = pa.array(array)
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    is_text = pa.types.is_string(text.type) or pa.types.is_large_string(text.type)
    return text if is_text and not text.null_count else None


def grouped_runs(ids):
    """Where each subject's run of rows starts, and its id, if runs are subjects.

    Long tables usually keep a subject's rows together (sorted by id, or
    written a subject at a time); then the runs of equal ids (a pyarrow
    array, no gaps) are the subjects, found by one comparison of
    neighbours instead of a hash of every row. Returns ``(starts,
    labels)``, or None where an id comes back after another (the rows are
    not grouped). Runs in increasing order (sorted by id) are distinct
    without a hash; the constructor checks the ids again anyway.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(ids)
    changed = np.zeros(0, dtype=bool)
    if n > 1:
        changed = pc.not_equal(ids.slice(1), ids.slice(0, n - 1))
        changed = changed.to_numpy(zero_copy_only=False)
    starts = np.concatenate([[0], np.flatnonzero(changed) + 1])
    firsts = pc.take(ids, pa.array(starts))
    k = len(firsts)
    increasing = k < 2 or pc.all(pc.greater(firsts[1:], firsts[: k - 1])).as_py()
    if not increasing and pc.count_distinct(firsts).as_py() < k:
        return None
    return starts, firsts.to_numpy(zero_copy_only=False).astype(object)


def arrow_codes(ids):
    """:func:`codes_by_first_appearance` of a pyarrow text array (no gaps).

    The runs of equal ids where each subject's rows are together, else
    Arrow's hash of the ids (:func:`hashed_codes`).
    """
    runs = grouped_runs(ids)
    if runs is None:
        return hashed_codes(ids)
    starts, labels = runs
    lengths = np.diff(np.append(starts, len(ids)))
    return np.repeat(np.arange(starts.size, dtype=np.int64), lengths), labels


def hashed_codes(ids):
    """:func:`arrow_codes` by Arrow's hash of the ids, whose dictionary keeps
    the order of first appearance (for rows not grouped by subject)."""
    encoded = ids.dictionary_encode()
    labels = encoded.dictionary.to_numpy(zero_copy_only=False).astype(object)
    return encoded.indices.to_numpy().astype(np.int64), labels


def subject_codes(column, name):
    """Each row's subject code (order of first appearance) and the ids.

    ``column`` is a pandas column of ids named ``name``; ids that Arrow
    holds as text are numbered without a Python object per row
    (:func:`arrow_codes`).

    Raises
    ------
    ValueError
        Naming the first row whose id is missing.
    """
    text = arrow_text(column)
    if text is not None:
        return arrow_codes(text)
    raw = np.asarray(column)
    missing = missing_mask(raw)
    if missing.any():
        j = int(np.flatnonzero(missing)[0])
        raise ValueError(
            f"column {name!r} has missing subject ids (first at row {j}: {raw[j]!r})"
        )
    return codes_by_first_appearance(raw)


def ids_as_text(dtype, id_column):
    """The ``dtype`` argument of ``pandas.read_csv`` that reads ids as text.

    Ids are labels: read as numbers, ``007`` and ``7`` would become one
    subject. A dtype the caller gives for the id column (or for every
    column) is kept.
    """
    if dtype is None:
        return {id_column: str}
    if isinstance(dtype, dict):
        return dtype if id_column in dtype else {**dtype, id_column: str}
    return dtype
