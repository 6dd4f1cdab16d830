"""Doctest collection: skip the examples of optional integrations not installed."""

import importlib.util

import pytest

collect_ignore = []
if importlib.util.find_spec("skfda") is None:
    collect_ignore.append("fdaimpute/interop.py")
if importlib.util.find_spec("dask") is None:
    collect_ignore.append("fdaimpute/cluster.py")

#: Doctests that read or write Parquet files.
_NEED_PYARROW = (
    "fdaimpute.data.IrregularData.read_parquet",
    "fdaimpute.chunks.ParquetChunks",
)


def pytest_collection_modifyitems(config, items):
    if importlib.util.find_spec("pyarrow") is not None:
        return
    skip = pytest.mark.skip(reason="needs pyarrow")
    for item in items:
        if item.name in _NEED_PYARROW:
            item.add_marker(skip)
