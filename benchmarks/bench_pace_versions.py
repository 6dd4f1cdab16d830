"""PACE's fit and transform in memory, this checkout against another one.

Each run is a fresh process that imports fdaimpute from one checkout, fits
``PACEImputer(random_state=0)`` to the SAND paper's process (10,000 subjects
by default) and imputes the same subjects on its grid. Runs alternate
between the two checkouts (this one, the other, this one, ...) so that both
see the same machine load. Prints the median wall and CPU seconds of fit +
transform, the chosen bandwidths and ``K``, and the largest difference
between the two checkouts' curves. With ``--cli``, the whole job instead:
``fdaimpute impute --method pace --grid 101`` on a long CSV of the same
subjects, as a whole process (wall seconds and peak resident memory), and
whether the two output files are the same bytes. With ``--datasets``, the
fit and transform on small real data sets of ``benchmarks/_smalldata.py``
instead of the simulation (read by this checkout's loader for both).

Usage::

    python benchmarks/bench_pace_versions.py --against /work/main --repeats 3
    python benchmarks/bench_pace_versions.py --against /work/main --repeats 3 --cli
    python benchmarks/bench_pace_versions.py --against /work/main --datasets sitka
    python benchmarks/bench_pace_versions.py --against /work/main --method mfpca

``--method mfpca`` times ``MFPCAImputer()`` instead (``choice``: its basis size;
the chosen bandwidths for PACE).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table  # noqa: E402

HERE = Path(__file__).resolve().parent.parent

# the child: fit + transform with the checkout on its path, timed
_CHILD = """
import json, sys, time
import numpy as np
import fdaimpute as fi
n, n_obs, out, method = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
if len(sys.argv) > 5:  # a small real data set, by this checkout's loader
    sys.path.insert(0, sys.argv[5])
    from _smalldata import DATASETS
    data = DATASETS[n_obs]()
else:
    n_obs = int(n_obs) if n_obs.isdigit() else n_obs
    sim = fi.simulate.sand_paper(n, n_obs=n_obs, random_state=0, split=(1, 0, 0))
    data = sim.train.data
cpu, wall = time.process_time(), time.perf_counter()
if method == "pace":
    est = fi.PACEImputer(random_state=0).fit(data)
    choice = "/".join(f"{h:.4g}" for h in np.ravel(est.bandwidth_cov_))
else:
    est = fi.MFPCAImputer().fit(data)
    choice = f"basis {est.n_basis_}"
curves = np.asarray(est.transform(data))
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
np.save(out + ".npy", curves)
with open(out + ".json", "w") as fh:
    json.dump(dict(cpu=cpu, wall=wall, file=fi.__file__, choice=choice,
                   k=int(est.n_components_)), fh)
"""


def run(checkout, n, n_obs, out, small=False, method="pace"):
    env = dict(os.environ, PYTHONPATH=str(checkout))
    loader = [str(HERE / "benchmarks")] if small else []
    subprocess.run(
        [sys.executable, "-c", _CHILD, str(n), str(n_obs), out, method, *loader],
        env=env,
        check=True,
        cwd=os.path.dirname(out),  # not a checkout: "-c" puts the cwd on the path
    )
    with open(out + ".json") as fh:
        result = json.load(fh)
    if not result["file"].startswith(str(checkout)):
        raise RuntimeError(f"imported {result['file']}, not from {checkout}")
    return result, np.load(out + ".npy")


# the child that writes the long CSV of the simulated subjects
_CSV = """
import sys
import fdaimpute as fi
n, n_obs, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
n_obs = int(n_obs) if n_obs.isdigit() else n_obs
sim = fi.simulate.sand_paper(n, n_obs=n_obs, random_state=0, split=(1, 0, 0))
sim.train.data.to_long().to_csv(path, index=False)
"""


def run_cli(checkout, data, out, workdir):
    """Wall seconds, peak MiB and the output's bytes of one ``impute`` process."""
    from bench_whole_job import _MEASURE  # a fresh process measures the peak

    rss = os.path.join(workdir, "maxrss.txt")
    command = [sys.executable, "-m", "fdaimpute", "impute", str(data), "-o", out]
    command += ["--method", "pace", "--grid", "101", "--force"]
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", _MEASURE, rss, *command],
        env=dict(os.environ, PYTHONPATH=str(checkout)),
        cwd=workdir,  # not a checkout: "-m" puts the cwd on the path
        check=True,
        stdout=subprocess.DEVNULL,
    )
    seconds = time.perf_counter() - start
    with open(rss) as fh:
        mib = int(fh.read()) / 1024
    with open(out, "rb") as fh:
        return seconds, mib, fh.read()


