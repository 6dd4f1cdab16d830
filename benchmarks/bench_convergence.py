"""MSE against wall time: what a CPU training budget buys, with and without a base.

On the SAND paper's process (n subjects, 95% fitted, 5% test), each neural
method is fitted once per epoch budget (a fresh fit each time, so each point
is what a user gets when asking for that many epochs: the learning-rate
schedule spans the budget). Reported: fit seconds, test MSE relative to the
oracle and to PACE (fitted on the same subjects in the same run). A figure
(one panel per sparsity, MSE / oracle against fit seconds, PACE as a point)
goes to ``docs/img/convergence.png`` with ``--write``.

Usage::

    python benchmarks/bench_convergence.py --n 2000 --budgets 5 20     # minutes
    python benchmarks/bench_convergence.py --write                     # n = 10,000
    python benchmarks/bench_convergence.py --sparsity 30 --save-rows a.json
    python benchmarks/bench_convergence.py --load-rows a.json b.json --write
    python benchmarks/bench_convergence.py --load-rows c.json --section conv-10k --write
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402

SPARSITIES = ("30", "8-12", "3-5")
METHODS = {
    "VT": (fi.VTImputer, {"base": None}),
    "SAND": (fi.SANDImputer, {"base": None}),
    "VT+base": (fi.VTImputer, {"base": "pace"}),
    "SAND+base": (fi.SANDImputer, {"base": "pace"}),
}
COLUMNS = ["n_i", "method", "epochs", "fit s", "MSE / oracle", "MSE / PACE"]


def run_sparsity(sparsity, args):
    """Rows for one sparsity: PACE, then each method at each budget."""
    n_obs = 30 if sparsity == "30" else sparsity
    sim = fi.simulate.sand_paper(n=args.n, n_obs=n_obs, random_state=args.seed)
    fit_data = fi.IrregularData.concat([sim.train.data, sim.validation.data])
    test, truth, grid = sim.test.data, sim.test.truth, sim.grid

    def mse(curves):
        return float(np.mean((curves - truth) ** 2))

    oracle = mse(fi.oracle.ConditionalMean(sim.process, grid=grid).transform(test))
    start = time.perf_counter()
    pace = fi.PACEImputer(grid=grid, random_state=args.seed).fit(fit_data)
    pace_seconds = time.perf_counter() - start
    pace_mse = mse(pace.transform(test))
    rows = [_row(sparsity, "PACE", "", pace_seconds, pace_mse, oracle, pace_mse)]
    for method in args.methods:
        cls, extra = METHODS[method]
        for epochs in args.budgets:
            start = time.perf_counter()
            model = cls(
                grid=grid,
                max_epochs=epochs,
                validation_fraction=0.05,
                random_state=args.seed,
                **extra,
            ).fit(fit_data)
            seconds = time.perf_counter() - start
            rows.append(
                _row(
                    sparsity,
                    method,
                    epochs,
                    seconds,
                    mse(model.transform(test)),
                    oracle,
                    pace_mse,
                )
            )
            if getattr(model, "base_weight_", None) is not None:
                rows[-1]["base weight"] = model.base_weight_
    return rows


def _row(sparsity, method, epochs, seconds, value, oracle, pace):
    row = {
        "n_i": sparsity,
        "method": method,
        "epochs": epochs,
        "fit s": f"{seconds:.0f}",
        "MSE / oracle": f"{value / oracle:.3f}",
        "MSE / PACE": f"{value / pace:.3f}",
        "seconds": seconds,
        "ratio": value / oracle,
    }
    print(
        f"  {sparsity:>5} {method:<10} {epochs!s:>4} epochs {seconds:7.0f} s  "
        f"MSE/oracle {row['MSE / oracle']}  MSE/PACE {row['MSE / PACE']}",
        flush=True,
    )
    return row


def figure(rows, path):
    """MSE / oracle against fit seconds, one panel per sparsity."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = [s for s in SPARSITIES if any(r["n_i"] == s for r in rows)]
    fig, axes = plt.subplots(1, len(levels), figsize=(4.2 * len(levels), 3.4))
    for ax, level in zip(np.atleast_1d(axes), levels):
        mine = [r for r in rows if r["n_i"] == level]
        for method in dict.fromkeys(r["method"] for r in mine):
            pts = [r for r in mine if r["method"] == method]
            x = [r["seconds"] for r in pts]
            y = [r["ratio"] for r in pts]
            style = "*" if method == "PACE" else "o-"
            ax.plot(x, y, style, label=method, markersize=9 if method == "PACE" else 4)
        ax.set_xscale("log")
        ax.axhline(1.0, color="0.6", lw=0.8)
        ax.set_title(f"n_i = {level}")
        ax.set_xlabel("fit seconds (2 CPU cores)")
        ax.set_ylabel("test MSE / oracle")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _latest(runs):
    """The runs' rows; a later run's row replaces an earlier one of the same fit.

    A fit is a sparsity, a method and an epoch budget, so re-running one
    method after a change to it supersedes its old rows (and PACE's).
    """
    rows = {}
    for run in runs:
        for row in run["rows"]:
            rows[row["n_i"], row["method"], row["epochs"]] = row
    order = {s: i for i, s in enumerate(SPARSITIES)}

    def key(row):
        return order[row["n_i"]], row["method"] != "PACE", row["method"], row["epochs"]

    return sorted(rows.values(), key=key)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--sparsity", nargs="+", default=list(SPARSITIES))
    parser.add_argument("--methods", nargs="+", default=["SAND", "SAND+base"])
    parser.add_argument("--budgets", nargs="+", type=int, default=[5, 15, 45])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--save-rows", dest="save_rows")
    parser.add_argument("--load-rows", dest="load_rows", nargs="+")
    parser.add_argument("--write", action="store_true")
    parser.add_argument(
        "--section",
        default="convergence",
        help="section of docs/benchmarks.md (and name of its figure) to write",
    )
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.load_rows:
        runs = [json.loads(Path(p).read_text()) for p in args.load_rows]
    else:
        start = time.perf_counter()
        rows = [r for s in args.sparsity for r in run_sparsity(s, args)]
        runs = [
            {
                "rows": rows,
                "command": "python " + " ".join(sys.argv),
                "machine": machine(),
                "minutes": (time.perf_counter() - start) / 60,
                "n": args.n,
            }
        ]
        if args.save_rows:
            Path(args.save_rows).write_text(json.dumps(runs[0], indent=1))
    rows = _latest(runs)
    table = markdown_table(rows, COLUMNS)
    print(table)
    if args.write:
        img = Path(__file__).resolve().parents[1] / "docs" / "img"
        figure(rows, img / f"{args.section}.png")
        runs_text = "\n".join(
            f"- `{r['command']}`: {r['minutes']:.0f} min, {r['machine']}" for r in runs
        )
        body = (
            f"The SAND paper's process, n = {runs[0]['n']:,} (95% fitted, 5% "
            "test). Each row is a fresh fit with that many epochs (the cosine "
            "schedule spans the budget); PACE is fitted on the same subjects "
            "in the same run. Runs:\n\n"
            f"{runs_text}\n\n{table}\n\n"
            f"![MSE against fit time](img/{args.section}.png)\n"
        )
        title = f"MSE against training time (CPU, n = {runs[0]['n']:,})"
        write_section(args.section, title, body)


if __name__ == "__main__":
    main()
