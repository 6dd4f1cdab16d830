"""Calibration of every imputer's bands on held-out real observations.

For each data set (UK electricity at three sparsities, Framingham), each
subsample size ``--sizes`` (that many subjects drawn at random per split;
``all`` keeps every subject, at most ``--max-subjects``) and each of
``--splits`` random splits, every subject with more than two observations
hides 20% of them (:func:`fdaimpute.metrics.split_held_out`); each method is
fitted on the visible observations and gives, for each hidden value, a
prediction and a predictive standard deviation ``sqrt(sd^2 + noise)`` (the
curve's SD from ``transform(return_std=True)`` plus the measurement noise at
that time, ``noise_variance_at(t)``, or ``noise_variance_`` for an imputer
without it; rows saved without a ``"noise"`` entry, before 2026-11-28, used
``noise_variance_`` throughout). With the standardised errors ``z = (y - pred)
/ predictive sd`` it reports, as mean (standard error) over splits: the
coverage of the central 50%, 80% and 95% Gaussian intervals, the worst split's
95% coverage, the root mean square of z (1 if calibrated) and a robust scale
of z (1.4826 median |z|, for heavy tails). ``--plot`` draws a reliability
diagram (observed against nominal coverage, pooled over splits, at the largest
size).

Usage::

    python benchmarks/bench_calibration.py --datasets framingham --sizes 90
    python benchmarks/bench_calibration.py --save-rows a.json
    python benchmarks/bench_calibration.py --splits 2 --first-split 5 --save-rows b.json
    python benchmarks/bench_calibration.py --load-rows a.json b.json --write
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import DOC, machine, markdown_table, mean_se, write_section  # noqa: E402
from bench_stability import observation_noise  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.metrics import split_held_out  # noqa: E402

DATASETS = {
    "uk-30": lambda: fi.datasets.load_uk_electricity("dense").data,
    "uk-8-12": lambda: fi.datasets.load_uk_electricity("sparse").data,
    "uk-3-5": lambda: fi.datasets.load_uk_electricity("ssparse").data,
    "framingham": lambda: fi.datasets.load_framingham().data,
}


def _neural(cls, args):
    epochs = {} if args.epochs is None else {"max_epochs": args.epochs}
    return cls(base=None, random_state=args.seed, **epochs)


METHODS = {
    "PACE": lambda a: fi.PACEImputer(random_state=a.seed),
    "VT": lambda a: _neural(fi.VTImputer, a),
    "SAND": lambda a: _neural(fi.SANDImputer, a),
}
# nominal levels of the reliability diagram; the table shows three of them
LEVELS = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99])
TABLE_LEVELS = (0.5, 0.8, 0.95)
COLUMNS = ["data", "n", "method", "50%", "80%", "95%", "worst 95%", "RMS z"]
COLUMNS += ["robust z", "noise", "fit s"]


def interval_coverage(z, levels=LEVELS):
    """Share of standardised errors inside each central Gaussian interval.

    Parameters
    ----------
    z : array-like
        Standardised errors ``(y - prediction) / predictive sd``.
    levels : array-like
        Nominal levels in (0, 1).

    Returns
    -------
    ndarray
        For each level, the share of ``|z| <= Phi^-1((1 + level) / 2)``.
    """
    z = np.abs(np.asarray(z, dtype=float))
    half = norm.ppf((1 + np.asarray(levels, dtype=float)) / 2)
    return (z[:, None] <= half[None, :]).mean(axis=0)


def z_scores(y, pred, sd, noise_variance):
    """Errors over the predictive SD ``sqrt(sd^2 + noise_variance)``."""
    return (np.asarray(y) - pred) / np.sqrt(np.asarray(sd) ** 2 + noise_variance)


def split_score(z):
    """Calibration figures of one split's standardised errors."""
    z = np.asarray(z, dtype=float)
    return {
        "coverage": interval_coverage(z, LEVELS).tolist(),
        "rms_z": float(np.sqrt(np.mean(z**2))),
        "robust_z": float(1.4826 * np.median(np.abs(z))),
        "n_hidden": int(z.size),
    }


