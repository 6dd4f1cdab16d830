"""Property-based tests of every imputer over generated IrregularData.

Data are drawn by hypothesis: 1 to 50 points per subject on a lattice of 101
times (so different subjects share times), duplicate times, constant
subjects, times and values scaled by powers of ten from 1e-8 to 1e8, and ids
of several hashable types. Structure (sizes, flags, ids, scales) is drawn by
hypothesis so that it shrinks; the values themselves come from a seeded
numpy generator (a random sinusoid plus noise per subject).

Fit properties fit per example; transform properties use one estimator
fitted on a fixed data set (module-scoped fixture) and vary the input. The
neural imputers are tiny (width 8, one encoder and one decoder layer, two
epochs) and get fewer examples.

The example budget follows the hypothesis profile (tests/conftest.py):
``HYPOTHESIS_PROFILE=dev`` multiplies every budget by ten.
"""

import pickle
import re
import tempfile
from pathlib import Path

import _configs
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

torch = pytest.importorskip("torch")
pd = pytest.importorskip("pandas")

from fdaimpute import (  # noqa: E402
    CNPImputer,
    FACEImputer,
    IrregularData,
    KernelImputer,
    MFPCAImputer,
    MICEImputer,
    PACEImputer,
    SANDImputer,
    VTImputer,
)

N_GRID = 21
TICKS = 100  # times are k / TICKS * scale, k = 0..TICKS

NEURAL_TINY = dict(
    _configs.NARROW_SIZES,
    encoding_dim=4,
    max_epochs=2,
    batch_size=4,
    # a small prediction batch, so that permuting subjects changes which
    # subjects are padded together
    predict_batch_size=3,
    # the error-variance head takes ~500 Adam steps whatever the data size
    # (seconds); it is fitted only where a test asks for validation
    validation_fraction=0.0,
    device="cpu",
    random_state=0,
)
SAND_TINY = dict(NEURAL_TINY, sand_heads=2, sand_head_dim=4, sand_encoding_dim=8)
CNP_TINY = dict(
    hidden_dim=8,
    n_layers=1,
    r_dim=4,
    max_epochs=2,
    batch_size=4,
    validation_fraction=0.0,
    device="cpu",
    random_state=0,
)
CLASSES = {
    "Kernel": (KernelImputer, {}),
    "PACE": (PACEImputer, dict(n_work_grid=31, random_state=0)),
    # 15 equal-width bins: with one bin per distinct time (the default on
    # this lattice) a fit takes ~1 s; that path is covered by "MICE-distinct"
    "MICE": (MICEImputer, dict(n_bins=15, max_iter=3, random_state=0)),
    "FACE": (FACEImputer, dict(n_basis=8, n_basis_mean=8)),
    # a fixed rank and basis (their choice can flip on near ties) and a tight
    # optimiser, so that the fit's own rounding stays below the tolerances
    "mFPCA": (
        MFPCAImputer,
        dict(n_components=2, n_basis=6, n_basis_mean=6, tol=1e-13, max_iter=2000),
    ),
    "VT": (VTImputer, NEURAL_TINY),
    "SAND": (SANDImputer, SAND_TINY),
    "CNP": (CNPImputer, CNP_TINY),
}


def make(name, **overrides):
    """A small estimator of kind ``name`` with a 21-point output grid."""
    cls, params = CLASSES[name]
    return cls(**{"grid": N_GRID, **params, **overrides})


# VT's and SAND's default base (PACE, bandwidths cross-validated) takes
# seconds per fit, the tiny network a tenth of one. Properties of the network
# and how it is combined with a base hold for any base, so the transform and
# equivariance tests use the kernel base (KernelImputer is itself checked for
# them here); the fit tests on awkward data keep the default, whose fall-back
# to the network alone they cover.
QUICK_BASE = {"VT": dict(base="kernel"), "SAND": dict(base="kernel")}


