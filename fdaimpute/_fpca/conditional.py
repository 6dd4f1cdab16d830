"""Prediction by conditional-expectation scores, shared by PACE, FACE and mFPCA.

All three fit a mean and eigenfunctions and predict a subject's curve as
``mu + Phi E[xi | y]``. What differs is how the fitted model evaluates its
pieces; :class:`ConditionalScorePredictor` holds the rest: the blocks of
subjects that bound memory, the bands, derivatives, point predictions and
the public ``scores``.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from fdaimpute._core.noise_at import NoiseAtMixin
from fdaimpute._numerics.linalg import one_blas_thread

_CHUNK = 20_000  # subjects per block in transform (bounds memory)
_STD_CHUNK = 2_000  # the same with return_std (per-subject K x K and J x K blocks)


def blocks(data, size):
    """``data`` in blocks of at most ``size`` subjects (itself when it fits)."""
    if len(data) <= size:
        return [data]
    return [
        data.take(np.arange(i, min(i + size, len(data))))
        for i in range(0, len(data), size)
    ]


class ConditionalScorePredictor(NoiseAtMixin):
    """The imputation hooks of a fitted FPCA model, and its ``scores``.

    A subclass sets ``n_components_`` and ``eigenfunctions_`` in ``fit`` and
    evaluates its model through five methods:

    - ``_block_scores(part)``: ``E[xi | y]`` of the subjects in ``part``;
    - ``_block_error_variance(part, grid)``: those scores and the posterior
      variance of each curve on ``grid``;
    - ``_curves(scores, grid)`` and ``_slopes(scores, grid)``: curves and
      their derivatives on ``grid``;
    - ``_mean_and_basis(times)``: the mean and the eigenfunctions at
      ``times``;
    - ``_band_factor(times)``: the time profile of the bands' variance.
    """

    def _noise_at(self, times):
        return self.noise_variance_ * self._band_factor(times)

    def _posterior(self, data):
        with one_blas_thread():
            return np.concatenate(
                [self._block_scores(part) for part in blocks(data, _CHUNK)]
            )

    def _transform_grid(self, data, grid, return_std=False):
        if not return_std:
            return self._curves(self._posterior(data), grid)
        with one_blas_thread():
            parts = [
                self._block_error_variance(part, grid)
                for part in blocks(data, _STD_CHUNK)
            ]
        scores = np.concatenate([p[0] for p in parts])
        var = np.concatenate([p[1] for p in parts])
        return self._curves(scores, grid), np.sqrt(np.clip(var, 0.0, None))

    def _derivative_grid(self, data, grid):
        return self._slopes(self._posterior(data), grid)

    def _curves_and_derivatives_grid(self, data, grid):
        scores = self._posterior(data)
        return self._curves(scores, grid), self._slopes(scores, grid)

    def _predict_ragged(self, data, times, offsets):
        scores = self._posterior(data)
        subject = np.repeat(np.arange(len(data)), np.diff(offsets))
        mean, basis = self._mean_and_basis(times)
        return mean + np.einsum("ik,ik->i", basis, scores[subject])

    def scores(self, X):
        """Conditional-expectation scores of each subject.

        Parameters
        ----------
        X : IrregularData, long DataFrame, list of (t, y) pairs or 2-D array
            Subjects.

        Returns
        -------
        ndarray or DataFrame of shape (n_subjects, K)
            ``E[xi_i | y_i]`` under the fitted model, for downstream use; a
            DataFrame indexed by subject id with columns ``score_1`` ... after
            ``set_output(transform="pandas")``.
        """
        check_is_fitted(self, "eigenfunctions_")
        data = self._check_transform_input(X)
        names = [f"score_{k + 1}" for k in range(self.n_components_)]
        return self._wrap(self._posterior(data), data, columns=names)
