"""How the network's weight in the mix with its base is set: three rules, paired fits.

SAND's default (PACE as the base) fitted with each of the
:class:`~fdaimpute.nn.Trainer`'s ``base_weight`` rules on the same data and
seed, beside SAND alone (``base=None``), on the fits where an earlier rule
fell short of SAND alone (issue 34):

- ``trained``: the weight is a parameter trained with the network, on the
  mix's error and the network's own;
- ``held-out``: the network trains on its own curves, its epoch is chosen by
  its own error on the selection subjects, and the weight is the
  least-squares one at their hidden points (eight draws pooled);
- ``detached``: the network trains on its own curves and the weight on the
  mix's error on the training subjects (the mix's gradient reaches the
  weight only); the epoch is chosen by the mix's error.

Cases: ``warp N SEED`` (``fi.simulate.time_warping`` at 8-12 points, as in
bench_nonlinear: test subjects against the noise-free curves) and ``uk N
SPLIT`` (UK electricity at 30 readings, ``N`` households of bench_realdata's
split ``SPLIT``, its held-out readings). Scores are MSE relative to
``PACEImputer(random_state=0)`` fitted on the same subjects. Each fit is
saved as it finishes (``--save-dir``); ``--from-saved`` tables the saved
fits.

Examples
--------
::

    python benchmarks/bench_base_weight.py --modes trained held-out
    python benchmarks/bench_base_weight.py --from-saved --write
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import markdown_table, write_section  # noqa: E402
from bench_gate_mix import load  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute._neural.base import _NeuralImputer  # noqa: E402
from fdaimpute.nn.training import BASE_WEIGHTS  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "gate" / "base-weight"

#: The fits where a rule fell short of SAND alone: (data, subjects, seed or split).
CASES = [
    ("warp", 1000, 0),
    ("warp", 1000, 1),
    ("warp", 1000, 2),
    ("warp", 3000, 2),
    ("uk", 3500, 0),
    ("uk", 5494, 1),
]

#: SAND alone, beside the rules.
ALONE = "alone"


def case_name(case):
    data, n, index = case
    return f"{data}-{n}-{'seed' if data == 'warp' else 'split'}{index}"


def fit_one(case, mode):
    """SAND fitted with ``mode`` (or alone) on ``case``: its MSE over PACE's."""
    data_name, n, index = case
    warp = data_name == "warp"
    args = SimpleNamespace(data=data_name, n=n, split=0 if warp else index)
    data, score = load(args)
    seed = index if warp else 0
    pace = fi.PACEImputer(random_state=0).fit(data)
    params = dict(random_state=seed, calibration_folds=None, validation_fraction=0.1)
    if mode == ALONE:
        params["base"] = None
    else:
        _NeuralImputer._base_weight = mode
    started = time.perf_counter()
    est = fi.SANDImputer(**params).fit(data)
    minutes = (time.perf_counter() - started) / 60
    ratio = score(est) / score(pace)
    weight = getattr(est, "base_weight_", None)
    return {
        "case": case_name(case),
        "mode": mode,
        "MSE / PACE": ratio,
        "weight": None if weight is None else float(np.mean(weight)),
        "kept PACE": mode != ALONE and est.best_epoch_ < 0,
        "fit min": minutes,
    }


def table(rows):
    """One row per case: each rule's MSE / PACE (its weight), and SAND alone."""
    by_case = {}
    for row in rows:
        by_case.setdefault(row["case"], {})[row["mode"]] = row
    modes = [m for m in (*BASE_WEIGHTS, ALONE) if any(m in c for c in by_case.values())]
    out = []
    for case, fits in by_case.items():
        line = {"case": case}
        for mode in modes:
            fit = fits.get(mode)
            if fit is None:
                line[mode] = ""
            elif mode == ALONE:
                line[mode] = f"{fit['MSE / PACE']:.3f}"
            else:
                kept = " (PACE)" if fit["kept PACE"] else f" (w {fit['weight']:.2f})"
                line[mode] = f"{fit['MSE / PACE']:.3f}{kept}"
        out.append(line)
    mean = {"case": "mean"}
    for mode in modes:
        values = [c[mode]["MSE / PACE"] for c in by_case.values() if mode in c]
        if len(values) == len(by_case):
            mean[mode] = f"{np.mean(values):.3f}"
    return markdown_table([*out, mean], ["case", *modes])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--modes", nargs="+", default=[*BASE_WEIGHTS, ALONE], help="rules to fit"
    )
    parser.add_argument("--cases", nargs="+", help="case names (default: all)")
    parser.add_argument("--save-dir", default=str(RESULTS))
    parser.add_argument("--from-saved", action="store_true")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    save = Path(args.save_dir)
    save.mkdir(parents=True, exist_ok=True)
    if not args.from_saved:
        for case in CASES:
            if args.cases and case_name(case) not in args.cases:
                continue
            for mode in args.modes:
                row = fit_one(case, mode)
                print(row, flush=True)
                (save / f"{row['case']}-{mode}.json").write_text(json.dumps(row))
    rows = [json.loads(p.read_text()) for p in sorted(save.glob("*.json"))]
    order = [case_name(c) for c in CASES]
    rows.sort(key=lambda r: order.index(r["case"]))
    text = table(rows)
    print(text)
    if args.write:
        body = (
            "SAND's default (PACE as the base) with each rule for the network's "
            "weight in the mix (`nn.Trainer`'s `base_weight`; `trained`: a "
            "parameter trained with the network on the mix's error and its own; "
            "`held-out`: the network trained and its epoch chosen on its own "
            "curves, the weight the least-squares one on the selection subjects' "
            "hidden points, eight draws; `detached`: the network trained on its "
            "own curves, the weight on the mix's error on the training subjects), "
            "and SAND alone (`alone`), on the fits where a rule fell short of SAND "
            "alone. MSE relative to PACE fitted on the same subjects (`warp`: "
            "`time_warping` at 8-12 points, test subjects against the true curves, "
            "the seed SAND's; `uk`: UK electricity at 30 readings, bench_realdata's "
            "split, its held-out readings); in brackets the weight, or `PACE` where "
            "the comparison kept the base. CPU preset, one torch thread, "
            "`validation_fraction=0.1`, no band calibration.\n\n" + text
        )
        write_section("base-weight", "The mix's weight: three rules", body)


if __name__ == "__main__":
    main()
