"""The phases of a neural fit, on one progress bar when the imputer is verbose."""

from __future__ import annotations

from contextlib import contextmanager


class FitPhases:
    """A progress bar over the phases of a fit, each named while it runs.

    The training runs show their own bars of epochs below it. Without
    ``verbose`` nothing is shown.

    Parameters
    ----------
    name : str
        The imputer's name, the bar's label.
    total : int
        The phases planned (one more may be added with :meth:`add`).
    verbose : bool
        Whether to show the bar.
    """

    def __init__(self, name, total, verbose):
        self.name = name
        self.bar = None
        if verbose:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=name, unit="phase")

    @contextmanager
    def phase(self, label):
        """Name the phase ``label`` on the bar while the block runs, then count it."""
        if self.bar is not None:
            self.bar.set_description(f"{self.name}: {label}")
        yield
        if self.bar is not None:
            self.bar.update(1)

    def add(self):
        """Plan one phase more than at the start."""
        if self.bar is not None:
            self.bar.total += 1
            self.bar.refresh()

    def close(self):
        """End the bar (its last phase named as done)."""
        if self.bar is not None:
            self.bar.set_description(f"{self.name}: done")
            self.bar.close()
