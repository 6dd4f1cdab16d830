"""The command line's methods: names, the imputers behind them, their settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from importlib.util import find_spec

from fdaimpute._cli.params import check_params, collect_params

#: Methods that impute several variables (--variable, several --value columns).
MULTIVARIATE_METHODS = ("mpace", "kernel", "mice", "vt", "sand")
#: The same, as the help text lists them.
SEVERAL = ", ".join(MULTIVARIATE_METHODS)

#: Methods that read their input as several variables even when it holds one.
ALWAYS_MULTIVARIATE = ("mpace",)

#: Methods whose means use subject covariates (--covariates).
COVARIATE_METHODS = ("mpace", "vt", "sand")


@dataclass(frozen=True)
class Method:
    """A command-line method: the imputer behind it, imported only when used.

    Attributes
    ----------
    module, name : str
        Where the imputer's class lives, and its name.
    description : str
        One line for the help and the demo.
    seeded : bool
        Whether the imputer takes ``random_state`` (the command's ``--seed``).
    quick : dict
        Settings of the demo's quick fits.
    needs_torch : bool
        Whether the imputer needs PyTorch (offered only where it is installed).
    """

    module: str
    name: str
    description: str
    seeded: bool = True
    quick: dict = field(default_factory=dict)
    needs_torch: bool = False

    def available(self):
        """Whether the imputer can be imported here (PyTorch, where it needs it)."""
        return not self.needs_torch or find_spec("torch") is not None

    def make(self, grid, seed, quick):
        """The imputer with ``grid``, the seed (if it takes one) and quick settings."""
        kwargs = {"grid": grid}
        if self.seeded:
            kwargs["random_state"] = seed
        if quick:
            kwargs.update(self.quick)
        return getattr(import_module(self.module), self.name)(**kwargs)


_NEURAL_QUICK = {"max_epochs": 30}

#: Every method, in the order the help and the demo list them.
METHODS = {
    "auto": Method(
        "fdaimpute.auto",
        "AutoImputer",
        "the mix of pace, face, mfpca and kernel that best predicts held-out points",
    ),
    "kernel": Method(
        "fdaimpute.kernel",
        "KernelImputer",
        "per-subject local-linear smoothing shrunk to the mean",
        seeded=False,
    ),
    "pace": Method(
        "fdaimpute.pace",
        "PACEImputer",
        "functional PCA by conditional expectation (PACE)",
    ),
    "face": Method(
        "fdaimpute.face",
        "FACEImputer",
        "fast covariance estimation (FACE): spline covariance, PACE's predictor",
        seeded=False,
    ),
    "mfpca": Method(
        "fdaimpute.mfpca",
        "MFPCAImputer",
        "reduced-rank functional PCA by maximum likelihood (mFPCA)",
        seeded=False,
    ),
    "gain": Method(
        "fdaimpute.gain",
        "GAINImputer",
        "generative adversarial imputation (GAIN) on binned times (torch)",
        quick={"max_iter": 500},
        needs_torch=True,
    ),
    "cnp": Method(
        "fdaimpute.cnp",
        "CNPImputer",
        "conditional neural process (CNP), a baseline (torch)",
        quick={"max_epochs": 30},
        needs_torch=True,
    ),
    "mpace": Method(
        "fdaimpute.mpace",
        "MultivariatePACEImputer",
        "multivariate PACE: several variables sharing components, covariates",
    ),
    "mice": Method(
        "fdaimpute.mice",
        "MICEImputer",
        "chained equations on binned times (a baseline)",
    ),
    "vt": Method(
        "fdaimpute.neural",
        "VTImputer",
        "transformer imputer, started from PACE (torch)",
        quick=_NEURAL_QUICK,
        needs_torch=True,
    ),
    "sand": Method(
        "fdaimpute.neural",
        "SANDImputer",
        "transformer + self-attention on derivatives, started from PACE (torch)",
        quick=_NEURAL_QUICK,
        needs_torch=True,
    ),
}


def method_factories():
    """Name -> (description, factory(grid, random_state, quick)) of the methods
    available here; nothing is imported until a factory is called."""
    return {
        name: (method.description, method.make)
        for name, method in METHODS.items()
        if method.available()
    }


def method_name(text):
    """A --method value, case-insensitive; exits naming the valid ones."""
    method = text.strip().lower()
    methods = method_factories()
    if method not in methods:
        raise SystemExit(
            f"unknown method {text!r}; available: {', '.join(sorted(methods))}"
        )
    return method


def build_estimator(args, method):
    """The method's estimator with the command line's settings (grid to set)."""
    method = method_name(method)
    params = collect_params(args)
    factory = method_factories()[method][1]
    check_params(factory(None, args.seed, False), params, method)
    est = factory(None, args.seed, False)
    names = est.get_params()
    if "extrapolate" in names:
        est.set_params(extrapolate=args.extrapolate)
    if "verbose" in names:
        est.set_params(verbose=True)
    est.set_params(**params)
    return est


def set_covariates(est, layout):
    """Give ``est`` the layout's covariates (a method that takes them)."""
    if layout is not None and layout[2]:
        est.set_params(covariates=list(layout[2]))
