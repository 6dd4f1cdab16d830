"""Noise-variance estimation and the neural imputers' pointwise uncertainty."""

import _configs
import numpy as np
import pytest
from numpy.testing import assert_allclose

import fdaimpute as fi
from fdaimpute.noise import noise_variance

torch = pytest.importorskip("torch")

from fdaimpute.neural import SANDImputer, VTImputer  # noqa: E402
from fdaimpute.nn.uncertainty import error_features  # noqa: E402

TINY = dict(_configs.TINY, max_epochs=10)


def _lines(n, n_obs, noise_sd, seed):
    """Random straight lines plus noise: the semivariogram is exactly quadratic."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        t = np.sort(rng.uniform(0, 1, n_obs))
        a, b = rng.normal(size=2)
        out.append((t, a + b * t + noise_sd * rng.normal(size=n_obs)))
    return out


@pytest.mark.parametrize("noise_sd", [0.3, 1.0])
def test_noise_variance_of_lines_plus_noise(noise_sd):
    est = noise_variance(_lines(400, 8, noise_sd, seed=1))
    assert est == pytest.approx(noise_sd**2, rel=0.1)


def test_noise_variance_is_zero_without_noise_and_scales_with_data():
    assert noise_variance(_lines(200, 8, 0.0, seed=2)) < 1e-3
    data = _lines(200, 8, 0.5, seed=3)
    scaled = [(t, 3.0 * y + 7.0) for t, y in data]
    assert_allclose(noise_variance(scaled), 9.0 * noise_variance(data), rtol=1e-9)


def test_noise_variance_on_a_smooth_process():
    sim = fi.simulate.sand_paper(n=1000, n_obs=30, n_harmonics=5, random_state=0)
    true = sim.process.noise_sd**2
    assert noise_variance(sim.train.data) == pytest.approx(true, rel=0.15)


def test_noise_variance_bad_input():
    with pytest.raises(ValueError, match="pairs"):
        noise_variance(_lines(5, 3, 0.1, seed=0))
    with pytest.raises(ValueError, match="share"):
        noise_variance(_lines(100, 5, 0.1, seed=0), share=0)
    with pytest.raises(TypeError, match="IrregularData"):
        noise_variance(np.ones((3, 4)))


def test_error_features_densities_count_and_gap():
    grid = torch.linspace(0, 1, 5)
    out = {"curve": torch.zeros(1, 5)}
    times = torch.tensor([[0.25, 0.5, 0.9]])
    visible = torch.tensor([[True, True, False]])
    feats = error_features(out, grid, times, visible)
    assert feats.shape == (1, 5, 5)
    assert_allclose(feats[0, :, 0], 0.0)  # no SAND: no disagreement
    # at 0.25: a visible point on top, the other 0.25 away (h = 0.03, 0.15)
    near = np.log1p(1 + np.exp(-0.5 * (0.25 / 0.03) ** 2))
    wide = np.log1p(1 + np.exp(-0.5 * (0.25 / 0.15) ** 2))
    assert_allclose(feats[0, 1, 1:3], [near, wide], rtol=1e-5)
    assert_allclose(feats[0, :, 3], np.log(2.0), rtol=1e-6)
    # distance to the nearest visible point, in grid steps: 0 on top of one
    assert_allclose(feats[0, 1, 4], 0.0, atol=1e-6)
    # the hidden point at 0.9 does not count: at 1.0 the nearest is 0.5 away
    assert_allclose(
        feats[0, 4, 1], np.log1p(np.exp(-0.5 * (0.5 / 0.03) ** 2)), atol=1e-6
    )
    assert_allclose(feats[0, 4, 4], np.log1p(0.5 * 4), rtol=1e-6)


def test_error_features_sand_disagreement_interpolates():
    grid = torch.linspace(0, 1, 3)
    out = {"curve": torch.zeros(1, 3), "sand": torch.tensor([[0.0, 1.0, 3.0]])}
    times, visible = torch.tensor([[0.5]]), torch.tensor([[True]])
    feats = error_features(out, grid, times, visible, query=torch.tensor([[0.75]]))
    assert_allclose(feats[0, 0, 0], 2.0, rtol=1e-6)


@pytest.fixture(scope="module")
def sim():
    return fi.simulate.sand_paper(n=300, n_obs="8-12", random_state=3)


@pytest.fixture(scope="module")
def fitted(sim):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {
            "VT": VTImputer(**TINY).fit(sim.train.data),
            "SAND": SANDImputer(**TINY, sand_head_dim=8, sand_encoding_dim=16).fit(
                sim.train.data
            ),
        }
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("name", ["VT", "SAND"])
def test_return_std_shapes_and_agreement_with_transform(fitted, sim, name):
    est = fitted[name]
    curves, std = est.transform(sim.test.data, return_std=True)
    assert std.shape == curves.shape == (len(sim.test.data), est.grid_.size)
    assert np.isfinite(std).all() and (std > 0).all()
    assert_allclose(curves, est.transform(sim.test.data), rtol=1e-6, atol=1e-6)
    assert est.noise_variance_ > 0


@pytest.mark.parametrize("name", ["VT", "SAND"])
def test_std_grows_when_observations_are_removed(fitted, sim, name):
    est = fitted[name]
    _, full = est.transform(sim.test.data, return_std=True)
    thin = [(t[::4], y[::4]) for t, y in sim.test.data]
    _, sparse = est.transform(thin, return_std=True)
    assert np.mean(sparse.mean(axis=1) > full.mean(axis=1)) >= 0.9


def test_std_is_roughly_calibrated(fitted, sim):
    # coverage of the true curve by curve +- 1.96 sd: loose bounds for a
    # model trained for 10 epochs on 270 subjects (see bench_uncertainty)
    curves, std = fitted["VT"].transform(sim.test.data, return_std=True)
    covered = np.mean(np.abs(curves - sim.test.truth) <= 1.96 * std)
    assert 0.75 <= covered <= 0.995


def test_std_is_calibrated_on_fresh_subjects(fitted):
    # coverage of the true curve by curve +- 1.96 sd on 500 subjects never
    # seen in fitting (the head is calibrated on 27 held-out subjects of a
    # model trained for 10 epochs; bench_uncertainty --holdout at full size)
    fresh = fi.simulate.sand_paper(
        n=500, n_obs="8-12", random_state=4, split=(0, 0, 1)
    ).test
    for est in fitted.values():
        curves, std = est.transform(fresh.data, return_std=True)
        covered = np.mean(np.abs(curves - fresh.truth) <= 1.96 * std)
        assert 0.85 <= covered <= 0.99


def _first_points(ragged):
    """(time, value) of each subject's first observation: identifies it."""
    first = ragged.offsets[:-1]
    return set(zip(ragged.times[first].tolist(), ragged.values[first].tolist()))


