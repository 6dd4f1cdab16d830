"""Imputers on processes a linear predictor cannot represent, next to the linear oracle.

Two processes of :mod:`fdaimpute.simulate`: ``phase`` (two bumps at random
places, :func:`~fdaimpute.simulate.phase_variation`) and ``warp`` (a two-peak
template under a random time warp, :func:`~fdaimpute.simulate.time_warping`),
at 8-12 and 3-5 observations per subject, signal-to-noise ratio 4. Each
method's MSE on the test subjects' noise-free curves (101-point grid) is
divided by that of the *linear oracle* (the best linear predictor from the
true mean, covariance and noise variance: what PACE estimates). The
``conditional mean`` row is the best predictor of all (importance sampling
from the true process, :func:`fdaimpute.oracle.posterior_mean`): how far
below 1 a method could go.

``--weight-sweep`` also scores each +base fit with its mix weight (the
weight of the network's curve against the base's) set to 0, 0.25, ..., 1::

    python benchmarks/bench_nonlinear.py --n 10000 --epochs 135 \
        --visible-weight 0.2 --process phase --sparsity 8-12 \
        --methods oracle sand+base --weight-sweep

``--seeds`` fits each neural method once per ``random_state``; rows are kept
per seed and the table gives their mean and each seed's ratio (how much one
training run varies)::

    python benchmarks/bench_nonlinear.py --n 10000 --epochs 135 \
        --visible-weight 0.2 --process phase --sparsity 8-12 \
        --methods oracle sand sand+base --seeds 1 2

Methods are built by the factories in ``METHODS`` (name -> function of the
simulation and the command-line arguments returning an object with
``fit``/``transform``); add a row by adding an entry.

Examples
--------
The run in docs/benchmarks.md (``--write`` replaces its section)::

    python benchmarks/bench_nonlinear.py --n 2000 --test-share 0.1 --epochs 15 \
        --process phase
    python benchmarks/bench_nonlinear.py --n 2000 --test-share 0.1 --epochs 15 \
        --process warp --write

(``--write`` puts the rows of earlier runs of the same size on other processes,
read from ``benchmarks/results/nonlinear/``, in the same table; ``--from-saved
--write`` rewrites the section from those files without fitting anything.)
The statistical methods at the issue's size, in their own section::

    python benchmarks/bench_nonlinear.py --n 10000 --methods oracle mean pace \
        kernel bayes --section nonlinear-statistical --write

A wider network (``--width``; its rows are saved under their own names)::

    python benchmarks/bench_nonlinear.py --n 10000 --epochs 135 --width 64 \
        --process phase --sparsity 8-12 --methods oracle pace sand+base bayes

Without the neural imputers (seconds)::

    python benchmarks/bench_nonlinear.py --methods oracle mean pace kernel bayes
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.data import IrregularData  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "nonlinear"
PROCESSES = {
    "phase": fi.simulate.phase_variation,
    "warp": fi.simulate.time_warping,
}
SPARSITIES = ("8-12", "3-5")
COLUMNS = ["process", "n_i", "method", "MSE", "MSE / linear oracle", "fit s"]


class _MeanCurve:
    """Predicts the process's true mean curve for every subject."""

    def __init__(self, process):
        self.process = process

    def fit(self, data):
        return self

    def transform(self, data):
        grid = np.linspace(*self.process.domain, 101)
        return np.tile(self.process.mean(grid), (len(data), 1))


class _PosteriorMean(_MeanCurve):
    """The conditional mean under the true process (importance sampling)."""

    def transform(self, data):
        return fi.oracle.posterior_mean(self.process, data, n_draws=50_000)


def _neural_params(args, n_fit, seed):
    """Default settings, a few made explicit: epochs, validation share, seed."""
    share = args.validation_fraction
    if share is None:
        share = round(0.05 * n_fit) / n_fit
    params = {"validation_fraction": share, "random_state": seed}
    if args.epochs is not None:
        params["max_epochs"] = args.epochs
    if args.width is not None:
        params.update(d_model=args.width, dim_feedforward=2 * args.width)
    if args.visible_weight is not None:
        params["visible_weight"] = args.visible_weight
    return params


def _vt(sim, args, n_fit, seed, **extra):
    from fdaimpute.neural import VTImputer

    return VTImputer(**_neural_params(args, n_fit, seed), **extra)


def _sand(sim, args, n_fit, seed, **extra):
    from fdaimpute.neural import SANDImputer

    return SANDImputer(**_neural_params(args, n_fit, seed), **extra)


