"""benchmarks/bench_gate_mix.py: the mix's best weight in closed form."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_gate_mix as gm  # noqa: E402


def test_best_weight_known_answers():
    base = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    # an exact network takes all the weight
    assert gm.best_weight(base, torch.zeros(3, dtype=torch.float64)) == (1.0, 0.0)
    # errors opposite to the base's cancel at half and half
    g, err = gm.best_weight(base, -base)
    assert g == pytest.approx(0.5) and err == pytest.approx(0.0)
    # a network no different from the base, or worse in the same direction,
    # gets no weight
    assert gm.best_weight(base, base) == (0.0, pytest.approx(float((base**2).mean())))
    assert gm.best_weight(base, 2 * base)[0] == 0.0


def test_a_weight_beyond_one_is_clipped():
    # the network's errors are a third of the base's, same sign: the
    # unclipped optimum is 1.5, and the clipped mix is the network
    base = torch.tensor([3.0, -3.0], dtype=torch.float64)
    g, err = gm.best_weight(base, base / 3)
    assert g == 1.0 and err == pytest.approx(1.0)
