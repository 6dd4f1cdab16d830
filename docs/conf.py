"""Sphinx configuration of the fdaimpute documentation site."""

import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import fdaimpute  # noqa: E402

project = "fdaimpute"
author = "fdaimpute developers"
copyright = "2026, fdaimpute developers"
release = version = fdaimpute.__version__

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = [
    "_build",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "sg_execution_times.rst",
]
root_doc = "index"

# Markdown pages link to each other's headings, e.g. benchmarks.md#calibration.
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]
# The pages are also read on the repository page, where links to code files and
# to the README work; on the site those targets are not documents.
suppress_warnings = ["myst.xref_missing"]

autosummary_generate = True
templates_path = ["_templates"]
autodoc_default_options = {"members": True}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# The build is offline (no intersphinx): types of other libraries named in
# signatures are not resolved, ours must be.
nitpicky = True
nitpick_ignore_regex = [
    (
        r"py:.*",
        r"(numpy|np|scipy|sklearn|torch|pandas|pd|matplotlib|skfda|dask|distributed"
        r"|pyarrow)\..*",
    ),
    (r"py:.*", r"(optional|array-like|array_like|callable|path-like|ndarray)"),
    # internals that docstrings name for readers of the code, not on the site
    (r"py:.*", r"(fdaimpute\.nn|fdaimpute\._[a-z_]+)(\..*)?"),
    (r"py:class", r"Module"),
    (r"py:data", r"pickle\..*"),
]


def _skip_metadata_requests(app, what, name, obj, skip, options):
    """scikit-learn's generated ``set_*_request`` methods are not ours."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_requests)

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
}

html_theme = "pydata_sphinx_theme"
html_title = f"fdaimpute {version}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
