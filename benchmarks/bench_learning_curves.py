"""Learning curves: the networks' error against PACE's as the data grow.

Fits nothing: tables and plots the rows that two other benchmarks saved.

- Real data: rows of ``bench_realdata.py --save-rows`` (held-out readings,
  random splits; ``--n-subjects`` draws that many subjects first). Files are
  read in the order given; where two hold the same data set, size, split and
  method, the first is kept.
- Simulation: rows of ``bench_nonlinear.py`` (``benchmarks/results/nonlinear/
  n{N}_t{share}_e{epochs}_{process}.json``; the size is read from the name),
  scored against the noise-free curves of the test subjects.

For each size the table gives every method's MSE relative to PACE (paired
within splits on real data, with the standard error over splits), the fit
minutes, and for the default (``+base``) how often it kept PACE. The figure
draws MSE / PACE against the number of subjects.

Examples
--------
::

    python benchmarks/bench_learning_curves.py \\
        --realdata benchmarks/results/realdata/learning/*.json \\
        --nonlinear benchmarks/results/nonlinear/n*_edefault_val0.1_warp.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import markdown_table, mean_se, write_section  # noqa: E402
from bench_realdata import pooled_splits  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIGURE = ROOT / "docs" / "img" / "learning_curves.png"
LABELS = {"SAND": "SAND alone", "SAND+base": "SAND (default)"}
TITLES = {
    "uk-30": "UK electricity, 30 readings a day",
    "uk-8-12": "UK electricity, 8-12 readings a day",
    "uk-3-5": "UK electricity, 3-5 readings a day",
    "framingham": "Framingham BMI",
    "warp 8-12": "time_warping, 8-12 points",
    "phase 8-12": "phase_variation, 8-12 points",
}


def realdata_scores(paths):
    """``{(data, n): {split: {method: score}}}`` from bench_realdata row files."""
    return pooled_splits([json.loads(Path(path).read_text()) for path in paths])


def realdata_rows(pooled):
    """One table row per data set, size and method (PACE first)."""
    rows = []
    for (name, n), splits in sorted(pooled.items()):
        methods = sorted(
            {m for s in splits.values() for m in s},
            key=lambda m: (m != "PACE", m),
        )
        for method in methods:
            have = [s for s in splits.values() if method in s and "PACE" in s]
            if not have:
                continue
            ratio = [s[method]["mse"] / s["PACE"]["mse"] for s in have]
            mean, se = mean_se(ratio)
            shown = f"{mean:.3f} ({se:.3f})" if len(have) > 1 else f"{mean:.3f}"
            row = {
                "data": name,
                "n": n,
                "method": LABELS.get(method, method),
                "splits": len(have),
                "ratio": mean,
                "se": se,
                "MSE / PACE": shown,
                "fit min": np.mean([s[method]["seconds"] for s in have]) / 60,
            }
            if "base" in method:
                kept = sum(bool(s[method].get("kept_base")) for s in have)
                row["kept PACE"] = f"{kept}/{len(have)}"
            rows.append(row)
    return rows


def nonlinear_rows(paths):
    """One table row per process, sparsity, size and method.

    A method fitted with several seeds (``--seeds``: same data, other
    initial weights) gives the mean of its ratios, with their standard error.
    """
    rows = []
    for path in paths:
        size = re.match(r"n(\d+)_", Path(path).name)
        if size is None:
            raise ValueError(f"{path}: the name does not start with n<subjects>_")
        saved = json.loads(Path(path).read_text())
        for process, n_i in sorted({(r["process"], r["n_i"]) for r in saved}):
            fits = {}
            for r in saved:
                if r["process"] == process and r["n_i"] == n_i:
                    fits.setdefault(r["method"], []).append(r)
            if "PACE" not in fits:
                raise ValueError(f"{path}: no PACE row for {process} at {n_i}")
            pace = fits["PACE"][0]["mse"]
            for method, runs in fits.items():
                mean, se = mean_se([r["mse"] / pace for r in runs])
                row = {
                    "data": f"{process} {n_i}",
                    "n": int(size.group(1)),
                    "method": LABELS.get(method, method),
                    "seeds": len(runs),
                    "ratio": mean,
                    "se": se,
                    "MSE / PACE": f"{mean:.3f}"
                    + (f" ({se:.3f})" if len(runs) > 1 else ""),
                    "fit min": np.mean([r["fit s"] for r in runs]) / 60,
                }
                if "linear oracle" in fits:
                    oracle = fits["linear oracle"][0]["mse"]
                    ratio = np.mean([r["mse"] for r in runs]) / oracle
                    row["MSE / linear oracle"] = f"{ratio:.3f}"
                weights = [r.get("base weight") for r in runs]
                if weights[0] is not None:
                    kept = sum(np.all(np.asarray(w) == 0) for w in weights)
                    row["kept PACE"] = f"{kept}/{len(runs)}"
                rows.append(row)
    return sorted(rows, key=lambda r: (r["data"], r["n"]))


def plot(rows, path):
    """MSE / PACE against subjects, one panel per data set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({r["data"] for r in rows})
    fig, axes = plt.subplots(
        1, len(panels), figsize=(4.6 * len(panels), 3.6), squeeze=False
    )
    for ax, panel in zip(axes[0], panels):
        for method in (LABELS["SAND"], LABELS["SAND+base"]):
            mine = sorted(
                (r for r in rows if r["data"] == panel and r["method"] == method),
                key=lambda r: r["n"],
            )
            if not mine:
                continue
            n = [r["n"] for r in mine]
            ratio = [r["ratio"] for r in mine]
            se = [0.0 if np.isnan(r["se"]) else r["se"] for r in mine]
            ax.errorbar(n, ratio, yerr=se, marker="o", capsize=3, label=method)
        ax.axhline(1.0, color="grey", lw=1, ls="--", label="PACE")
        oracle = sorted(
            (r["n"], r["ratio"])
            for r in rows
            if r["data"] == panel and r["method"] == "linear oracle"
        )
        if oracle:
            ax.plot(*zip(*oracle), color="grey", lw=1, ls=":", label="linear oracle")
        sizes = sorted({r["n"] for r in rows if r["data"] == panel})
        ax.set_xscale("log")
        ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
        ax.minorticks_off()
        ax.set_title(TITLES.get(panel, panel))
        ax.set_xlabel("subjects")
        ax.set_ylabel("MSE / PACE")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--realdata", nargs="*", default=[], help="bench_realdata rows")
    parser.add_argument(
        "--nonlinear", nargs="*", default=[], help="bench_nonlinear rows"
    )
    parser.add_argument("--figure", type=Path, default=FIGURE)
    parser.add_argument("--note", default="", help="text after the tables")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--section", default="learning-curves")
    args = parser.parse_args(argv)
    if not args.realdata and not args.nonlinear:
        parser.error("give --realdata or --nonlinear row files")

    real = realdata_rows(realdata_scores(args.realdata))
    simulated = nonlinear_rows(args.nonlinear)
    columns = ["data", "n", "method", "splits", "MSE / PACE", "fit min", "kept PACE"]
    formats = {"fit min": ".1f"}
    tables = []
    if real:
        tables.append(markdown_table(real, columns, formats))
    if simulated:
        sim_columns = [
            "data",
            "n",
            "method",
            "seeds",
            "MSE / PACE",
            "MSE / linear oracle",
            "fit min",
            "kept PACE",
        ]
        tables.append(markdown_table(simulated, sim_columns, formats))
    for table in tables:
        print(table + "\n")
    plot(real + simulated, args.figure)
    print(f"figure: {args.figure}")
    if args.write:
        figure = args.figure.resolve().relative_to((ROOT / "docs").resolve())
        body = (
            "MSE relative to PACE against the number of subjects, for SAND alone "
            '(`base=None`) and SAND\'s default (`base="auto"`: PACE, mixed with '
            'the network where the gate keeps it); `preset="cpu"`, one torch '
            "thread, no band calibration. Real data: held-out readings (20% of "
            "each subject's), the ratio paired within random splits, mean (SE "
            "over splits); at each size the subjects are drawn at random per "
            "split. Simulation: test subjects scored against the noise-free "
            "curves (one draw of the data per size, 5% of its subjects for the "
            "test; `seeds`: fits with other initial weights, whose ratios are "
            "averaged). `fit min`: minutes of "
            "one fit, beside one other job on 2 cores. `kept PACE`: fits whose "
            "gate returned PACE's curves.\n\n"
            + "\n\n".join(tables)
            + f"\n\n![MSE / PACE against subjects]({figure.as_posix()})\n"
            + (f"\n{args.note}\n" if args.note else "")
        )
        write_section(args.section, f"Learning curves ({args.section})", body)


if __name__ == "__main__":
    main()
