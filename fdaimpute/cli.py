"""The ``fdaimpute`` command: a demo on simulated data, and imputation of a CSV file."""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time

import numpy as np

from fdaimpute._cli.inputs import (
    column_names,
    method_layout,
    output_names,
    parse_grid,
    read_data,
)
from fdaimpute._cli.messages import cli_message
from fdaimpute._cli.methods import (
    SEVERAL,
    build_estimator,
    method_factories,
    method_name,
    set_covariates,
)
from fdaimpute._cli.model import (
    add_data_options,
    add_fit_command,
    add_method_options,
    impute_with_model,
)
from fdaimpute._cli.output import check_room, check_target, write_output, write_text
from fdaimpute._core.timing import phase, recording

__all__ = ["main"]

DESCRIPTION = """\
fdaimpute turns sparse, irregular, noisy measurements (a few per subject, at
each subject's own times) into smooth curves on a common grid.

  fdaimpute demo                      simulate data, compare the imputers,
                                      save a picture of a few subjects
  fdaimpute impute data.csv -o out.csv --method kernel --grid 101
                                      impute the curves of a long CSV file
                                      (one row per observation: id,time,value)
  fdaimpute impute data.csv -o out.csv --method pace --param n_components=3
                                      set a method's parameters
  fdaimpute fit data.csv --method sand --save model.fdai
  fdaimpute impute new.csv --model model.fdai -o out.csv
                                      fit once, save, impute other files

Run 'fdaimpute <command> --help' for the options of a command.
"""


#: The SAND paper's baselines: fitted by ``demo`` only when named.
_BASELINES = ("mice", "gain", "cnp")
#: Not fitted by ``demo`` unless named: auto fits the others again to
#: choose; mpace is for several variables (the demo simulates one).
_NOT_IN_DEMO = _BASELINES + ("auto", "mpace")


def _demo(args):
    import matplotlib

    matplotlib.use("Agg")
    import fdaimpute as fi
    from fdaimpute.plotting import plot_curves

    methods = method_factories()
    default = [m for m in methods if m not in _NOT_IN_DEMO]
    chosen = (
        [m.strip().lower() for m in args.methods.split(",")]
        if args.methods
        else default
    )
    unknown = [m for m in chosen if m not in methods]
    if unknown:
        raise SystemExit(f"unknown method(s) {unknown}; available: {sorted(methods)}")
    print(
        f"Simulating the SAND paper's process: {args.n} subjects, "
        f"{args.n_obs} observations each (90% train, 5% validation, 5% test)..."
    )
    sim = fi.simulate.sand_paper(n=args.n, n_obs=args.n_obs, random_state=args.seed)
    train = fi.IrregularData.concat([sim.train.data, sim.validation.data])
    test, truth = sim.test.data, sim.test.truth
    oracle = fi.oracle.ConditionalMean(sim.process, grid=sim.grid)
    results, curves, bands = [], {}, {}
    oracle_curves = oracle.transform(test)
    ref = fi.metrics.summarize(truth, oracle_curves)
    results.append(("oracle (true covariance)", ref, 0.0))
    fitted = {}
    for name in chosen:
        print(f"  fitting {name:<7} ({methods[name][0]})...", flush=True)
        est = fitted[name] = methods[name][1](sim.grid, args.seed, True)
        start = time.perf_counter()
        est.fit(train)
        try:
            curves[name], bands[name] = est.transform(test, return_std=True)
        except NotImplementedError:  # a method without uncertainty
            curves[name] = est.transform(test)
        elapsed = time.perf_counter() - start
        results.append((name, fi.metrics.summarize(truth, curves[name]), elapsed))
    print()
    print(
        f"{'method':<26}{'MSE x1000':>11}{'TV x1000':>10}{'MSE / oracle':>14}"
        f"{'seconds':>9}"
    )
    for name, s, secs in results:
        print(
            f"{name:<26}{s['mse']:>11.1f}{s['tv']:>10.1f}"
            f"{s['mse'] / ref['mse']:>14.2f}{secs:>9.1f}"
        )
    neural = [name for name in chosen if name in ("vt", "sand")]
    if neural:
        print(f"\n{' and '.join(neural)}: 30 epochs, to keep the demo short.")
    for name in neural:
        est = fitted[name]
        if est.best_epoch_ == -1:
            print(
                f"{name}: returns PACE's curves (its network did not beat them on "
                "held-out subjects)."
            )
        elif est.base_weight_ is not None:
            print(
                f"{name}: kept its network, with weight {est.base_weight_:.2f} on "
                "its curve against PACE's."
            )
    if neural:
        print(
            "On this linear process PACE is within a few per cent of the oracle; "
            "the networks\nadd to it on non-linear data (docs/benchmarks.md)."
        )
    shown, band = _distinct_curves(curves), _most_accurate(results, bands)
    std = {} if band is None else {_label_of(band, shown): bands[band]}
    fig = plot_curves(test, shown, sim.grid, truth=truth, std=std, subjects=4)
    fig.savefig(args.out, dpi=110)
    with_band = f" (95% band of the curve: {band}, the most accurate)" if std else ""
    print(f"\nSaved a picture of four test subjects to {args.out}{with_band}")
    return 0