# row label -> factory(sim, args, n_fit, seed): an object with fit(data) and
# transform(data); ``seed`` is the neural imputers' random_state
METHODS = {
    "linear oracle": lambda sim, args, n_fit, seed: fi.oracle.ConditionalMean(
        sim.process
    ),
    "mean curve": lambda sim, args, n_fit, seed: _MeanCurve(sim.process),
    "PACE": lambda sim, args, n_fit, seed: fi.PACEImputer(),
    "kernel": lambda sim, args, n_fit, seed: fi.KernelImputer(),
    "VT": lambda sim, args, n_fit, seed: _vt(sim, args, n_fit, seed, base=None),
    "SAND": lambda sim, args, n_fit, seed: _sand(sim, args, n_fit, seed, base=None),
    "VT+base": lambda sim, args, n_fit, seed: _vt(sim, args, n_fit, seed, base="pace"),
    "SAND+base": lambda sim, args, n_fit, seed: _sand(
        sim, args, n_fit, seed, base="pace"
    ),
    "conditional mean": lambda sim, args, n_fit, seed: _PosteriorMean(sim.process),
}
#: Methods that depend on ``--seeds`` (their rows record their seed).
SEEDED = ("VT", "SAND", "VT+base", "SAND+base")
ALIASES = {
    "oracle": "linear oracle",
    "mean": "mean curve",
    "pace": "PACE",
    "kernel": "kernel",
    "vt": "VT",
    "sand": "SAND",
    "vt+base": "VT+base",
    "sand+base": "SAND+base",
    "bayes": "conditional mean",
}


def _weight_sweep(est, test, truth, weights=(0.0, 0.25, 0.5, 0.75, 0.9, 1.0)):
    """Test MSE of a fitted +base imputer, its mix weight set to each of ``weights``."""
    import torch

    gate = est.module_.base_gate
    kept = float(gate.detach())
    out = {}
    with torch.no_grad():
        for weight in weights:
            gate.fill_(weight)
            out[f"{weight:g}"] = fi.metrics.summarize(truth, est.transform(test))["mse"]
        gate.fill_(kept)
    return out


def results_prefix(
    n,
    test_share,
    epochs,
    width=None,
    visible_weight=None,
    weight_sweep=False,
    validation_fraction=None,
):
    """The start of the saved rows' file names of a run with these options."""
    prefix = f"n{n}_t{test_share:g}_e{epochs or 'default'}"
    if validation_fraction is not None:
        prefix += f"_val{validation_fraction:g}"
    if width is not None:
        prefix += f"_w{width}"
    if visible_weight is not None:
        prefix += f"_vw{visible_weight:g}"
    if weight_sweep:
        prefix += "_sweep"
    return prefix


def simulate(name, n, sparsity, share):
    """The process's draw of ``n`` subjects and the subjects fitted.

    ``share`` of the subjects are test subjects and as many are validation
    subjects, fitted with the training ones (seed 0).
    """
    sim = PROCESSES[name](
        n, n_obs=sparsity, split=(1 - 2 * share, share, share), random_state=0
    )
    return sim, IrregularData.concat([sim.train.data, sim.validation.data])


def run_one(name, sparsity, args):
    sim, fit_data = simulate(name, args.n, sparsity, args.test_share)
    test, truth = sim.test.data, sim.test.truth
    rows = []
    for method in ["linear oracle"] + [m for m in args.methods if m != "linear oracle"]:
        for seed in args.seeds if method in SEEDED else [None]:
            rows.append(_fit_and_score(method, seed, sim, fit_data, test, truth, args))
            rows[-1].update(process=name, n_i=sparsity)
    lin = rows[0]["mse"]
    for row in rows:
        row["MSE / linear oracle"] = row["mse"] / lin
        seed = "" if row.get("seed") is None else f" (seed {row['seed']})"
        print(
            f"  {name} {sparsity} {row['method']:>16}{seed}: MSE {row['MSE']}, "
            f"ratio {row['MSE / linear oracle']:.3f}, fit {row['fit s']:.0f} s",
            flush=True,
        )
    if "linear oracle" not in args.methods:
        rows = rows[1:]
    return rows


def _fit_and_score(method, seed, sim, fit_data, test, truth, args):
    """One method's row: fitted on ``fit_data``, scored on the test subjects."""
    est = METHODS[method](sim, args, len(fit_data), 0 if seed is None else seed)
    start = time.perf_counter()
    est.fit(fit_data)
    seconds = time.perf_counter() - start
    s = fi.metrics.summarize(truth, est.transform(test))
    row = {
        "method": method,
        "mse": s["mse"],
        "mse_se": s["mse_se"],
        "MSE": f"{s['mse']:.2f} ({s['mse_se']:.2f})",
        "fit s": seconds,
    }
    if seed is not None:
        row["seed"] = seed
    gain = getattr(est, "start_gain_", None)
    if gain is not None:  # the base gate's verdict: (gain, z, p)
        row["start gain"] = [float(v) for v in gain]
    if getattr(est, "base_weight_", None) is not None:
        row["base weight"] = est.base_weight_
        if args.weight_sweep:
            row["MSE at weight"] = _weight_sweep(est, test, truth)
    return row


