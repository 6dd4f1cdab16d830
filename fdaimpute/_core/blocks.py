"""Bounded memory for outputs: blocks of subjects, and a check before any work.

:func:`subject_blocks` cuts the subjects into consecutive blocks whose
output cells and observations stay under a budget, so a transform of a
million subjects never holds more than one block's intermediate arrays;
:func:`check_output_fits` refuses an output that could not fit in memory
at all, before anything is computed.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["available_memory", "check_output_fits", "format_bytes", "subject_blocks"]

#: Output cells (subjects x grid times) per block: 8 MiB of float64.
BLOCK_CELLS = 1 << 20
#: Observations per block.
BLOCK_OBS = 1 << 22


def subject_blocks(offsets, width, cells=BLOCK_CELLS, obs=BLOCK_OBS):
    """Consecutive ``(start, stop)`` subject ranges within the budget.

    Parameters
    ----------
    offsets : ndarray of shape (n_subjects + 1,)
        CSR offsets of the subjects' observations.
    width : int
        Output cells per subject (the grid's size).
    cells, obs : int
        Most output cells and observations in a block (a subject exceeding
        either is a block of its own).

    Returns
    -------
    list of tuple of int
    """
    n = len(offsets) - 1
    if n <= 0:
        return [(0, 0)]
    per_subject = max(1, cells // max(int(width), 1))
    starts, lo = [], 0
    while lo < n:
        hi = min(n, lo + per_subject)
        # fewer subjects where their observations exceed the budget
        limit = np.searchsorted(offsets, offsets[lo] + obs, side="right") - 1
        hi = max(lo + 1, min(hi, int(limit)))
        starts.append((lo, hi))
        lo = hi
    return starts


def available_memory():
    """Bytes of memory available to new allocations, or None where unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def format_bytes(n):
    """``n`` bytes in a unit a person reads: ``"7.3 TB"``."""
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"  # pragma: no cover


def check_output_fits(n_rows, n_cols, n_arrays=1, what="output"):
    """Raise ValueError before any work when the output exceeds available memory.

    Parameters
    ----------
    n_rows, n_cols : int
        Shape of each output array (float64).
    n_arrays : int, default=1
        How many such arrays (2 with standard deviations).
    what : str
        What is asked for, in the message.
    """
    need = 8 * int(n_rows) * int(n_cols) * int(n_arrays)
    free = available_memory()
    if free is None or need <= free:
        return
    raise ValueError(
        f"the {what} of {n_rows:,} subjects x {n_cols:,} grid times would need "
        f"{format_bytes(need)} of memory, more than the {format_bytes(free)} "
        "available: use a coarser grid, or impute the subjects in blocks "
        "(data.take(range(start, stop)); the fdaimpute command writes its "
        "output a block at a time)"
    )
