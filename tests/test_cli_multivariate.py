"""The command line on several variables: --variable, --value a,b and --covariates."""

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fdaimpute as fi
from fdaimpute.cli import main
from fdaimpute.mpace import MultivariatePACEImputer
from fdaimpute.multivariate import MultivariateIrregularData

GRID = np.linspace(0.0, 1.0, 11)
# small and fixed, so that the fits are quick
FAST = ["--param", 'pace_params={"n_work_grid": 21}', "--param", "n_components=3"]
FAST_PARAMS = dict(pace_params={"n_work_grid": 21}, n_components=3)
COVARIATES = ["age", "group"]


@pytest.fixture(scope="module")
def long_table():
    sim = fi.simulate.multivariate_gaussian(n=120, covariates=True, random_state=0)
    df = sim.train.data.to_long(id="subject", time="age_at", variable="lab")
    df["subject"] = "s" + df["subject"].astype(str)
    return df.iloc[::-1].reset_index(drop=True)  # subjects in reverse order


def _in_memory(data, covariates=None):
    return MultivariatePACEImputer(
        grid=GRID, random_state=0, covariates=covariates, **FAST_PARAMS
    ).fit(data)


def _run(*argv):
    return main([str(a) for a in argv])


COLUMNS = ["--id", "subject", "--time", "age_at"]


def test_variable_column_and_covariates_equal_the_in_memory_fit(
    long_table, tmp_path, capsys
):
    path, out = tmp_path / "labs.csv", tmp_path / "curves.csv"
    long_table.to_csv(path, index=False)
    code = _run(
        "impute", path, "-o", out, "--method", "mpace", "--variable", "lab",
        "--covariates", "age,group", "--grid", "0:1:11", "--std", *COLUMNS, *FAST,
    )  # fmt: skip
    assert code == 0
    got = pd.read_csv(out)
    data = MultivariateIrregularData.from_long(
        long_table, "subject", "age_at", "lab", covariates=COVARIATES
    )
    imp = _in_memory(data, COVARIATES)
    curves, std = imp.transform(data, return_std=True)
    labels = [f"{v}:t={t:.10g}" for v in imp.variables_ for t in GRID]
    assert got.columns.tolist() == ["subject", *labels, *(f"std({c})" for c in labels)]
    assert_array_equal(got["subject"], pd.unique(long_table["subject"]))
    assert_allclose(got[labels].to_numpy(), curves, rtol=0, atol=1e-10)
    assert_allclose(got.iloc[:, 1 + len(labels) :].to_numpy(), std, atol=1e-10)
    assert "3 variables" in capsys.readouterr().err


def test_value_columns_in_long_format_equal_the_in_memory_fit(long_table, tmp_path):
    wide = long_table.pivot_table(
        index=["subject", "age_at"], columns="lab", values="value", sort=False
    ).reset_index()
    wide.columns.name = None
    path, out = tmp_path / "labs.csv", tmp_path / "curves.csv"
    wide.to_csv(path, index=False)
    _run(
        "impute", path, "-o", out, "--method", "MPACE", "--value", "x0,x1,x2",
        "--grid", "0:1:11", "--format", "long", *COLUMNS, *FAST,
    )  # fmt: skip
    got = pd.read_csv(out)
    assert got.columns.tolist() == ["subject", "variable", "age_at", "value"]
    data = MultivariateIrregularData.from_columns(
        wide, ["x0", "x1", "x2"], "subject", "age_at"
    )
    curves = _in_memory(data).transform_3d(data)  # (n, p, grid)
    n = len(data)
    assert_array_equal(got["subject"], np.repeat(data.ids, 3 * GRID.size))
    assert_array_equal(got["variable"], np.tile(np.repeat(["x0", "x1", "x2"], 11), n))
    assert_allclose(got["age_at"], np.tile(GRID, 3 * n))
    assert_allclose(got["value"], curves.ravel(), rtol=0, atol=1e-10)


