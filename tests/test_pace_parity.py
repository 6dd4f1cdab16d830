"""PACEImputer against the R package fdapace 0.6.0 (reference outputs).

``PACEImputer.fdapace(...)`` reimplements fdapace's arithmetic step by
step (same smoothers, same sigma^2 estimate, same quadrature and
interpolation), so on data binned exactly the two agree to rounding
error; the tolerances below are far below any statistical difference and
far above floating-point noise. With linear binning of continuous times
(the memory-bounded path) the agreement is to the binning error,
O((bin width / bandwidth)^2).
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fdaimpute import IrregularData
from fdaimpute.pace import PACEImputer

DATA = Path(__file__).resolve().parent / "data" / "fdapace"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "reference" / "fdapace"

if not (DATA / "B_input.csv").exists():  # pragma: no cover - data ship with tests
    pytest.skip("fdapace reference files are missing", allow_module_level=True)


def _load(name, directory=DATA):
    return pd.read_csv(directory / name)


def _dataset(ds, directory=DATA):
    data = IrregularData.from_long(_load(f"{ds}_input.csv", directory), "id", "t", "y")
    grid_file = "grid101.csv" if ds == "A" else "grid51.csv"
    grid = _load(grid_file, directory)["t"].to_numpy()
    return data, grid


def _reference(ds, run, directory=DATA):
    info = json.loads((directory / f"{ds}_{run}_info.json").read_text())
    muphi = _load(f"{ds}_{run}_muphi.csv", directory).to_numpy()
    scores = _load(f"{ds}_{run}_scores.csv", directory).to_numpy()[:, 1:]
    fitted = _load(f"{ds}_{run}_fitted.csv", directory).to_numpy()
    return info, muphi, scores, fitted


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _fit(ds, run, directory=DATA, **params):
    data, grid = _dataset(ds, directory)
    info = json.loads((directory / f"{ds}_{run}_info.json").read_text())
    if run == "userbw":
        params = (
            dict(
                bandwidth_mean=info["bwMu"],
                bandwidth_cov=info["bwCov"],
                n_components=info["K"],
                n_work_grid=info["options_used"]["nRegGrid"],
            )
            | params
        )
    # B's output grid [0, 1] reaches past its observed range, as in fdapace
    est = PACEImputer.fdapace(grid=grid, extrapolate=True, **params).fit(data)
    return est, data, grid


def _compare(est, data, grid, ds, run, directory=DATA):
    info, muphi, scores, fitted = _reference(ds, run, directory)
    k = info["K"]
    phi = np.stack(
        [np.interp(grid, est.work_grid_, est.eigenfunctions_[:, j]) for j in range(k)],
        axis=1,
    )
    ours_scores = est.scores(data)
    signs = np.sign(np.sum(phi * muphi[:, 2 : 2 + k], axis=0))
    return dict(
        k=(est.n_components_, k),
        bandwidths=(
            est.bandwidth_mean_,
            est.bandwidth_cov_,
            info["bwMu"],
            info["bwCov"],
        ),
        sigma2=abs(est.noise_variance_ / info["sigma2"] - 1),
        eigenvalues=np.max(np.abs(est.eigenvalues_ / np.asarray(info["lambda"]) - 1)),
        mean=_rel(est.mean_, muphi[:, 1]),
        eigenfunctions=max(
            _rel(signs[j] * phi[:, j], muphi[:, 2 + j]) for j in range(k)
        ),
        scores=max(_rel(signs[j] * ours_scores[:, j], scores[:, j]) for j in range(k)),
        fitted=_rel(est.transform(data), fitted),
    )


@pytest.mark.parametrize(
    "ds, run, tol",
    [
        ("A", "userbw", 1e-8),  # times on a grid: exact bins, rounding only
        # 1,350 distinct continuous times, exact bins: the scores carry
        # fdapace's own rounding where times nearly tie (the test below)
        ("B", "userbw", 1e-4),
        ("B", "default", 1e-4),
    ],
)
def test_pace_parity_fdapace(ds, run, tol):
    est, data, grid = _fit(ds, run)
    diff = _compare(est, data, grid, ds, run)
    assert diff["k"][0] == diff["k"][1]
    assert_bw = np.asarray(diff["bandwidths"], dtype=float)
    np.testing.assert_allclose(assert_bw[:2], assert_bw[2:], rtol=1e-12)
    for key in ("sigma2", "eigenvalues", "mean", "eigenfunctions", "scores", "fitted"):
        assert diff[key] < tol, (key, diff[key])


@pytest.mark.parametrize("ds, run", [("B", "userbw"), ("B", "default")])
def test_pace_parity_fdapace_linear_binning(ds, run):
    # the memory-bounded path: 201 linear bins instead of 1,350 exact ones
    est, data, grid = _fit(ds, run, binning=201)
    assert est.n_bins_ == 201
    diff = _compare(est, data, grid, ds, run)
    assert diff["k"][0] == diff["k"][1]
    for key in ("sigma2", "eigenvalues", "eigenfunctions", "scores"):
        assert diff[key] < 5e-3, (key, diff[key])
    assert diff["fitted"] < 1e-3


def test_pace_defaults_beat_fdapace_on_b():
    data, grid = _dataset("B")
    truth = pd.read_csv(DATA / "B_truth.csv", header=None).to_numpy()
    fdapace_fitted = _load("B_default_fitted.csv").to_numpy()
    ours = PACEImputer(grid=grid, extrapolate=True, random_state=0).fit(data)
    mse_ours = np.mean((ours.transform(data) - truth) ** 2)
    mse_fdapace = np.mean((fdapace_fitted - truth) ** 2)
    assert mse_ours <= mse_fdapace


@pytest.mark.skipif(
    not (SHARED / "A_truth.csv").exists(),
    reason="needs ../shared/reference/fdapace (A_truth, A_default)",
)
def test_pace_defaults_beat_fdapace_on_a():
    data, grid = _dataset("A", SHARED)
    truth = pd.read_csv(SHARED / "A_truth.csv", header=None).to_numpy()
    ours = PACEImputer(grid=grid, random_state=0).fit(data)
    mse_ours = np.mean((ours.transform(data) - truth) ** 2)
    for run in ("default", "userbw"):
        fitted = _load(f"A_{run}_fitted.csv", SHARED).to_numpy()
        assert mse_ours <= np.mean((fitted - truth) ** 2)


@pytest.mark.skipif(
    not (SHARED / "A_default_info.json").exists(),
    reason="needs ../shared/reference/fdapace (A_default)",
)
def test_pace_parity_fdapace_defaults_a():
    est, data, grid = _fit("A", "default", SHARED)
    diff = _compare(est, data, grid, "A", "default", SHARED)
    assert diff["k"][0] == diff["k"][1]
    for key in ("sigma2", "eigenvalues", "mean", "eigenfunctions", "scores", "fitted"):
        assert diff[key] < 1e-8, (key, diff[key])


def test_pace_parity_fdapace_on_real_data_with_few_distinct_times():
    # carData's Blackmore: 82 distinct ages. fdapace puts its mean on the work
    # grid with R's spline() (Forsythe-Malcolm-Moler ends); scipy's
    # not-a-knot ends moved the fitted curves near the ages 8 and 18 by up
    # to 0.017 hours (reference written by blackmore.R beside the files)
    frame = pd.read_csv(DATA.parent / "Blackmore.csv", dtype={"subject": str})
    data = IrregularData.from_long(frame, "subject", "age", "exercise")
    info = json.loads((DATA / "Blackmore_default_info.json").read_text())
    mu = _load("Blackmore_default_mu.csv")
    fitted = _load("Blackmore_default_fitted.csv", DATA)
    est = PACEImputer.fdapace().fit(data)
    assert est.n_components_ == info["K"]
    np.testing.assert_allclose(
        [est.bandwidth_mean_, est.bandwidth_cov_, est.noise_variance_],
        [info["bwMu"], info["bwCov"], info["sigma2"]],
        rtol=1e-10,
    )
    np.testing.assert_allclose(est.work_grid_, mu["t"], rtol=1e-13)
    assert fitted["id"].astype(str).tolist() == list(data.ids)
    ours = est.transform(data, grid=est.work_grid_)
    theirs = fitted.iloc[:, 1:].to_numpy()
    assert np.abs(ours - theirs).max() < 1e-7 * np.abs(theirs).max()


@pytest.mark.parametrize("run", ["userbw", "default"])
def test_pace_parity_fdapace_scores_away_from_near_tied_times(run):
    # fdapace maps a subject's covariance from its observation grid to the
    # subject's times by bilinear interpolation that solves a 4 x 4 system on
    # the neighbouring grid points; where two of B's 1,350 distinct times are
    # 7e-7 apart that system is ill-conditioned and fdapace's scores of the
    # subjects seen there carry its rounding (up to 4e-5 of the largest
    # score). Every other subject's scores agree far more closely.
    est, data, _ = _fit("B", run)
    info, _, scores, _ = _reference("B", run)
    k = info["K"]
    ours = est.scores(data)[:, :k]
    ours *= np.sign(np.sum(ours * scores[:, :k], axis=0))
    frame = data.to_long()
    frame.columns = ["id", "t", "y"]
    distinct = np.unique(frame["t"])
    tied = np.flatnonzero(np.diff(distinct) < 1e-5)
    near = frame.loc[frame["t"].isin(distinct[np.r_[tied, tied + 1]]), "id"]
    away = ~np.isin(np.asarray(data.ids), near.unique())
    assert away.sum() > 250
    gap = np.abs(ours - scores[:, :k])[away].max() / np.abs(scores[:, :k]).max()
    assert gap < 1e-6
