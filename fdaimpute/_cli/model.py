"""``fdaimpute fit``, imputation with a saved model, and the options both share."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from fdaimpute._cli.cluster import add_cluster_options, fit_on_cluster, wants_cluster
from fdaimpute._cli.inputs import (
    column_names,
    method_layout,
    output_names,
    parse_grid,
    read_data,
    variable_layout,
)
from fdaimpute._cli.messages import METHOD_OF_CLASS, cli_message, fitted_label
from fdaimpute._cli.methods import (
    COVARIATE_METHODS,
    SEVERAL,
    build_estimator,
    method_name,
    set_covariates,
)
from fdaimpute._cli.output import check_room, check_target, write_output, writing

__all__ = [
    "add_data_options",
    "add_fit_command",
    "add_method_options",
    "impute_with_model",
]

# Set by torchrun (and other launchers) in every process they start.
_WORLD_SIZE = "WORLD_SIZE"
# Seconds to wait for the other processes before giving up.
_TIMEOUT = "FDAIMPUTE_RENDEZVOUS_TIMEOUT"


def add_data_options(parser):
    """Column names of the long CSV and what to do with repeated times."""
    saved = " or, with --model, the model's"
    parser.add_argument(
        "--id", help=f"subject column (default id{saved}); ids are read as text"
    )
    parser.add_argument("--time", help=f"time column (default time{saved})")
    parser.add_argument(
        "--value",
        help=f"value column (default value{saved}); several, comma-separated "
        "(--value bili,albumin), hold one variable each, blank where not "
        f"measured (methods that take several variables: {SEVERAL})",
    )
    parser.add_argument(
        "--variable",
        metavar="COLUMN",
        help="column naming each row's variable, the values in the --value "
        "column: several variables per subject, each at its own times "
        f"(methods that take several variables: {SEVERAL}). The "
        "output has one block of grid columns per variable",
    )
    parser.add_argument(
        "--covariates",
        metavar="A,B",
        help="comma-separated columns of subject covariates (numbers or "
        "categories, constant within a subject) that shift the means "
        f"(methods: {', '.join(COVARIATE_METHODS)})",
    )
    parser.add_argument(
        "--duplicates",
        choices=["raise", "average"],
        default="raise",
        help="what to do with repeated times within a subject: raise an error "
        "(default) or average their values",
    )


def add_method_options(parser):
    """A method's settings: --param, --params-file, --extrapolate, --seed."""
    parser.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="a setting of the method, e.g. --param bandwidth=0.1; repeat for "
        "several; values are read as JSON (numbers, true, null, lists) or else "
        "as text",
    )
    parser.add_argument(
        "--params-file",
        metavar="FILE",
        help="JSON file (YAML if it ends in .yaml/.yml and PyYAML is installed) "
        "mapping parameter names to values; --param entries override it",
    )
    parser.add_argument(
        "--extrapolate",
        action="store_true",
        help="allow a grid beyond the observed time range",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def add_fit_command(sub):
    """The ``fit`` subcommand and its options."""
    fit = sub.add_parser(
        "fit",
        help="fit an imputer on a long CSV file and save it",
        description="Read a long CSV (one row per observation), fit an imputer on "
        "all subjects and save it, to impute this or other files later with "
        "'fdaimpute impute FILE --model MODEL'. Under torchrun (WORLD_SIZE > 1) "
        "vt and sand train across the processes; a process whose peers do not "
        "join within FDAIMPUTE_RENDEZVOUS_TIMEOUT seconds (default 60) stops "
        "with a message.",
    )
    fit.add_argument("input", help="CSV with one row per observation")
    fit.add_argument(
        "--save",
        required=True,
        metavar="FILE",
        help="model file (refused if it exists, unless --force); it keeps the "
        "column names for 'fdaimpute impute --model'",
    )
    fit.add_argument(
        "--force", action="store_true", help="replace the model file if it exists"
    )
    fit.add_argument(
        "--method",
        default="auto",
        help="auto, kernel, pace, face, mfpca, mice, gain, cnp, vt, sand or mpace "
        f"(several variables: {SEVERAL}), in any case (default "
        "auto: the mix of pace, face, mfpca and kernel that best predicts "
        "held-out points)",
    )
    fit.add_argument(
        "--grid",
        default="101",
        help="the model's output grid: a number of points over the observed "
        "range (default 101) or start:stop:points",
    )
    fit.add_argument(
        "--epochs", type=int, help="training epochs (vt and sand: max_epochs)"
    )
    fit.add_argument(
        "--device", help="where to train (vt and sand): auto, cpu, cuda, cuda:1"
    )
    add_data_options(fit)
    add_method_options(fit)
    add_cluster_options(fit)
    fit.set_defaults(func=_fit)


def _world_size():
    world = os.environ.get(_WORLD_SIZE, "1")
    return int(world) if world.isdigit() else 1


def _join_process_group(est, method):
    """Under a launcher with several processes: join its group; return the rank.

    The neural imputers train on every rank together: gloo on CPUs; on GPUs
    rank ``r`` of a machine takes GPU ``r`` modulo their number, with NCCL
    where each process has a GPU of its own and gloo where processes share
    one (NCCL refuses two ranks on one GPU). The other methods have nothing
    to share between processes and are refused.
    """
    import torch
    import torch.distributed as dist

    if "max_epochs" not in est.get_params():
        raise SystemExit(
            f"{method} does not train across processes; run it as one process "
            "(only vt and sand use torchrun's processes)"
        )
    device = str(est.get_params().get("device", "auto"))
    cuda = torch.cuda.is_available() and device != "cpu"
    backend = "gloo"
    if cuda:
        gpus = torch.cuda.device_count()
        local = int(os.environ.get("LOCAL_RANK", "0")) % gpus
        torch.cuda.set_device(local)
        est.set_params(device=f"cuda:{local}")
        per_machine = int(os.environ.get("LOCAL_WORLD_SIZE", _world_size()))
        backend = "nccl" if per_machine <= gpus else "gloo"
    with rendezvous_deadline():
        dist.init_process_group(backend=backend)
    return dist.get_rank()


@contextlib.contextmanager
def rendezvous_deadline():
    """Exit with a message when the process group cannot be joined in time.

    A launcher's variables without the other processes (a stray
    ``WORLD_SIZE=2``) would make ``init_process_group`` wait for peers that
    never come, for torch's 30 minutes. After
    ``FDAIMPUTE_RENDEZVOUS_TIMEOUT`` seconds (default 60) this prints why
    and exits; errors of the launcher's variables (no ``RANK``, no
    ``MASTER_ADDR``) become the same kind of message at once.
    """
    seconds = _rendezvous_timeout()
    where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    advice = (
        f"{_WORLD_SIZE}={os.environ.get(_WORLD_SIZE)} is set, so this process "
        "waits for the others of a torchrun launch; unset it to fit in one "
        "process, or start every process with torchrun"
    )

    def give_up():
        print(
            f"fdaimpute: no other process joined at {where} within {seconds:g} s "
            f"(FDAIMPUTE_RENDEZVOUS_TIMEOUT): {advice}",
            file=sys.stderr,
            flush=True,
        )
        os._exit(1)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield
    except (ValueError, RuntimeError) as exc:
        raise SystemExit(f"cannot join the process group ({exc}): {advice}") from None
    finally:
        timer.cancel()


def _rendezvous_timeout():
    text = os.environ.get(_TIMEOUT, "60")
    try:
        seconds = float(text)
    except ValueError:
        raise SystemExit(
            f"{_TIMEOUT} must be a number of seconds, got {text!r}"
        ) from None
    if not seconds > 0:
        raise SystemExit(f"{_TIMEOUT} must be positive, got {text!r}")
    return seconds


def _fit(args):

    args.method = method_name(args.method)
    layout = method_layout(args, args.method)
    check_target(args.save, "--save", [args.input], args.force)
    est = build_estimator(args, args.method)
    set_covariates(est, layout)
    extra = {"max_epochs": args.epochs, "device": args.device}
    for name, value in extra.items():
        if value is None:
            continue
        if name not in est.get_params():
            flag = "--epochs" if name == "max_epochs" else "--device"
            raise SystemExit(f"{flag} applies to vt and sand, not {args.method}")
        est.set_params(**{name: value})
    names = column_names(args)
    if wants_cluster(args):
        if layout is not None:
            raise SystemExit(
                "--scheduler and --workers fit pace on one variable; fit "
                "several variables or covariates without them"
            )
        fit_on_cluster(args, est, names)
        return _save_model(est, args, names)
    data = read_data(args, names, layout)
    est.set_params(grid=parse_grid(args.grid, data.time_range))
    rank = _join_process_group(est, args.method) if _world_size() > 1 else 0
    start = time.perf_counter()
    try:
        est.fit(data)
    except (ValueError, TypeError, NotImplementedError, ArithmeticError) as exc:
        raise SystemExit(f"{args.method}: {cli_message(str(exc))}") from None
    finally:
        if _world_size() > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
    if rank != 0:
        return 0
    print(
        f"Fitted {fitted_label(args.method, est)} on {len(data)} subjects in "
        f"{time.perf_counter() - start:.1f} s",
        file=sys.stderr,
    )
    return _save_model(est, args, names, layout)


def _save_model(est, args, names, layout=None):
    """Save the fitted ``est`` to ``--save`` with the input's column names.

    With several variables the value columns are kept comma-separated
    under ``value``, the variable column under ``variable`` and the
    covariates, comma-separated, under ``covariates``.
    """
    from fdaimpute.persistence import save

    columns = dict(zip(("id", "time", "value"), names))
    if layout is not None:
        variable, values, covariates = layout
        columns["value"] = ",".join(values)
        if variable is not None:
            columns["variable"] = variable
        if covariates:
            columns["covariates"] = ",".join(covariates)
    with writing(args.save, "--save"):
        save(est, args.save, metadata=columns, overwrite=args.force)
    print(f"Saved {args.save}", file=sys.stderr)
    return 0


def _load(path, trust):
    """The fitted imputer of a model file and the columns it was fitted with."""
    from fdaimpute.persistence import load, read_header

    try:
        header = read_header(path)
        est = load(path, allow_pickle=trust)
    except (ValueError, TypeError, OSError) as exc:
        message = str(exc).replace(
            "load(path, allow_pickle=True), or --trust-model on the command line",
            "--trust-model",
        )
        raise SystemExit(f"cannot load model {path}: {message}") from None
    except ImportError as exc:  # a pickled class the command cannot find
        raise SystemExit(
            f"cannot load model {path}: {exc}. The command line imports only "
            "modules on PYTHONPATH; else impute in Python"
        ) from None
    if not hasattr(est, "grid_"):
        raise SystemExit(
            f"{path} holds an unfitted {type(est).__name__}; fit it before saving"
        )
    return est, header.get("metadata") or {}


def impute_with_model(args):
    """``fdaimpute impute FILE --model MODEL``: transform with a saved imputer."""

    if args.method is not None:
        raise SystemExit("give --method (fit on the input) or --model, not both")
    if args.param or args.params_file:
        raise SystemExit(
            "--param and --params-file set a method before fitting; a saved "
            "model is already fitted"
        )
    check_target(args.output, "-o", [args.input, args.model], args.force)
    est, saved = _load(args.model, args.trust_model)
    name = METHOD_OF_CLASS.get(type(est).__name__, type(est).__name__)
    names = column_names(args, saved)
    several = hasattr(est, "variables_")
    layout = variable_layout(args, saved, several=several)
    if layout is not None and not several:
        raise SystemExit(
            f"--variable, --covariates and several --value columns need a model "
            f"fitted on several variables; {args.model} holds a {name} model of "
            "one variable"
        )
    data = read_data(args, names, layout)
    grid = est.grid_ if args.grid is None else parse_grid(args.grid, est.time_range_)
    n_variables = len(est.variables_) if several else 1
    check_room(args.output, len(data), n_variables * grid.size, 2 if args.std else 1)
    if args.extrapolate and hasattr(est, "extrapolate"):
        est.set_params(extrapolate=True)
    start = time.perf_counter()
    label = f"the {name} model {args.model}"
    names = output_names(names, layout)
    return write_output(args, data, grid, est, label, start, names)
