"""Known-answer and direction tests of the smoothing/stability regularizers."""

import math

import _configs
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fdaimpute as fi  # noqa: E402
from fdaimpute.nn import (  # noqa: E402
    LipReg,
    NormStabilizer,
    RegularizerContext,
    Roughness,
    SmoothingRegularizer,
    VTModule,
)
from fdaimpute.nn.regularizers import feed_forward_blocks  # noqa: E402

SIZES = _configs.TINY_SIZES


def _ctx(**kw):
    fields = dict(
        module=None,
        epoch=0,
        step=0,
        times=None,
        mask=None,
        embedding=None,
        grid=None,
        curve=None,
        vt_curve=None,
    )
    fields.update(kw)
    return RegularizerContext(**fields)


def test_lipreg_of_a_linear_ramp_on_the_grid_is_one():
    grid = torch.linspace(0, 1, 11)
    ramp = (3.0 * grid - 2.0).unsqueeze(0)  # any scale: rescaled to [0, 1]
    assert LipReg(on="output").penalty(_ctx(grid=grid, curve=ramp)) == pytest.approx(1)


def test_lipreg_of_an_alternating_sequence_is_one_over_the_squared_spacing():
    grid = torch.linspace(0, 1, 9)
    alternating = torch.tensor([[1.0, -1.0] * 4 + [1.0]])
    value = LipReg(on="output").penalty(_ctx(grid=grid, curve=alternating))
    assert value == pytest.approx(8.0**2)


def test_lipreg_on_irregular_embedding_divides_by_time_gaps():
    times = torch.tensor([[0.1, 0.2, 0.5, 0.9]])
    emb = torch.stack([times, -2 * times], dim=-1)  # two channels, both linear in t
    mask = torch.ones(1, 4, dtype=torch.bool)
    value = LipReg().penalty(_ctx(times=times, mask=mask, embedding=emb))
    # Rescaled to [0, 1], each channel has slope 1 / 0.8.
    assert value == pytest.approx(1 / 0.8**2)


def test_lipreg_ignores_padding_and_hidden_tokens():
    times = torch.tensor([[0.0, 0.5, 1.0, 0.0, 0.0], [0.0, 0.25, 0.5, 0.75, 1.0]])
    emb = torch.tensor([[0.0, 1.0, 0.0, 1e6, -1e6], [0.0, 5.0, 1.0, 7.0, 2.0]])
    emb = emb.unsqueeze(-1)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    both = LipReg().penalty(_ctx(times=times, mask=mask, embedding=emb))
    first = LipReg().penalty(
        _ctx(times=times[:1, :3], mask=mask[:1, :3], embedding=emb[:1, :3])
    )
    second = LipReg().penalty(_ctx(times=times[1:], mask=mask[1:], embedding=emb[1:]))
    # Pairs are pooled: 2 from the first subject, 4 from the second.
    assert both == pytest.approx((2 * first + 4 * second) / 6)
    assert first == pytest.approx(2 * (1 / 0.5) ** 2 / 2)


def test_lipreg_decay_weight():
    reg = LipReg(2.0, decay=0.5)
    assert reg.weight_at(0) == 2.0
    assert reg.weight_at(4) == pytest.approx(2.0 * math.exp(-2.0))
    with pytest.raises(ValueError, match="decay"):
        LipReg(decay=-1).check()
    with pytest.raises(ValueError, match="on must be"):
        LipReg(on="input").check()


def test_norm_stabilizer_zero_for_constant_norms_and_known_value():
    angle = torch.linspace(0, 3, 7)
    h = torch.stack([torch.cos(angle), torch.sin(angle)], dim=-1).unsqueeze(0) * 2.0
    reg = NormStabilizer(layer="decoder.0")
    assert reg.penalty(_ctx(hidden={"decoder.0": h})) == pytest.approx(0, abs=1e-6)
    growing = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [4.0, 0.0]]])
    value = reg.penalty(_ctx(hidden={"decoder.0": growing}))
    assert value == pytest.approx((1.0 + 4.0) / 2)


def test_norm_stabilizer_masks_encoder_padding_and_picks_layers():
    h = torch.tensor([[[1.0], [1.0], [50.0]]])
    mask = torch.tensor([[True, True, False]])
    hidden = {"encoder.0": 3 * h, "encoder.1": h, "decoder.0": h}
    assert (
        NormStabilizer(layer="encoder.-1").penalty(_ctx(hidden=hidden, mask=mask)) == 0
    )
    assert (
        NormStabilizer(layer="encoder.0").penalty(_ctx(hidden=hidden, mask=mask)) == 0
    )
    with pytest.raises(ValueError, match="no layer"):
        NormStabilizer(layer="decoder.3").penalty(_ctx(hidden=hidden, mask=mask))
    with pytest.raises(ValueError, match="layer must look like"):
        NormStabilizer(layer="middle").check()


