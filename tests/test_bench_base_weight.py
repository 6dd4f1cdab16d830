"""bench_base_weight's table: one row per case, each rule's ratio and weight."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

pytest.importorskip("torch")

import bench_base_weight as bw  # noqa: E402


def _row(case, mode, ratio, weight=0.5, kept=False):
    return {
        "case": case,
        "mode": mode,
        "MSE / PACE": ratio,
        "weight": weight,
        "kept PACE": kept,
        "fit min": 1.0,
    }


def test_table_gives_each_rule_its_ratio_and_weight_and_a_mean_over_full_columns():
    rows = [
        _row("warp-1000-seed0", "trained", 0.8, 0.3),
        _row("warp-1000-seed0", "held-out", 1.0, 0.0, kept=True),
        _row("warp-1000-seed0", "alone", 0.9, None),
        _row("uk-3500-split0", "trained", 1.0, 0.0, kept=True),
        _row("uk-3500-split0", "held-out", 0.96, 0.29),
    ]
    lines = bw.table(rows).splitlines()
    assert lines[0] == "| case | held-out | trained | alone |"
    assert lines[2] == "| warp-1000-seed0 | 1.000 (PACE) | 0.800 (w 0.30) | 0.900 |"
    assert lines[3] == "| uk-3500-split0 | 0.960 (w 0.29) | 1.000 (PACE) |  |"
    # a mean only where the rule ran on every case
    assert lines[4] == "| mean | 0.980 | 0.900 |  |"


def test_case_names_follow_the_data():
    assert bw.case_name(("warp", 1000, 2)) == "warp-1000-seed2"
    assert bw.case_name(("uk", 5494, 1)) == "uk-5494-split1"