def test_error_model_is_fitted_on_the_held_out_subjects_only(sim, monkeypatch):
    from fdaimpute.nn import Trainer, uncertainty

    seen = {}
    trainer_fit, head_fit = Trainer.fit, uncertainty.fit_error_head

    def spy_trainer(self, train, valid=None, *args):
        seen["train"], seen["selection"] = _first_points(train), _first_points(valid)
        return trainer_fit(self, train, valid, *args)

    def spy_head(module, data, *args, **kwargs):
        seen["calibration"] = _first_points(data)
        return head_fit(module, data, *args, **kwargs)

    monkeypatch.setattr(Trainer, "fit", spy_trainer)
    monkeypatch.setattr(uncertainty, "fit_error_head", spy_head)
    est = VTImputer(**{**TINY, "max_epochs": 1})
    est.fit(sim.train.data)
    assert est.error_head_ is not None
    train, selection, calib = seen["train"], seen["selection"], seen["calibration"]
    # never on a training subject; on the held-out ones that also chose the
    # epoch (a disjoint half was measured to calibrate worse on fresh
    # subjects, see bench_uncertainty --holdout)
    assert len(calib) == round(0.1 * len(sim.train.data))
    assert calib == selection and not train & calib
    assert len(train | calib) == len(sim.train.data)
    assert [len(est.split_[k]) for k in ("train", "selection", "calibration")] == [
        len(train),
        len(selection),
        len(calib),
    ]


