"""PACE's fit does no work twice: a guard on the counts of its costly passes.

Counts, not times: each pass over the covariance moments and each batch of
held-out predictions is counted while fitting, so a change that repeats one
fails here whatever the machine's speed.
"""

import collections

import pytest

import fdaimpute as fi
from fdaimpute._pace import bandwidth, binning, chunked, cv, numerics


@pytest.fixture
def counted(monkeypatch):
    """Counters of covariance-moment passes and of held-out predictions."""
    counts = collections.Counter()
    scored = collections.Counter()
    moments = binning.covariance_moments
    predictions = cv.cumulative_predictions

    def counting_moments(*args, **kwargs):
        counts["covariance passes"] += 1
        return moments(*args, **kwargs)

    def counting_predictions(r_fit, b_fit, off_fit, b_new, off_new, lam, sigma2, **kw):
        # the same eigenvalues, noise variance and subjects: the same scores
        scored[(lam.tobytes(), float(sigma2), r_fit.shape)] += 1
        return predictions(r_fit, b_fit, off_fit, b_new, off_new, lam, sigma2, **kw)

    # every module that calls it (imported here, so none binds the counter late)
    for module in (binning, bandwidth, chunked, numerics):
        monkeypatch.setattr(module, "covariance_moments", counting_moments)
    monkeypatch.setattr(cv, "cumulative_predictions", counting_predictions)
    return counts, scored


@pytest.mark.parametrize("n", [300, 2500])
def test_each_pass_once_and_no_candidate_scored_twice(counted, n):
    counts, scored = counted
    sim = fi.simulate.sand_paper(n, n_obs="8-12", random_state=0, split=(1, 0, 0))
    pace = fi.PACEImputer(random_state=0).fit(sim.train.data)
    folds = pace.cv_results_["n_folds"]
    assert folds == (5 if n == 300 else 1)  # small data: every point hidden once
    # one pass over all the points, one over each fold's visible points
    assert counts["covariance passes"] == 1 + folds
    assert scored and max(scored.values()) == 1
    # a few dozen bandwidth and noise candidates per fold, not hundreds
    assert sum(scored.values()) <= 30 * folds


def test_each_candidate_surface_smoothed_once(monkeypatch):
    """One smoothing and eigen-analysis per candidate bandwidth, not one per use.

    The chosen bandwidth is used again by the noise search and the bands
    after the search has moved on; its surface is kept, not smoothed again.
    The band terms (a posterior solve per validation subject) run once.
    """
    smoothed = collections.Counter()
    calls = collections.Counter()
    smooth = numerics.DefaultNumerics.smooth
    band_terms = cv.band_terms

    seen = []  # kept alive, so that no two moments share an id()

    def counting_smooth(self, moments, bandwidth, smoother=None):
        seen.append(moments)
        smoothed[(id(moments), tuple(float(b) for b in bandwidth))] += 1
        return smooth(self, moments, bandwidth, smoother)

    def counting_band_terms(*args, **kwargs):
        calls["band terms"] += 1
        return band_terms(*args, **kwargs)

    monkeypatch.setattr(numerics.DefaultNumerics, "smooth", counting_smooth)
    monkeypatch.setattr(cv, "band_terms", counting_band_terms)
    sim = fi.simulate.sand_paper(2500, n_obs="3-5", random_state=1, split=(1, 0, 0))
    pace = fi.PACEImputer(random_state=0).fit(sim.train.data)
    assert pace.cv_results_["n_folds"] == 1
    # every candidate on the visible points, and the chosen one on all points
    assert len(smoothed) == len(pace.cv_results_["bandwidths"]) + 1
    assert max(smoothed.values()) == 1
    assert calls["band terms"] == 1


def test_timings_name_the_phases_and_add_up():
    sim = fi.simulate.sand_paper(400, n_obs="8-12", random_state=0, split=(1, 0, 0))
    pace = fi.PACEImputer(random_state=0).fit(sim.train.data)
    seconds = pace.timings_
    phases = {"bins", "mean", "covariance", "cross-validation", "noise", "bands"}
    phases |= {"plausibility"}
    assert phases <= set(seconds)
    assert all(value >= 0 for value in seconds.values())
    # each second counts for one phase only: never more than the whole fit
    assert sum(v for k, v in seconds.items() if k != "total") <= seconds["total"]
    fixed = fi.PACEImputer(bandwidth_cov=0.1, n_components=3).fit(sim.train.data)
    assert "cross-validation" not in fixed.timings_
    assert {"bins", "mean", "covariance"} <= set(fixed.timings_)
