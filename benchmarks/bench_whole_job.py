"""The whole job, as a user runs it: read a CSV, fit PACE, write the curves.

``fdaimpute impute --method pace`` against the R package fdapace (``FPCA``
with its defaults for sparse data, ``fitted``, ``write.csv``), each as a whole
process on the same long CSV (``id,time,value``) of the SAND paper's process,
at 30, 8-12 and 3-5 observations per subject. Runs are interleaved (fdaimpute,
fdapace, fdaimpute, ...) so that both see the same machine load. Prints the
median wall time and peak resident memory of each, their ratio, and each
output's MSE against the true curves as a multiple of the oracle's, and
fdaimpute's time by phase (the command's ``--timings``).

fdapace runs where ``Rscript`` finds it; otherwise its columns are left
empty with a message. To build it on Debian (R from Debian's packages, the
package from its source)::

    apt-get install r-base-core r-cran-rcpp r-cran-rcppeigen r-cran-hmisc \\
        r-cran-mass r-cran-matrix r-cran-numderiv r-cran-pracma
    git clone https://github.com/functionaldata/tPACE && cd tPACE
    git checkout v0.6.0   # the version of shared/reference/fdapace
    R CMD INSTALL --no-docs .

Usage::

    python benchmarks/bench_whole_job.py --n 10000 --repeats 5 --write \
        --save-rows benchmarks/results/whole_job/rows.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402

SPARSITIES = {"30": 30, "8-12": "8-12", "3-5": "3-5"}

# fdapace's FPCA with its defaults for sparse data; fitted curves on its work
# grid, interpolated linearly to 101 points over the observed range
R_SCRIPT = """
suppressMessages(library(fdapace))
args <- commandArgs(TRUE)
d <- read.csv(args[1])
ids <- unique(d$id)
f <- factor(d$id, levels = ids)
fit <- FPCA(split(d$value, f), split(d$time, f), list(dataType = "Sparse"))
fv <- fitted(fit)
grid <- seq(min(d$time), max(d$time), length.out = 101)
out <- t(apply(fv, 1, function(r) approx(fit$workGrid, r, xout = grid, rule = 2)$y))
write.csv(data.frame(id = ids, out), args[2], row.names = FALSE)
"""


# Runs a command and writes its peak resident memory (KiB) to a file. A
# fresh, small process forks it: a child forked from this benchmark would
# count this process's memory in its own peak (Linux keeps the high-water
# mark across exec).
_MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def optional_packages(python):
    """Which of the packages scikit-learn imports when present ``python`` has.

    scikit-learn imports pandas at its own import where pandas is installed,
    and pandas imports pyarrow where that is: both add to the start-up of
    every fdaimpute command.
    """
    probe = (
        "import importlib.util as u; print(', '.join("
        'f\'{m} {"installed" if u.find_spec(m) else "absent"}\' '
        "for m in ('pandas', 'pyarrow')))"
    )
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"--python {python} does not run: {done.stderr[-500:]}")
    return done.stdout.strip()


def run_process(command, workdir):
    """Wall seconds and peak resident MiB of one process."""
    rss = Path(workdir) / "maxrss.txt"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(rss), *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{command[0]} failed: {done.stderr[-2000:]}")
    return seconds, int(rss.read_text()) / 1024


def fdaimpute_command(python, data, out, timings):
    return [python, "-m", "fdaimpute", "impute", str(data), "-o", str(out)] + [
        "--method",
        "pace",
        "--grid",
        "101",
        "--timings",
        str(timings),
    ]


#: fdaimpute's phases, in the order of the job (``--timings`` of the CLI;
#: "start-up" is the process's wall time less the command's own, "fit other"
#: the fit's time outside its named phases).
PHASES = [
    "start-up",
    "import",
    "read",
    "bins",
    "mean",
    "covariance",
    "cross-validation",
    "noise",
    "bands",
    "plausibility",
    "fit other",
    "transform",
    "write",
]


def phases_of(timings_file, wall):
    """The phases of one fdaimpute run, from its ``--timings`` file."""
    seconds = json.loads(Path(timings_file).read_text())
    out = {name: 0.0 for name in PHASES}
    for name, value in seconds.items():
        if name == "total":
            continue
        key = {"fit": "fit other", "components": "fit other"}.get(name, name)
        out[key] = out.get(key, 0.0) + value
    out["start-up"] = wall - seconds["total"]
    return out


def curves_of(path, n):
    """The curves of an output file, rows in subject order: (n, 101)."""
    import pandas as pd

    frame = pd.read_csv(path)
    values = frame.iloc[:, 1:].to_numpy(dtype=float)
    if values.shape != (n, 101):
        raise ValueError(f"{path}: expected {n} x 101 curves, got {values.shape}")
    return values


def run_sparsity(sparsity, args, workdir, rscript):
    sim = fi.simulate.sand_paper(
        args.n, n_obs=SPARSITIES[sparsity], random_state=args.seed, split=(1, 0, 0)
    )
    data, truth = sim.train.data, sim.train.truth
    path = Path(workdir) / f"obs_{sparsity}.csv"
    data.to_long().to_csv(path, index=False)
    oracle = fi.metrics.mse(
        truth, fi.oracle.ConditionalMean(sim.process).transform(data)
    )
    times = {"fdaimpute": [], "fdapace": []}
    memory = {"fdaimpute": [], "fdapace": []}
    phases = []
    outputs = {}
    for _ in range(args.repeats):
        for tool in ("fdaimpute", "fdapace"):
            if tool == "fdapace" and rscript is None:
                continue
            out = Path(workdir) / f"{tool}_{sparsity}.csv"
            out.unlink(missing_ok=True)
            timings = Path(workdir) / "timings.json"
            timings.unlink(missing_ok=True)  # the command refuses to replace it
            if tool == "fdaimpute":
                command = fdaimpute_command(args.python, path, out, timings)
            else:
                command = [
                    rscript,
                    str(Path(workdir) / "fdapace.R"),
                    str(path),
                    str(out),
                ]
            seconds, mib = run_process(command, workdir)
            if tool == "fdaimpute":
                phases.append(phases_of(timings, seconds))
            times[tool].append(seconds)
            memory[tool].append(mib)
            outputs[tool] = out
    row = {"n_i": sparsity, "subjects": len(data)}
    for tool in times:
        if not times[tool]:
            continue
        row[f"{tool} s"] = float(np.median(times[tool]))
        row[f"{tool} MiB"] = float(np.median(memory[tool]))
        mse = fi.metrics.mse(truth, curves_of(outputs[tool], len(data)))
        row[f"{tool} MSE / oracle"] = mse / oracle
    if "fdapace s" in row:
        row["fdapace / fdaimpute"] = row["fdapace s"] / row["fdaimpute s"]
        # each fdapace run over the fdaimpute run just before it
        pairs = np.divide(times["fdapace"], times["fdaimpute"])
        row["paired ratio"] = float(np.median(pairs))
        row["paired ratios"] = [float(r) for r in pairs]
    row["phases"] = {
        name: float(np.median([p[name] for p in phases])) for name in PHASES
    }
    row["runs s"] = {tool: [float(t) for t in times[tool]] for tool in times}
    print(row, flush=True)
    return row


def phase_table(rows):
    """fdaimpute's median seconds per phase, one row per sparsity."""
    table = []
    for row in rows:
        entry = {"n_i": row["n_i"], **row["phases"], "wall": row["fdaimpute s"]}
        fit = PHASES[PHASES.index("read") + 1 : PHASES.index("transform")]
        entry["fit"] = sum(row["phases"][name] for name in fit)
        table.append(entry)
    columns = ["n_i", *PHASES, "fit", "wall"]
    return markdown_table(table, columns, {c: ".2f" for c in columns[1:]})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument(
        "--sparsity", nargs="+", default=list(SPARSITIES), choices=list(SPARSITIES)
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-rows", dest="save_rows")
    parser.add_argument("--write", action="store_true")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter that runs fdaimpute (default: this one), e.g. "
        "that of a venv with the README's install (pandas, no pyarrow)",
    )
    parser.add_argument(
        "--label",
        help="a name for this installation: the section written is "
        "'whole-job-LABEL' instead of 'whole-job'",
    )
    args = parser.parse_args(argv)
    installed = optional_packages(args.python)
    rscript = shutil.which("Rscript")
    if rscript is not None:
        check = subprocess.run(
            [rscript, "-e", "library(fdapace)"], capture_output=True, text=True
        )
        if check.returncode:
            print("Rscript is here but fdapace is not: its columns stay empty")
            rscript = None
    else:
        print("Rscript not found: fdapace's columns stay empty (see the docstring)")
    print(machine())
    print(f"fdaimpute runs under {args.python} ({installed})")
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        (Path(workdir) / "fdapace.R").write_text(R_SCRIPT)
        for sparsity in args.sparsity:
            rows.append(run_sparsity(sparsity, args, workdir, rscript))
    load_after = os.getloadavg()
    columns = ["n_i", "subjects", "fdaimpute s", "fdaimpute MiB", "fdapace s"]
    columns += ["fdapace MiB", "fdapace / fdaimpute", "paired ratio"]
    columns += ["fdaimpute MSE / oracle", "fdapace MSE / oracle"]
    formats = {c: ".2f" for c in columns if c.endswith(" s")}
    formats.update({c: ".0f" for c in columns if c.endswith("MiB")})
    formats.update({c: ".3f" for c in columns if "oracle" in c})
    formats["fdapace / fdaimpute"] = ".1f"
    formats["paired ratio"] = ".1f"
    table = markdown_table(rows, columns, formats)
    phase_text = phase_table(rows)
    load = (
        f"load average (1, 5, 15 min) {', '.join(f'{x:.1f}' for x in load_before)} "
        f"before and {', '.join(f'{x:.1f}' for x in load_after)} after the runs"
    )
    print()
    print(table)
    print()
    print(phase_text)
    print(load)
    if args.save_rows:
        Path(args.save_rows).write_text(
            json.dumps(
                {
                    "command": " ".join(sys.argv),
                    "machine": machine(),
                    "load": load,
                    "fdaimpute's interpreter": f"{args.python} ({installed})",
                    "rows": rows,
                },
                indent=1,
            )
        )
    if args.write:
        body = (
            "Whole processes on the same long CSV of the SAND paper's process: "
            "`fdaimpute impute --method pace --grid 101` against fdapace 0.6.0's "
            "`FPCA` (sparse defaults), `fitted` and `write.csv` through `Rscript`. "
            f"Median of {args.repeats} interleaved runs each; peak resident memory "
            "of the process; MSE of the written curves against the true ones as a "
            "multiple of the oracle's. `fdapace / fdaimpute` is the ratio of the "
            "medians, `paired ratio` the median over the runs of each fdapace "
            "run's time over the fdaimpute run just before it. Machine load: "
            f"{load}. fdaimpute's interpreter: {installed}.\n\n" + table + "\n\n"
            "fdaimpute's time by phase (median seconds; `--timings` of the "
            "command; start-up is the process's wall time less the command's "
            "own: the interpreter, `import fdaimpute.cli` and exit; import is "
            "the method's module):\n\n" + phase_text + "\n"
        )
        name, title = "whole-job", "The whole job against fdapace"
        if args.label:
            name, title = f"{name}-{args.label}", f"{title} ({args.label})"
        write_section(name, title, body)
    return rows


if __name__ == "__main__":
    main()
