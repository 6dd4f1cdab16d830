"""Prediction from a fitted spline FPCA model, shared by FACE and mFPCA."""

from __future__ import annotations

from fdaimpute._conditional import ConditionalScorePredictor


class SplineModelPredictor(ConditionalScorePredictor):
    """Curves, bands, derivatives and scores from ``self._model`` (a FACE model).

    For an imputer whose fit leaves a :class:`~fdaimpute._face.model.FACEModel`
    in ``_model`` and sets ``n_components_`` and ``eigenfunctions_``: the
    scores are conditional expectations under that model.
    """

    def _block_scores(self, part):
        return self._model.scores(part.times, part.values, part.offsets)

    def _block_error_variance(self, part, grid):
        return self._model.error_variance(part.times, part.values, part.offsets, grid)

    def _curves(self, scores, grid):
        return self._model.curves(scores, grid)

    def _slopes(self, scores, grid):
        return self._model.curves(scores, grid, derivative=1)

    def _mean_and_basis(self, times):
        return self._model.mean_at(times), self._model.eigenfunctions_at(times)