def _level_index(level):
    return int(np.flatnonzero(np.isclose(LEVELS, level))[0])


def _groups(rows):
    """Per-split rows grouped by (data, n, method), in first-seen order."""
    groups = {}
    for r in rows:
        groups.setdefault((r["data"], r["n"], r["method"]), []).append(r)
    return groups


def summarize(rows):
    """Table rows, one per (data, n, method), from per-split rows."""
    out = []
    for (name, n, method), group in _groups(rows).items():
        cov = np.array([r["coverage"] for r in group])
        row = {"data": name, "n": n, "method": method}
        for level in TABLE_LEVELS:
            col = cov[:, _level_index(level)]
            row[f"{round(100 * level)}%"] = "{:.3f} ({:.3f})".format(*mean_se(col))
        row["worst 95%"] = f"{cov[:, _level_index(0.95)].min():.3f}"
        for key, label in [("rms_z", "RMS z"), ("robust_z", "robust z")]:
            row[label] = "{:.2f} ({:.2f})".format(*mean_se([r[key] for r in group]))
        noise = sorted({r.get("noise", "constant") for r in group})
        row["noise"] = " + ".join(noise)
        row["fit s"] = f"{np.mean([r['seconds'] for r in group]):.0f}"
        out.append(row)
    return out


def pooled_coverage(rows):
    """Coverage at ``LEVELS`` pooled over splits (weighted by hidden points)."""
    weights = np.array([r["n_hidden"] for r in rows], dtype=float)
    cov = np.array([r["coverage"] for r in rows])
    return weights @ cov / weights.sum()


def subsample(data, size, split, args):
    """The subjects of one split: ``size`` at random, or all (capped)."""
    n = min(len(data), args.max_subjects if size == "all" else int(size))
    if n == len(data):
        return data
    rng = np.random.default_rng((args.seed, split, n))
    return data.take(np.sort(rng.choice(len(data), n, replace=False)))


def one_split(name, data, size, split, args):
    """Per-split rows of every method on one data set, size and split."""
    data = subsample(data, size, split, args)
    visible, hidden, rows = split_held_out(data, 0.2, min_keep=2, random_state=split)
    grid = np.unique(hidden.times)
    subject = np.repeat(rows, hidden.n_obs)
    column = np.searchsorted(grid, hidden.times)
    out = []
    for method in args.methods:
        est = METHODS[method](args)
        start = time.perf_counter()
        est.fit(visible)
        seconds = time.perf_counter() - start
        lo, hi = est.time_range_
        if grid[0] < lo or grid[-1] > hi:
            est.set_params(extrapolate="clip")
        curves, sd = est.transform(visible, return_std=True, grid=grid)
        noise = observation_noise(est, hidden.times)
        z = z_scores(hidden.values, curves[subject, column], sd[subject, column], noise)
        row = {"data": name, "size": size, "n": len(data), "method": method}
        row["noise"] = "time" if hasattr(est, "noise_variance_at") else "constant"
        row.update(split=split, seconds=seconds, **split_score(z))
        out.append(row)
        print(
            f"  {name} n={len(data)} split {split} {method:<5} "
            f"95% {row['coverage'][_level_index(0.95)]:.3f} "
            f"RMS z {row['rms_z']:.2f} {seconds:.0f} s",
            flush=True,
        )
    return out


