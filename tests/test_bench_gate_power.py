"""benchmarks/bench_gate_power.py: the rules judged offline on saved rows."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_gate_power as bg  # noqa: E402


def _record(drops, draws=9):
    # every draw hides 2 points of each subject; the best epoch's errors are
    # the start's less each subject's drop
    start = [1.0 + 0.1 * i for i in range(len(drops))]
    probe = [
        {
            "best": ([s - d for s, d in zip(start, drops)], [2.0] * len(drops)),
            "start": (start, [2.0] * len(drops)),
        }
        for _ in range(draws)
    ]
    return {
        "case": "x:0",
        "n": 50,
        "mix": 0.9,
        "base": 1.0,
        "pace": 1.0,
        "probe": probe,
    }


def test_a_shared_gain_is_kept_and_a_loss_is_not():
    rng = np.random.default_rng(0)
    gain = _record(0.05 + 0.01 * rng.standard_normal(40))
    loss = _record(-0.05 + 0.01 * rng.standard_normal(40))
    rows = bg.table([gain, loss, {**gain, "probe": None}])
    assert [r["now"] for r in rows] == ["mix", "base", "base"]
    assert [r["before"] for r in rows] == ["mix", "base", "base"]
    assert rows[0]["mix / own base"] == "0.900" and "z, 8 draws" not in rows[2]


def test_a_gain_on_a_few_subjects_passes_the_pooled_standard_error_alone():
    # a large drop on a few subjects, none elsewhere: the mean gain
    # is clear, the signed-rank test of the median subject is not
    drops = np.r_[np.full(4, 0.5), np.resize([0.02, -0.02], 26)]
    rows = bg.table([_record(drops)])
    z, p, zm, pm = bg.statistics(_record(drops))
    assert zm >= 1 and rows[0]["now"] == "mix"
    assert p >= 0.05 and rows[0]["before"] == "base"


def test_statistics_pool_the_first_comparison_draws():
    record = _record(np.full(20, 0.05))
    record["probe"][bg.COMPARISON_DRAWS]["best"] = ([100.0] * 20, [2.0] * 20)
    # a wild draw beyond the ones fit pools changes nothing
    assert bg.statistics(record) == bg.statistics(_record(np.full(20, 0.05)))
