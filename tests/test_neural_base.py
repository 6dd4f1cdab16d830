"""The neural imputers' statistical base (``base=``): start, leakage, persistence."""

import pickle

import _configs
import numpy as np
import pytest
import torch
from sklearn.base import clone

import fdaimpute as fi
from fdaimpute.neural import SANDImputer, VTImputer
from fdaimpute.nn.validation import paired_gain, signed_rank_p

torch_classes = pytest.mark.parametrize(
    "cls, params",
    [(VTImputer, _configs.TINY), (SANDImputer, _configs.SAND_TINY)],
    ids=["vt", "sand"],
)


@pytest.fixture(scope="module")
def data():
    return fi.simulate.sand_paper(n=80, n_obs="5-8", random_state=3).train.data


@torch_classes
def test_untrained_network_is_the_base(cls, params, data):
    # a learning rate too small to move any weight: no epoch can beat the
    # start by a standard error, so the start (the base) is kept; the base is
    # left at its default, "auto": PACE where PACE can be fitted
    params = {key: value for key, value in params.items() if key != "base"}
    model = cls(**dict(params, lr=1e-12, max_epochs=1)).fit(data)
    assert model.base == "auto"
    assert isinstance(model.base_, fi.PACEImputer)
    assert model.best_epoch_ == -1
    # the imputer is its base, refitted on every subject with the same seed
    assert model.base_.n_subjects_fit_ == len(data)
    pace = fi.PACEImputer(grid=model.grid_, random_state=params["random_state"])
    expected = pace.fit(data).transform(data)
    np.testing.assert_allclose(model.transform(data), expected, atol=1e-5)
    # the error model was calibrated before the refit and still answers;
    # the bands and the noise are the base's, as the curves are
    assert model.error_head_ is not None
    _, sd = model.transform(data, return_std=True)
    np.testing.assert_allclose(sd, pace.transform(data, return_std=True)[1])
    assert model.noise_variance_ == pace.noise_variance_
    times = np.linspace(*model.time_range_, 7)
    np.testing.assert_allclose(
        model.noise_variance_at(times), pace.noise_variance_at(times)
    )
    if cls is SANDImputer:
        np.testing.assert_allclose(
            model.derivative(data),
            model.base_.derivative(data, grid=model.grid_),
            atol=1e-3,
        )


def _keep_every_epoch(monkeypatch):
    """Every epoch replaces the start and no comparison sends it back."""
    from fdaimpute.nn import training

    keep = training.Trainer._keep_if_best

    def always(self, score, epoch):
        return keep(self, score - 1e6 if epoch >= self.start_epoch else score, epoch)

    monkeypatch.setattr(training.Trainer, "_keep_if_best", always)
    monkeypatch.setattr(training.Trainer, "_check_gain", lambda self, v, h: None)


@torch_classes
def test_a_kept_network_mixes_with_the_base_refitted_on_every_subject(
    cls, params, data, monkeypatch
):
    # the gate opened (every epoch replaces the start, no comparison): the
    # network is kept, and the base its curve is mixed with is refitted on
    # every subject, as PACEImputer(random_state=...) on the same data; the
    # curves are b + g (f - b) with that base
    _keep_every_epoch(monkeypatch)
    model = cls(**dict(params, base="pace", max_epochs=2)).fit(data)
    assert model.best_epoch_ >= 0 and model.base_weight_ != 0
    assert model.base_.n_subjects_fit_ == len(data)
    pace = fi.PACEImputer(grid=model.grid_, random_state=params["random_state"])
    base = pace.fit(data).transform(data)
    np.testing.assert_allclose(model.base_.transform(data, grid=model.grid_), base)
    module = model.module_
    gate = module.base_gate.detach().clone()
    with torch.no_grad():
        module.base_gate.zero_()
        module.base_gate.add_(1.0)
    network = model.transform(data)
    with torch.no_grad():
        module.base_gate.copy_(gate)
    g = float(gate)
    np.testing.assert_allclose(
        model.transform(data), base + g * (network - base), rtol=1e-4, atol=1e-4
    )


