"""Faults during a neural fit: Ctrl-C, non-finite losses, other exceptions.

The estimator must end either usable (best state so far, and saying so) or
unfitted, never half-fitted.
"""

import warnings

import _configs
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

torch = pytest.importorskip("torch")

import fdaimpute as fi  # noqa: E402
from fdaimpute.neural import SANDImputer, VTImputer  # noqa: E402
from fdaimpute.nn import Trainer  # noqa: E402

# Faults are injected into ``Trainer.train_step``, which steps replayed from
# a CUDA graph do not call: the steps run eagerly (on a GPU too).
TINY = dict(
    _configs.NARROW_SIZES,
    base=None,
    max_epochs=4,
    batch_size=16,
    random_state=0,
    cuda_graph=False,
)
ESTIMATORS = [
    pytest.param(VTImputer, TINY, id="VT"),
    pytest.param(SANDImputer, dict(TINY, **_configs.SAND_SIZES), id="SAND"),
]


@pytest.fixture(scope="module")
def sim():
    """Fewer subjects than conftest's ``sim``."""
    return fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0)


def _fitted_names(est):
    return sorted(k for k in vars(est) if k.endswith("_") and not k.startswith("_"))


def _assert_unfitted(est, sim):
    assert _fitted_names(est) == []
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    with pytest.raises(NotFittedError):
        est.transform(sim.test.data)


def _fail_in_epoch(monkeypatch, epoch, exc=KeyboardInterrupt):
    """Make every training step of ``epoch`` raise ``exc``."""
    step = Trainer.train_step

    def train_step(self, batch):
        if self.epoch == epoch:
            raise exc()
        return step(self, batch)

    monkeypatch.setattr(Trainer, "train_step", train_step)


def _record_states(monkeypatch):
    """Keep a copy of each network's weights at the end of every completed epoch.

    Keyed by the network's ``id`` (cross-fitting trains more than one), then
    by epoch.
    """
    states = {}

    def on_epoch_end(self, record):
        states.setdefault(id(self.module), {})[record["epoch"]] = {
            k: v.detach().clone() for k, v in self.module.state_dict().items()
        }
        return False

    monkeypatch.setattr(Trainer, "on_epoch_end", on_epoch_end)
    return states


def _nan_loss_in_epoch(monkeypatch, epoch):
    compute = Trainer.compute_loss

    def compute_loss(self, out, batch):
        loss, parts = compute(self, out, batch)
        if self.epoch == epoch:
            loss = loss * float("nan")
        return loss, parts

    monkeypatch.setattr(Trainer, "compute_loss", compute_loss)


@pytest.mark.parametrize("cls, params", ESTIMATORS)
def test_interrupt_keeps_the_best_epoch_so_far_and_says_so(
    monkeypatch, sim, cls, params
):
    states = _record_states(monkeypatch)
    _fail_in_epoch(monkeypatch, 2)
    est = cls(**params)
    with pytest.warns(UserWarning, match=r"interrupted.* epoch 2;.*\(epoch [01]\)"):
        assert est.fit(sim.train.data) is est
    assert est.interrupted_ and est.stop_reason_ == "interrupted"
    # the interrupted epoch is not recorded; the kept one is the best so far
    assert est.n_epochs_ == 2
    assert {len(v) for v in est.history_.values()} == {2}
    valid = est.history_["valid_loss"]
    assert est.best_epoch_ == int(np.argmin(valid))
    kept = est.module_.state_dict()
    for name, value in states[id(est.module_)][est.best_epoch_].items():
        torch.testing.assert_close(kept[name], value, rtol=0, atol=0)
    assert not est.module_.training
    assert np.isfinite(est.transform(sim.test.data)).all()
    assert est.mean_.shape == est.grid_.shape
    with pytest.raises(ValueError, match="interrupted"):
        est.transform(sim.test.data, return_std=True)


def test_interrupt_in_the_first_epoch_propagates_and_leaves_it_unfitted(
    monkeypatch, sim
):
    est = VTImputer(**TINY)
    _fail_in_epoch(monkeypatch, 0)
    with pytest.raises(KeyboardInterrupt):
        est.fit(sim.train.data)
    _assert_unfitted(est, sim)


