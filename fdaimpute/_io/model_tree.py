"""An imputer as data: a JSON tree of values and class names, plus named arrays.

:func:`to_tree` turns an estimator into ``(tree, arrays)``: ``tree`` holds
only JSON values (numbers, strings, lists, objects), ``arrays`` maps the
names the tree refers to onto numpy arrays (torch tensors are stored as
their numpy values). :func:`from_tree` builds the estimator back. Classes
travel as keys of :data:`CLASSES`, a fixed table of fdaimpute's own
classes: a key is looked up there and nowhere else, so a file can name
only these classes, and nothing it names is imported.

Each class in the table is stored in one of three ways:

- ``"estimator"``: an imputer, through its ``__getstate__`` and
  ``__setstate__`` (the neural imputers hand over their weights, not their
  networks; :mod:`fdaimpute._neural.persistence`);
- ``"record"``: a fitted piece holding arrays and numbers (PACE's model,
  FACE's splines), by its attributes;
- ``"params"``: a built-in regularizer, by its constructor arguments.

A value of any other type (a ``RandomState``, a user's own regularizer or
imputer subclass, a function) raises :class:`UnsupportedObject` naming the
attribute and what to change.

Tree nodes: ``None``, booleans, strings, integers and finite floats are
themselves; a list is a JSON list; every other value is a JSON object
whose key ``"$"`` says what it is: ``"float"`` (a non-finite float),
``"tuple"``, ``"dict"``, ``"array"``, ``"scalar"`` (a numpy scalar),
``"tensor"`` or ``"object"``. The node of an array (or scalar, or tensor)
of floats says whether it was finite (``"finite"``): :func:`from_tree`
refuses such an array whose values are not floats, or not finite when it was.
"""

from __future__ import annotations

import importlib
import math

import numpy as np

__all__ = ["CLASSES", "UnsupportedObject", "class_key", "from_tree", "to_tree"]

ESTIMATOR, RECORD, PARAMS = "estimator", "record", "params"

#: Key -> (module, class name, how it is stored). Keys are public class
#: names, independent of the module a class lives in.
CLASSES = {
    "KernelImputer": ("fdaimpute.kernel", "KernelImputer", ESTIMATOR),
    "PACEImputer": ("fdaimpute.pace", "PACEImputer", ESTIMATOR),
    "FACEImputer": ("fdaimpute.face", "FACEImputer", ESTIMATOR),
    "MFPCAImputer": ("fdaimpute.mfpca", "MFPCAImputer", ESTIMATOR),
    "MICEImputer": ("fdaimpute.mice", "MICEImputer", ESTIMATOR),
    "GAINImputer": ("fdaimpute.gain", "GAINImputer", ESTIMATOR),
    "VTImputer": ("fdaimpute.neural", "VTImputer", ESTIMATOR),
    "SANDImputer": ("fdaimpute.neural", "SANDImputer", ESTIMATOR),
    "CNPImputer": ("fdaimpute.cnp", "CNPImputer", ESTIMATOR),
    "AutoImputer": ("fdaimpute.auto", "AutoImputer", ESTIMATOR),
    "MultivariatePACEImputer": (
        "fdaimpute.mpace",
        "MultivariatePACEImputer",
        ESTIMATOR,
    ),
    "PACEModel": ("fdaimpute._pace.result", "PACEModel", RECORD),
    "MeanCurve": ("fdaimpute._pace.result", "MeanCurve", RECORD),
    "MultivariatePACEModel": (
        "fdaimpute._pace.multivariate",
        "MultivariatePACEModel",
        RECORD,
    ),
    "DefaultNumerics": ("fdaimpute._pace.numerics", "DefaultNumerics", RECORD),
    "FdapaceNumerics": ("fdaimpute._pace.numerics", "FdapaceNumerics", RECORD),
    "FACEModel": ("fdaimpute._fpca.spline_model", "FACEModel", RECORD),
    "BandModel": ("fdaimpute._numerics.smoother_bands", "BandModel", RECORD),
    "Roughness": ("fdaimpute.nn.regularizers", "Roughness", PARAMS),
    "WeightDecay": ("fdaimpute.nn.regularizers", "WeightDecay", PARAMS),
    "LipReg": ("fdaimpute.nn.regularizers", "LipReg", PARAMS),
    "NormStabilizer": ("fdaimpute.nn.regularizers", "NormStabilizer", PARAMS),
    "SmoothingRegularizer": (
        "fdaimpute.nn.regularizers",
        "SmoothingRegularizer",
        PARAMS,
    ),
}
_BY_LOCATION = {(mod, name): key for key, (mod, name, _) in CLASSES.items()}
_BUILT_IN_REGULARIZERS = sorted(k for k, v in CLASSES.items() if v[2] == PARAMS)
# Deeper trees are not written by to_tree: a file holding one is damaged.
_MAX_DEPTH = 64
_BASE_IMPUTER = ("fdaimpute.base", "BaseImputer")


