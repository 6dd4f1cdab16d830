"""The package's layers: a module imports only its own layer and the layers below.

The rule a newcomer learns: ``_core``/``_io`` (with the public data types)
<- ``_numerics``/``_sim`` <- ``_fpca`` <- one method's core (``_pace``,
``_face``, ``_mfpca``, ``nn``; never another's) <- the public modules and
``_neural`` <- the command line. Imports inside functions count too.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import fdaimpute

PACKAGE = Path(fdaimpute.__file__).parent

#: Layer of each top-level module or folder; anything not named here is a
#: public module (layer 4).
LAYER = {
    "_core": 0,
    "_io": 0,
    "_version": 0,
    "data": 0,
    "multivariate": 0,
    "interop": 0,
    "_numerics": 1,
    "_sim": 1,
    "_fpca": 2,
    "_pace": 3,
    "_face": 3,
    "_mfpca": 3,
    "nn": 3,
    "_cli": 5,
    "cli": 5,
    "__main__": 5,
    # the whole package, which imports every public module
    "__init__": 5,
}
PUBLIC = 4
METHOD_CORES = {"_pace", "_face", "_mfpca", "nn"}
#: The one allowed import between method cores: mFPCA starts from FACE's fit.
ALLOWED = {("_mfpca", "_face")}


def _unit(module):
    """The top-level module or folder of a dotted ``fdaimpute.`` name."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports():
    """(importing unit, imported unit, file, line) of every fdaimpute import."""
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        source = _unit(".".join(parts))
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                if name == "fdaimpute":
                    targets = [f"fdaimpute.{a.name}" for a in node.names]
                else:
                    targets = [name]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for name in targets:
                if name == "fdaimpute" or name.startswith("fdaimpute."):
                    yield source, _unit(name), path.name, node.lineno


def _layer(unit):
    return LAYER.get(unit, PUBLIC)


def test_the_rule_sees_imports():
    edges = {(a, b) for a, b, _, _ in _imports()}
    assert ("_pace", "_fpca") in edges
    assert ("_mfpca", "_face") in edges
    assert ("cli", "_cli") in edges


def test_no_layer_imports_a_higher_one():
    wrong = [
        f"{source} ({name}:{line}) imports {target}"
        for source, target, name, line in _imports()
        if source != "__init__" and _layer(target) > _layer(source)
    ]
    assert not wrong, "\n".join(wrong)


def test_method_cores_do_not_import_each_other():
    wrong = [
        f"{source} ({name}:{line}) imports {target}"
        for source, target, name, line in _imports()
        if source in METHOD_CORES
        and target in METHOD_CORES
        and source != target
        and (source, target) not in ALLOWED
    ]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles_above_the_data_types():
    # the data types and _core/_io form one layer that may refer to each
    # other; above it every import goes one way (cli and _cli, base and
    # persistence did not)
    graph = {}
    for source, target, _, _ in _imports():
        if (
            source != target
            and source != "__init__"
            and min(_layer(source), _layer(target)) > 0
        ):
            graph.setdefault(source, set()).add(target)
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as err:
        pytest.fail(f"import cycle: {' -> '.join(err.args[1])}")


@pytest.mark.parametrize("unit", ["_io", "_numerics", "_sim", "nn"])
def test_lower_layers_do_not_import_scikit_learn(unit):
    found = []
    for path in sorted((PACKAGE / unit).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            found += [
                f"{path.name}:{node.lineno}"
                for n in names
                if n.split(".")[0] == "sklearn"
            ]
    assert not found, found
