"""Start-up time of the ``fdaimpute`` command: ``--version`` and ``--help``.

Each command runs as a whole process (``python -m fdaimpute ...`` in this
checkout, which is also put first on ``PYTHONPATH``), beside three
references: the interpreter alone (``python -c pass``), NumPy's import
(which the package's data types need) and the import of scikit-learn's
estimator base (``python -c "import sklearn.base"``), what the command paid
before its start-up stopped importing it. The commands are run in turns,
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
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine, markdown_table, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["command", "checkout", "median s", "range s", "above interpreter s"]
#: (label, arguments after ``python``) of the references.
REFERENCES = [
    ("python -c pass", ["-c", "pass"]),
    ('python -c "import numpy"', ["-c", "import numpy"]),
    ('python -c "import sklearn.base"', ["-c", "import sklearn.base"]),
]
#: Arguments of ``fdaimpute`` timed as ``python -m fdaimpute ...``.
COMMANDS = [["--version"], ["--help"], ["fit", "--help"]]


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


def seconds(argv, env, cwd):
    """Wall seconds of one process, its output discarded; it must succeed."""
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def jobs(checkouts):
    """(command label, checkout label, argv, env, cwd) of everything timed."""
    _, env, cwd = checkouts[0]
    out = [(label, "", [sys.executable, *args], env, cwd) for label, args in REFERENCES]
    for name, env, cwd in checkouts:
        for args in COMMANDS:
            label = "python -m fdaimpute " + " ".join(args)
            command = [sys.executable, "-m", "fdaimpute", *args]
            out.append((label, name, command, env, cwd))
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

    todo = jobs(checkouts)
    load = os.getloadavg()[0]
    times = {(label, name): [] for label, name, *_ in todo}
    for round_ in range(args.repeats + 1):
        for label, name, command, env, cwd in todo:
            took = seconds(command, env, cwd)
            if round_ > 0:  # the first round warms the file cache
                times[label, name].append(took)

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
