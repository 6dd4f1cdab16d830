"""Pure-torch core of the neural imputers (never imports scikit-learn).

- :mod:`~fdaimpute.nn.encoding`: sinusoidal time encodings;
- :mod:`~fdaimpute.nn.transformer`: the vanilla transformer imputer (VT);
- :mod:`~fdaimpute.nn.sand`: self-attention on derivatives (the layer), and
  :mod:`~fdaimpute.nn.sand_module`: VT followed by SAND;
- :mod:`~fdaimpute.nn.integration`: integration and interpolation on a grid,
  and :mod:`~fdaimpute.nn.channels`: the layout of several variables' curves;
- :mod:`~fdaimpute.nn.output`: what both modules return (one type);
- :mod:`~fdaimpute.nn.regularizers`: loss penalties, and
  :mod:`~fdaimpute.nn.regularizer_base`: their interface;
- :mod:`~fdaimpute.nn.batching`: ragged batches and self-supervised masking;
- :mod:`~fdaimpute.nn.validation`: the validation subjects' hidden points;
- :mod:`~fdaimpute.nn.training` (with :mod:`~fdaimpute.nn.optim`): the
  training loop, :mod:`~fdaimpute.nn.sand_smoothing`: SAND's trainer, which
  chooses how much SAND smooths, and :mod:`~fdaimpute.nn.inference`:
  batched inference;
- :mod:`~fdaimpute.nn.uncertainty`: the error-variance head behind
  ``return_std``;
- :mod:`~fdaimpute.nn.cnp`: the conditional neural process (network,
  context draw, likelihood, its Trainer and inference).
"""

from fdaimpute.nn.batching import (
    Batch,
    RaggedTensors,
    anchor_weights,
    hide_observations,
)
from fdaimpute.nn.cnp import CNPModule, CNPTrainer, predict_cnp
from fdaimpute.nn.encoding import SinusoidalEncoding, sinusoidal_encoding
from fdaimpute.nn.inference import pooled_encoding, predict_curves
from fdaimpute.nn.output import ModuleOutput
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
from fdaimpute.nn.sand_smoothing import SANDTrainer
from fdaimpute.nn.training import Trainer
from fdaimpute.nn.transformer import VTModule
from fdaimpute.nn.uncertainty import ErrorVarianceHead, error_features, fit_error_head

__all__ = [
    "Batch",
    "CNPModule",
    "CNPTrainer",
    "ErrorVarianceHead",
    "LipReg",
    "ModuleOutput",
    "NormStabilizer",
    "RaggedTensors",
    "Regularizer",
    "RegularizerContext",
    "Roughness",
    "SANDLayer",
    "SANDModule",
    "SANDTrainer",
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
    "pooled_encoding",
    "predict_cnp",
    "predict_curves",
    "sinusoidal_encoding",
    "two_sided_integral",
]
