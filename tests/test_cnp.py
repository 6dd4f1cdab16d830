"""CNPImputer: the conditional neural process (Garnelo et al., ICML 2018).

The estimator contract shared by every imputer (sklearn checks, property
tests, persistence, parameter declarations) is tested with the others; here
are the CNP's own behaviours, its torch core and its faults.
"""

import _configs
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

torch = pytest.importorskip("torch")

import fdaimpute as fi  # noqa: E402
from fdaimpute._sim.sampling import sample  # noqa: E402
from fdaimpute.nn import RaggedTensors  # noqa: E402
from fdaimpute.nn.cnp import (  # noqa: E402
    MIN_SD,
    CNPModule,
    CNPTrainer,
    gaussian_nll,
    predict_cnp,
    sample_context,
)
from fdaimpute.simulate import BasisProcess  # noqa: E402

TINY = dict(_configs.CNP_TINY, device="cpu")


@pytest.fixture(scope="module")
def fitted(sim):
    return fi.CNPImputer(**TINY).fit(sim.train.data)


@pytest.fixture(scope="module")
def linear():
    """Curves ``a + b t`` with random a, b ~ N(0, 1) and noise SD 0.01."""
    process = BasisProcess(
        mean=np.zeros_like,
        basis=lambda t: np.stack([np.ones_like(t), t], axis=-1),
        score_var=[1.0, 1.0],
        scores="gauss",
        noise_sd=0.01,
    )
    return sample(process, 300, "4-6", split=(0.8, 0.0, 0.2), random_state=0)


@pytest.fixture(scope="module")
def linear_fit(linear):
    est = fi.CNPImputer(
        hidden_dim=32,
        n_layers=2,
        r_dim=32,
        max_epochs=20,
        lr=3e-3,
        device="cpu",
        random_state=0,
    )
    return est.fit(linear.train.data)


# ---------------------------------------------------------------------- #
# output
def test_one_row_per_subject_in_input_order(fitted, sim):
    data = sim.train.data
    out = fitted.transform(data)
    assert out.shape == (len(data), fitted.grid_.size)
    assert out.dtype == np.float64 and np.isfinite(out).all()
    perm = np.random.default_rng(0).permutation(len(data))
    assert_allclose(fitted.transform(data.take(perm)), out[perm], rtol=1e-5, atol=1e-6)
    for i in (0, len(data) - 1):
        assert_allclose(fitted.transform(data[[i]])[0], out[i], rtol=1e-5, atol=1e-6)
    fitted.set_output(transform="pandas")
    try:
        frame = fitted.transform(data)
    finally:
        fitted.set_output(transform="default")
    assert frame.index.tolist() == data.ids.tolist()


def test_decoder_is_read_at_any_time_without_interpolation(fitted, sim):
    data = sim.test.data
    times = np.array([0.0123, 0.5, 0.987])
    on_grid = fitted.transform(data, grid=times)
    assert_allclose(fitted.predict_at(data, times), on_grid, rtol=1e-6, atol=1e-6)
    # at each subject's own times: its curve there, not an interpolation
    own = fitted.predict_at(data).values
    for i, (t, _) in enumerate(data):
        got = own[data.offsets[i] : data.offsets[i + 1]]
        expected = fitted.transform(data[[i]], grid=t)[0]
        assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_derivative_is_the_exact_derivative_of_the_curve(fitted, sim):
    grid = np.linspace(0, 1, 2001)
    curves = fitted.transform(sim.test.data, grid=grid)
    deriv = fitted.derivative(sim.test.data, grid=grid)
    central = np.gradient(curves, grid, axis=1)[:, 1:-1]
    scale = np.abs(deriv).max()
    assert scale > 0
    assert_allclose(deriv[:, 1:-1], central, atol=1e-3 * scale)


def test_return_std_is_positive_with_the_curves_shape(fitted, sim):
    data = sim.test.data
    curves, sd = fitted.transform(data, return_std=True)
    assert curves.shape == sd.shape == (len(data), fitted.grid_.size)
    assert_array_equal(curves, fitted.transform(data))
    assert np.isfinite(sd).all() and (sd > 0).all()
    _, sd5 = fitted.transform(data, return_std=True, grid=5)
    assert sd5.shape == (len(data), 5) and (sd5 > 0).all()


def test_std_is_the_decoder_sd_less_the_noise(fitted, sim):
    data = sim.test.data
    _, sd = fitted.transform(data, return_std=True)
    res = predict_cnp(
        fitted.module_,
        fitted._tensors(data, fitted.device_),
        fitted._grid_tensor(fitted.grid_, fitted.device_),
        variance=True,
    )
    s2 = fitted.value_scale_**2
    expected = np.maximum(res["variance"].numpy() * s2 - fitted.noise_variance_, 0)
    expected = np.sqrt(np.maximum(expected, MIN_SD**2 * s2))
    assert_allclose(sd, expected, rtol=1e-10)
    assert fitted.noise_variance_ > 0


