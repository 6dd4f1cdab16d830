"""Prediction from a fitted spline FPCA model, shared by FACE and mFPCA."""

from __future__ import annotations

import math

import numpy as np

from fdaimpute._core.state import check_array, check_components, check_number
from fdaimpute._fpca.conditional import ConditionalScorePredictor


class SplineModelPredictor(ConditionalScorePredictor):
    """Curves, bands, derivatives and scores from ``self._model`` (a FACE model).

    For an imputer whose fit leaves a :class:`~fdaimpute._fpca.spline_model.FACEModel`
    in ``_model`` and sets ``n_components_`` and ``eigenfunctions_``: the
    scores are conditional expectations under that model.

    The model is fitted to standardised data - times mapped onto [0, 1] by
    the training range, values centred on their mean and divided by their
    standard deviation (:meth:`_standardise`) - so that its smoothing
    parameters, tolerances and starting values see the same numbers in any
    units, and the curves change with the units as the data do. These hooks
    convert to and from the data's units: an eigenfunction of the data is
    the model's divided by ``sqrt(time scale)``, a score is the model's
    times ``value scale * sqrt(time scale)``.
    """

    def _check_state(self):
        super()._check_state()
        if not hasattr(self, "grid_"):
            return
        self._model.check("_model")
        g, k = self.grid_.size, self._model.n_components
        check_components(self, k)
        check_array(self.eigenfunctions_, "eigenfunctions_", (g, k))
        check_array(self.covariance_, "covariance_", (g, g))
        if not isinstance(self._scale, tuple) or len(self._scale) != 4:
            raise ValueError("_scale is not (start, span, centre, spread)")
        for i, scale in enumerate(self._scale):  # span and spread are > 0
            check_number(
                scale, f"_scale[{i}]", low=0.0 if i % 2 else None, positive=True
            )
        check_number(self.noise_variance_, "noise_variance_")
        check_number(self.predictor_noise_variance_, "predictor_noise_variance_")

    def _standardise(self, data):
        """Set ``_scale`` from the training ``data``; its times and values scaled."""
        lo, hi = self.time_range_
        span = hi - lo
        centre = float(np.mean(data.values))
        spread = float(np.std(data.values))
        if not (span > 0 and math.isfinite(span)):
            span = 1.0
        if not (spread > 0 and math.isfinite(spread)):
            spread = 1.0
        self._scale = (float(lo), float(span), centre, spread)
        return self._model_times(data.times), (data.values - centre) / spread

    def _keep_heldout(self, heldout):
        """Keep the held-out points' residuals of the band refits.

        ``_heldout_residuals`` is ``(index, residuals)``: positions of the
        hidden training observations and their values less the refits'
        predictions, in the data's units (None when the refits failed). A
        chooser among methods compares and combines them on the same hidden
        points instead of refitting.
        """
        spread = self._scale[3]
        self._heldout_residuals = (
            (heldout["index"], heldout["residuals"] * spread) if heldout else None
        )

    def _model_times(self, t):
        lo, span, _, _ = self._scale
        return (np.asarray(t, dtype=np.float64) - lo) / span

    def _score_unit(self):
        _, span, _, spread = self._scale
        return spread * math.sqrt(span)

    def _band_factor(self, times):
        return self._model.band_factor(self._model_times(times))

    def _block_scores(self, part):
        _, _, centre, spread = self._scale
        values = (part.values - centre) / spread
        scores = self._model.scores(self._model_times(part.times), values, part.offsets)
        return scores * self._score_unit()

    def _block_error_variance(self, part, grid):
        _, _, centre, spread = self._scale
        values = (part.values - centre) / spread
        scores, var = self._model.error_variance(
            self._model_times(part.times),
            values,
            part.offsets,
            self._model_times(grid),
        )
        return scores * self._score_unit(), var * spread**2

    def _curves(self, scores, grid):
        _, _, centre, spread = self._scale
        curves = self._model.curves(
            scores / self._score_unit(), self._model_times(grid)
        )
        return centre + spread * curves

    def _slopes(self, scores, grid):
        _, span, _, spread = self._scale
        slopes = self._model.curves(
            scores / self._score_unit(), self._model_times(grid), derivative=1
        )
        return slopes * (spread / span)

    def _mean_and_basis(self, times):
        _, span, centre, spread = self._scale
        u = self._model_times(times)
        mean = centre + spread * self._model.mean_at(u)
        return mean, self._model.eigenfunctions_at(u) / math.sqrt(span)

    def _set_model_attributes(self, model, grid):
        """``mean_``, ``covariance_``, eigenpairs and noise in the data's units."""
        _, span, _, spread = self._scale
        self.mean_, self.eigenfunctions_ = self._mean_and_basis(grid)
        self.covariance_ = spread**2 * model.covariance_on(self._model_times(grid))
        self.eigenvalues_ = model.eigenvalues[: model.n_components] * (spread**2 * span)
        self.n_components_ = model.n_components