class UnsupportedObject(TypeError):
    """A value the model format cannot hold (raised by :func:`to_tree`)."""


def resolve(key):
    """The class of a :data:`CLASSES` key and how it is stored (KeyError if none)."""
    module, name, kind = CLASSES[key]
    return getattr(importlib.import_module(module), name), kind


def is_imputer_class(cls):
    """Whether ``cls`` derives from fdaimpute's ``BaseImputer`` (by name: this
    layer does not import the imputers)."""
    return any((c.__module__, c.__name__) == _BASE_IMPUTER for c in cls.__mro__)


def class_key(cls):
    """The :data:`CLASSES` key of ``cls``, or None when it is not in the table."""
    key = _BY_LOCATION.get((cls.__module__, cls.__qualname__))
    if key is None or resolve(key)[0] is not cls:
        return None
    return key


def _advice(path, what):
    return UnsupportedObject(
        f"{path} is {what}, which a model file cannot hold"
        f"{_remedy(path, what)}. To keep it anyway, save with "
        "allow_pickle=True; such a file loads only with load(path, "
        "allow_pickle=True) (--trust-model on the command line), because "
        "unpickling can run code"
    )


def _remedy(path, what):
    if "RandomState" in what or "Generator" in what:
        return ": pass an integer seed (random_state=0) or None instead"
    if "regularizer" in what:
        return (
            ": use the built-in regularizers "
            f"({', '.join(_BUILT_IN_REGULARIZERS)}) instead"
        )
    if "subclass" in what:
        return ": save an instance of the fdaimpute class itself"
    return ""


