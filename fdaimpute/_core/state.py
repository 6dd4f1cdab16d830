"""Checks of a fitted state that did not come from ``fit`` (a model file's).

Each function raises :class:`ValueError` with a message that starts with the
attribute's name and says what is wrong with it; :func:`fdaimpute.persistence.load`
puts the file's name before it. ``BaseImputer._check_state`` and its
overrides call them.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "check_array",
    "check_components",
    "check_nested",
    "check_number",
    "check_profile",
    "check_range",
]


def check_array(value, name, shape, *, nonnegative=False):
    """Check that ``value`` is a finite array of floats of the given shape.

    Parameters
    ----------
    value : object
        The attribute's value.
    name : str
        Its name, for the message.
    shape : tuple of int or None
        The expected shape; ``None`` accepts any length along that axis.
    nonnegative : bool, default=False
        Also refuse negative entries (variances, eigenvalues).

    Returns
    -------
    ndarray
        ``value``.

    Raises
    ------
    ValueError
        If it is not a numpy array of floats, has another shape, or holds a
        NaN, an infinity or (with ``nonnegative``) a negative entry.
    """
    if not isinstance(value, np.ndarray) or value.dtype.kind != "f":
        kind = getattr(value, "dtype", type(value).__name__)
        raise ValueError(f"{name} is {kind}, not an array of floats")
    wanted = tuple(value.shape[i] if n is None else n for i, n in enumerate(shape))
    if value.shape != wanted:
        shown = ", ".join("n" if n is None else str(n) for n in shape)
        raise ValueError(f"{name} has shape {value.shape}, not ({shown})")
    if not np.isfinite(value).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    if nonnegative and (value < 0).any():
        raise ValueError(f"{name} has negative values")
    return value


def check_number(value, name, *, low=0.0, integer=False, positive=False):
    """Check that ``value`` is a finite real number ``>= low`` (``> low``).

    Parameters
    ----------
    value : object
        The attribute's value.
    name : str
        Its name, for the message.
    low : float or None, default=0.0
        The smallest value allowed; ``None``: no bound.
    integer : bool, default=False
        Require an integer.
    positive : bool, default=False
        Refuse ``low`` itself.

    Returns
    -------
    int or float
        ``value``.

    Raises
    ------
    ValueError
        If it is not such a number (a bool is not).
    """
    kind = numbers.Integral if integer else numbers.Real
    if not isinstance(value, kind) or isinstance(value, (bool, np.bool_)):
        what = "an integer" if integer else "a number"
        raise ValueError(f"{name} is {value!r}, not {what}")
    if not np.isfinite(value):
        raise ValueError(f"{name} is {value!r}, not finite")
    if low is not None and (value <= low if positive else value < low):
        raise ValueError(f"{name} is {value!r}, not {'>' if positive else '>='} {low}")
    return value


def check_range(value, name):
    """Check that ``value`` is a pair of finite numbers ``(lo, hi)``, ``lo <= hi``.

    Parameters
    ----------
    value : object
        The attribute's value (``time_range_``, ``value_range_``).
    name : str
        Its name, for the message.

    Raises
    ------
    ValueError
        If it is not such a pair.
    """
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(f"{name} is {value!r}, not a pair (lo, hi)")
    lo, hi = (check_number(v, name, low=None) for v in value)
    if hi < lo:
        raise ValueError(f"{name} is {value!r}: its end is before its start")


def check_components(estimator, k):
    """Check ``n_components_`` and ``eigenvalues_`` against a model of ``k`` components.

    Parameters
    ----------
    estimator : BaseImputer
        A fitted imputer of functional principal components.
    k : int
        The number of components of its fitted model.

    Raises
    ------
    ValueError
        If ``n_components_`` is not ``k`` or ``eigenvalues_`` is not ``k``
        finite values ``>= 0``.
    """
    n = check_number(estimator.n_components_, "n_components_", integer=True)
    if n != k:
        raise ValueError(f"n_components_ is {n}, but the model has {k} components")
    check_array(estimator.eigenvalues_, "eigenvalues_", (k,), nonnegative=True)


def check_profile(profile, name):
    """Check a band profile: None, or ``(knots, factor)`` of equal lengths.

    Parameters
    ----------
    profile : object
        The attribute's value (see :func:`fdaimpute._fpca.heldout.profile_factor`).
    name : str
        Its name, for the message.

    Raises
    ------
    ValueError
        If it is not None or two finite arrays of floats of one length,
        ``factor >= 0``.
    """
    if profile is None:
        return
    if not isinstance(profile, tuple) or len(profile) != 2:
        raise ValueError(f"{name} is not a pair (knots, factor)")
    n = check_array(profile[0], f"{name}[0]", (None,)).size
    check_array(profile[1], f"{name}[1]", (n,), nonnegative=True)


def check_nested(value, name):
    """Run ``_check_state`` on every imputer ``value`` holds (itself, or in a
    list, tuple or dict's values), the message naming where it is.

    Parameters
    ----------
    value : object
        An attribute's value.
    name : str
        The attribute's name.

    Raises
    ------
    ValueError
        From the first nested imputer whose state is inconsistent.
    """
    if hasattr(value, "_check_state"):
        try:
            value._check_state()
        except (ValueError, TypeError, AttributeError) as exc:
            raise ValueError(f"{name}: {exc}") from None
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_nested(item, f"{name}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_nested(item, f"{name}[{key!r}]")
