"""Start-up time of the ``fdaimpute`` command: ``--version`` and ``--help``.

Each command runs as a whole process (``python -m fdaimpute ...`` in this
checkout, which is also put first on ``PYTHONPATH``), beside three
references: the interpreter alone (``python -c pass``), NumPy's import
(which the package's data types need) and the import of scikit-learn's
estimator base (``python -c "import sklearn.base"``), what the command paid
before its start-up stopped importing it, the NumPy and SciPy modules PACE
computes with, and ``from fdaimpute import PACEImputer`` (what an ``impute``
job pays before it reads its input). ``impute ... -o FILE`` with an existing
``FILE`` times a refused output (it is checked before the method's import).
The commands are run in turns,
one of each per round after an unmeasured warm-up round, so that a change
in the load of a shared machine falls on all of them alike; the table gives
each command's median and range over the rounds and its median less the
interpreter's.
``--baseline DIR`` also times the fdaimpute commands of another checkout
(e.g. the main branch) in the same rounds.

Usage::

    python benchmarks/bench_cli_startup.py
    python benchmarks/bench_cli_startup.py --baseline ../main --write
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine, markdown_table, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["command", "checkout", "median s", "range s", "above interpreter s"]
#: (label, arguments after ``python``) of the references.
#: The NumPy and SciPy modules PACE's fit computes with.
PACE_MODULES = "numpy, scipy.linalg, scipy.sparse, scipy.interpolate, scipy.optimize"
REFERENCES = [
    ("python -c pass", ["-c", "pass"]),
    ('python -c "import numpy"', ["-c", "import numpy"]),
    ('python -c "import sklearn.base"', ["-c", "import sklearn.base"]),
    (f'python -c "import {PACE_MODULES}"', ["-c", f"import {PACE_MODULES}"]),
    (
        'python -c "from fdaimpute import PACEImputer"',
        ["-c", "from fdaimpute import PACEImputer"],
    ),
]
#: Arguments of ``fdaimpute`` timed as ``python -m fdaimpute ...``, and the
#: exit status each must give (``{data}``, ``{taken}``: files made for the run).
COMMANDS = [
    (["--version"], 0),
    (["--help"], 0),
    (["fit", "--help"], 0),
    (["impute", "{data}", "-o", "{taken}", "--method", "pace"], 1),
]


def checkout_label(path):
    """``<folder> (<short commit>)`` of a git checkout, or its folder alone."""
    out = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    )
    commit = out.stdout.strip()
    return f"{Path(path).resolve().name} ({commit})" if commit else str(path)


def imported_from(env, cwd):
    """The ``fdaimpute`` package a child process with ``env`` imports."""
    out = subprocess.run(
        [sys.executable, "-c", "import fdaimpute; print(fdaimpute.__file__)"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return str(Path(out.stdout.strip()).parent.parent)


def seconds(argv, env, cwd, status=0):
    """Wall seconds of one process, its output discarded; it must exit ``status``."""
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    took = time.perf_counter() - start
    if done.returncode != status:
        raise SystemExit(
            f"{' '.join(argv)} exited {done.returncode}, not {status}: "
            f"{done.stderr.decode()[-500:]}"
        )
    return took


def jobs(checkouts, files):
    """(command label, checkout label, argv, env, cwd, status) of everything timed.

    ``files`` maps the ``{name}`` fields of :data:`COMMANDS` to paths.
    """
    _, env, cwd = checkouts[0]
    out = [
        (label, "", [sys.executable, *args], env, cwd, 0) for label, args in REFERENCES
    ]
    for name, env, cwd in checkouts:
        for args, status in COMMANDS:
            label = "python -m fdaimpute " + " ".join(
                a.format(data="data.csv", taken="taken.csv") for a in args
            )
            if status:
                label += " (refused)"
            filled = [a.format(**files) for a in args]
            command = [sys.executable, "-m", "fdaimpute", *filled]
            out.append((label, name, command, env, cwd, status))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="measured rounds")
    parser.add_argument(
        "--baseline", metavar="DIR", help="another checkout to time beside this one"
    )
    parser.add_argument("--write", action="store_true", help="update benchmarks.md")
    args = parser.parse_args(argv)

    checkouts = []
    for path in [ROOT] + ([Path(args.baseline)] if args.baseline else []):
        # run in the checkout (python -c and -m put the working folder first
        # on sys.path) with it on PYTHONPATH too, not the installed package
        cwd = Path(path).resolve()
        env = {**os.environ, "PYTHONPATH": str(cwd)}
        found = imported_from(env, cwd)
        if Path(found) != cwd:
            raise SystemExit(f"{path}: a child process imports fdaimpute from {found}")
        checkouts.append((checkout_label(path), env, cwd))

    folder = Path(tempfile.mkdtemp(prefix="cli_startup_"))
    files = {"data": str(folder / "data.csv"), "taken": str(folder / "taken.csv")}
    Path(files["data"]).write_text("id,time,value\na,0,1\na,1,2\n")
    Path(files["taken"]).write_text("not to be replaced\n")
    todo = jobs(checkouts, files)
    load = os.getloadavg()[0]
    times = {(label, name): [] for label, name, *_ in todo}
    try:
        for round_ in range(args.repeats + 1):
            for label, name, command, env, cwd, status in todo:
                took = seconds(command, env, cwd, status)
                if round_ > 0:  # the first round warms the file cache
                    times[label, name].append(took)
    finally:
        shutil.rmtree(folder)

    interpreter = statistics.median(times[REFERENCES[0][0], ""])
    rows = []
    for (label, name), values in times.items():
        median = statistics.median(values)
        rows.append(
            {
                "command": f"`{label}`",
                "checkout": name,
                "median s": f"{median:.3f}",
                "range s": f"{min(values):.3f}-{max(values):.3f}",
                "above interpreter s": f"{median - interpreter:.3f}",
            }
        )
    text = markdown_table(rows, COLUMNS)
    print(text)
    print(f"{machine()}; load average {load:.1f} at the start")
    if args.write:
        write_section(
            "cli-startup",
            "Start-up time of the command line",
            "Wall seconds of whole processes (the command's output discarded): "
            f"median and range of {args.repeats} rounds, each running every "
            "command once in turn after an unmeasured warm-up round; `above "
            "interpreter`: the median less that of `python -c pass`. "
            "`checkout` names the code the command ran. Load average of the "
            f"machine (1 minute) when the run began: {load:.1f}.\n\n" + text,
        )


if __name__ == "__main__":
    main()