@torch_classes
def test_cross_fitted_networks_mix_with_the_imputers_weight(
    cls, params, data, monkeypatch
):
    # with base_weight="held-out", the folds' networks have no held-out
    # subjects of their own: their weight is the one the imputer chose
    from fdaimpute._neural.base import _NeuralImputer
    from fdaimpute.nn import training

    def chosen(self, valid, hidden):
        for name, param in self.module.named_parameters():
            if name.endswith("base_gate"):
                param.data.fill_(0.3 if valid is not None else 1.0)

    folds = []
    fold_network = _NeuralImputer._fold_network

    def record(self, *args):
        folds.append(fold_network(self, *args))
        return folds[-1]

    _keep_every_epoch(monkeypatch)
    monkeypatch.setattr(training.Trainer, "_choose_base_weight", chosen)
    monkeypatch.setattr(_NeuralImputer, "_fold_network", record)
    monkeypatch.setattr(_NeuralImputer, "_base_weight", "held-out")
    params = dict(params, base="pace", max_epochs=2, calibration_folds=2)
    model = cls(**params).fit(data)
    assert model.base_weight_ == pytest.approx(0.3)
    assert len(folds) == 2
    for module in folds:
        gates = [p for n, p in module.named_parameters() if n.endswith("base_gate")]
        assert gates and all(float(g) == pytest.approx(0.3) for g in gates)


@pytest.mark.parametrize(
    "cls, params",
    [
        (VTImputer, _configs.TINY),
        (SANDImputer, _configs.SAND_TINY),
        (SANDImputer, dict(_configs.SAND_TINY, sand_init="random")),
    ],
    ids=["vt", "sand", "sand-random"],
)
def test_fresh_network_outputs_the_base_through_zero_gates(cls, params, data):
    model = cls(**dict(params, max_epochs=1, base="kernel")).fit(data)
    grid = model._grid_tensor(model.model_grid_, "cpu")
    fresh = model._new_module(grid, "cpu")
    gates = {n: p for n, p in fresh.named_parameters() if n.endswith("base_gate")}
    assert len(gates) == (2 if cls is SANDImputer else 1)
    assert all(g.item() == 0 for g in gates.values())
    model._attach_base(fresh)
    batch = model._tensors(data, "cpu").batch(torch.arange(10))
    with torch.no_grad():
        out = fresh(batch.times, batch.values, batch.valid, grid)
        curve, slope = fresh.base_curves(batch.times, batch.values, batch.valid, grid)
    # the output is the base, exactly; the network itself starts as without
    # a base (its own curve is not the base's)
    torch.testing.assert_close(out.output, curve, rtol=0, atol=0)
    assert not torch.allclose(out.network.output, curve, atol=1e-3)
    if cls is SANDImputer:
        torch.testing.assert_close(out.derivative, slope, rtol=0, atol=0)
    # the network's own curve is trained too: the gates are not its only signal
    loss = model._trainer_class()(fresh, grid).compute_loss(out, batch)[1]
    assert {"network vt"} <= set(loss)


def test_module_without_a_gate_refuses_a_base(data):
    from fdaimpute.nn import VTModule

    vt = VTModule(d_model=16, n_heads=2, dim_feedforward=32, encoding_dim=8)
    t = torch.rand(2, 4)
    base = (torch.zeros(2, 11), None)
    with pytest.raises(ValueError, match="base_gate"):
        vt(
            t,
            torch.randn(2, 4),
            torch.ones(2, 4, dtype=torch.bool),
            torch.linspace(0, 1, 11),
            base=base,
        )


class RecordingPACE(fi.PACEImputer):
    """A PACE imputer that logs the ids of every fit (clones share the log)."""

    fits = []

    def _fit(self, data):
        RecordingPACE.fits.append(np.asarray(data.ids))
        return super()._fit(data)


@torch_classes
def test_base_never_sees_validation_subjects(cls, params, data):
    RecordingPACE.fits.clear()
    # a 31-point work grid, not the default 101: which subjects the base sees
    # does not depend on it, and the base's fits are quicker
    base = RecordingPACE(n_work_grid=31)
    model = cls(**dict(params, base=base, validation_fraction=0.25)).fit(data)
    # the base's first fit is the one the network trains on
    fitted = set(RecordingPACE.fits[0].tolist())
    ids = np.asarray(data.ids)
    assert fitted == set(ids[model.split_["train"]].tolist())
    held_out = set(ids[model.split_["calibration"]].tolist())
    assert not fitted & held_out
    # half the held-out subjects choose the epoch, the other half judge it
    selection, comparison = (
        set(ids[model.split_[k]].tolist()) for k in ("selection", "comparison")
    )
    assert selection | comparison == held_out and not selection & comparison
    assert abs(len(selection) - len(comparison)) <= 1


