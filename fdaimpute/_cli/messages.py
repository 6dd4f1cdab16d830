"""The library's error messages in the command line's words.

Advice to pass a keyword becomes the flag that does it, and an imputer's
class name the ``--method`` that picks it.
"""

from __future__ import annotations

import re

_FLAG_HINTS = (
    # (the library's advice, the flag that does it, words of errors it fixes)
    (
        r"pass duplicates=['\"]average['\"]",
        "--duplicates average",
        ("duplicate", "two observations at", "repeated time"),
    ),
    (r"pass extrapolate=True", "--extrapolate", ("extrapolat", "training times span")),
)

#: The class behind each --method name.
METHOD_OF_CLASS = {
    "KernelImputer": "kernel",
    "PACEImputer": "pace",
    "FACEImputer": "face",
    "MFPCAImputer": "mfpca",
    "MICEImputer": "mice",
    "GAINImputer": "gain",
    "VTImputer": "vt",
    "SANDImputer": "sand",
    "CNPImputer": "cnp",
    "MultivariatePACEImputer": "mpace",
}

# A keyword argument in the library's advice: name=True, name='text', name=0.5
_KEYWORD = re.compile(
    r"(?<![-\w.])([a-z][a-z0-9_]*)=('[^']*'|\"[^\"]*\"|True|False|None|-?\d[\w.+-]*)"
)

_JSON_WORDS = {"True": "true", "False": "false", "None": "null"}


def _as_param(match):
    name, value = match.groups()
    if name == "return_std":
        return "--std"
    if name == "extrapolate" and value == "True":
        return "--extrapolate"
    value = _JSON_WORDS.get(value, value.strip("'\""))
    return f"--param {name}={value}"


def _as_method(match):
    method = METHOD_OF_CLASS.get(match.group(2))
    if method is None:
        return match.group(0)
    return f"{match.group(1)}--method {method}" if match.group(1) else method


def cli_message(message):
    """The library's message in the command line's words: flags, not Python.

    Advice to pass a keyword becomes the flag that does it (``--duplicates
    average``, ``--extrapolate``, ``--param name=value``), and a class name
    the ``--method`` that picks it.
    """
    message = re.sub(r"^[A-Za-z]+Imputer: ", "", message)
    for advice, flag, words in _FLAG_HINTS:
        message, n = re.subn(advice, f"rerun with {flag}", message)
        related = any(word in message.lower() for word in words)
        if n == 0 and related and flag not in message:
            message = f"{message} (rerun with {flag})"
    message = _KEYWORD.sub(_as_param, message)
    return re.sub(r"\b(use )?([A-Z][A-Za-z]*Imputer)\b", _as_method, message)


def fitted_label(label, est):
    """``label``, and the weights of a fitted mix: ``auto (pace 0.64, kernel 0.36)``."""
    weights = getattr(est, "weights_", None)
    if not weights:
        return label
    parts = sorted(weights.items(), key=lambda kv: -kv[1])
    return f"{label} ({', '.join(f'{k} {w:.2f}' for k, w in parts)})"
