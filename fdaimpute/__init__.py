"""fdaimpute: imputation of sparse, irregular, noisy functional data.

Scikit-learn estimators that turn subjects observed a few times each into
smooth curves on a grid, with derivatives and uncertainty.
"""

from typing import TYPE_CHECKING

from fdaimpute._version import __version__ as __version__
from fdaimpute.data import IrregularData

# Everything else loads on first use (PEP 562): importing the estimators pulls
# in scikit-learn and SciPy's statistics, about a second, which a script that
# only reads data or the CLI's --help should not pay.
_LAZY = {
    "AutoImputer": "fdaimpute.auto",
    "BaseImputer": "fdaimpute.base",
    "CNPImputer": "fdaimpute.cnp",
    "FACEImputer": "fdaimpute.face",
    "FeatureExtractor": "fdaimpute.features",
    "GAINImputer": "fdaimpute.gain",
    "KernelImputer": "fdaimpute.kernel",
    "MFPCAImputer": "fdaimpute.mfpca",
    "MICEImputer": "fdaimpute.mice",
    "MultivariateIrregularData": "fdaimpute.multivariate",
    "MultivariatePACEImputer": "fdaimpute.mpace",
    "PACEImputer": "fdaimpute.pace",
    "SANDImputer": "fdaimpute.neural",
    "VTImputer": "fdaimpute.neural",
}
_SUBMODULES = (
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
)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from fdaimpute import (  # noqa: F401
        chunks,
        datasets,
        interop,
        metrics,
        noise,
        oracle,
        plotting,
        regularizers,
        simulate,
        tuning,
    )
    from fdaimpute.auto import AutoImputer
    from fdaimpute.base import BaseImputer
    from fdaimpute.cnp import CNPImputer
    from fdaimpute.face import FACEImputer
    from fdaimpute.features import FeatureExtractor
    from fdaimpute.gain import GAINImputer
    from fdaimpute.kernel import KernelImputer
    from fdaimpute.mfpca import MFPCAImputer
    from fdaimpute.mice import MICEImputer
    from fdaimpute.mpace import MultivariatePACEImputer
    from fdaimpute.multivariate import MultivariateIrregularData
    from fdaimpute.neural import SANDImputer, VTImputer
    from fdaimpute.pace import PACEImputer


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
    "MultivariateIrregularData",
    "MultivariatePACEImputer",
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
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"fdaimpute.{name}")
    else:
        raise AttributeError(f"module 'fdaimpute' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
