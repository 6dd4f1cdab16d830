"""The command line's input: its columns, variables and covariates, and the grid."""

from __future__ import annotations

import os
import sys

import numpy as np

from fdaimpute._cli.messages import cli_message
from fdaimpute._cli.methods import (
    ALWAYS_MULTIVARIATE,
    COVARIATE_METHODS,
    MULTIVARIATE_METHODS,
    SEVERAL,
)
from fdaimpute._cli.params import collect_params
from fdaimpute._core.blocks import check_output_fits, format_bytes
from fdaimpute._io.parquet import is_parquet


def parse_grid(text, time_range):
    """``"101"`` -> 101 points over the data's range; ``"a:b:n"`` -> linspace."""
    parts = text.split(":")
    try:
        if len(parts) == 1:
            n = int(parts[0])
            lo, hi = time_range
        elif len(parts) == 3:
            lo, hi, n = float(parts[0]), float(parts[1]), int(parts[2])
        else:
            raise ValueError
    except ValueError:
        raise SystemExit(
            f"--grid must be a number of points (101) or start:stop:points "
            f"(0:1:101), got {text!r}"
        ) from None
    if n < 2:
        raise SystemExit(f"--grid needs at least 2 points, got {n}")
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise SystemExit(f"--grid needs finite start and stop, got {text!r}")
    try:
        check_output_fits(1, n, what="grid")
    except ValueError:
        raise SystemExit(
            f"--grid {text}: {n:,} points need {format_bytes(8 * n)} of memory for "
            "the grid alone, more than is available; give fewer points"
        ) from None
    return np.linspace(lo, hi, n)


def column_names(args, saved=None):
    """The input's id, time and value columns: the flags, else ``saved``, else
    ``id``, ``time`` and ``value``."""
    saved = saved or {}
    return tuple(
        getattr(args, key) or saved.get(key) or key for key in ("id", "time", "value")
    )


def _split_names(text):
    """``"a, b"`` -> ``["a", "b"]``; nothing -> ``[]``."""
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def variable_layout(args, saved=None, *, several=False):
    """The command line's variables and covariates, or None for one variable.

    ``--variable COLUMN`` names the column holding each row's variable
    (the values then in the one ``--value`` column); several
    comma-separated ``--value`` columns hold one variable each (NaN where
    not measured); ``--covariates A,B`` names subject covariates. Flags
    missing from the command line are taken from ``saved`` (a model's
    columns).

    Parameters
    ----------
    args : argparse.Namespace
        The command line.
    saved : dict, default=None
        Column names a model file keeps.
    several : bool, default=False
        Read the input as several variables even when it has one value
        column and no variable column (a method that takes several).

    Returns
    -------
    tuple or None
        ``(variable column or None, value columns, covariate columns)``;
        None when the input holds one variable and no covariates and
        ``several`` is False.
    """
    saved = saved or {}
    variable = getattr(args, "variable", None) or saved.get("variable")
    values = _split_names(args.value or saved.get("value") or "value")
    covariates = _split_names(
        getattr(args, "covariates", None) or saved.get("covariates")
    )
    covariates = _with_param_covariates(args, covariates)
    if variable is None and len(values) == 1 and not covariates and not several:
        return None
    if variable is not None and len(values) > 1:
        raise SystemExit(
            f"--variable {variable} reads one value column (--value), got "
            f"{', '.join(values)}; give several --value columns (one per "
            "variable) or --variable, not both"
        )
    return variable, values, covariates


def _with_param_covariates(args, covariates):
    """The covariate columns, also when named by ``--param covariates=[...]``.

    The method's ``covariates`` parameter and ``--covariates`` name the same
    columns: either reads them from the input; both must agree.
    """
    if not (getattr(args, "param", None) or getattr(args, "params_file", None)):
        return covariates
    named = collect_params(args).get("covariates")
    if named is None:
        return covariates
    if isinstance(named, str):
        named = _split_names(named)
    if not (isinstance(named, list) and all(isinstance(c, str) and c for c in named)):
        raise SystemExit(
            f"--param covariates must name columns (a list of names), got {named!r}"
        )
    if covariates and covariates != named:
        raise SystemExit(
            f"--covariates {','.join(covariates)} and --param covariates="
            f"{named} name different columns; give the covariates once"
        )
    return named


def check_layout(layout, method):
    """Exit when ``method`` cannot take the variables or covariates asked for."""
    if layout is None:
        return
    variable, values, covariates = layout
    if (variable is not None or len(values) > 1) and method not in (
        MULTIVARIATE_METHODS
    ):
        given = "--variable" if variable is not None else "several --value columns"
        raise SystemExit(
            f"{given}: --method {method} imputes one variable; use a method that "
            f"takes several ({', '.join(MULTIVARIATE_METHODS)})"
        )
    if covariates and method not in COVARIATE_METHODS:
        raise SystemExit(
            f"--covariates: --method {method} does not use subject covariates; "
            f"use {' or '.join(f'--method {m}' for m in COVARIATE_METHODS)}"
        )


