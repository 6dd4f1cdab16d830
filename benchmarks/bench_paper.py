"""The SAND paper's simulation table, every method side by side, in one command.

Methods: the oracle (conditional mean with the true covariance), kernel
smoothing (the paper's 1DS), PACE, a MICE baseline (chained equations on the
binned grid), a GAIN baseline (generative adversarial imputation of the same
binned grid, observed cells kept as in GAIN's released code), VT, VTP (VT +
curvature penalty, weight chosen on the validation subjects), SAND, VT and
SAND on PACE as their statistical base (``base="pace"``), VT + LipReg with a
positive and a negative weight, SAND + LipReg (negative weight, the sign the
LipReg paper recommends for transformers), and the conditional neural process
(CNP, Garnelo et al. 2018; the paper's CNP baseline, with its default sizes
and the transformers' epochs). MSE and TV x 1000 on the 101-point grid against
the noise-free test curves, with standard errors over test subjects, the ratio
to the oracle, fit seconds, and the paper's published numbers.

Statistical methods and the neural ones (except VTP) are fitted on the
training and validation subjects (95%); the neural imputers hold out 5/95
of them for early stopping. VTP is fitted on the training subjects for each
candidate weight and the weight is chosen on the validation subjects' true
curves, as the paper tuned it.

Examples
--------
The quick table (reduced n and epochs; under 10 minutes on 2 CPU cores)::

    python benchmarks/bench_paper.py --quick --write

The full simulation (n = 10,000, 60 epochs; the documented run took 38 and
49 minutes in two processes side by side on 2 CPU cores, split as below)::

    python benchmarks/bench_paper.py --write

Long runs can be split (e.g. one process per sparsity) and assembled; a
method's row in a later file replaces the same method's row in an earlier
one::

    python benchmarks/bench_paper.py --sparsity 30 --save-rows a.json
    python benchmarks/bench_paper.py --sparsity 8-12 3-5 --save-rows b.json
    python benchmarks/bench_paper.py --load-rows a.json b.json --write
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
from fdaimpute.regularizers import LipReg, Roughness  # noqa: E402
from fdaimpute.tuning import select_regularizer_weight  # noqa: E402

SPARSITIES = ("30", "8-12", "3-5")

# Hong et al. (NeurIPS 2024), simulation table: (MSE, TV) x 1000.
PAPER = {
    "kernel": {"30": (262.9, 273.8), "8-12": (735.3, 305.7), "3-5": (1157, 263.3)},
    "PACE": {"30": (189.9, 187.1), "8-12": (450.0, 201.9), "3-5": (795.5, 209.5)},
    "FACE": {"30": (284.6, 198.9), "8-12": (488.2, 204.5), "3-5": (807.1, 209.5)},
    "mFPCA": {"30": (224.7, 192.0), "8-12": (480.3, 204.0), "3-5": (787.1, 209.3)},
    "MICE": {"30": (176.7, 233.1), "8-12": (721.6, 318.4), "3-5": (1416, 332.7)},
    "GAIN": {"30": (261.9, 350.0), "8-12": (1767, 743.3), "3-5": (2065, 759.2)},
    "VT": {"30": (169.8, 218.2), "8-12": (436.7, 227.0), "3-5": (798.6, 230.6)},
    "VTP": {"30": (169.0, 179.9), "8-12": (425.3, 199.4), "3-5": (777.4, 210.2)},
    "SAND": {"30": (146.5, 164.6), "8-12": (410.9, 196.8), "3-5": (758.1, 206.8)},
    "CNP": {"30": (290.4, 198.9), "8-12": (551.3, 207.6), "3-5": (920.3, 211.9)},
}
METHODS = (
    "oracle",
    "kernel",
    "PACE",
    "FACE",
    "mFPCA",
    "MICE",
    "GAIN",
    "VT",
    "VTP",
    "SAND",
    "VT+base",
    "SAND+base",
    "VT+LipReg(+)",
    "VT+LipReg(-)",
    "SAND+LipReg(-)",
    "CNP",
)
COLUMNS = ["method", "MSE", "TV", "MSE / oracle", "fit s", "paper MSE", "paper TV"]
# LipReg on the token embedding is ~O(10) on rescaled tokens with time gaps
# ~0.1: this weight makes it about as large as the data loss at the start.
LIP_WEIGHT = 0.01
VTP_WEIGHTS = (10.0, 100.0, 1000.0)


def _neural(cls, args, n_fit, **extra):
    return cls(
        grid=np.linspace(0, 1, 101),
        max_epochs=args.epochs,
        validation_fraction=round(0.05 * n_fit) / n_fit,
        random_state=args.seed,
        **extra,
    )


def run_sparsity(sparsity, args):
    """Fit every method at one sparsity; return table rows and fitted models."""
    n_obs = 30 if sparsity == "30" else sparsity
    sim = fi.simulate.sand_paper(n=args.n, n_obs=n_obs, random_state=args.seed)
    fit_data = fi.IrregularData.concat([sim.train.data, sim.validation.data])
    n_fit = len(fit_data)
    test, truth = sim.test.data, sim.test.truth
    grid = sim.grid
    mice_kw = {"max_iter": 5} if args.quick else {}
    builders = {
        "kernel": lambda: fi.KernelImputer(grid=grid),
        "PACE": lambda: fi.PACEImputer(grid=grid, random_state=args.seed),
        "FACE": lambda: fi.FACEImputer(grid=grid),
        "mFPCA": lambda: fi.MFPCAImputer(grid=grid),
        "MICE": lambda: fi.MICEImputer(grid=grid, random_state=args.seed, **mice_kw),
        "GAIN": lambda: fi.GAINImputer(
            grid=grid, keep_observed=True, random_state=args.seed
        ),
        # LipReg(0) changes nothing in training; it records L_Lip for the figure.
        "VT": lambda: _neural(
            fi.VTImputer, args, n_fit, base=None, regularizers=[LipReg(0.0)]
        ),
        "SAND": lambda: _neural(fi.SANDImputer, args, n_fit, base=None),
        "VT+base": lambda: _neural(fi.VTImputer, args, n_fit, base="pace"),
        "SAND+base": lambda: _neural(fi.SANDImputer, args, n_fit, base="pace"),
        "VT+LipReg(+)": lambda: _neural(
            fi.VTImputer, args, n_fit, base=None, regularizers=[LipReg(LIP_WEIGHT)]
        ),
        "VT+LipReg(-)": lambda: _neural(
            fi.VTImputer, args, n_fit, base=None, regularizers=[LipReg(-LIP_WEIGHT)]
        ),
        "SAND+LipReg(-)": lambda: _neural(
            fi.SANDImputer, args, n_fit, base=None, regularizers=[LipReg(-LIP_WEIGHT)]
        ),
        "CNP": lambda: _neural(fi.CNPImputer, args, n_fit),
    }
    oracle = fi.oracle.ConditionalMean(sim.process, grid=grid)
    reference = fi.metrics.summarize(truth, oracle.transform(test))
    rows, fitted, curves = [], {}, {"oracle": oracle.transform(test)}
    for method in args.methods:
        start = time.perf_counter()
        note = ""
        if method == "oracle":
            summary, seconds = reference, 0.0
        else:
            if method == "VTP":
                vtp = _neural(
                    fi.VTImputer,
                    args,
                    len(sim.train.data),
                    base=None,
                    regularizers=[Roughness()],
                )
                est, results = select_regularizer_weight(
                    vtp,
                    sim.train.data,
                    sim.validation.data,
                    VTP_WEIGHTS,
                    truth=sim.validation.truth,
                )
                note = f" (λ={est.regularizers[0].weight:g})"
                seconds = sum(r["fit_seconds"] for r in results)
            else:
                est = builders[method]().fit(fit_data)
                seconds = time.perf_counter() - start
            fitted[method] = est
            curves[method] = est.transform(test)
            summary = fi.metrics.summarize(truth, curves[method])
        paper = PAPER.get(method, {}).get(sparsity)
        rows.append(
            {
                "method": method + note,
                "MSE": f"{summary['mse']:.1f} ({summary['mse_se']:.1f})",
                "TV": f"{summary['tv']:.1f} ({summary['tv_se']:.1f})",
                "MSE / oracle": f"{summary['mse'] / reference['mse']:.3f}",
                "fit s": f"{seconds:.1f}",
                "paper MSE": "" if paper is None else f"{paper[0]:g}",
                "paper TV": "" if paper is None else f"{paper[1]:g}",
            }
        )
        print(
            f"  {sparsity:>5} {rows[-1]['method']:<22} MSE {rows[-1]['MSE']:<14} "
            f"ratio {rows[-1]['MSE / oracle']}  {seconds:.0f} s",
            flush=True,
        )
    return rows, fitted, curves, sim


def figure(fitted, curves, sim, path_curves, path_lip):
    """Test subjects with every method's curve; L_Lip during training."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = {
        k: v
        for k, v in curves.items()
        if k in ("oracle", "PACE", "VT", "SAND", "VT+LipReg(-)")
    }
    fig = fi.plotting.plot_curves(
        sim.test.data, shown, sim.grid, truth=sim.test.truth, subjects=4
    )
    fig.savefig(path_curves, dpi=100)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for method in ("VT", "VT+LipReg(+)", "VT+LipReg(-)"):
        if method in fitted:
            history = fitted[method].history_
            ax.plot(history["epoch"], history["reg/lipreg"], label=method)
    ax.set_xlabel("epoch")
    ax.set_ylabel("L_Lip of the token embedding")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path_lip, dpi=100)
    plt.close(fig)


