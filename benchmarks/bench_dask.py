"""PACE on a Dask cluster against fit_chunks, and Parquet against CSV reads.

Subjects of the SAND paper's process (10 observations each, continuous
times) are written once, sorted by id, as a long Parquet file (row groups of
``--rows-per-group`` rows) and as the same table in CSV. Then, each in a
fresh process so that peak memory is its own:

- ``read``: ``IrregularData.read_csv`` against ``IrregularData.read_parquet``
  of the whole file (the pandas table alone, then the subjects);
- ``fit_chunks``: ``PACEImputer(random_state=0).fit_chunks`` on
  ``ParquetChunks`` (one process, one BLAS thread);
- ``dask``: ``PACEImputer(random_state=0).fit_dask`` on
  ``dask.dataframe.read_parquet`` of the same file (one partition per row
  group) on a ``LocalCluster`` of 1 or 2 worker processes with one thread
  each, with and without ``persist``.

Wall time excludes starting the cluster (reported apart); peak memory is the
peak resident set size of the fitting process, and of each worker process
for Dask (imports included: about 300 MiB before any data). The eigenvalues
of every fit are compared with the first fit's. Prints markdown tables.

Usage::

    python benchmarks/bench_dask.py                         # 1e6 observations
    python benchmarks/bench_dask.py --n-obs 1000000 10000000 --write
    python benchmarks/bench_dask.py --one fit_chunks --path obs.parquet --check-curves
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

N_OBS_PER_SUBJECT = 10
COLUMNS = ("id", "time", "value")
#: Fresh processes per format for the read times (their medians are shown).
READ_REPEATS = 7


def _peak_mib():
    # ru_maxrss is in KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_files(folder, n_obs, rows_per_group, seed=0, with_csv=True):
    """The simulated table as ``obs.parquet`` (and ``obs.csv``) in ``folder``."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    import fdaimpute as fi

    parquet, csv = folder / "obs.parquet", folder / "obs.csv"
    n_subjects = n_obs // N_OBS_PER_SUBJECT
    block = max(1, rows_per_group // N_OBS_PER_SUBJECT)
    writer = None
    width = len(str(n_subjects))  # zero-padded ids: sorted as text and as numbers
    with open(csv if with_csv else os.devnull, "w") as fh:
        for number, start in enumerate(range(0, n_subjects, block)):
            n = min(block, n_subjects - start)
            sim = fi.simulate.sand_paper(
                n=n,
                n_obs=N_OBS_PER_SUBJECT,
                off_grid=True,
                split=(1.0, 0.0, 0.0),
                random_state=seed + number,
            )
            data = sim.train.data
            ids = np.char.zfill((start + np.arange(n)).astype(str), width)
            table = pd.DataFrame(
                {
                    "id": np.repeat(ids, data.n_obs),
                    "time": data.times,
                    "value": data.values,
                }
            )
            arrow = pa.Table.from_pandas(table, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(parquet, arrow.schema)
            writer.write_table(arrow, row_group_size=rows_per_group)
            table.to_csv(fh, index=False, header=number == 0)
    writer.close()
    return parquet, csv


# ---------------------------------------------------------------------- #
# one measurement, in a process of its own
def measure_read(path):
    import pyarrow.dataset  # noqa: F401 - imports are not part of the read
    import pyarrow.parquet  # noqa: F401

    from fdaimpute import IrregularData
    from fdaimpute._core.frames import require_pandas
    from fdaimpute._io.csv_options import read_options
    from fdaimpute._io.parquet import read_long

    pd = require_pandas("bench")
    csv = str(path).endswith(".csv")
    start = time.perf_counter()
    if csv:
        pd.read_csv(path, **read_options({}, "id", pd))
    else:
        read_long(path, COLUMNS)
    table = time.perf_counter() - start
    start = time.perf_counter()
    read = IrregularData.read_csv if csv else IrregularData.read_parquet
    data = read(path, *COLUMNS)
    return {"table_s": table, "total_s": time.perf_counter() - start, "n": len(data)}


def measure_fit_chunks(path, rows, check_curves=False):
    from fdaimpute.chunks import ParquetChunks
    from fdaimpute.pace import PACEImputer

    start = time.perf_counter()
    pace = PACEImputer(random_state=0).fit_chunks(
        ParquetChunks(path, chunksize=rows), check_curves=check_curves
    )
    return {
        "fit_s": time.perf_counter() - start,
        "check_s": pace.timings_.get("plausibility", 0.0),
        "eigenvalues": pace.eigenvalues_.tolist(),
    }


def measure_dask(
    path, workers, persist, dask_malloc=False, read="row-groups", check_curves=False
):
    import dask.dataframe as dd
    from distributed import Client, LocalCluster, get_task_stream

    from fdaimpute.cluster import local_cluster
    from fdaimpute.pace import PACEImputer

    start = time.perf_counter()
    if dask_malloc:
        cluster = LocalCluster(
            n_workers=workers, threads_per_worker=1, dashboard_address=":0"
        )
    else:
        cluster = local_cluster(workers, dashboard_address=":0")
    with cluster, Client(cluster) as client:
        client.run(lambda: __import__("fdaimpute.pace"))
        started = time.perf_counter() - start
        start = time.perf_counter()
        with _HeldByDask(client) as held, get_task_stream(client) as stream:
            frame = _dask_frame(dd, path, read)
            pace = PACEImputer(random_state=0).fit_dask(
                frame, *COLUMNS, persist=persist, check_curves=check_curves
            )
        seconds = time.perf_counter() - start
        peaks = client.run(_peak_mib)
    busy = _busy_seconds(stream.data)
    return {
        "fit_s": seconds,
        "start_s": started,
        "worker_peak_mib": sorted(peaks.values()),
        "worker_busy_s": sorted(busy.values()),
        "worker_held_peak_mib": held.peak_mib,
        "partitions": frame.npartitions,
        "check_s": pace.timings_.get("plausibility", 0.0),
        "eigenvalues": pace.eigenvalues_.tolist(),
    }


def _dask_frame(dd, path, read):
    """The Parquet file as a Dask frame: one partition per row group, as
    ``fdaimpute fit --workers`` reads it, or with Dask's default partitions."""
    if read == "row-groups":
        return dd.read_parquet(path, split_row_groups=True)
    if read == "command-line":
        from fdaimpute._cli.cluster import read_frame

        return read_frame(str(path), COLUMNS)
    return dd.read_parquet(path, columns=list(COLUMNS))


def _busy_seconds(stream):
    """Seconds each worker spent computing tasks, from Dask's task stream."""
    busy = {}
    for task in stream:
        for part in task["startstops"]:
            if part["action"] == "compute":
                worker = task["worker"]
                busy[worker] = busy.get(worker, 0.0) + part["stop"] - part["start"]
    return busy


def _held_mib(dask_worker):
    """What a worker's Dask store holds (task results), MiB."""
    return dask_worker.state.nbytes / 2**20


class _HeldByDask:
    """Polls the workers' Dask stores during a fit; ``peak_mib``: the largest.

    Set beside the processes' peak memory it tells data Dask keeps (results
    waiting for their consumers) from memory the processes hold otherwise.
    """

    def __init__(self, client, every=0.3):
        self.client, self.every, self.peak_mib = client, every, 0.0

    def _poll(self):
        while not self._done.wait(self.every):
            held = self.client.run(_held_mib)
            self.peak_mib = max(self.peak_mib, *held.values())

    def __enter__(self):
        import threading

        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()


def one(args):
    """Run one measurement (``--one``) and print it as JSON."""
    kind = args.one
    if kind == "read":
        out = measure_read(args.path)
    elif kind == "fit_chunks":
        out = measure_fit_chunks(args.path, args.rows_per_group, args.check_curves)
    else:
        out = measure_dask(
            args.path,
            args.workers,
            args.persist,
            args.dask_malloc,
            args.read,
            args.check_curves,
        )
    out["peak_mib"] = _peak_mib()
    print(json.dumps(out))


def run_one(*extra):
    command = [sys.executable, __file__, *map(str, extra)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-obs", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--rows-per-group", type=int, default=250_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--folder", help="where to write the files (default: a temp)")
    parser.add_argument(
        "--what", nargs="+", choices=["fits", "reads"], default=["fits", "reads"]
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="runs of each fit (interleaved)"
    )
    parser.add_argument("--write", action="store_true", help="update the docs")
    parser.add_argument("--one", choices=["read", "fit_chunks", "dask"])
    parser.add_argument("--path")
    parser.add_argument("--persist", action="store_true")
    parser.add_argument(
        "--dask-malloc",
        action="store_true",
        help="start the workers with Dask's allocator settings, not local_cluster's",
    )
    parser.add_argument(
        "--read",
        choices=["row-groups", "command-line", "dask-default"],
        default="row-groups",
        help="with --one dask: the frame's partitions (one per row group, as "
        "`fdaimpute fit --workers` reads Parquet, or Dask's default)",
    )
    parser.add_argument(
        "--check-curves",
        action="store_true",
        help="with --one fit_chunks or dask: fit with check_curves=True",
    )
    args = parser.parse_args(argv)
    if args.one:
        args.workers = args.workers[0]
        return one(args)

    fits, reads = [], []
    with tempfile.TemporaryDirectory(dir=args.folder) as tmp:
        for n_obs in args.n_obs:
            start = time.perf_counter()
            with_csv = "reads" in args.what
            parquet, csv = write_files(
                Path(tmp), n_obs, args.rows_per_group, with_csv=with_csv
            )
            took = time.perf_counter() - start
            print(
                f"{n_obs:,} observations written in {took:.0f} s "
                f"(Parquet {os.path.getsize(parquet) / 2**20:.0f} MiB, "
                f"CSV {os.path.getsize(csv) / 2**20 if with_csv else 0:.0f} MiB)",
                flush=True,
            )
            if "reads" in args.what:
                reads.append(read_row(n_obs, csv, parquet))
                print(reads[-1], flush=True)
            if "fits" in args.what:
                for row in fit_rows(n_obs, parquet, args):
                    fits.append(row)
                    print(row, flush=True)
    if fits:
        report_fits(fits, args)
    if reads:
        report_reads(reads, args)
    return 0


def read_row(n_obs, csv, parquet, repeats=READ_REPEATS):
    runs = {"CSV": [], "Parquet": []}
    for _ in range(repeats):
        for name, path in (("CSV", csv), ("Parquet", parquet)):
            runs[name].append(run_one("--one", "read", "--path", path))
    csv, parquet = (
        {
            key: float(np.median([run[key] for run in runs[name]]))
            for key in runs[name][0]
        }
        for name in ("CSV", "Parquet")
    )
    return (
        f"| {n_obs:,} | {csv['table_s']:.2f} | {parquet['table_s']:.2f} "
        f"| {csv['table_s'] / parquet['table_s']:.1f}x "
        f"| {csv['total_s']:.2f} | {parquet['total_s']:.2f} "
        f"| {csv['total_s'] / parquet['total_s']:.1f}x |"
    )


def fit_rows(n_obs, parquet, args):
    """The table's rows at ``n_obs``: each fit run ``args.repeats`` times,
    the runs interleaved (fit_chunks, every Dask setting, then again), each
    row the run of median wall time."""
    runs = [(workers, flag) for workers in args.workers for flag in ("", "--persist")]
    runs.append((max(args.workers), "--dask-malloc"))
    chunks = ["--one", "fit_chunks", "--path", parquet]
    chunks += ["--rows-per-group", args.rows_per_group]
    got = {"base": []}
    for _ in range(args.repeats):
        got["base"].append(run_one(*chunks))
        for workers, flag in runs:
            flags = [flag] if flag else []
            command = ["--one", "dask", "--path", parquet, "--workers", workers]
            got.setdefault((workers, flag), []).append(run_one(*command, *flags))
    median = {key: _median_run(found) for key, found in got.items()}
    base = median["base"]
    yield (
        f"| {n_obs:,} | fit_chunks (1 process) | {base['fit_s']:.1f} | 1.00x "
        f"| {base['peak_mib']:.0f} | - | {_spread(got['base']) or '-'} |"
    )
    labels = {"": "", "--persist": ", persist", "--dask-malloc": ", Dask's malloc"}
    for workers, flag in runs:
        run = median[workers, flag]
        gap = np.max(np.abs(np.subtract(run["eigenvalues"], base["eigenvalues"])))
        peaks = ", ".join(f"{p:.0f}" for p in run["worker_peak_mib"])
        label = f"fit_dask, {workers} worker(s){labels[flag]}"
        busy = ", ".join(f"{b:.1f}" for b in run["worker_busy_s"])
        notes = (
            f"cluster start {run['start_s']:.0f} s, client peak "
            f"{run['peak_mib']:.0f} MiB, results held by Dask at most "
            f"{run['worker_held_peak_mib']:.0f} MiB a worker, eigenvalues "
            f"within {gap:.0e}"
        )
        spread = _spread(got[workers, flag])
        yield (
            f"| {n_obs:,} | {label} | {run['fit_s']:.1f} "
            f"| {base['fit_s'] / run['fit_s']:.2f}x | {peaks} | {busy} "
            f"| {spread + ', ' if spread else ''}{notes} |"
        )


def _median_run(runs):
    """The run of median wall time (the lower middle one of an even number)."""
    order = np.argsort([run["fit_s"] for run in runs], kind="stable")
    return runs[order[(len(runs) - 1) // 2]]


def _spread(runs):
    """The wall times of the repeats, where there are several."""
    if len(runs) < 2:
        return ""
    times = sorted(run["fit_s"] for run in runs)
    return f"{len(runs)} runs {times[0]:.1f}-{times[-1]:.1f} s"


def report_fits(rows, args):
    table = "\n".join(
        [
            "| observations | fit | wall (s) | speed-up | peak RSS per process "
            "(MiB) | busy per worker (s) | notes |",
            "|---:|---|---:|---:|---:|---:|---|",
            *rows,
        ]
    )
    print()
    print(table)
    if args.write:
        body = (
            "The SAND paper's process, "
            f"{N_OBS_PER_SUBJECT} observations per subject at continuous times, "
            "written sorted by id as one Parquet file (row groups of "
            f"{args.rows_per_group:,} rows). Defaults of "
            "`PACEImputer(random_state=0)` (cross-validated bandwidths, K and "
            "noise floor). `fit_chunks` reads `ParquetChunks` (chunks of a row "
            "group) in one process; `fit_dask` runs on "
            "`fdaimpute.cluster.local_cluster` (worker processes with one thread "
            "each; the row marked Dask's malloc on a plain `LocalCluster`, whose "
            "workers keep Dask's `MALLOC_TRIM_THRESHOLD_=65536`), reading the "
            "same file with "
            "`dask.dataframe.read_parquet` (one partition per row group); its "
            "wall time leaves out starting the cluster (the notes give it). A "
            "worker's busy seconds are the time its tasks computed (Dask's task "
            "stream): against the wall time they show the waits. Peak "
            "RSS is per process and includes the imports. Each measurement ran "
            f"in a fresh process, {args.repeats} time(s) per row, the repeats "
            "interleaved (fit_chunks, then each Dask row, then again); a row is "
            "its run of median wall time (speed-up: its wall time against "
            "fit_chunks' median run); for Dask the workers and the client share the "
            "machine's cores (other jobs may too: see the load average below), "
            "so compare within one run only.\n\n" + table + "\n\n"
            f"Load average at the end of the run: {os.getloadavg()[0]:.1f}.\n"
        )
        write_section("dask", "PACE on a Dask cluster", body)


def report_reads(rows, args):
    table = "\n".join(
        [
            "| observations | CSV table (s) | Parquet table (s) | ratio "
            "| read_csv (s) | read_parquet (s) | ratio |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
        ]
    )
    print()
    print(table)
    if args.write:
        body = (
            "The same table (ids as zero-padded text, times and values as "
            "float64) read whole as a pandas table from CSV (`pandas.read_csv` "
            "with the options of `IrregularData.read_csv`) and from Parquet "
            "(`pyarrow`, ids as text), then as subjects "
            "(`IrregularData.read_csv` / `IrregularData.read_parquet`); imports "
            f"excluded, each read in a fresh process, the median of {READ_REPEATS} "
            "runs per format (interleaved).\n\n" + table + "\n"
        )
        write_section("parquet-read", "Reading Parquet against CSV", body)


if __name__ == "__main__":
    sys.exit(main())
