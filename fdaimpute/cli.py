"""The ``fdaimpute`` command: a demo on simulated data, and imputation of a CSV file."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

import numpy as np

from fdaimpute._cli.model import (
    add_data_options,
    add_fit_command,
    add_method_options,
    impute_with_model,
)
from fdaimpute._cli.output import check_room, check_target, write_curves
from fdaimpute._cli.params import check_params, collect_params, parse_value
from fdaimpute._core.blocks import check_output_fits, format_bytes
from fdaimpute._core.timing import phase, recording
from fdaimpute._io.parquet import is_parquet

__all__ = ["main"]

_parse_value = parse_value  # its name before it moved; the tests import it

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
#: Methods that impute several variables (--variable, several --value columns).
MULTIVARIATE_METHODS = ("mpace", "kernel", "mice")
#: Methods that read their input as several variables even when it holds one.
ALWAYS_MULTIVARIATE = ("mpace",)
#: Methods whose means use subject covariates (--covariates).
COVARIATE_METHODS = ("mpace",)


def _method_factories():
    """Name -> (description, factory(grid, random_state, quick))."""
    from fdaimpute.auto import AutoImputer
    from fdaimpute.kernel import KernelImputer

    methods = {
        "auto": (
            "the best of pace, face, mfpca and kernel on held-out points",
            lambda grid, seed, quick: AutoImputer(grid=grid, random_state=seed),
        ),
        "kernel": (
            "per-subject local-linear smoothing shrunk to the mean",
            lambda grid, seed, quick: KernelImputer(grid=grid),
        ),
    }
    try:
        from fdaimpute.pace import PACEImputer
    except ImportError:
        pass
    else:
        methods["pace"] = (
            "functional PCA by conditional expectation (PACE)",
            lambda grid, seed, quick: PACEImputer(grid=grid, random_state=seed),
        )
    try:
        from fdaimpute.face import FACEImputer
    except ImportError:
        pass
    else:
        methods["face"] = (
            "fast covariance estimation (FACE): spline covariance, PACE's predictor",
            lambda grid, seed, quick: FACEImputer(grid=grid),
        )
    try:
        from fdaimpute.mfpca import MFPCAImputer
    except ImportError:
        pass
    else:
        methods["mfpca"] = (
            "reduced-rank functional PCA by maximum likelihood (mFPCA)",
            lambda grid, seed, quick: MFPCAImputer(grid=grid),
        )
    try:
        from fdaimpute.gain import GAINImputer
    except ImportError:
        pass
    else:
        methods["gain"] = (
            "generative adversarial imputation (GAIN) on binned times (torch)",
            lambda grid, seed, quick: GAINImputer(
                grid=grid, random_state=seed, **({"max_iter": 500} if quick else {})
            ),
        )
    try:
        from fdaimpute.cnp import CNPImputer
    except ImportError:
        pass
    else:
        methods["cnp"] = (
            "conditional neural process (CNP), a baseline (torch)",
            lambda grid, seed, quick: CNPImputer(
                grid=grid, random_state=seed, **({"max_epochs": 30} if quick else {})
            ),
        )
    try:
        from fdaimpute.mpace import MultivariatePACEImputer
    except ImportError:
        pass
    else:
        methods["mpace"] = (
            "multivariate PACE: several variables sharing components, covariates",
            lambda grid, seed, quick: MultivariatePACEImputer(
                grid=grid, random_state=seed
            ),
        )
    try:
        from fdaimpute.mice import MICEImputer
    except ImportError:
        pass
    else:
        methods["mice"] = (
            "chained equations on binned times (a baseline)",
            lambda grid, seed, quick: MICEImputer(grid=grid, random_state=seed),
        )
    try:
        from fdaimpute.neural import SANDImputer, VTImputer
    except ImportError:
        pass
    else:
        quick_kw = {"max_epochs": 30}
        methods["vt"] = (
            "transformer imputer, started from PACE (torch)",
            lambda grid, seed, quick: VTImputer(
                grid=grid, random_state=seed, **(quick_kw if quick else {})
            ),
        )
        methods["sand"] = (
            "transformer + self-attention on derivatives, started from PACE (torch)",
            lambda grid, seed, quick: SANDImputer(
                grid=grid, random_state=seed, **(quick_kw if quick else {})
            ),
        )
    return methods


def _parse_grid(text, time_range):
    """``"101"`` -> 101 points over the data's range; ``"a:b:n"`` -> linspace."""
    parts = text.split(":")
    try:
        if len(parts) == 1:
            n = int(parts[0])
            lo, hi = time_range
        elif len(parts) == 3:
            lo, hi, n = float(parts[0]), float(parts[1]), int(parts[2])
        else:
            raise ValueError
    except ValueError:
        raise SystemExit(
            f"--grid must be a number of points (101) or start:stop:points "
            f"(0:1:101), got {text!r}"
        ) from None
    if n < 2:
        raise SystemExit(f"--grid needs at least 2 points, got {n}")
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise SystemExit(f"--grid needs finite start and stop, got {text!r}")
    try:
        check_output_fits(1, n, what="grid")
    except ValueError:
        raise SystemExit(
            f"--grid {text}: {n:,} points need {format_bytes(8 * n)} of memory for "
            "the grid alone, more than is available; give fewer points"
        ) from None
    return np.linspace(lo, hi, n)


