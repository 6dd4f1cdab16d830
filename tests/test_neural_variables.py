"""VT and SAND on several variables: one network, one curve per variable."""

import copy

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fdaimpute as fi
from fdaimpute.multivariate import MultivariateIrregularData

torch = pytest.importorskip("torch")

# calibration_folds=None: the bands calibrated on the held-out subjects, no
# cross-fitted networks (which would multiply the fits)
FAST = dict(
    max_epochs=3,
    random_state=0,
    d_model=16,
    n_heads=2,
    dim_feedforward=32,
    calibration_folds=None,
)


@pytest.fixture(scope="module")
def coupled():
    return fi.simulate.nonlinear_coupling(n=150, split=(0.8, 0.0, 0.2), random_state=0)


@pytest.fixture(scope="module", params=["VTImputer", "SANDImputer"])
def fitted(request, coupled):
    return getattr(fi, request.param)(**FAST).fit(coupled.train.data)


def test_one_curve_per_variable_in_every_output(fitted, coupled):
    data = coupled.test.data
    n, g = len(data), fitted.grid_.size
    assert fitted.variables_ == ["x0", "x1"]
    assert fitted.module_config_["vt"]["n_variables"] == 2
    assert isinstance(fitted.base_, fi.MultivariatePACEImputer)
    assert fitted.base_weight_.shape == (2,) and fitted.noise_variance_.shape == (2,)
    curves = fitted.transform(data)
    assert curves.shape == (n, 2 * g) and np.isfinite(curves).all()
    assert_array_equal(fitted.transform_3d(data), curves.reshape(n, 2, g))
    assert np.asarray(fitted.derivative(data)).shape == (n, 2 * g)
    assert fitted.mean_.shape == (2 * g,)
    names = fitted.get_feature_names_out()
    assert names[0].startswith("x0:") and names[-1].startswith("x1:")
    # each observation read from its own variable's curve
    values = fitted.predict_at(data)
    assert isinstance(values, MultivariateIrregularData)
    on_grid = fitted.transform_3d(data, grid=np.unique(data.times))
    col = np.searchsorted(np.unique(data.times), data.times)
    assert_allclose(
        values.values, on_grid[data.subject_index, data.variable, col], atol=1e-9
    )
    assert fitted.encode(data).shape == (n, 16)
    frame = fitted.set_output(transform="pandas").transform(data)
    fitted.set_output(transform="default")
    assert list(frame.columns.names) == ["variable", "time"]


def _without_first_x1(data):
    """``data`` without the observations of ``x1`` of its first subject."""
    keep = ~((data.subject_index == 0) & (data.variable == 1))
    counts = np.bincount(data.subject_index[keep], minlength=len(data))
    return MultivariateIrregularData(
        data.times[keep],
        data.values[keep],
        data.variable[keep],
        np.concatenate([[0], np.cumsum(counts)]),
        data.variables,
        data.ids,
    )


def test_each_variable_has_bands_of_its_own_scale_wider_where_unobserved(
    fitted, coupled
):
    data = coupled.test.data
    curves, sd = fitted.transform(data, return_std=True)
    n, g = len(data), fitted.grid_.size
    assert fitted.error_head_.n_variables == 2
    assert sd.shape == curves.shape and (sd > 0).all()
    blocks = sd.reshape(n, 2, g)
    curves_3d, sd_3d = fitted.transform_3d(data, return_std=True)
    assert_array_equal(sd_3d, blocks)
    assert_array_equal(curves_3d, curves.reshape(n, 2, g))
    # x1 is the square of a path, scaled by 4: its errors are far larger
    # than x0's, and the bands say so
    assert np.median(blocks[:, 1]) > 3 * np.median(blocks[:, 0])
    # on another grid: the same bands, read between the model grid's points
    _, sd_on = fitted.transform(data, return_std=True, grid=fitted.grid_[::10])
    assert_allclose(sd_on.reshape(n, 2, -1), blocks[:, :, ::10], rtol=1e-6)
    # a subject's x1 never observed: its x1 band widens, the others' stay
    fewer = _without_first_x1(data)
    wider = fitted.transform(fewer, return_std=True)[1].reshape(n, 2, g)
    assert wider[0, 1].mean() > 1.2 * blocks[0, 1].mean()
    assert_allclose(wider[1:], blocks[1:], rtol=1e-5)


def test_a_variable_that_kept_its_base_has_the_bases_band_and_noise(fitted, coupled):
    data = coupled.test.data
    imp = copy.deepcopy(fitted)
    n, g = len(data), imp.grid_.size
    imp.base_weight_ = np.array([0.4, 0.4])  # the network on both
    own = imp.transform(data, return_std=True)[1].reshape(n, 2, g)
    imp.base_weight_ = np.array([0.0, 0.4])  # x0 kept its base
    mixed = imp.transform(data, return_std=True)[1].reshape(n, 2, g)
    base = imp.base_.transform(data, return_std=True, grid=imp.grid_)[1]
    assert_allclose(mixed[:, 0], base.reshape(n, 2, g)[:, 0])
    assert_allclose(mixed[:, 1], own[:, 1])
    assert not np.allclose(own[:, 0], mixed[:, 0])
    with pytest.raises(TypeError, match="one per variable|each variable"):
        imp.noise_variance_at([0.5])


