"""Networks of several variables: layout, reading, SAND per variable, learning."""

import pytest
import torch

from fdaimpute.nn import SANDLayer, SANDModule, VTModule, anchor_weights
from fdaimpute.nn.channels import (
    channel_grid,
    channel_masks,
    channel_times,
    fold_channels,
    unfold_channels,
)
from fdaimpute.nn.integration import integrate, interpolate_c1, interpolate_linear

SMALL = dict(d_model=16, n_heads=2, dim_feedforward=32, encoding_dim=8)


def _batch(b=4, length=6, p=2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    t = torch.rand(b, length, generator=gen).sort(dim=1).values
    y = torch.randn(b, length, generator=gen)
    variable = torch.randint(0, p, (b, length), generator=gen)
    mask = torch.ones(b, length, dtype=torch.bool)
    return t, y, mask, variable


def test_one_variable_adds_nothing_and_changes_nothing():
    torch.manual_seed(0)
    plain = VTModule(**SMALL).eval()
    torch.manual_seed(0)
    one = VTModule(**SMALL, n_variables=1).eval()
    assert plain.state_dict().keys() == one.state_dict().keys()
    t, y, mask, _ = _batch()
    grid = torch.linspace(0, 1, 11)
    assert torch.equal(plain(t, y, mask, grid)["curve"], one(t, y, mask, grid)["curve"])


def test_several_variables_give_one_curve_each_and_need_the_variables():
    torch.manual_seed(1)
    vt = VTModule(**SMALL, n_variables=3).eval()
    t, y, mask, variable = _batch(p=3)
    grid = torch.linspace(0, 1, 11)
    curve = vt(t, y, mask, grid, variable=variable)["curve"]
    assert curve.shape == (4, 33)
    # the variables' curves differ, and so do outputs for other variables
    blocks = curve.reshape(4, 3, 11)
    assert not torch.allclose(blocks[:, 0], blocks[:, 1])
    other = vt(t, y, mask, grid, variable=(variable + 1) % 3)["curve"]
    assert not torch.allclose(curve, other)
    with pytest.raises(ValueError, match="variable"):
        vt(t, y, mask, grid)
    with pytest.raises(ValueError, match="n_variables"):
        VTModule(**SMALL, n_variables=0)


def test_the_order_of_a_subjects_observations_does_not_matter():
    torch.manual_seed(2)
    vt = VTModule(**SMALL, n_variables=2).eval()
    t, y, mask, variable = _batch()
    grid = torch.linspace(0, 1, 11)
    perm = torch.randperm(t.shape[1])
    a = vt(t, y, mask, grid, variable=variable)["curve"]
    b = vt(t[:, perm], y[:, perm], mask[:, perm], grid, variable=variable[:, perm])
    assert torch.allclose(a, b["curve"], atol=1e-5)


def test_the_long_grid_reads_each_observation_from_its_own_curve():
    grid = torch.linspace(0, 1, 11)
    gen = torch.Generator().manual_seed(3)
    deriv = torch.randn(2, 3 * 11, generator=gen)
    # each variable's curve the integral of its derivative (as SAND's are)
    start = torch.randn(6, generator=gen)
    curves = unfold_channels(integrate(fold_channels(deriv, 3), grid, start), 3)
    # times at the grid's ends and inside it
    t = torch.tensor([[0.0, 1.0, 0.37, 0.5], [1.0, 0.0, 0.99, 0.05]])
    variable = torch.tensor([[0, 0, 1, 2], [2, 1, 1, 0]])
    long_grid = channel_grid(grid, 3)
    assert bool((long_grid[1:] > long_grid[:-1]).all())
    at = channel_times(t, variable, grid)
    linear = interpolate_linear(curves, long_grid, at)
    smooth = interpolate_c1(curves, deriv, long_grid, at)
    blocks, slopes = curves.reshape(2, 3, 11), deriv.reshape(2, 3, 11)
    for b in range(2):
        for i in range(4):
            j, time = int(variable[b, i]), t[b, i : i + 1].unsqueeze(0)
            own = interpolate_linear(blocks[b, j].unsqueeze(0), grid, time)
            assert torch.allclose(linear[b, i], own[0, 0], atol=1e-6)
            own_c1 = interpolate_c1(
                blocks[b, j].unsqueeze(0), slopes[b, j].unsqueeze(0), grid, time
            )
            assert torch.allclose(smooth[b, i], own_c1[0, 0], atol=1e-5)
    assert torch.equal(unfold_channels(fold_channels(curves, 3), 3), curves)
    assert torch.equal(fold_channels(curves, 3)[4], blocks[1, 1])


@pytest.mark.parametrize("rule", ["two-sided", "mean", None])
def test_sand_smooths_each_variable_as_a_curve_of_its_own(rule):
    torch.manual_seed(4)
    vt = VTModule(**SMALL, n_variables=2).eval()
    sand = SANDLayer(head_dim=8, encoding_dim=8)
    module = SANDModule(vt, sand).eval()
    t, y, mask, variable = _batch(b=3, length=5)
    variable[0] = 0  # subject 0 never seen on the second variable
    grid = torch.linspace(0, 1, 11)
    out = module(t, y, mask, grid, anchors=rule, variable=variable)
    rough = out["curve"].reshape(3, 2, 11)
    smooth = out["sand"].reshape(3, 2, 11)
    assert torch.isfinite(smooth).all()
    for j in range(2):
        own = mask & (variable == j)
        weights = None
        if rule is not None:
            weights = anchor_weights(t, own, grid, nearest=rule == "two-sided")
            weights[~own.any(dim=1), 5] = 1.0
            weights = weights > 0 if rule == "two-sided" else weights
        expected, _ = sand(
            rough[:, j], grid, anchors=weights, anchor_mode=rule or "mean"
        )
        assert torch.allclose(smooth[:, j], expected, atol=1e-5)
    if rule == "two-sided":
        # anchored at the middle of the grid where the variable was never seen
        assert torch.allclose(smooth[0, 1, 5], rough[0, 1, 5])


def test_channel_masks_split_the_observations_by_variable():
    t, _, mask, variable = _batch(b=2, length=4, p=3)
    mask[1, 3] = False
    times, rows = channel_masks(t, mask, variable, 3)
    assert times.shape == (6, 4) and rows.shape == (6, 4)
    for b in range(2):
        for j in range(3):
            assert torch.equal(rows[3 * b + j], mask[b] & (variable[b] == j))
            assert torch.equal(times[3 * b + j], t[b])


def _train(module, draw, predict, loss_on, steps, seed):
    """Adam at 3e-3 on batches of 64 from ``draw``, then eval mode.

    ``predict(t, y, seen, extra)`` gives the predictions at ``t``;
    ``loss_on(seen)`` the points scored.
    """
    opt = torch.optim.Adam(module.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        t, y, seen, extra = draw(64, gen)
        scored = loss_on(seen)
        loss = ((predict(t, y, seen, extra) - y)[scored] ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    module.eval()


def test_a_network_of_two_variables_learns_one_from_the_other():
    # x1 is the square of x0's random level: no linear predictor can read
    # it off x0, and the network sees x0 alone
    torch.manual_seed(5)
    vt = VTModule(
        d_model=32, n_heads=2, dim_feedforward=64, encoding_dim=8, n_variables=2
    )
    grid = torch.linspace(0, 1, 11)
    long_grid = channel_grid(grid, 2)

    def draw(n, gen):
        level = torch.randn(n, 1, generator=gen)
        t = torch.rand(n, 8, generator=gen)
        variable = torch.tensor([0] * 4 + [1] * 4).expand(n, 8)
        y = torch.where(variable == 0, level.expand(n, 8), level.expand(n, 8) ** 2 - 1)
        return t, y, variable == 0, variable

    def predict(t, y, seen, variable):
        out = vt(t, torch.where(seen, y, 0.0), seen, grid, variable=variable)
        return interpolate_linear(
            out["curve"], long_grid, channel_times(t, variable, grid)
        )

    # both variables scored: two curves to tell apart
    _train(vt, draw, predict, torch.ones_like, steps=300, seed=6)
    with torch.no_grad():
        t, y, seen, variable = draw(500, torch.Generator().manual_seed(7))
        pred = predict(t, y, seen, variable)
    # the square has variance 2; its best linear predictor from x0 keeps it all
    assert ((pred - y)[~seen] ** 2).mean() < 0.2
    assert ((pred - y)[seen] ** 2).mean() < 0.1


def test_the_base_is_kept_or_left_for_each_variable_on_its_own():
    # x0 is a subject's level, which the base gets exactly from any visible
    # x0; x1 is the level's square, where the base says 0. The network can
    # only lose on x0 and wins on x1: the gate goes back to 0 on x0 alone
    from fdaimpute.nn import RaggedTensors, Trainer
    from fdaimpute.nn.validation import hide_validation_observations

    def draw(n, seed):
        gen = torch.Generator().manual_seed(seed)
        level = torch.randn(n, generator=gen)
        counts = torch.full((n,), 8)
        variable = torch.tensor([0] * 5 + [1] * 3).repeat(n)
        times = torch.rand(8 * n, generator=gen)
        own = level.repeat_interleave(8)
        values = torch.where(variable == 0, own, own**2 - 1)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])
        return RaggedTensors(times, values, offsets, variable=variable)

    def base(t, y, mask, grid, variable):
        seen = mask & (variable == 0)
        level = (y * seen).sum(1) / seen.sum(1).clamp(min=1)
        m = grid.shape[0]
        curves = torch.cat([level[:, None].expand(-1, m), torch.zeros(len(y), m)], 1)
        return curves, None

    torch.manual_seed(0)
    module = VTModule(**SMALL, n_variables=2, base_gate=True)
    module.base_curves = base
    valid, check = draw(150, 2), draw(150, 3)
    trainer = Trainer(
        module, torch.linspace(0, 1, 11), max_epochs=20, lr=3e-3, keep_start=True
    )
    trainer.fit(
        draw(400, 1),
        valid,
        hide_validation_observations(valid, 4),
        check,
        hide_validation_observations(check, 5),
    )
    gate = module.base_gate.detach()
    assert trainer.best_epoch >= 0 and len(trainer.start_gain) == 2
    assert gate[0] == 0 and gate[1] > 0.1
    assert trainer.start_gain[0][1] < 1 and trainer.start_gain[1][1] > 3


def test_a_network_reads_a_subjects_level_from_its_covariates():
    # the observations carry no information on the level (pure noise), the
    # covariate is the level: only the covariates' token can give it
    torch.manual_seed(3)
    vt = VTModule(**SMALL, n_covariates=2)
    grid = torch.linspace(0, 1, 11)

    def draw(n, gen):
        z = torch.randn(n, 2, generator=gen)
        t = torch.rand(n, 4, generator=gen)
        seen = torch.arange(4).expand(n, 4) == 0
        y = torch.where(seen, torch.randn(n, 4, generator=gen), z[:, :1])
        return t, y, seen, z

    def predict(t, y, seen, z):
        out = vt(t, torch.where(seen, y, 0.0), seen, grid, covariates=z)
        return interpolate_linear(out["curve"], grid, t)

    _train(vt, draw, predict, torch.logical_not, steps=200, seed=4)
    with torch.no_grad():
        t, y, seen, z = draw(500, torch.Generator().manual_seed(5))
        pred = predict(t, y, seen, z)
        # the level's variance is 1: ignoring the covariate leaves it all
        assert ((pred - y)[~seen] ** 2).mean() < 0.1
        assert vt.encode(t, y, seen, covariates=z).shape == (500, 4, 16)
    with pytest.raises(ValueError, match="2 covariates"):
        vt(t, y, seen, grid)
    with pytest.raises(ValueError, match="without them"):
        VTModule(**SMALL)(t, y, seen, grid, covariates=z)


def test_regularizers_see_each_variable_as_a_row_of_its_own():
    from fdaimpute.nn import Batch, LipReg, NormStabilizer, Roughness, Trainer

    torch.manual_seed(2)
    t, y, mask, variable = _batch(p=2)
    grid = torch.linspace(0, 1, 11)
    trainer = Trainer(VTModule(**SMALL, n_variables=2).train(), grid)
    batch = Batch(torch.arange(4), t, y, mask, mask, variable)
    out = trainer.forward(batch, return_hidden=True)
    ctx = trainer.context(out, batch)
    rows = out.curve.reshape(8, 11)  # row 2 b + j: variable j of subject b
    torch.testing.assert_close(ctx.curve, rows)
    second = (rows[:, 2:] - 2 * rows[:, 1:-1] + rows[:, :-2]).pow(2).mean()
    torch.testing.assert_close(Roughness().penalty(ctx), second)
    # one long row per subject would join the end of x0's curve to x1's start
    joined = out.curve
    naive = (joined[:, 2:] - 2 * joined[:, 1:-1] + joined[:, :-2]).pow(2).mean()
    assert not torch.isclose(naive, second)
    assert torch.equal(ctx.mask.reshape(4, 2, -1)[:, 1], mask & (variable == 1))
    assert ctx.embedding.shape[0] == 8
    assert ctx.hidden["decoder.0"].shape[:2] == (8, 11)
    assert ctx.hidden["encoder.0"].shape[:2] == (8, t.shape[1])
    regs = [LipReg(on="embedding"), LipReg(on="output"), NormStabilizer()]
    regs.append(NormStabilizer(layer="encoder.0"))
    for reg in regs:
        assert torch.isfinite(reg.penalty(ctx))
