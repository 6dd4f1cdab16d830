"""Parameter and attribute texts that every imputer documents, written once.

A docstring names a shared entry by a line holding only ``%(name)s``,
indented as the entry's first line should be; :func:`shared_docs` (for a
class) or :func:`fill_docstring` (for a text) puts the entry there. The one
part that differs between methods, what ``extrapolate=True`` does, is
passed in.
"""

from __future__ import annotations

import re
import textwrap

_EXTRAPOLATE = (
    "Times outside the training range: ``False`` refuses them (a grid may "
    "overhang the range by half its end spacing), ``True`` {true}, "
    '``"clip"`` holds each curve constant beyond the range.'
)

#: Name -> (first line, description).
ENTRIES = {
    "grid": (
        "grid : int or array-like, default=None",
        "Output grid of ``transform``: ``None`` gives 101 points over the "
        "training time range (or the column times of a dense input), an int "
        "that many equally spaced points, an array those times.",
    ),
    "extrapolate": ('extrapolate : {False, True, "clip"}, default=False', _EXTRAPOLATE),
    "keep_observed": (
        "keep_observed : bool, default=False",
        "Output observed values as they are where a grid time equals an "
        "observation time (otherwise observed cells are smoothed too).",
    ),
    "grid_": ("grid_ : ndarray of shape (n_grid,)", "The output grid."),
}

_PLACEHOLDER = re.compile(r"^( *)%\((\w+)\)s$", re.M)


def fill_docstring(doc, extrapolate):
    """``doc`` with its ``%(name)s`` lines replaced by the shared entries.

    Parameters
    ----------
    doc : str or None
        The docstring (None under ``python -OO``, returned as it is).
    extrapolate : str
        What ``extrapolate=True`` does, as the middle of a sentence
        ("lets the method extrapolate").

    Raises
    ------
    KeyError
        For a placeholder that names no shared entry.
    """
    if doc is None:
        return None

    def entry(match):
        indent, name = match.groups()
        head, text = ENTRIES[name]
        text = text.replace("{true}", extrapolate)
        body = textwrap.fill(
            text,
            width=79,
            initial_indent=indent + "    ",
            subsequent_indent=indent + "    ",
            break_on_hyphens=False,
        )
        return f"{indent}{head}\n{body}"

    return _PLACEHOLDER.sub(entry, doc)


def shared_docs(extrapolate="lets the method extrapolate"):
    """Class decorator: fill the shared entries of the class's docstring.

    Parameters
    ----------
    extrapolate : str, default="lets the method extrapolate"
        What ``extrapolate=True`` does for this method (see
        :func:`fill_docstring`).
    """

    def fill(cls):
        cls.__doc__ = fill_docstring(cls.__doc__, extrapolate)
        return cls

    return fill
