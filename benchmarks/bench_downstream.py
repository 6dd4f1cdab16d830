"""Downstream prediction from imputed curves, in the spirit of the SAND paper.

The paper predicts each household's next-day mean electricity use from its
imputed curve. The shipped data hold two days per household and no third, so
the targets here are built from what the data hold, always a *later* summary
than the inputs:

- ``uk-<level>``: the household's readings of day 1 (13 November, half-hours
  0-47) at the given sparsity are the input; the target is its mean use on
  day 2, from the 30 ``dense`` readings of the same household that fall on
  day 2 (about 15), a summary the input never sees.
- ``framingham``: the visits up to age 50 are the input; the target is the
  mean BMI (as prepared) of the visits after 50.

Subjects with no input observation or no target observation are left out
(their count is printed). Each method is a scikit-learn ``Pipeline``:
imputer (curve on a grid over the input window) -> ``StandardScaler`` ->
``RidgeCV``, scored by 5-fold cross-validation repeated over ``--repeats``
shuffles, so every imputer is fitted on the training folds only. ``naive``
uses each subject's mean and last input value and its number of inputs in
place of a curve. Reported: RMSE and R^2 on the held-out folds, mean (SE over
repeats), and the RMSE relative to PACE's in the same folds.

Usage::

    python benchmarks/bench_downstream.py --tasks framingham --save-rows a.json
    python benchmarks/bench_downstream.py --load-rows a.json b.json --write
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, mean_se, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402

DAY_ONE_END = 47 / 95  # half-hour 47 of 0..95
FRAMINGHAM_SPLIT = 0.5  # age 50 on the [0, 1] scale of ages 40-60
COLUMNS = ["task", "n", "method", "RMSE", "RMSE / PACE", "R^2", "fit s"]
ALPHAS = np.logspace(-3, 4, 15)


def counts_in(data, lo, hi):
    """Each subject's number of observations with ``lo <= t <= hi``."""
    keep = (data.times >= lo) & (data.times <= hi)
    return np.bincount(data.subject_index[keep], minlength=len(data))


def window(data, lo, hi):
    """The observations with ``lo <= t <= hi`` (every subject must have one)."""
    keep = (data.times >= lo) & (data.times <= hi)
    counts = np.bincount(data.subject_index[keep], minlength=len(data))
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return fi.IrregularData(data.times[keep], data.values[keep], offsets)


def subject_means(data):
    """Each subject's mean value (NaN where it has none)."""
    counts = np.diff(data.offsets)
    sums = np.bincount(data.subject_index, weights=data.values, minlength=len(data))
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts


def uk_task(level):
    """Day-1 readings at ``level`` -> mean of the dense day-2 readings."""

    def build():
        source = fi.datasets.load_uk_electricity(level).data
        dense = fi.datasets.load_uk_electricity("dense").data
        usable = (counts_in(source, 0.0, DAY_ONE_END) > 0) & (
            counts_in(dense, DAY_ONE_END + 1e-9, 1.0) > 0
        )
        index = np.flatnonzero(usable)
        inputs = window(source.take(index), 0.0, DAY_ONE_END)
        later = window(dense.take(index), DAY_ONE_END + 1e-9, 1.0)
        return inputs, subject_means(later), len(source) - index.size, DAY_ONE_END

    return build


def framingham_task():
    """Visits up to age 50 -> mean of the visits after 50."""
    data = fi.datasets.load_framingham().data
    after = FRAMINGHAM_SPLIT + 1e-9
    usable = (counts_in(data, 0.0, FRAMINGHAM_SPLIT) > 0) & (
        counts_in(data, after, 1.0) > 0
    )
    index = np.flatnonzero(usable)
    data = data.take(index)
    inputs = window(data, 0.0, FRAMINGHAM_SPLIT)
    later = window(data, after, 1.0)
    return inputs, subject_means(later), len(usable) - index.size, FRAMINGHAM_SPLIT


TASKS = {
    "uk-30": uk_task("dense"),
    "uk-8-12": uk_task("sparse"),
    "uk-3-5": uk_task("ssparse"),
    "framingham": framingham_task,
}