def merge_tables(runs):
    """One table per sparsity; a method's row from a later run replaces earlier ones."""
    merged = {}
    for run in runs:
        for table in run["tables"]:
            rows = merged.setdefault(table["n_i"], {})
            for row in table["rows"]:
                rows[row["method"].split(" (")[0]] = row
    return [
        {"n_i": n_i, "rows": [merged[n_i][m] for m in METHODS if m in merged[n_i]]}
        for n_i in SPARSITIES
        if n_i in merged
    ]


def _figure_names(quick):
    """File names of the two figures (the quick run has its own)."""
    stem = "paper_quick" if quick else "paper"
    return f"{stem}_curves.png", f"{stem}_lipreg.png"


def describe(args, seconds):
    """The paragraph above the tables: settings and total time."""
    mode = "quick (reduced n and epochs)" if args["quick"] else "full n"
    mice = ("5" if args["quick"] else "10") + " rounds, 20 nearest bins"
    n_test = round(0.05 * args["n"])
    return (
        f"Mode: {mode}. n = {args['n']} subjects per sparsity (90/5/5 split, seed "
        f"{args['seed']}), neural imputers trained for {args['epochs']} epochs "
        f"(`preset='cpu'`; CNP at its defaults: two MLPs of 3 x 128, "
        f"r of 128, batches of 16), MICE {mice}, LipReg weight ±{LIP_WEIGHT:g} on the "
        f"token embedding, VTP weight chosen among {VTP_WEIGHTS} on the "
        f"validation curves. MSE and TV ×1000 on the 101-point grid, standard "
        f"errors over the {n_test} test subjects in brackets. 'paper' columns: "
        f"Hong et al. (2024), n = 10,000, a GPU and 5,000 epochs. "
        f"{seconds}"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="n=1500, 30 epochs: under 10 minutes on 2 cores",
    )
    parser.add_argument("--n", type=int, default=None, help="subjects (default 10000)")
    parser.add_argument(
        "--epochs", type=int, default=None, help="neural epochs (default 60)"
    )
    parser.add_argument(
        "--sparsity", nargs="+", default=list(SPARSITIES), choices=SPARSITIES
    )
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads (default: torch's choice)",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="replace the 'paper' (or, with --quick, 'paper-quick') section of "
        "docs/benchmarks.md",
    )
    parser.add_argument(
        "--save-rows",
        dest="save_rows",
        help="write this run's tables and settings to a JSON file",
    )
    parser.add_argument(
        "--load-rows",
        dest="load_rows",
        nargs="+",
        help="skip fitting: assemble runs saved with --save-rows",
    )
    args = parser.parse_args(argv)
    if args.n is None:
        args.n = 1500 if args.quick else 10_000
    if args.epochs is None:
        args.epochs = 30 if args.quick else 60
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    if args.load_rows:
        runs = [json.loads(Path(path).read_text()) for path in args.load_rows]
    else:
        runs = [run_all(args)]
    tables = merge_tables(runs)
    sections = [
        f"### n_i = {t['n_i']}\n\n" + markdown_table(t["rows"], COLUMNS) for t in tables
    ]
    if len(runs) == 1:
        timing = f"Total time {runs[0]['seconds'] / 60:.1f} min."
    else:
        timing = "Runs (each with its time and machine):\n\n" + "\n".join(
            f"- `{r['command']}`: {r['seconds'] / 60:.1f} min, {r['machine']}"
            for r in runs
        )
    body = describe(runs[0]["settings"], timing) + "\n\n" + "\n\n".join(sections)
    if args.write:
        quick = runs[0]["settings"]["quick"]
        curves_png, lipreg_png = _figure_names(quick)
        if any(t["n_i"] == "8-12" for t in tables):
            body += (
                f"\n\n![test subjects](img/{curves_png})\n\n"
                f"![L_Lip during training](img/{lipreg_png})\n"
            )
        title = "The SAND paper's simulation, all methods"
        if quick:
            write_section("paper-quick", title + " (quick)", body)
        else:
            write_section("paper", title, body)
    print(timing)


def run_all(args):
    """Fit and score every method at every requested sparsity."""
    start = time.perf_counter()
    tables = []
    for sparsity in args.sparsity:
        rows, fitted, curves, sim = run_sparsity(sparsity, args)
        tables.append({"n_i": sparsity, "rows": rows})
        print(markdown_table(rows, COLUMNS), "\n", flush=True)
        wanted = args.write or args.save_rows
        if sparsity == "8-12" and wanted and {"VT", "SAND"} <= set(fitted):
            img = Path(__file__).resolve().parents[1] / "docs" / "img"
            img.mkdir(exist_ok=True)
            curves_png, lipreg_png = _figure_names(args.quick)
            figure(fitted, curves, sim, img / curves_png, img / lipreg_png)
    run = {
        "command": "python " + " ".join(sys.argv),
        "machine": machine(),
        "seconds": time.perf_counter() - start,
        "settings": {k: getattr(args, k) for k in ("quick", "n", "epochs", "seed")},
        "tables": tables,
    }
    if args.save_rows:
        Path(args.save_rows).write_text(json.dumps(run, indent=1))
    return run


if __name__ == "__main__":
    main()
