"""The transformer's normalisation option: layer, batch (masked), RMS or none."""

import copy
import math
import pickle

import _configs
import numpy as np
import pytest
from numpy.testing import assert_array_equal

torch = pytest.importorskip("torch")

import fdaimpute as fi  # noqa: E402
from fdaimpute.nn import RaggedTensors, VTModule  # noqa: E402
from fdaimpute.nn.norms import (  # noqa: E402
    MaskedBatchNorm,
    RMSNorm,
    _OwnRMSNorm,
    make_norm,
)
from fdaimpute.nn.transformer import _apply_norm  # noqa: E402

NORMS = ["layer", "batch", "rms", None]
TINY = dict(_configs.TINY_SIZES, decoder_layers=2)
# the type of every normalisation layer a VTModule holds, per option
LAYER_TYPE = {
    "layer": torch.nn.LayerNorm,
    "batch": MaskedBatchNorm,
    "rms": RMSNorm,
    None: torch.nn.Identity,
}


def ragged(n=6, seed=0, lo=2, hi=9):
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(lo, hi + 1, (n,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])
    times = torch.cat([torch.rand(int(c), generator=g).sort().values for c in counts])
    values = torch.sin(2 * math.pi * times) + 0.1 * torch.randn(
        times.shape[0], generator=g
    )
    return RaggedTensors(times, values, offsets)


def pad_more(batch, extra=4, fill=1e3):
    """The batch's tensors with ``extra`` more padded columns holding ``fill``."""
    b = batch.times.shape[0]
    junk = torch.full((b, extra), fill)
    times = torch.cat([batch.times, junk.clamp(max=1.0)], dim=1)
    values = torch.cat([batch.values, junk], dim=1)
    valid = torch.cat([batch.valid, torch.zeros(b, extra, dtype=torch.bool)], dim=1)
    return times, values, valid


def norm_layers(module):
    return [m for name, m in module.named_modules() if name.endswith("norm")]


# --------------------------------------------------------------------------- #
# the layers
def test_masked_batch_norm_matches_batch_norm_on_the_real_tokens():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 4) * 2 + 1
    mask = torch.rand(3, 5) > 0.4
    ours, ref = MaskedBatchNorm(4), torch.nn.BatchNorm1d(4)
    with torch.no_grad():
        for layer in (ours, ref):
            layer.weight.uniform_(0.5, 2.0)
        ref.load_state_dict(ours.state_dict(), strict=False)
    masked_twin, unmasked_twin = copy.deepcopy(ours), copy.deepcopy(ours)
    out = ours(x, mask)
    torch.testing.assert_close(out[mask], ref(x[mask]))
    torch.testing.assert_close(ours.running_mean, ref.running_mean)
    # the running variance averages the biased batch variance
    biased = x[mask].var(dim=0, unbiased=False)
    torch.testing.assert_close(ours.running_var, 0.9 + 0.1 * biased)
    # junk in the padded tokens (inf included) changes nothing...
    junk = torch.where(mask[..., None], x, torch.tensor(float("inf")))
    torch.testing.assert_close(masked_twin(junk, mask)[mask], out[mask])
    # ...but would without the mask
    assert not torch.allclose(unmasked_twin(x)[mask], out[mask], atol=1e-2)


def test_masked_batch_norm_uses_running_statistics_in_eval_mode():
    torch.manual_seed(0)
    bn = MaskedBatchNorm(3)
    for _ in range(5):
        bn(torch.randn(4, 6, 3) * 3 + 2)
    bn.eval()
    x = torch.randn(2, 5, 3)
    expected = (x - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps)
    torch.testing.assert_close(bn(x), expected)
    # one token alone gives what it gives in a batch
    torch.testing.assert_close(bn(x[:1, :1]), bn(x)[:1, :1])
    before = bn.running_mean.clone()
    bn(x * 10)
    assert torch.equal(bn.running_mean, before)


