"""Peak memory of every imputer's fit and transform as the data grow.

Two sweeps, each measurement in a fresh process:

- points per subject: 20 subjects with ``n_i`` = 10^2 ... 10^6 observations
  each (continuous times on [0, 1], a smooth curve plus noise);
- subjects: ``n`` = 10^3 ... 10^6 subjects with 10 observations each.

``fit`` fits the imputer on the data; ``transform`` fits it on 200 subjects
with 10 observations each, then imputes the data on a 101-point grid. The
peak is the process's resident-set high-water mark during that call minus
the resident size just before it (Linux: ``VmHWM`` after resetting it
through ``/proc/self/clear_refs``), so the data themselves and the imported
libraries are not counted; ``data MiB`` is the size of the input (times,
values, offsets). Memory that grows with the square of a subject's points
shows as a peak growing 100-fold per 10-fold step of ``n_i``.

The neural imputers train one epoch (``max_epochs=1``) and GAIN 200
iterations: the benchmark is about memory, not accuracy. Sizes whose fit
would take hours on two cores are left out by ``--limits`` (the defaults
are listed in ``LIMITS``); their rows say so.

Usage::

    python benchmarks/bench_memory.py                      # both sweeps
    python benchmarks/bench_memory.py --methods kernel pace --sweep points
    python benchmarks/bench_memory.py --write              # docs/benchmarks.md
    python benchmarks/bench_memory.py --reuse --write      # saved rows kept
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import markdown_table, write_section  # noqa: E402

METHODS = ("kernel", "pace", "face", "mfpca", "mice", "gain", "vt", "sand", "cnp")
POINTS = (100, 1_000, 10_000, 100_000, 1_000_000)
SUBJECTS = (1_000, 10_000, 100_000, 1_000_000)
ROOT = Path(__file__).resolve().parents[1]
ROWS = ROOT / "benchmarks" / "results" / "memory" / "rows.jsonl"
N_SUBJECTS_POINTS_SWEEP = 20
N_POINTS_SUBJECTS_SWEEP = 10
# Largest size measured per (method, phase, sweep) in the documented run,
# where one call would take more than about ten minutes on two cores or
# more memory than the 23 GiB development machine has. This is time (and
# linear memory), not squared memory: KernelImputer's cross-validation and
# the transformers' attention cost the square of a subject's points in time
# only; PACE, FACE and mFPCA fits take about 0.5 KiB per observation.
LIMITS = {
    ("kernel", "fit", "points"): 1_000,
    ("pace", "fit", "points"): 100_000,
    ("face", "fit", "points"): 100_000,
    ("mfpca", "fit", "points"): 100_000,
    ("vt", "fit", "points"): 1_000,
    ("sand", "fit", "points"): 1_000,
    ("vt", "transform", "points"): 10_000,
    ("sand", "transform", "points"): 10_000,
    ("cnp", "fit", "points"): 100_000,
    **{(m, "fit", "subjects"): 100_000 for m in ("mice", "mfpca", "vt", "sand", "cnp")},
    ("vt", "transform", "subjects"): 100_000,
    ("sand", "transform", "subjects"): 100_000,
    ("cnp", "transform", "subjects"): 100_000,
}


NOTES = """

