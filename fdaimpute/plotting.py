"""Matplotlib views: observations with imputed curves and bands, a neural
imputer's training history, and a comparison of methods' errors."""

from __future__ import annotations

import numpy as np

from fdaimpute._core.validation import as_irregular

__all__ = ["plot_comparison", "plot_curves", "plot_history"]


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
    band_of="curve",
):
    """Plot a few subjects' observations with one or more imputed curves.

    Axes are labelled with the data's column names where it knows them
    (``IrregularData.names``, e.g. "age" and "bmi"), else "time" and
    "value".

    Parameters
    ----------
    data : IrregularData, long DataFrame or list of (t, y) pairs
        The observed subjects (a matrix with NaN:
        ``IrregularData.from_dense(X, times)``).
    curves : ndarray of shape (n_subjects, n_grid) or dict of them
        Imputed curves; a dict maps a method name to its curves. Like
        ``std`` and ``truth``, one row per subject of ``data``, in its
        order; DataFrames indexed by the subjects' ids (the pandas output of
        ``transform``) are matched to them by id.
    grid : array-like of shape (n_grid,)
        Times of the curves' columns.
    truth : ndarray of shape (n_subjects, n_grid), default=None
        True curves, drawn dashed when known (simulations).
    std : ndarray of shape (n_subjects, n_grid) or dict of them, default=None
        Pointwise standard deviations, drawn as 95% bands (``curve ± 1.96
        std``) in the colour of their curve. An array belongs to the first
        curve set; a dict maps method names of ``curves`` to theirs.
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
    band_of : {"curve", "observation"}, default="curve"
        What ``std`` is the uncertainty of, for the legend: the curve
        (``transform(..., return_std=True)``) or a new observation (the
        curve's variance plus the noise variance).

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
        raise TypeError(
            "data must be IrregularData, a long DataFrame or (t, y) pairs; for "
            "a matrix with NaN, IrregularData.from_dense(X, times)"
        )
    if isinstance(ncols, (bool, np.bool_)) or not isinstance(ncols, (int, np.integer)):
        raise TypeError(f"ncols must be an int, got {ncols!r}")
    if ncols < 1:
        raise ValueError(f"ncols must be at least 1, got {ncols}")
    if band_of not in ("curve", "observation"):
        raise ValueError(f"band_of must be 'curve' or 'observation', got {band_of!r}")
    band_label = (
        "95% band of the curve"
        if band_of == "curve"
        else ("95% band of a new observation")
    )
    _, time_name, value_name = data.names or ("id", "time", "value")
    grid = np.asarray(grid, dtype=float)
    sets = curves if isinstance(curves, dict) else {"imputed": curves}
    sets = {
        name: _per_subject(c, data, grid, f"curves {name!r}")
        for name, c in sets.items()
    }
    bands = {
        name: _per_subject(s, data, grid, f"std of {name!r}", nonnegative=True)
        for name, s in _bands(sets, std).items()
    }
    if truth is not None:
        truth = _per_subject(truth, data, grid, "truth")
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
    for panel, (ax, i) in enumerate(zip(flat, positions)):
        t, y = data[i]
        if truth is not None:
            ax.plot(grid, truth[i], "k--", lw=1.2, label="truth")
        for name, c in sets.items():
            line = ax.plot(grid, c[i], lw=1.6, label=name)[0]
            if name in bands:
                s = bands[name][i]
                ax.fill_between(
                    grid,
                    c[i] - 1.96 * s,
                    c[i] + 1.96 * s,
                    color=line.get_color(),
                    alpha=0.15,
                    lw=0,
                    label=f"{name}: {band_label}" if panel == 0 else None,
                )
        ax.plot(t, y, "o", color="0.2", ms=4, label="observed")
        ax.set_title(f"subject {data.ids[i]}", fontsize=10)
        ax.set_xlabel(time_name, fontsize=9)
        ax.set_ylabel(value_name, fontsize=9)
    for ax in flat[positions.size :]:
        ax.set_visible(False)
    flat[0].legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def _per_subject(values, data, grid, name, nonnegative=False):
    """``values`` as a float array of one row per subject of ``data``, in its order.

    A DataFrame indexed by the subjects' ids (``set_output(transform="pandas")``,
    perhaps sorted since) is put in ``data``'s order by id; one with the
    default index ``0..n-1`` (not the ids) is taken in order. The shape must be
    ``(len(data), grid.size)``.
    """
    index = getattr(values, "index", None)
    if index is not None:
        ids = np.asarray(data.ids).astype(str)
        labels = np.asarray(index).astype(str)
        if len(labels) == len(ids) and set(labels) == set(ids):
            order = np.argsort(labels)
            values = values.iloc[order[np.searchsorted(labels[order], ids)]]
        elif not _is_default_index(index, len(data)):
            raise ValueError(
                f"{name}: the index holds other ids than the data's subjects "
                f"(such as {labels[:3].tolist()} against {ids[:3].tolist()}); pass "
                "the curves of these subjects"
            )
    array = np.asarray(values, dtype=float)
    if array.shape != (len(data), grid.size):
        raise ValueError(
            f"{name} has shape {array.shape}, but the data hold {len(data)} "
            f"subjects and the grid {grid.size} times"
        )
    if nonnegative and np.any(array < 0):
        raise ValueError(f"{name} has negative values")
    return array


def _is_default_index(index, n):
    """Whether ``index`` is positions ``0..n-1`` (a RangeIndex of the rows)."""
    labels = np.asarray(index)
    return labels.dtype.kind in "iu" and np.array_equal(labels, np.arange(n))


def _bands(sets, std):
    """Method name -> standard deviations to draw as a band."""
    if std is None:
        return {}
    if not isinstance(std, dict):
        return {next(iter(sets)): np.asarray(std)}
    unknown = sorted(set(std) - set(sets))
    if unknown:
        raise ValueError(
            f"std has bands for {unknown}, which are not among the curves "
            f"{sorted(sets)}"
        )
    return {name: np.asarray(s) for name, s in std.items()}


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


def plot_history(imputer, *, ax=None, log=True):
    """Plot a fitted neural imputer's training and validation loss per epoch.

    Parameters
    ----------
    imputer : VTImputer or SANDImputer
        A fitted neural imputer (its ``history_`` and ``best_epoch_``).
    ax : matplotlib Axes, default=None
        Where to draw; a new figure is made otherwise.
    log : bool, default=True
        Logarithmic loss axis (when every loss is positive).

    Returns
    -------
    matplotlib.figure.Figure
        Lines ``train`` and, when subjects were held out, ``validation``;
        a dotted vertical line at the epoch whose weights were kept
        (``best_epoch_``), with a marker on its validation loss. When no
        epoch beat the starting state (a network started from its
        ``base``), the line sits before the first epoch.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import fdaimpute as fi
    >>> sim = fi.simulate.sand_paper(n=60, n_obs=10, random_state=0)
    >>> vt = fi.VTImputer(d_model=16, n_heads=2, encoder_layers=1,
    ...                   decoder_layers=1, max_epochs=3).fit(sim.train.data)
    >>> fig = fi.plotting.plot_history(vt)
    """
    import matplotlib.pyplot as plt
    from sklearn.utils.validation import check_is_fitted

    from fdaimpute._neural.base import _NeuralImputer

    if not isinstance(imputer, _NeuralImputer):
        raise TypeError(
            "plot_history needs a neural imputer (VTImputer or SANDImputer), "
            f"which records its training history; got {type(imputer).__name__}"
        )
    check_is_fitted(imputer, "history_")
    history = imputer.history_
    epochs = _floats(history["epoch"])
    train = _floats(history["train_loss"])
    valid = _floats(history.get("valid_loss", []))
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3.6))
    else:
        fig = ax.figure
    ax.plot(epochs, train, lw=1.6, label="train")
    has_valid = valid.size == epochs.size and np.isfinite(valid).any()
    if has_valid:
        ax.plot(epochs, valid, lw=1.6, label="validation")
    best = imputer.best_epoch_
    kept = "starting state" if best not in epochs else f"epoch {best}"
    ax.axvline(best, color="0.3", ls=":", lw=1.2, label=f"kept: {kept}")
    if has_valid and best in epochs:
        ax.plot([best], valid[epochs == best], "o", color="0.1", ms=6)
    losses = np.concatenate([train, valid if has_valid else []])
    if log and np.all(losses[np.isfinite(losses)] > 0):
        ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.set_title(f"{type(imputer).__name__} training", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def _floats(values):
    """A history list as floats, with NaN for epochs without a value."""
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def plot_comparison(results, *, ax=None, ylabel="mean squared error", sort=False):
    """Bar chart comparing methods' mean error, with 95% confidence intervals.

    Parameters
    ----------
    results : dict or DataFrame
        Per-subject errors of each method: a dict from method name to a 1-D
        array (e.g. :func:`fdaimpute.metrics.mse_per_subject` of each
        method's curves), or a DataFrame with one column per method.
    ax : matplotlib Axes, default=None
        Where to draw; a new figure is made otherwise.
    ylabel : str, default="mean squared error"
        Label of the error axis.
    sort : bool, default=False
        Order the bars from the lowest mean error.

    Returns
    -------
    matplotlib.figure.Figure
        One bar per method at its mean error; the error bars are ``±1.96``
        standard errors of the mean over subjects.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> import fdaimpute as fi
    >>> rng = np.random.default_rng(0)
    >>> fig = fi.plotting.plot_comparison(
    ...     {"pace": rng.gamma(2, 0.01, 50), "kernel": rng.gamma(2, 0.02, 50)})
    """
    import matplotlib.pyplot as plt

    if hasattr(results, "columns"):
        results = {str(c): results[c].to_numpy() for c in results.columns}
    if not isinstance(results, dict) or not results:
        raise TypeError(
            "results must be a non-empty dict of method -> per-subject errors "
            "or a DataFrame with one column per method"
        )
    names, means, halves = [], [], []
    for name, errors in results.items():
        errors = np.asarray(errors, dtype=float)
        if errors.ndim != 1 or errors.size == 0 or not np.isfinite(errors).all():
            raise ValueError(
                f"the errors of {name!r} must be a non-empty 1-D array of finite "
                f"numbers, one per subject (got shape {errors.shape})"
            )
        se = errors.std(ddof=1) / np.sqrt(errors.size) if errors.size > 1 else 0.0
        names.append(str(name))
        means.append(errors.mean())
        halves.append(1.96 * se)
    order = np.argsort(means, kind="stable") if sort else np.arange(len(names))
    if ax is None:
        fig, ax = plt.subplots(figsize=(1.2 * len(names) + 2, 3.6))
    else:
        fig = ax.figure
    ax.bar(
        [names[i] for i in order],
        [means[i] for i in order],
        yerr=[halves[i] for i in order],
        capsize=4,
        color="C0",
        alpha=0.8,
    )
    ax.set_ylabel(ylabel)
    ax.set_title("mean over subjects, 95% confidence interval", fontsize=10)
    fig.tight_layout()
    return fig