@torch_classes
def test_pickle_and_clone_keep_the_base(cls, params, data):
    model = cls(**dict(params, base="pace")).fit(data)
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(loaded.transform(data), model.transform(data))
    assert loaded.module_.base_curves is not None
    copy = clone(model)
    assert copy.base == "pace" and not hasattr(copy, "base_")


def test_estimator_base_is_cloned_not_fitted_in_place(data):
    base = fi.KernelImputer()
    VTImputer(**dict(_configs.TINY, base=base)).fit(data)
    assert not hasattr(base, "grid_")


@pytest.mark.parametrize(
    "value, error", [("spline", ValueError), (3, TypeError), (object(), TypeError)]
)
def test_bad_base_is_refused(value, error, data):
    with pytest.raises(error, match="base"):
        VTImputer(**dict(_configs.TINY, base=value)).fit(data)


def test_base_that_cannot_be_fitted():
    # two observations per subject, always far apart: no pair of times near
    # each other for PACE's covariance smoother
    rng = np.random.default_rng(0)
    ends = (np.array([0.0, 1.0]), np.array([0.1, 0.9]))
    sparse = [(ends[i % 2], rng.normal(size=2)) for i in range(6)]
    with pytest.raises(ValueError, match="too sparse"):
        fi.PACEImputer().fit(sparse)
    # asked for by name, the base's failure is an error that names the way out
    pace = dict(_configs.TINY, base="pace")
    with pytest.raises(ValueError, match=r"PACEImputer could not.*base=None"):
        VTImputer(**pace).fit(sparse)
    # the default says why it trains the network alone, and then does just that
    auto = {key: value for key, value in _configs.TINY.items() if key != "base"}
    with pytest.warns(UserWarning, match="base='auto'.*too sparse.*alone"):
        fallen = VTImputer(**auto).fit(sparse)
    alone = VTImputer(**_configs.TINY).fit(sparse)
    assert fallen.base == "auto" and fallen.base_ is None
    assert fallen.base_weight_ is None and fallen.start_gain_ is None
    # every held-out subject chose the epoch, as without a base
    np.testing.assert_array_equal(fallen.split_["selection"], alone.split_["selection"])
    assert not fallen.split_["comparison"].size
    np.testing.assert_allclose(fallen.transform(sparse), alone.transform(sparse))


def test_base_improves_a_short_training_run(data):
    # three epochs of a tiny network are far from PACE; with PACE as the
    # base the result can only be kept if it beats PACE on held-out points
    sim = fi.simulate.sand_paper(n=200, n_obs="5-8", random_state=4)
    truth, test = sim.test.truth, sim.test.data
    plain = VTImputer(**_configs.TINY).fit(sim.train.data)
    based = VTImputer(**dict(_configs.TINY, base="pace")).fit(sim.train.data)

    def mse(model):
        return np.mean((model.transform(test) - truth) ** 2)

    assert mse(based) < 0.5 * mse(plain)


def test_paired_gain_known_answers():
    counts = np.array([2.0, 1.0, 3.0])
    ref = np.array([4.0, 1.0, 6.0])
    same = paired_gain((ref, counts), (ref, counts))
    assert same == (0.0, 0.0)
    # every subject's error drops by exactly its count: a gain of 1 per
    # point with no spread across subjects, so an infinite z
    gain, z = paired_gain((ref - counts, counts), (ref, counts))
    assert gain == pytest.approx(1.0) and z == np.inf
    # gains of 3, 0 and 0 over 6 points: mean 0.5; residuals 2, -0.5, -1.5
    gain, z = paired_gain((ref - [3.0, 0.0, 0.0], counts), (ref, counts))
    se = np.sqrt(3 / 2 * (2.0**2 + 0.5**2 + 1.5**2)) / 6
    assert gain == pytest.approx(0.5) and z == pytest.approx(0.5 / se)


