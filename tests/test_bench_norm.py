"""Saved-row tables of benchmarks/bench_norm.py (no fitting)."""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_norm as bn  # noqa: E402


def test_across_seeds_divides_each_norm_by_layer_norm_of_its_seed(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(bn, "RESULTS", tmp_path)
    args = SimpleNamespace(
        n=20, n_test=10, sparsity="8-12", epochs=2, across_seeds=[0, 3]
    )
    for seed, (layer, batch) in zip(args.across_seeds, [(2.0, 1.0), (4.0, 5.0)]):
        rows = [
            {"model": "VT", "norm": "'layer'", "MSE / oracle": layer},
            {"model": "VT", "norm": "'batch'", "MSE / oracle": batch},
        ]
        bn.rows_path(args, seed).write_text(json.dumps({"rows": rows, "oracle_mse": 1}))
    assert bn.rows_path(args, 0).name == "n20_t10_8-12_e2.json"
    assert bn.rows_path(args, 3).name == "n20_t10_8-12_e2_s3.json"
    assert "| VT | 0.500 / 1.250 |" in bn.across_seeds(args)
