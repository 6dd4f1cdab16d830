"""The SAND paper's real-data table: held-out points, UK electricity and Framingham.

For each data set and each of ``--splits`` random splits, every subject with
more than two observations hides 20% of them (at least one, keeping at least
two: :func:`fdaimpute.metrics.split_held_out`); each method is fitted on the
visible observations of all subjects and predicts the hidden ones
(``predict_at``). Reported per method, as mean (standard error) over splits:
the mean squared error on the hidden observations (x 1000), the total
variation of the imputed curves on the 101-point grid (the roughness of what
a user gets; the data have no true curves), the ratio of the MSE to PACE's
in the same split (paired, so the split-to-split variation cancels), and fit
seconds. With ``--n-subjects`` each split first draws that many subjects at
random (small-data rows).

Raw per-split scores are saved after every split (``--save-rows``), so a long
run can be stopped and its splits kept; ``--split-start`` lets several
processes run different splits of one table (on one GPU, say), and
``--load-rows`` pools the splits of all files before it summarises. For the
networks with a base the saved scores include the gate's decision: the best
epoch, and the comparison of that epoch with the base (gain, z, signed-rank
p-value; :class:`fdaimpute.nn.Trainer`'s ``start_gain``). With
``--subject-errors`` they also hold each subject's summed squared error at its
hidden values and, for a network, the subjects it trained on (``split_``), so
that its error on the subjects it saw can be told from its error on those it
held out for validation.

Usage::

    python benchmarks/bench_realdata.py --datasets framingham --epochs 40
    python benchmarks/bench_realdata.py --n-subjects 250 --save-rows a.json
    python benchmarks/bench_realdata.py --load-rows a.json b.json --write
    python benchmarks/bench_realdata.py --load-rows c.json --section other --write
    python benchmarks/bench_realdata.py --datasets uk-30 --methods PACE SAND \\
        --device cuda --max-time 180 --splits 1 --split-start 3 --save-rows s3.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, mean_se, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.metrics import split_held_out  # noqa: E402
from fdaimpute.nn.regularizers import Roughness  # noqa: E402

DATASETS = {
    "uk-30": lambda: fi.datasets.load_uk_electricity("dense").data,
    "uk-8-12": lambda: fi.datasets.load_uk_electricity("sparse").data,
    "uk-3-5": lambda: fi.datasets.load_uk_electricity("ssparse").data,
    "framingham": lambda: fi.datasets.load_framingham().data,
}


def _neural(cls, args, **extra):
    options = {} if args.epochs is None else {"max_epochs": args.epochs}
    if args.device is not None:
        options["device"] = args.device
    if args.max_time is not None:
        options["max_time"] = args.max_time
    if args.no_calibration:
        # the bands' cross-fitted networks: no effect on the curves scored
        options["calibration_folds"] = None
    return cls(random_state=args.seed, **options, **extra)


def _training_record(est, held_out_mse):
    """What a network's training did, and the base gate's decision.

    With a base, ``base_mse`` is the held-out error of the network's own
    base (``base_``: PACE fitted on the network's training subjects, with
    its own cross-validation draw), so that the network's part of the mix
    is judged apart from the base's own fit.
    """
    if not hasattr(est, "best_epoch_"):
        return {}
    gain = getattr(est, "start_gain_", None)
    record = {
        "best_epoch": int(est.best_epoch_),
        "epochs": int(est.n_epochs_),
        "stop": est.stop_reason_,
        "gate": None if gain is None else [float(g) for g in gain],
    }
    if getattr(est, "base_", None) is not None:
        record["base_mse"] = held_out_mse(est.base_)
    return record


METHODS = {
    "Kernel": lambda a: fi.KernelImputer(),
    "PACE": lambda a: fi.PACEImputer(random_state=a.seed),
    "PACE-fdapace": lambda a: fi.PACEImputer.fdapace(),
    "FACE": lambda a: fi.FACEImputer(),
    "mFPCA": lambda a: fi.MFPCAImputer(),
    "CNP": lambda a: _neural(fi.CNPImputer, a),
    "MICE": lambda a: fi.MICEImputer(random_state=a.seed),
    "GAIN": lambda a: fi.GAINImputer(keep_observed=True, random_state=a.seed),
    "VT": lambda a: _neural(fi.VTImputer, a, base=None),
    # the curvature weight bench_paper.py's validation chose most often
    "VTP": lambda a: _neural(
        fi.VTImputer, a, base=None, regularizers=[Roughness(100.0)]
    ),
    "SAND": lambda a: _neural(fi.SANDImputer, a, base=None),
    "VT+base": lambda a: _neural(fi.VTImputer, a, base="pace"),
    "SAND+base": lambda a: _neural(fi.SANDImputer, a, base="pace"),
}
COLUMNS = [
    "data",
    "n",
    "method",
    "MSE x1000",
    "MSE / PACE",
    "MSE / own base",
    "TV",
    "fit s",
    "kept base",
]


def held_out_split(data, split, n_subjects=None):
    """The subjects and the split of split number ``split``.

    ``n_subjects`` of them drawn at random first (seed ``1000 + split``);
    then every subject with more than two observations hides 20% of them
    (:func:`fdaimpute.metrics.split_held_out`, seed ``split``).

    Returns
    -------
    data, visible, hidden, rows
        The subjects, and ``split_held_out``'s three outputs.
    """
    rng = np.random.default_rng(1000 + split)
    if n_subjects and n_subjects < len(data):
        data = data.take(np.sort(rng.choice(len(data), n_subjects, replace=False)))
    return (data, *split_held_out(data, 0.2, min_keep=2, random_state=split))


def squared_errors(est, visible, hidden, rows):
    """A fitted imputer's squared errors at the hidden values, in their order."""
    times = np.split(hidden.times, hidden.offsets[1:-1])
    pred = np.concatenate(est.predict_at(visible[rows], times))
    return (pred - hidden.values) ** 2


