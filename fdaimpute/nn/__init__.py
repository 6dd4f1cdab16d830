"""Pure-torch core of the neural imputers (never imports scikit-learn).

- :mod:`~fdaimpute.nn.encoding`: sinusoidal time encodings;
- :mod:`~fdaimpute.nn.transformer`: the vanilla transformer imputer (VT);
- :mod:`~fdaimpute.nn.sand`: self-attention on derivatives and integration;
- :mod:`~fdaimpute.nn.regularizers`: loss penalties and their interface;
- :mod:`~fdaimpute.nn.batching`: ragged batches and self-supervised masking;
- :mod:`~fdaimpute.nn.training`: the training loop and batched inference;
- :mod:`~fdaimpute.nn.uncertainty`: the error-variance head behind
  ``return_std``.
"""

from fdaimpute.nn.batching import (
    Batch,
    RaggedTensors,
    anchor_weights,
    hide_observations,
)
from fdaimpute.nn.encoding import SinusoidalEncoding, sinusoidal_encoding
from fdaimpute.nn.regularizers import (
    LipReg,
    NormStabilizer,
    Regularizer,
    RegularizerContext,
    Roughness,
    SmoothingRegularizer,
    WeightDecay,
)
from fdaimpute.nn.sand import (
    SANDLayer,
    SANDModule,
    cumulative_integral,
    integrate,
    interpolate_c1,
    interpolate_linear,
    mean_anchored_integral,
    two_sided_integral,
)
from fdaimpute.nn.training import Trainer, predict_curves
from fdaimpute.nn.transformer import VTModule
from fdaimpute.nn.uncertainty import ErrorVarianceHead, error_features, fit_error_head

__all__ = [
    "Batch",
    "ErrorVarianceHead",
    "LipReg",
    "NormStabilizer",
    "RaggedTensors",
    "Regularizer",
    "RegularizerContext",
    "Roughness",
    "SANDLayer",
    "SANDModule",
    "SinusoidalEncoding",
    "SmoothingRegularizer",
    "Trainer",
    "VTModule",
    "WeightDecay",
    "anchor_weights",
    "cumulative_integral",
    "error_features",
    "fit_error_head",
    "hide_observations",
    "integrate",
    "interpolate_c1",
    "interpolate_linear",
    "mean_anchored_integral",
    "predict_curves",
    "sinusoidal_encoding",
    "two_sided_integral",
]