def _demo(args):
    import matplotlib

    matplotlib.use("Agg")
    import fdaimpute as fi
    from fdaimpute.plotting import plot_curves

    methods = _method_factories()
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


_FLAG_HINTS = (
    # (the library's advice, the flag that does it, words of errors it fixes)
    (
        r"pass duplicates=['\"]average['\"]",
        "--duplicates average",
        ("duplicate", "two observations at", "repeated time"),
    ),
    (r"pass extrapolate=True", "--extrapolate", ("extrapolat", "training times span")),
)
#: The class behind each --method name.
_METHOD_OF_CLASS = {
    "KernelImputer": "kernel",
    "PACEImputer": "pace",
    "FACEImputer": "face",
    "MFPCAImputer": "mfpca",
    "MICEImputer": "mice",
    "GAINImputer": "gain",
    "VTImputer": "vt",
    "SANDImputer": "sand",
    "CNPImputer": "cnp",
    "MultivariatePACEImputer": "mpace",
}
# A keyword argument in the library's advice: name=True, name='text', name=0.5
_KEYWORD = re.compile(
    r"(?<![-\w.])([a-z][a-z0-9_]*)=('[^']*'|\"[^\"]*\"|True|False|None|-?\d[\w.+-]*)"
)
_JSON_WORDS = {"True": "true", "False": "false", "None": "null"}


def _as_param(match):
    name, value = match.groups()
    if name == "return_std":
        return "--std"
    if name == "extrapolate" and value == "True":
        return "--extrapolate"
    value = _JSON_WORDS.get(value, value.strip("'\""))
    return f"--param {name}={value}"


def _as_method(match):
    method = _METHOD_OF_CLASS.get(match.group(2))
    if method is None:
        return match.group(0)
    return f"{match.group(1)}--method {method}" if match.group(1) else method


def _cli_message(message):
    """The library's message in the command line's words: flags, not Python.

    Advice to pass a keyword becomes the flag that does it (``--duplicates
    average``, ``--extrapolate``, ``--param name=value``), and a class name
    the ``--method`` that picks it.
    """
    message = re.sub(r"^[A-Za-z]+Imputer: ", "", message)
    for advice, flag, words in _FLAG_HINTS:
        message, n = re.subn(advice, f"rerun with {flag}", message)
        related = any(word in message.lower() for word in words)
        if n == 0 and related and flag not in message:
            message = f"{message} (rerun with {flag})"
    message = _KEYWORD.sub(_as_param, message)
    return re.sub(r"\b(use )?([A-Z][A-Za-z]*Imputer)\b", _as_method, message)


def column_names(args, saved=None):
    """The input's id, time and value columns: the flags, else ``saved``, else
    ``id``, ``time`` and ``value``."""
    saved = saved or {}
    return tuple(
        getattr(args, key) or saved.get(key) or key for key in ("id", "time", "value")
    )


