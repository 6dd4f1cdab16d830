"""Seconds per training epoch of SAND and VT with their PACE base: the base
computed for every batch, or for groups of batches in one call.

A network with a statistical base asks it, at every training step, for each
subject's curve from the points the encoder sees. One call per batch of 64
subjects pays the base's fixed costs (and, on a GPU, a wait for the device)
every step; the trainer now draws a group of batches' hidden points first
and computes their base in one call (``fdaimpute.nn.training.
BASE_GROUP_SUBJECTS`` subjects). Setting it to 1 gives back one call per
batch, so both are timed in the same run, alternating, each fit the same
(same seed: the same hidden points, the same curves). Reported: the median
seconds per epoch over the timed epochs of each fit (the first epoch
excluded), and the ratio grouped / per batch.

Usage::

    python benchmarks/bench_base_epochs.py
    python benchmarks/bench_base_epochs.py --n 2000 --epochs 4 --repeats 2 --write
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import markdown_table, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.nn import training  # noqa: E402

DATASETS = {
    "uk-30": lambda: fi.datasets.load_uk_electricity("dense").data,
    "uk-3-5": lambda: fi.datasets.load_uk_electricity("ssparse").data,
    "coupled (2 variables)": lambda: (
        fi.simulate.nonlinear_coupling(n=4000, random_state=0).train.data
    ),
}


def seconds_per_epoch(data, model, group, epochs, device):
    """Median seconds of the epochs after the first, with ``group``."""
    saved = training.BASE_GROUP_SUBJECTS
    training.BASE_GROUP_SUBJECTS = group
    try:
        est = getattr(fi, model)(
            max_epochs=epochs + 1,
            random_state=0,
            calibration_folds=None,
            device=device,
        ).fit(data)
    finally:
        training.BASE_GROUP_SUBJECTS = saved
    return float(np.median(est.history_["seconds"][1:])), est.history_["train_loss"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--models", nargs="+", default=["SANDImputer", "VTImputer"])
    parser.add_argument("--n", type=int, default=2000, help="subjects drawn")
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows = []
    for name in args.datasets:
        data = DATASETS[name]()
        pick = np.random.default_rng(0).permutation(len(data))[: args.n]
        data = data.take(np.sort(pick))
        for model in args.models:
            times = {1: [], training.BASE_GROUP_SUBJECTS: []}
            losses = {}
            for _ in range(args.repeats):
                for group in times:
                    sec, loss = seconds_per_epoch(
                        data, model, group, args.epochs, args.device
                    )
                    times[group].append(sec)
                    losses[group] = loss
            one, grouped = (np.median(v) for v in times.values())
            rows.append(
                dict(
                    data=name,
                    n=len(data),
                    model=model.removesuffix("Imputer"),
                    per_batch=one,
                    grouped=grouped,
                    ratio=grouped / one,
                    same_losses=losses[1] == losses[training.BASE_GROUP_SUBJECTS],
                )
            )
            print(rows[-1], flush=True)
    table = markdown_table(
        rows,
        ["data", "n", "model", "per_batch", "grouped", "ratio", "same_losses"],
        {"per_batch": ".2f", "grouped": ".2f", "ratio": ".2f"},
    )
    print(table)
    if args.write:
        body = (
            "Seconds per training epoch (median of the epochs after the first, "
            f"median of {args.repeats} fits alternating) of VT and SAND with "
            f"their default PACE base (multivariate PACE on the coupled "
            f"process), {args.n} subjects, device {args.device}, CPU preset: "
            "`per_batch` computes the base for every batch of 64 subjects "
            "(`BASE_GROUP_SUBJECTS = 1`), `grouped` for "
            f"{training.BASE_GROUP_SUBJECTS} subjects' batches in one call; "
            "`same_losses`: the two fits' training losses are equal, epoch by "
            f"epoch.\n\n{table}\n"
        )
        write_section("base-epochs", "The networks' base, per batch or grouped", body)


if __name__ == "__main__":
    main()
