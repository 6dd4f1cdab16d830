"""Scoring and row merging of benchmarks/bench_realdata.py (no neural fitting)."""

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_realdata as br  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.metrics import split_held_out  # noqa: E402


def _row(data, method, mse):
    return {"data": data, "method": method, "MSE x1000": mse}


def test_rows_merged_once_per_data_set_and_method_in_table_order():
    first = {"rows": [_row("uk-30", "SAND", "a"), _row("uk-30", "PACE", "b")]}
    second = {
        "rows": [
            _row("framingham", "PACE", "c"),
            _row("uk-30", "PACE", "other run"),
            _row("uk-30", "Kernel", "d"),
        ]
    }
    rows = br._merge_rows([first, second])
    keys = [(r["data"], r["method"]) for r in rows]
    assert keys == [
        ("uk-30", "Kernel"),
        ("uk-30", "PACE"),
        ("uk-30", "SAND"),
        ("framingham", "PACE"),
    ]
    assert rows[1]["MSE x1000"] == "b"


def test_splits_are_reproducible_and_pace_ratio_is_one():
    sim = fi.simulate.sand_paper(
        n=120, n_obs="8-12", split=(1.0, 0.0, 0.0), random_state=0
    )
    args = SimpleNamespace(
        methods=["Kernel", "PACE"], n_subjects=100, seed=0, subject_errors=False
    )
    once = [br.one_split(sim.train.data, s, args)[0] for s in range(2)]
    again = br.one_split(sim.train.data, 0, args)[0]
    assert again["PACE"]["mse"] == once[0]["PACE"]["mse"]
    assert once[0]["PACE"]["mse"] != once[1]["PACE"]["mse"]
    rows = br.summarize("uk-30", 100, once, args.methods)
    assert rows[1]["MSE / PACE"].startswith("1.000")
    kernel_ratio = float(rows[0]["MSE / PACE"].split()[0])
    expected = np.mean([s["Kernel"]["mse"] / s["PACE"]["mse"] for s in once])
    assert abs(kernel_ratio - expected) < 1e-3


def test_subject_errors_add_up_to_the_held_out_error():
    # --subject-errors: one summed squared error per subject that hid
    # something, in the order of the hidden subjects, adding up to the MSE
    sim = fi.simulate.sand_paper(
        n=60, n_obs="8-12", split=(1.0, 0.0, 0.0), random_state=1
    )
    args = SimpleNamespace(
        methods=["PACE"], n_subjects=None, seed=0, subject_errors=True
    )
    scores, _ = br.one_split(sim.train.data, 0, args)
    pace = scores["PACE"]
    _, hidden, rows = split_held_out(sim.train.data, 0.2, min_keep=2, random_state=0)
    assert pace["subject_rows"] == [int(r) for r in rows]
    assert len(pace["subject_sse"]) == len(hidden)
    mean = sum(pace["subject_sse"]) / hidden.times.size
    assert abs(mean - pace["mse"]) < 1e-5 * pace["mse"]
    assert "network_train" not in pace


def _score(mse):
    return {"mse": mse, "tv": 1.0, "seconds": 1.0, "kept_base": False}


def test_splits_of_several_processes_are_pooled_before_summarising():
    # two processes ran different splits; a third ran PACE again on split 0
    first = {
        "rows": [],
        "splits": {
            "uk-30": {
                "n": 9,
                "scores": {"0": {"PACE": _score(2.0), "SAND": _score(1.0)}},
            }
        },
    }
    second = {
        "rows": [],
        "splits": {
            "uk-30": {
                "n": 9,
                "scores": {"1": {"PACE": _score(4.0), "SAND": _score(3.0)}},
            }
        },
    }
    third = {
        "rows": [],
        "splits": {"uk-30": {"n": 9, "scores": {"0": {"PACE": _score(99.0)}}}},
    }
    rows = {r["method"]: r for r in br._merge_rows([first, second, third])}
    # the first run's split 0 is kept; two splits pooled per method
    assert rows["PACE"]["MSE x1000"].startswith("3000.000")
    ratio = float(rows["SAND"]["MSE / PACE"].split()[0])
    assert abs(ratio - np.mean([1.0 / 2.0, 3.0 / 4.0])) < 1e-3
    assert rows["SAND"]["MSE x1000"].startswith("2000.000")


def _saved(n, mse):
    score = {"mse": mse, "tv": 1.0, "seconds": 1.0, "kept_base": False}
    return {"rows": [], "splits": {"uk-30": {"n": n, "scores": {"0": {"PACE": score}}}}}


def test_saved_splits_of_other_sizes_stay_apart():
    # a run on 1,000 households and one on all of them: two rows, not one
    # whose split 0 is whichever came first
    rows = br._merge_rows([_saved(1000, 0.05), _saved(5494, 0.04)])
    assert [(r["n"], r["MSE x1000"].split()[0]) for r in rows] == [
        (1000, "50.000"),
        (5494, "40.000"),
    ]