def _distinct_curves(curves):
    """Method curves with identical sets drawn once, labelled "a = b"."""
    shown = {}
    for name, c in curves.items():
        same = next((k for k, v in shown.items() if np.array_equal(v, c)), None)
        if same is None:
            shown[name] = c
        else:
            shown = {(f"{k} = {name}" if k == same else k): v for k, v in shown.items()}
    return shown


def _label_of(name, shown):
    return next(k for k in shown if name in k.split(" = "))


def _most_accurate(results, bands):
    """The method with a band whose curves were closest to the truth (or None)."""
    with_band = [(s["mse"], name) for name, s, _ in results if name in bands]
    return min(with_band)[1] if with_band else None


def _impute(args):
    start = time.perf_counter()
    if args.timings is not None:
        check_target(
            args.timings,
            "--timings",
            [args.input, args.model],
            args.force,
            [("-o", args.output)],
        )
    with recording() as seconds:
        if args.model is not None:
            code = impute_with_model(args)
        else:
            code = _impute_recorded(args)
    if args.timings is not None:
        seconds["total"] = time.perf_counter() - start
        text = json.dumps(seconds, indent=1) + "\n"
        write_text(args.timings, "--timings", text, args.force)
    return code


def _impute_recorded(args):
    method = method_name(args.method or "auto")
    layout = method_layout(args, method)
    # before the method's import (about a second): a refused -o fails at once
    check_target(args.output, "-o", [args.input], args.force)
    with phase("import"):
        est = build_estimator(args, method)
        set_covariates(est, layout)
    with phase("read"):
        data = read_data(args, layout=layout)
    grid = parse_grid(args.grid or "101", data.time_range)
    n_variables = 1 if layout is None else data.n_variables
    check_room(args.output, len(data), n_variables * grid.size, 2 if args.std else 1)
    est.set_params(grid=grid)
    start = time.perf_counter()
    try:
        with phase("fit"):
            est.fit(data)
    except (ValueError, TypeError, NotImplementedError, ArithmeticError) as exc:
        raise SystemExit(f"{method}: {cli_message(str(exc))}") from None
    names = output_names(column_names(args), layout)
    return write_output(args, data, grid, est, method, start, names)


