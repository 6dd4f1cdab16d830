"""Declared constraints on estimator parameters, checked one way everywhere.

Each estimator class lists, in ``_param_constraints``, the values every
parameter may take: a list of constraints, any one of which suffices.
:func:`validate_params` checks them all at the start of ``fit``. A value of
none of the accepted *kinds* (a string where a number is needed, a float
where an integer is) raises :class:`TypeError`; a value of an accepted kind
that breaks its constraint (a negative bandwidth, an unknown rule name)
raises :class:`ValueError`. Both messages name the estimator, the
parameter, everything it accepts and the value given.

Checks that involve several parameters at once stay with the estimator.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np

__all__ = [
    "Boolean",
    "Instance",
    "Interval",
    "Options",
    "Pair",
    "RANDOM_STATE",
    "check_param",
    "validate_params",
]


class Interval:
    """An integer or real number within bounds.

    Parameters
    ----------
    kind : {"int", "real"}
        ``"int"`` accepts integers only (never bools); ``"real"`` accepts
        any finite real number (integers included, bools not).
    low, high : float or None, default=None
        Bounds; ``None`` leaves that side open.
    closed : {"both", "left", "right", "neither"}, default="both"
        Which bounds belong to the interval.
    """

    def __init__(self, kind, low=None, high=None, *, closed="both"):
        if kind not in ("int", "real"):
            raise ValueError(f"kind must be 'int' or 'real', got {kind!r}")
        self.kind = kind
        self.low = low
        self.high = high
        self.closed = closed

    def accepts_kind(self, value):
        """Whether ``value`` is a number of this constraint's kind."""
        if isinstance(value, (bool, np.bool_)):
            return False
        if self.kind == "int":
            return isinstance(value, numbers.Integral)
        return isinstance(value, numbers.Real)

    def is_satisfied_by(self, value):
        """Whether ``value`` is of the right kind and within the bounds."""
        if not self.accepts_kind(value):
            return False
        if self.kind == "real" and not np.isfinite(value):
            return False
        left = self.closed in ("both", "left")
        right = self.closed in ("both", "right")
        if self.low is not None and (
            value < self.low or (value == self.low and not left)
        ):
            return False
        if self.high is not None:
            if value > self.high or (value == self.high and not right):
                return False
        return True

    def __str__(self):
        noun = "an integer" if self.kind == "int" else "a number"
        if self.low is not None and self.high is not None:
            brackets = {"both": "[]", "left": "[)", "right": "(]", "neither": "()"}
            a, b = brackets[self.closed]
            return f"{noun} in {a}{self.low:g}, {self.high:g}{b}"
        if self.low is not None:
            op = ">=" if self.closed in ("both", "left") else ">"
            return f"{noun} {op} {self.low:g}"
        if self.high is not None:
            op = "<=" if self.closed in ("both", "right") else "<"
            return f"{noun} {op} {self.high:g}"
        return noun


class Options:
    """One of a fixed set of strings (or other hashable values)."""

    def __init__(self, *values):
        self.values = tuple(values)

    def accepts_kind(self, value):
        """Whether ``value`` has the type of one of the options."""
        return any(isinstance(value, type(v)) for v in self.values)

    def is_satisfied_by(self, value):
        """Whether ``value`` is one of the options."""
        return self.accepts_kind(value) and value in self.values

    def __str__(self):
        if len(self.values) == 1:
            return repr(self.values[0])
        return "one of " + ", ".join(repr(v) for v in self.values)


class Boolean:
    """``True`` or ``False`` (numpy bools included)."""

    def accepts_kind(self, value):
        """Whether ``value`` is a bool."""
        return isinstance(value, (bool, np.bool_))

    def is_satisfied_by(self, value):
        """Whether ``value`` is a bool."""
        return self.accepts_kind(value)

    def __str__(self):
        return "True or False"


class Pair:
    """A sequence of exactly two values, each satisfying ``item``.

    Parameters
    ----------
    item : constraint
        The constraint on each of the two values.
    description : str
        What the pair means, e.g. ``"(along, across)"``.
    """

    def __init__(self, item, description=""):
        self.item = item
        self.description = description

    def accepts_kind(self, value):
        """Whether ``value`` is a (non-string) sequence."""
        return isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, str)

    def is_satisfied_by(self, value):
        """Whether ``value`` holds two values that each satisfy the item."""
        if not self.accepts_kind(value) or np.ndim(value) != 1 or len(value) != 2:
            return False
        return all(self.item.is_satisfied_by(v) for v in value)

    def __str__(self):
        what = f" {self.description}" if self.description else ""
        return f"a pair{what} of {_plural(self.item)}"


class Instance:
    """An instance of given types (``None`` is written as the constraint ``None``).

    Parameters
    ----------
    types : type or tuple of type
        Accepted types.
    description : str
        How to name them in messages, e.g. ``"a Regularizer"``.
    """

    def __init__(self, types, description):
        self.types = types
        self.description = description

    def accepts_kind(self, value):
        """Whether ``value`` is an instance of the types."""
        return isinstance(value, self.types)

    def is_satisfied_by(self, value):
        """Whether ``value`` is an instance of the types."""
        return self.accepts_kind(value)

    def __str__(self):
        return self.description


class _NoneConstraint:
    """The value ``None``."""

    def accepts_kind(self, value):
        return value is None

    is_satisfied_by = accepts_kind

    def __str__(self):
        return "None"


#: The values scikit-learn's ``check_random_state`` accepts.
RANDOM_STATE = [
    Interval("int", 0, 2**32 - 1),
    Instance(np.random.RandomState, "a numpy RandomState"),
    None,
]


def _plural(item):
    text = str(item)
    for noun, plural in (("an integer", "integers"), ("a number", "numbers")):
        if text.startswith(noun):
            return plural + text[len(noun) :]
    return text


def _as_constraint(spec):
    return _NoneConstraint() if spec is None else spec


def check_param(name, value, allowed, owner=None):
    """Check one parameter value against its list of constraints.

    Parameters
    ----------
    name : str
        The parameter's name.
    value : object
        Its value.
    allowed : list of constraint
        The value must satisfy at least one.
    owner : str, default=None
        The estimator's class name, for the message.

    Returns
    -------
    value : object
        Unchanged.

    Raises
    ------
    TypeError
        If the value is of none of the accepted kinds.
    ValueError
        If it is of an accepted kind but satisfies no constraint.
    """
    constraints = [_as_constraint(c) for c in allowed]
    if any(c.is_satisfied_by(value) for c in constraints):
        return value
    accepted = [str(c) for c in constraints]
    if len(accepted) > 1:
        accepted = [", ".join(accepted[:-1]) + " or " + accepted[-1]]
    where = f" of {owner}" if owner else ""
    message = f"the {name!r} parameter{where} must be {accepted[0]}; got {value!r}"
    if any(c.accepts_kind(value) for c in constraints):
        raise ValueError(message)
    raise TypeError(message)


def validate_params(estimator):
    """Check every parameter declared in ``estimator._param_constraints``.

    Parameters
    ----------
    estimator : object
        An estimator whose class declares ``_param_constraints``, a dict
        from parameter name to the list of constraints it may satisfy.

    Raises
    ------
    TypeError, ValueError
        As :func:`check_param`, for the first parameter that fails.
    """
    owner = type(estimator).__name__
    for name, allowed in getattr(estimator, "_param_constraints", {}).items():
        check_param(name, getattr(estimator, name), allowed, owner)
