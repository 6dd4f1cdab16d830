"""SAND's error against ``visible_weight``, the loss weight of the points it is shown.

Training hides 1 to half of each subject's points from the encoder and
scores the curve at all of them; ``visible_weight`` is the weight of the
points the encoder saw, relative to the hidden ones. Each weight is one run
of :mod:`bench_nonlinear` (phase variation, 8-12 observations, n = 10,000,
45 epochs, SAND without a base) whose rows are saved under
``benchmarks/results/nonlinear/n10000_t0.05_e45_vw<w>_phase.json``; this
script runs the weights not saved yet (all with ``--rerun``) and tables them.

Examples
--------
The run in docs/benchmarks.md (one weight at a time, or several side by side
on different cores)::

    python benchmarks/bench_visible_weight.py --weights 0 0.1 0.2 0.4 1 --write

Only the table, from the saved rows::

    python benchmarks/bench_visible_weight.py --from-saved --write
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_nonlinear  # noqa: E402
from _report import markdown_table, write_section  # noqa: E402

#: bench_nonlinear's default share of test subjects, which its runs use
TEST_SHARE = 0.05
COLUMNS = ["visible_weight", "method", "MSE", "MSE / linear oracle", "fit s"]


def rows_path(weight, args):
    prefix = bench_nonlinear.results_prefix(
        args.n, TEST_SHARE, args.epochs, visible_weight=weight
    )
    return bench_nonlinear.RESULTS / f"{prefix}_{args.process}.json"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--weights", nargs="+", type=float, default=[0, 0.1, 0.2, 0.4, 1]
    )
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--epochs", type=int, default=45)
    parser.add_argument("--process", default="phase", choices=["phase", "warp"])
    parser.add_argument("--sparsity", default="8-12")
    parser.add_argument("--method", default="sand", help="bench_nonlinear's name")
    parser.add_argument("--rerun", action="store_true", help="fit saved weights too")
    parser.add_argument("--from-saved", action="store_true", help="fit nothing")
    parser.add_argument("--write", action="store_true", help="update the docs")
    args = parser.parse_args(argv)
    method = bench_nonlinear.ALIASES.get(args.method, args.method)
    table_rows = []
    for weight in args.weights:
        path = rows_path(weight, args)
        if not args.from_saved and (args.rerun or not path.exists()):
            bench_nonlinear.main(
                [
                    f"--n={args.n}",
                    f"--epochs={args.epochs}",
                    f"--visible-weight={weight:g}",
                    f"--process={args.process}",
                    f"--sparsity={args.sparsity}",
                    "--methods",
                    "oracle",
                    args.method,
                ]
            )
        if not path.exists():
            print(f"no saved rows for visible_weight={weight:g} ({path.name})")
            continue
        for row in json.loads(path.read_text()):
            if (
                row["method"] == method
                and row["n_i"] == args.sparsity
                and bench_nonlinear.row_seed(row) == 0
            ):
                table_rows.append({**row, "visible_weight": f"{weight:g}"})
    table = markdown_table(
        table_rows, COLUMNS, {"MSE / linear oracle": ".3f", "fit s": ".0f"}
    )
    print(table)
    if args.write:
        write_section(
            "visible-weight", "The loss weight of visible points", _body(args, table)
        )


def _body(args, table):
    return f"""
{method_line(args)} The rows of each weight are saved in
`benchmarks/results/nonlinear/n{args.n}_t{TEST_SHARE:g}_e{args.epochs}_vw<weight>_{args.process}.json`.
MSE x 1000 (standard error over 500 test subjects) against the noise-free curves,
divided by the linear oracle's.

{table}
"""


def method_line(args):
    return (
        f"`fi.simulate.{bench_nonlinear.PROCESSES[args.process].__name__}`, "
        f"{args.sparsity} observations per subject, n = {args.n}, "
        f'{args.method.upper()} without a base, `preset="cpu"` with '
        f"max_epochs={args.epochs} and the `visible_weight` of each row (the "
        "other settings as in the non-linear sections)."
    )


if __name__ == "__main__":
    main()