def one_split(data, split, args):
    """Scores of every method on one random split."""
    data, visible, hidden, rows = held_out_split(data, split, args.n_subjects)
    owner = np.repeat(np.arange(len(hidden)), np.diff(hidden.offsets))

    def held_out_mse(est):
        return float(np.mean(squared_errors(est, visible, hidden, rows)))

    scores = {}
    for method in args.methods:
        est = METHODS[method](args)
        start = time.perf_counter()
        est.fit(visible)
        seconds = time.perf_counter() - start
        curves = est.transform(visible)
        errors = squared_errors(est, visible, hidden, rows)
        scores[method] = {
            "mse": float(np.mean(errors)),
            "tv": float(np.mean(np.abs(np.diff(curves, axis=1)).sum(axis=1))),
            "seconds": seconds,
            "kept_base": getattr(est, "best_epoch_", 0) == -1,
            **_training_record(est, held_out_mse),
        }
        if args.subject_errors:
            sse = np.bincount(owner, errors, minlength=len(hidden))
            scores[method]["subject_sse"] = [float(f"{x:.6g}") for x in sse]
            scores[method]["subject_rows"] = [int(r) for r in np.asarray(rows)]
            if hasattr(est, "split_"):
                scores[method]["network_train"] = [int(i) for i in est.split_["train"]]
        gate = scores[method].get("gate")
        print(
            f"  split {split} {method:<13} MSE {1000 * scores[method]['mse']:.3f} "
            f"TV {scores[method]['tv']:.3f} {seconds:.0f} s"
            + (
                f" epochs {scores[method]['epochs']}"
                if "epochs" in scores[method]
                else ""
            )
            + (
                ""
                if gate is None
                else " gate gain/z/p " + " ".join(f"{g:.3g}" for g in gate)
            ),
            flush=True,
        )
    return scores, len(data)


def summarize(name, n, splits, methods):
    """Table rows of one data set from its per-split scores."""
    rows = []
    for method in methods:
        mse = [s[method]["mse"] * 1000 for s in splits]
        tv = [s[method]["tv"] for s in splits]
        row = {
            "data": name,
            "n": n,
            "method": method,
            "MSE x1000": "{:.3f} ({:.3f})".format(*mean_se(mse)),
            "TV": "{:.3f} ({:.3f})".format(*mean_se(tv)),
            "fit s": f"{np.mean([s[method]['seconds'] for s in splits]):.0f}",
            "kept base": "",
        }
        paired = [s for s in splits if "PACE" in s]
        if paired:
            ratio = [s[method]["mse"] / s["PACE"]["mse"] for s in paired]
            row["MSE / PACE"] = "{:.3f} ({:.3f})".format(*mean_se(ratio))
        if "base" in method:
            kept = sum(s[method]["kept_base"] for s in splits)
            row["kept base"] = f"{kept}/{len(splits)}"
            own = [
                s[method]["mse"] / s[method]["base_mse"]
                for s in splits
                if "base_mse" in s[method]
            ]
            if own:
                row["MSE / own base"] = "{:.3f} ({:.3f})".format(*mean_se(own))
        rows.append(row)
    return rows


