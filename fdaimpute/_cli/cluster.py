"""``fdaimpute fit --scheduler ADDRESS`` or ``--workers N``: PACE on a Dask cluster.

The input (CSV or Parquet) is read by Dask in partitions on the workers and
PACE is fitted with :meth:`PACEImputer.fit_dask
<fdaimpute.PACEImputer.fit_dask>`; only the model comes back to this
process, which saves it as ``fdaimpute fit`` does.
"""

from __future__ import annotations

import contextlib
import sys
import time

from fdaimpute._cli.inputs import parse_grid
from fdaimpute._cli.messages import cli_message

__all__ = ["add_cluster_options", "fit_on_cluster", "wants_cluster"]


def add_cluster_options(parser):
    """``--scheduler``, ``--workers`` and ``--check-curves`` of ``fdaimpute fit``."""
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="fit pace on the Dask cluster whose scheduler is at ADDRESS "
        "(tcp://host:8786); the input must be readable by its workers at the "
        "same path. Needs fdaimpute[dask]",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="fit pace on a local Dask cluster of N worker processes (one "
        "thread each). Needs fdaimpute[dask]",
    )
    parser.add_argument(
        "--check-curves",
        action="store_true",
        help="with --scheduler or --workers: check every training subject's curve "
        "as a fit in memory does, and move to the next covariance bandwidths where "
        "one leaves the data's widened range (one more pass over the input)",
    )


def wants_cluster(args):
    """Whether the command line asks for a Dask cluster."""
    return (
        getattr(args, "scheduler", None) is not None
        or getattr(args, "workers", None) is not None
    )


@contextlib.contextmanager
def _client(args):
    try:
        from distributed import Client
    except ImportError:
        raise SystemExit(
            "--scheduler and --workers need dask: pip install 'fdaimpute[dask]'"
        ) from None
    if args.scheduler is not None and args.workers is not None:
        raise SystemExit("give --scheduler (a running cluster) or --workers, not both")
    if args.scheduler is not None:
        try:
            client = Client(args.scheduler, timeout="30s")
        except (OSError, TimeoutError) as exc:
            raise SystemExit(
                f"cannot reach the Dask scheduler at {args.scheduler}: {exc}"
            ) from None
        with client:
            yield client
        return
    if args.workers < 1:
        raise SystemExit(f"--workers must be at least 1, got {args.workers}")
    from fdaimpute.cluster import local_cluster

    cluster = local_cluster(args.workers, dashboard_address=":0")
    with cluster, Client(cluster) as client:
        yield client


#: Largest partition of a Parquet input (its row groups' uncompressed size),
#: row groups joined up to it. Dask's default reads a file of up to 256 MiB
#: as one partition: 10^7 observations went to one worker, and two workers
#: fitted them in 40.9 s against 7.6-7.8 s now (``docs/distributed-pace.md``).
PARQUET_PARTITION = "8MiB"
#: Rows of a CSV input checked before Dask reads it.
CHECKED_ROWS = 10_000


def read_frame(path, names):
    """The long table at ``path`` as a Dask DataFrame, ids as text.

    A CSV's first :data:`CHECKED_ROWS` rows are read first with the checks
    of :func:`fdaimpute._io.csv_options.read_long_csv` (a row with more
    fields than the header, an empty id): Dask's readers, a block each,
    would not report them.
    """
    import dask.dataframe as dd
    import pandas as pd

    from fdaimpute._io.csv_options import read_long_csv, read_options
    from fdaimpute._io.parquet import is_parquet

    id_name = names[0]
    if is_parquet(path):
        frame = dd.read_parquet(
            path,
            columns=list(names),
            split_row_groups="adaptive",
            blocksize=PARQUET_PARTITION,
        )
        if frame[id_name].dtype.kind in "iub":  # as read_parquet reads them
            frame[id_name] = frame[id_name].astype(str)
        return frame
    read_long_csv(pd, path, id_name, {"nrows": CHECKED_ROWS}, list(names))
    options = read_options({}, id_name, pd, header=list(names))
    return dd.read_csv(path, usecols=list(names), **options)


def fit_on_cluster(args, est, names):
    """Fit ``est`` (PACE) on the input on a Dask cluster; return the seconds."""

    if args.method != "pace":
        raise SystemExit(
            f"--scheduler and --workers fit pace only, not {args.method}; "
            "use --method pace"
        )
    grid = args.grid
    est.set_params(grid=int(grid) if grid.isdigit() else _explicit_grid(grid))
    with _client(args):
        where = args.scheduler or f"a local cluster of {args.workers} worker(s)"
        print(f"Fitting pace on {where}", file=sys.stderr)
        start = time.perf_counter()
        try:
            frame = read_frame(args.input, names)
            est.fit_dask(
                frame,
                *names,
                duplicates=args.duplicates,
                check_curves=args.check_curves,
            )
        except (ValueError, TypeError, OSError, ArithmeticError) as exc:
            raise SystemExit(f"pace on {args.input}: {cli_message(str(exc))}") from None
    print(
        f"Fitted pace on {est.n_subjects_fit_} subjects in "
        f"{time.perf_counter() - start:.1f} s",
        file=sys.stderr,
    )


def _explicit_grid(text):

    return parse_grid(text, (0.0, 1.0))  # start:stop:points needs no range