No memory grows with the square of a subject's points: from 10^4 to 10^5 points per
subject (10 times the data) the fits of PACE, FACE, mFPCA and CNP take 8 to 9 times the
memory (about 0.5 KiB per observation for the first three, 5 KiB for CNP's training
activations), KernelImputer's transform stays at 199 MiB (its pairs of points are
formed for a block of queries at a time; it asked for 298 GiB at 2 x 10^5 points
before) and MICE's and GAIN's grow with the binned data only. Transforms work in
blocks of subjects: at 10^6 subjects every classical method peaks at about 1.5 GiB, of
which the output itself (10^6 x 101 doubles) is 0.8 GiB. Fits of 10^6 subjects grow
linearly too, with large constants: 2.3 GiB for PACE, 3.7 GiB for Kernel (its pooled
bandwidth search keeps each subject's criterion for every candidate), 4.2 GiB for GAIN
and 7.1 GiB for FACE (250 to 730 bytes per observation). Rows marked "not run" exceed
`LIMITS` in the script: one call would take more than about ten minutes on two cores
(KernelImputer's cross-validation and the transformers' attention cost the square of a
subject's points in *time*; MICE's chained regressions, mFPCA's optimiser and the
networks' epochs grow with the subjects), or, at 10^6 points per subject, more than the
23 GiB of this machine. `--no-limits` runs them.
"""


def _load():
    """Rows saved by earlier runs, by (sweep, method, phase, subjects, points)."""
    if not ROWS.exists():
        return {}
    rows = [json.loads(line) for line in ROWS.read_text().splitlines() if line]
    return {_key(row): row for row in rows}


def _key(row):
    return (
        row["sweep"],
        row["method"],
        row["phase"],
        row["subjects"],
        row["points per subject"],
    )


def _save(saved):
    ROWS.parent.mkdir(parents=True, exist_ok=True)
    ROWS.write_text("".join(json.dumps(row) + "\n" for row in saved.values()))


def make_data(n, n_i, seed):
    """``n`` subjects with ``n_i`` noisy observations of a smooth random curve."""
    from fdaimpute import IrregularData

    rng = np.random.default_rng(seed)
    times = rng.random(n * n_i)
    subject = np.repeat(np.arange(n), n_i)
    a, b = rng.normal(size=(2, n))
    values = (
        a[subject] * np.sin(2 * np.pi * times)
        + b[subject] * np.cos(2 * np.pi * times)
        + 0.3 * rng.normal(size=times.size)
    )
    order = np.lexsort((times, subject))
    offsets = np.arange(n + 1) * n_i
    return IrregularData(times[order], values[order], offsets)


def estimator(method):
    """The imputer of ``method``, on one thread, quick settings for the networks."""
    import fdaimpute as fi

    grid = np.linspace(0, 1, 101)
    quick = {"max_epochs": 1, "random_state": 0, "grid": grid, "device": "cpu"}
    return {
        "kernel": lambda: fi.KernelImputer(grid=grid),
        "pace": lambda: fi.PACEImputer(grid=grid, random_state=0),
        "face": lambda: fi.FACEImputer(grid=grid),
        "mfpca": lambda: fi.MFPCAImputer(grid=grid),
        "mice": lambda: fi.MICEImputer(grid=grid, random_state=0),
        "gain": lambda: fi.GAINImputer(
            grid=grid, max_iter=200, random_state=0, device="cpu"
        ),
        "vt": lambda: fi.VTImputer(**quick),
        "sand": lambda: fi.SANDImputer(**quick),
        "cnp": lambda: fi.CNPImputer(**quick),
    }[method]()


def _status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(method, phase, n, n_i):
    """Run one measurement in this process; a dict of its numbers."""
    import warnings

    warnings.simplefilter("ignore")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass
    data = make_data(n, n_i, seed=1)
    est = estimator(method)
    if phase == "transform":
        est.fit(make_data(200, 10, seed=0))
        if hasattr(est, "extrapolate"):
            est.set_params(extrapolate="clip")
        call = lambda: est.transform(data)  # noqa: E731
    else:
        call = lambda: est.fit(data)  # noqa: E731
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset VmHWM to the current resident size
    before = _status("VmRSS")
    tracemalloc.start()
    start = time.perf_counter()
    call()
    seconds = time.perf_counter() - start
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # the larger of the two: the resident high-water mark misses memory the
    # process reuses from its own heap; tracemalloc misses torch's allocations
    peak = max(_status("VmHWM") - before, traced)
    data_bytes = data.times.nbytes + data.values.nbytes + data.offsets.nbytes
    return {"peak": peak / 2**20, "seconds": seconds, "data": data_bytes / 2**20}


def run_one(method, phase, n, n_i, timeout):
    """Measure in a child process; None if it ran out of time."""
    cmd = [sys.executable, __file__, "--one", method, phase, str(n), str(n_i)]
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, check=True
        )
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout} s"}
    except subprocess.CalledProcessError as exc:
        last = (exc.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": last[:80]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def sweep_sizes(sweep):
    if sweep == "points":
        return [(N_SUBJECTS_POINTS_SWEEP, n_i) for n_i in POINTS]
    return [(n, N_POINTS_SUBJECTS_SWEEP) for n in SUBJECTS]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--phases", nargs="+", default=["fit", "transform"])
    parser.add_argument(
        "--sweep",
        nargs="+",
        default=["points", "subjects"],
        choices=["points", "subjects"],
    )
    parser.add_argument("--max-points", type=int, default=POINTS[-1])
    parser.add_argument("--max-subjects", type=int, default=SUBJECTS[-1])
    parser.add_argument("--no-limits", action="store_true", help="ignore LIMITS")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per run")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help=f"take rows measured before from {ROWS.relative_to(ROOT)} instead of "
        "measuring them again (every measured row is saved there)",
    )
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        method, phase, n, n_i = args.one
        print(json.dumps(measure(method, phase, int(n), int(n_i))))
        return 0
    rows, saved = [], _load()
    for sweep in args.sweep:
        for method in args.methods:
            for phase in args.phases:
                for n, n_i in sweep_sizes(sweep):
                    if n_i > args.max_points or n > args.max_subjects:
                        continue
                    size = n_i if sweep == "points" else n
                    limit = LIMITS.get((method, phase, sweep))
                    row = {
                        "sweep": sweep,
                        "method": method,
                        "phase": phase,
                        "subjects": n,
                        "points per subject": n_i,
                    }
                    key = (sweep, method, phase, n, n_i)
                    if limit is not None and size > limit and not args.no_limits:
                        row["peak MiB"] = f"not run (> {limit:,})"
                    elif args.reuse and key in saved:
                        row = saved[key]
                    else:
                        res = run_one(method, phase, n, n_i, args.timeout)
                        if "error" in res:
                            row["peak MiB"] = res["error"]
                        else:
                            row.update(
                                {
                                    "peak MiB": res["peak"],
                                    "data MiB": res["data"],
                                    "seconds": res["seconds"],
                                }
                            )
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    if "data MiB" in row:
                        saved[key] = row
                        _save(saved)
    columns = [
        "sweep",
        "method",
        "phase",
        "subjects",
        "points per subject",
        "data MiB",
        "peak MiB",
        "seconds",
    ]
    formats = {"data MiB": ".1f", "peak MiB": ".1f", "seconds": ".1f"}
    table = markdown_table(rows, columns, formats)
    print(table)
    if args.write:
        body = (
            "Peak memory added by each call (fresh process per row; the larger "
            "of the resident high-water mark and tracemalloc's peak), against "
            "points per subject (20 subjects) and subjects (10 points each); a "
            f"101-point output grid; {os.cpu_count()} cores.\n\n" + table + NOTES
        )
        write_section("memory", "Memory against data size", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