class _Writer:
    """Turns values into tree nodes, collecting arrays under short names."""

    def __init__(self):
        self.arrays = {}
        self._names = {}  # id(array) -> name: an array held twice is stored once
        self._keep = []  # the stored objects, so that no id is reused meanwhile

    def _store(self, array, kind):
        known = self._names.get(id(array))
        if known is None:
            name = str(len(self.arrays))
            fortran = array.ndim > 1 and array.flags.f_contiguous
            fortran = fortran and not array.flags.c_contiguous
            # a Fortran-ordered array is stored transposed and read back as a
            # transpose, so that it keeps its memory layout (and BLAS its sums)
            stored = array.T if fortran else array
            if not stored.flags.c_contiguous:  # (ascontiguousarray makes 0-d 1-d)
                stored = np.ascontiguousarray(stored)
            self.arrays[name] = stored
            self._keep.append(array)
            extra = {"order": "F"} if fortran else {}
            if array.dtype.kind == "f":
                extra["finite"] = bool(np.isfinite(array).all())
            known = self._names[id(array)] = (name, extra)
        name, extra = known
        return {"$": kind, "key": name, **extra}

    def node(self, value, path):
        kind = type(value)
        if value is None or kind in (bool, str, int):
            return value
        if kind is float:
            return (
                value if math.isfinite(value) else {"$": "float", "value": repr(value)}
            )
        if kind is list:
            return [self.node(v, f"{path}[{i}]") for i, v in enumerate(value)]
        if kind is tuple:
            items = [self.node(v, f"{path}[{i}]") for i, v in enumerate(value)]
            return {"$": "tuple", "items": items}
        if kind is dict:
            return self._dict(value, path)
        if kind is np.ndarray:
            self._check_dtype(value.dtype, path)
            return self._store(value, "array")
        if isinstance(value, np.generic) and kind.__module__ == "numpy":
            self._check_dtype(value.dtype, path)
            return self._store(np.asarray(value), "scalar")
        if kind.__module__ == "torch" and kind.__name__ == "Tensor":
            return self._tensor(value, path)
        return self._object(value, path)

    def _dict(self, value, path):
        if all(type(k) is str for k in value):
            items = {k: self.node(v, f"{path}[{k!r}]") for k, v in value.items()}
            return {"$": "dict", "items": items}
        pairs = [
            [self.node(k, f"{path} key {k!r}"), self.node(v, f"{path}[{k!r}]")]
            for k, v in value.items()
        ]
        return {"$": "dict", "pairs": pairs}

    @staticmethod
    def _check_dtype(dtype, path):
        if dtype.kind not in "biuf" or not dtype.isnative:
            raise _advice(path, f"an array of dtype {dtype}")

    def _tensor(self, tensor, path):
        try:
            array = tensor.detach().cpu().numpy()
        except (TypeError, RuntimeError) as exc:
            raise _advice(path, f"a tensor of dtype {tensor.dtype} ({exc})") from None
        self._check_dtype(array.dtype, path)
        node = self._store(array, "tensor")
        if tensor.requires_grad:
            node["requires_grad"] = True
        return node

    def _object(self, value, path):
        cls = type(value)
        key = class_key(cls)
        if key is None:
            raise _advice(path, _describe(value))
        kind = resolve(key)[1]
        if kind == PARAMS:
            state = value.get_params()
        elif kind == ESTIMATOR:
            state = value.__getstate__()
        else:
            state = dict(vars(value))
        items = {k: self.node(v, f"{path}.{k}") for k, v in state.items()}
        return {"$": "object", "class": key, "state": items}


def _describe(value):
    """What ``value`` is, in the words of the refusal."""
    cls = type(value)
    name = f"{cls.__module__}.{cls.__qualname__}"
    if cls.__name__ in ("RandomState", "Generator") and cls.__module__.startswith(
        "numpy"
    ):
        return f"a numpy {cls.__name__}"
    if is_imputer_class(cls):
        return f"a {name}, a subclass of an fdaimpute imputer"
    if hasattr(value, "penalty") and hasattr(value, "weight"):
        return f"a {name}, not one of fdaimpute's built-in regularizers"
    return f"a {name}"


def to_tree(estimator):
    """An estimator as ``(tree, arrays)``: JSON-ready nodes and named arrays.

    Parameters
    ----------
    estimator : BaseImputer
        One of fdaimpute's imputers (the class itself, not a subclass).

    Returns
    -------
    tree : dict
        The estimator's node (see the module description).
    arrays : dict of str to ndarray
        The arrays the tree refers to, C-contiguous.

    Raises
    ------
    UnsupportedObject
        If the estimator, or a value it holds, is of a type outside the
        format; the message names the attribute and what to change.
    """
    writer = _Writer()
    tree = writer.node(estimator, type(estimator).__name__)
    return tree, writer.arrays


