"""scikit-learn's common estimator checks on dense-with-NaN input."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from fdaimpute import (
    CNPImputer,
    FACEImputer,
    FeatureExtractor,
    GAINImputer,
    KernelImputer,
    MFPCAImputer,
    MICEImputer,
    PACEImputer,
    SANDImputer,
    VTImputer,
)

# These checks fit on matrices with 2 columns, i.e. 2 distinct times; PACE
# needs at least 3 distinct times to estimate a covariance off the diagonal
# and raises a clear ValueError instead.
_PACE_TWO_COLUMN_CHECKS = {
    name: "fits on 2 columns (times); PACE needs at least 3 distinct times"
    for name in (
        "check_estimators_fit_returns_self",
        "check_estimators_overwrite_params",
        "check_fit_check_is_fitted",
        "check_fit_idempotent",
        "check_n_features_in",
        "check_readonly_memmap_input",
    )
}


# Tiny networks: the checks exercise the estimator API (clone, set_params,
# refit, idempotence with a fixed random_state...), not the fit's quality.
# No held-out subjects: fitting the error model after training would take 90%
# of a tiny fit's time; that path is tested in test_neural and test_uncertainty.
# The kernel smoother as the statistical base: the default PACE base selects
# its bandwidths by cross-validation, over 90% of a tiny fit's time; the base's
# plumbing is the same for every base, and test_neural_base tests PACE's.
_NEURAL = dict(
    base="kernel",
    d_model=8,
    n_heads=2,
    encoder_layers=1,
    decoder_layers=1,
    dim_feedforward=16,
    encoding_dim=8,
    max_epochs=2,
    batch_size=16,
    validation_fraction=0.0,
    device="cpu",
    random_state=0,
)


def _estimators():
    return [
        KernelImputer(bandwidth=0.5),
        MICEImputer(max_iter=2, random_state=0),
        # small work grids and spline bases: the checks exercise the API, and
        # a default PACE or FACE fit on their data takes 1.5 to 3 s
        PACEImputer(n_work_grid=31, random_state=0),
        FACEImputer(n_basis=8, n_basis_mean=8),
        MFPCAImputer(n_components=2),
        GAINImputer(max_iter=20, device="cpu", random_state=0),
        VTImputer(**_NEURAL),
        SANDImputer(**_NEURAL, sand_head_dim=8, sand_encoding_dim=8),
        CNPImputer(
            hidden_dim=8,
            n_layers=1,
            r_dim=8,
            max_epochs=2,
            batch_size=16,
            validation_fraction=0.0,
            device="cpu",
            random_state=0,
        ),
        FeatureExtractor(KernelImputer(bandwidth=0.5), kind="curve"),
    ]


def _expected_failures(estimator):
    if isinstance(estimator, PACEImputer):
        return _PACE_TWO_COLUMN_CHECKS
    return {}


@parametrize_with_checks(_estimators(), expected_failed_checks=_expected_failures)
def test_sklearn_common_checks(estimator, check):
    check(estimator)