def test_signed_rank_p_tells_a_shared_gain_from_a_few_subjects_gain():
    counts = np.ones(40)
    ref = np.linspace(1.0, 2.0, 40)
    assert signed_rank_p((ref, counts), (ref, counts)) == 1.0
    # every subject a little better: a shared gain
    assert signed_rank_p((ref - 0.01, counts), (ref, counts)) < 1e-6
    # two subjects much better, the others a little worse: the mean gain is
    # more than two standard errors from zero, the signed ranks say no
    few = ref + 0.01
    few[:2] -= [6.0, 6.0]
    _, z = paired_gain((few, counts), (ref, counts))
    assert z > 1.0
    assert signed_rank_p((few, counts), (ref, counts)) > 0.5
    # subjects with nothing hidden do not count
    empty = np.r_[counts, 0.0]
    padded = (np.r_[ref - 0.01, 0.0], empty), (np.r_[ref, 5.0], empty)
    assert signed_rank_p(*padded) == signed_rank_p((ref - 0.01, counts), (ref, counts))


def test_trainer_keeps_the_start_unless_the_gain_is_shared(monkeypatch):
    from fdaimpute.nn import training, validation

    trainer = training.Trainer(
        torch.nn.Linear(1, 1), np.linspace(0, 1, 5), start_level=0.05
    )
    trainer.best_state, trainer.start_state = "best", "start"
    trainer.best_epoch, trainer.start_epoch = 3, 0
    monkeypatch.setattr(trainer.module, "load_state_dict", lambda state: None)
    monkeypatch.setattr(trainer.module, "eval", lambda: None)
    monkeypatch.setattr(validation, "subject_squared_errors", lambda *a, **k: None)
    for z, p, kept in [(3.0, 0.01, "best"), (3.0, 0.2, "start"), (0.5, 0.01, "start")]:
        monkeypatch.setattr(validation, "paired_gain", lambda e, r, z=z: (0.1, z))
        monkeypatch.setattr(validation, "signed_rank_p", lambda e, r, p=p: p)
        trainer.best_state, trainer.best_epoch = "best", 3
        trainer._check_gain(None, None)
        assert trainer.best_state == kept
        assert trainer.start_gain == (0.1, z, p)
        assert trainer.best_epoch == (3 if kept == "best" else -1)
    # by default the signed-rank test is off: the standard errors decide
    trainer.start_level = training.Trainer(
        torch.nn.Linear(1, 1), np.r_[0.0, 1.0]
    ).start_level
    for z, kept in [(3.0, "best"), (0.5, "start")]:
        monkeypatch.setattr(validation, "paired_gain", lambda e, r, z=z: (0.1, z))
        monkeypatch.setattr(validation, "signed_rank_p", lambda e, r: 0.9)
        trainer.best_state, trainer.best_epoch = "best", 3
        trainer._check_gain(None, None)
        assert trainer.best_state == kept


def test_pooled_subject_errors_add_the_draws(data):
    # one draw is subject_squared_errors itself; a draw repeated doubles each
    # subject's sums and counts and leaves the gain and its z unchanged;
    # distinct draws add their own points
    from fdaimpute.nn import RaggedTensors
    from fdaimpute.nn.validation import (
        hide_validation_observations,
        pooled_subject_errors,
        subject_squared_errors,
    )

    tensors = RaggedTensors(data.times, data.values, data.offsets)
    grid = torch.linspace(0, 1, 11)

    def forward(batch):
        return torch.zeros(batch.times.shape[0], grid.numel())

    def read(out, batch):
        return out[:, :1].expand_as(batch.values) + 0.1 * batch.times

    args = (forward, tensors)
    first, second = (hide_validation_observations(tensors, s) for s in (0, 1))
    one = subject_squared_errors(*args, first, grid, read=read)
    np.testing.assert_array_equal(
        pooled_subject_errors(*args, first, grid, read=read)[0], one[0]
    )
    twice = pooled_subject_errors(*args, [first, first], grid, read=read)
    np.testing.assert_allclose(twice[0], 2 * one[0])
    np.testing.assert_allclose(twice[1], 2 * one[1])
    reference = (one[0] + 0.05 * one[1], one[1])
    doubled = (2 * reference[0], 2 * reference[1])
    np.testing.assert_allclose(paired_gain(twice, doubled), paired_gain(one, reference))
    other = subject_squared_errors(*args, second, grid, read=read)
    both = pooled_subject_errors(*args, [first, second], grid, read=read)
    np.testing.assert_allclose(both[0], one[0] + other[0])
    np.testing.assert_allclose(both[1], one[1] + other[1])