def test_cross_fitted_error_model_sees_every_subject_out_of_fold(sim, monkeypatch):
    from fdaimpute.nn import Trainer, uncertainty

    trained, seen = [], {}
    trainer_fit, head_fit = Trainer.fit, uncertainty.fit_error_head

    def spy_trainer(self, train, *args):
        out = trainer_fit(self, train, *args)
        trained.append((self.module, _first_points(train), len(self.history["epoch"])))
        return out

    def spy_head(modules, folds, *args, **kwargs):
        seen["modules"], seen["folds"] = modules, [_first_points(f) for f in folds]
        return head_fit(modules, folds, *args, **kwargs)

    monkeypatch.setattr(Trainer, "fit", spy_trainer)
    monkeypatch.setattr(uncertainty, "fit_error_head", spy_head)
    est = VTImputer(**{**TINY, "max_epochs": 3, "calibration_folds": 3})
    data = sim.train.data[:90]
    est.fit(data)
    assert est.error_head_ is not None
    folds = seen["folds"]
    assert len(folds) == 3 and len(set().union(*folds)) == len(data)
    assert sum(map(len, folds)) == len(data)
    by_module = {id(m): (subjects, epochs) for m, subjects, epochs in trained[1:]}
    for module, fold in zip(seen["modules"], folds):
        subjects, epochs = by_module[id(module)]
        # trained on the other folds, as many epochs as the imputer kept
        assert not subjects & fold and len(subjects | fold) == len(data)
        assert epochs == est.best_epoch_ + 1
    assert seen["modules"][0] is not est.module_


def test_cross_fitting_leaves_the_curves_and_is_off_at_large_n(sim):
    from fdaimpute._neural.crossfit import n_folds

    data = sim.train.data[:60]
    plain = VTImputer(**TINY).fit(data)
    crossed = VTImputer(**{**TINY, "calibration_folds": 2}).fit(data)
    test = sim.test.data
    assert_allclose(crossed.transform(test), plain.transform(test), rtol=1e-6)
    sd_plain = plain.transform(test, return_std=True)[1]
    assert not np.allclose(crossed.transform(test, return_std=True)[1], sd_plain)
    assert [n_folds("auto", n, False) for n in (10, 499, 500, 5000)] == [5, 5, 0, 0]
    assert n_folds(3, 2, False) == 2 and n_folds(3, 100, True) == 0
    assert n_folds(None, 100, False) == 0
    with pytest.raises(ValueError, match="calibration_folds"):
        VTImputer(**{**TINY, "calibration_folds": 1}).fit(data)


def test_cross_fitting_covers_a_heavy_tailed_process_with_few_subjects():
    # Student t scores, 3-5 points each, 80 subjects: 8 held-out subjects
    # left the bands at 70% coverage of the true curves of fresh subjects
    sim = fi.simulate.sand_paper(
        n=80, n_obs="3-5", scores="t5", random_state=0, split=(1, 0, 0)
    )
    fresh = fi.simulate.sand_paper(
        n=400, n_obs="3-5", scores="t5", random_state=99, split=(0, 0, 1)
    ).test
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        covered = {}
        for folds in (None, "auto"):
            est = VTImputer(**{**TINY, "calibration_folds": folds}).fit(sim.train.data)
            curves, std = est.transform(fresh.data, return_std=True)
            covered[folds] = np.mean(np.abs(curves - fresh.truth) <= 1.96 * std)
    finally:
        torch.set_num_threads(before)
    assert covered["auto"] >= 0.9 and covered[None] < 0.8


def test_std_survives_pickling(fitted, sim, tmp_path):
    est = fitted["SAND"]
    _, std = est.transform(sim.test.data, return_std=True)
    path = tmp_path / "sand.pkl"
    est.save(path)
    _, again = SANDImputer.load(path).transform(sim.test.data, return_std=True)
    assert_allclose(again, std, rtol=1e-6)


def test_std_on_a_grid_the_network_does_not_output(sim):
    lo, hi = sim.train.data.time_range
    grid = np.linspace(lo + 0.2 * (hi - lo), hi, 37)
    est = VTImputer(**{**TINY, "max_epochs": 2, "grid": grid}).fit(sim.train.data)
    assert est.model_grid_.size != grid.size
    curves, std = est.transform(sim.test.data[:5], return_std=True)
    assert curves.shape == std.shape == (5, 37)
    assert np.isfinite(std).all() and (std > 0).all()


def test_return_std_needs_a_validation_split(sim):
    est = VTImputer(**{**TINY, "max_epochs": 1, "validation_fraction": 0.0})
    est.fit(sim.train.data)
    with pytest.raises(ValueError, match="validation_fraction"):
        est.transform(sim.test.data, return_std=True)
    assert np.isfinite(est.transform(sim.test.data)).all()
