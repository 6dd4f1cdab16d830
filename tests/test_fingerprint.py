"""The closed-form imputers' outputs on one fixed draw agree with the stored
summary: a change that only moves code cannot move them.

A change that means to move them rewrites the summary
(``python scripts/output_fingerprint.py --write-reference``) and says why.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).parents[1] / "scripts" / "output_fingerprint.py"


def _script():
    spec = importlib.util.spec_from_file_location("output_fingerprint", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fingerprint():
    return _script()


@pytest.fixture(scope="module")
def now(fingerprint):
    return fingerprint.summary(fingerprint.outputs(fingerprint.CLOSED_FORM))


def test_every_closed_form_output_is_summarised(fingerprint, now):
    reference = json.loads(fingerprint.REFERENCE.read_text())
    assert sorted(now) == sorted(reference)
    assert {key.split("/")[0] for key in now} == set(fingerprint.CLOSED_FORM)


def test_outputs_agree_with_the_stored_summary(fingerprint, now):
    reference = json.loads(fingerprint.REFERENCE.read_text())
    moved = []
    for key, ref in reference.items():
        got = now[key]
        if got["shape"] != ref["shape"]:
            moved.append(f"{key}: shape {got['shape']} != {ref['shape']}")
            continue
        # a projection on a direction of norm ~sqrt(size) moves by at most
        # that times the output's change; allow rounding of 1e-9 of its norm
        scale = 1e-9 * ref["norm"] * np.sqrt(np.prod(ref["shape"]))
        gap = np.max(np.abs(np.subtract(got["projections"], ref["projections"])))
        if abs(got["norm"] - ref["norm"]) > 1e-9 * ref["norm"] or gap > scale:
            moved.append(f"{key}: norm {got['norm']:.12g} vs {ref['norm']:.12g}")
    assert not moved, "outputs moved:\n" + "\n".join(moved)


def test_the_summary_sees_a_small_change(fingerprint):
    values = np.linspace(0.0, 1.0, 303).reshape(3, 101)
    nudged = values.copy()
    nudged[1, 50] += 1e-6
    a, b = fingerprint.summary({"x": values}), fingerprint.summary({"x": nudged})
    gap = np.max(np.abs(np.subtract(a["x"]["projections"], b["x"]["projections"])))
    assert gap > 1e-9 * a["x"]["norm"] * np.sqrt(values.size)
