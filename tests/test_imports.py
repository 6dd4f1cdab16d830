"""What ``import fdaimpute`` and the command's ``--help`` load: the estimators
and their libraries on first use."""

import subprocess
import sys

import pytest

import fdaimpute as fi


def _loaded_after(code):
    out = subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}\nprint(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(eval(out.stdout))  # noqa: S307 - our own subprocess's list


def test_import_loads_neither_sklearn_nor_scipy_stats_nor_torch():
    loaded = _loaded_after("import fdaimpute")
    for heavy in ("sklearn", "scipy.stats", "torch", "pandas", "matplotlib"):
        assert heavy not in loaded, heavy


def test_names_load_on_first_use():
    loaded = _loaded_after("import fdaimpute as fi\nfi.PACEImputer")
    assert "fdaimpute.pace" in loaded and "sklearn" in loaded
    assert "torch" not in loaded


def test_every_public_name_resolves():
    for name in fi.__all__:
        assert getattr(fi, name) is not None, name
    assert set(fi.__all__) <= set(dir(fi))
    from fdaimpute import PACEImputer, simulate

    assert PACEImputer.__module__ == "fdaimpute.pace"
    assert simulate.__name__ == "fdaimpute.simulate"


_CLI_HEAVY = ("sklearn", "scipy.stats", "pandas", "torch")


def _cli_in_a_fresh_process(argv):
    """What ``main(argv)`` gives in a new interpreter: its exit code (a
    SystemExit's message as text), whether it printed anything, and which of
    the heavy libraries it loaded."""
    script = (
        "import contextlib, io, sys\n"
        "from fdaimpute.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out, "
        "contextlib.redirect_stderr(io.StringIO()) as err:\n"
        "    try:\n"
        f"        code = main({argv!r})\n"
        "    except SystemExit as exc:\n"
        "        code = exc.code\n"
        "print(code)\n"
        "print(len(out.getvalue() + err.getvalue()) > 0)\n"
        f"print(sorted(m for m in {_CLI_HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    code, printed, heavy = out.stdout.splitlines()
    return code, printed == "True", heavy


@pytest.mark.parametrize(
    "argv, code",
    [
        (["--version"], 0),
        (["--help"], 0),
        (["demo", "--help"], 0),
        (["impute", "--help"], 0),
        (["fit", "--help"], 0),
        ([], 1),  # no command: the overview, exit 1
        (["impute", "data.csv"], 2),  # -o missing
        (["fit", "data.csv", "--grid"], 2),  # --grid without its value
        (["nonsense"], 2),
    ],
    ids=lambda value: (
        (" ".join(value) or "no command") if isinstance(value, list) else None
    ),
)
def test_cli_answers_help_version_and_errors_without_the_heavy_libraries(argv, code):
    # what `fdaimpute --help` costs is mostly imports: scikit-learn with
    # SciPy's statistics and pandas is about a second, torch more
    status, printed, heavy = _cli_in_a_fresh_process(argv)
    assert (status, printed) == (str(code), True)
    assert heavy == "[]"


@pytest.mark.parametrize(
    "command", [["impute", "--method", "pace", "-o"], ["fit", "--save"]]
)
def test_a_refused_output_stops_before_the_method_is_imported(tmp_path, command):
    # the check of -o / --save comes before a second of imports, not after
    taken = tmp_path / "taken.out"
    taken.write_text("keep me\n")
    data = tmp_path / "data.csv"
    data.write_text("id,time,value\na,0,1\na,1,2\n")
    message, _, heavy = _cli_in_a_fresh_process(
        [command[0], str(data), *command[1:], str(taken)]
    )
    assert "exists; pass --force to replace it" in message
    assert heavy == "[]"
    assert taken.read_text() == "keep me\n"
