"""The declared parameter constraints: kinds, bounds, messages, every estimator."""

import numpy as np
import pytest

import fdaimpute as fi
from fdaimpute._core.params import (
    RANDOM_STATE,
    Boolean,
    Interval,
    Options,
    Pair,
    check_param,
)


@pytest.mark.parametrize(
    "closed, low_ok, high_ok",
    [
        ("both", True, True),
        ("left", True, False),
        ("right", False, True),
        ("neither", False, False),
    ],
)
def test_interval_bounds_follow_closed(closed, low_ok, high_ok):
    c = Interval("real", 0, 1, closed=closed)
    assert c.is_satisfied_by(0) is low_ok
    assert c.is_satisfied_by(1.0) is high_ok
    assert c.is_satisfied_by(0.5)
    assert not c.is_satisfied_by(1.5) and not c.is_satisfied_by(-0.1)


def test_interval_kinds():
    assert Interval("int", 1).is_satisfied_by(np.int64(3))
    assert not Interval("int", 1).accepts_kind(3.0)
    assert not Interval("int", 1).accepts_kind(True)
    assert not Interval("real").is_satisfied_by(np.nan)
    assert not Interval("real").is_satisfied_by(np.inf)
    assert Interval("real", 0).is_satisfied_by(np.float32(2.0))


def test_wrong_kind_is_a_type_error_wrong_value_a_value_error():
    allowed = [Interval("real", 0, closed="neither"), Options("cv", "gcv")]
    with pytest.raises(
        TypeError,
        match=r"'h' parameter of Est must be a number > 0 "
        r"or one of 'cv', 'gcv'; got \[1\]",
    ):
        check_param("h", [1], allowed, "Est")
    with pytest.raises(ValueError, match="got -1.0"):
        check_param("h", -1.0, allowed, "Est")
    with pytest.raises(ValueError, match="got 'silverman'"):
        check_param("h", "silverman", allowed, "Est")
    assert check_param("h", "cv", allowed) == "cv"


def test_pair_and_none_and_boolean():
    allowed = [Pair(Interval("real", 0, closed="neither"), "(along, across)"), None]
    assert check_param("b", (0.1, 0.2), allowed) == (0.1, 0.2)
    assert check_param("b", None, allowed) is None
    with pytest.raises(ValueError, match=r"a pair \(along, across\) of numbers > 0"):
        check_param("b", (0.1, 0.2, 0.3), allowed)
    with pytest.raises(TypeError):
        check_param("b", 0.1, allowed)
    assert check_param("flag", np.True_, [Boolean()])
    with pytest.raises(TypeError, match="True or False"):
        check_param("flag", 1, [Boolean()])


def test_random_state_values():
    for ok in (None, 0, 2**32 - 1, np.random.RandomState(0)):
        check_param("random_state", ok, RANDOM_STATE)
    with pytest.raises(ValueError):
        check_param("random_state", -1, RANDOM_STATE)
    with pytest.raises(TypeError):
        check_param("random_state", "seed", RANDOM_STATE)


ESTIMATORS = [
    fi.KernelImputer,
    fi.MICEImputer,
    fi.PACEImputer,
    fi.VTImputer,
    fi.SANDImputer,
    fi.CNPImputer,
]


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_every_estimator_declares_every_parameter_but_grid_and_extrapolate(cls):
    declared = set(cls._param_constraints)
    params = set(cls().get_params()) - {"grid", "extrapolate"}
    assert params <= declared, sorted(params - declared)
    assert declared <= params, sorted(declared - params)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_bad_keep_observed_is_refused_before_any_work(cls):
    data = fi.simulate.sand_paper(n=20, random_state=0).train.data
    with pytest.raises(TypeError, match=f"'keep_observed' parameter of {cls.__name__}"):
        cls(keep_observed="yes").fit(data)