def test_comparison_subjects_judge_on_several_draws(data, monkeypatch):
    # with a base, the best epoch is compared with it on COMPARISON_DRAWS
    # distinct draws of the comparison subjects' hidden points; the epoch
    # is chosen on one draw of the selection subjects'
    from fdaimpute._neural.base import COMPARISON_DRAWS
    from fdaimpute.nn import training

    seen = []
    fit = training.Trainer.fit

    def record(self, train, valid=None, valid_hidden=None, check=None, drawn=None):
        seen.append((valid_hidden, check, drawn))
        return fit(self, train, valid, valid_hidden, check, drawn)

    monkeypatch.setattr(training.Trainer, "fit", record)
    model = VTImputer(**dict(_configs.TINY, base="pace", max_epochs=1)).fit(data)
    ((selection, check, draws),) = seen
    assert isinstance(selection, torch.Tensor)
    assert len(check) == len(model.split_["comparison"])
    assert isinstance(draws, list) and len(draws) == COMPARISON_DRAWS
    assert len({tuple(d.nonzero().ravel().tolist()) for d in draws}) == len(draws)


@pytest.mark.parametrize("n, expected", [(80, 24), (300, 50), (1000, 100)])
def test_auto_validation_share(n, expected):
    model = VTImputer(validation_fraction="auto")
    assert round(model._validation_share(n) * n) == expected


def test_auto_validation_holds_out_the_share(data):
    model = VTImputer(**_configs.TINY, validation_fraction="auto").fit(data)
    assert len(model.split_["selection"]) == round(0.3 * len(data))
    assert model.config_["validation_fraction"] == pytest.approx(0.3)


def _no_derivative(self, data, grid):
    raise NotImplementedError("no derivative")


@pytest.mark.parametrize("base", ["pace", "kernel", "no-derivative"])
def test_base_curves_equal_transform_and_derivative(base, data, monkeypatch):
    # the base gives curve and slope in one pass where the method shares the
    # work (PACE scores once); they are transform's and derivative's outputs
    # (finite differences of the curve without a derivative), in the
    # module's units
    from fdaimpute.nn.base_curves import EstimatorBase

    if base == "pace":
        est = fi.PACEImputer(extrapolate="clip", random_state=0).fit(data)
        posterior, calls = type(est)._posterior, []
        monkeypatch.setattr(
            type(est), "_posterior", lambda s, d: calls.append(1) or posterior(s, d)
        )
    else:
        est = fi.KernelImputer(extrapolate="clip").fit(data)
    if base == "no-derivative":
        monkeypatch.setattr(type(est), "_derivative_grid", _no_derivative)
    lo, hi = data.time_range
    width = int(data.n_obs.max())
    t = np.zeros((len(data), width))
    y = np.zeros((len(data), width))
    mask = np.zeros((len(data), width), dtype=bool)
    for i, (ti, yi) in enumerate(data):
        t[i, : ti.size], y[i, : ti.size], mask[i, : ti.size] = ti, yi, True
    mask[:, 1] = False  # the base sees what the encoder sees
    t = torch.as_tensor((t - lo) / (hi - lo), dtype=torch.float32)
    y = torch.as_tensor((y - 1.0) / 2.0, dtype=torch.float32)
    grid = torch.linspace(0, 1, 21)
    curve, slope = EstimatorBase(est, lo, hi - lo, 1.0, 2.0)(
        t, y, torch.as_tensor(mask), grid
    )
    counts = mask.sum(axis=1)
    visible = fi.IrregularData(
        lo + (hi - lo) * t.double().numpy()[mask],
        1.0 + 2.0 * y.double().numpy()[mask],
        np.concatenate([[0], np.cumsum(counts)]),
        duplicates="average",
    )
    s = lo + (hi - lo) * grid.double().numpy()
    want = (np.asarray(est.transform(visible, grid=s)) - 1.0) / 2.0
    if base == "no-derivative":
        want_slope = np.gradient(want, grid.double().numpy(), axis=1)
    else:
        want_slope = np.asarray(est.derivative(visible, grid=s)) * (hi - lo) / 2.0
    as32 = dict(dtype=torch.float32)
    torch.testing.assert_close(curve, torch.as_tensor(want, **as32), rtol=0, atol=0)
    torch.testing.assert_close(
        slope, torch.as_tensor(want_slope, **as32), rtol=0, atol=0
    )
    if base == "pace":
        assert len(calls) == 3  # the base once for both, then transform, derivative


