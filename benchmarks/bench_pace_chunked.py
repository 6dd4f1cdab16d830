"""PACE fitted from chunks: time and peak memory against the number of observations.

Subjects of the SAND paper's process (10 observations each, continuous
times) are drawn chunk by chunk - every chunk from its own seed, so the
same chunks come back on each of the three reads and the whole data set is
never in memory - and ``PACEImputer.fit_chunks`` fits them with its
defaults (cross-validated bandwidths and K). Peak memory is tracemalloc's
peak of Python-allocated memory during the fit (the raw data would take
``n_obs * 24`` bytes as times, values and subject offsets). Prints a
markdown table.

Usage::

    python benchmarks/bench_pace_chunked.py                      # 1e5, 1e6 obs
    python benchmarks/bench_pace_chunked.py --n-obs 100000 10000000
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

import fdaimpute as fi
from fdaimpute import IrregularData
from fdaimpute.pace import PACEImputer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

N_OBS_PER_SUBJECT = 10


def chunk_source(n_subjects, chunk_subjects, seed=0):
    """A function returning a new iterator over the simulated chunks."""
    starts = range(0, n_subjects, chunk_subjects)

    def read():
        for number, start in enumerate(starts):
            n = min(chunk_subjects, n_subjects - start)
            sim = fi.simulate.sand_paper(
                n=n,
                n_obs=N_OBS_PER_SUBJECT,
                off_grid=True,
                split=(1.0, 0.0, 0.0),
                random_state=seed + number,
            )
            data = sim.train.data
            ids = start + np.arange(len(data))
            yield IrregularData(data.times, data.values, data.offsets, ids=ids)

    return read


def run(n_obs, chunk_subjects, seed=0):
    """Fit on ``n_obs`` observations; seconds, peak MiB and the model's K."""
    n_subjects = n_obs // N_OBS_PER_SUBJECT
    read = chunk_source(n_subjects, chunk_subjects, seed)
    tracemalloc.start()
    start = time.perf_counter()
    pace = PACEImputer(random_state=seed).fit_chunks(read)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return seconds, peak, pace


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-obs", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--chunk-subjects", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="update the docs")
    args = parser.parse_args(argv)
    rows = []
    for n_obs in args.n_obs:
        seconds, peak, pace = run(n_obs, args.chunk_subjects, args.seed)
        raw = n_obs * 24 / 2**20
        rows.append(
            f"| {n_obs:,} | {n_obs // N_OBS_PER_SUBJECT:,} | {seconds:.1f} "
            f"| {peak:.0f} | {raw:.0f} | {pace.n_components_} |"
        )
        print(rows[-1], flush=True)
    table = "\n".join(
        [
            "| observations | subjects | fit (s) | peak memory (MiB) "
            "| raw data (MiB) | K |",
            "|---:|---:|---:|---:|---:|---:|",
            *rows,
        ]
    )
    print()
    print(table)
    if args.write:
        body = (
            "`PACEImputer(random_state=0).fit_chunks` on the SAND paper's process, "
            f"{N_OBS_PER_SUBJECT} observations per subject at continuous times, "
            f"drawn in chunks of {args.chunk_subjects:,} subjects (each chunk from "
            "its own seed, so the data are never all in memory); defaults, so "
            "bandwidths, K and the noise floor are cross-validated. Peak memory is "
            "tracemalloc's peak during the fit; `raw data` is what the times, "
            "values and offsets alone would take. The machine was shared: compare "
            "within the run only.\n\n" + table + "\n"
        )
        write_section("pace-chunked", "PACE on data larger than memory", body)


if __name__ == "__main__":
    main()
