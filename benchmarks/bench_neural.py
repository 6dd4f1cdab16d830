"""VT and SAND on the SAND paper's simulation, next to the oracle (and PACE/kernel).

The paper's process (SAND_SPEC.md, Simulation): n subjects split 90/5/5, the
three sparsities n_i = 30, 8-12, 3-5; MSE and TV x 1000 on the 101-point
grid against the noise-free curves of the test subjects, with standard
errors over subjects, and the ratio of each MSE to the oracle's (the
conditional mean with the true covariance).

The neural imputers are fitted on the training and validation subjects
together, holding out the same share (5%) for their own validation.

Examples
--------
A quick check (a few minutes on a laptop)::

    python benchmarks/bench_neural.py --n 2000 --epochs 20 --sparsity 8-12

The documented run (``--write`` replaces the "neural" section of
docs/benchmarks.md)::

    python benchmarks/bench_neural.py --n 10000 --epochs 60 --write

On a GPU, a time budget per fit (the epochs that fit in it, the learning-rate
schedule ending at the last)::

    python benchmarks/bench_neural.py --sparsity 8-12 --methods oracle pace sand \
        --device cuda --max-time 240 --epochs 5000
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, write_section  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.data import IrregularData  # noqa: E402
from fdaimpute.neural import PRESETS, SANDImputer, VTImputer  # noqa: E402

SPARSITIES = {"30": 30, "8-12": "8-12", "3-5": "3-5"}
COLUMNS = [
    "n_i",
    "method",
    "MSE",
    "TV",
    "MSE / oracle",
    "epochs (best)",
    "s / epoch",
    "fit s",
]


# size and training settings a command line may override
_SETTINGS = (
    "d_model",
    "n_heads",
    "encoder_layers",
    "decoder_layers",
    "dim_feedforward",
    "batch_size",
    "lr",
    "patience",
    "dropout",
    "visible_weight",
    "max_time",
)


def neural(kind, args, n_fit):
    cls = SANDImputer if kind == "sand" else VTImputer
    params = {
        "preset": args.preset,
        "base": None,
        "max_epochs": args.epochs,
        "validation_fraction": round(args.val_share * n_fit) / n_fit,
        "random_state": args.seed,
        "verbose": args.verbose,
        "device": args.device,
        "amp": args.amp,
        "cuda_graph": {"auto": "auto", "on": True, "off": False}[args.cuda_graph],
    }
    for name in _SETTINGS:
        value = getattr(args, name)
        if value is not None:
            params[name] = value
    if kind == "sand" and args.anchors is not None:
        params["anchors"] = args.anchors
    if kind == "sand":
        params["sand_init"] = args.sand_init
    return cls(**params)


def _label(method, args):
    """Row label: the method and any setting that differs from the preset."""
    name = {"vt": "VT", "sand": "SAND"}.get(method, method)
    if method not in ("vt", "sand"):
        return name
    preset = PRESETS[args.preset]
    changed = [
        f"{k}={getattr(args, k)}"
        for k in _SETTINGS
        if getattr(args, k) is not None and getattr(args, k) != preset.get(k)
    ]
    if args.amp != "auto":
        changed.append(f"amp={args.amp}")
    if args.cuda_graph != "auto":
        changed.append(f"cuda_graph={args.cuda_graph}")
    if method == "sand" and args.anchors:
        changed.append(f"anchors={args.anchors}")
    if method == "sand" and args.sand_init != "identity":
        changed.append(f"sand_init={args.sand_init}")
    if args.preset != "cpu":
        changed.insert(0, f"preset={args.preset}")
    return f"{name} ({', '.join(changed)})" if changed else name


def run_one(sparsity, args):
    sim = fi.simulate.sand_paper(
        args.n, n_obs=SPARSITIES[sparsity], random_state=args.seed
    )
    fit_data = IrregularData.concat([sim.train.data, sim.validation.data])
    test, truth = sim.test.data, sim.test.truth
    rows = []
    oracle = fi.oracle.ConditionalMean(sim.process).transform(test)
    oracle_mse = fi.metrics.mse(truth, oracle, scale=1000)
    for method in args.methods:
        extra = {}
        if method == "oracle":
            pred, seconds = oracle, 0.0
        elif method in ("vt", "sand"):
            est = neural(method, args, len(fit_data))
            start = time.perf_counter()
            est.fit(fit_data)
            seconds = time.perf_counter() - start
            pred = est.transform(test)
            hist = est.history_
            extra = {
                "epochs (best)": f"{est.n_epochs_} ({est.best_epoch_ + 1})",
                "s / epoch": float(np.mean(hist["seconds"])),
                "stop": est.stop_reason_,
                "device": str(est.device_),
            }
        else:
            est = fi.PACEImputer() if method == "pace" else fi.KernelImputer()
            start = time.perf_counter()
            pred = est.fit(fit_data).transform(test)
            seconds = time.perf_counter() - start
        s = fi.metrics.summarize(truth, pred)
        row = {
            "n_i": sparsity,
            "method": _label(method, args),
            "MSE": f"{s['mse']:.1f} ({s['mse_se']:.1f})",
            "TV": f"{s['tv']:.1f} ({s['tv_se']:.1f})",
            "MSE / oracle": s["mse"] / oracle_mse,
            "fit s": seconds,
            **extra,
        }
        rows.append(row)
        print(
            f"  {row['method']:>7}: MSE {row['MSE']}, TV {row['TV']}, "
            f"ratio {row['MSE / oracle']:.3f}, fit {seconds:.0f} s "
            f"{extra.get('epochs (best)', '')}",
            flush=True,
        )
    return rows


def _rss_mb(field):
    """``VmRSS`` (current) or ``VmHWM`` (peak) of this process in MB, Linux only."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _reset_peak_rss():
    """Reset the peak-RSS mark (Linux >= 4.0); False where not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _random_subjects(n, rng):
    """``n`` subjects with 8-12 distinct grid times each and random values."""
    counts = rng.integers(8, 13, size=n)
    first = np.argsort(rng.random((n, 101)), axis=1)[:, :12]
    cols = np.sort(np.where(np.arange(12) < counts[:, None], first, 101), axis=1)
    times = cols[cols < 101] / 100.0
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return IrregularData(times, rng.standard_normal(times.size), offsets)


def throughput(args):
    """Transform speed of the default-size models, and memory beyond the output."""
    rows = []
    rng = np.random.default_rng(0)
    fit = fi.simulate.sand_paper(2000, n_obs="8-12", random_state=0).train.data
    for cls, size in [(c, s) for c in (VTImputer, SANDImputer) for s in args.pbs]:
        est = cls(
            base=None,
            max_epochs=1,
            random_state=0,
            device=args.device,
            predict_batch_size=size,
        ).fit(fit)
        est.transform(fit[:512])  # warm-up
        for n in args.throughput_n:
            data = _random_subjects(n, rng)
            before = _rss_mb("VmRSS")
            reset = _reset_peak_rss()
            seconds = []
            for repeat in range(args.repeats):
                start = time.perf_counter()
                out = est.transform(data)
                seconds.append(time.perf_counter() - start)
                if repeat == 0:
                    peak = _rss_mb("VmHWM")
                    extra = peak - before - out.nbytes / 2**20 if reset else None
                del out
            rate = n / np.array(seconds)
            rows.append(
                {
                    "model": cls.__name__,
                    "device": str(est.device_),
                    "batch": size,
                    "subjects": n,
                    "curves / s": float(np.median(rate)),
                    "range": f"{rate.min():.0f} to {rate.max():.0f}",
                    "output MB": n * est.grid_.size * 8 / 2**20,
                    "peak memory beyond output MB": "n/a" if extra is None else extra,
                }
            )
            print(rows[-1], flush=True)
    return markdown_table(
        rows,
        [
            "model",
            "device",
            "batch",
            "subjects",
            "curves / s",
            "range",
            "output MB",
            "peak memory beyond output MB",
        ],
        {
            "curves / s": ".0f",
            "output MB": ".0f",
            "peak memory beyond output MB": ".0f",
        },
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="subjects (all splits)")
    parser.add_argument(
        "--sparsity", nargs="+", default=list(SPARSITIES), choices=list(SPARSITIES)
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["oracle", "pace", "kernel", "vt", "sand"],
        choices=["oracle", "pace", "kernel", "vt", "sand"],
    )
    parser.add_argument("--preset", default="cpu", choices=list(PRESETS))
    parser.add_argument("--epochs", type=int, default=None, help="max_epochs")
    parser.add_argument("--d-model", dest="d_model", type=int)
    parser.add_argument("--n-heads", dest="n_heads", type=int)
    parser.add_argument("--encoder-layers", dest="encoder_layers", type=int)
    parser.add_argument("--decoder-layers", dest="decoder_layers", type=int)
    parser.add_argument("--dim-feedforward", dest="dim_feedforward", type=int)
    parser.add_argument("--dropout", type=float)
    parser.add_argument("--batch-size", dest="batch_size", type=int)
    parser.add_argument("--lr", type=float)
    parser.add_argument("--patience", type=int)
    parser.add_argument(
        "--visible-weight", dest="visible_weight", type=float, help="visible_weight"
    )
    parser.add_argument(
        "--max-time",
        dest="max_time",
        type=float,
        help="time budget of each network's epochs, seconds (max_time)",
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    parser.add_argument(
        "--cuda-graph",
        dest="cuda_graph",
        default="auto",
        choices=["auto", "on", "off"],
        help="cuda_graph: auto (the default), on (True) or off (False)",
    )
    parser.add_argument(
        "--amp", default="auto", choices=["auto", "off", "bfloat16", "float16"]
    )
    parser.add_argument("--anchors", choices=["mean", "two-sided"])
    parser.add_argument(
        "--sand-init",
        dest="sand_init",
        default="identity",
        choices=["identity", "random"],
    )
    parser.add_argument(
        "--val-share",
        type=float,
        default=0.05,
        help="share of the fitting subjects used for validation",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--write", action="store_true", help="update docs/benchmarks.md"
    )
    parser.add_argument(
        "--section",
        default="neural",
        help="docs/benchmarks.md section that --write replaces",
    )
    parser.add_argument("--note", default="", help="a paragraph for the section")
    parser.add_argument(
        "--save-rows", dest="save_rows", help="also write the rows to this JSON file"
    )
    parser.add_argument(
        "--load-rows",
        dest="load_rows",
        nargs="+",
        help="skip fitting: tabulate rows saved by earlier runs (with --save-rows)",
    )
    parser.add_argument(
        "--throughput",
        action="store_true",
        help="measure transform speed (default-size models, n_i 8-12) instead",
    )
    parser.add_argument(
        "--throughput-n",
        nargs="+",
        type=int,
        default=[10_000, 100_000],
        dest="throughput_n",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed transforms per throughput case"
    )
    parser.add_argument(
        "--predict-batch-size",
        dest="pbs",
        nargs="+",
        type=int,
        default=[256],
        help="predict_batch_size values of the throughput runs",
    )
    args = parser.parse_args(argv)
    if args.amp == "off":
        args.amp = False

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    print(machine())
    if args.throughput:
        table = throughput(args)
        print()
        print(table)
        if args.write:
            body = (
                "Transform of simulated subjects with n_i in 8-12 onto the 101-point "
                'grid, default (`preset="cpu"`) sizes, after one training epoch '
                "(speed does not depend on the weights); times on the grid, one "
                "process, glibc's default allocator. The last column is the peak "
                "resident memory during the first call minus the memory before it "
                "and minus the returned array. `curves / s` is the median of "
                f"{args.repeats} timed calls (`range`: slowest to fastest).\n\n"
                f"{table}\n"
            )
            write_section("neural-throughput", "VT and SAND transform throughput", body)
        return []
    rows, commands, machines = [], [], set()
    if args.load_rows:
        for path in args.load_rows:
            saved = json.loads(Path(path).read_text())
            seed = re.search(r"--seed (\d+)", saved["command"])
            seed = int(seed.group(1)) if seed else 0
            rows.extend({"seed": seed, **r} for r in saved["rows"])
            commands.append(saved["command"])
            machines.add(saved.get("machine"))
    else:
        commands.append("python " + " ".join(sys.argv))
        for sparsity in args.sparsity:
            print(f"n = {args.n}, n_i = {sparsity}", flush=True)
            rows.extend(run_one(sparsity, args))
        if args.save_rows:
            Path(args.save_rows).write_text(
                json.dumps({"command": commands[0], "machine": machine(), "rows": rows})
            )
    seen, unique = set(), []
    for row in rows:  # each saved run repeats the oracle row
        key = (row["n_i"], row["method"], row.get("seed", args.seed))
        if key not in seen:
            seen.add(key)
            unique.append(row)
    rows = unique
    order = {s: i for i, s in enumerate(SPARSITIES)}
    methods = ["oracle", "pace", "kernel", "VT", "SAND"]
    rows.sort(
        key=lambda r: (
            order[r["n_i"]],
            r.get("seed", 0),
            methods.index(r["method"].split()[0]),
        )
    )
    columns = COLUMNS + [c for c in ("stop", "device") if any(c in r for r in rows)]
    if len({r.get("seed", 0) for r in rows}) > 1:
        columns.insert(1, "seed")
    table = markdown_table(
        rows, columns, {"MSE / oracle": ".3f", "s / epoch": ".2f", "fit s": ".0f"}
    )
    print()
    print(table)
    if args.write:
        runs = "\n".join(f"- `{c}`" for c in commands)
        saved = args.load_rows or [args.save_rows or "benchmarks/results/neural/x"]
        folder = Path(saved[0]).parent.as_posix()
        body = (
            "SAND paper's process (90/5/5 split), test subjects scored on the "
            "101-point grid against the noise-free curves; MSE and TV x 1000 "
            "(standard error over subjects). VT and SAND are fitted on the "
            "training and validation subjects with 5% held out for their own "
            "validation; `epochs (best)` is epochs run (epoch kept), `s / epoch` "
            "includes validation. Rows are labelled with the settings that differ "
            'from `preset="cpu"`. Each run saved its rows (`--save-rows`); the '
            f"files are in `{folder}/`. "
            + (
                args.note
                or "Runs (one torch thread each, two runs at a time on the 2 cores):"
            )
            + f"\n\n{runs}\n\n{table}\n"
        )
        title = "VT and SAND (simulation)"
        if args.section != "neural":
            title += f" ({args.section})"
        measured_on = machines.pop() if len(machines) == 1 else None
        write_section(args.section, title, body, measured_on)
    return rows


if __name__ == "__main__":
    main()