def make_quick(name):
    """``make(name)`` with the quick base for the neural imputers that have one."""
    return make(name, **QUICK_BASE.get(name, {}))


CLASSICAL = ("Kernel", "PACE", "MICE")
NEURAL = ("VT", "SAND", "CNP")
ALL = CLASSICAL + NEURAL
# FACE and mFPCA: in the unit (scaling) properties
SPLINE = ("FACE", "mFPCA")

# The only errors an imputer may raise on valid IrregularData: a ValueError
# saying why the data cannot be fitted. Anything else (IndexError,
# LinAlgError, ZeroDivisionError, a RuntimeWarning, a FloatingPointError
# from the non-finite output check, a ValueError with another message) fails.
_COMMON_ERRORS = (r"all training observations are at one time",)
ACCEPTED_ERRORS = {
    "Kernel": _COMMON_ERRORS
    + (
        r"cannot smooth a curve",
        r"no candidate bandwidth gives a defined fit",
    ),
    "PACE": _COMMON_ERRORS
    + (
        r"every subject has a single observation",
        r"distinct observation time\(s\); PACE needs at least 3",
        r"all observed values are equal",
        r"no positive eigenvalue",
        r"the data are too sparse",
        r"use a larger bandwidth",
        r"no candidate mean bandwidth gives a defined fit",
    ),
    "MICE": _COMMON_ERRORS,
    "VT": _COMMON_ERRORS,
    "SAND": _COMMON_ERRORS,
    "CNP": _COMMON_ERRORS,
}


