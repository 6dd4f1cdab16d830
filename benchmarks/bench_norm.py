"""VT and SAND with each normalisation (``norm``) on the SAND paper's simulation.

One row per model and ``norm`` in {"layer", "batch", "rms", None}: test MSE
x 1000 on the 101-point grid against the noise-free curves (standard error
over subjects), its ratio to the oracle's (the conditional mean with the
true covariance), its difference to the same model's with ``norm="layer"``
on the same subjects (paired standard error), fit seconds and their ratio
to ``norm="layer"``'s (measured in one run), and the epoch kept. Everything
else is the CPU preset with a reduced ``max_epochs``; as in
``bench_neural.py``, the networks are fitted on the training and validation
subjects with 5% of them held out to choose the epoch. The test subjects
are the simulation's own (5%) and ``--n-test`` fresh ones from the same
process, so that the differences between norms can be resolved.

Examples
--------
The documented run (about 5 minutes on 2 shared CPU cores, one torch thread)::

    python benchmarks/bench_norm.py --n 2000 --epochs 50 --write

Its rows are saved in ``benchmarks/results/norm/`` (``--from-saved`` tables
them again without fitting). Another ``--seed`` draws other subjects and
trains from another start; its rows are saved under a name ending in
``_s<seed>``, and ``--across-seeds 0 1 2`` tables each norm's MSE over layer
norm's in the saved runs of those seeds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.data import IrregularData  # noqa: E402
from fdaimpute.neural import SANDImputer, VTImputer  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "norm"
NORMS = {"layer": "layer", "batch": "batch", "rms": "rms", "none": None}
MODELS = {"VT": VTImputer, "SAND": SANDImputer}
COLUMNS = [
    "model",
    "norm",
    "MSE",
    "MSE / oracle",
    "MSE - layer's",
    "epoch kept",
    "fit s",
    "fit s / layer's",
]


def run(args):
    """The table's rows: one per model and norm, in the order asked for."""
    sim = fi.simulate.sand_paper(args.n, n_obs=args.sparsity, random_state=args.seed)
    fit_data = IrregularData.concat([sim.train.data, sim.validation.data])
    fresh = fi.simulate.sand_paper(
        args.n_test, n_obs=args.sparsity, random_state=args.seed + 1
    )
    splits = [sim.test, fresh.train, fresh.validation, fresh.test]
    test = _renumbered([split.data for split in splits])
    truth = np.vstack([split.truth for split in splits])
    oracle = fi.oracle.ConditionalMean(sim.process).transform(test)
    oracle_mse = fi.metrics.mse(truth, oracle, scale=1000)
    print(f"{len(test)} test subjects, oracle MSE x 1000: {oracle_mse:.1f}")
    rows = []
    for model in args.models:
        layer_seconds = layer_errors = None
        for name in args.norms:
            est = MODELS[model](
                base=None,
                norm=NORMS[name],
                max_epochs=args.epochs,
                validation_fraction=round(0.05 * len(fit_data)) / len(fit_data),
                random_state=args.seed,
            )
            start = time.perf_counter()
            est.fit(fit_data)
            seconds = time.perf_counter() - start
            pred = est.transform(test)
            errors = 1000 * fi.metrics.mse_per_subject(truth, pred)
            if name == "layer":
                layer_seconds, layer_errors = seconds, errors
            s = fi.metrics.summarize(truth, pred)
            rows.append(
                {
                    "model": model,
                    "norm": repr(NORMS[name]),
                    "MSE": f"{s['mse']:.1f} ({s['mse_se']:.1f})",
                    "MSE / oracle": s["mse"] / oracle_mse,
                    "MSE - layer's": _paired(errors, layer_errors),
                    "epoch kept": f"{est.best_epoch_ + 1} of {est.n_epochs_}",
                    "fit s": seconds,
                    "fit s / layer's": (
                        seconds / layer_seconds if layer_seconds else "n/a"
                    ),
                }
            )
            print(rows[-1], flush=True)
    return rows, oracle_mse


def rows_path(args, seed):
    """Where the rows of the run with ``args``'s sizes and ``seed`` are saved."""
    stem = f"n{args.n}_t{args.n_test}_{args.sparsity}_e{args.epochs}"
    return RESULTS / (stem + (f"_s{seed}" if seed else "") + ".json")


