"""The command line's methods: names, the imputers behind them, their settings."""

from __future__ import annotations

from fdaimpute._cli.params import check_params, collect_params

#: Methods that impute several variables (--variable, several --value columns).
MULTIVARIATE_METHODS = ("mpace", "kernel", "mice")

#: Methods that read their input as several variables even when it holds one.
ALWAYS_MULTIVARIATE = ("mpace",)

#: Methods whose means use subject covariates (--covariates).
COVARIATE_METHODS = ("mpace",)


def method_factories():
    """Name -> (description, factory(grid, random_state, quick))."""
    from fdaimpute.auto import AutoImputer
    from fdaimpute.kernel import KernelImputer

    methods = {
        "auto": (
            "the best of pace, face, mfpca and kernel on held-out points",
            lambda grid, seed, quick: AutoImputer(grid=grid, random_state=seed),
        ),
        "kernel": (
            "per-subject local-linear smoothing shrunk to the mean",
            lambda grid, seed, quick: KernelImputer(grid=grid),
        ),
    }
    try:
        from fdaimpute.pace import PACEImputer
    except ImportError:
        pass
    else:
        methods["pace"] = (
            "functional PCA by conditional expectation (PACE)",
            lambda grid, seed, quick: PACEImputer(grid=grid, random_state=seed),
        )
    try:
        from fdaimpute.face import FACEImputer
    except ImportError:
        pass
    else:
        methods["face"] = (
            "fast covariance estimation (FACE): spline covariance, PACE's predictor",
            lambda grid, seed, quick: FACEImputer(grid=grid),
        )
    try:
        from fdaimpute.mfpca import MFPCAImputer
    except ImportError:
        pass
    else:
        methods["mfpca"] = (
            "reduced-rank functional PCA by maximum likelihood (mFPCA)",
            lambda grid, seed, quick: MFPCAImputer(grid=grid),
        )
    try:
        from fdaimpute.gain import GAINImputer
    except ImportError:
        pass
    else:
        methods["gain"] = (
            "generative adversarial imputation (GAIN) on binned times (torch)",
            lambda grid, seed, quick: GAINImputer(
                grid=grid, random_state=seed, **({"max_iter": 500} if quick else {})
            ),
        )
    try:
        from fdaimpute.cnp import CNPImputer
    except ImportError:
        pass
    else:
        methods["cnp"] = (
            "conditional neural process (CNP), a baseline (torch)",
            lambda grid, seed, quick: CNPImputer(
                grid=grid, random_state=seed, **({"max_epochs": 30} if quick else {})
            ),
        )
    try:
        from fdaimpute.mpace import MultivariatePACEImputer
    except ImportError:
        pass
    else:
        methods["mpace"] = (
            "multivariate PACE: several variables sharing components, covariates",
            lambda grid, seed, quick: MultivariatePACEImputer(
                grid=grid, random_state=seed
            ),
        )
    try:
        from fdaimpute.mice import MICEImputer
    except ImportError:
        pass
    else:
        methods["mice"] = (
            "chained equations on binned times (a baseline)",
            lambda grid, seed, quick: MICEImputer(grid=grid, random_state=seed),
        )
    try:
        from fdaimpute.neural import SANDImputer, VTImputer
    except ImportError:
        pass
    else:
        quick_kw = {"max_epochs": 30}
        methods["vt"] = (
            "transformer imputer, started from PACE (torch)",
            lambda grid, seed, quick: VTImputer(
                grid=grid, random_state=seed, **(quick_kw if quick else {})
            ),
        )
        methods["sand"] = (
            "transformer + self-attention on derivatives, started from PACE (torch)",
            lambda grid, seed, quick: SANDImputer(
                grid=grid, random_state=seed, **(quick_kw if quick else {})
            ),
        )
    return methods


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