def _split_names(text):
    """``"a, b"`` -> ``["a", "b"]``; nothing -> ``[]``."""
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def variable_layout(args, saved=None, *, several=False):
    """The command line's variables and covariates, or None for one variable.

    ``--variable COLUMN`` names the column holding each row's variable
    (the values then in the one ``--value`` column); several
    comma-separated ``--value`` columns hold one variable each (NaN where
    not measured); ``--covariates A,B`` names subject covariates. Flags
    missing from the command line are taken from ``saved`` (a model's
    columns).

    Parameters
    ----------
    args : argparse.Namespace
        The command line.
    saved : dict, default=None
        Column names a model file keeps.
    several : bool, default=False
        Read the input as several variables even when it has one value
        column and no variable column (a method that takes several).

    Returns
    -------
    tuple or None
        ``(variable column or None, value columns, covariate columns)``;
        None when the input holds one variable and no covariates and
        ``several`` is False.
    """
    saved = saved or {}
    variable = getattr(args, "variable", None) or saved.get("variable")
    values = _split_names(args.value or saved.get("value") or "value")
    covariates = _split_names(
        getattr(args, "covariates", None) or saved.get("covariates")
    )
    if variable is None and len(values) == 1 and not covariates and not several:
        return None
    if variable is not None and len(values) > 1:
        raise SystemExit(
            f"--variable {variable} reads one value column (--value), got "
            f"{', '.join(values)}; give several --value columns (one per "
            "variable) or --variable, not both"
        )
    return variable, values, covariates


def check_layout(layout, method):
    """Exit when ``method`` cannot take the variables or covariates asked for."""
    if layout is None:
        return
    variable, values, covariates = layout
    if (variable is not None or len(values) > 1) and method not in (
        MULTIVARIATE_METHODS
    ):
        given = "--variable" if variable is not None else "several --value columns"
        raise SystemExit(
            f"{given}: --method {method} imputes one variable; use a method that "
            f"takes several ({', '.join(MULTIVARIATE_METHODS)})"
        )
    if covariates and method not in COVARIATE_METHODS:
        raise SystemExit(
            f"--covariates: --method {method} does not use subject covariates; "
            f"use {' or '.join(f'--method {m}' for m in COVARIATE_METHODS)}"
        )


def output_names(names, layout):
    """The output's id, time, value (and variable) column names."""
    if layout is None:
        return names
    variable, values, _ = layout
    value = values[0] if variable is not None else "value"
    return (names[0], names[1], value, variable or "variable")


def _read_table(path, columns):
    """The ``columns`` of the CSV or Parquet file that it has (ids as text)."""
    from fdaimpute._core.frames import require_pandas
    from fdaimpute._io.csv_options import read_options

    if is_parquet(path):
        from fdaimpute._io.parquet import read_columns

        return read_columns(path, columns)
    pd = require_pandas("reading a CSV")
    wanted = set(columns)
    return pd.read_csv(
        path, **read_options({"usecols": lambda c: c in wanted}, columns[0], pd)
    )


def _read_variables(path, names, layout, duplicates):
    """The input as MultivariateIrregularData (raises ValueError or TypeError)."""
    from fdaimpute.multivariate import MultivariateIrregularData

    id_name, time_name, _ = names
    variable, values, covariates = layout
    wanted = [id_name, time_name, *([variable] if variable else []), *values]
    df = _read_table(path, wanted + covariates)
    if len(df) == 0:
        raise ValueError(
            f"{path} has no observations (a header and no rows); it needs one "
            f"row per observation with columns {', '.join(wanted)}"
        )
    options = dict(covariates=covariates or None, duplicates=duplicates)
    if variable is not None:
        return MultivariateIrregularData.from_long(
            df, id_name, time_name, variable, values[0], **options
        )
    return MultivariateIrregularData.from_columns(
        df, values, id_name, time_name, **options
    )


def _read_data(args, names=None, layout=None):
    """The input of ``args.input`` as IrregularData, or MultivariateIrregularData
    for a ``layout`` of several variables (exits with the reason)."""
    import fdaimpute as fi

    id_name, time_name, value_name = names or column_names(args)
    try:
        if layout is not None:
            data = _read_variables(
                args.input, (id_name, time_name, value_name), layout, args.duplicates
            )
            return _reported(data)
        read = fi.IrregularData.read_csv
        if is_parquet(args.input):
            read = fi.IrregularData.read_parquet
        data = read(
            args.input,
            id=id_name,
            time=time_name,
            value=value_name,
            duplicates=args.duplicates,
        )
    except (ValueError, TypeError, OSError, ImportError) as exc:
        raise SystemExit(
            f"cannot read {args.input}: {_cli_message(str(exc))}"
        ) from None
    return _reported(data)