def across_seeds(args):
    """Each norm's MSE over layer norm's, per model, in the saved runs of seeds.

    A markdown table: one line per model, one column per norm other than
    layer, the ratios of the seeds in ``args.across_seeds`` order.
    """
    ratios = {}
    for seed in args.across_seeds:
        rows = json.loads(rows_path(args, seed).read_text())["rows"]
        layer = {r["model"]: r["MSE / oracle"] for r in rows if r["norm"] == "'layer'"}
        for r in rows:
            if r["norm"] != "'layer'":
                ratio = r["MSE / oracle"] / layer[r["model"]]
                ratios.setdefault(r["model"], {}).setdefault(r["norm"], []).append(
                    f"{ratio:.3f}"
                )
    norms = list(next(iter(ratios.values())))
    lines = [
        {"model": model, **{norm: " / ".join(v) for norm, v in by_norm.items()}}
        for model, by_norm in ratios.items()
    ]
    return markdown_table(lines, ["model", *norms], {})


def _renumbered(parts):
    """The subjects of ``parts`` in one container, numbered 0, 1, ..."""
    starts = np.cumsum([0] + [len(d) for d in parts])
    return IrregularData.concat(
        [
            IrregularData(d.times, d.values, d.offsets, ids=start + np.arange(len(d)))
            for d, start in zip(parts, starts)
        ]
    )


def _paired(errors, reference):
    """Mean difference of per-subject errors to ``reference`` and its SE."""
    if reference is None:
        return "n/a"
    if reference is errors:
        return "(reference)"
    diff = errors - reference
    return f"{diff.mean():+.1f} ({diff.std(ddof=1) / np.sqrt(diff.size):.1f})"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="subjects (all splits)")
    parser.add_argument(
        "--n-test", dest="n_test", type=int, default=2000, help="fresh test subjects"
    )
    parser.add_argument("--sparsity", default="8-12", choices=["30", "8-12", "3-5"])
    parser.add_argument("--epochs", type=int, default=50, help="max_epochs")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--norms", nargs="+", default=list(NORMS), choices=NORMS)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--write", action="store_true", help="update docs/benchmarks.md"
    )
    parser.add_argument(
        "--from-saved", action="store_true", help="fit nothing: table the saved rows"
    )
    parser.add_argument(
        "--across-seeds",
        nargs="+",
        type=int,
        metavar="SEED",
        help="fit nothing: each norm's MSE / layer norm's in the saved runs of "
        "these seeds",
    )
    args = parser.parse_args(argv)
    if args.sparsity == "30":
        args.sparsity = 30
    if args.across_seeds:
        print(across_seeds(args))
        return None
    path = rows_path(args, args.seed)
    if args.from_saved:
        saved = json.loads(path.read_text())
        rows, oracle_mse = saved["rows"], saved["oracle_mse"]
    else:
        import torch

        torch.set_num_threads(args.threads)
        print(machine())
        rows, oracle_mse = run(args)
        RESULTS.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps({"rows": rows, "oracle_mse": oracle_mse}, indent=1) + "\n"
        )
        print(f"rows in {path.relative_to(RESULTS.parents[1])}")
    table = markdown_table(
        rows, COLUMNS, {"MSE / oracle": ".3f", "fit s": ".0f", "fit s / layer's": ".2f"}
    )
    print()
    print(table)
    if args.write:
        body = (
            f"The SAND paper's process, n = {args.n} (90/5/5 split), n_i = "
            f'{args.sparsity}; `preset="cpu"` with `max_epochs={args.epochs}` '
            "(cosine schedule over those epochs) and one setting changed, "
            "`norm`; one seed. MSE x 1000 on the 101-point grid against the "
            "noise-free curves of the simulation's test subjects and "
            f"{args.n_test} fresh ones (standard error over subjects); the "
            f"oracle's is {oracle_mse:.1f}. Rows: `benchmarks/results/norm/"
            f"{path.name}`. `MSE - layer's`: the difference to "
            'the same model with `norm="layer"` on the same subjects (paired '
            "standard error; it does not include the variation between training "
            "seeds). Timings were taken on a shared 2-core CPU VM (other jobs "
            "running, one torch thread): compare the ratios within this run "
            "only.\n\n"
            f"{table}\n"
        )
        write_section("norm", "Normalisation in the transformer (norm)", body)
    return rows


if __name__ == "__main__":
    main()