def plot(rows, path):
    """Reliability diagram: one panel per data set, at its largest size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["data"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.4))
    for ax, name in zip(np.atleast_1d(axes), names):
        sel = [r for r in rows if r["data"] == name]
        n = max(r["n"] for r in sel)
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
        for method in dict.fromkeys(r["method"] for r in sel):
            group = [r for r in sel if r["n"] == n and r["method"] == method]
            ax.plot(LEVELS, pooled_coverage(group), marker="o", ms=3, label=method)
        ax.set(title=f"{name} (n={n})", xlabel="nominal", xlim=(0, 1), ylim=(0, 1))
        ax.set_aspect("equal")
    np.atleast_1d(axes)[0].set_ylabel("observed coverage")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--sizes", nargs="+", default=["90", "250", "all"])
    parser.add_argument("--max-subjects", dest="max_subjects", type=int, default=1000)
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--first-split", dest="first_split", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--save-rows", dest="save_rows")
    parser.add_argument("--load-rows", dest="load_rows", nargs="+")
    parser.add_argument("--plot", default=None)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    for name, choices in [("datasets", DATASETS), ("methods", METHODS)]:
        unknown = set(getattr(args, name)) - set(choices)
        if unknown:
            parser.error(
                f"unknown {name} {sorted(unknown)}; choose from {list(choices)}"
            )
    bad = [s for s in args.sizes if s != "all" and not (s.isdigit() and int(s) > 0)]
    if bad:
        parser.error(f"--sizes takes positive integers or 'all', got {bad}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.load_rows:
        runs = [json.loads(Path(p).read_text()) for p in args.load_rows]
    else:
        start = time.perf_counter()
        rows = []
        for name in args.datasets:
            data = DATASETS[name]()
            for size in args.sizes:
                for split in range(args.first_split, args.first_split + args.splits):
                    rows += one_split(name, data, size, split, args)
                print(markdown_table(summarize(rows), COLUMNS), flush=True)
        runs = [
            {
                "rows": rows,
                "command": "python " + " ".join(sys.argv),
                "machine": machine(),
                "minutes": (time.perf_counter() - start) / 60,
                "max_subjects": args.max_subjects,
            }
        ]
        if args.save_rows:
            Path(args.save_rows).write_text(json.dumps(runs[0], indent=1))
    # a split run again in a later file replaces the earlier one
    unique = {}
    for r in (r for run in runs for r in run["rows"]):
        unique[r["data"], r["n"], r["method"], r["split"]] = r
    order = {k: i for i, k in enumerate([*DATASETS, *METHODS])}
    rows = sorted(
        unique.values(),
        key=lambda r: (order.get(r["data"], 99), r["n"], order.get(r["method"], 99)),
    )
    table = markdown_table(summarize(rows), COLUMNS)
    cap = max(run.get("max_subjects", args.max_subjects) for run in runs)
    note = (
        f"n: subjects per split (size `all` capped at {cap} drawn at random, "
        "so UK electricity's 5,494 become that many)."
    )
    print(table)
    print(note)
    path = args.plot or (DOC.parent / "img" / "calibration.png" if args.write else None)
    if path:
        plot(rows, path)
    if args.write:
        runs_text = "\n".join(
            f"- `{r['command']}`: {r['minutes']:.0f} min, {r['machine']}" for r in runs
        )
        image = os.path.relpath(Path(path).resolve(), DOC.parent)
        body = (
            "Are the bands of `transform(return_std=True)` honest on real data? "
            "Each subject hides 20% of its observations (at least one, two kept); "
            "each method fits on the rest and predicts each hidden value with the "
            "predictive SD `sqrt(sd^2 + noise)` (curve uncertainty plus "
            "measurement noise; `noise`: `time` for the noise at the point's time, "
            "`noise_variance_at(t)`, `constant` for `noise_variance_` at every "
            "time, as rows saved before 2026-11-28 used). With "
            "`z = (y - pred) / predictive SD`: coverage of the central 50/80/95% "
            "Gaussian intervals, the worst split's 95% "
            "coverage, `RMS z` (root mean square of z, 1 if calibrated) and "
            "`robust z` (1.4826 median |z|, insensitive to the heavy tails of the "
            "electricity data); mean (SE) over random splits. Targets: 95% "
            "coverage in 0.90-0.99 and RMS z in 0.8-1.3. Timings were taken on a "
            f"shared machine (compare within one run only). {note} Runs:\n\n"
            f"{runs_text}\n\n{table}\n\n"
            "Reliability diagram (observed against nominal coverage, pooled over "
            f"splits, largest size; on the diagonal if calibrated):\n\n"
            f"![calibration]({image})\n"
        )
        write_section("calibration", "Calibration of the bands on real data", body)


if __name__ == "__main__":
    main()
