"""The ``impute`` command's method parameters: ``--param`` and ``--params-file``."""

from __future__ import annotations

import json
from pathlib import Path


def parse_value(text):
    """A ``--param`` value: JSON if it parses (numbers, true, null, lists) or text."""
    try:
        return json.loads(text)
    except ValueError:
        return {"True": True, "False": False, "None": None}.get(text, text)


def read_params_file(path):
    """The mapping of parameter names to values in a JSON (or YAML) file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SystemExit(f"--params-file: cannot read {path}: {exc}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise SystemExit(
                f"--params-file: {path} is YAML, which needs PyYAML "
                "(pip install pyyaml); or write the parameters as JSON"
            ) from None
        try:
            params = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise SystemExit(f"--params-file: cannot parse {path}: {exc}") from None
    else:
        try:
            params = json.loads(text)
        except ValueError as exc:
            raise SystemExit(
                f"--params-file: cannot parse {path} as JSON: {exc}"
            ) from None
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise SystemExit(
            f"--params-file: {path} must hold a mapping of parameter names to "
            f"values, got {type(params).__name__}"
        )
    return params


def collect_params(args):
    """Method settings of ``--params-file`` then ``--param`` (which wins)."""
    params = read_params_file(args.params_file) if args.params_file else {}
    for item in args.param or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SystemExit(f"--param expects key=value, got {item!r}")
        params[key] = parse_value(value)
    return params


def check_params(est, params, method):
    """Refuse parameter names ``est`` does not have, listing the valid ones."""
    if "grid" in params:
        raise SystemExit("set the output grid with --grid, not as a parameter")
    valid = est.get_params(deep=False)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise SystemExit(
            f"unknown parameter(s) {', '.join(unknown)} for --method {method}; "
            f"valid: {', '.join(sorted(set(valid) - {'grid'}))}"
        )