def test_a_variable_never_seen_for_a_subject_is_imputed_from_the_others(
    fitted, coupled
):
    data = coupled.test.data
    fewer = _without_first_x1(data)
    both = fitted.transform_3d(data)
    one = fitted.transform_3d(fewer)
    assert np.isfinite(one).all()
    assert not np.allclose(one[0, 1], both[0, 1])
    assert_allclose(one[1:], both[1:], atol=1e-5)


def test_regularizers_train_a_network_of_several_variables(coupled):
    data = coupled.train.data
    regs = [fi.regularizers.Roughness(1e-3), fi.regularizers.LipReg(-1e-3)]
    imp = fi.SANDImputer(**dict(FAST, max_epochs=2, base=None), regularizers=regs)
    imp.fit(data)
    assert np.isfinite(imp.history_["reg/roughness"]).all()
    assert np.isfinite(imp.history_["reg/lipreg"]).all()
    assert np.isfinite(imp.transform(coupled.test.data)).all()


def test_what_several_variables_do_not_support_yet(coupled):
    data = coupled.train.data
    with pytest.raises(ValueError, match="base='kernel'"):
        fi.SANDImputer(base="kernel", **FAST).fit(data)
    imp = fi.VTImputer(**FAST).fit(data)
    part, _ = data.variable_data(0)
    with pytest.raises(TypeError, match="fitted on several variables"):
        imp.transform(part)


def _x0_alone(data):
    """Variable x0 of ``data``: as one variable, and as several with one."""
    part, _ = data.variable_data(0)
    variable = np.zeros(part.times.size, dtype=int)
    several = MultivariateIrregularData(
        part.times, part.values, variable, part.offsets, ["x0"], part.ids
    )
    return part, several


@pytest.mark.parametrize("base", [None, "auto"])
def test_one_variable_alone_is_the_univariate_network(coupled, base):
    # with a base: multivariate PACE of one variable is univariate PACE
    part, alone = _x0_alone(coupled.train.data)
    settings = dict(FAST, base=base, calibration_folds=None)
    several = fi.SANDImputer(**settings).fit(alone)
    one = fi.SANDImputer(**settings).fit(part)
    test, test_alone = _x0_alone(coupled.test.data)
    assert_allclose(several.transform(test_alone), one.transform(test), atol=1e-6)


def test_save_load_and_refit_on_one_variable(coupled, tmp_path):
    data = coupled.test.data
    imp = fi.SANDImputer(**FAST).fit(coupled.train.data)
    path = tmp_path / "sand.fdaimpute"
    imp.save(path)
    back = fi.SANDImputer.load(path)
    assert_allclose(back.transform(data), imp.transform(data), atol=1e-6)
    # a fit on one variable after one on several starts afresh, warm or not
    part, _ = coupled.train.data.variable_data(0)
    imp.set_params(warm_start=True, base=None, calibration_folds=None).fit(part)
    assert not hasattr(imp, "variables_")
    assert imp.transform(part).shape == (len(part), imp.grid_.size)


def test_each_variable_mixes_the_base_by_its_own_weight(fitted, coupled):
    # a weight of 0 on a variable gives the base's curves there, whatever
    # the network does on the other
    imp = copy.deepcopy(fitted)
    data = coupled.test.data
    base = imp.base_.transform_3d(data, grid=imp.grid_)
    for name, gate in imp.module_.named_parameters():
        if name.split(".")[-1] == "base_gate":
            gate.data = torch.tensor([0.0, 0.7])
    curves = imp.transform_3d(data)
    assert_allclose(curves[:, 0], base[:, 0], rtol=1e-5, atol=1e-5)
    assert np.abs(curves[:, 1] - base[:, 1]).max() > 1e-2


