"""Options of ``pandas.read_csv`` under which a long CSV reads back exactly."""

from __future__ import annotations

from fdaimpute._core.ids import ids_as_text


def read_options(kwargs, id_column, pd):
    """``kwargs`` for ``pd.read_csv``: ids as text, floats as written.

    Before pandas 3 the C parser's default float conversion can differ from
    the written number in the last bit (``float_precision="round_trip"``
    gives the exact value); pandas 3 parses exactly by default and
    deprecates the option. A caller's own ``dtype`` or ``float_precision``
    is kept.
    """
    options = dict(kwargs)
    options["dtype"] = ids_as_text(options.get("dtype"), id_column)
    if int(pd.__version__.split(".")[0]) < 3:
        options.setdefault("float_precision", "round_trip")
    return options