def main_cli(args, other):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n_obs in ("30", "8-12", "3-5"):
            data = os.path.join(tmp, f"obs_{n_obs}.csv")
            subprocess.run(
                [sys.executable, "-c", _CSV, str(args.n), n_obs, data],
                env=dict(os.environ, PYTHONPATH=str(HERE)),
                check=True,
                cwd=tmp,
            )
            runs = {"this": [], "other": []}
            outputs = {}
            for _ in range(args.repeats):
                for name, checkout in (("this", HERE), ("other", other)):
                    out = os.path.join(tmp, f"{name}.csv")
                    seconds, mib, outputs[name] = run_cli(checkout, data, out, tmp)
                    runs[name].append((seconds, mib))
            for name in ("other", "this"):
                rows.append(
                    {
                        "obs": n_obs,
                        "checkout": str(HERE if name == "this" else other),
                        "wall s": float(np.median([r[0] for r in runs[name]])),
                        "peak MiB": float(np.max([r[1] for r in runs[name]])),
                        "same output bytes": outputs["this"] == outputs["other"],
                    }
                )
    print(machine())
    print(
        f"fdaimpute impute --method pace --grid 101, n = {args.n}: median wall "
        f"and largest peak memory of {args.repeats} alternating runs\n"
    )
    print(markdown_table(rows, list(rows[0]), {"wall s": ".2f", "peak MiB": ".0f"}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the other checkout")
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cli", action="store_true", help="the whole job instead")
    parser.add_argument(
        "--datasets", nargs="+", help="small real data sets instead of the simulation"
    )
    parser.add_argument(
        "--method", choices=("pace", "mfpca"), default="pace", help="the imputer"
    )
    args = parser.parse_args(argv)
    other = Path(args.against).resolve()
    if args.cli:
        return main_cli(args, other)
    rows = []
    cases = args.datasets or ("30", "8-12", "3-5")
    with tempfile.TemporaryDirectory() as tmp:
        for n_obs in cases:
            runs = {"this": [], "other": []}
            curves = {}
            for _ in range(args.repeats):
                for name, checkout in (("this", HERE), ("other", other)):
                    out = os.path.join(tmp, name)
                    result, curves[name] = run(
                        checkout,
                        args.n,
                        n_obs,
                        out,
                        small=bool(args.datasets),
                        method=args.method,
                    )
                    runs[name].append(result)
            for name in ("other", "this"):
                rs = runs[name]
                rows.append(
                    {
                        "data" if args.datasets else "obs": n_obs,
                        "checkout": str(HERE if name == "this" else other),
                        "wall s": float(np.median([r["wall"] for r in rs])),
                        "cpu s": float(np.median([r["cpu"] for r in rs])),
                        "choice": rs[0]["choice"],
                        "K": rs[0]["k"],
                        "max abs diff of curves": float(
                            np.max(np.abs(curves["this"] - curves["other"]))
                        ),
                    }
                )
    print(machine())
    what = "small real data" if args.datasets else f"n = {args.n}"
    name = {"pace": "PACE", "mfpca": "mFPCA"}[args.method]
    print(f"{name} fit + transform, {what}, median of {args.repeats} runs\n")
    print(
        markdown_table(
            rows,
            list(rows[0]),
            {"wall s": ".2f", "cpu s": ".2f", "max abs diff of curves": ".1e"},
        )
    )


if __name__ == "__main__":
    main()
