"""fdaimpute: imputation of sparse, irregular, noisy functional data.

Scikit-learn estimators that turn subjects observed a few times each into
smooth curves on a grid, with derivatives and uncertainty.
"""

from fdaimpute import (
    chunks,
    datasets,
    interop,
    metrics,
    noise,
    oracle,
    plotting,
    simulate,
    tuning,
)
from fdaimpute.auto import AutoImputer
from fdaimpute.base import BaseImputer
from fdaimpute.cnp import CNPImputer
from fdaimpute.data import IrregularData
from fdaimpute.face import FACEImputer
from fdaimpute.features import FeatureExtractor
from fdaimpute.gain import GAINImputer
from fdaimpute.kernel import KernelImputer
from fdaimpute.mfpca import MFPCAImputer
from fdaimpute.mice import MICEImputer
from fdaimpute.neural import SANDImputer, VTImputer
from fdaimpute.pace import PACEImputer

__version__ = "0.1.0.dev0"

__all__ = [
    "AutoImputer",
    "BaseImputer",
    "CNPImputer",
    "FACEImputer",
    "FeatureExtractor",
    "GAINImputer",
    "IrregularData",
    "KernelImputer",
    "MFPCAImputer",
    "MICEImputer",
    "PACEImputer",
    "SANDImputer",
    "VTImputer",
    "chunks",
    "datasets",
    "interop",
    "metrics",
    "noise",
    "oracle",
    "plotting",
    "regularizers",
    "simulate",
    "tuning",
]


def __getattr__(name):
    # The regularizers are torch objects: import them only when asked for.
    if name == "regularizers":
        import importlib

        return importlib.import_module("fdaimpute.regularizers")
    raise AttributeError(f"module 'fdaimpute' has no attribute {name!r}")