def _reported(data):
    if os.environ.get("RANK", "0") == "0":  # once under torchrun
        print(f"Read {data}", file=sys.stderr)
    return data


def method_name(text):
    """A --method value, case-insensitive; exits naming the valid ones."""
    method = text.strip().lower()
    methods = _method_factories()
    if method not in methods:
        raise SystemExit(
            f"unknown method {text!r}; available: {', '.join(sorted(methods))}"
        )
    return method


def _estimator(args, method):
    """The method's estimator with the command line's settings (grid to set)."""
    method = method_name(method)
    params = collect_params(args)
    factory = _method_factories()[method][1]
    check_params(factory(None, args.seed, False), params, method)
    est = factory(None, args.seed, False)
    names = est.get_params()
    if "extrapolate" in names:
        est.set_params(extrapolate=args.extrapolate)
    if "verbose" in names:
        est.set_params(verbose=True)
    est.set_params(**params)
    return est


def _impute(args):
    start = time.perf_counter()
    with recording() as seconds:
        if args.model is not None:
            code = impute_with_model(args)
        else:
            code = _impute_recorded(args)
    if args.timings:
        seconds["total"] = time.perf_counter() - start
        with open(args.timings, "w") as fh:
            json.dump(seconds, fh, indent=1)
    return code


def method_layout(args, method):
    """The variables and covariates ``method`` reads (checked), or None for one."""
    layout = variable_layout(args, several=method in ALWAYS_MULTIVARIATE)
    check_layout(layout, method)
    return layout


def set_covariates(est, layout):
    """Give ``est`` the layout's covariates (a method that takes them)."""
    if layout is not None and layout[2]:
        est.set_params(covariates=list(layout[2]))


def _impute_recorded(args):
    with phase("import"):
        method = method_name(args.method or "auto")
        layout = method_layout(args, method)
        est = _estimator(args, method)
        set_covariates(est, layout)
    check_target(args.output, "-o", [args.input], args.force)
    with phase("read"):
        data = _read_data(args, layout=layout)
    grid = _parse_grid(args.grid or "101", data.time_range)
    n_variables = 1 if layout is None else data.n_variables
    check_room(args.output, len(data), n_variables * grid.size, 2 if args.std else 1)
    est.set_params(grid=grid)
    start = time.perf_counter()
    try:
        with phase("fit"):
            est.fit(data)
    except (ValueError, TypeError, NotImplementedError, ArithmeticError) as exc:
        raise SystemExit(f"{method}: {_cli_message(str(exc))}") from None
    names = output_names(column_names(args), layout)
    return write_output(args, data, grid, est, method, start, names)


def write_output(args, data, grid, est, label, start, names):
    """Impute ``data`` with the fitted ``est`` on ``grid`` and write the curves.

    The curves are computed and written a block of subjects at a time (see
    :func:`fdaimpute._cli.output.write_curves`).
    """

    def impute(part):
        try:
            return est.transform(part, grid=grid, return_std=args.std)
        except (ValueError, TypeError, NotImplementedError, ArithmeticError) as exc:
            raise SystemExit(f"{label}: {_cli_message(str(exc))}") from None

    variables = getattr(est, "variables_", None)
    write_curves(
        args.output,
        data,
        grid,
        impute,
        args.format,
        names,
        args.std,
        args.force,
        None if variables is None else [str(v) for v in variables],
    )
    print(
        f"Imputed {len(data)} curves with {label} in "
        f"{time.perf_counter() - start:.1f} s",
        file=sys.stderr,
    )
    print(f"Wrote {args.output}", file=sys.stderr)
    return 0


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
        "--force", action="store_true", help="replace the output file if it exists"
    )
    imp.add_argument(
        "--method",
        default=None,
        help="auto, kernel, pace, face, mfpca, mice, gain, cnp, vt, sand or mpace "
        "(several variables: mpace, kernel, mice), in any case (default "
        "auto: the best of pace, face, mfpca and kernel on held-out points), "
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
        "JSON",
    )
    add_data_options(imp)
    add_method_options(imp)
    imp.set_defaults(func=_impute)


def main(argv=None):
    """Entry point of the ``fdaimpute`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from fdaimpute import __version__

        print(__version__)
        return 0
    if args.command is None:
        parser.print_help()
        return 1
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
