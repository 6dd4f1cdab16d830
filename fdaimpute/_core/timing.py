"""Wall time of the named phases of a fit, recorded at almost no cost.

A fit opens a :func:`recording`; code inside it marks its phases with
:func:`phase`. Phases may nest: the time inside an inner phase counts for
the inner one only, so the phases never add up to more than the time
recorded. Outside a recording (and on worker threads, which do not see the
recording's context) :func:`phase` does nothing. A recording inside another
(a fit inside the command line's) hands its phases to the outer one.
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from time import perf_counter

__all__ = ["phase", "recording"]

_ACTIVE = contextvars.ContextVar("fdaimpute_phase_times", default=None)


class PhaseTimes:
    """Seconds spent in each phase, and the stack of open phases."""

    def __init__(self):
        self.seconds = {}
        self._open = []  # [name, start of its current stretch]

    def _charge(self, now):
        if self._open:
            name, since = self._open[-1]
            self.seconds[name] = self.seconds.get(name, 0.0) + now - since

    def enter(self, name):
        now = perf_counter()
        self._charge(now)
        self._open.append([name, now])

    def absorb(self, seconds):
        """Take the phases of a recording nested in the current phase."""
        for name, value in seconds.items():
            self.seconds[name] = self.seconds.get(name, 0.0) + value
        if self._open:  # the open phase was not running meanwhile
            self._open[-1][1] += sum(seconds.values())

    def leave(self):
        now = perf_counter()
        self._charge(now)
        self._open.pop()
        if self._open:
            self._open[-1][1] = now


@contextmanager
def recording():
    """Record the phases of the code inside; yields the ``{phase: seconds}`` dict.

    Examples
    --------
    >>> with recording() as seconds:
    ...     with phase("a"):
    ...         pass
    >>> sorted(seconds)
    ['a']
    """
    outer = _ACTIVE.get()
    times = PhaseTimes()
    token = _ACTIVE.set(times)
    try:
        yield times.seconds
    finally:
        _ACTIVE.reset(token)
        if outer is not None:
            outer.absorb(times.seconds)


@contextmanager
def phase(name):
    """Count the time inside towards ``name`` (while a recording is open)."""
    times = _ACTIVE.get()
    if times is None:
        yield
        return
    times.enter(name)
    try:
        yield
    finally:
        times.leave()