@pytest.mark.parametrize("name", ["VTImputer", "SANDImputer"])
def test_a_base_kept_on_every_variable_is_refitted_on_every_subject(name, coupled):
    # a learning rate too small to move any weight beats multivariate PACE
    # on neither variable: the imputer is then the base, fitted on every
    # training subject as MultivariatePACEImputer(random_state=0) is
    params = dict(FAST, lr=1e-12, max_epochs=1)
    fitted = getattr(fi, name)(**params).fit(coupled.train.data)
    assert fitted.best_epoch_ == -1
    assert_array_equal(fitted.base_weight_, [0.0, 0.0])
    pace = fi.MultivariatePACEImputer(random_state=0).fit(coupled.train.data)
    test = coupled.test.data
    assert_allclose(
        fitted.transform(test),
        pace.transform(test, grid=fitted.grid_),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.fixture(scope="module")
def with_covariates():
    sim = fi.simulate.multivariate_gaussian(
        n=150, n_variables=2, covariates=True, random_state=1
    )
    names = list(sim.train.data.covariates)
    imp = fi.VTImputer(**FAST, covariates=names).fit(sim.train.data)
    return imp, sim.test.data


def test_the_network_and_its_base_read_the_subjects_covariates(with_covariates):
    imp, data = with_covariates
    imp = copy.deepcopy(imp)
    assert imp.covariate_columns_ == ["age", "group=b", "group=c"]
    assert imp.module_config_["vt"]["n_covariates"] == 3
    assert imp.base_.covariates == ["age", "group"]
    # the base computed in the network from its inputs is the base itself
    for name, gate in imp.module_.named_parameters():
        if name.split(".")[-1] == "base_gate":
            gate.data = torch.zeros(2)
    assert_allclose(
        imp.transform(data),
        imp.base_.transform(data, grid=imp.grid_),
        rtol=1e-5,
        atol=1e-5,
    )
    for name, gate in imp.module_.named_parameters():
        if name.split(".")[-1] == "base_gate":
            gate.data = torch.ones(2)  # the network alone
    curves = imp.transform(data)
    older = data.take(np.arange(len(data)))
    older.covariates = {**data.covariates, "age": data.covariates["age"] + 20.0}
    moved = imp.transform(older)
    assert np.abs(moved - curves).max() > 1e-3
    # each subject's curves depend on its own covariates only
    assert_allclose(imp.transform(data.take([2, 0])), curves[[2, 0]], atol=1e-5)


def test_a_network_with_covariates_and_its_base_saves_and_loads(
    with_covariates, tmp_path
):
    imp, data = with_covariates
    imp = copy.deepcopy(imp)
    for name, gate in imp.module_.named_parameters():
        if name.split(".")[-1] == "base_gate":
            gate.data = torch.tensor([0.3, 0.6])  # the base and the network mixed
    path = tmp_path / "vt.fdaimpute"
    imp.save(path)
    back = fi.VTImputer.load(path)
    assert back.covariate_columns_ == imp.covariate_columns_
    assert_allclose(back.transform(data), imp.transform(data), atol=1e-6)
    # the error model of several variables too
    assert back.error_head_.n_variables == 2
    assert_allclose(
        back.transform(data, return_std=True)[1],
        imp.transform(data, return_std=True)[1],
        rtol=1e-6,
    )


def test_covariates_are_checked_where_they_are_read(with_covariates, coupled):
    imp, data = with_covariates
    without = data.take(np.arange(len(data)))
    without.covariates = {"age": data.covariates["age"]}
    with pytest.raises(ValueError, match="group"):
        imp.transform(without)
    part, _ = coupled.train.data.variable_data(0)
    with pytest.raises(ValueError, match="reads subject covariates"):
        fi.SANDImputer(**FAST, covariates=["age"]).fit(part)
    with pytest.raises(ValueError, match="distinct column names"):
        fi.VTImputer(**FAST, covariates=["age", "age"]).fit(data)


def test_a_long_frame_of_one_variable_brings_its_covariates():
    # the training subjects: each level of the group is held by enough of them
    data = fi.simulate.multivariate_gaussian(
        n=150, n_variables=2, covariates=True, random_state=1
    ).train.data
    part, rows = data.variable_data(0)
    frame = part.to_long().merge(
        pd.DataFrame(
            {"id": data.ids[rows], **{k: v[rows] for k, v in data.covariates.items()}}
        ),
        on="id",
    )
    net = fi.SANDImputer(**FAST, covariates=["age", "group"]).fit(frame)
    assert net.variables_ == ["value"]
    assert net.covariate_columns_ == ["age", "group=b", "group=c"]
    curves = net.transform(frame)
    assert curves.shape == (len(part), net.grid_.size) and np.isfinite(curves).all()
    with pytest.raises(ValueError, match="'group'.*not in the table"):
        net.transform(frame.drop(columns="group"))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["VTImputer", "SANDImputer"])
def test_several_variables_with_covariates_train_on_cuda_and_reload_on_cpu(
    name, tmp_path
):
    sim = fi.simulate.multivariate_gaussian(
        n=150, n_variables=2, covariates=True, random_state=1
    )
    names = list(sim.train.data.covariates)
    # cuda_graph=True asks for a graph this fit cannot use: eager, said so
    with pytest.warns(UserWarning, match="training is eager"):
        imp = getattr(fi, name)(
            **FAST, covariates=names, device="cuda", cuda_graph=True
        ).fit(sim.train.data)
    assert imp.device_.type == "cuda" and not imp.cuda_graph_
    curves = imp.transform(sim.test.data)
    assert np.isfinite(curves).all()
    imp.save(tmp_path / "m.fdaimpute")
    back = getattr(fi, name).load(tmp_path / "m.fdaimpute")
    back.set_params(device="cpu")
    assert_allclose(back.transform(sim.test.data), curves, atol=1e-3)


def test_warm_start_on_several_variables_says_it_starts_afresh(coupled):
    imp = fi.VTImputer(**FAST, warm_start=True).fit(coupled.train.data)
    first = imp.transform(coupled.test.data)
    with pytest.warns(UserWarning, match="warm_start continues .* starts afresh"):
        imp.fit(coupled.train.data)
    assert imp.n_epochs_ == FAST["max_epochs"]
    assert_array_equal(imp.transform(coupled.test.data), first)