class _Reader:
    """Builds values back from tree nodes and the named arrays."""

    def __init__(self, arrays):
        self.arrays = arrays
        self._built = {}  # array name -> the array (or tensor) built from it

    def value(self, node, depth=0, path="the model"):
        if depth > _MAX_DEPTH:
            raise ValueError(f"the model tree is nested deeper than {_MAX_DEPTH}")
        if node is None or type(node) in (bool, str, int, float):
            return node
        if type(node) is list:
            return [
                self.value(v, depth + 1, f"{path}[{i}]") for i, v in enumerate(node)
            ]
        if type(node) is not dict or not isinstance(node.get("$"), str):
            raise ValueError(f"unexpected node {_short(node)}")
        kind = node["$"]
        if kind == "float":
            text = node.get("value")
            if text not in ("nan", "inf", "-inf"):
                raise ValueError(f"unexpected float {_short(text)}")
            return float(text)
        if kind == "tuple":
            items = _list(node, "items")
            return tuple(
                self.value(v, depth + 1, f"{path}[{i}]") for i, v in enumerate(items)
            )
        if kind == "dict":
            return self._dict(node, depth, path)
        if kind in ("array", "scalar", "tensor"):
            return self._array(node, kind, path)
        if kind == "object":
            return self._object(node, depth, path)
        raise ValueError(f"unknown node type {_short(kind)}")

    def _dict(self, node, depth, path):
        if "items" in node:
            items = node["items"]
            if type(items) is not dict:
                raise ValueError("a dict node's items are not an object")
            return {
                k: self.value(v, depth + 1, f"{path}[{k!r}]") for k, v in items.items()
            }
        out = {}
        for pair in _list(node, "pairs"):
            if type(pair) is not list or len(pair) != 2:
                raise ValueError("a dict node's pair is not a [key, value] list")
            key = self.value(pair[0], depth + 1, f"{path} key")
            try:
                out[key] = self.value(pair[1], depth + 1, f"{path}[{key!r}]")
            except TypeError:
                raise ValueError(f"unhashable dict key {_short(pair[0])}") from None
        return out

    def _array(self, node, kind, path):
        name = node.get("key")
        if name not in self.arrays:
            raise ValueError(f"the tree refers to a missing array {_short(name)}")
        memo = (name, kind, node.get("order"), node.get("requires_grad", False))
        if memo in self._built:
            return self._built[memo]
        array = self.arrays[name]
        if "finite" in node:
            _check_floats(array, node["finite"], path)
        if node.get("order") == "F":
            array = array.T
        if kind == "scalar":
            if array.ndim != 0:
                raise ValueError(f"scalar {name!r} has shape {array.shape}")
            out = array[()]
        elif kind == "tensor":
            import torch

            out = torch.from_numpy(np.array(array, copy=True))
            if node.get("requires_grad", False):
                out.requires_grad_(True)
        else:
            out = array
        self._built[memo] = out
        return out

    def _object(self, node, depth, path):
        key = node.get("class")
        if key not in CLASSES:
            raise ValueError(
                f"the class {_short(key)} is not one of fdaimpute's stored classes"
            )
        state = node.get("state")
        if type(state) is not dict:
            raise ValueError(f"the state of a {key} is not an object")
        for name in state:
            if not name.isidentifier() or name.startswith("__"):
                raise ValueError(f"a {key} cannot have the attribute {_short(name)}")
        if depth == 0:
            path = key
        state = {k: self.value(v, depth + 1, f"{path}.{k}") for k, v in state.items()}
        cls, kind = resolve(key)
        if kind == PARAMS:
            allowed = set(cls._param_names())
            if not set(state) <= allowed:
                raise ValueError(
                    f"{key} has no parameters {sorted(set(state) - allowed)}"
                )
            return cls(**state)
        obj = cls.__new__(cls)
        if kind == ESTIMATOR:
            obj.__setstate__(state)
        else:
            obj.__dict__.update(state)
        return obj


def _check_floats(array, finite, path):
    """Refuse an array saved as floats (finite ones, if ``finite``) that is not."""
    if array.dtype.kind != "f":
        raise ValueError(f"{path} is an array of {array.dtype}, saved as floats")
    if finite and not np.isfinite(array).all():
        raise ValueError(f"{path} holds NaN or infinite values, saved finite")


def _list(node, name):
    items = node.get(name)
    if type(items) is not list:
        raise ValueError(f"a {node['$']} node's {name} are not a list")
    return items


def _short(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def from_tree(tree, arrays):
    """Build the value of a tree written by :func:`to_tree`.

    Parameters
    ----------
    tree : JSON value
        The node.
    arrays : dict of str to ndarray
        The arrays it refers to.

    Returns
    -------
    object
        The estimator (or value) it describes.

    Raises
    ------
    ValueError
        If the tree is not one :func:`to_tree` writes: an unknown node type
        or class, a missing array, an array that is not of floats or not
        finite where the tree says it was, an attribute name that is not a
        plain identifier, nesting deeper than 64.
    """
    return _Reader(arrays).value(tree)
