"""PACEImputer.fdapace() against the R package fdapace on small real data sets.

Runs fdapace's ``FPCA`` with its defaults for sparse data (through
``Rscript``) and ``PACEImputer.fdapace()`` on each small real data set of
the stability benchmark, and prints the choices of both (K, noise variance,
bandwidths) and the largest difference of their fitted curves on fdapace's
work grid, relative to the largest curve value. Needs R with fdapace (see
``bench_whole_job.py`` for how to build it); exits with a message otherwise.

Usage::

    python benchmarks/bench_fdapace_parity.py --write
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _smalldata  # noqa: E402
from _report import markdown_table, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402

R_SCRIPT = """
suppressMessages(library(fdapace))
args <- commandArgs(TRUE)
d <- read.csv(args[1], colClasses = c(id = "character"))
ids <- unique(d$id)
f <- factor(d$id, levels = ids)
fit <- FPCA(split(d$value, f), split(d$time, f), list(dataType = "Sparse"))
write.csv(fitted(fit), args[2], row.names = FALSE)
write.csv(data.frame(t = fit$workGrid), args[3], row.names = FALSE)
cat(sprintf('{"K": %d, "sigma2": %.17g, "bwMu": %.17g, "bwCov": %.17g}',
            fit$selectK, fit$sigma2, fit$bwMu, fit$bwCov), file = args[4])
"""

DATASETS = {
    "blackmore": _smalldata.blackmore,
    "pbcseq": _smalldata.pbcseq,
    "orthodont": _smalldata.orthodont,
    "oxboys": _smalldata.oxboys,
    "sitka": _smalldata.sitka,
}


def compare(name, data, rscript, workdir):
    """One data set: fdapace's and our choices and the curves' difference."""
    work = Path(workdir)
    frame = data.to_long()
    frame.columns = ["id", "time", "value"]
    frame.to_csv(work / "data.csv", index=False)
    paths = [work / f for f in ("fitted.csv", "grid.csv", "info.json")]
    done = subprocess.run(
        [rscript, str(work / "fpca.R"), str(work / "data.csv"), *map(str, paths)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"fdapace failed on {name}: {done.stderr[-1000:]}")
    theirs = pd.read_csv(paths[0]).to_numpy()
    grid = pd.read_csv(paths[1])["t"].to_numpy()
    info = json.loads(paths[2].read_text())
    est = fi.PACEImputer.fdapace().fit(data)
    ours = est.transform(data, grid=grid)
    return {
        "data": name,
        "subjects": len(data),
        "distinct times": int(frame["time"].nunique()),
        "K (R / ours)": f"{info['K']} / {est.n_components_}",
        "sigma2 rel. diff": abs(est.noise_variance_ / info["sigma2"] - 1),
        "bandwidths rel. diff": max(
            abs(est.bandwidth_mean_ / info["bwMu"] - 1),
            abs(float(np.max(est.bandwidth_cov_)) / info["bwCov"] - 1),
        ),
        "curves max diff / max": float(
            np.abs(ours - theirs).max() / np.abs(theirs).max()
        ),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    rscript = shutil.which("Rscript")
    if (
        rscript is None
        or subprocess.run(
            [rscript, "-e", "library(fdapace)"], capture_output=True
        ).returncode
    ):
        print("Rscript with fdapace not found: nothing to compare (see the docstring)")
        return []
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        (Path(workdir) / "fpca.R").write_text(R_SCRIPT)
        for name, loader in DATASETS.items():
            rows.append(compare(name, loader(), rscript, workdir))
            print(rows[-1], flush=True)
    version = subprocess.run(
        [rscript, "-e", 'cat(format(packageVersion("fdapace")))'],
        capture_output=True,
        text=True,
    ).stdout.strip()
    columns = list(rows[0])
    formats = {c: ".1e" for c in columns if "diff" in c}
    table = markdown_table(rows, columns, formats)
    print(table)
    if args.write:
        body = (
            f"`PACEImputer.fdapace()` and fdapace {version}'s `FPCA` (defaults for "
            "sparse data, through `Rscript`) on the small real data sets of the "
            "stability benchmark, all subjects: the number of components, the "
            "noise variance and the bandwidths each chose (relative differences), "
            "and the largest difference of the fitted curves on fdapace's work "
            "grid over the largest fitted value.\n\n" + table + "\n"
        )
        write_section("fdapace-parity", "PACE against fdapace on real data", body)
    return rows


if __name__ == "__main__":
    main()
