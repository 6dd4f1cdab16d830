"""Matplotlib views of observations, imputed curves, bands and derivatives."""

from __future__ import annotations

import numpy as np

from fdaimpute._validation import as_irregular

__all__ = ["plot_curves"]


def plot_curves(
    data,
    curves,
    grid,
    *,
    truth=None,
    std=None,
    subjects=4,
    axes=None,
    ncols=2,
):
    """Plot a few subjects' observations with one or more imputed curves.

    Parameters
    ----------
    data : IrregularData or accepted input
        The observed subjects.
    curves : ndarray of shape (n_subjects, n_grid) or dict of them
        Imputed curves; a dict maps a method name to its curves.
    grid : array-like of shape (n_grid,)
        Times of the curves' columns.
    truth : ndarray of shape (n_subjects, n_grid), default=None
        True curves, drawn dashed when known (simulations).
    std : ndarray of shape (n_subjects, n_grid), default=None
        Pointwise standard deviation of the first curve set; drawn as a
        95% band.
    subjects : int or array-like of int, default=4
        How many subjects (the first ones) or which positions to show.
    axes : array of matplotlib Axes, default=None
        Where to draw; a new figure is made otherwise.
    ncols : int, default=2
        Columns of the new figure's panel grid.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.sand_paper(n=200, n_obs="8-12", random_state=0)
    >>> imp = fi.KernelImputer(grid=sim.grid).fit(sim.train.data)
    >>> fig = fi.plotting.plot_curves(sim.test.data, imp.transform(sim.test.data),
    ...                               sim.grid, truth=sim.test.truth)
    """
    import matplotlib.pyplot as plt

    data = as_irregular(data)
    if data is None:
        raise TypeError("data must be IrregularData, a long DataFrame or (t, y) pairs")
    grid = np.asarray(grid, dtype=float)
    sets = curves if isinstance(curves, dict) else {"imputed": curves}
    positions = (
        np.arange(min(int(subjects), len(data)))
        if np.ndim(subjects) == 0
        else np.asarray(subjects, dtype=int)
    )
    if axes is None:
        nrows = int(np.ceil(positions.size / ncols))
        fig, axes = plt.subplots(
            nrows,
            ncols,
            figsize=(5 * ncols, 3.2 * nrows),
            squeeze=False,
            sharex=True,
        )
    else:
        fig = np.ravel(axes)[0].figure
    flat = np.ravel(axes)
    for ax, i in zip(flat, positions):
        t, y = data[i]
        if truth is not None:
            ax.plot(grid, truth[i], "k--", lw=1.2, label="truth")
        for k, (name, c) in enumerate(sets.items()):
            c = np.asarray(c)
            line = ax.plot(grid, c[i], lw=1.6, label=name)[0]
            if std is not None and k == 0:
                s = np.asarray(std)[i]
                ax.fill_between(
                    grid,
                    c[i] - 1.96 * s,
                    c[i] + 1.96 * s,
                    color=line.get_color(),
                    alpha=0.15,
                    lw=0,
                )
        ax.plot(t, y, "o", color="0.2", ms=4, label="observed")
        ax.set_title(f"subject {data.ids[i]}", fontsize=10)
    for ax in flat[positions.size :]:
        ax.set_visible(False)
    flat[0].legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig
