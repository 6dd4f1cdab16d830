"""benchmarks/bench_learning_curves.py: saved rows pooled and paired."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_learning_curves as lc  # noqa: E402


def _score(mse, seconds=60.0, kept=None):
    score = {"mse": mse, "tv": 1.0, "seconds": seconds}
    if kept is not None:
        score["kept_base"] = kept
    return score


def _realdata_file(path, n, scores):
    run = {"rows": [], "splits": {"uk-30": {"n": n, "scores": scores}}}
    path.write_text(json.dumps(run))
    return path


def test_realdata_ratios_are_paired_within_splits(tmp_path):
    # PACE's error halves between splits; the network is 0.9 x PACE in both,
    # which a ratio of the mean errors would also give, but 0.95 x in one and
    # 0.85 x in the other must average to 0.9 with a standard error of 0.05
    scores = {
        "0": {"PACE": _score(2.0), "SAND": _score(1.9, 120.0)},
        "1": {"PACE": _score(1.0), "SAND": _score(0.85, 60.0)},
    }
    path = _realdata_file(tmp_path / "a.json", 500, scores)
    rows = lc.realdata_rows(lc.realdata_scores([path]))
    sand = next(r for r in rows if r["method"] == "SAND alone")
    assert sand["n"] == 500 and sand["splits"] == 2
    assert sand["ratio"] == pytest.approx(0.9)
    assert sand["se"] == pytest.approx(0.05)
    assert sand["fit min"] == pytest.approx(1.5)
    assert rows[0]["method"] == "PACE" and rows[0]["ratio"] == 1.0


def test_the_first_file_wins_and_sizes_stay_apart(tmp_path):
    first = _realdata_file(
        tmp_path / "a.json",
        5494,
        {"0": {"PACE": _score(1.0), "SAND+base": _score(0.9, kept=False)}},
    )
    later = _realdata_file(
        tmp_path / "b.json",
        5494,
        {
            "0": {"PACE": _score(1.0), "SAND+base": _score(1.0, kept=True)},
            "1": {"PACE": _score(1.0), "SAND+base": _score(1.0, kept=True)},
        },
    )
    small = _realdata_file(
        tmp_path / "c.json", 500, {"0": {"PACE": _score(1.0), "SAND": _score(1.2)}}
    )
    rows = lc.realdata_rows(lc.realdata_scores([first, later, small]))
    default = next(r for r in rows if r["method"] == "SAND (default)")
    assert default["ratio"] == pytest.approx(0.95)  # 0.9 from a, 1.0 from b
    assert default["kept PACE"] == "1/2"
    assert {(r["n"], r["method"]) for r in rows} == {
        (500, "PACE"),
        (500, "SAND alone"),
        (5494, "PACE"),
        (5494, "SAND (default)"),
    }


def test_nonlinear_rows_read_the_size_from_the_name(tmp_path):
    saved = [
        {"process": "warp", "n_i": "8-12", "method": m, "mse": mse, "fit s": s}
        for m, mse, s in [
            ("linear oracle", 2.0, 0.0),
            ("PACE", 2.5, 1.0),
            ("SAND", 1.5, 120.0),
        ]
    ]
    for seed, (mse, weight) in enumerate([(2.5, 0.0), (1.5, 0.8)]):
        saved.append(
            {
                "process": "warp",
                "n_i": "8-12",
                "method": "SAND+base",
                "seed": seed,
                "mse": mse,
                "fit s": 180.0,
                "base weight": weight,
            }
        )
    path = tmp_path / "n3000_t0.05_edefault_warp.json"
    path.write_text(json.dumps(saved))
    rows = {r["method"]: r for r in lc.nonlinear_rows([path])}
    assert rows["SAND alone"]["n"] == 3000
    assert rows["SAND alone"]["ratio"] == pytest.approx(0.6)
    assert rows["SAND alone"]["MSE / linear oracle"] == "0.750"
    # two seeds: the mean of their ratios (1.0 and 0.6), one kept PACE
    default = rows["SAND (default)"]
    assert default["seeds"] == 2 and default["kept PACE"] == "1/2"
    assert default["ratio"] == pytest.approx(0.8)
    assert default["se"] == pytest.approx(0.2)
    assert default["MSE / linear oracle"] == "1.000"
    assert np.isnan(rows["PACE"]["se"])
    with pytest.raises(ValueError, match="n<subjects>"):
        lc.nonlinear_rows([path.rename(tmp_path / "warp.json")])
