"""VT and SAND on several variables: one network, one curve per variable.

:class:`NeuralVariablesMixin` gives :class:`~fdaimpute.VTImputer` and
:class:`~fdaimpute.SANDImputer` what
:class:`~fdaimpute.multivariate.SeveralVariablesMixin` asks of an imputer
(``_fit_variables``, ``_variable_curves``, ``_variable_values``): the
network reads every observation of every variable (each token carries its
variable) and outputs each variable's curve (see
:mod:`fdaimpute.nn.channels`). Each variable's values are standardised by
its own mean and SD. The statistical base is
:class:`~fdaimpute.MultivariatePACEImputer`, mixed in by one weight per
variable and judged per variable: a variable on which the network does not
beat it keeps the base's curves (the base is then refitted on every
subject, as when it is kept on all of them). Subject covariates
(``covariates``) are one more token of the encoder. The error model behind
``return_std`` reads each variable's own observations and the variable
(:func:`fdaimpute.nn.error_features`); regularizers see each variable's
curve and tokens as rows of their own (:class:`fdaimpute.nn.RegularizerContext`).
"""

from __future__ import annotations

import warnings

import numpy as np

from fdaimpute._core.multivariate_frames import covariate_names
from fdaimpute._fpca.covariates import CovariateDesign
from fdaimpute.multivariate import SeveralVariablesMixin
from fdaimpute.noise import noise_variance