def test_fit_save_then_impute_with_the_model_and_parquet_output(long_table, tmp_path):
    pytest.importorskip("pyarrow")
    path, model = tmp_path / "labs.parquet", tmp_path / "labs.fdai"
    long_table.to_parquet(path, index=False)
    _run(
        "fit", path, "--save", model, "--method", "mpace", "--variable", "lab",
        "--covariates", "age,group", "--grid", "0:1:11", *COLUMNS, *FAST,
    )  # fmt: skip
    new = long_table[long_table["subject"].isin(["s3", "s7", "s11"])]
    new_path, out = tmp_path / "new.csv", tmp_path / "curves.parquet"
    new.to_csv(new_path, index=False)
    # the columns, the variable column and the covariates come from the model
    _run("impute", new_path, "--model", model, "-o", out, "--std")
    got = pd.read_parquet(out)
    data = MultivariateIrregularData.from_long(
        long_table, "subject", "age_at", "lab", covariates=COVARIATES
    )
    imp = _in_memory(data, COVARIATES)
    subset = MultivariateIrregularData.from_long(
        new, "subject", "age_at", "lab", covariates=COVARIATES
    )
    curves, std = imp.transform(subset, return_std=True)
    labels = [f"{v}:t={t:.10g}" for v in imp.variables_ for t in GRID]
    assert_array_equal(got["subject"], subset.ids)
    assert_allclose(got[labels].to_numpy(), curves, rtol=0, atol=1e-10)
    assert_allclose(got[[f"std({c})" for c in labels]].to_numpy(), std, atol=1e-10)
    loaded = fi.BaseImputer.load(model)
    assert loaded.covariates == COVARIATES
    assert_allclose(loaded.transform(subset), curves, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", ["kernel", "mice"])
def test_kernel_and_mice_take_several_variables(method, long_table, tmp_path):
    path, out = tmp_path / "labs.csv", tmp_path / "curves.csv"
    long_table.to_csv(path, index=False)
    _run(
        "impute", path, "-o", out, "--method", method, "--variable", "lab",
        "--grid", "0:1:11", *COLUMNS,
    )  # fmt: skip
    got = pd.read_csv(out)
    data = MultivariateIrregularData.from_long(long_table, "subject", "age_at", "lab")
    est = fi.KernelImputer() if method == "kernel" else fi.MICEImputer(random_state=0)
    curves = est.set_params(grid=GRID).fit(data).transform(data)
    assert_allclose(got.drop(columns="subject").to_numpy(), curves, rtol=0, atol=1e-10)
    assert got.columns[1] == f"{data.variables[0]}:t=0" == "x2:t=0"
    # --covariates needs a method whose means use them
    with pytest.raises(SystemExit, match="does not use subject covariates"):
        _run(
            "impute", path, "-o", out, "--force", "--method", method,
            "--variable", "lab", "--covariates", "age", *COLUMNS,
        )  # fmt: skip


def test_sand_takes_several_variables_and_covariates(long_table, tmp_path):
    pytest.importorskip("torch")
    path, out = tmp_path / "labs.csv", tmp_path / "curves.csv"
    long_table.to_csv(path, index=False)
    _run(
        "impute", path, "-o", out, "--method", "sand", "--variable", "lab",
        "--covariates", "age,group", "--grid", "0:1:11", "--param", "max_epochs=2",
        "--param", "d_model=16", "--param", "n_heads=2",
        "--param", "calibration_folds=None", "--param", "base=None", *COLUMNS,
    )  # fmt: skip
    got = pd.read_csv(out)
    data = MultivariateIrregularData.from_long(
        long_table, "subject", "age_at", "lab", covariates=COVARIATES
    )
    est = fi.SANDImputer(
        grid=GRID,
        max_epochs=2,
        d_model=16,
        n_heads=2,
        # the network alone, its error model not cross-fitted: the base reading
        # the covariates is tested in test_neural_variables
        calibration_folds=None,
        base=None,
        random_state=0,
        covariates=COVARIATES,
    )
    curves = est.fit(data).transform(data)
    assert est.covariate_columns_ == ["age", "group=b", "group=c"]
    assert got.columns[1] == "x2:t=0" and got.shape == (len(data), 1 + 3 * GRID.size)
    assert_allclose(got.drop(columns="subject").to_numpy(), curves, rtol=0, atol=1e-6)


def _error(capsys, *argv):
    with pytest.raises(SystemExit) as info:
        _run(*argv)
    return str(info.value.code) + capsys.readouterr().err


def test_misused_flags_name_the_problem(long_table, tmp_path, capsys):
    path, out = tmp_path / "labs.csv", tmp_path / "curves.csv"
    long_table.to_csv(path, index=False)
    base = ("impute", path, "-o", out, *COLUMNS)
    message = _error(capsys, *base, "--method", "pace", "--variable", "lab")
    assert "--variable" in message and "pace imputes one variable" in message
    assert "mpace" in message
    message = _error(capsys, *base, "--method", "face", "--value", "a,b")
    assert "several --value columns" in message
    message = _error(capsys, *base, "--method", "pace", "--covariates", "age")
    assert "--covariates" in message and "--method mpace" in message
    message = _error(capsys, *base, "--variable", "lab", "--value", "a,b")
    assert "--variable lab reads one value column" in message
    message = _error(
        capsys, *base, "--method", "mpace", "--variable", "labs", "--grid", "5"
    )
    assert "'labs'" in message and "variable column" in message
    message = _error(
        capsys, *base, "--method", "mpace", "--variable", "lab", "--covariates",
        "age,weight",
    )  # fmt: skip
    assert "'weight' (the covariate column) is not in" in message
    assert "'group'" in message
    # a covariate that changes within a subject names the subject
    changing = long_table.copy()
    changing.loc[changing.index[0], "age"] += 1
    changing.to_csv(path, index=False)
    message = _error(
        capsys, *base, "--method", "mpace", "--variable", "lab", "--covariates",
        "age", "--force",
    )  # fmt: skip
    subject = changing["subject"].iloc[0]
    assert repr(subject) in message or subject in message
    assert "not constant" in message


def test_a_variable_column_without_the_flag_is_not_pooled(long_table, tmp_path, capsys):
    path, out = tmp_path / "labs.csv", tmp_path / "curves.csv"
    default = long_table.rename(
        columns={"subject": "id", "age_at": "time", "lab": "variable"}
    )
    default.to_csv(path, index=False)
    for method in ("pace", "mpace"):
        message = _error(capsys, "impute", path, "-o", out, "--method", method)
        assert "column 'variable'" in message and "--variable variable" in message
    assert not out.exists()
    # under another name the repeated times say where to look
    other = tmp_path / "other.csv"
    long_table.to_csv(other, index=False)
    message = _error(capsys, "impute", other, "-o", out, "--method", "pace", *COLUMNS)
    assert "two observations at" in message and "--variable COLUMN" in message


def test_a_univariate_model_refuses_several_variables(long_table, tmp_path, capsys):
    one = long_table[long_table["lab"] == "x1"]
    path, model = tmp_path / "one.csv", tmp_path / "one.fdai"
    one.to_csv(path, index=False)
    _run("fit", path, "--save", model, "--method", "kernel", *COLUMNS)
    message = _error(
        capsys, "impute", path, "--model", model, "-o", tmp_path / "o.csv",
        "--variable", "lab",
    )  # fmt: skip
    assert "fitted on several variables" in message


def test_covariates_named_as_a_parameter_are_read_as_with_the_flag(
    long_table, tmp_path, capsys
):
    path = tmp_path / "labs.csv"
    long_table.to_csv(path, index=False)
    common = ("--method", "mpace", "--variable", "lab", "--grid", "0:1:11")
    outs = []
    for how in (
        ("--covariates", "age,group"),
        ("--param", 'covariates=["age","group"]'),
    ):
        outs.append(tmp_path / f"{len(outs)}.csv")
        _run("impute", path, "-o", outs[-1], *common, *how, *COLUMNS, *FAST)
    assert outs[0].read_bytes() == outs[1].read_bytes()
    message = _error(
        capsys, "impute", path, "-o", tmp_path / "x.csv", *common, "--covariates",
        "age", "--param", 'covariates=["group"]', *COLUMNS,
    )  # fmt: skip
    assert "name different columns" in message


def test_the_help_lists_every_method_that_takes_several_variables(capsys):
    from fdaimpute._cli.methods import COVARIATE_METHODS, MULTIVARIATE_METHODS

    with pytest.raises(SystemExit):
        _run("impute", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert f"several variables: {', '.join(MULTIVARIATE_METHODS)}" in text
    assert f"(methods: {', '.join(COVARIATE_METHODS)})" in text
