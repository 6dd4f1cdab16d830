"""PACE's fit and transform in memory, this checkout against another one.

Each run is a fresh process that imports fdaimpute from one checkout, fits
``PACEImputer(random_state=0)`` to the SAND paper's process (10,000 subjects
by default) and imputes the same subjects on its grid. Runs alternate
between the two checkouts (this one, the other, this one, ...) so that both
see the same machine load. Prints the median wall and CPU seconds of fit +
transform, the chosen bandwidths and ``K``, and the largest difference
between the two checkouts' curves.

Usage::

    python benchmarks/bench_pace_versions.py --against /work/main --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
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
n, n_obs, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
n_obs = int(n_obs) if n_obs.isdigit() else n_obs
sim = fi.simulate.sand_paper(n, n_obs=n_obs, random_state=0, split=(1, 0, 0))
data = sim.train.data
cpu, wall = time.process_time(), time.perf_counter()
pace = fi.PACEImputer(random_state=0).fit(data)
curves = np.asarray(pace.transform(data))
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
np.save(out + ".npy", curves)
with open(out + ".json", "w") as fh:
    json.dump(dict(cpu=cpu, wall=wall, file=fi.__file__,
                   h=[float(h) for h in np.ravel(pace.bandwidth_cov_)],
                   k=int(pace.n_components_)), fh)
"""


def run(checkout, n, n_obs, out):
    env = dict(os.environ, PYTHONPATH=str(checkout))
    subprocess.run(
        [sys.executable, "-c", _CHILD, str(n), str(n_obs), out],
        env=env,
        check=True,
        cwd=os.path.dirname(out),  # not a checkout: "-c" puts the cwd on the path
    )
    with open(out + ".json") as fh:
        result = json.load(fh)
    if not result["file"].startswith(str(checkout)):
        raise RuntimeError(f"imported {result['file']}, not from {checkout}")
    return result, np.load(out + ".npy")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the other checkout")
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    other = Path(args.against).resolve()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n_obs in ("30", "8-12", "3-5"):
            runs = {"this": [], "other": []}
            curves = {}
            for _ in range(args.repeats):
                for name, checkout in (("this", HERE), ("other", other)):
                    out = os.path.join(tmp, name)
                    result, curves[name] = run(checkout, args.n, n_obs, out)
                    runs[name].append(result)
            for name in ("other", "this"):
                rs = runs[name]
                rows.append(
                    {
                        "obs": n_obs,
                        "checkout": str(HERE if name == "this" else other),
                        "wall s": float(np.median([r["wall"] for r in rs])),
                        "cpu s": float(np.median([r["cpu"] for r in rs])),
                        "bandwidth_cov": "/".join(f"{h:.4g}" for h in rs[0]["h"]),
                        "K": rs[0]["k"],
                        "max abs diff of curves": float(
                            np.max(np.abs(curves["this"] - curves["other"]))
                        ),
                    }
                )
    print(machine())
    print(f"PACE fit + transform, n = {args.n}, median of {args.repeats} runs\n")
    print(
        markdown_table(
            rows,
            list(rows[0]),
            {"wall s": ".2f", "cpu s": ".2f", "max abs diff of curves": ".1e"},
        )
    )


if __name__ == "__main__":
    main()
