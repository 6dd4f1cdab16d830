"""When a correction of the PACE base is kept: the two tests, case by case.

With ``base="pace"`` the neural imputers keep their best epoch only if, on
comparison subjects that did not choose it, its held-out error is lower
than the base's by at least one standard error (``z``) and the subjects'
errors drop consistently (one-sided Wilcoxon signed-rank ``p`` < 0.05).
This script fits SAND on a PACE base with the signed-rank test switched off,
so that every correction passing the first test is kept, and prints for
each case ``z``, ``p``, what each rule decides, and what the correction
costs or gains against PACE: on real data the MSE on held-out observations
(the split of ``bench_realdata.py``, 1,000 subjects drawn for UK
electricity), on simulated data the MSE against the true curves of the test
subjects. A rejected correction gives the base, refitted on every subject,
that is PACE.

Usage::

    python benchmarks/bench_base_gate.py --threads 1 --write
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, write_section  # noqa: E402
from bench_realdata import DATASETS, held_out_split, squared_errors  # noqa: E402

import fdaimpute as fi  # noqa: E402

# (data, split) on real data; (process, n) on simulated data at 8-12 points
CASES = [
    ("uk-3-5", 3),
    ("uk-3-5", 4),
    ("framingham", 0),
    ("time_warping", 2000),
    ("phase_variation", 2000),
]
COLUMNS = ["case", "z", "p", "mean-gain rule", "both tests", "correction MSE / PACE"]


class UngatedSAND(fi.SANDImputer):
    """SAND whose correction is kept on the standard-error test alone."""

    def _trainer_options(self):
        return {**super()._trainer_options(), "start_level": 1.0}


def real_case(name, split):
    """Correction's and PACE's held-out MSE on one split of a real data set."""
    _, visible, hidden, rows = held_out_split(DATASETS[name](), split, 1000)

    def mse(est):
        est.fit(visible)
        return float(np.mean(squared_errors(est, visible, hidden, rows))), est

    sand, model = mse(UngatedSAND(base="pace", random_state=0))
    pace, _ = mse(fi.PACEImputer(random_state=0))
    return model, sand / pace


def simulated_case(process, n):
    """Correction's and PACE's MSE against the test subjects' true curves."""
    sim = getattr(fi.simulate, process)(n=n, n_obs="8-12", random_state=0)

    def mse(est):
        curves = est.fit(sim.train.data).transform(sim.test.data)
        return float(np.mean((curves - sim.test.truth) ** 2)), est

    sand, model = mse(
        UngatedSAND(grid=sim.grid, base="pace", max_epochs=15, random_state=0)
    )
    pace, _ = mse(fi.PACEImputer(grid=sim.grid, random_state=0))
    return model, sand / pace


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    start, rows = time.perf_counter(), []
    for name, size in CASES:
        real = name in DATASETS
        model, ratio = real_case(name, size) if real else simulated_case(name, size)
        label = f"{name}, split {size}" if real else f"{name}, n = {size}, 8-12"
        if model.start_gain_ is None:
            z, p = float("-inf"), 1.0
        else:
            _, z, p = model.start_gain_
        kept_z = z >= 1.0
        rows.append(
            {
                "case": label,
                "z": f"{z:.2f}",
                "p": f"{p:.3f}",
                "mean-gain rule": "correction" if kept_z else "PACE",
                "both tests": "correction" if kept_z and p < 0.05 else "PACE",
                "correction MSE / PACE": f"{ratio:.3f}" if kept_z else "",
            }
        )
        print(markdown_table(rows[-1:], COLUMNS), flush=True)
    table = markdown_table(rows, COLUMNS)
    minutes = (time.perf_counter() - start) / 60
    print(table, f"\n{minutes:.1f} min, {machine()}")
    if args.write:
        body = (
            'SAND with `base="pace"` (default settings; 15 epochs on the simulated '
            "processes), its correction kept on the standard-error test alone. "
            "`z`: the best epoch's drop in held-out error on the comparison "
            "subjects, in standard errors; `p`: one-sided Wilcoxon signed-rank "
            "test of the subjects' drops. `correction MSE / PACE`: what keeping "
            "the correction gives (held-out observations on real data, true "
            "curves on simulated data); blank where no rule keeps it. "
            f"{minutes:.0f} min.\n\n{table}\n"
        )
        write_section("base-gate", "Keeping a correction of the base", body)


if __name__ == "__main__":
    main()
