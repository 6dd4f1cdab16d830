"""Shared parameter docs: written once, the same in every imputer."""

import pytest

import fdaimpute as fi
from fdaimpute._core.docstrings import ENTRIES, fill_docstring

IMPUTERS = [
    fi.KernelImputer,
    fi.PACEImputer,
    fi.FACEImputer,
    fi.MFPCAImputer,
    fi.MICEImputer,
    fi.GAINImputer,
    fi.VTImputer,
    fi.SANDImputer,
    fi.CNPImputer,
    fi.AutoImputer,
]


def _entry(name):
    return fill_docstring(f"    %({name})s", extrapolate="X").split("X")[0]


@pytest.mark.parametrize("cls", IMPUTERS, ids=lambda c: c.__name__)
def test_every_imputer_documents_the_shared_parameters_alike(cls):
    doc = cls.__doc__
    assert "%(" not in doc
    assert fill_docstring("    %(grid)s", "") in doc
    # GAIN's keep_observed also keeps observed bins: its own text
    if cls is not fi.GAINImputer:
        assert fill_docstring("    %(keep_observed)s", "") in doc
    assert _entry("extrapolate") in doc


@pytest.mark.parametrize(
    "cls", [c for c in IMPUTERS if c is not fi.AutoImputer], ids=lambda c: c.__name__
)
def test_every_imputer_documents_its_grid(cls):
    assert fill_docstring("    %(grid_)s", "") in cls.__doc__


def test_the_method_says_what_extrapolating_does():
    assert "continues the mean along its end tangent" in " ".join(
        fi.FACEImputer.__doc__.split()
    )
    assert "an MLP's extrapolation" in fi.CNPImputer.__doc__


def test_fill_docstring_indents_and_wraps():
    text = fill_docstring("Parameters\n    %(grid)s\nrest", "")
    lines = text.splitlines()
    assert lines[1] == "    " + ENTRIES["grid"][0]
    assert all(line.startswith("        ") for line in lines[2:-1])
    assert max(map(len, lines)) <= 79
    assert lines[-1] == "rest"


def test_fill_docstring_refuses_an_unknown_entry():
    with pytest.raises(KeyError):
        fill_docstring("    %(grids)s", "")
    assert fill_docstring(None, "") is None