class NeuralVariablesMixin(SeveralVariablesMixin):
    """Several variables for a neural imputer (put before ``_NeuralImputer``)."""

    def fit(self, X, y=None):
        """Fit the imputer on training subjects, of one variable or several.

        One variable (an IrregularData or the other one-variable formats) or
        several (a MultivariateIrregularData, or a long frame with columns
        id, time, variable, value). With ``covariates``, a long frame is read
        with those columns (a frame of one variable, columns id, time and
        value, becomes one variable with covariates). A fit on one variable
        keeps ``warm_start``; a fit on several (or with covariates) starts
        afresh, with a warning where ``warm_start`` asked otherwise. A fit that
        raises leaves the estimator unfitted.

        Parameters
        ----------
        X : IrregularData, MultivariateIrregularData, DataFrame, list or 2-D array
            Training subjects.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted imputer.
        """
        if self._holds_variables(X):
            if self.warm_start and hasattr(self, "module_"):
                warnings.warn(
                    f"{type(self).__name__}: warm_start continues a fit on one "
                    "variable without covariates only; this fit on several "
                    "variables (or with covariates) starts afresh",
                    UserWarning,
                    stacklevel=2,
                )
            return super().fit(X, y)
        if self._several():  # a network of several variables cannot go on
            self._clear_fitted()
        if self.covariates:
            raise ValueError(
                f"{type(self).__name__}(covariates={self.covariates!r}) reads "
                "subject covariates from a MultivariateIrregularData or a long "
                "frame (columns id, time, value, and variable for several "
                f"variables) with the covariates' columns; got {type(X).__name__}"
            )
        return super(SeveralVariablesMixin, self).fit(X, y)

    def _n_variables(self):
        return len(self.variables_) if self._several() else 1

    def _fit_variables(self, data):
        if isinstance(self.base, str) and self.base not in ("auto", "pace"):
            raise ValueError(
                f"{type(self).__name__} on several variables takes base='auto' "
                f"or 'pace' (multivariate PACE), an imputer of several "
                f"variables or None, got base={self.base!r}"
            )
        missing = data.variables[~data.counts.any(axis=0)].tolist()
        if missing:
            raise ValueError(f"variable(s) {missing} are never observed")
        self._fit_covariates(data)
        self._fit(data)

    def _fit_covariates(self, data):
        """The covariates' coding and scale, learnt on the training subjects."""
        names = covariate_names(self.covariates)
        self.covariate_encoding_, self.covariate_columns_ = {}, []
        self.covariate_scale_ = np.ones(0)
        if not names:
            return
        coding = CovariateDesign.learn(data.covariates, names, data.ids)
        self.covariate_encoding_ = coding.encoding
        self.covariate_columns_ = coding.columns
        spread = coding.matrix(data.covariates, data.ids).std(axis=0)
        self.covariate_scale_ = np.where(spread > 0, spread, 1.0)

    def _n_covariates(self):
        return len(getattr(self, "covariate_columns_", ()))

    def _covariate_matrix(self, data):
        if not self._n_covariates():
            return None
        coding = CovariateDesign(self.covariate_encoding_)
        return coding.matrix(data.covariates, data.ids) / self.covariate_scale_

    def _base_imputer(self, seed):
        if self._several() and isinstance(self.base, str):
            from fdaimpute.mpace import MultivariatePACEImputer

            return MultivariatePACEImputer(
                random_state=self._base_seed(seed),
                covariates=covariate_names(self.covariates) or None,
            )
        return super()._base_imputer(seed)

    def _base_kept(self, offset):
        # on several variables the base is kept on each variable whose weight
        # is 0 (the others mix the network with the refitted base)
        kept = np.asarray(self.base_weight_) == 0
        return super()._base_kept(offset) or (self._several() and bool(kept.any()))

    def _base_inputs(self):
        if not self._n_covariates():
            return {}
        return {
            "covariates": CovariateDesign(self.covariate_encoding_),
            "covariate_scale": self.covariate_scale_,
        }

    def _base_name(self):
        if self._several() and isinstance(self.base, str):
            return "multivariate PACE"
        return super()._base_name()

    def _fit_value_scaling(self, data):
        """Each variable's mean and SD (arrays), or the data's (floats)."""
        if not self._several():
            return super()._fit_value_scaling(data)
        means, scales = [], []
        for j in range(data.n_variables):
            values = data.values[data.variable == j]
            scale = float(values.std())
            means.append(float(values.mean()))
            scales.append(scale if scale > 0 else 1.0)
        self.value_mean_, self.value_scale_ = np.array(means), np.array(scales)

    def _standardised(self, data):
        if not self._several():
            return super()._standardised(data)
        mean, scale = self.value_mean_[data.variable], self.value_scale_[data.variable]
        return (data.values - mean) / scale, data.variable

    def _fit_noise_variance(self, data):
        if not self._several():
            return super()._fit_noise_variance(data)
        out = []
        for _, part, _ in self._variable_parts(data):
            try:
                out.append(noise_variance(part))
            except ValueError:
                out.append(0.0)
        self.noise_variance_ = np.array(out)

    def _blocks(self, data):
        """Curves and derivatives (or None) of each variable on the model grid.

        Lists of ``p`` arrays of shape ``(n_subjects, M)``, in data units.
        """
        curves, deriv = self._model_curves(data)
        n, p, m = len(data), len(self.variables_), self.model_grid_.size
        curves = curves.reshape(n, p, m)
        deriv = None if deriv is None else deriv.reshape(n, p, m)
        return (
            [curves[:, j] for j in range(p)],
            [None if deriv is None else deriv[:, j] for j in range(p)],
        )

    def _variable_curves(self, data, grid, derivative):
        on = self._slopes_on if derivative else self._curves_on
        curves, deriv = self._blocks(data)
        return np.concatenate([on(c, d, grid) for c, d in zip(curves, deriv)], axis=1)

    def _variable_std(self, data, grid):
        # a variable that kept its base has the base's band
        n, p = len(data), len(self.variables_)
        kept = self._kept_base()
        base_sd = self._base_std(data, grid) if kept.any() else None
        if base_sd is None:
            kept[:] = False
        own = None
        if not kept.all():
            own = self._model_curves(data, derivative=False, std=True)[2]
            own = own.reshape(n, p, -1)
        if base_sd is not None:
            base_sd = base_sd.reshape(n, p, -1)
        blocks = [
            base_sd[:, j] if kept[j] else self._std_on(own[:, j], grid)
            for j in range(p)
        ]
        return np.concatenate(blocks, axis=1)

    def _variable_values(self, data):
        curves, deriv = self._blocks(data)
        values = np.empty(data.times.size)
        subject = data.subject_index
        for j, (c, d) in enumerate(zip(curves, deriv)):
            on = data.variable == j
            counts = np.bincount(subject[on], minlength=len(data))
            values[on] = self._evaluate(c, d, data.times[on], counts)
        return values

    def _variable_mean(self, data, chunk=4096):
        """Each variable's average imputed curve on ``grid_`` (variable-major)."""
        total = np.zeros(len(self.variables_) * self.grid_.size)
        for start in range(0, len(data), chunk):
            part = data.take(np.arange(start, min(start + chunk, len(data))))
            total += self._variable_curves(part, self.grid_, False).sum(axis=0)
        return total / len(data)
