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
    subjects : int or array-like, default=4
        An int ``k`` shows the first ``k`` subjects. An array-like names the
        subjects to show by their ids (``data.ids``), e.g. ``["a", "c"]``
        or ``[1042, 7]``. For data made without ids the ids are the
        positions ``0..n-1``, so positions work there; integers are also
        taken as positions when the ids are not integers (string ids). To
        show positions of data with other integer ids, pass
        ``data.ids[positions]``.
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
    positions = _positions(data, subjects)
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
    if flat.size < positions.size:
        raise ValueError(
            f"{positions.size} subjects to show but only {flat.size} axes given"
        )
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


def _positions(data, subjects):
    """Positions in ``data`` of the subjects to show (see ``plot_curves``)."""
    n = len(data)
    if np.ndim(subjects) == 0:
        if isinstance(subjects, (bool, np.bool_)) or not isinstance(
            subjects, (int, np.integer)
        ):
            raise TypeError(
                "subjects must be an int (how many) or a list of subject ids, "
                f"got {subjects!r}"
            )
        if subjects < 1:
            raise ValueError(f"subjects must be at least 1, got {subjects}")
        return np.arange(min(int(subjects), n))
    wanted = np.asarray(subjects)
    if wanted.ndim != 1 or wanted.size == 0:
        raise ValueError("subjects must be a non-empty 1-D list of subject ids")
    ids = np.asarray(data.ids)
    as_positions = wanted.dtype.kind in "iu" and ids.dtype.kind not in "iu"
    if as_positions:
        bad = wanted[(wanted < -n) | (wanted >= n)]
        if bad.size:
            raise ValueError(
                f"subject position(s) {bad.tolist()} out of range for {n} subjects"
            )
        return np.where(wanted < 0, wanted + n, wanted).astype(np.int64)
    order = np.argsort(ids, kind="stable")
    try:
        found = np.searchsorted(ids[order], wanted)
    except TypeError:
        found = np.zeros(wanted.size, dtype=np.int64)
        match = np.zeros(wanted.size, dtype=bool)
    else:
        found = np.minimum(found, n - 1)
        match = ids[order][found] == wanted
    if not np.all(match):
        missing = wanted[~match].tolist()
        raise ValueError(
            f"subject id(s) {missing[:5]} not in the data; subjects are looked up "
            f"by id (ids such as {ids[:3].tolist()})"
        )
    return order[found]
