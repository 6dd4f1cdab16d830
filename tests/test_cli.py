import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fdaimpute as fi
from fdaimpute.cli import main


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
    assert list(curves.columns) == ["id", "time", "value"]
    assert len(curves) == 5 * df["subject"].nunique()


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


def test_help_lists_commands(capsys):
    assert main([]) == 1
    text = capsys.readouterr().out
    assert "demo" in text and "impute" in text
