"""How much the base gate's comparison can tell, and what each rule would keep.

With a statistical base (``base="pace"``) SAND keeps its best epoch only if,
on comparison subjects that did not choose it, the epoch's held-out error is
below the base's by ``start_margin`` standard errors and a one-sided
Wilcoxon signed-rank test of the subjects' drops has ``p < start_level``
(:class:`fdaimpute.nn.Trainer`). This script trains SAND on its PACE base
with the gate open (the mix is always kept), so that what the mix is worth on
the held-out observations of the ``bench_realdata.py`` split is known
whatever a rule decides, and records the comparison subjects' errors of the
best epoch and of the start (the base) under the trainer's own draw of
hidden points and under ``--masks`` further draws. Rules can then be judged
offline on the saved rows: which cases each keeps, and what that costs or
gains against PACE.

Usage::

    python benchmarks/bench_gate_power.py --cases uk-30:0 uk-3-5:3@1000 \\
        --threads 1 --save-rows rows.json
    python benchmarks/bench_gate_power.py --load-rows rows.json --write

A case is ``dataset:split`` (all subjects) or ``dataset:split@n`` (``n``
subjects drawn as ``bench_realdata.py --n-subjects`` draws them).
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
from bench_realdata import DATASETS, held_out_split, squared_errors  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute._neural.base import COMPARISON_DRAWS  # noqa: E402
from fdaimpute.nn.validation import (  # noqa: E402
    hide_validation_observations,
    paired_gain,
    signed_rank_p,
    subject_squared_errors,
)


def _recording(trainer_class, masks):
    """``trainer_class`` with its gate open, recording the comparison errors."""

    class Recording(trainer_class):
        probe = None

        def _check_gain(self, valid, hidden):
            self.module.eval()

            def errors(state, flags):
                self.module.load_state_dict(state)
                sums, counts = subject_squared_errors(
                    self.forward,
                    valid,
                    flags,
                    self.grid,
                    self.anchors,
                    self.batch_size,
                    read=self.read,
                )
                return [float(f"{x:.6g}") for x in sums], counts.tolist()

            flags = [hidden] + [
                hide_validation_observations(valid, 7919 + m) for m in range(masks)
            ]
            self.probe = [
                {
                    "best": errors(self.best_state, f),
                    "start": errors(self.start_state, f),
                }
                for f in flags
            ]
            super()._check_gain(valid, hidden)

        def _start_beaten(self, best, start):
            gain, _ = super()._start_beaten(best, start)
            return gain, True

    return Recording


class OpenGateSAND(fi.SANDImputer):
    """SAND on its base with the gate open (see the module docstring)."""

    masks = 8

    def _trainer_class(self):
        return _recording(super()._trainer_class(), self.masks)

    def _make_trainer(self, module, settings, **kwargs):
        self.probe_trainer = super()._make_trainer(module, settings, **kwargs)
        return self.probe_trainer


def run_case(case, args):
    """The mix's, PACE's (and SAND alone's) held-out MSE and the recorded gate."""
    name, rest = case.split(":")
    split, _, size = rest.partition("@")
    data, visible, hidden, rows = held_out_split(
        DATASETS[name](), int(split), int(size) if size else None
    )

    def mse(est):
        return float(np.mean(squared_errors(est, visible, hidden, rows)))

    options = {"random_state": args.seed, "calibration_folds": None}
    OpenGateSAND.masks = args.masks
    start = time.perf_counter()
    mix = OpenGateSAND(base="pace", **options).fit(visible)
    record = {
        "case": case,
        "n": len(data),
        "mix": mse(mix),
        "base": mse(mix.base_),
        "mix_s": time.perf_counter() - start,
        "gate": None if mix.start_gain_ is None else list(mix.start_gain_),
        "weight": np.ravel(mix.base_weight_).tolist(),
        "probe": mix.probe_trainer.probe,
        "pace": mse(fi.PACEImputer(random_state=args.seed).fit(visible)),
    }
    if args.alone:
        record["sand"] = mse(fi.SANDImputer(base=None, **options).fit(visible))
    return record


RULES = {
    "before": lambda z, p, zm, pm: z >= 1 and p < 0.05,
    "now": lambda z, p, zm, pm: zm >= 1,
}


def statistics(record):
    """``z`` and ``p`` on the trainer's draw, and on the first
    ``COMPARISON_DRAWS`` draws pooled (the trainer's among them), as fit
    now pools them."""
    if record["probe"] is None:
        return None
    arrays = [
        {k: tuple(np.asarray(x) for x in draw[k]) for k in ("best", "start")}
        for draw in record["probe"][:COMPARISON_DRAWS]
    ]
    first = arrays[0]
    z = paired_gain(first["best"], first["start"])[1]
    p = signed_rank_p(first["best"], first["start"])

    def pooled(key):
        return tuple(sum(a[key][i] for a in arrays) for i in (0, 1))

    zm = paired_gain(pooled("best"), pooled("start"))[1]
    pm = signed_rank_p(pooled("best"), pooled("start"))
    return z, p, zm, pm


COLUMNS = [
    "case",
    "n",
    "compared",
    "mix / own base",
    "own base / PACE",
    "mix / PACE",
    "SAND / PACE",
    "z, 1 draw",
    "p, 1 draw",
    "z, 8 draws",
    "p, 8 draws",
    "before",
    "now",
]


def table(records):
    """One row per case: the mix against its base and PACE, the statistics,
    and what each rule keeps."""
    out = []
    for r in records:
        stats = statistics(r)
        row = {
            "case": r["case"],
            "n": r["n"],
            "compared": len(r["probe"][0]["best"][0]) if r["probe"] else "",
            "mix / own base": f"{r['mix'] / r['base']:.3f}",
            "own base / PACE": f"{r['base'] / r['pace']:.3f}",
            "mix / PACE": f"{r['mix'] / r['pace']:.3f}",
            "SAND / PACE": f"{r['sand'] / r['pace']:.3f}" if "sand" in r else "",
        }
        if stats is not None:
            z, p, zm, pm = stats
            row["z, 1 draw"], row["p, 1 draw"] = f"{z:.2f}", f"{p:.3f}"
            row["z, 8 draws"], row["p, 8 draws"] = f"{zm:.2f}", f"{pm:.3f}"
        for name, rule in RULES.items():
            keep = stats is not None and rule(*stats)
            row[name] = "mix" if keep else "base"
        out.append(row)
    return out


INTRO = """\
SAND with its PACE base (`base="pace"`, defaults, no band calibration) trained with the
gate open, on the splits of `bench_realdata.py` (20% of each subject's observations
hidden; `case` is data:split, `@n` the subjects drawn). `mix / own base`: the trained
mix's held-out MSE over that of its own base (PACE fitted on the network's training
subjects, not refitted on all as fit does since 07ea46c); `own base / PACE`: that base
over `PACEImputer` fitted on every subject; `SAND / PACE`: SAND alone (`base=None`).
`compared`: comparison subjects. `z`: the
mix's drop in error below the base on them, in standard errors, on the trainer's draw of
hidden points and on 8 draws pooled per subject; `p`: one-sided signed-rank test of the
subjects' drops. `before`: the rule of fdaimpute up to 3469098 (one draw, z >= 1 and
p < 0.05); `now`: z >= 1 on 8 draws; both give `base` too where no epoch beat the base
on the selection subjects. Rows: `benchmarks/results/gate/`.
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=[])
    parser.add_argument(
        "--masks", type=int, default=7, help="draws beside the trainer's own"
    )
    parser.add_argument("--alone", action="store_true", help="also fit SAND alone")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--save-rows")
    parser.add_argument("--load-rows", nargs="+")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.load_rows:
        records = [r for p in args.load_rows for r in json.loads(Path(p).read_text())]
    else:
        records = []
        for case in args.cases:
            records.append(run_case(case, args))
            print(markdown_table(table(records[-1:]), COLUMNS), flush=True)
            if args.save_rows:
                Path(args.save_rows).write_text(json.dumps(records))
    text = markdown_table(table(records), COLUMNS)
    print(text)
    print(machine())
    if args.write:
        title = "Which mixes the base gate keeps"
        write_section("gate-power", title, INTRO + "\n" + text)


if __name__ == "__main__":
    main()
