"""scikit-learn's common estimator checks on dense-with-NaN input."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from fdaimpute import KernelImputer, MICEImputer


def _estimators():
    return [KernelImputer(bandwidth=0.5), MICEImputer(max_iter=2, random_state=0)]


def _expected_failures(estimator):
    return {}


@parametrize_with_checks(_estimators(), expected_failed_checks=_expected_failures)
def test_sklearn_common_checks(estimator, check):
    check(estimator)
