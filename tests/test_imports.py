"""What ``import fdaimpute`` loads: the estimators and their libraries on first use."""

import subprocess
import sys

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
