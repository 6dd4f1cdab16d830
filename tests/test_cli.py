import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fdaimpute as fi
from fdaimpute.cli import _parse_value, main
from fdaimpute.persistence import load


@pytest.fixture
def long_csv(tmp_path):
    sim = fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0)
    df = sim.train.data.to_long(id="subject", time="age", value="bmi")
    df["subject"] = "s" + df["subject"].astype(str)
    df = df.iloc[::-1]  # subjects in reverse order of appearance
    path = tmp_path / "obs.csv"
    df.to_csv(path, index=False)
    return path, df


def test_impute_wide_keeps_ids_in_input_order(long_csv, tmp_path, capsys):
    path, df = long_csv
    out = tmp_path / "curves.csv"
    code = main(
        [
            "impute",
            str(path),
            "-o",
            str(out),
            "--grid",
            "0:1:11",
            "--id",
            "subject",
            "--time",
            "age",
            "--value",
            "bmi",
            "--method",
            "kernel",
        ]
    )
    assert code == 0
    curves = pd.read_csv(out)
    assert_array_equal(curves["id"], pd.unique(df["subject"]))
    assert curves.shape == (len(pd.unique(df["subject"])), 12)
    assert np.isfinite(curves.drop(columns="id").to_numpy()).all()
    data = fi.IrregularData.from_long(df, id="subject", time="age", value="bmi")
    expected = fi.KernelImputer(grid=np.linspace(0, 1, 11)).fit(data).transform(data)
    assert_allclose(curves.drop(columns="id").to_numpy(), expected)
    assert "Imputed" in capsys.readouterr().err


def test_impute_long_format(long_csv, tmp_path):
    path, df = long_csv
    out = tmp_path / "curves.csv"
    main(
        [
            "impute",
            str(path),
            "-o",
            str(out),
            "--grid",
            "5",
            "--format",
            "long",
            "--id",
            "subject",
            "--time",
            "age",
            "--value",
            "bmi",
        ]
    )
    curves = pd.read_csv(out)
    # The long output keeps the input's column names.
    assert list(curves.columns) == ["subject", "age", "bmi"]
    assert len(curves) == 5 * df["subject"].nunique()
    assert_array_equal(curves["subject"].iloc[::5], pd.unique(df["subject"]))


def test_impute_reports_bad_input_clearly(long_csv, tmp_path):
    path, _ = long_csv
    with pytest.raises(SystemExit, match="column 'id'.*not in the table"):
        main(["impute", str(path), "-o", str(tmp_path / "x.csv")])
    with pytest.raises(SystemExit, match="--grid"):
        main(
            [
                "impute",
                str(path),
                "-o",
                str(tmp_path / "x.csv"),
                "--grid",
                "a:b",
                "--id",
                "subject",
                "--time",
                "age",
                "--value",
                "bmi",
            ]
        )
    with pytest.raises(SystemExit, match="unknown method"):
        main(["impute", str(path), "-o", str(tmp_path / "x.csv"), "--method", "magic"])


def test_demo_prints_table_and_saves_png(tmp_path, capsys):
    png = tmp_path / "demo.png"
    assert main(["demo", "--n", "300", "--methods", "kernel", "--out", str(png)]) == 0
    text = capsys.readouterr().out
    assert "oracle" in text and "kernel" in text and "MSE / oracle" in text
    assert png.stat().st_size > 10_000


def test_demo_says_what_a_neural_imputer_kept(tmp_path, capsys):
    png = tmp_path / "demo.png"
    assert main(["demo", "--n", "200", "--methods", "vt", "--out", str(png)]) == 0
    text = capsys.readouterr().out
    assert "vt: 30 epochs" in text
    assert ("vt: returns PACE's curves" in text) != ("vt: kept its network" in text)


def test_help_lists_commands(capsys):
    assert main([]) == 1
    text = capsys.readouterr().out
    assert "demo" in text and "impute" in text


# the column names of long_csv, and the kernel (impute defaults to PACE)
NAMES = ["--id", "subject", "--time", "age", "--value", "bmi", "--method", "kernel"]


def _expected(df, est, **read):
    data = fi.IrregularData.from_long(df, id="subject", time="age", value="bmi", **read)
    return est.fit(data).transform(data)


def _wide(path):
    return pd.read_csv(path).drop(columns="id").to_numpy()


def test_duplicates_error_names_the_flag_that_averages_them(long_csv, tmp_path):
    _, df = long_csv
    dup = pd.concat([df, df.iloc[:1].assign(bmi=df["bmi"].iloc[0] + 1.0)])
    path = tmp_path / "dup.csv"
    dup.to_csv(path, index=False)
    out = tmp_path / "curves.csv"
    args = ["impute", str(path), "-o", str(out), "--grid", "0:1:11", *NAMES]
    with pytest.raises(SystemExit, match="rerun with --duplicates average") as err:
        main(args)
    assert "duplicates='average'" not in str(err.value)
    assert main([*args, "--duplicates", "average"]) == 0
    grid = np.linspace(0, 1, 11)
    expected = _expected(dup, fi.KernelImputer(grid=grid), duplicates="average")
    assert_allclose(_wide(out), expected)


