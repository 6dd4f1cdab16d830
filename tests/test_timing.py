"""The phase recorder: nested phases counted once, nothing outside a recording."""

import threading

import pytest

from fdaimpute._core import timing as _timing
from fdaimpute._core.timing import phase, recording


@pytest.fixture
def clock(monkeypatch):
    """A clock that moves only when told to."""
    now = [0.0]
    monkeypatch.setattr(_timing, "perf_counter", lambda: now[0])

    def advance(seconds):
        now[0] += seconds

    return advance


def test_nested_phases_count_once(clock):
    with recording() as seconds:
        clock(1.0)  # outside any phase: counted nowhere
        with phase("outer"):
            clock(2.0)
            with phase("inner"):
                clock(3.0)
            clock(0.5)
            with phase("outer"):  # the same name again, nested
                clock(0.25)
    assert seconds == {"outer": 2.75, "inner": 3.0}


def test_nested_recording_hands_its_phases_to_the_outer_one(clock):
    with recording() as outer:
        with phase("fit"):
            clock(1.0)
            with recording() as inner:
                with phase("mean"):
                    clock(2.0)
                clock(4.0)  # in the inner recording, outside its phases
            clock(0.5)
    assert inner == {"mean": 2.0}
    assert outer == {"fit": 5.5, "mean": 2.0}


def test_a_phase_that_raises_is_still_counted(clock):
    with recording() as seconds:
        with pytest.raises(ValueError):
            with phase("read"):
                clock(1.5)
                raise ValueError("bad file")
        with phase("write"):
            clock(1.0)
    assert seconds == {"read": 1.5, "write": 1.0}


def test_phases_outside_a_recording_or_on_other_threads_do_nothing(clock):
    with phase("alone"):
        clock(1.0)
    with recording() as seconds:

        def work():
            with phase("thread"):
                clock(1.0)

        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
    assert seconds == {}
