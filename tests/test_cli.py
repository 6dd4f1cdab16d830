import json

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fdaimpute as fi
from fdaimpute._cli.params import parse_value
from fdaimpute.cli import main
from fdaimpute.persistence import FORMAT_VERSION, load


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
    # the wide output names its id column like the input's
    assert curves.columns[0] == "subject"
    assert_array_equal(curves["subject"], pd.unique(df["subject"]))
    assert curves.shape == (len(pd.unique(df["subject"])), 12)
    assert np.isfinite(curves.drop(columns="subject").to_numpy()).all()
    data = fi.IrregularData.from_long(df, id="subject", time="age", value="bmi")
    expected = fi.KernelImputer(grid=np.linspace(0, 1, 11)).fit(data).transform(data)
    assert_allclose(curves.drop(columns="subject").to_numpy(), expected)
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
            "--method",
            "kernel",
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
    # 80 subjects: the demo's 30 epochs and its two messages as with more
    assert main(["demo", "--n", "80", "--methods", "vt", "--out", str(png)]) == 0
    text = capsys.readouterr().out
    assert "vt: 30 epochs" in text
    assert ("vt: returns PACE's curves" in text) != ("vt: kept its network" in text)


def test_demo_draws_one_band_for_the_most_accurate_method(
    tmp_path, capsys, monkeypatch
):
    from fdaimpute import cli, plotting

    drawn = {}

    def spy(data, curves, grid, **kwargs):
        drawn.update(curves=curves, std=kwargs["std"])
        return real(data, curves, grid, **kwargs)

    real = plotting.plot_curves
    monkeypatch.setattr(plotting, "plot_curves", spy)
    png = tmp_path / "demo.png"
    assert (
        cli.main(["demo", "--n", "300", "--methods", "kernel,pace", "--out", str(png)])
        == 0
    )
    text = capsys.readouterr().out
    mse = {
        name: float(text.split(f"\n{name} ")[1].split()[0])
        for name in ("kernel", "pace")
    }
    best = min(mse, key=mse.get)
    assert list(drawn["curves"]) == ["kernel", "pace"]
    assert list(drawn["std"]) == [best]
    assert f"95% band of the curve: {best}" in text


def test_demo_draws_identical_curves_once():
    from fdaimpute.cli import _distinct_curves

    a, b = np.zeros((2, 3)), np.ones((2, 3))
    shown = _distinct_curves({"pace": a, "kernel": b, "vt": a.copy(), "sand": a})
    assert list(shown) == ["pace = vt = sand", "kernel"]
    assert shown["kernel"] is b


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
    return pd.read_csv(path).iloc[:, 1:].to_numpy()


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
    assert main([*args, "--duplicates", "average"]) == 0  # nothing written before
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
    assert parse_value(text) == value
    assert type(parse_value(text)) is type(value)


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
    main([*args, "--params-file", str(settings), "--param", "bandwidth=0.2", "--force"])
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


def test_the_command_freezes_the_heap_before_exit_and_main_does_not():
    import subprocess
    import sys

    # the command skips Python's last collections of every object it loaded;
    # main, which tests and callers run in a process that goes on, leaves
    # the collector alone
    script = (
        "import gc, sys; from fdaimpute.cli import command, main; "
        "main(['--version']); print(gc.get_freeze_count()); "
        "sys.argv = ['fdaimpute', '--version']; status = command(); "
        "print(gc.get_freeze_count() > 0, status)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    lines = done.stdout.split()
    assert lines[1] == "0" and lines[-2:] == ["True", "0"]
    status = subprocess.run(
        [sys.executable, "-m", "fdaimpute", "impute"], capture_output=True
    )
    assert status.returncode == 2  # argparse's refusal passes through


def test_impute_without_a_method_uses_auto(long_csv, tmp_path, capsys):
    path, df = long_csv
    out = tmp_path / "curves.csv"
    main(["impute", str(path), "-o", str(out), "--grid", "0:1:11", *NAMES[:6]])
    grid = np.linspace(0, 1, 11)
    expected = fi.AutoImputer(grid=grid, random_state=0)
    assert_allclose(_wide(out), _expected(df, expected))
    # the message names the mix it imputed with
    mix = ", ".join(
        f"{k} {w:.2f}"
        for k, w in sorted(expected.weights_.items(), key=lambda kv: -kv[1])
    )
    assert f"with auto ({mix}) in" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["pace", "kernel", "vt"])