def budget(n):
    """Examples for a test: ``n`` under the ci profile, 10 n under dev."""
    return max(1, n * settings.default.max_examples // 10)


def by_name(names):
    """pytest params, one per estimator name."""
    return [pytest.param(n, id=n) for n in names]


# ---------------------------------------------------------------------- #
# strategies
def _ids(draw, kind, n):
    if kind == "int":
        return list(range(n))
    if kind == "sparse-int":  # non-contiguous, negative, unsorted
        return draw(
            st.lists(
                st.integers(-(10**12), 10**12), min_size=n, max_size=n, unique=True
            )
        )
    if kind == "str":
        text = st.text(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            max_size=6,
        )
        return draw(st.lists(text, min_size=n, max_size=n, unique=True))
    if kind == "mixed":  # ints and strings side by side
        ints = draw(
            st.lists(st.integers(-(10**6), 10**6), min_size=n, max_size=n, unique=True)
        )
        return [v if k % 2 == 0 else f"s{v}" for k, v in enumerate(ints)]
    if kind == "tuple":
        item = st.tuples(st.integers(-5, 5), st.sampled_from(["a", "b", "c"]))
        return draw(st.lists(item, min_size=n, max_size=n, unique=True))
    raise AssertionError(kind)


@st.composite
def subjects(
    draw,
    min_subjects=1,
    max_subjects=10,
    max_points=50,
    min_points=1,
    scales=True,
    constant=True,
    duplicates=True,
    ids=("int", "sparse-int", "str"),
    lattice=(0, TICKS),
):
    """``(times, values, ids, meta)``: per-subject lists ready for from_lists.

    ``meta`` holds the drawn time and value scales and whether any subject
    has duplicate times.
    """
    n = draw(st.integers(min_subjects, max_subjects))
    t_scale = 10.0 ** draw(st.integers(-8, 8)) if scales else 1.0
    v_scale = 10.0 ** draw(st.integers(-8, 8)) if scales else 1.0
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    lo, hi = lattice
    times, values, has_dup = [], [], False
    for _ in range(n):
        k = draw(st.integers(min_points, min(max_points, hi - lo + 1)))
        ticks = draw(st.lists(st.integers(lo, hi), min_size=k, max_size=k, unique=True))
        t = np.array(ticks, dtype=np.float64) / TICKS
        if constant and draw(st.booleans()) and draw(st.booleans()):
            y = np.full(k, rng.normal())
        else:
            a, b, phase = rng.normal(size=3)
            y = a + b * np.sin(2 * np.pi * t + phase) + 0.3 * rng.normal(size=k)
        if duplicates and draw(st.booleans()) and not draw(st.booleans()):
            j = draw(st.integers(0, k - 1))
            t = np.append(t, t[j])
            y = np.append(y, y[j] + rng.normal())
            has_dup = True
        times.append(t * t_scale)
        values.append(y * v_scale)
    kind = draw(st.sampled_from(ids))
    meta = dict(t_scale=t_scale, v_scale=v_scale, duplicates=has_dup, id_kind=kind)
    return times, values, _ids(draw, kind, n), meta


def to_data(drawn):
    times, values, ids, _ = drawn
    return IrregularData.from_lists(times, values, ids=ids, duplicates="average")


def fixed_training_data(n=30, seed=0):
    """Subjects with 3 to 15 points on the lattice; the range is [0, 1]."""
    rng = np.random.default_rng(seed)
    times, values = [], []
    for i in range(n):
        k = rng.integers(3, 16)
        ticks = rng.choice(TICKS + 1, size=k, replace=False)
        if i == 0:
            ticks[:2] = (0, TICKS)  # pin the range
            ticks = np.unique(ticks)
        t = np.sort(ticks) / TICKS
        a, b, phase = rng.normal(size=3)
        values.append(
            a + b * np.sin(2 * np.pi * t + phase) + 0.3 * rng.normal(size=t.size)
        )
        times.append(t)
    return IrregularData.from_lists(times, values)


@pytest.fixture(scope="module")
def train():
    return fixed_training_data()


@pytest.fixture(scope="module")
def fitted(train):
    """One estimator of each kind fitted on ``train`` (shared, do not refit).

    The neural ones hold out validation subjects, so they carry an error
    head (``return_std``) through pickling. VT's and SAND's error model is
    calibrated on those subjects alone: cross-fitting would train five more
    networks and bases, 80% of the fixture's time, and change nothing that
    the tests using it check. Their base is the quick one (``QUICK_BASE``).
    """
    extra = {
        "VT": dict(validation_fraction=0.25, calibration_folds=None),
        "SAND": dict(validation_fraction=0.25, calibration_folds=None),
        "CNP": dict(validation_fraction=0.25),  # a CNP does not cross-fit
    }
    return {
        name: make(name, **QUICK_BASE.get(name, {}), **extra.get(name, {})).fit(train)
        for name in ALL
    }


# Inputs for fitted estimators: unscaled, inside the training range [0, 1].
transform_inputs = subjects(max_subjects=8, scales=False)


def _fit_or_accepted_error(name, est, data):
    """Fit, or return the accepted ValueError (re-raise anything else)."""
    try:
        return est.fit(data), None
    except ValueError as exc:
        if any(re.search(p, str(exc)) for p in ACCEPTED_ERRORS[name]):
            return None, exc
        raise


def _tolerance(name):
    # float32 networks: summation order changes with batch composition
    return 1e-5 if name in NEURAL else 1e-10


def _close(actual, expected, rtol):
    scale = max(np.abs(expected).max(), np.finfo(float).tiny)
    assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale)


