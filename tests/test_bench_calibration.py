"""Scoring functions of benchmarks/bench_calibration.py (no fitting)."""

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_calibration as bc  # noqa: E402


def _row(method, split, n=90):
    return {"data": "d", "n": n, "method": method, "split": split, "seconds": 1.0}


def test_standard_normal_covers_nominal():
    z = np.random.default_rng(0).standard_normal(200_000)
    cov = bc.interval_coverage(z, bc.LEVELS)
    assert cov.shape == bc.LEVELS.shape
    np.testing.assert_allclose(cov, bc.LEVELS, atol=0.005)


def test_doubled_errors_cover_less():
    z = 2 * np.random.default_rng(1).standard_normal(200_000)
    cov = bc.interval_coverage(z, [0.95])
    # |2 Z| <= 1.96 iff |Z| <= 0.98: probability 0.673
    assert cov[0] == pytest.approx(2 * norm.cdf(0.98) - 1, abs=0.005)
    assert cov[0] == pytest.approx(0.68, abs=0.01)


def test_coverage_edges_and_sign():
    half = norm.ppf(0.975)
    z = np.array([half, -half, 1.001 * half, -3.0])
    # on the bound counts as covered; the sign does not matter
    assert bc.interval_coverage(z, [0.95])[0] == 0.5
    assert bc.interval_coverage(-z, [0.95])[0] == 0.5


def test_z_scores_add_noise_variance():
    z = bc.z_scores([3.0, -1.0], np.array([0.0, 1.0]), np.array([3.0, 0.0]), 16.0)
    np.testing.assert_allclose(z, [3 / 5, -2 / 4])


def test_split_score_scales():
    z = np.random.default_rng(2).standard_normal(100_000)
    one = bc.split_score(z)
    two = bc.split_score(3 * z)
    assert one["rms_z"] == pytest.approx(1, abs=0.01)
    assert one["robust_z"] == pytest.approx(1, abs=0.02)
    assert two["rms_z"] == pytest.approx(3 * one["rms_z"])
    assert two["robust_z"] == pytest.approx(3 * one["robust_z"])
    # one wild error moves the RMS, not the robust scale
    wild = bc.split_score(np.append(z, 1e4))
    assert wild["rms_z"] > 30
    assert wild["robust_z"] == pytest.approx(one["robust_z"], abs=1e-3)
    assert wild["n_hidden"] == z.size + 1


def test_mean_se():
    values = np.array([0.9, 0.95, 0.8, 0.99, 0.7])
    mean, se = bc.mean_se(values)
    assert mean == pytest.approx(values.mean())
    assert se == pytest.approx(values.std(ddof=1) / np.sqrt(5))
    assert np.isnan(bc.mean_se([0.5])[1])


def test_summarize_groups_and_worst_split():
    rng = np.random.default_rng(3)
    rows = []
    for split, scale in enumerate([1.0, 1.0, 4.0]):
        for method in ("A", "B"):
            z = rng.standard_normal(5000) * (scale if method == "A" else 1.0)
            rows.append({**_row(method, split), **bc.split_score(z)})
    rows.append({**_row("A", 0, n=250), **bc.split_score(rng.standard_normal(9))})
    table = bc.summarize(rows)
    assert [(r["n"], r["method"]) for r in table] == [(90, "A"), (90, "B"), (250, "A")]
    a = table[0]
    cov95 = [r["coverage"][bc._level_index(0.95)] for r in rows[:6:2]]
    mean, se = bc.mean_se(cov95)
    assert a["95%"] == f"{mean:.3f} ({se:.3f})"
    # the split with errors four times too large shows as the worst
    assert float(a["worst 95%"]) == pytest.approx(2 * norm.cdf(0.49) - 1, abs=0.02)
    assert float(table[1]["worst 95%"]) > 0.93
    assert table[2]["95%"].endswith("(nan)")


def test_pooled_coverage_weights_by_points():
    rows = [
        {"coverage": [0.5] * bc.LEVELS.size, "n_hidden": 30},
        {"coverage": [1.0] * bc.LEVELS.size, "n_hidden": 10},
    ]
    np.testing.assert_allclose(bc.pooled_coverage(rows), 0.625)
