"""The command line's output files: checked before any work, written safely.

:func:`check_target` refuses, before anything is read or fitted, an
output that would replace a file (without ``--force``), overwrite an input
or another output, or go into a missing or read-only folder.
:func:`write_curves` imputes and writes a block of subjects at a time into a
temporary file beside the target, renamed into place at the end: a failure
(a full disk, no memory) leaves no partial file, and the output is never
held in memory whole. :func:`write_text` writes a small file the same way.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time

import numpy as np

from fdaimpute._cli.messages import cli_message, fitted_label
from fdaimpute._core.blocks import (
    check_output_fits,
    format_bytes,
    subject_blocks,
)
from fdaimpute._core.columns import column_labels
from fdaimpute._core.timing import phase
from fdaimpute._io.csv_text import long_rows, wide_rows
from fdaimpute._io.files import atomic_write
from fdaimpute._io.parquet import (
    curve_table,
    is_parquet,
    require_pyarrow,
    write_curve_blocks,
)

__all__ = ["check_room", "check_target", "write_curves", "write_text", "writing"]

# The fewest bytes a value takes in the CSV ("0.5,"): a lower bound of the
# output's size, so that a refusal for want of disk space is never wrong.
_MIN_BYTES_PER_VALUE = 4
# Cells of curves turned into CSV text at a time. Text takes about 20 bytes
# a value, held three times over while a piece is made (its rows, the
# joined text, its bytes): a block of imputed curves at once (2^20 cells)
# was the job's peak memory at 3-5 observations.
TEXT_CELLS = 1 << 18


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_target(path, flag, inputs, force, outputs=()):
    """Exit with the reason if ``path`` cannot be written as ``flag``'s output.

    Parameters
    ----------
    path : str
        The output file.
    flag : str
        The option naming it (``-o``, ``--save``, ``--timings``), for the
        messages.
    inputs : list of str
        Files the command reads: never overwritten, even with ``--force``.
    force : bool
        Whether an existing ``path`` may be replaced.
    outputs : list of (str, str), default=()
        The command's other outputs, ``(flag, path)``: never the same file,
        even with ``--force``.
    """
    for name in inputs:
        if name is not None and _same_file(path, name):
            raise SystemExit(
                f"{flag} {path} is also an input of this command; write the "
                "output to another file"
            )
    for other, name in outputs:
        if _same_file(path, name):
            raise SystemExit(
                f"{flag} {path} is also the {other} output; write them to two files"
            )
    if os.path.isdir(path):
        raise SystemExit(f"{flag} {path} is a folder; give a file name")
    if is_parquet(path):
        try:
            require_pyarrow("writing Parquet")
        except ImportError as exc:
            raise SystemExit(f"{flag} {path}: {exc}") from None
    if os.path.lexists(path) and not force:
        raise SystemExit(f"{flag} {path} exists; pass --force to replace it")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise SystemExit(
            f"cannot write {flag} {path}: the folder {folder} does not exist; "
            "create it first"
        )
    if not os.access(folder, os.W_OK):
        raise SystemExit(
            f"cannot write {flag} {path}: the folder {folder} is read-only"
        )


def check_room(path, n_subjects, n_grid, n_arrays):
    """Exit before any work if the output cannot fit on disk or one row in memory."""
    try:
        check_output_fits(1, n_grid, n_arrays, what="output grid")
    except ValueError:
        need = 8 * n_grid * n_arrays
        raise SystemExit(
            f"--grid: one subject's output of {n_grid:,} grid times needs "
            f"{format_bytes(need)} of memory, more than is available; give a "
            "coarser grid"
        ) from None
    least = _MIN_BYTES_PER_VALUE * n_subjects * n_grid * n_arrays
    folder = os.path.dirname(os.path.abspath(path))
    free = shutil.disk_usage(folder).free
    if least > free:
        raise SystemExit(
            f"-o {path}: {n_subjects:,} subjects x {n_grid:,} grid times would take "
            f"at least {format_bytes(least)}, more than the {format_bytes(free)} "
            f"free in {folder}; give a coarser --grid or another folder"
        )


def _wide_text(ids, grid, curves, std, id_name, header, variables=None):
    names = list(column_labels(grid, variables))
    if std is not None:
        names += [f"std({n})" for n in names]
        curves = np.concatenate([curves, std], axis=1)
    return wide_rows(ids, curves, [id_name, *names] if header else None)


def _long_text(ids, grid, curves, std, names, header, variables=None):
    id_name, time_name, value_name = names[:3]
    head = [id_name, time_name, value_name]
    if variables is not None:
        head.insert(1, names[3])
    columns = [curves]
    if std is not None:
        columns.append(std)
        head.append("std" if "std" not in names else f"{value_name}_std")
    return long_rows(ids, grid, columns, head if header else None, variables)


def write_curves(
    path, data, grid, impute, layout, names, with_std, force, variables=None
):
    """Impute ``data`` a block of subjects at a time and write the CSV.

    A ``path`` ending in ``.parquet`` gets a Parquet file of the same columns
    (one row group per block; needs ``pyarrow``).

    Parameters
    ----------
    path : str
        The output file, written through a temporary file beside it.
    data : IrregularData or MultivariateIrregularData
        The subjects, written in their order with their ids.
    grid : ndarray
        Output times.
    impute : callable
        ``impute(part)`` returns the curves of the IrregularData ``part``
        (and their standard deviations when ``with_std``).
    layout : {"wide", "long"}
        One row per subject, or per subject and grid time.
    names : tuple of str
        The input's id, time and value column names (with ``variables``,
        the variable column's name fourth).
    with_std : bool
        Whether ``impute`` returns standard deviations too.
    force : bool
        Replace an existing file.
    variables : list of str, default=None
        Several variables: ``impute`` returns variable-major blocks of
        ``grid.size`` columns; the wide file names its columns
        ``<variable>:t=<time>`` (``std(<variable>:t=<time>)``), the long
        file has the columns id, variable, time, value (and std).
    """
    p = 1 if variables is None else len(variables)
    width = p * grid.size * (2 if with_std else 1)
    parquet = is_parquet(path)

    def blocks():
        for lo, hi in subject_blocks(data.offsets, width):
            part = data.take(np.arange(lo, hi))
            with phase("transform"):
                out = impute(part)
            yield (part.ids, *(out if with_std else (out, None)))

    def chunks():
        first, rows = True, max(1, TEXT_CELLS // width)
        for ids, curves, std in blocks():
            for lo in range(0, len(ids), rows):
                part = slice(lo, lo + rows)
                some = (
                    ids[part],
                    grid,
                    curves[part],
                    None if std is None else std[part],
                )
                with phase("write"):
                    if layout == "long":
                        text = _long_text(*some, names, first, variables)
                    else:
                        text = _wide_text(*some, names[0], first, variables)
                    data_bytes = text.encode()
                first = False
                yield data_bytes

    def tables():
        for ids, curves, std in blocks():
            with phase("write"):
                table = curve_table(ids, grid, curves, std, layout, names, variables)
            yield table

    try:
        with writing(path, "-o"):
            if parquet:
                write_curve_blocks(path, tables(), overwrite=force)
            else:
                atomic_write(path, chunks(), overwrite=force)
    except MemoryError:
        raise SystemExit(
            f"ran out of memory while writing {path} (nothing was written); "
            "give a coarser --grid"
        ) from None


@contextlib.contextmanager
def writing(path, flag):
    """Exit with the reason when the block fails to write ``flag``'s ``path``:
    it exists (created since :func:`check_target`), or the system refused."""
    try:
        yield
    except FileExistsError:
        raise SystemExit(f"{flag} {path} exists; pass --force to replace it") from None
    except OSError as exc:
        raise SystemExit(f"cannot write {path}: {exc}") from None


def write_text(path, flag, text, force):
    """Write ``text`` to ``flag``'s ``path`` through a temporary file beside it
    (:func:`fdaimpute._io.files.atomic_write`), exiting with the reason on
    failure; ``force``: replace an existing file."""
    with writing(path, flag):
        atomic_write(path, [text.encode()], overwrite=force)


def write_output(args, data, grid, est, label, start, names):
    """Impute ``data`` with the fitted ``est`` on ``grid`` and write the curves.

    The curves are computed and written a block of subjects at a time (see
    :func:`fdaimpute._cli.output.write_curves`).
    """

    def impute(part):
        try:
            return est.transform(part, grid=grid, return_std=args.std)
        except (ValueError, TypeError, NotImplementedError, ArithmeticError) as exc:
            raise SystemExit(f"{label}: {cli_message(str(exc))}") from None

    variables = getattr(est, "variables_", None)
    write_curves(
        args.output,
        data,
        grid,
        impute,
        args.format,
        names,
        args.std,
        args.force,
        None if variables is None else [str(v) for v in variables],
    )
    print(
        f"Imputed {len(data)} curves with {fitted_label(label, est)} in "
        f"{time.perf_counter() - start:.1f} s",
        file=sys.stderr,
    )
    print(f"Wrote {args.output}", file=sys.stderr)
    return 0
