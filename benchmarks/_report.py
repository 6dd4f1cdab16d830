"""Shared helpers for benchmark scripts: machine description and report writing.

Every benchmark prints its table and, with ``--write``, replaces its own
section of ``docs/benchmarks.md`` (between ``<!-- BEGIN name -->`` and
``<!-- END name -->`` markers), stamped with the command, machine and date.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
from pathlib import Path

import numpy as np

#: Where ``write_section`` writes; ``FDAIMPUTE_BENCH_DOC`` redirects it (a run on
#: a borrowed machine writes its sections to a file of its own).
DOC = Path(
    os.environ.get(
        "FDAIMPUTE_BENCH_DOC",
        Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md",
    )
)


def machine():
    """One line describing this machine and the software versions."""
    import numpy as np
    import scipy

    parts = [
        platform.platform(terse=True),
        f"{os.cpu_count()} CPU cores",
        f"Python {platform.python_version()}",
        f"numpy {np.__version__}",
        f"scipy {scipy.__version__}",
    ]
    try:
        import torch

        parts.append(f"torch {torch.__version__} ({torch.get_num_threads()} threads)")
        if torch.cuda.is_available():
            parts.append(torch.cuda.get_device_name(0))
    except ImportError:
        pass
    return ", ".join(parts)


def mean_se(values):
    """Mean and standard error (sample SD / sqrt(count); NaN for one value)."""
    values = np.asarray(values, dtype=float)
    se = values.std(ddof=1) / np.sqrt(values.size) if values.size > 1 else np.nan
    return float(values.mean()), float(se)


def mean_and_error(values, digits):
    """``"mean ± standard error"`` of ``values`` (e.g. ratios over seeds)."""
    values = np.asarray(values, dtype=float)
    sem = values.std(ddof=1) / np.sqrt(values.size) if values.size > 1 else 0.0
    return f"{values.mean():.{digits}f} ± {sem:.{digits}f}"


def markdown_table(rows, columns, formats=None):
    """Render a list of dicts as a GitHub markdown table."""
    formats = formats or {}
    head = "| " + " | ".join(columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    lines = [head, rule]
    for row in rows:
        cells = []
        for col in columns:
            value = row.get(col, "")
            fmt = formats.get(col)
            if fmt and isinstance(value, (int, float)):
                cells.append(format(value, fmt))
            else:
                cells.append(str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_section(name, title, body, measured_on=None):
    """Replace (or append) the section ``name`` of docs/benchmarks.md.

    The section is replaced where its markers are; a name not on the page is
    appended at its end. Superseded sections live on the archive page
    (docs/benchmarks-archive.md), which this never reads or writes: a re-run of
    an archived name appends a new, current section to docs/benchmarks.md, by
    design, and it is moved under its question by hand.

    ``measured_on`` names the machine that measured what a table made from
    saved rows shows (default: this one).
    """
    stamp = (
        f"Command: `python {shlex.join(sys.argv)}`  \n"
        f"Machine: {measured_on or machine()}  \n"
        f"Date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}\n"
    )
    section = (
        f"<!-- BEGIN {name} -->\n## {title}\n\n{stamp}\n{body.strip()}\n"
        f"<!-- END {name} -->"
    )
    DOC.parent.mkdir(parents=True, exist_ok=True)
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    if begin in text and end in text:
        pre = text[: text.index(begin)]
        post = text[text.index(end) + len(end) :]
        text = pre + section + post
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    DOC.write_text(text)