@pytest.mark.parametrize(
    "activation, gamma",
    [(torch.nn.ReLU, 1.0), (torch.nn.GELU, 1.1289), (torch.nn.Sigmoid, 0.25)],
)
def test_smoothing_regularizer_on_a_hand_built_mlp(activation, gamma):
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(
        torch.nn.Linear(3, 4),
        activation(),
        torch.nn.Dropout(0.1),
        torch.nn.Linear(4, 2),
    )
    U, V = mlp[3].weight.detach().numpy(), mlp[0].weight.detach().numpy()
    expected = gamma * np.linalg.norm(U) * np.linalg.norm(V)
    value = SmoothingRegularizer().penalty(_ctx(module=mlp)).detach()
    assert float(value) == pytest.approx(expected, rel=1e-5)


def test_smoothing_regularizer_sums_every_feed_forward_block_of_a_vt():
    vt = VTModule(
        d_model=8,
        n_heads=2,
        encoder_layers=2,
        decoder_layers=1,
        dim_feedforward=16,
        encoding_dim=4,
    )
    blocks = feed_forward_blocks(vt)
    assert len(blocks) == 3
    with torch.no_grad():
        total = sum(1.1289 * o.weight.norm() * i.weight.norm() for i, _, o in blocks)
        value = SmoothingRegularizer().penalty(_ctx(module=vt))
    assert float(value) == pytest.approx(float(total))
    with pytest.raises(ValueError, match="no feed-forward"):
        SmoothingRegularizer().penalty(_ctx(module=torch.nn.Linear(2, 2)))


def _penalty_after_steps(reg, steps=25):
    """Optimise only ``reg.weight * penalty`` on a tiny VT; return start and end."""
    torch.manual_seed(0)
    vt = VTModule(**SIZES)
    t = torch.rand(8, 6).sort(dim=1).values
    y = torch.randn(8, 6)
    mask = torch.ones(8, 6, dtype=torch.bool)
    grid = torch.linspace(0, 1, 21)
    opt = torch.optim.Adam(vt.parameters(), lr=1e-2)
    values = []
    for step in range(steps + 1):
        out = vt(t, y, mask, grid, return_hidden=True)
        ctx = RegularizerContext(
            vt,
            0,
            step,
            t,
            mask,
            out["embedding"],
            grid,
            out["curve"],
            out["curve"],
            hidden=out["hidden"],
        )
        value = reg.penalty(ctx)
        values.append(float(value.detach()))
        opt.zero_grad()
        (reg.weight_at(0) * value).backward()
        opt.step()
    return values[0], values[-1]


@pytest.mark.parametrize(
    "make",
    [
        lambda w: LipReg(w),
        lambda w: LipReg(w, on="output"),
        lambda w: NormStabilizer(w),
        lambda w: NormStabilizer(w, layer="encoder.0"),
        lambda w: SmoothingRegularizer(w),
        lambda w: Roughness(w),
    ],
    ids=[
        "lip-embedding",
        "lip-output",
        "norm-decoder",
        "norm-encoder",
        "smoothing",
        "roughness",
    ],
)
def test_positive_weight_lowers_and_negative_weight_raises_the_penalty(make):
    start, end = _penalty_after_steps(make(1.0))
    assert end < start
    start, end = _penalty_after_steps(make(-1.0))
    assert end > start


TINY = dict(
    **SIZES,
    base=None,
    max_epochs=6,
    batch_size=16,
    lr=3e-3,
    random_state=0,
)


@pytest.fixture(scope="module")
def sim():
    return fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0)


def test_estimator_records_the_penalty_and_its_sign_matters(sim):
    torch.set_num_threads(1)
    last = {}
    for sign in (+1, -1):
        est = fi.VTImputer(regularizers=[LipReg(sign * 5.0)], **TINY)
        history = est.fit(sim.train.data).history_["reg/lipreg"]
        assert len(history) == TINY["max_epochs"]
        last[sign] = history[-1]
    assert last[+1] < last[-1]


def test_select_regularizer_weight_keeps_the_best_on_validation(sim):
    from fdaimpute.tuning import select_regularizer_weight

    torch.set_num_threads(1)
    est = fi.VTImputer(regularizers=[Roughness()], grid=sim.grid, **TINY)
    best, results = select_regularizer_weight(
        est, sim.train.data, sim.validation.data, [1.0, 1e6], truth=sim.validation.truth
    )
    assert [r["weight"] for r in results] == [1.0, 1e6]
    errors = [r["error"] for r in results]
    assert best.regularizers[0].weight == results[int(np.argmin(errors))]["weight"]
    # The estimator passed in is left untouched.
    assert est.regularizers[0].weight == 1.0 and not hasattr(est, "module_")
    _, held_out = select_regularizer_weight(
        est, sim.train.data, sim.validation.data, [1.0]
    )
    assert held_out[0]["error"] > 0
    with pytest.raises(ValueError, match="empty"):
        select_regularizer_weight(
            fi.VTImputer(), sim.train.data, sim.validation.data, [1.0]
        )
