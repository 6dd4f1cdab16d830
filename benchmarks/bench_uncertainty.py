"""Pointwise uncertainty: are the imputers' standard deviations calibrated?

On the SAND paper's process (n subjects split 80/10/10 here, so the neural
imputers get a held-out share to calibrate on), each imputer gives curves
and pointwise standard deviations ``sd`` for the test subjects; against the
noise-free curves we report

- ``coverage``: share of grid points with ``|curve - truth| <= 1.96 sd``
  (0.95 for a calibrated Gaussian);
- ``MSE / mean sd^2``: 1 when the SDs are right on average;
- ``corr``: correlation over subjects of the actual RMSE and the mean
  predicted SD (does the SD know which subjects are hard?);
- ``width``: mean width of the 95% band.

Rows: the oracle (the true conditional variance), PACE (conditional variance
of its fitted model) and VT / SAND (the error-variance head of
:mod:`fdaimpute.nn.uncertainty`). Also the noise-variance estimates of
:func:`fdaimpute.noise.noise_variance` and PACE against the truth.

With ``--holdout`` it instead checks the neural imputers' calibration for
optimism: it fits them on ``n`` subjects and reports the same figures on
fresh subjects (never seen in fitting) next to those on the imputer's own
epoch-selection and calibration subjects (``split_``); a head calibrated on
the subjects that also chose the epoch would look better there than on
fresh ones.

Usage::

    python benchmarks/bench_uncertainty.py            # print the tables
    python benchmarks/bench_uncertainty.py --write    # also docs/benchmarks.md
    python benchmarks/bench_uncertainty.py --holdout --n 1000 --epochs 20
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import markdown_table, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.noise import noise_variance  # noqa: E402
from fdaimpute.oracle import ConditionalMean  # noqa: E402

SPARSITIES = {"30": 30, "8-12": "8-12", "3-5": "3-5"}
COLUMNS = [
    "n_i",
    "method",
    "MSE",
    "coverage",
    "MSE / mean sd^2",
    "corr",
    "width",
]


def score(curves, sd, truth):
    """Calibration figures of pointwise SDs against the true curves."""
    err = curves - truth
    rmse = np.sqrt((err**2).mean(axis=1))
    return {
        "MSE": float((err**2).mean()),
        "coverage": float(np.mean(np.abs(err) <= 1.96 * sd)),
        "MSE / mean sd^2": float((err**2).mean() / (sd**2).mean()),
        "corr": float(np.corrcoef(rmse, np.sqrt((sd**2).mean(axis=1)))[0, 1]),
        "width": float(2 * 1.96 * sd.mean()),
    }


def run(label, args):
    sim = fi.simulate.sand_paper(
        n=args.n,
        n_obs=SPARSITIES[label],
        random_state=args.seed,
        split=(0.8, 0.1, 0.1),
    )
    fit_data = fi.IrregularData.concat([sim.train.data, sim.validation.data])
    test = sim.test
    estimators = {
        "oracle (true covariance)": ConditionalMean(sim.process),
        "PACEImputer": fi.PACEImputer(random_state=args.seed),
        "VTImputer": fi.VTImputer(
            base=None, max_epochs=args.epochs, random_state=args.seed
        ),
        "SANDImputer": fi.SANDImputer(
            base=None, max_epochs=args.epochs, random_state=args.seed
        ),
    }
    rows = []
    truth_noise = sim.process.noise_sd**2
    noise = {"n_i": label, "true": truth_noise}
    for name, est in estimators.items():
        est.fit(fit_data)
        curves, sd = est.transform(test.data, return_std=True)
        row = {"n_i": label, "method": name, **score(curves, sd, test.truth)}
        if name == "PACEImputer":
            noise["PACE"] = est.noise_variance_
        rows.append(row)
        print(markdown_table([row], COLUMNS, _FORMATS).splitlines()[-1], flush=True)
    noise["noise_variance()"] = noise_variance(fit_data)
    return rows, noise


_FORMATS = {
    "MSE": ".4f",
    "coverage": ".3f",
    "MSE / mean sd^2": ".3f",
    "corr": ".2f",
    "width": ".3f",
}


HOLDOUT_COLUMNS = ["method", "seed", "subjects", "n", "coverage", "MSE / mean sd^2"]


def holdout(args):
    """Calibration on fresh subjects vs the imputer's own held-out subjects."""
    label = args.sparsity[0]
    total = args.n + args.n_fresh
    rows = []
    for seed in range(args.seed, args.seed + args.seeds):
        sim = fi.simulate.sand_paper(
            n=total,
            n_obs=SPARSITIES[label],
            random_state=seed,
            split=(args.n / total, 0.0, args.n_fresh / total),
        )
        for name in args.methods:
            est = getattr(fi, name)(
                max_epochs=args.epochs,
                lr_schedule=args.lr_schedule,
                random_state=seed,
            ).fit(sim.train.data)
            groups = {"fresh": (sim.test.data, sim.test.truth)}
            for part in ("selection", "calibration"):
                index = est.split_[part]
                groups[part] = (sim.train.data.take(index), sim.train.truth[index])
            for part, (data, truth) in groups.items():
                curves, sd = est.transform(data, return_std=True)
                row = {
                    "method": name,
                    "seed": seed,
                    "subjects": part,
                    "n": len(data),
                    **score(curves, sd, truth),
                }
                rows.append(row)
                print(
                    markdown_table([row], HOLDOUT_COLUMNS, _FORMATS).splitlines()[-1],
                    flush=True,
                )
    summary = []
    for name in args.methods:
        for part in ("fresh", "selection", "calibration"):
            sel = [r for r in rows if r["method"] == name and r["subjects"] == part]
            summary.append(
                {
                    "method": name,
                    "seed": "mean",
                    "subjects": part,
                    "n": sel[0]["n"],
                    "coverage": np.mean([r["coverage"] for r in sel]),
                    "MSE / mean sd^2": np.mean([r["MSE / mean sd^2"] for r in sel]),
                }
            )
    print()
    print(
        f"n_i = {label}, n = {args.n} fitted (10% held out inside), "
        f"{args.n_fresh} fresh, {args.epochs} epochs, lr_schedule "
        f"{args.lr_schedule or 'cosine'}, seeds {args.seed}.."
        f"{args.seed + args.seeds - 1}"
    )
    print(markdown_table(rows + summary, HOLDOUT_COLUMNS, _FORMATS))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="subjects (all splits)")
    parser.add_argument("--epochs", type=int, default=100, help="neural max_epochs")
    parser.add_argument(
        "--sparsity", nargs="+", default=list(SPARSITIES), choices=list(SPARSITIES)
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--write", action="store_true", help="update the docs")
    parser.add_argument(
        "--holdout",
        action="store_true",
        help="coverage on fresh vs the imputers' own held-out subjects",
    )
    parser.add_argument(
        "--n-fresh", type=int, default=1000, help="fresh subjects (--holdout)"
    )
    parser.add_argument("--seeds", type=int, default=2, help="seeds (--holdout)")
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["VTImputer", "SANDImputer"],
        choices=["VTImputer", "SANDImputer"],
        help="neural imputers (--holdout)",
    )
    parser.add_argument(
        "--lr-schedule",
        default=None,
        choices=["cosine", "constant"],
        help="neural lr_schedule (--holdout; default: the preset's)",
    )
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    if args.holdout:
        holdout(args)
        return
    rows, noise_rows = [], []
    for label in args.sparsity:
        r, noise = run(label, args)
        rows += r
        noise_rows.append(
            {
                "n_i": label,
                "true": f"{noise['true']:.4f}",
                "noise_variance()": f"{noise['noise_variance()']:.4f} "
                f"({noise['noise_variance()'] / noise['true']:.2f}x)",
                "PACE": f"{noise['PACE']:.4f} ({noise['PACE'] / noise['true']:.2f}x)",
            }
        )
    table = markdown_table(rows, COLUMNS, _FORMATS)
    noise_table = markdown_table(
        noise_rows, ["n_i", "true", "noise_variance()", "PACE"]
    )
    print()
    print(table)
    print()
    print(noise_table)
    if args.write:
        body = (
            f"SAND paper's process, n = {args.n:,} (80/10/10 split: the imputers fit "
            "on the first 90%, the neural ones holding out a tenth of that to "
            f"calibrate their SDs), neural imputers with the CPU preset and "
            f"{args.epochs} epochs, seed {args.seed}. Scored on the test subjects "
            "against the noise-free curves on the 101-point grid: `coverage` of "
            "the pointwise 95% band `curve +- 1.96 sd` (0.95 if calibrated), "
            "`MSE / mean sd^2` (1 if calibrated on average), `corr` (over subjects, "
            "between the actual RMSE and the mean predicted SD) and the band's mean "
            "`width`.\n\n"
            f"{table}\n\n"
            "Noise variance: the difference-based estimate used by the neural "
            "imputers (`fdaimpute.noise.noise_variance`) and PACE's, against the "
            "truth. This process has 20 harmonics, so it is rough at the scale of "
            "the shortest lags between a sparse subject's observations, which biases "
            "both upwards.\n\n"
            f"{noise_table}\n"
        )
        write_section("uncertainty", "Pointwise uncertainty (return_std)", body)


if __name__ == "__main__":
    main()