def test_failed_refit_leaves_a_fitted_estimator_unfitted(monkeypatch, sim):
    est = VTImputer(**TINY).fit(sim.train.data)
    assert not est.interrupted_
    _fail_in_epoch(monkeypatch, 0, exc=RuntimeError)
    with pytest.raises(RuntimeError):
        est.fit(sim.train.data)
    _assert_unfitted(est, sim)


def test_failed_warm_start_leaves_it_unfitted(monkeypatch, sim):
    est = VTImputer(**TINY, warm_start=True).fit(sim.train.data)
    _fail_in_epoch(monkeypatch, TINY["max_epochs"], exc=RuntimeError)
    with pytest.raises(RuntimeError):
        est.fit(sim.train.data)
    _assert_unfitted(est, sim)


def test_exception_after_training_leaves_it_unfitted(monkeypatch, sim):
    def broken(*args, **kwargs):
        raise MemoryError("no room for the error model")

    monkeypatch.setattr("fdaimpute.nn.uncertainty.fit_error_head", broken)
    est = VTImputer(**TINY)
    with pytest.raises(MemoryError, match="error model"):
        est.fit(sim.train.data)
    _assert_unfitted(est, sim)


@pytest.mark.parametrize("cls, params", ESTIMATORS)
def test_non_finite_loss_restores_the_best_finite_epoch(monkeypatch, sim, cls, params):
    states = _record_states(monkeypatch)
    _nan_loss_in_epoch(monkeypatch, 2)
    est = cls(**params)
    with pytest.warns(UserWarning, match=r"non-finite in epoch 2;.*\(epoch [01]\)"):
        est.fit(sim.train.data)
    assert est.stop_reason_ == "non-finite loss" and not est.interrupted_
    assert est.best_epoch_ in (0, 1) and est.n_epochs_ == 3
    assert not np.isfinite(est.history_["train_loss"][2])
    kept = est.module_.state_dict()
    # SAND's layer may then be reset to the closed-form start that best
    # predicts the held-out points (sand_smoothing="auto"); the rest is kept
    reset = getattr(est, "sand_smoothing_", None) is not None
    for name, value in states[id(est.module_)][est.best_epoch_].items():
        if not (reset and name.startswith("sand.")):
            torch.testing.assert_close(kept[name], value, rtol=0, atol=0)
    curves, sd = est.transform(sim.test.data, return_std=True)
    assert np.isfinite(curves).all() and np.isfinite(sd).all()
    assert np.isfinite(est.mean_).all()


def test_non_finite_loss_in_the_first_epoch_raises_and_leaves_it_unfitted(
    monkeypatch, sim
):
    _nan_loss_in_epoch(monkeypatch, 0)
    est = VTImputer(**TINY)
    with pytest.raises(FloatingPointError, match="non-finite in epoch 0"):
        est.fit(sim.train.data)
    _assert_unfitted(est, sim)


def test_huge_learning_rate_raises_a_clear_error(sim):
    # without clipping, one Adam step at lr=1e6 blows the weights up in the
    # first epoch: no finite state to fall back on
    est = VTImputer(**{**TINY, "lr": 1e6, "lr_schedule": "constant", "clip_grad": None})
    with pytest.raises(
        FloatingPointError, match="epoch 0 .*lower lr, clip gradients \\("
    ):
        est.fit(sim.train.data)
    _assert_unfitted(est, sim)


def test_a_network_that_learnt_nothing_is_named_at_fit(monkeypatch, sim):
    validate = Trainer.validate
    # a finite held-out error far above the training mean's (about 1), as
    # after a learning rate that throws the weights far away
    monkeypatch.setattr(Trainer, "validate", lambda self, *a: 50 + validate(self, *a))
    with pytest.warns(UserWarning, match=r"held-out error is 5\d.*learnt nothing"):
        VTImputer(**TINY).fit(sim.train.data)
    monkeypatch.setattr(Trainer, "validate", validate)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        VTImputer(**TINY).fit(sim.train.data)