def sweep_table(rows):
    """The ``--weight-sweep`` scores as a table (x the linear oracle), or ''.

    One line per +base fit: its seed, the weight it kept and its test MSE
    with the weight set to each swept value (0: the base, 1: the network).
    """
    oracle = {
        (r["process"], r["n_i"]): r["mse"]
        for r in rows
        if r["method"] == "linear oracle"
    }
    lines = []
    for row in rows:
        sweep = row.get("MSE at weight")
        if not sweep or (row["process"], row["n_i"]) not in oracle:
            continue
        lin = oracle[row["process"], row["n_i"]]
        lines.append(
            {
                **{k: row[k] for k in ("process", "n_i", "method")},
                "seed": row_seed(row),
                "weight kept": f"{row['base weight']:.2f}",
                **{w: f"{mse / lin:.3f}" for w, mse in sweep.items()},
            }
        )
    if not lines:
        return ""
    weights = [k for k in lines[0] if k not in ("process", "n_i", "method", "seed")]
    return markdown_table(lines, ["process", "n_i", "method", "seed", *weights], {})


def row_seed(row):
    """The seed of a saved row: 0 for neural rows saved before ``--seeds``."""
    return row.get("seed", 0 if row["method"] in SEEDED else None)


def over_seeds(rows):
    """One row per process, n_i and method: the mean over the seeds run.

    A method run with several seeds gets its mean MSE and ratio, the mean
    standard error over test subjects, the ratio of each seed in ``per
    seed`` and the mean fit time.
    """
    groups = {}
    for row in rows:
        groups.setdefault((row["process"], row["n_i"], row["method"]), []).append(row)
    out = []
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        group = sorted(group, key=row_seed)
        mse, se = (float(np.mean([r[k] for r in group])) for k in ("mse", "mse_se"))
        ratios = [r["MSE / linear oracle"] for r in group]
        out.append(
            {
                **{k: group[0][k] for k in ("process", "n_i", "method")},
                "mse": mse,
                "mse_se": se,
                "MSE": f"{mse:.2f} ({se:.2f})",
                "MSE / linear oracle": float(np.mean(ratios)),
                "per seed": " / ".join(
                    f"{r:.3f} ({row_seed(g)})" for r, g in zip(ratios, group)
                ),
                "fit s": float(np.mean([r["fit s"] for r in group])),
            }
        )
    return out