def method_layout(args, method):
    """The variables and covariates ``method`` reads (checked), or None for one."""
    layout = variable_layout(args, several=method in ALWAYS_MULTIVARIATE)
    check_layout(layout, method)
    return layout


def output_names(names, layout):
    """The output's id, time, value (and variable) column names."""
    if layout is None:
        return names
    variable, values, _ = layout
    value = values[0] if variable is not None else "value"
    return (names[0], names[1], value, variable or "variable")


def _read_table(path, columns):
    """The ``columns`` of the CSV or Parquet file (ids as text)."""
    from fdaimpute._core.frames import require_pandas
    from fdaimpute._io.csv_options import read_long_csv

    if is_parquet(path):
        from fdaimpute._io.parquet import read_columns

        return read_columns(path, columns)
    pd = require_pandas("reading a CSV")
    return read_long_csv(pd, path, columns[0], columns=list(dict.fromkeys(columns)))


def _read_variables(path, names, layout, duplicates, header):
    """The input as MultivariateIrregularData (raises ValueError or TypeError);
    ``header``: the file's columns (:func:`_header`)."""
    from fdaimpute.multivariate import MultivariateIrregularData

    id_name, time_name, _ = names
    variable, values, covariates = layout
    wanted = [id_name, time_name, *([variable] if variable else []), *values]
    roles = [("id", id_name), ("time", time_name)]
    roles += [("variable", variable)] if variable else []
    roles += [("value", v) for v in values] + [("covariate", c) for c in covariates]
    absent = [(role, c) for role, c in roles if header and c not in header]
    if absent:
        role, name = absent[0]
        raise ValueError(
            f"column {name!r} (the {role} column) is not in {path}; its columns "
            f"are {header}"
        )
    df = _read_table(path, wanted + covariates)
    if len(df) == 0:
        raise ValueError(
            f"{path} has no observations (a header and no rows); it needs one "
            f"row per observation with columns {', '.join(wanted)}"
        )
    options = dict(covariates=covariates or None, duplicates=duplicates)
    if variable is not None:
        return MultivariateIrregularData.from_long(
            df, id_name, time_name, variable, values[0], **options
        )
    return MultivariateIrregularData.from_columns(
        df, values, id_name, time_name, **options
    )


def read_data(args, names=None, layout=None):
    """The input of ``args.input`` as IrregularData, or MultivariateIrregularData
    for a ``layout`` of several variables (exits with the reason)."""
    import fdaimpute as fi

    id_name, time_name, value_name = names or column_names(args)
    variable = None if layout is None else layout[0]
    one_value = layout is None or len(layout[1]) == 1
    try:
        header = _header(args.input)
        if variable is None and one_value:
            _refuse_unnamed_variable_column(header, (id_name, time_name, value_name))
        if layout is not None:
            data = _read_variables(
                args.input,
                (id_name, time_name, value_name),
                layout,
                args.duplicates,
                header,
            )
            return _reported(data)
        read = fi.IrregularData.read_csv
        if is_parquet(args.input):
            read = fi.IrregularData.read_parquet
        data = read(
            args.input,
            id=id_name,
            time=time_name,
            value=value_name,
            duplicates=args.duplicates,
        )
    except (ValueError, TypeError, OSError, ImportError) as exc:
        message = cli_message(str(exc))
        if variable is None and "two observations at" in message:
            message += VARIABLE_ADVICE
        raise SystemExit(f"cannot read {args.input}: {message}") from None
    return _reported(data)


#: What a repeated time may mean when no --variable was given.
VARIABLE_ADVICE = (
    "; if the rows of one time hold different variables, name the column "
    "that says which with --variable COLUMN (--duplicates average is for "
    "repeated measurements of one variable)"
)


def _refuse_unnamed_variable_column(header, names):
    """Raise where the input's columns ``header`` hold a ``variable`` column
    that none of ``names`` (id, time, value) is, and --variable was not given."""
    if "variable" in names or "variable" not in header:
        return
    raise ValueError(
        "the input has a column 'variable': several variables in one table; "
        f"read them with --variable variable (--method {SEVERAL}), or keep one "
        "variable's rows for a method of one variable"
    )


def _header(path):
    """The column names of a CSV or Parquet file (none where it cannot be read)."""
    try:
        if is_parquet(path):
            import pyarrow.parquet as pq

            return [str(c) for c in pq.read_schema(path).names]
        import pandas as pd

        return [str(c) for c in pd.read_csv(path, nrows=0).columns]
    except Exception:  # unreadable here: reading the table will say why
        return []


def _reported(data):
    if os.environ.get("RANK", "0") == "0":  # once under torchrun
        print(f"Read {data}", file=sys.stderr)
    return data