def test_grid_beyond_the_data_suggests_extrapolate(long_csv, tmp_path):
    path, _ = long_csv
    out = tmp_path / "curves.csv"
    args = ["impute", str(path), "-o", str(out), "--grid=-0.5:1.5:9", *NAMES]
    with pytest.raises(SystemExit, match="rerun with --extrapolate"):
        main(args)
    assert main([*args, "--extrapolate"]) == 0
    assert np.isfinite(_wide(out)).all()


def test_method_mice(long_csv, tmp_path):
    path, df = long_csv
    out = tmp_path / "curves.csv"
    args = ["impute", str(path), "-o", str(out), "--grid", "0:1:11", *NAMES]
    assert main([*args, "--method", "mice", "--param", "max_iter=3"]) == 0
    est = fi.MICEImputer(grid=np.linspace(0, 1, 11), random_state=0, max_iter=3)
    assert_allclose(_wide(out), _expected(df, est))


@pytest.mark.parametrize(
    "text, value",
    [
        ("50", 50),
        ("0.1", 0.1),
        ("true", True),
        ("False", False),
        ("null", None),
        ("[1, 2]", [1, 2]),
        ("auto", "auto"),
        ("", ""),
    ],
)
def test_param_values_are_json_or_text(text, value):
    assert _parse_value(text) == value
    assert type(_parse_value(text)) is type(value)


def test_params_from_flags_and_file(long_csv, tmp_path):
    path, df = long_csv
    out = tmp_path / "curves.csv"
    grid = np.linspace(0, 1, 11)
    args = ["impute", str(path), "-o", str(out), "--grid", "0:1:11", *NAMES]
    main([*args, "--param", "bandwidth=0.1", "--param", "shrinkage=0"])
    expected = _expected(df, fi.KernelImputer(grid=grid, bandwidth=0.1, shrinkage=0))
    assert_allclose(_wide(out), expected)
    assert not np.allclose(expected, _expected(df, fi.KernelImputer(grid=grid)))
    settings = tmp_path / "settings.json"
    settings.write_text('{"bandwidth": 0.05, "kernel": "epanechnikov"}')
    # --param overrides the file.
    main([*args, "--params-file", str(settings), "--param", "bandwidth=0.2"])
    est = fi.KernelImputer(grid=grid, bandwidth=0.2, kernel="epanechnikov")
    assert_allclose(_wide(out), _expected(df, est))


def test_params_from_yaml_file(long_csv, tmp_path, monkeypatch):
    path, df = long_csv
    out = tmp_path / "curves.csv"
    settings = tmp_path / "settings.yaml"
    settings.write_text("bandwidth: 0.1\nshrinkage: 0.0\n")
    args = ["impute", str(path), "-o", str(out), "--grid", "0:1:11", *NAMES]
    args += ["--params-file", str(settings)]
    try:
        import yaml  # noqa: F401
    except ImportError:
        pass
    else:
        main(args)
        est = fi.KernelImputer(grid=np.linspace(0, 1, 11), bandwidth=0.1, shrinkage=0)
        assert_allclose(_wide(out), _expected(df, est))
    monkeypatch.setitem(__import__("sys").modules, "yaml", None)
    with pytest.raises(SystemExit, match="needs PyYAML.*or write the parameters"):
        main(args)


def test_bad_params_are_reported_with_the_valid_names(long_csv, tmp_path, capsys):
    path, _ = long_csv
    args = ["impute", str(path), "-o", str(tmp_path / "x.csv"), *NAMES]
    with pytest.raises(SystemExit, match="unknown parameter.*bandwith") as err:
        main([*args, "--param", "bandwith=0.1"])
    assert "valid: bandwidth, extrapolate, keep_observed, kernel" in str(err.value)
    assert "Read" not in capsys.readouterr().err  # refused before reading the data
    with pytest.raises(SystemExit, match="for --method mice; valid: extrapolate"):
        main([*args, "--method", "mice", "--param", "bandwidth=0.1"])
    with pytest.raises(SystemExit, match="key=value"):
        main([*args, "--param", "bandwidth"])
    with pytest.raises(SystemExit, match="--grid"):
        main([*args, "--param", "grid=11"])
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(SystemExit, match="mapping"):
        main([*args, "--params-file", str(bad)])
    bad.write_text("{bandwidth: 1")
    with pytest.raises(SystemExit, match="as JSON"):
        main([*args, "--params-file", str(bad)])
    with pytest.raises(SystemExit, match="got 'triangle'"):
        main([*args, "--param", "kernel=triangle"])


def test_version_prints_the_package_version(capsys):
    from fdaimpute import __version__
    from fdaimpute.cli import main

    main(["--version"])
    assert capsys.readouterr().out.strip() == __version__


