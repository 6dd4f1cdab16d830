"""Doctest collection: skip the examples of optional integrations not installed."""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("skfda") is None:
    collect_ignore.append("fdaimpute/interop.py")