def pooled_splits(runs):
    """The raw splits of every run that saved them, pooled.

    Returns ``{(data, n): {split: {method: score}}}``: runs that saved the
    same data set at the same size and split (different methods, or
    different processes) are pooled; where two hold the same method, the
    first is kept. Runs at other sizes stay apart.
    """
    pooled = {}
    for run in runs:
        for name, saved in run.get("splits", {}).items():
            splits = pooled.setdefault((name, saved["n"]), {})
            for split, scores in saved["scores"].items():
                for method, score in scores.items():
                    splits.setdefault(int(split), {}).setdefault(method, score)
    return pooled


def _pooled_split_rows(runs):
    """Rows summarised from the raw splits of every run that saved them.

    A method's summary uses the splits where it ran, and its ratio to PACE
    those where both ran (:func:`pooled_splits`).
    """
    rows = []
    for (name, n), by_split in pooled_splits(runs).items():
        splits = [by_split[k] for k in sorted(by_split)]
        methods = [m for m in METHODS if any(m in s for s in splits)]
        for method in methods:
            have = [s for s in splits if method in s]
            rows += summarize(name, n, have, [method])
    return rows


def _merge_rows(runs):
    """The runs' rows, one per data set, size and method, in the order of the tables.

    Splits are seeded by their index, so a method run twice on a data set
    (PACE beside every later run, for the paired ratio) gives the same row;
    the first is kept. Runs with raw splits are pooled first.
    """
    merged = {}
    for row in _pooled_split_rows(runs) + [r for run in runs for r in run["rows"]]:
        merged.setdefault((row["data"], row.get("n"), row["method"]), row)
    data_order, method_order = list(DATASETS), list(METHODS)
    return sorted(
        merged.values(),
        key=lambda r: (
            data_order.index(r["data"]),
            r.get("n") or 0,
            method_order.index(r["method"]),
        ),
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument(
        "--split-start",
        dest="split_start",
        type=int,
        default=0,
        help="index of the first split (splits are seeded by their index)",
    )
    parser.add_argument("--device", default=None, help="the networks' device")
    parser.add_argument(
        "--max-time",
        dest="max_time",
        type=float,
        default=None,
        help="seconds of epochs per network fit",
    )
    parser.add_argument(
        "--no-calibration",
        dest="no_calibration",
        action="store_true",
        help="skip the networks' cross-fitted band calibration (curves unchanged)",
    )
    parser.add_argument(
        "--subject-errors",
        dest="subject_errors",
        action="store_true",
        help="save each subject's squared error at its hidden values (and, for "
        "the networks, which subjects they trained on)",
    )
    parser.add_argument("--n-subjects", dest="n_subjects", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--save-rows", dest="save_rows")
    parser.add_argument("--load-rows", dest="load_rows", nargs="+")
    parser.add_argument("--write", action="store_true")
    parser.add_argument(
        "--section", default="realdata", help="section of docs/benchmarks.md"
    )
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.load_rows:
        runs = [json.loads(Path(p).read_text()) for p in args.load_rows]
    else:
        start = time.perf_counter()
        run = {
            "rows": [],
            "splits": {},
            "command": "python " + " ".join(sys.argv),
            "machine": machine(),
        }
        for name in args.datasets:
            data = DATASETS[name]()
            for split in range(args.split_start, args.split_start + args.splits):
                scores, n = one_split(data, split, args)
                saved = run["splits"].setdefault(name, {"n": n, "scores": {}})
                saved["scores"][str(split)] = scores
                run["minutes"] = (time.perf_counter() - start) / 60
                if args.save_rows:
                    Path(args.save_rows).write_text(json.dumps(run, indent=1))
        runs = [run]
    rows = _merge_rows(runs)
    table = markdown_table(rows, COLUMNS)
    print(table)
    if args.write:
        runs_text = "\n".join(
            f"- `{r['command']}`: {r['minutes']:.0f} min, {r['machine']}" for r in runs
        )
        body = (
            "Held-out observations (20% of each subject's, at least one, two "
            "kept), mean (SE) over random splits; `MSE / PACE` is paired within "
            "splits; `kept base`: splits where the base option kept PACE "
            f"unchanged. Runs:\n\n{runs_text}\n\n{table}\n"
        )
        title = "Real data: held-out observations"
        if args.section != "realdata":
            title += f" ({args.section})"
        write_section(args.section, title, body)


if __name__ == "__main__":
    main()
