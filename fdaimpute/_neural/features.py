"""What a fitted neural imputer read from each subject, as features."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted


class EncoderFeaturesMixin:
    """The ``encode`` method of the neural imputers."""

    def _n_encoder_features(self):
        """Columns of :meth:`encode`: the transformer's width."""
        return self.module_config_["vt"]["d_model"]

    def encode(self, X):
        """Each subject's encoder state, averaged over its observations.

        The transformer's encoder turns every observation into a token that
        attends to the subject's other observations; their average is a
        fixed-length summary of the subject, for downstream models (see
        :class:`~fdaimpute.FeatureExtractor`).

        Parameters
        ----------
        X : IrregularData, long DataFrame, list of (t, y) pairs or 2-D array
            Subjects (several variables after a fit on several).

        Returns
        -------
        ndarray or DataFrame of shape (n_subjects, d_model)
            A DataFrame indexed by subject id with columns ``encoder_1`` ...
            after ``set_output(transform="pandas")``.
        """
        import torch

        from fdaimpute.nn import pooled_encoding

        check_is_fitted(self, "module_")
        if getattr(self, "variables_", None) is not None:
            data = self._several_input(X)  # several variables, of every subject
        else:
            data = self._check_transform_input(X)
        with torch.inference_mode():
            pooled = pooled_encoding(
                self.module_,
                self._tensors(data, self.device_),
                batch_size=self._predict_batch_size(),
            )
        features = pooled.numpy().astype(np.float64)
        names = [f"encoder_{k + 1}" for k in range(features.shape[1])]
        return self._wrap(features, data, columns=names)