# ---------------------------------------------------------------------- #
# the container
@given(drawn=subjects(min_subjects=1, max_subjects=6, scales=False))
@settings(max_examples=budget(30))
def test_duplicates_raise_or_average(drawn):
    times, values, ids, meta = drawn
    if meta["duplicates"]:
        with pytest.raises(ValueError, match=r"subject .* two observations at time"):
            IrregularData.from_lists(times, values, ids=ids)
    data = IrregularData.from_lists(times, values, ids=ids, duplicates="average")
    assert len(data) == len(times)
    assert data.ids.tolist() == list(ids)
    for (t, y), t_in, y_in in zip(data, times, values):
        uniq, inverse = np.unique(t_in, return_inverse=True)
        assert_array_equal(t, uniq)
        means = np.bincount(inverse, y_in) / np.bincount(inverse)
        assert_allclose(y, means, rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", by_name(ALL))
def test_duplicate_times_in_pairs_input_give_clear_error(name):
    pairs = [(np.array([0.0, 0.5, 0.5, 1.0]), np.array([1.0, 2.0, 3.0, 4.0]))] * 3
    with pytest.raises(ValueError, match="two observations at time 0.5"):
        make(name).fit(pairs)


# ---------------------------------------------------------------------- #
# fit: finite output of the right shape, or an accepted ValueError
# (case id, estimator name, parameter overrides, examples under "ci")
FIT_CASES = [
    ("Kernel", "Kernel", {}, 25),
    ("Kernel-subject-gcv", "Kernel", dict(selection="subject", bandwidth="gcv"), 10),
    ("PACE", "PACE", {}, 15),
    ("PACE-fdapace", "PACE", dict(PACEImputer.fdapace().get_params(), grid=N_GRID), 10),
    ("MICE", "MICE", {}, 10),
    ("MICE-distinct", "MICE", dict(n_bins=None), 3),
    ("VT", "VT", {}, 5),
    ("SAND", "SAND", {}, 5),
    ("CNP", "CNP", {}, 5),
]


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize(
    "name, overrides, n_examples",
    [pytest.param(*case[1:], id=case[0]) for case in FIT_CASES],
)
def test_fit_transform_finite_or_clear_error(name, overrides, n_examples):
    @given(drawn=subjects(max_subjects=6 if name in NEURAL else 10))
    @settings(max_examples=budget(n_examples))
    def check(drawn):
        data = to_data(drawn)
        est, error = _fit_or_accepted_error(name, make(name, **overrides), data)
        if error is not None:
            return
        out = est.transform(data)
        assert out.shape == (len(data), N_GRID)
        assert np.isfinite(out).all()
        assert out.dtype == np.float64

    check()


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("name", by_name(NEURAL))
def test_neural_fit_with_validation_finite_or_clear_error(name):
    # the validation split, hidden points and error head on awkward data
    @given(drawn=subjects(min_subjects=2, max_subjects=6))
    @settings(max_examples=budget(2))
    def check(drawn):
        data = to_data(drawn)
        # VT and SAND: two calibration folds, not the default five: the same
        # cross-fitting (down to folds of one subject on two or three), a
        # third of the fits (a CNP does not cross-fit)
        folds = {} if name == "CNP" else dict(calibration_folds=2)
        est = make(name, validation_fraction=0.5, **folds)
        est, error = _fit_or_accepted_error(name, est, data)
        if error is not None:
            return
        if est.error_head_ is None and name != "CNP":
            # (a CNP's SD is its decoder's, so it has no error head)
            # the validation subjects had single points: nothing to calibrate
            with pytest.raises(ValueError, match="no uncertainty estimate"):
                est.transform(data, return_std=True)
            return
        out, std = est.transform(data, return_std=True)
        assert out.shape == std.shape == (len(data), N_GRID)
        assert np.isfinite(out).all() and (std > 0).all() and np.isfinite(std).all()

    check()


def _edge_cases():
    lists = IrregularData.from_lists
    k = np.arange(8.0)
    return {
        "one-point": lists([[0.5]], [[1.0]]),
        "one-subject": lists([[0.0, 1.0]], [[1.0, 2.0]]),
        "singletons": lists([[t] for t in k / 7], [[v] for v in k]),
        "two-times": lists([[0.0, 1.0]] * 6, [[i, 2.0 * i] for i in range(6)]),
        "all-equal": lists([[0.0, 0.5, 1.0]] * 6, [[3.0] * 3] * 6),
        "levels": lists([k / 7] * 6, [np.full(8, float(i)) for i in range(6)]),
        "t1e8-y1e-8": lists(
            [np.linspace(0, 1e8, 7) + i for i in range(8)],
            [1e-8 * np.sin(np.arange(7) + i) for i in range(8)],
        ),
        "t1e-8-y1e8": lists(
            [np.linspace(0, 1e-8, 7) * (1 + 0.01 * i) for i in range(8)],
            [1e8 * np.cos(np.arange(7) + i) for i in range(8)],
        ),
        "offset-1e8": lists(
            [1e8 + np.linspace(0, 1, 7) + 0.01 * i for i in range(8)],
            [np.cos(np.arange(7) + i) for i in range(8)],
        ),
    }


# (case, estimator) -> the start of the ValueError it must raise
EDGE_ERRORS = {
    **{("one-point", n): "all training observations are at one time" for n in ALL},
    ("one-subject", "PACE"): "only 2 distinct observation time",
    ("singletons", "PACE"): "every subject has a single observation",
    ("two-times", "PACE"): "only 2 distinct observation time",
    ("all-equal", "PACE"): "all observed values are equal",
}


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("case", list(_edge_cases()))
@pytest.mark.parametrize("name", by_name(ALL))
def test_edge_cases_fit_or_clear_error(name, case):
    data = _edge_cases()[case]
    est = make(name)
    if (case, name) in EDGE_ERRORS:
        with pytest.raises(ValueError, match=re.escape(EDGE_ERRORS[case, name])):
            est.fit(data)
        return
    out = est.fit(data).transform(data)
    assert out.shape == (len(data), N_GRID)
    assert np.isfinite(out).all()
    if case == "all-equal" and name in ("Kernel", "MICE"):
        # a constant is reproduced (Kernel: local-linear fits are exact for
        # lines; MICE: every cell is observed or regressed on constants)
        assert_allclose(out, 3.0, rtol=1e-12)


# ---------------------------------------------------------------------- #
# transform: rows follow subjects and ids
@pytest.mark.parametrize("name", by_name(ALL))
@pytest.mark.parametrize(
    "id_kind",
    [
        "int",
        "sparse-int",
        "str",
        "mixed",
        "tuple",
    ],
)
def test_output_rows_follow_subjects_and_ids(fitted, name, id_kind):
    est = fitted[name]

    @given(drawn=subjects(max_subjects=8, scales=False, ids=(id_kind,)))
    @settings(max_examples=budget(4 if name in NEURAL else 8))
    def check(drawn):
        times, values, ids, _ = drawn
        data = IrregularData.from_lists(times, values, ids=ids, duplicates="average")
        assert data.ids.tolist() == list(ids)
        plain = est.transform(data)
        est.set_output(transform="pandas")
        try:
            frame = est.transform(data)
        finally:
            est.set_output(transform="default")
        assert isinstance(frame, pd.DataFrame)
        assert frame.shape == (len(ids), N_GRID)
        assert frame.index.tolist() == data.ids.tolist() == list(ids)
        assert_array_equal(frame.to_numpy(), plain)
        # each row is the subject's own curve: imputing it alone gives it
        for i in (0, len(data) - 1):
            _close(est.transform(data[[i]])[0], plain[i], _tolerance(name))

    check()


@pytest.mark.parametrize("name", by_name(ALL))
def test_permuting_subjects_permutes_outputs(fitted, name):
    est = fitted[name]

    @given(drawn=transform_inputs, data_=st.data())
    @settings(max_examples=budget(4 if name in NEURAL else 10))
    def check(drawn, data_):
        data = to_data(drawn)
        perm = np.array(data_.draw(st.permutations(range(len(data)))), dtype=int)
        out = est.transform(data)
        _close(est.transform(data.take(perm)), out[perm], _tolerance(name))

    check()


# ---------------------------------------------------------------------- #
# scale equivariance
#
# Values: Kernel (local-linear fits, criteria scale by c^2, the mean-curve
# penalty scales with the data), PACE (mean, covariance and noise scale by
# c and c^2, the CV error by c^2), FACE and mFPCA (both fit standardised
# times and values) and the neural imputers (values are standardised before
# the network) are equivariant. MICE is not: the Bayesian
# ridge regressions of IterativeImputer have fixed Gamma hyper-priors
# (1e-6), which act differently on data of different magnitude.
# Times: every method depends on times only through their relative positions
# (bandwidth candidates, work grid, bins and the network's [0, 1] map all
# follow the data's range), so scaled times give the same curves on the
# scaled grid. Neural nets see float32 inputs, hence the looser tolerance.
# FACE and mFPCA: on a few subjects the subject folds can choose the largest
# smoothing of the surface, whose solve is ill-conditioned enough to turn the
# rounding of the standardised times into relative changes near 1e-6.
SCALE_RTOL = {
    "Kernel": 1e-6,
    "PACE": 1e-6,
    "MICE": 1e-6,
    "FACE": 1e-5,
    "mFPCA": 1e-5,
    "VT": 1e-3,
    "SAND": 1e-3,
    "CNP": 1e-3,
}
SCALE_EXAMPLES = {
    "Kernel": 10,
    "PACE": 6,
    "MICE": 8,
    "FACE": 6,
    "mFPCA": 6,
    "VT": 2,
    "SAND": 2,
    "CNP": 2,
}
scale_factors = st.integers(-8, 8).filter(lambda e: e != 0).map(lambda e: 10.0**e)


def _identified(name, data):
    """Whether ``name``'s model is identified by ``data``.

    mFPCA's six B-splines of rank two are not, from fewer distinct times
    than that: its likelihood then has a ridge of maxima, and which one the
    optimiser reaches moves with the rounding of the data.
    """
    return name != "mFPCA" or np.unique(data.times).size >= 2 * 6


def _scale_inputs(name):
    # enough subjects and points that every method fits without error
    return subjects(
        min_subjects=6 if name in NEURAL else 8,
        max_subjects=8 if name in NEURAL else 12,
        min_points=3,
        max_points=12,
        scales=False,
        constant=False,
        duplicates=False,
        ids=("int",),
    )


@pytest.mark.parametrize(
    "name", by_name(("Kernel", "PACE", "FACE", "mFPCA", "VT", "SAND", "CNP"))
)
def test_scaling_values_scales_curves(name):
    @given(drawn=_scale_inputs(name), c=scale_factors)
    @settings(max_examples=budget(SCALE_EXAMPLES[name]))
    def check(drawn, c):
        data = to_data(drawn)
        assume(_identified(name, data))
        base = make_quick(name).fit(data).transform(data)
        scaled = data.with_values(data.values * c)
        out = make_quick(name).fit(scaled).transform(scaled)
        _close(out / c, base, SCALE_RTOL[name])

    check()


# Values + b: every method is shift-equivariant (local-linear fits and the
# pooled mean; PACE's mean absorbs b and the covariance ignores it; the
# neural imputers subtract the mean; MICE's Bayesian ridge has an
# intercept and its initial fill is the column mean).
@pytest.mark.parametrize("name", by_name(ALL + SPLINE))
def test_shifting_values_shifts_curves(name):
    @given(drawn=_scale_inputs(name), b=st.sampled_from([-100.0, -1.0, 3.0, 1e3]))
    @settings(max_examples=budget(SCALE_EXAMPLES[name]))
    def check(drawn, b):
        data = to_data(drawn)
        assume(_identified(name, data))
        base = make_quick(name).fit(data).transform(data)
        shifted = data.with_values(data.values + b)
        out = make_quick(name).fit(shifted).transform(shifted)
        rtol = SCALE_RTOL[name]
        atol = rtol * (abs(b) + np.abs(base).max())
        assert_allclose(out - b, base, rtol=rtol, atol=atol)

    check()


# On current code PACE's time-unit dependence (see the two unit_free tests
# below) is found by the dev profile; the ci examples happen to pass.
@pytest.mark.parametrize("name", by_name(ALL + SPLINE))
def test_scaling_times_keeps_curves(name):
    @given(drawn=_scale_inputs(name), c=scale_factors)
    @settings(max_examples=budget(SCALE_EXAMPLES[name]))
    def check(drawn, c):
        data = to_data(drawn)
        assume(_identified(name, data))
        est = make_quick(name).fit(data)
        base = est.transform(data)
        scaled = data.with_values(data.values, times=data.times * c)
        est_c = make_quick(name).fit(scaled)
        _close(est_c.grid_ / c, est.grid_, 1e-12)
        _close(est_c.transform(scaled), base, SCALE_RTOL[name])

    check()


@pytest.mark.parametrize(
    "c",
    [
        1e-8,
        1e-4,
        1e4,
        1e8,
    ],
)
def test_pace_bandwidth_search_is_unit_free(c):
    # the cross-validated bandwidths follow the time unit exactly
    data = fixed_training_data(n=11, seed=3)
    base = make("PACE").fit(data)
    est = make("PACE").fit(data.with_values(data.values, times=data.times * c))
    assert_allclose(np.divide(est.bandwidth_cov_, c), base.bandwidth_cov_, rtol=1e-9)
    assert_allclose(est.bandwidth_mean_ / c, base.bandwidth_mean_, rtol=1e-9)
    assert est.n_components_ == base.n_components_


def _quartile_lattice_data(seed=5, n=12):
    """Times k/100 on [0.01, 0.99], one subject observed at 0.25."""
    rng = np.random.default_rng(seed)
    times, values = [], []
    for i in range(n):
        ticks = rng.choice(np.arange(1, TICKS), size=rng.integers(3, 12), replace=False)
        if i == 0:
            ticks[:3] = (1, 25, 99)
        t = np.unique(ticks) / TICKS
        a, b, phase = rng.normal(size=3)
        times.append(t)
        values.append(
            a + b * np.sin(2 * np.pi * t + phase) + 0.3 * rng.normal(size=t.size)
        )
    return IrregularData.from_lists(times, values)


@pytest.mark.parametrize("c", [0.01, 100.0])
def test_pace_noise_variance_is_unit_free(c):
    data = _quartile_lattice_data()
    base = make("PACE").fit(data)
    est = make("PACE").fit(data.with_values(data.values, times=data.times * c))
    assert_allclose(est.noise_variance_, base.noise_variance_, rtol=1e-9)
    scaled = data.with_values(data.values, times=data.times * c)
    _close(est.transform(scaled), base.transform(data), 1e-6)


@pytest.mark.parametrize("c", [10.0, 0.1])
def test_mice_bins_are_unit_free(c):
    times = [[0.74], [0.52], [0.04], [0.44, 0.53, 0.35, 0.26, 0.11, 0.49, 0.72]]
    times += [[0.07, 0.9, 0.55], [0.43, 0.91], [0.44, 0.77, 0.2, 0.06, 0.81]]
    times += [[0.34, 1.0], [1.0, 0.36, 0.07, 0.66, 0.4], [0.98]]
    rng = np.random.default_rng(0)
    data = IrregularData.from_lists(times, [rng.normal(size=len(t)) for t in times])
    scaled = data.with_values(data.values, times=data.times * c)
    base = make("MICE").fit(data).transform(data)
    _close(make("MICE").fit(scaled).transform(scaled), base, 1e-9)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_mice_one_subject_many_bins_fits_cleanly():
    data = IrregularData.from_lists([np.arange(30) / 29], [np.sin(np.arange(30.0))])
    out = make("MICE", n_bins=None).fit(data).transform(data)
    assert np.isfinite(out).all()


# ---------------------------------------------------------------------- #
# refit and persistence
REFIT_EXAMPLES = {"Kernel": 8, "PACE": 5, "MICE": 6, "VT": 2, "SAND": 2, "CNP": 2}


@pytest.mark.parametrize("name", by_name(ALL))
def test_refit_equals_fresh_fit(name):
    inputs = subjects(min_subjects=6, max_subjects=10, max_points=15, scales=False)

    @given(a=inputs, b=inputs)
    @settings(max_examples=budget(REFIT_EXAMPLES[name]))
    def check(a, b):
        a, b = to_data(a), to_data(b)
        est, error = _fit_or_accepted_error(name, make(name), a)
        if error is not None:
            est = make(name)
        fresh, error = _fit_or_accepted_error(name, clone(est), b)
        if error is not None:
            with pytest.raises(ValueError, match=re.escape(str(error))):
                est.fit(b)
            return
        est.fit(b)
        assert_array_equal(est.grid_, fresh.grid_)
        # on the union range both may extrapolate; impute B itself
        assert_array_equal(est.transform(b), fresh.transform(b))

    check()


@pytest.mark.parametrize("name", by_name(ALL))
def test_pickle_round_trip_is_bit_identical(fitted, name):
    est = fitted[name]
    again = pickle.loads(pickle.dumps(est))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.fdai"
        est.save(path)
        loaded = type(est).load(path)

    with_std = name in ("PACE",) + NEURAL

    @given(drawn=transform_inputs)
    @settings(max_examples=budget(3 if name in NEURAL else 6))
    def check(drawn):
        data = to_data(drawn)
        expected = est.transform(data)
        assert_array_equal(again.transform(data), expected)
        assert_array_equal(loaded.transform(data), expected)
        if with_std:
            _, std = est.transform(data, return_std=True)
            assert_array_equal(again.transform(data, return_std=True)[1], std)
            assert_array_equal(loaded.transform(data, return_std=True)[1], std)

    check()
    assert again.get_params() == est.get_params()
    assert loaded.get_params() == est.get_params()


def test_shared_fixture_is_not_mutated(fitted, train):
    # guards the tests above (run last): set_output and transforms leave the
    # shared estimators as a fresh fit would be
    for name in CLASSICAL:
        fresh = make(name).fit(train)
        assert_array_equal(fitted[name].transform(train), fresh.transform(train))
    for name in ALL:
        assert isinstance(fitted[name].transform(train[:2]), np.ndarray)


# The units the issue found FACE and mFPCA sensitive to: times x 1e-12 (FACE
# changed by 95 %) and values x 1e+-20 (mFPCA by ~100 %).
@pytest.mark.parametrize(
    "name, time_factor, value_factor",
    [
        ("FACE", 1e-12, 1.0),
        ("FACE", 1e-8, 1.0),
        ("FACE", 1.0, 1e20),
        ("mFPCA", 1.0, 1e20),
        ("mFPCA", 1.0, 1e-20),
        ("mFPCA", 1e-12, 1.0),
    ],
)
def test_spline_fpca_is_unit_free(name, time_factor, value_factor):
    data = fixed_training_data(n=30, seed=1)
    est = make(name).fit(data)
    scaled = data.with_values(
        data.values * value_factor, times=data.times * time_factor
    )
    other = make(name).fit(scaled)
    # FACE on 30 subjects chooses lambda_cov by cross-validation, a bounded
    # search that stops within 1e-3 of log10(lambda): rounding in the scaled
    # data moves its end point within that, and the curves by ~1e-5
    tol = 1e-4 if name == "FACE" else 1e-6
    _close(other.transform(scaled) / value_factor, est.transform(data), tol)
    _close(
        other.derivative(scaled) * time_factor / value_factor,
        est.derivative(data),
        10 * tol,
    )
    _, std = est.transform(data, return_std=True)
    _close(other.transform(scaled, return_std=True)[1] / value_factor, std, tol)
    assert_allclose(
        other.eigenvalues_ / (value_factor**2 * time_factor),
        est.eigenvalues_,
        rtol=tol,
    )