def test_fit_then_impute_with_the_saved_model(method, long_csv, tmp_path, capsys):
    path, df = long_csv
    model = tmp_path / "model.fdai"
    fit = ["fit", str(path), "--save", str(model), "--method", method, *NAMES[:6]]
    if method == "vt":
        fit += ["--epochs", "2", "--param", "d_model=8", "--param", "n_heads=1"]
        # the error model from the held-out subjects alone: cross-fitting
        # (five more networks and PACE bases) is not what this test checks
        fit += ["--param", "calibration_folds=null"]
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
    assert_array_equal(pd.read_csv(out)["subject"], pd.unique(new["subject"]))
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
            "--force",
        ]
    )
    assert _wide(out).shape[1] == 5


def test_fit_with_python_gives_the_same_model(long_csv, tmp_path):
    path, df = long_csv
    model = tmp_path / "auto.fdai"
    fit = ["fit", str(path), "--save", str(model), "--grid", "0:1:11", *NAMES[:6]]
    main(fit)
    data = fi.IrregularData.from_long(df, id="subject", time="age", value="bmi")
    grid = np.linspace(0, 1, 11)
    ours = fi.AutoImputer(grid=grid, random_state=0).fit(data)
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
    version = f'"format_version": {FORMAT_VERSION}'.encode()
    other = good.read_bytes().replace(version, b'"format_version": 9', 1)
    later = tmp_path / "later.fdai"
    later.write_bytes(other)
    with pytest.raises(SystemExit, match="format version 9"):
        main([*impute, str(later)])
    with pytest.raises(SystemExit, match="cannot load model .*No such file"):
        main([*impute, str(tmp_path / "missing.fdai")])
    with pytest.raises(SystemExit, match="--method .* or --model, not both"):
        main([*impute, str(good), "--method", "pace"])
    with pytest.raises(SystemExit, match="--epochs applies to vt and sand, not auto"):
        main(
            ["fit", str(path), "--save", str(tmp_path / "e.fdai"), "--epochs", "3"]
            + NAMES[:6]
        )
    with pytest.raises(SystemExit, match="column 'id'.*not in the table"):
        main(["fit", str(path), "--save", str(tmp_path / "new.fdai")])


def test_fit_refuses_methods_that_cannot_share_processes(
    long_csv, tmp_path, monkeypatch
):
    path, _ = long_csv
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit, match="auto does not train across processes"):
        main(["fit", str(path), "--save", str(tmp_path / "m.fdai"), *NAMES[:6]])


# --------------------------------------------------------------------------- #
# ids, output files, saved column names, messages in the command line's words


