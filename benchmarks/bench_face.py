"""FACE against PACE and the oracle on the SAND paper's process, and their speed.

Accuracy: for each sparsity (n_i = 30, 8-12, 3-5) and each seed, draws
``--n`` subjects (default 2,000) of :func:`fdaimpute.simulate.sand_paper`,
fits on the training split and scores the test split against the noise-free
curves on the 101-point grid (MSE x 1000). Rows: the oracle (conditional mean
with the true covariance), PACEImputer(random_state=0) and FACEImputer().

Speed: fit and transform (of the test split) at n = 10,000 and, unless
``--no-big``, n = 100,000 subjects (n_i 8-12, grid times), one run each.

Usage::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_face.py
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
from fdaimpute.face import FACEImputer  # noqa: E402
from fdaimpute.oracle import ConditionalMean  # noqa: E402
from fdaimpute.pace import PACEImputer  # noqa: E402

SPARSITY = {"30": 30, "8-12": "8-12", "3-5": "3-5"}


def _methods(sim):
    return {
        "oracle": ConditionalMean(sim.process, grid=sim.grid),
        "PACE": PACEImputer(random_state=0, grid=sim.grid),
        "FACE": FACEImputer(grid=sim.grid),
    }


def accuracy(n, seeds):
    rows = []
    for label, n_obs in SPARSITY.items():
        scores = {name: [] for name in ("oracle", "PACE", "FACE")}
        fit_s = {name: 0.0 for name in scores}
        for seed in seeds:
            sim = fi.simulate.sand_paper(n=n, n_obs=n_obs, random_state=seed)
            for name, est in _methods(sim).items():
                start = time.perf_counter()
                est.fit(sim.train.data)
                fit_s[name] += time.perf_counter() - start
                pred = est.transform(sim.test.data)
                scores[name].append(fi.metrics.mse(sim.test.truth, pred, scale=1000))
        pace = np.mean(scores["PACE"])
        for name, values in scores.items():
            rows.append(
                dict(
                    n_i=label,
                    method=name,
                    mse=np.mean(values),
                    vs_pace=np.mean(values) / pace,
                    fit_s=fit_s[name] / len(seeds),
                )
            )
    return rows


def speed(sizes):
    rows = []
    for n in sizes:
        sim = fi.simulate.sand_paper(
            n=n, n_obs="8-12", random_state=0, split=(0.95, 0.0, 0.05)
        )
        for name, est in list(_methods(sim).items())[1:]:
            start = time.perf_counter()
            est.fit(sim.train.data)
            fit = time.perf_counter() - start
            start = time.perf_counter()
            pred = est.transform(sim.test.data)
            rows.append(
                dict(
                    n=n,
                    method=name,
                    fit_s=fit,
                    transform_s=time.perf_counter() - start,
                    mse=fi.metrics.mse(sim.test.truth, pred, scale=1000),
                )
            )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--no-big", action="store_true", help="skip n = 100,000")
    args = parser.parse_args(argv)
    print(f"{machine()}\n")
    rows = accuracy(args.n, range(args.seeds))
    print(f"Accuracy, n = {args.n}, mean over {args.seeds} seeds (MSE x 1000)\n")
    print(
        markdown_table(
            rows,
            ["n_i", "method", "mse", "vs_pace", "fit_s"],
            {"mse": ".1f", "vs_pace": ".3f", "fit_s": ".2f"},
        )
    )
    sizes = [10_000] if args.no_big else [10_000, 100_000]
    print("\nSpeed, n_i 8-12 (fit on 95%, transform 5%)\n")
    print(
        markdown_table(
            speed(sizes),
            ["n", "method", "fit_s", "transform_s", "mse"],
            {"fit_s": ".2f", "transform_s": ".2f", "mse": ".1f"},
        )
    )


if __name__ == "__main__":
    main()