def test_own_rms_norm_matches_the_formula_and_torchs():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8)
    own = _OwnRMSNorm(8)
    with torch.no_grad():
        own.weight.uniform_(0.5, 2.0)
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * own.weight
    torch.testing.assert_close(own(x), expected)
    if hasattr(torch.nn, "RMSNorm"):
        theirs = make_norm("rms", 8)
        theirs.load_state_dict(own.state_dict())
        torch.testing.assert_close(theirs(x), own(x))


@pytest.mark.parametrize("bad", ["group", "Layer", "none", 1])
def test_bad_norm_is_refused(bad):
    with pytest.raises(ValueError, match="norm must be one of"):
        VTModule(**TINY, norm=bad)


# --------------------------------------------------------------------------- #
# the module
@pytest.mark.parametrize("norm", NORMS)
def test_module_holds_the_chosen_normalisation_everywhere(norm):
    vt = VTModule(**dict(TINY, encoder_layers=2), norm=norm)
    layers = norm_layers(vt)
    # two blocks per encoder layer, three per decoder layer, two final ones
    assert len(layers) == 2 * 2 + 3 * 2 + 2
    assert all(type(m) is LAYER_TYPE[norm] for m in layers)
    post = norm_layers(VTModule(**TINY, norm=norm, norm_first=False))
    assert [type(m) for m in post[-2:]] == [torch.nn.Identity] * 2


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("train", [True, False])
def test_padding_does_not_change_the_output(norm, train):
    torch.manual_seed(0)
    vt = VTModule(**TINY, norm=norm)
    data, grid = ragged(n=5), torch.linspace(0, 1, 21)
    batch = data.batch(torch.arange(5))
    if not train:  # running statistics that differ from the initial ones
        for _ in range(3):
            vt(batch.times, batch.values, batch.valid, grid)
        vt.eval()
    twin = copy.deepcopy(vt)
    out = vt(batch.times, batch.values, batch.valid, grid)["curve"]
    padded = twin(*pad_more(batch), grid)["curve"]
    torch.testing.assert_close(padded, out, atol=1e-5, rtol=1e-5)
    for a, b in zip(vt.buffers(), twin.buffers()):
        torch.testing.assert_close(a, b)


