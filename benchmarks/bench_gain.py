"""GAIN against PACE on the SAND paper's process, and GAIN's error against iterations.

For each sparsity (n_i = 30, 8-12, 3-5) draws ``--n`` subjects (default
1,000) of :func:`fdaimpute.simulate.sand_paper` (seed ``--seed``), fits on
the training split (90%) and scores the test split (5%) against the
noise-free curves on the 101-point grid (MSE and TV x 1000). Rows: PACE
(``random_state=0``), the column means of the true training curves (what
imputing each grid time by its mean would reach at best), GAINImputer with
its defaults (early stopping on held-out bins) and GAIN run for a fixed
number of iterations with no bins held out (``validation_fraction=0``),
the way the reference implementation runs. Every GAIN keeps the observed
bins (``keep_observed=True``, GAIN's usual output). One torch thread.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_gain.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table  # noqa: E402

import fdaimpute as fi  # noqa: E402

SPARSITY = {"30": 30, "8-12": "8-12", "3-5": "3-5"}
FIXED_ITERATIONS = (50, 350, 1000, 3000)


def _methods(sim, seed):
    grid = sim.grid
    gain = dict(grid=grid, keep_observed=True, random_state=seed)
    methods = {
        "PACE": fi.PACEImputer(grid=grid, random_state=0),
        "GAIN (defaults)": fi.GAINImputer(**gain),
    }
    for it in FIXED_ITERATIONS:
        methods[f"GAIN, {it} iterations"] = fi.GAINImputer(
            max_iter=it, validation_fraction=0.0, **gain
        )
    return methods


def run(n, seed):
    rows = []
    for label, n_obs in SPARSITY.items():
        sim = fi.simulate.sand_paper(n=n, n_obs=n_obs, random_state=seed)
        truth = sim.test.truth
        means = np.broadcast_to(sim.train.truth.mean(axis=0), truth.shape)
        summary = fi.metrics.summarize(truth, means)
        rows_here = [("column means (true curves)", summary, 0.0, "")]
        for name, est in _methods(sim, seed).items():
            start = time.perf_counter()
            est.fit(sim.train.data)
            seconds = time.perf_counter() - start
            summary = fi.metrics.summarize(truth, est.transform(sim.test.data))
            gain = name.startswith("GAIN")
            note = f"{est.best_iter_} / {est.n_iter_}" if gain else ""
            rows_here.append((name, summary, seconds, note))
            print(f"  {label:>5} {name:<26} MSE {summary['mse']:8.1f}", flush=True)
        pace_mse = rows_here[1][1]["mse"]
        for name, summary, seconds, note in rows_here:
            rows.append(
                {
                    "n_i": label,
                    "method": name,
                    "MSE": f"{summary['mse']:.1f} ({summary['mse_se']:.1f})",
                    "TV": f"{summary['tv']:.1f}",
                    "MSE / PACE": f"{summary['mse'] / pace_mse:.2f}",
                    "kept / run iterations": note,
                    "fit s": f"{seconds:.1f}",
                }
            )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    print(f"{machine()}\n")
    rows = run(args.n, args.seed)
    print(f"\nn = {args.n}, seed {args.seed} (MSE and TV x 1000, SE in brackets)\n")
    columns = ["n_i", "method", "MSE", "TV", "MSE / PACE"]
    print(markdown_table(rows, columns + ["kept / run iterations", "fit s"]))


if __name__ == "__main__":
    main()