def save(rows, stem):
    """Write ``rows`` to ``stem``.json/.csv, keeping saved rows not re-run.

    Returns all the rows written.
    """
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{stem}.json"
    if path.exists():

        def key(r):
            return r["process"], r["n_i"], r["method"], row_seed(r)

        new = {key(r) for r in rows}
        kept = [r for r in json.loads(path.read_text()) if key(r) not in new]
        rows = kept + rows
        order = {m: i for i, m in enumerate(METHODS)}
        rows.sort(
            key=lambda r: (
                r["process"],
                r["n_i"] != "8-12",
                order[r["method"]],
                row_seed(r) or 0,
            )
        )
    path.write_text(json.dumps(rows, indent=1) + "\n")
    keys = [
        "process",
        "n_i",
        "method",
        "seed",
        "mse",
        "mse_se",
        "MSE / linear oracle",
        "fit s",
    ]
    with open(RESULTS / f"{stem}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="subjects")
    parser.add_argument("--epochs", type=int, default=None, help="VT/SAND max_epochs")
    parser.add_argument(
        "--width",
        type=int,
        default=None,
        help="VT/SAND d_model (feed-forward twice as wide); default: the preset's",
    )
    parser.add_argument(
        "--visible-weight",
        type=float,
        default=None,
        help="VT/SAND visible_weight (loss weight of the points the encoder sees); "
        "default: the preset's",
    )
    parser.add_argument(
        "--validation-fraction",
        type=float,
        default=None,
        help="VT/SAND validation_fraction; default: 0.05 (the imputers' own "
        "default is 0.1)",
    )
    parser.add_argument(
        "--weight-sweep",
        action="store_true",
        help="also score +base fits with their mix weight set to 0, 0.25, ..., 1 "
        "(rows saved under a stem ending in _sweep)",
    )
    parser.add_argument(
        "--seeds",
        nargs="+",
        type=int,
        default=[0],
        help="random_state of the neural imputers, one fit each (rows are kept "
        "per seed; the table gives their mean and each seed's ratio)",
    )
    parser.add_argument(
        "--test-share",
        type=float,
        default=0.05,
        help="share of test subjects (and of validation subjects); default 0.05",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        default=list(METHODS),
        help=f"row labels {list(METHODS)} or short names {list(ALIASES)}",
    )
    parser.add_argument("--process", nargs="+", default=list(PROCESSES))
    parser.add_argument("--sparsity", nargs="+", default=list(SPARSITIES))
    parser.add_argument("--write", action="store_true", help="update the docs")
    parser.add_argument(
        "--section", default="nonlinear", help="section of docs/benchmarks.md"
    )
    parser.add_argument(
        "--from-saved",
        action="store_true",
        help="fit nothing: table the saved rows of runs of this size",
    )
    args = parser.parse_args(argv)
    args.methods = [ALIASES.get(m, m) for m in args.methods]
    unknown = [m for m in args.methods if m not in METHODS] + [
        p for p in args.process if p not in PROCESSES
    ]
    if unknown:
        parser.error(f"unknown methods or processes: {unknown}")
    prefix = results_prefix(
        args.n,
        args.test_share,
        args.epochs,
        args.width,
        args.visible_weight,
        args.weight_sweep,
        args.validation_fraction,
    )
    stem = f"{prefix}_{'+'.join(args.process)}"
    rows = []
    if not args.from_saved:
        print(machine(), flush=True)
        start = time.perf_counter()
        for name in args.process:
            for sparsity in args.sparsity:
                rows.extend(run_one(name, sparsity, args))
        print(f"total {time.perf_counter() - start:.0f} s; rows in {stem}.json/.csv")
        rows = save(rows, stem)
    if args.write or args.from_saved:
        # one table for runs of the same size on different processes
        for path in sorted(RESULTS.glob(f"{prefix}_*.json")):
            if path.stem != stem or args.from_saved:
                saved = json.loads(path.read_text())
                done = {r["process"] for r in rows}
                rows.extend(r for r in saved if r["process"] not in done)
        rows.sort(key=lambda r: list(PROCESSES).index(r["process"]))
    sweeps = sweep_table(rows)
    rows = over_seeds(rows)
    seeded = any("per seed" in r for r in rows)
    columns = COLUMNS + (["per seed"] if seeded else [])
    table = markdown_table(
        rows, columns, {"MSE / linear oracle": ".3f", "fit s": ".0f"}
    )
    print(table)
    if sweeps:
        print("\nMSE / linear oracle with the mix weight set to each value:\n")
        print(sweeps)
    if args.write:
        title = "Non-linear processes: phase variation and warping"
        if args.section != "nonlinear":
            title += f" ({args.section})"
        write_section(args.section, title, _body(args, prefix, table, seeded))


def _body(args, prefix, table, seeded=False):
    n_test = round(args.test_share * args.n)
    epochs = f", max_epochs={args.epochs}" if args.epochs else ""
    if args.width is not None:
        epochs += f", d_model={args.width}, dim_feedforward={2 * args.width}"
    if args.visible_weight is not None:
        epochs += f", visible_weight={args.visible_weight:g}"
    share = 0.05 if args.validation_fraction is None else args.validation_fraction
    held_out = f"{share:.0%}"
    seeds = (
        "\nA row with `per seed` is the mean of fits with several `random_state`s "
        "(`--seeds`; the test subjects and data are the same), and lists each "
        "seed's ratio: the spread is what training alone varies."
        if seeded
        else ""
    )
    return f"""
The processes of `fi.simulate.phase_variation` (two Gaussian bumps whose places move by
up to 0.12) and `fi.simulate.time_warping` (a two-peak template under a random monotone
time warp, times a random amplitude), SNR 4. {args.n} subjects: {n_test} test subjects,
as many validation subjects (used with the training subjects to fit); VT and SAND hold
out {held_out} of the fitted subjects for their own validation, default settings
(`preset="cpu"`{epochs}). MSE x 1000 (standard error over test subjects) on the
101-point grid against the noise-free curves, divided by the *linear oracle*'s
(`fi.oracle.ConditionalMean`: the best linear predictor from the true mean, covariance
and noise variance, the limit of PACE). `conditional mean` is the best predictor of all
(`fi.oracle.posterior_mean`, importance sampling from the true process): the room a
non-linear method has below 1. Timings were taken on a shared 2-core machine: compare
them within a run only. Each process may come from its own run with the same `--n`,
`--test-share` and `--epochs` (`--process NAME`; `--from-saved` tables the saved rows):
`benchmarks/results/nonlinear/{prefix}_*.json` (and `.csv`).{seeds}

{table}
"""


if __name__ == "__main__":
    main()
