"""PACE's mean at many observation times: the interpolant against the exact fit.

``fdaimpute._numerics.local_linear.local_linear_at`` evaluates the
local-linear mean through a cubic Hermite interpolant of the exact fit and
its derivative on a grid of ``bandwidth / HERMITE_STEPS`` where the distinct
times outnumber that grid ``HERMITE_MIN_RATIO`` times over. Two tables:

- accuracy: for PACE fitted with its defaults on each small real data set of
  ``benchmarks/_smalldata.py`` (all subjects) and on the SAND paper's
  process at ``--n`` subjects with continuous times, the largest difference
  between the interpolated and the exact mean at ``--points`` random times
  over the time range, relative to the mean's largest absolute value;
- time: on the simulated process, ``transform``, the in-memory ``fit`` and
  the check of every training curve (``_excursion``), with the interpolant
  and with exact evaluation (``HERMITE_MIN_RATIO`` set to infinity), the
  two interleaved ``--repeats`` times in one process; medians.

Usage::

    python benchmarks/bench_mean_at.py
    python benchmarks/bench_mean_at.py --n 100000 --repeats 3 --write
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, write_section  # noqa: E402
from _smalldata import DATASETS  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute._numerics import local_linear as ll  # noqa: E402

SETS = ["blackmore", "pbcseq", "orthodont", "oxboys", "sitka", "framingham-250"]
SETS += ["uk-8-12-50", "uk-8-12-250"]


def continuous(n, seed=0):
    """The SAND paper's process, 8-12 observations per subject at continuous times."""
    sim = fi.simulate.sand_paper(
        n=n, n_obs="8-12", off_grid=True, split=(1.0, 0.0, 0.0), random_state=seed
    )
    return sim.train.data


def accuracy_row(name, data, n_points):
    """Largest relative difference of the interpolated mean from the exact one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = fi.PACEImputer(random_state=0).fit(data)
    mean = est._model.mean
    rng = np.random.default_rng(1)
    points = rng.uniform(*est.time_range_, n_points)
    args = (mean.centres, mean.weight, mean.total)
    start = time.perf_counter()
    fast = ll.local_linear_at(*args, points, mean.bandwidth, mean.kernel)
    fast_s = time.perf_counter() - start
    start = time.perf_counter()
    exact = ll.local_linear_binned(*args, points, mean.bandwidth, mean.kernel)
    exact_s = time.perf_counter() - start
    span = est.time_range_[1] - est.time_range_[0]
    return {
        "data": name,
        "subjects": len(data),
        "bins": mean.centres.size,
        "bandwidth / range": f"{mean.bandwidth / span:.3f}",
        "largest difference": f"{np.abs(fast - exact).max() / np.abs(exact).max():.1e}",
        "interpolated (s)": f"{fast_s:.3f}",
        "exact (s)": f"{exact_s:.3f}",
    }


def timed(what, exact):
    """Seconds of ``what()`` with the interpolant or with exact evaluation."""
    ratio = ll.HERMITE_MIN_RATIO
    if exact:
        ll.HERMITE_MIN_RATIO = np.inf
    try:
        start = time.perf_counter()
        what()
        return time.perf_counter() - start
    finally:
        ll.HERMITE_MIN_RATIO = ratio


def time_rows(data, repeats):
    """Median seconds of transform, fit and the curve check, both ways."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = fi.PACEImputer(random_state=0).fit(data)
        jobs = {
            "transform": lambda: est.transform(data),
            "fit (in memory)": lambda: fi.PACEImputer(random_state=0).fit(data),
            "check of every training curve": lambda: est._excursion(data),
        }
        seconds = {(job, exact): [] for job in jobs for exact in (False, True)}
        for _ in range(repeats):
            for job, what in jobs.items():
                for exact in (True, False):
                    seconds[job, exact].append(timed(what, exact))
    rows = []
    for job in jobs:
        fast = float(np.median(seconds[job, False]))
        slow = float(np.median(seconds[job, True]))
        rows.append(
            {
                "step": job,
                "exact mean (s)": f"{slow:.2f}",
                "interpolated (s)": f"{fast:.2f}",
                "speed-up": f"{slow / fast:.2f}x",
            }
        )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="simulated subjects")
    parser.add_argument("--points", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="update the docs")
    args = parser.parse_args(argv)

    data = continuous(args.n)
    accuracy = [accuracy_row(name, DATASETS[name](), args.points) for name in SETS]
    accuracy.append(accuracy_row(f"SAND process, {args.n:,}", data, args.points))
    acc_columns = list(accuracy[0])
    speed = time_rows(data, args.repeats)
    speed_columns = list(speed[0])
    body = "\n".join(
        [
            "PACE's mean evaluated at observation times through a cubic Hermite "
            "interpolant of the exact local-linear fit and its derivative on a grid of "
            f"bandwidth / {ll.HERMITE_STEPS} (where the distinct times outnumber that "
            f"grid {ll.HERMITE_MIN_RATIO} times over), against the exact fit at each "
            f"time. Accuracy: {args.points:,} random times over each fit's range, the "
            "largest difference relative to the mean's largest absolute value "
            "(PACE's defaults on all subjects of each set). Time: the SAND paper's "
            f"process at {args.n:,} subjects with 8-12 continuous times each, medians "
            f"of {args.repeats} interleaved runs in one process.",
            "",
            markdown_table(accuracy, acc_columns),
            "",
            markdown_table(speed, speed_columns),
        ]
    )
    print(body)
    print(machine())
    if args.write:
        write_section("mean-at", "PACE's mean at many observation times", body)


if __name__ == "__main__":
    main()