def build_parser():
    """The argument parser of the ``fdaimpute`` command."""
    parser = argparse.ArgumentParser(
        prog="fdaimpute",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version")
    sub = parser.add_subparsers(dest="command", metavar="command")

    _add_demo_command(sub)
    _add_impute_command(sub)
    add_fit_command(sub)
    return parser


def _add_demo_command(sub):
    """The ``demo`` subcommand and its options."""
    demo = sub.add_parser(
        "demo",
        help="compare the imputers on simulated data (about a minute)",
        description="Simulate the SAND paper's process, fit each imputer on the "
        "training subjects, impute the test subjects and print MSE and TV (x1000) "
        "against the true curves, with the ratio to the oracle (the best linear "
        "predictor knowing the true covariance). Saves a PNG of four subjects.",
    )
    demo.add_argument("--n", type=int, default=2000, help="subjects (default 2000)")
    demo.add_argument(
        "--n-obs",
        default="8-12",
        help="observations per subject: 30, 8-12 or 3-5 (default 8-12)",
    )
    demo.add_argument(
        "--methods",
        default=None,
        help="comma-separated methods among kernel, pace, face, mfpca, mice, gain, "
        "cnp, vt, sand (default: all available but the baselines mice, gain and cnp)",
    )
    demo.add_argument("--out", default="fdaimpute_demo.png", help="PNG to write")
    demo.add_argument("--seed", type=int, default=0, help="random seed")
    demo.set_defaults(func=_demo)


def _add_impute_command(sub):
    """The ``impute`` subcommand and its options."""
    imp = sub.add_parser(
        "impute",
        help="impute curves from a long CSV file",
        description="Read a long CSV (one row per observation), fit an imputer on "
        "all subjects and write each subject's curve on a grid. Output rows are in "
        "the order subjects first appear in the input, with their ids.",
    )
    imp.add_argument("input", help="CSV with one row per observation")
    imp.add_argument(
        "-o",
        "--output",
        required=True,
        help="CSV to write (refused if it exists, unless --force; never the input)",
    )
    imp.add_argument(
        "--force",
        action="store_true",
        help="replace the output file (and the --timings file) if it exists",
    )
    imp.add_argument(
        "--method",
        default=None,
        help="auto, kernel, pace, face, mfpca, mice, gain, cnp, vt, sand or mpace "
        f"(several variables: {SEVERAL}), in any case (default "
        "auto: the mix of pace, face, mfpca and kernel that best predicts "
        "held-out points), "
        "fitted on the input; or use --model",
    )
    imp.add_argument(
        "--model",
        metavar="FILE",
        help="a model saved by 'fdaimpute fit' (or an imputer's save()): "
        "transform the input with it instead of fitting; the columns default to "
        "those it was fitted with",
    )
    imp.add_argument(
        "--trust-model",
        action="store_true",
        help="also load a model file that holds a pickle (saved with "
        "allow_pickle=True). WARNING: loading a pickle can run any code; use "
        "this only for a file you made or trust. Ordinary model files hold "
        "data only and need no such trust",
    )
    imp.add_argument(
        "--grid",
        default=None,
        help="output grid: a number of points over the observed range "
        "(default 101; with --model, the model's grid) or start:stop:points",
    )
    imp.add_argument(
        "--format",
        choices=["wide", "long"],
        default="wide",
        help="wide: one row per subject; long: one row per subject and grid "
        "time, with the input's id, time and value column names. Several "
        "variables: wide columns <variable>:t=<time>, variable-major; long "
        "rows id, variable, time, value",
    )
    imp.add_argument(
        "--std",
        action="store_true",
        help="also write pointwise standard deviations (methods with bands: "
        "pace, face, mfpca, mpace, cnp, vt and sand; auto unless it chose "
        "kernel)",
    )
    imp.add_argument(
        "--timings",
        metavar="FILE",
        default=None,
        help="write the wall seconds of the job's phases (import of the "
        "method, read, the fit's phases, transform, write, total) to FILE as "
        "JSON (refused if it exists, unless --force; never the input, the "
        "model or the output)",
    )
    add_data_options(imp)
    add_method_options(imp)
    imp.set_defaults(func=_impute)


def main(argv=None):
    """Entry point of the ``fdaimpute`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from fdaimpute._version import __version__

        print(__version__)
        return 0
    if args.command is None:
        parser.print_help()
        return 1
    return args.func(args)


def command():
    """The ``fdaimpute`` command: :func:`main`, then a quick exit.

    Python's last garbage collections at exit walk every object of
    scikit-learn, SciPy and pandas, a quarter of a second of a short job;
    frozen, those objects are left to the operating system. :func:`main`
    does not freeze them: in a process that goes on (tests call it) they
    would never be collected.
    """
    status = main()
    gc.freeze()
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(command())
