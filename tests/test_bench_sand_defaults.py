"""Saved-row tables of benchmarks/bench_sand_defaults.py (no fitting)."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_sand_defaults as bsd  # noqa: E402


def _row(n, seed, variant, model, mse, tv, **extra):
    row = {"n": n, "n_i": "8-12", "seed": seed, "variant": variant, "model": model}
    row.update({"mse": mse, "tv": tv, "rough": 1.0, "fit s": 1.0, **extra})
    if model == "SAND":
        row.update({"kept": True, "smoothing": 1e-3})
    return row


def test_a_table_keeps_each_subject_counts_rows_apart():
    rows = [
        _row(2000, 0, "default", "VT", 100.0, 200.0),
        _row(2000, 0, "default", "SAND", 90.0, 180.0),
        # the same keys at another n must not replace n = 2,000's rows
        _row(10000, 0, "default", "VT", 50.0, 100.0),
        _row(10000, 0, "default", "SAND", 60.0, 130.0),
    ]
    at_2000 = bsd.table(rows, 2000)
    assert "| 8-12 | default | 1 | 100.0 | 90.0 | 0.900 |" in at_2000
    assert "| 8-12 | default | 1 | 50.0 | 60.0 | 1.200 |" in bsd.table(rows, 10000)


def test_a_seed_filter_averages_only_those_seeds():
    rows = [
        _row(2000, seed, "default", model, mse, 200.0)
        for seed, vt, sand in ((0, 100.0, 80.0), (1, 100.0, 120.0))
        for model, mse in (("VT", vt), ("SAND", sand))
    ]
    assert "| 8-12 | default | 2 | 100.0 | 100.0 | 1.000 (0.800-1.200) |" in (
        bsd.table(rows, 2000)
    )
    assert "| 8-12 | default | 1 | 100.0 | 80.0 | 0.800 |" in (
        bsd.table(rows, 2000, seeds={0})
    )


def test_the_oracle_table_sets_the_tv_target_beside_a_flat_curves_tv():
    truth = np.array([[0.0, 0.2, 0.1, 0.4]])
    flat = np.full_like(truth, 3.0)
    # a flat curve's error TV is the true curve's own mean absolute increment
    assert np.isclose(bsd.increments(truth), 200.0)
    assert np.isclose(1000 * np.abs(np.diff(flat - truth)).mean(), 200.0)
    rows = [
        _row(2000, s, "oracle", "oracle", 1.0, 150.0, **{"truth rough": 2.0})
        for s in (0, 1)
    ]
    for row in rows:
        row["truth tv"] = 210.0
    rows += [_row(2000, 0, "default", "VT", 1.0, 200.0)]
    rows += [_row(2000, 1, "default", "VT", 1.0, 220.0)]
    line = bsd.oracle_table(rows, 2000).splitlines()[-1]
    assert line == "| 8-12 | 2 | 1.0 | 150.0 | 1.0 | 2.0 | 210.0 | 210.0 | 189.0 |"


def test_rows_of_another_device_are_saved_and_tabled_apart(tmp_path, monkeypatch):
    monkeypatch.setattr(bsd, "RESULTS", tmp_path)
    on_cpu = bsd.path_of(2000, "8-12", 0, "default", "SAND")
    on_gpu = bsd.path_of(2000, "8-12", 0, "default", "SAND", "cuda")
    assert on_cpu.parent == tmp_path and on_gpu.parent == tmp_path / "cuda"
    on_gpu.parent.mkdir()
    on_gpu.write_text('{"n": 2000}')
    assert bsd.load_rows("cpu") == [] and bsd.load_rows("cuda") == [{"n": 2000}]


def test_a_row_without_its_ridge_says_so():
    rebuilt = _row(2000, 0, "default", "SAND", 90.0, 180.0)
    del rebuilt["smoothing"]
    assert bsd._ridge(rebuilt) == "?"