def test_impute_without_a_method_uses_auto(long_csv, tmp_path):
    path, df = long_csv
    out = tmp_path / "curves.csv"
    quick = ["--param", "n_folds=1"]  # one fold of hidden points: a quick test
    main(["impute", str(path), "-o", str(out), "--grid", "0:1:11", *NAMES[:6], *quick])
    grid = np.linspace(0, 1, 11)
    expected = fi.AutoImputer(grid=grid, random_state=0, n_folds=1)
    assert_allclose(_wide(out), _expected(df, expected))


@pytest.mark.parametrize("method", ["pace", "kernel", "vt"])
def test_fit_then_impute_with_the_saved_model(method, long_csv, tmp_path, capsys):
    path, df = long_csv
    model = tmp_path / "model.fdai"
    fit = ["fit", str(path), "--save", str(model), "--method", method, *NAMES[:6]]
    if method == "vt":
        fit += ["--epochs", "2", "--param", "d_model=8", "--param", "n_heads=1"]
    assert main([*fit, "--grid", "0:1:11"]) == 0
    assert "Saved" in capsys.readouterr().err
    out = tmp_path / "curves.csv"
    # new subjects: a different file than the one fitted
    new = df[df["subject"].isin(pd.unique(df["subject"])[:7])]
    new_path = tmp_path / "new.csv"
    new.to_csv(new_path, index=False)
    assert (
        main(
            ["impute", str(new_path), "--model", str(model), "-o", str(out), *NAMES[:6]]
        )
        == 0
    )
    est = load(model)
    data = fi.IrregularData.from_long(new, id="subject", time="age", value="bmi")
    assert_allclose(_wide(out), est.transform(data))
    assert_array_equal(pd.read_csv(out)["id"], pd.unique(new["subject"]))
    # the model's grid unless --grid says otherwise
    assert _wide(out).shape[1] == 11
    main(
        [
            "impute",
            str(new_path),
            "--model",
            str(model),
            "-o",
            str(out),
            "--grid",
            "0:1:5",
            *NAMES[:6],
        ]
    )
    assert _wide(out).shape[1] == 5


def test_fit_with_python_gives_the_same_model(long_csv, tmp_path):
    path, df = long_csv
    model = tmp_path / "auto.fdai"
    fit = ["fit", str(path), "--save", str(model), "--grid", "0:1:11", *NAMES[:6]]
    main([*fit, "--param", "n_folds=1"])
    data = fi.IrregularData.from_long(df, id="subject", time="age", value="bmi")
    grid = np.linspace(0, 1, 11)
    ours = fi.AutoImputer(grid=grid, random_state=0, n_folds=1).fit(data)
    assert load(model).method_ == ours.method_
    assert_allclose(load(model).transform(data), ours.transform(data))


def test_bad_models_and_misused_flags_are_reported(long_csv, tmp_path):
    path, _ = long_csv
    out = tmp_path / "curves.csv"
    impute = ["impute", str(path), "-o", str(out), *NAMES[:6], "--model"]
    text = tmp_path / "notes.txt"
    text.write_text("not a model\n")
    with pytest.raises(SystemExit, match="cannot load model .*not an fdaimpute model"):
        main([*impute, str(text)])
    good = tmp_path / "good.fdai"
    main(["fit", str(path), "--save", str(good), "--method", "kernel", *NAMES[:6]])
    cut = tmp_path / "cut.fdai"
    cut.write_bytes(good.read_bytes()[:-10])
    with pytest.raises(SystemExit, match="cannot load model .*truncated"):
        main([*impute, str(cut)])
    blob = bytearray(good.read_bytes())
    blob[-5] ^= 0xFF
    bad = tmp_path / "bad.fdai"
    bad.write_bytes(bytes(blob))
    with pytest.raises(SystemExit, match="corrupted"):
        main([*impute, str(bad)])
    other = good.read_bytes().replace(
        b'"format_version": 1', b'"format_version": 99', 1
    )
    later = tmp_path / "later.fdai"
    later.write_bytes(other)
    with pytest.raises(SystemExit, match="format version 99"):
        main([*impute, str(later)])
    with pytest.raises(SystemExit, match="cannot load model .*No such file"):
        main([*impute, str(tmp_path / "missing.fdai")])
    with pytest.raises(SystemExit, match="--method .* or --model, not both"):
        main([*impute, str(good), "--method", "pace"])
    with pytest.raises(SystemExit, match="--epochs applies to vt and sand, not auto"):
        main(["fit", str(path), "--save", str(good), "--epochs", "3", *NAMES[:6]])
    with pytest.raises(SystemExit, match="column 'id'.*not in the table"):
        main(["fit", str(path), "--save", str(good)])


def test_fit_refuses_methods_that_cannot_share_processes(
    long_csv, tmp_path, monkeypatch
):
    path, _ = long_csv
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit, match="auto does not train across processes"):
        main(["fit", str(path), "--save", str(tmp_path / "m.fdai"), *NAMES[:6]])