class Summaries(TransformerMixin, BaseEstimator):
    """Per-subject mean and last value and number of observations (no curve)."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        counts = np.diff(X.offsets)
        last = X.values[X.offsets[1:] - 1]
        return np.column_stack([subject_means(X), last, counts])


def _neural(cls, args, grid, **extra):
    epochs = {} if args.epochs is None else {"max_epochs": args.epochs}
    return cls(grid=grid, random_state=args.seed, **epochs, **extra)


METHODS = {
    "naive": lambda a, g: Summaries(),
    "Kernel": lambda a, g: fi.KernelImputer(grid=g),
    "PACE": lambda a, g: fi.PACEImputer(grid=g, random_state=a.seed),
    "FACE": lambda a, g: fi.FACEImputer(grid=g),
    "VT": lambda a, g: _neural(fi.VTImputer, a, g, base=None),
    "SAND": lambda a, g: _neural(fi.SANDImputer, a, g, base=None),
    "VT+base": lambda a, g: _neural(fi.VTImputer, a, g, base="pace"),
    "SAND+base": lambda a, g: _neural(fi.SANDImputer, a, g, base="pace"),
}


def run_task(name, args):
    """Per-method held-out squared errors of every fold and repeat."""
    inputs, target, left_out, end = TASKS[name]()
    print(f"{name}: {len(inputs)} subjects, {left_out} left out", flush=True)
    index = np.arange(len(inputs))
    if args.n_subjects and args.n_subjects < index.size:
        rng = np.random.default_rng(args.seed)
        index = np.sort(rng.choice(index, args.n_subjects, replace=False))
    X, y = inputs.take(index), target[index]
    grid = np.linspace(0.0, end, args.grid)
    scores = {m: {"sse": [], "sst": [], "n": [], "seconds": []} for m in args.methods}
    for repeat in range(args.repeats):
        folds = KFold(5, shuffle=True, random_state=repeat).split(index)
        for fold, (train, test) in enumerate(folds):
            for method in args.methods:
                pipe = make_pipeline(
                    METHODS[method](args, grid), StandardScaler(), RidgeCV(ALPHAS)
                )
                start = time.perf_counter()
                pipe.fit(X.take(train), y[train])
                seconds = time.perf_counter() - start
                error = pipe.predict(X.take(test)) - y[test]
                record = scores[method]
                record["sse"].append(float(error @ error))
                centred = y[test] - y[train].mean()
                record["sst"].append(float(centred @ centred))
                record["n"].append(int(test.size))
                record["seconds"].append(seconds)
                rmse = np.sqrt(error @ error / test.size)
                print(
                    f"  repeat {repeat} fold {fold} {method:<10} RMSE {rmse:.4f} "
                    f"{seconds:.0f} s",
                    flush=True,
                )
    return summarize(name, index.size, scores, args.repeats)


def summarize(name, n, scores, repeats):
    """Table rows: per repeat, RMSE and R^2 pooled over its five folds."""

    def per_repeat(record, key):
        return np.asarray(record[key], dtype=float).reshape(repeats, -1).sum(axis=1)

    rows = []
    pace_rmse = None
    if "PACE" in scores:
        pace = scores["PACE"]
        pace_rmse = np.sqrt(per_repeat(pace, "sse") / per_repeat(pace, "n"))
    for method, record in scores.items():
        sse, sst = per_repeat(record, "sse"), per_repeat(record, "sst")
        rmse = np.sqrt(sse / per_repeat(record, "n"))
        row = {
            "task": name,
            "n": n,
            "method": method,
            "RMSE": "{:.4f} ({:.4f})".format(*mean_se(rmse)),
            "R^2": "{:.3f} ({:.3f})".format(*mean_se(1.0 - sse / sst)),
            "fit s": f"{np.mean(record['seconds']):.1f}",
        }
        if pace_rmse is not None:
            row["RMSE / PACE"] = "{:.3f} ({:.3f})".format(*mean_se(rmse / pace_rmse))
        rows.append(row)
    return rows


DESCRIPTION = (
    "Each imputer's curve (on a grid over the input window) feeds `StandardScaler` "
    "and `RidgeCV` in one scikit-learn Pipeline, scored by 5-fold cross-validation "
    "repeated over shuffles (mean (SE) over repeats; `RMSE / PACE` paired within "
    "repeats). Targets, built from what the data hold: `uk-<level>`, a household's "
    "mean use on day 2 (from its 30 dense readings that fall on day 2) predicted "
    "from its day-1 readings at that sparsity; `framingham`, the mean of a "
    "participant's values after age 50 from the visits up to 50. `naive`: each "
    "subject's mean and last input value and input count instead of a curve. "
    "Subjects without an input or a target value are left out."
)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-subjects", dest="n_subjects", type=int, default=1000)
    parser.add_argument("--grid", type=int, default=25, help="grid points")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--save-rows", dest="save_rows")
    parser.add_argument("--load-rows", dest="load_rows", nargs="+")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.load_rows:
        runs = [json.loads(Path(p).read_text()) for p in args.load_rows]
    else:
        start = time.perf_counter()
        rows = []
        for name in args.tasks:
            rows += run_task(name, args)
            print(markdown_table(rows, COLUMNS), flush=True)
        runs = [
            {
                "rows": rows,
                "command": "python " + " ".join(sys.argv),
                "machine": machine(),
                "minutes": (time.perf_counter() - start) / 60,
            }
        ]
        if args.save_rows:
            Path(args.save_rows).write_text(json.dumps(runs[0], indent=1))
    rows = [r for run in runs for r in run["rows"]]
    table = markdown_table(rows, COLUMNS)
    print(table)
    if args.write:
        runs_text = "\n".join(
            f"- `{r['command']}`: {r['minutes']:.0f} min, {r['machine']}" for r in runs
        )
        body = f"{DESCRIPTION} Runs:\n\n{runs_text}\n\n{table}\n"
        write_section("downstream", "Downstream prediction from imputed curves", body)


if __name__ == "__main__":
    main()