def test_ids_that_read_as_one_number_stay_two_subjects(tmp_path):
    sim = fi.simulate.sand_paper(n=222, n_obs="8-12", random_state=1)
    df = sim.train.data.to_long()
    n = df["id"].nunique()
    # "007" and "7", "009" and "9", ...: equal as numbers, two subjects as text
    labels = {i: f"{i // 2:03d}" if i % 2 else str(i // 2) for i in range(n)}
    df["id"] = df["id"].map(labels)
    path = tmp_path / "ids.csv"
    df.to_csv(path, index=False)
    out = tmp_path / "out.csv"
    main(["impute", str(path), "-o", str(out), "--method", "kernel"])
    got = pd.read_csv(out, dtype={"id": str})
    assert len(got) == n
    assert got["id"].tolist() == list(pd.unique(df["id"]))
    assert {"007", "7"} <= set(got["id"])


def test_existing_outputs_need_force_and_inputs_are_never_outputs(long_csv, tmp_path):
    path, _ = long_csv
    before = path.read_bytes()
    out = tmp_path / "curves.csv"
    out.write_text("keep me\n")
    args = ["impute", str(path), "-o", str(out), *NAMES]
    with pytest.raises(SystemExit, match="exists; pass --force"):
        main(args)
    assert out.read_text() == "keep me\n"
    assert main([*args, "--force"]) == 0
    assert out.read_text() != "keep me\n"
    for flags in ([], ["--force"]):
        with pytest.raises(SystemExit, match="also an input"):
            main(["impute", str(path), "-o", str(path), *NAMES, *flags])
        with pytest.raises(SystemExit, match="also an input"):
            main(["fit", str(path), "--save", str(path), *NAMES, *flags])
    assert path.read_bytes() == before
    model = tmp_path / "model.fdai"
    model.write_bytes(b"old")
    fit = ["fit", str(path), "--save", str(model), *NAMES]
    with pytest.raises(SystemExit, match="--save .* exists; pass --force"):
        main(fit)
    assert model.read_bytes() == b"old"
    assert main([*fit, "--force"]) == 0
    assert load(model).grid_.size == 101
    # the model file is an input of impute --model
    with pytest.raises(SystemExit, match="also an input"):
        main(["impute", str(path), "--model", str(model), "-o", str(model)])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "curves.csv",
        "model.fdai",
        "obs.csv",
    ]


def test_output_problems_are_found_before_reading_or_fitting(
    long_csv, tmp_path, capsys, monkeypatch
):
    path, _ = long_csv
    missing = tmp_path / "no" / "such" / "folder" / "curves.csv"
    with pytest.raises(SystemExit, match="folder .* does not exist; create it"):
        main(["impute", str(path), "-o", str(missing), *NAMES])
    with pytest.raises(SystemExit, match="does not exist"):
        main(["fit", str(path), "--save", str(missing), *NAMES])
    with pytest.raises(SystemExit, match="is a folder"):
        main(["impute", str(path), "-o", str(tmp_path), *NAMES])
    assert "Read" not in capsys.readouterr().err
    # a grid whose output could not fit: before fitting
    out = tmp_path / "curves.csv"
    with pytest.raises(SystemExit, match="--grid .* more than is available"):
        main(
            [
                "impute",
                str(path),
                "-o",
                str(out),
                *NAMES,
                "--grid",
                "0:1:1000000000000000",
            ]
        )
    with pytest.raises(SystemExit, match="--grid .* more than is available"):
        main(["impute", str(path), "-o", str(out), *NAMES, "--grid", "1000000000000"])
    import shutil

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(
        "fdaimpute._cli.output.shutil.disk_usage",
        lambda folder: usage._replace(free=1000),
    )
    with pytest.raises(SystemExit, match="would take at least .* free in"):
        main(["impute", str(path), "-o", str(out), *NAMES])
    assert "Fitted" not in capsys.readouterr().err
    assert not out.exists()


def test_output_is_written_a_block_at_a_time_and_atomically(
    long_csv, tmp_path, monkeypatch
):
    from fdaimpute._cli import output as _cli_output

    path, df = long_csv
    whole = tmp_path / "whole.csv"
    main(["impute", str(path), "-o", str(whole), *NAMES, "--format", "long"])
    real = _cli_output.subject_blocks
    sizes = []

    def small_blocks(offsets, width):
        blocks = real(offsets, width, cells=7 * width)
        sizes.extend(hi - lo for lo, hi in blocks)
        return blocks

    monkeypatch.setattr(_cli_output, "subject_blocks", small_blocks)
    blocked = tmp_path / "blocked.csv"
    main(["impute", str(path), "-o", str(blocked), *NAMES, "--format", "long"])
    assert max(sizes) == 7 and len(sizes) == 8
    assert blocked.read_bytes() == whole.read_bytes()
    # a failure in the fourth block leaves the old file and no temporary file
    calls = {"n": 0}
    transform = fi.KernelImputer.transform

    def failing(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise MemoryError
        return transform(self, *args, **kwargs)

    monkeypatch.setattr(fi.KernelImputer, "transform", failing)
    with pytest.raises(SystemExit, match="ran out of memory .*nothing was written"):
        main(["impute", str(path), "-o", str(blocked), *NAMES, "--force"])
    assert blocked.read_bytes() == whole.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "blocked.csv",
        "obs.csv",
        "whole.csv",
    ]


def test_saved_model_remembers_the_column_names(long_csv, tmp_path):
    path, df = long_csv
    model = tmp_path / "model.fdai"
    main(["fit", str(path), "--save", str(model), *NAMES])
    out = tmp_path / "curves.csv"
    # no --id/--time/--value: the model's
    assert main(["impute", str(path), "--model", str(model), "-o", str(out)]) == 0
    curves = pd.read_csv(out)
    assert curves.columns[0] == "subject"
    data = fi.IrregularData.from_long(df, id="subject", time="age", value="bmi")
    assert_allclose(curves.iloc[:, 1:].to_numpy(), load(model).transform(data))
    # flags still win
    renamed = tmp_path / "renamed.csv"
    df.rename(columns={"subject": "who"}).to_csv(renamed, index=False)
    out2 = tmp_path / "curves2.csv"
    main(
        ["impute", str(renamed), "--model", str(model), "-o", str(out2), "--id", "who"]
    )
    assert pd.read_csv(out2).columns[0] == "who"


def test_method_names_ignore_case_and_std_help_names_the_banded_methods(
    long_csv, tmp_path, capsys
):
    path, df = long_csv
    out = tmp_path / "curves.csv"
    args = ["impute", str(path), "-o", str(out), *NAMES[:6], "--method", "KerNel"]
    assert main(args) == 0
    with pytest.raises(SystemExit):
        main(["impute", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "pace, face, mfpca, mpace, cnp, vt and sand" in text
    assert "WARNING: loading a pickle can run any code" in text


@pytest.mark.parametrize(
    "message, expected",
    [
        ("pass base=None to train alone", "pass --param base=null to train alone"),
        (
            "pass extrapolate=True, or extrapolate='clip' to hold it",
            "rerun with --extrapolate, or --param extrapolate=clip to hold it",
        ),
        ("use binning='auto' or an integer", "use --param binning=auto or an integer"),
        (
            "KernelImputer does not estimate uncertainty; use PACEImputer",
            "KernelImputer does not estimate uncertainty; use --method pace",
        ),
        ("MFPCAImputer: n_knots=3 is too small", "--param n_knots=3 is too small"),
        ("(return_std=True is not supported)", "(--std is not supported)"),
    ],
)
def test_library_advice_becomes_flags(message, expected):
    from fdaimpute._cli.messages import cli_message

    got = cli_message(message)
    if "does not estimate" in message:
        expected = "kernel does not estimate uncertainty; use --method pace"
    assert got == expected
    assert "Imputer" not in got and "='" not in got


class _OwnKernel(fi.KernelImputer):
    """An imputer class the model format cannot hold: pickled when allowed."""


def test_trust_model_is_needed_for_a_pickled_model(long_csv, tmp_path):
    from fdaimpute import persistence

    path, df = long_csv
    data = fi.IrregularData.from_long(df, id="subject", time="age", value="bmi")
    model = tmp_path / "own.fdai"
    with pytest.warns(UserWarning, match="saved as a pickle"):
        persistence.save(
            _OwnKernel().fit(data),
            model,
            allow_pickle=True,
            metadata={"id": "subject", "time": "age", "value": "bmi"},
        )
    out = tmp_path / "curves.csv"
    args = ["impute", str(path), "--model", str(model), "-o", str(out)]
    with pytest.raises(SystemExit, match="pickled .* --trust-model") as err:
        main(args)
    assert "load(path" not in str(err.value)
    assert not out.exists()
    assert main([*args, "--trust-model"]) == 0
    assert_allclose(
        pd.read_csv(out).iloc[:, 1:], _OwnKernel().fit(data).transform(data)
    )


def test_header_only_csv_is_reported(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("id,time,value\n")
    with pytest.raises(SystemExit, match="cannot read .* no observations"):
        main(["impute", str(path), "-o", str(tmp_path / "out.csv")])


def test_launcher_variables_without_peers_give_a_message(long_csv, tmp_path):
    import os
    import socket
    import subprocess
    import sys
    import time

    path, _ = long_csv
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(
        os.environ,
        WORLD_SIZE="2",
        RANK="0",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        FDAIMPUTE_RENDEZVOUS_TIMEOUT="2",
    )
    cmd = [sys.executable, "-m", "fdaimpute.cli", "fit", str(path), "--method"]
    cmd += ["sand", "--epochs", "1", "--save", str(tmp_path / "m.fdai"), *NAMES[:6]]
    start = time.perf_counter()
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert time.perf_counter() - start < 60
    assert run.returncode == 1
    assert "no other process joined" in run.stderr
    assert "unset it to fit in one process" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "m.fdai").exists()


def test_launcher_variables_missing_a_rank_give_a_message(
    long_csv, tmp_path, monkeypatch
):
    path, _ = long_csv
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("RANK", raising=False)
    fit = ["fit", str(path), "--save", str(tmp_path / "m.fdai"), *NAMES[:6]]
    with pytest.raises(SystemExit, match="cannot join the process group .*RANK"):
        main([*fit, "--method", "vt", "--epochs", "1"])


def test_a_method_imports_only_its_own_module():
    # the command line lists every method but imports an imputer's module only
    # when that method is used (scikit-learn's experimental imputer for MICE,
    # torch for the networks and the other imputers cost start-up time)
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from fdaimpute._cli.methods import method_factories\n"
        "methods = method_factories()\n"
        "methods['pace'][1](None, 0, False)\n"
        "others = ('auto', 'kernel', 'face', 'mfpca', 'mice', 'mpace', 'cnp',"
        " 'gain', 'neural')\n"
        "print(sorted(m for m in others if 'fdaimpute.' + m in sys.modules),"
        " 'fdaimpute.pace' in sys.modules, 'torch' in sys.modules)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["[]", "True", "False"]


def test_timings_file_is_checked_like_the_output(long_csv, tmp_path, capsys):
    path, df = long_csv
    before = path.read_bytes()
    data = fi.IrregularData.from_long(df, id="subject", time="age", value="bmi")
    model = tmp_path / "model.fdai"
    fi.KernelImputer().fit(data).save(model)
    saved = model.read_bytes()
    out, timings = tmp_path / "curves.csv", tmp_path / "timings.json"
    args = ["impute", str(path), "-o", str(out), *NAMES]
    with_model = ["impute", str(path), "--model", str(model), "-o", str(out)]
    # never an input, the model or the output, even with --force
    for flags in ([], ["--force"]):
        with pytest.raises(SystemExit, match="--timings .* is also an input"):
            main([*args, "--timings", str(path), *flags])
        with pytest.raises(SystemExit, match="--timings .* is also an input"):
            main([*with_model, "--timings", str(model), *flags])
        with pytest.raises(SystemExit, match="--timings .* is also the -o output"):
            main([*args, "--timings", str(out), *flags])
    assert path.read_bytes() == before and model.read_bytes() == saved
    # an existing file only with --force
    timings.write_text("keep me\n")
    with pytest.raises(SystemExit, match="--timings .* exists; pass --force"):
        main([*args, "--timings", str(timings)])
    assert timings.read_text() == "keep me\n"
    # a missing folder: before any work, as the user error it is
    missing = tmp_path / "no" / "such" / "timings.json"
    with pytest.raises(SystemExit, match="folder .* does not exist") as err:
        main([*args, "--timings", str(missing)])
    assert isinstance(err.value.code, str)  # a message, exit status 1
    assert not out.exists() and "Read" not in capsys.readouterr().err
    assert main([*args, "--timings", str(timings), "--force"]) == 0
    assert "total" in json.loads(timings.read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "curves.csv",
        "model.fdai",
        "obs.csv",
        "timings.json",
    ]


def test_rows_with_more_fields_than_the_header_are_refused(tmp_path):
    path = tmp_path / "obs.csv"
    rows = "".join(f"{s},{t},{t * 2},1\n" for s in "ABCD" for t in (0.1, 0.5, 0.9))
    path.write_text("id,time,value\n" + rows)
    out = tmp_path / "out.csv"
    args = ["impute", str(path), "-o", str(out), "--method", "kernel"]
    with pytest.raises(SystemExit, match=r"line 2 .* has 4 fields \('A,0.1,0.2,1'\)"):
        main(args)
    with pytest.raises(SystemExit, match=r"line 2 .* has 4 fields"):
        main([*args, "--method", "mpace", "--value", "value"])
    assert not out.exists()
    # trailing commas: one empty field beyond the header on every row
    path.write_text("id,time,value\n" + rows.replace(",1\n", ",\n"))
    assert main(args) == 0
    assert pd.read_csv(out)["id"].tolist() == list("ABCD")


def test_ids_that_pandas_reads_as_missing_are_subjects(tmp_path):
    path = tmp_path / "obs.csv"
    ids = ["NA", "N/A", "None", "null", "nan", "AB"]
    rows = "".join(f"{s},{t},{t * 3}\n" for s in ids for t in (0.1, 0.5, 0.9))
    path.write_text("id,time,value\n" + rows)
    out = tmp_path / "out.csv"
    assert main(["impute", str(path), "-o", str(out), "--method", "kernel"]) == 0
    assert pd.read_csv(out, dtype=str, keep_default_na=False)["id"].tolist() == ids
    path.write_text("id,time,value\n" + rows + ",0.3,1.0\n")
    with pytest.raises(SystemExit, match=r"line 20 .* no subject id \(',0.3,1.0'\)"):
        main(["impute", str(path), "-o", str(out), "--method", "kernel", "--force"])


def test_a_pickled_class_the_command_cannot_find_is_reported(
    long_csv, tmp_path, monkeypatch
):
    import __main__

    path, df = long_csv
    data = fi.IrregularData.from_long(df, id="subject", time="age", value="bmi")

    class ScriptKernel(fi.KernelImputer):
        """A class of the user's script, as pickle finds it there."""

    ScriptKernel.__module__, ScriptKernel.__qualname__ = "__main__", "ScriptKernel"
    monkeypatch.setattr(__main__, "ScriptKernel", ScriptKernel, raising=False)
    model = tmp_path / "own.fdai"
    with pytest.warns(UserWarning, match="saved as a pickle"):
        ScriptKernel().fit(data).save(model, allow_pickle=True)
    monkeypatch.delattr(__main__, "ScriptKernel")  # another program
    out = tmp_path / "curves.csv"
    args = ["impute", str(path), "--model", str(model), "-o", str(out)]
    with pytest.raises(
        SystemExit, match="class __main__.ScriptKernel .* cannot be found"
    ):
        main([*args, *NAMES[:6], "--trust-model"])
    assert not out.exists()