def test_batch_norm_statistics_are_per_batch_in_training_only():
    torch.manual_seed(0)
    vt = VTModule(**TINY, norm="batch")
    data, grid = ragged(n=6), torch.linspace(0, 1, 21)
    batch = data.batch(torch.arange(6))

    def first_alone_and_in_batch():
        alone = vt(batch.times[:1], batch.values[:1], batch.valid[:1], grid)
        return alone["curve"][0], vt(batch.times, batch.values, batch.valid, grid)[
            "curve"
        ][0]

    alone, together = first_alone_and_in_batch()
    assert not torch.allclose(alone, together, atol=1e-3)
    vt.eval()
    alone, together = first_alone_and_in_batch()
    torch.testing.assert_close(alone, together, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm", ["batch", "layer"])
def test_shared_decoder_queries_match_per_subject_queries_in_training(norm):
    torch.manual_seed(0)
    vt = VTModule(**TINY, norm=norm)  # no dropout: the queries are shared
    slow_vt = copy.deepcopy(vt)
    data, grid = ragged(n=4), torch.linspace(0, 1, 15)
    b = data.batch(torch.arange(4))
    fast = vt(b.times, b.values, b.valid, grid)["curve"]
    x = slow_vt.embed(b.times, b.values)
    for layer in slow_vt.encoder:
        x = layer(x, b.valid)
    memory = _apply_norm(slow_vt.encoder_norm, x, b.valid)
    q = slow_vt.queries(grid).expand(4, -1, -1)
    for layer in slow_vt.decoder:
        q = layer(q, memory, b.valid)
    slow = slow_vt.head(_apply_norm(slow_vt.decoder_norm, q, None)).squeeze(-1)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    for a, c in zip(vt.buffers(), slow_vt.buffers()):
        torch.testing.assert_close(a, c, atol=1e-6, rtol=1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("norm", NORMS)
def test_cuda_training_with_amp_per_norm(norm):
    from fdaimpute.nn import Trainer, predict_curves

    torch.manual_seed(0)
    model = VTModule(**TINY, norm=norm)
    data, grid = ragged(n=8), torch.linspace(0, 1, 21)
    gdata = RaggedTensors(data.times, data.values, data.offsets, device="cuda")
    trainer = Trainer(
        model.to("cuda"), grid.cuda(), max_epochs=2, batch_size=4, amp=True
    )
    trainer.fit(gdata)
    assert all(torch.isfinite(torch.tensor(trainer.history["train_loss"])))
    gpu = predict_curves(model, gdata, grid.cuda())[0].cpu()
    cpu = predict_curves(model.cpu(), data, grid)[0]
    torch.testing.assert_close(gpu, cpu, atol=1e-4, rtol=1e-4)


# --------------------------------------------------------------------------- #
# the estimators
# every point weighed alike: over three epochs the loss then falls steadily
# (with the CPU preset's lower weight on the points the encoder sees, it is
# mostly the hidden points' error, which varies with the batches' draws)
FACTORIES = {
    "VT": lambda norm: fi.VTImputer(**_configs.TINY, norm=norm, visible_weight=1.0),
    "SAND": lambda norm: fi.SANDImputer(
        **_configs.SAND_TINY, norm=norm, visible_weight=1.0
    ),
}
CASES = [(name, norm) for name in FACTORIES for norm in NORMS]


@pytest.fixture(scope="module")
def fitted(sim):
    cache = {}

    def get(name, norm):
        if (name, norm) not in cache:
            cache[name, norm] = FACTORIES[name](norm).fit(sim.train.data)
        return cache[name, norm]

    return get


@pytest.mark.parametrize("name, norm", CASES)
def test_every_norm_trains_and_is_deterministic(fitted, sim, name, norm):
    est = fitted(name, norm)
    assert est.module_config_["vt"]["norm"] == norm
    assert all(type(m) is LAYER_TYPE[norm] for m in norm_layers(est.module_))
    loss = est.history_["train_loss"]
    assert np.isfinite(loss).all() and loss[-1] < loss[0]
    curves = est.transform(sim.test.data)
    assert np.isfinite(curves).all()
    again = FACTORIES[name](norm).fit(sim.train.data)
    assert_array_equal(again.transform(sim.test.data), curves)


def test_norms_give_different_networks(fitted, sim):
    curves = [fitted("VT", norm).transform(sim.test.data) for norm in NORMS]
    for i in range(len(NORMS)):
        for j in range(i):
            assert not np.allclose(curves[i], curves[j])


@pytest.mark.parametrize("bad, error", [("group", ValueError), (0, TypeError)])
def test_estimators_refuse_a_bad_norm(sim, bad, error):
    for make in FACTORIES.values():
        with pytest.raises(error, match="'norm' parameter .* 'layer', 'batch'"):
            make(bad).fit(sim.train.data)


@pytest.mark.parametrize("name, norm", CASES)
def test_save_load_round_trip_per_norm(fitted, sim, tmp_path, name, norm):
    est = fitted(name, norm)
    path = tmp_path / "model.fdaimpute"
    est.save(path)
    loaded = type(est).load(path)
    assert loaded.get_params()["norm"] == norm
    assert all(type(m) is LAYER_TYPE[norm] for m in norm_layers(loaded.module_))
    assert_array_equal(loaded.transform(sim.test.data), est.transform(sim.test.data))


@pytest.mark.parametrize("name", FACTORIES)
def test_models_saved_before_the_norm_option_load_as_layer_norm(fitted, sim, name):
    est = fitted(name, "layer")
    # what an earlier version pickled: no ``norm`` parameter, no config key
    old = copy.copy(est)
    del old.__dict__["norm"]
    old.module_config_ = copy.deepcopy(est.module_config_)
    del old.module_config_["vt"]["norm"]
    loaded = pickle.loads(pickle.dumps(old))
    assert "norm" not in loaded.__dict__
    assert loaded.get_params()["norm"] == "layer"
    assert_array_equal(loaded.transform(sim.test.data), est.transform(sim.test.data))
