"""Options of ``pandas.read_csv`` under which a long CSV reads back exactly."""

from __future__ import annotations

from fdaimpute._core.ids import ids_as_text


def read_options(kwargs, id_column, pd):
    """``kwargs`` for ``pd.read_csv``: ids as text, floats as written.

    Before pandas 3.1 the C parser's default float conversion can differ
    from the written number in the last bit (seen on pandas 3.0.6: 29 of
    558 times written by ``to_csv`` read back one bit off);
    ``float_precision="round_trip"`` gives the exact value. pandas 3.1
    parses exactly by default and deprecates the option. A caller's own
    ``dtype`` or ``float_precision`` is kept.
    """
    options = dict(kwargs)
    options["dtype"] = ids_as_text(options.get("dtype"), id_column)
    if _version(pd.__version__) < (3, 1):
        options.setdefault("float_precision", "round_trip")
    return options


def _version(text):
    """``(major, minor)`` of a version string such as ``"3.0.6"`` or ``"3.1.0rc1"``.

    Not scikit-learn's ``parse_version``: ``import fdaimpute`` reaches this
    module and loads no scikit-learn (``tests/test_imports.py``).
    """
    major, minor = (text.split(".") + ["0"])[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)
