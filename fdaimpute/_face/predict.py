"""Prediction from a fitted spline FPCA model, shared by FACE and mFPCA."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from fdaimpute._linalg import one_blas_thread

_CHUNK = 20_000  # subjects per block in transform (bounds memory)
_STD_CHUNK = 2_000  # the same with return_std (per-subject K x K and J x K blocks)


class SplineModelPredictor:
    """Curves, bands, derivatives and scores from ``self._model`` (a FACE model).

    For an imputer whose fit leaves a :class:`~fdaimpute._face.model.FACEModel`
    in ``_model`` and sets ``n_components_`` and ``eigenfunctions_``: the
    scores are conditional expectations under that model, computed in blocks
    of subjects so that memory stays bounded.
    """

    def _posterior(self, data):
        model = self._model
        with one_blas_thread():
            return np.concatenate(
                [
                    model.scores(part.times, part.values, part.offsets)
                    for part in blocks(data, _CHUNK)
                ]
            )

    def _transform_grid(self, data, grid, return_std=False):
        model = self._model
        if not return_std:
            return model.curves(self._posterior(data), grid)
        with one_blas_thread():
            parts = [
                model.error_variance(part.times, part.values, part.offsets, grid)
                for part in blocks(data, _STD_CHUNK)
            ]
        scores = np.concatenate([p[0] for p in parts])
        var = np.concatenate([p[1] for p in parts])
        return model.curves(scores, grid), np.sqrt(np.clip(var, 0.0, None))

    def _derivative_grid(self, data, grid):
        return self._model.curves(self._posterior(data), grid, derivative=1)

    def _predict_ragged(self, data, times, offsets):
        model = self._model
        scores = self._posterior(data)
        subject = np.repeat(np.arange(len(data)), np.diff(offsets))
        phi = model.eigenfunctions_at(times)
        return model.mean_at(times) + np.einsum("ik,ik->i", phi, scores[subject])

    def scores(self, X):
        """Conditional-expectation scores of each subject.

        Parameters
        ----------
        X : IrregularData, long DataFrame, list of (t, y) pairs or 2-D array
            Subjects.

        Returns
        -------
        ndarray or DataFrame of shape (n_subjects, K)
            ``E[xi_i | y_i]`` under the fitted model; a DataFrame indexed by
            subject id with columns ``score_1`` ... after
            ``set_output(transform="pandas")``.
        """
        check_is_fitted(self, "eigenfunctions_")
        data = self._check_transform_input(X)
        names = [f"score_{k + 1}" for k in range(self.n_components_)]
        return self._wrap(self._posterior(data), data, columns=names)


def blocks(data, size):
    """``data`` in blocks of at most ``size`` subjects (itself when it fits)."""
    if len(data) <= size:
        return [data]
    return [
        data.take(np.arange(i, min(i + size, len(data))))
        for i in range(0, len(data), size)
    ]
