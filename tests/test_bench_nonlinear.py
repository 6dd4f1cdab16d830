"""Seed handling and row merging of benchmarks/bench_nonlinear.py (no fitting)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_nonlinear as bn  # noqa: E402


def _row(method, mse, seed=None, ratio=None):
    row = {
        "process": "phase",
        "n_i": "8-12",
        "method": method,
        "mse": mse,
        "mse_se": 1.0,
        "MSE": f"{mse:.2f} (1.00)",
        "fit s": 10.0,
        "MSE / linear oracle": mse / 10 if ratio is None else ratio,
    }
    if seed is not None:
        row["seed"] = seed
    return row


def test_neural_rows_saved_before_seeds_count_as_seed_zero():
    assert bn.row_seed(_row("SAND", 8.0)) == 0
    assert bn.row_seed(_row("SAND", 8.0, seed=3)) == 3
    assert bn.row_seed(_row("PACE", 10.0)) is None


def test_over_seeds_averages_each_method_and_lists_every_seed():
    rows = [
        _row("linear oracle", 10.0),
        _row("SAND", 9.0, seed=2),
        _row("SAND", 8.0),
        _row("VT", 9.5, seed=0),
    ]
    out = bn.over_seeds(rows)
    assert [r["method"] for r in out] == ["linear oracle", "SAND", "VT"]
    sand = out[1]
    assert sand["mse"] == pytest.approx(8.5)
    assert sand["MSE / linear oracle"] == pytest.approx(0.85)
    # in seed order, each labelled
    assert sand["per seed"] == "0.800 (0) / 0.900 (2)"
    assert out[0] is rows[0] and out[2] is rows[3]


def test_save_keeps_other_seeds_and_replaces_a_rerun_seed(tmp_path, monkeypatch):
    monkeypatch.setattr(bn, "RESULTS", tmp_path)
    bn.save([_row("linear oracle", 10.0), _row("SAND", 8.0)], "runs")
    bn.save([_row("SAND", 9.0, seed=1), _row("SAND", 7.0, seed=0)], "runs")
    saved = json.loads((tmp_path / "runs.json").read_text())
    keys = [(r["method"], bn.row_seed(r), r["mse"]) for r in saved]
    assert keys == [("linear oracle", None, 10.0), ("SAND", 0, 7.0), ("SAND", 1, 9.0)]


def test_sweep_table_divides_each_weight_by_the_oracle_of_its_cell():
    fit = _row("SAND+base", 8.0, seed=1)
    fit.update({"base weight": 0.6, "MSE at weight": {"0": 12.0, "1": 9.0}})
    other_cell = {**_row("linear oracle", 20.0), "n_i": "3-5"}
    table = bn.sweep_table([other_cell, _row("linear oracle", 10.0), fit])
    assert "| phase | 8-12 | SAND+base | 1 | 0.60 | 1.200 | 0.900 |" in table
    assert bn.sweep_table([_row("linear oracle", 10.0)]) == ""
