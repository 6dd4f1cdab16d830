"""The conditional neural process against PACE on the SAND paper's simulation.

A small comparison for ``docs/cnp.md``: n training subjects per sparsity
(30, 8-12 and 3-5 points), scored on separate test subjects from the same
draw against their noise-free curves on the 101-point grid. Rows: the
oracle (conditional mean under the true covariance), PACE, and the CNP
after each requested number of epochs (each a separate fit with its
default sizes and its cosine schedule over those epochs). Columns: MSE and
TV x 1000 (standard errors over test subjects), the pointwise coverage and
mean width of the 95% band ``curve +- 1.96 SD`` of the true curve, and fit
seconds. For the CNP the band is given twice: with the SD that
``transform(return_std=True)`` returns (the decoder's variance less the
estimated noise variance) and with the decoder's own SD (curve plus noise).

Examples
--------
The documented run (1 torch thread)::

    python benchmarks/bench_cnp.py --threads 1 --save benchmarks/results/cnp/n1000.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table  # noqa: E402

import fdaimpute as fi  # noqa: E402

SPARSITIES = ("30", "8-12", "3-5")
COLUMNS = ["n_i", "method", "MSE", "TV", "cover", "width", "cover (obs SD)", "fit s"]


def band(truth, curves, sd):
    """Pointwise coverage of ``curves +- 1.96 sd`` and its mean width."""
    inside = np.abs(truth - curves) <= 1.96 * sd
    return float(inside.mean()), float(2 * 1.96 * sd.mean())


def row(sparsity, method, truth, curves, sd=None, obs_sd=None, seconds=0.0):
    s = fi.metrics.summarize(truth, curves)
    out = {
        "n_i": sparsity,
        "method": method,
        "MSE": f"{s['mse']:.1f} ({s['mse_se']:.1f})",
        "TV": f"{s['tv']:.1f} ({s['tv_se']:.1f})",
        "fit s": f"{seconds:.1f}",
        "mse": s["mse"],
        "tv": s["tv"],
    }
    if sd is not None:
        cover, width = band(truth, curves, sd)
        out.update(cover=f"{cover:.3f}", width=f"{width:.2f}")
    if obs_sd is not None:
        out["cover (obs SD)"] = f"{band(truth, curves, obs_sd)[0]:.3f}"
    return out


def decoder_sd(est, data):
    """The decoder's own predictive SD on ``grid_`` (curve plus noise)."""
    from fdaimpute.nn.cnp import predict_cnp

    res = predict_cnp(
        est.module_,
        est._tensors(data, est.device_),
        est._grid_tensor(est.grid_, est.device_),
        variance=True,
    )
    return np.sqrt(res["variance"].numpy()) * est.value_scale_


def run_sparsity(sparsity, args):
    n_obs = 30 if sparsity == "30" else sparsity
    total = args.n + args.n_test
    sim = fi.simulate.sand_paper(
        n=total,
        n_obs=n_obs,
        split=(args.n / total, 0.0, args.n_test / total),
        random_state=args.seed,
    )
    train, test, truth, grid = sim.train.data, sim.test.data, sim.test.truth, sim.grid
    rows = []
    oracle = fi.oracle.ConditionalMean(sim.process, grid=grid)
    rows.append(row(sparsity, "oracle", truth, oracle.transform(test)))
    start = time.perf_counter()
    pace = fi.PACEImputer(grid=grid, random_state=args.seed).fit(train)
    seconds = time.perf_counter() - start
    curves, sd = pace.transform(test, return_std=True)
    rows.append(row(sparsity, "PACE", truth, curves, sd, seconds=seconds))
    for epochs in args.epochs:
        start = time.perf_counter()
        cnp = fi.CNPImputer(
            grid=grid, max_epochs=epochs, device="cpu", random_state=args.seed
        ).fit(train)
        seconds = time.perf_counter() - start
        curves, sd = cnp.transform(test, return_std=True)
        method = f"CNP, {epochs} epochs (best {cnp.best_epoch_})"
        rows.append(
            row(sparsity, method, truth, curves, sd, decoder_sd(cnp, test), seconds)
        )
    for r in rows:
        print(" | ".join(str(r.get(c, "")) for c in COLUMNS), flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="training subjects")
    parser.add_argument("--n-test", type=int, default=1000, help="test subjects")
    parser.add_argument("--epochs", type=int, nargs="+", default=[30, 100])
    parser.add_argument(
        "--sparsity", nargs="+", default=list(SPARSITIES), choices=SPARSITIES
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--save", help="write the rows and settings to a JSON file")
    args = parser.parse_args(argv)
    import torch  # here, so that the first fit's time does not include it

    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    rows = [r for s in args.sparsity for r in run_sparsity(s, args)]
    minutes = (time.perf_counter() - start) / 60
    print()
    print(markdown_table(rows, COLUMNS))
    print(f"\nTotal {minutes:.1f} min; {machine()}")
    if args.save:
        path = Path(args.save)
        path.parent.mkdir(parents=True, exist_ok=True)
        run = {
            "command": "python " + " ".join(sys.argv),
            "machine": machine(),
            "minutes": minutes,
            "settings": vars(args),
            "rows": rows,
        }
        path.write_text(json.dumps(run, indent=1))


if __name__ == "__main__":
    main()