def test_feature_extractor_reads_the_representation(sim):
    features = fi.FeatureExtractor(fi.CNPImputer(**TINY), kind="encoder")
    out = features.fit_transform(sim.train.data)
    assert out.shape == (len(sim.train.data), TINY["r_dim"])
    assert features.get_feature_names_out()[-1] == f"encoder_{TINY['r_dim']}"


def test_encode_gives_the_representation(fitted, sim):
    features = fitted.encode(sim.test.data)
    assert features.shape == (len(sim.test.data), TINY["r_dim"])
    tensors = fitted._tensors(sim.test.data, fitted.device_)
    batch = tensors.batch(torch.arange(len(tensors)))
    with torch.no_grad():
        r = fitted.module_.represent(batch.times, batch.values, batch.valid)
    assert_allclose(features, r.numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- #
# training
def test_same_seed_gives_identical_curves_on_cpu(fitted, sim):
    again = fi.CNPImputer(**TINY).fit(sim.train.data)
    assert_array_equal(again.transform(sim.test.data), fitted.transform(sim.test.data))
    assert again.history_["train_loss"] == fitted.history_["train_loss"]
    other = fi.CNPImputer(**dict(TINY, random_state=1)).fit(sim.train.data)
    assert not np.array_equal(
        other.transform(sim.test.data), fitted.transform(sim.test.data)
    )


def test_fit_records_the_shared_machinery(fitted, sim):
    assert fitted.n_epochs_ == TINY["max_epochs"] == len(fitted.history_["epoch"])
    assert fitted.stop_reason_ == "max_epochs" and not fitted.interrupted_
    valid = fitted.history_["valid_loss"]
    assert fitted.best_epoch_ == int(np.argmin(valid))
    assert len(fitted.split_["selection"]) == round(0.1 * len(sim.train.data))
    assert fitted.config_["r_dim"] == TINY["r_dim"]
    assert fitted.device_.type == "cpu" and not fitted.module_.training
    assert fitted.n_parameters_ == sum(p.numel() for p in fitted.module_.parameters())


def test_training_loss_decreases_on_a_simple_process(linear_fit):
    loss = linear_fit.history_["train_loss"]
    assert np.mean(loss[-3:]) < loss[0] - 0.5


def test_beats_the_mean_curve_on_linear_curves(linear_fit, linear):
    curves = linear_fit.transform(linear.test.data)
    mean = np.broadcast_to(linear_fit.mean_, curves.shape)
    cnp_error = fi.metrics.mse(linear.test.truth, curves)
    mean_error = fi.metrics.mse(linear.test.truth, mean)
    assert cnp_error < 0.2 * mean_error


def test_early_stopping_on_the_held_out_subjects(sim):
    est = fi.CNPImputer(**dict(TINY, max_epochs=30, patience=2))
    est.fit(sim.train.data)
    assert est.stop_reason_ == "early stopping"
    assert est.n_epochs_ == est.best_epoch_ + 3 < 30
    assert est.best_epoch_ == int(np.argmin(est.history_["valid_loss"]))


# ---------------------------------------------------------------------- #
# persistence and clone
def test_save_load_round_trip_gives_identical_outputs(fitted, sim, tmp_path):
    path = tmp_path / "cnp.fdaimpute"
    fitted.save(path)
    loaded = fi.CNPImputer.load(path)
    data = sim.test.data
    assert loaded.get_params() == fitted.get_params()
    assert_array_equal(loaded.transform(data), fitted.transform(data))
    assert_array_equal(
        loaded.transform(data, return_std=True)[1],
        fitted.transform(data, return_std=True)[1],
    )
    assert_array_equal(loaded.derivative(data), fitted.derivative(data))
    assert_array_equal(loaded.predict_at(data).values, fitted.predict_at(data).values)


def test_clone_is_unfitted_with_the_same_parameters(fitted, sim):
    copy = clone(fitted)
    assert copy.get_params() == fitted.get_params()
    with pytest.raises(NotFittedError):
        check_is_fitted(copy)
    copy.fit(sim.train.data)
    assert_array_equal(copy.transform(sim.test.data), fitted.transform(sim.test.data))


# ---------------------------------------------------------------------- #
# parameters and faults
@pytest.mark.parametrize(
    "param, value, error",
    [
        ("hidden_dim", 0, ValueError),
        ("hidden_dim", 8.0, TypeError),
        ("n_layers", 0, ValueError),
        ("r_dim", "8", TypeError),
        ("max_epochs", 0, ValueError),
        ("batch_size", None, TypeError),
        ("lr", 0.0, ValueError),
        ("patience", 0, ValueError),
        ("validation_fraction", 1.0, ValueError),
        ("device", 3, TypeError),
        ("random_state", -1, ValueError),
    ],
)
def test_bad_parameters_are_refused_naming_them(sim, param, value, error):
    est = fi.CNPImputer(**{**TINY, param: value})
    with pytest.raises(error, match=f"'{param}' parameter of CNPImputer"):
        est.fit(sim.train.data)
    assert not hasattr(est, "module_")


def test_unknown_device_is_refused(sim):
    with pytest.raises(ValueError, match="invalid device 'tpu'"):
        fi.CNPImputer(**{**TINY, "device": "tpu"}).fit(sim.train.data)


def test_huge_learning_rate_raises_a_clear_error_and_leaves_it_unfitted(sim):
    est = fi.CNPImputer(**{**TINY, "lr": 1e6})
    with pytest.raises(FloatingPointError, match="epoch 0 .*lower lr"):
        est.fit(sim.train.data)
    with pytest.raises(NotFittedError):
        est.transform(sim.test.data)


def test_non_finite_loss_restores_the_best_finite_epoch(monkeypatch, sim):
    compute = CNPTrainer.compute_loss

    def compute_loss(self, out, batch):
        loss, parts = compute(self, out, batch)
        return (loss * float("nan") if self.epoch == 2 else loss), parts

    monkeypatch.setattr(CNPTrainer, "compute_loss", compute_loss)
    est = fi.CNPImputer(**dict(TINY, max_epochs=5))
    with pytest.warns(UserWarning, match=r"non-finite in epoch 2;.*\(epoch [01]\)"):
        est.fit(sim.train.data)
    assert est.stop_reason_ == "non-finite loss" and est.best_epoch_ in (0, 1)
    curves, sd = est.transform(sim.test.data, return_std=True)
    assert np.isfinite(curves).all() and np.isfinite(sd).all()
    assert np.isfinite(est.derivative(sim.test.data)).all()


# ---------------------------------------------------------------------- #
# the torch core
def test_context_is_a_random_subset_of_every_size():
    valid = torch.arange(8).unsqueeze(0).repeat(400, 1) < torch.tensor([[5]] * 400)
    context = sample_context(valid, torch.Generator().manual_seed(0))
    sizes = context.sum(1)
    assert not (context & ~valid).any()
    assert set(sizes.tolist()) == {1, 2, 3, 4, 5}
    # every point is sometimes in the context and sometimes not
    share = context[:, :5].float().mean(0)
    assert bool(((share > 0.4) & (share < 0.8)).all())


def test_gaussian_nll_matches_torch_on_the_mask():
    g = torch.Generator().manual_seed(0)
    mean, target = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)
    var = torch.rand(3, 4, generator=g) + 0.1
    mask = torch.rand(3, 4, generator=g) > 0.3
    expected = torch.nn.functional.gaussian_nll_loss(
        mean[mask], target[mask], var[mask], full=True
    )
    torch.testing.assert_close(gaussian_nll(mean, var, target, mask), expected)


