"""The estimator contract shared by every imputer."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from fdaimpute._core.blocks import check_output_fits, subject_blocks
from fdaimpute._core.coerce import check_not_datetime
from fdaimpute._core.fitting import fit_from_scratch
from fdaimpute._core.input import InputMixin
from fdaimpute._core.output import OutputMixin
from fdaimpute._core.params import Boolean, validate_params
from fdaimpute._core.plausible import (
    excursion,
    warn_implausible,
    warn_implausible_variables,
)
from fdaimpute._core.query import QueryMixin, _is_ragged
from fdaimpute._core.state import check_array, check_nested, check_number, check_range
from fdaimpute._core.validation import check_extrapolate, check_grid
from fdaimpute._numerics.interpolate import interpolate_rows

__all__ = ["BaseImputer"]


class BaseImputer(InputMixin, QueryMixin, OutputMixin, TransformerMixin, BaseEstimator):
    """Base class of the imputers: input handling, output grid and output format.

    Subclasses implement ``_fit(data)`` and ``_transform_grid(data, grid,
    return_std)``; optionally ``_derivative_grid(data, grid)`` and
    ``_predict_ragged(data, times, offsets)`` (the default interpolates a
    fine grid). The hooks always see query times sorted within each subject
    and, with ``extrapolate="clip"``, inside the training range. Every
    subclass takes the ``grid``, ``extrapolate`` and ``keep_observed``
    parameters. The methods below are the template; the machinery they call
    lives in mixins: reading ``X`` (``fdaimpute._core.input``), query grids and
    times (``fdaimpute._core.query``) and the output (``fdaimpute._core.output``).

    Accepted inputs ``X`` (for ``fit``, ``transform`` and the rest):

    - an :class:`~fdaimpute.IrregularData`;
    - a long :class:`pandas.DataFrame` with columns ``id``, ``time``,
      ``value`` (other column names: read it with
      :meth:`IrregularData.from_long <fdaimpute.IrregularData.from_long>`;
      a three-column frame that looks long raises an error saying so);
    - a list of ``(times, values)`` pairs, one per subject;
    - a 2-D array or wide DataFrame with one row per subject and ``NaN``
      where unobserved. A DataFrame's numeric column labels are the column
      times and its index holds the subject ids (a default ``RangeIndex``
      carries neither). Otherwise the columns sit at the times given by
      ``grid`` when it is an array with one entry per column, else equally
      spaced on ``[0, 1]``. With ``grid=None`` the output grid is those
      column times, so ``fit_transform`` fills in the matrix like any
      scikit-learn imputer;
    - a scikit-fda ``FDataIrregular`` (ids from its ``sample_names``), or an
      ``FDataGrid``, read like a wide DataFrame whose columns are its grid
      points (see :mod:`fdaimpute.interop`).

    Times must be numbers: dates and durations raise a TypeError (convert
    them, e.g. to days since the first visit).

    The output is each subject's estimated *smooth* curve: observed cells
    of a matrix are denoised too, not copied. Pass ``keep_observed=True`` to
    put the observed value back wherever a grid time equals one of the
    subject's observation times (its standard deviation is then 0).
    ``transform`` warns, naming the subject, when a curve leaves the range
    of the training values (``value_range_``) widened by half of it inside
    the observed time range (or the subject's own values' range so widened,
    where they reach farther).

    Output times may lie slightly outside the training range (half the
    grid's end spacing, at most 5% of the range) without error; beyond
    that, ``extrapolate=True`` lets the method extend its curves and
    ``extrapolate="clip"`` holds each curve at its value at the nearest end
    of the range (derivative 0 there). Both also accept new subjects
    observed outside the range, using those observations as they are.
    Without them, new subjects observed up to a tenth of the range beyond
    it are imputed too, their observations used as they are, with a
    warning that says how far.
    """

    # Every parameter's accepted values (see fdaimpute._core.params); subclasses
    # extend this dict. ``grid`` and ``extrapolate`` have checks of their own.
    _param_constraints = {"keep_observed": [Boolean()]}

    def __init_subclass__(cls, **kwargs):
        # Output wrapping is done here (indexed by subject id), not by sklearn.
        kwargs.setdefault("auto_wrap_output_keys", None)
        super().__init_subclass__(**kwargs)

    def _extrapolation(self):
        return check_extrapolate(getattr(self, "extrapolate", False))

    # ------------------------------------------------------------------ #
    # public API
    def fit(self, X, y=None):
        """Fit the imputer on training subjects.

        A fit that raises leaves the estimator unfitted, even if it was
        fitted before: never half-fitted with attributes of two fits.

        Parameters
        ----------
        X : IrregularData, DataFrame, list of (t, y) pairs or 2-D array
            Training subjects (see the class description for the formats).
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted imputer.
        """
        return fit_from_scratch(
            self, X, lambda X: self._validate_input(X, reset=True), self._fit
        )

    def _clear_fitted(self):
        """Remove every fitted attribute (public names ending in ``_``)."""
        for name in [k for k in vars(self) if k.endswith("_") and k[0] != "_"]:
            delattr(self, name)

    def fit_transform(self, X, y=None, return_std=False):
        """Fit on ``X``, then impute the same subjects on ``grid_``.

        Parameters
        ----------
        X : IrregularData, DataFrame, list of (t, y) pairs or 2-D array
            Training subjects.
        y : None
            Ignored.
        return_std : bool, default=False
            Also return the pointwise standard deviation (see
            :meth:`transform`).

        Returns
        -------
        curves : ndarray or DataFrame of shape (n_subjects, n_grid)
        std : ndarray or DataFrame of shape (n_subjects, n_grid)
            Only when ``return_std=True``.
        """
        return self.fit(X, y).transform(X, return_std=return_std)

    def transform(self, X, return_std=False, grid=None):
        """Impute each subject's curve on the output grid.

        Parameters
        ----------
        X : IrregularData, DataFrame, list of (t, y) pairs or 2-D array
            Subjects to impute; new subjects are the normal case.
        return_std : bool, default=False
            Also return the pointwise standard deviation of each imputed
            value, where the method supports it.
        grid : int or array-like, default=None
            Where to evaluate; defaults to the fitted ``grid_``.

        Returns
        -------
        curves : ndarray or DataFrame of shape (n_subjects, n_grid)
            One row per input subject, in input order; a DataFrame indexed
            by subject id after ``set_output(transform="pandas")``. These
            are smoothed curves: observed cells are denoised unless
            ``keep_observed=True``.
        std : ndarray or DataFrame of shape (n_subjects, n_grid)
            Only when ``return_std=True``.
        """
        data = self._check_transform_input(X)
        grid = self._query_grid(grid)
        return_std = bool(return_std)
        kinds = (
            ("imputed curve", "standard deviation")
            if return_std
            else ("imputed curve",)
        )
        outputs = self._grid_outputs(
            data,
            grid,
            lambda part, inner: self._transform_grid(
                part, inner, return_std=return_std
            ),
            kinds,
        )
        self._warn_implausible(outputs[0], data, grid)
        curves, std = self._keep_observed(data, grid, *outputs)
        if return_std:
            return self._wrap(curves, data, grid), self._wrap(std, data, grid)
        return self._wrap(curves, data, grid)

    def _warn_implausible(self, curves, data, grid):
        warn_implausible(
            curves,
            data,
            grid,
            self.time_range_,
            getattr(self, "value_range_", None),
            type(self).__name__,
        )

    def _excursion(self, data):
        """How far the worst curve of ``data``'s subjects leaves the range
        ``transform`` warns outside of (a share of the training values'
        range; 0.0 when none does). See :func:`excursion`."""
        return excursion(
            lambda grid: self._transform_grid(data, grid),
            data,
            self.time_range_,
            getattr(self, "value_range_", None),
        )

    def _refit_while_implausible(self, excursion, refits):
        """Try other tunings while some training subject's curve is implausible.

        A method whose own choice of tuning gives a training subject a curve
        far outside the data calls this with its next-best choices: each of
        ``refits`` (callables without arguments) refits the estimator in
        place, and ``excursion()`` measures the fitted estimator's worst
        training curve (:meth:`_excursion` of the training data, or the
        largest over its chunks). The first refit with no implausible curve
        is kept; if there is none, the fit (the first one included) whose
        worst curve leaves the range least is restored, and ``transform``
        warns about it.
        """
        least, kept = excursion(), self.__dict__.copy()
        for refit in refits:
            refit()
            found = excursion()
            if not found:
                return
            if found < least:
                least, kept = found, self.__dict__.copy()
        self.__dict__.update(kept)

    def _finish_variables(self, data, grid, curves, std=None):
        """``transform``'s last steps for curves of several variables.

        Checks that the outputs are finite, warns of implausible curves
        (each variable against its own range), puts observed cells back with
        ``keep_observed`` and wraps the output; ``std`` is None without
        ``return_std``.
        """
        self._check_finite(curves, data, "imputed curve")
        if std is not None:
            self._check_finite(std, data, "standard deviation")
        warn_implausible_variables(
            curves,
            data,
            grid,
            self.time_range_,
            getattr(self, "value_ranges_", None),
            type(self).__name__,
        )
        curves, std = self._keep_observed(data, grid, curves, std)
        if std is None:
            return self._wrap(curves, data, grid)
        return self._wrap(curves, data, grid), self._wrap(std, data, grid)

    def derivative(self, X, grid=None):
        """First derivative of each subject's imputed curve.

        Parameters
        ----------
        X : IrregularData, DataFrame, list of (t, y) pairs or 2-D array
            Subjects.
        grid : int or array-like, default=None
            Where to evaluate; defaults to ``grid_``.

        Returns
        -------
        ndarray or DataFrame of shape (n_subjects, n_grid)
            With ``extrapolate="clip"`` the derivative is 0 outside the
            training range.
        """
        data = self._check_transform_input(X)
        grid = self._query_grid(grid)
        (deriv,) = self._grid_outputs(
            data, grid, self._derivative_grid, ("derivative",), what="derivative"
        )
        return self._wrap(deriv, data, grid)

    def _curves_and_derivatives(self, X, grid=None):
        """``transform(X, grid=grid)`` and ``derivative(X, grid=grid)`` as arrays.

        One pass over the subjects where the method shares work between the
        two (the FPCA family computes the scores once): the networks'
        statistical base asks for both on every batch.
        """
        cls = type(self)
        if cls.transform is not BaseImputer.transform or (
            cls.derivative is not BaseImputer.derivative
        ):  # e.g. several variables: the class's own outputs
            curves = np.asarray(self.transform(X, grid=grid))
            return curves, np.asarray(self.derivative(X, grid=grid))
        data = self._check_transform_input(X)
        grid = self._query_grid(grid)
        curves, deriv = self._grid_outputs(
            data,
            grid,
            self._curves_and_derivatives_grid,
            ("imputed curve", "derivative"),
        )
        self._warn_implausible(curves, data, grid)
        curves, _ = self._keep_observed(data, grid, curves)
        return curves, deriv

    def _grid_outputs(self, data, grid, compute, kinds, what="output"):
        """The outputs on a query grid, checked: the steps all grid outputs share.

        Checks that the outputs fit in memory, runs ``compute(part, inner)``
        on blocks of subjects (``inner`` the grid clipped to the training
        range under ``extrapolate="clip"``), maps its columns back onto
        ``grid``, sets derivatives to 0 outside the range (the clipped curve
        is flat there) and checks that every output is finite.

        Parameters
        ----------
        data : IrregularData
            The subjects, checked.
        grid : ndarray
            The query grid.
        compute : callable
            ``compute(part, inner)`` returns one array of shape
            ``(len(part), inner.size)`` per entry of ``kinds``, in that order
            (a bare array when there is one).
        kinds : tuple of str
            What each output is (``"imputed curve"``, ``"standard
            deviation"`` or ``"derivative"``), as named in errors.
        what : str, default="output"
            What is asked for, in the out-of-memory error.

        Returns
        -------
        list of ndarray of shape (n_subjects, grid.size)
        """
        check_output_fits(len(data), grid.size, len(kinds), what=what)
        inner, cols, outside = self._clipped(grid)
        got = self._in_blocks(
            lambda part: compute(part, inner), data, inner.size, n_out=len(kinds)
        )
        outputs = [out[:, cols] for out in (got if len(kinds) > 1 else (got,))]
        for out, kind in zip(outputs, kinds):
            if kind == "derivative":
                out[:, outside] = 0.0
            self._check_finite(out, data, kind)
        return outputs

    def predict_at(self, X, times=None):
        """Evaluate each subject's imputed curve at given times.

        Answers follow the order of the query times; a time may be repeated.

        Parameters
        ----------
        X : IrregularData, DataFrame, list of (t, y) pairs or 2-D array
            Subjects.
        times : None, array-like of shape (n_times,) or sequence of arrays
            ``None``: each subject at its own observation times. A 1-D
            array: the same times for every subject. A sequence with one
            1-D array per subject (lengths may differ, may be empty): each
            subject at its own query times.

        Returns
        -------
        IrregularData, ndarray, DataFrame or list of ndarray
            - ``times=None``: an IrregularData with the subjects'
              observation times and ids, and the imputed values as values;
            - common times: an array of shape (n_subjects, n_times), or a
              DataFrame indexed by subject id with ``"t=<time>"`` columns
              after ``set_output(transform="pandas")``;
            - per-subject times: a list with one 1-D array per subject,
              ``out[i][j]`` being subject ``i`` at ``times[i][j]``.
        """
        data = self._check_transform_input(X)
        if times is None:
            values = self._predict_flat(data, data.times, data.offsets)
            return data.with_values(values)
        check_not_datetime(times, "times")
        if not _is_ragged(times) and np.ndim(times) == 1:
            return self._predict_common(data, times)
        return self._predict_per_subject(data, times)

    @staticmethod
    def _in_blocks(compute, data, width, n_out=1):
        """``compute(part)`` on blocks of subjects, stacked into whole outputs.

        Blocks hold at most about a million output cells and four million
        observations (``fdaimpute._core.blocks``), so the method's intermediate
        arrays stay bounded however many subjects there are. ``compute``
        returns one array of shape (n_part, width), or ``n_out`` of them.
        """
        blocks = subject_blocks(data.offsets, width)
        if len(blocks) == 1:
            return compute(data)
        outs = [np.empty((len(data), width)) for _ in range(n_out)]
        for lo, hi in blocks:
            got = compute(data.take(np.arange(lo, hi)))
            for out, part in zip(outs, got if n_out > 1 else (got,)):
                out[lo:hi] = part
        return tuple(outs) if n_out > 1 else outs[0]

    # ------------------------------------------------------------------ #
    # hooks with a default
    def _derivative_grid(self, data, grid):
        raise NotImplementedError(f"{type(self).__name__} does not provide derivatives")

    def _curves_and_derivatives_grid(self, data, grid):
        return (
            self._transform_grid(data, grid, return_std=False),
            self._derivative_grid(data, grid),
        )

    def _predict_ragged(self, data, times, offsets):
        """Evaluate at per-subject times by linear interpolation of a fine grid."""
        lo, hi = (
            min(self.time_range_[0], times.min()),
            max(self.time_range_[1], times.max()),
        )
        fine = np.linspace(lo, hi, 1001)
        curves = self._transform_grid(data, fine, return_std=False)
        return interpolate_rows(curves, fine, times, np.diff(offsets))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.requires_fit = True
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags

    # ------------------------------------------------------------------ #
    # persistence
    def save(self, path, *, allow_pickle=False):
        """Write the imputer, fitted or not, to ``path``.

        The file is fdaimpute's model format: a JSON header holding every
        parameter and fitted value, and the arrays and network weights in
        safetensors (see :mod:`fdaimpute.persistence`). It holds data only,
        so loading it cannot run code. Neural imputers store their weights
        on the CPU, so a model trained on a GPU loads on a machine without
        one.

        Parameters
        ----------
        path : str or path-like
            Destination file (overwritten).
        allow_pickle : bool, default=False
            Pickle an imputer holding a value the format cannot hold (a
            regularizer class of your own, say) instead of raising. Such a
            file loads only with ``load(path, allow_pickle=True)``.

        Raises
        ------
        TypeError
            If the imputer holds a value the format cannot hold (a
            ``RandomState``, your own class) and ``allow_pickle`` is False;
            the message says which attribute and what to change.

        See Also
        --------
        load : read it back.
        """
        from fdaimpute.persistence import save

        save(self, path, allow_pickle=allow_pickle)

    def _check_state(self):
        """Check the parameters and fitted attributes of a loaded imputer.

        :func:`fdaimpute.persistence.load` calls it on every imputer a model
        file of data holds, so that an edited file is refused when it is
        read rather than failing, or giving other curves, later. This checks
        what every imputer has: the parameters (as ``fit`` does), then, if
        fitted, ``grid_``, ``time_range_``, the value ranges, ``mean_`` and
        ``n_subjects_fit_``, and every imputer held in an attribute.
        Overrides add the relations of their own fitted model.

        Raises
        ------
        ValueError, TypeError
            Saying which parameter or attribute is wrong, and how.
        """
        validate_params(self)
        self._extrapolation()
        for name, value in vars(self).items():
            check_nested(value, name)
        if not hasattr(self, "grid_"):
            return
        check_grid(check_array(self.grid_, "grid_", (None,)), "grid_")
        check_range(self.time_range_, "time_range_")
        check_number(self.n_subjects_fit_, "n_subjects_fit_", integer=True)
        if hasattr(self, "value_ranges_"):
            for j, value_range in enumerate(self.value_ranges_):
                check_range(value_range, f"value_ranges_[{j}]")
        else:
            check_range(self.value_range_, "value_range_")
        n_variables = len(getattr(self, "variables_", [None]))
        check_array(self.mean_, "mean_", (n_variables * self.grid_.size,))

    @classmethod
    def load(cls, path, *, allow_pickle=False):
        """Read an imputer written by :meth:`save`.

        Parameters
        ----------
        path : str or path-like
            The file.
        allow_pickle : bool, default=False
            Also read a file saved with ``allow_pickle=True`` that holds a
            pickle. **Unpickling can run any code**: pass it only for files
            you trust.

        Returns
        -------
        estimator
            An instance of this class, fitted if it was when saved
            (``BaseImputer.load`` accepts any imputer). Neural imputers
            move their weights to their ``device``, or to the CPU with a
            warning when it is not available.

        Raises
        ------
        ValueError
            If the file is not an fdaimpute model, is in another format
            version, is truncated or corrupted (a digest that does not
            match, or a model whose parameters or fitted values do not hold
            together), or holds a pickle and ``allow_pickle`` is False.
        TypeError
            If the file holds another class.

        Examples
        --------
        >>> import os, tempfile
        >>> import fdaimpute as fi
        >>> sim = fi.simulate.sand_paper(n=100, n_obs=10, random_state=0)
        >>> imp = fi.KernelImputer(grid=sim.grid).fit(sim.train.data)
        >>> path = os.path.join(tempfile.mkdtemp(), "kernel.fdaimpute")
        >>> imp.save(path)
        >>> same = fi.KernelImputer.load(path)
        >>> bool((same.transform(sim.test.data) == imp.transform(sim.test.data)).all())
        True
        """
        from fdaimpute.persistence import load

        return load(path, cls, allow_pickle=allow_pickle)