def test_verbose_fit_names_each_phase_in_order(data, capsys):
    """The progress bar shows the base, training, each cross-fitted network,
    the calibration and the base's refit on every subject."""
    kernel = fi.KernelImputer()
    params = dict(_configs.TINY, base=kernel, calibration_folds=2, max_epochs=2)
    est = VTImputer(**params, verbose=True).fit(data)
    err = capsys.readouterr().err
    labels = [
        "base (KernelImputer) on",
        "training on",
        "cross-fitting, network 1 of 2",
        "cross-fitting, network 2 of 2",
        "calibrating the bands",
    ]
    kept = "base kept, " if est.best_epoch_ == -1 else "base "
    labels.append(f"{kept}refitted on all {len(data)} subjects")
    labels.append("VTImputer: done")
    where = [err.find(label) for label in labels]
    assert -1 not in where and where == sorted(where), err[-2000:]
    # without a base there is no base phase; quiet fits print nothing
    VTImputer(**dict(params, base=None), verbose=True).fit(data)
    assert "base (" not in capsys.readouterr().err
    VTImputer(**params).fit(data)
    assert capsys.readouterr().err == ""


@torch_classes
def test_base_of_a_group_of_batches_in_one_call_trains_as_batch_by_batch(
    cls, params, data, monkeypatch
):
    from fdaimpute.nn import base_curves, training

    calls = []
    call = base_curves.EstimatorBase.__call__

    def counted(self, t, *args, **kwargs):
        calls.append(t.shape[0])
        return call(self, t, *args, **kwargs)

    monkeypatch.setattr(base_curves.EstimatorBase, "__call__", counted)
    params = {key: value for key, value in params.items() if key != "base"}
    params.update(max_epochs=1, batch_size=8, calibration_folds=None)
    fits = {}
    for group in (1, 32):
        monkeypatch.setattr(training, "BASE_GROUP_SUBJECTS", group)
        calls.clear()
        model = cls(**params).fit(data)
        fits[group] = (model, list(calls))
    (one, one_calls), (grouped, grouped_calls) = fits[1], fits[32]
    # the same points hidden and the same base: the same training, step by step
    assert one.history_["train_loss"] == grouped.history_["train_loss"]
    np.testing.assert_array_equal(one.transform(data), grouped.transform(data))
    # training calls: one per batch of 8 against one per 4 batches
    assert max(one_calls[1:]) > 8 and one_calls.count(8) > 2 * grouped_calls.count(32)
    assert 32 in grouped_calls and len(grouped_calls) < len(one_calls)


def test_a_networks_base_does_not_warn_about_its_batches(data):
    # a range so narrow that every curve leaves it: the imputer alone warns,
    # the same imputer as a network's base (a training batch's partly
    # hidden subjects, labelled by position) does not - the network's own
    # transform checks its curves and names the user's subjects
    import warnings

    from fdaimpute.nn.base_curves import EstimatorBase

    pace = fi.PACEImputer(random_state=0).fit(data)
    pace.value_range_ = (0.0, 1e-6)
    with pytest.warns(UserWarning, match="leaves the training data's range"):
        pace.transform(data[:3])
    base = EstimatorBase(pace, 0.0, 1.0, 0.0, 1.0)
    t = torch.tensor([[0.1, 0.5, 0.9]])
    y = torch.tensor([[0.3, 1.0, -0.2]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        curve, _ = base(
            t, y, torch.ones(1, 3, dtype=torch.bool), torch.linspace(0, 1, 11)
        )
    assert torch.isfinite(curve).all()
    with pytest.warns(UserWarning, match="leaves the training data's range"):
        pace.transform(data[:3])  # the silence ends with the call