def test_padding_and_order_do_not_change_the_representation():
    torch.manual_seed(0)
    net = CNPModule(hidden_dim=8, n_layers=2, r_dim=4, encoding_dim=4).eval()
    data = RaggedTensors([0.1, 0.5, 0.9, 0.3], [1.0, -1.0, 0.5, 2.0], [0, 3, 4])
    grid = torch.linspace(0, 1, 7)
    out = predict_cnp(net, data, grid, variance=True)
    alone = predict_cnp(net, RaggedTensors([0.3], [2.0], [0, 1]), grid)
    torch.testing.assert_close(out["mean"][1], alone["mean"][0])
    shuffled = RaggedTensors([0.9, 0.1, 0.5], [0.5, 1.0, -1.0], [0, 3])
    torch.testing.assert_close(
        predict_cnp(net, shuffled, grid)["mean"][0], out["mean"][0]
    )
    assert bool((out["variance"] >= MIN_SD**2).all())


def test_per_subject_targets_match_shared_ones():
    torch.manual_seed(0)
    net = CNPModule(hidden_dim=8, n_layers=1, r_dim=4, encoding_dim=0).eval()
    data = RaggedTensors([0.1, 0.5, 0.9, 0.3], [1.0, -1.0, 0.5, 2.0], [0, 3, 4])
    targets = RaggedTensors([0.2, 0.7, 0.4], [0.0] * 3, [0, 2, 3])
    flat = predict_cnp(net, data, targets, derivative=True)
    shared = predict_cnp(net, data, torch.tensor([0.2, 0.7, 0.4]), derivative=True)
    for key in ("mean", "derivative"):
        torch.testing.assert_close(flat[key][:2], shared[key][0, :2])
        torch.testing.assert_close(flat[key][2], shared[key][1, 2])


def test_command_line_method(tmp_path):
    from fdaimpute.cli import main

    data = fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0).train.data
    path, out = tmp_path / "obs.csv", tmp_path / "curves.csv"
    data.to_long().to_csv(path, index=False)
    args = ["impute", str(path), "-o", str(out), "--grid", "0:1:11"]
    assert main([*args, "--method", "cnp", "--param", "max_epochs=2"]) == 0
    curves = np.loadtxt(out, delimiter=",", skiprows=1)[:, 1:]
    grid = np.linspace(0, 1, 11)
    expected = fi.CNPImputer(grid=grid, max_epochs=2, random_state=0)
    assert_allclose(curves, expected.fit_transform(data), rtol=1e-6, atol=1e-9)
