"""FeatureExtractor: per-subject features for downstream scikit-learn models."""

import _configs
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.linear_model import LinearRegression, RidgeCV
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

import fdaimpute as fi


@pytest.fixture(scope="module")
def sim():
    return fi.simulate.sand_paper(
        n=240, n_obs="8-12", split=(0.75, 0, 0.25), random_state=3
    )


def _target(truth, grid, rng):
    """A linear functional of each true curve, plus a little noise."""
    weight = np.sin(2 * np.pi * grid) + 0.5 * np.cos(4 * np.pi * grid)
    return truth @ weight / grid.size + rng.normal(0, 0.01, truth.shape[0])


@pytest.fixture(scope="module")
def problem(sim):
    rng = np.random.default_rng(0)
    y_train = _target(sim.train.truth, sim.grid, rng)
    y_test = _target(sim.test.truth, sim.grid, rng)
    return sim.train.data, y_train, sim.test.data, y_test


PACE = fi.PACEImputer(random_state=0, n_work_grid=51, n_components=6)


def _fit_predict(kind, regressor, problem):
    X, y, X_test, _ = problem
    model = make_pipeline(fi.FeatureExtractor(PACE, kind=kind), regressor)
    return model.fit(X, y).predict(X_test)


def test_scores_give_the_curves_least_squares_predictions(problem):
    # the curves are mean + eigenfunctions @ scores: the same affine span
    by_scores = _fit_predict("scores", LinearRegression(), problem)
    by_curves = _fit_predict("curve", LinearRegression(), problem)
    assert_allclose(by_scores, by_curves, rtol=1e-6, atol=1e-8)


def test_scores_predict_as_well_as_the_grid_under_ridge(problem):
    y_test = problem[3]

    def r2(pred):
        return 1 - np.mean((pred - y_test) ** 2) / np.var(y_test)

    by_scores = r2(_fit_predict("scores", RidgeCV(), problem))
    by_curves = r2(_fit_predict("curve", RidgeCV(), problem))
    assert by_scores > 0.8
    assert by_scores >= by_curves - 0.02


def test_features_are_the_imputers_own_outputs(problem):
    X, _, X_test, _ = problem
    pace = clone(PACE).fit(X)
    scores = fi.FeatureExtractor(PACE).fit(X)
    assert_array_equal(scores.transform(X_test), pace.scores(X_test))
    assert scores.n_features_out_ == pace.n_components_ == 6
    curve = fi.FeatureExtractor(PACE, kind="curve").fit(X)
    assert_array_equal(curve.transform(X_test), pace.transform(X_test))
    assert_array_equal(curve.get_feature_names_out(), pace.get_feature_names_out())


def test_grid_search_tunes_the_imputer_through_the_pipeline(problem):
    X, y, _, _ = problem
    model = make_pipeline(fi.FeatureExtractor(PACE), LinearRegression())
    search = GridSearchCV(
        model, {"featureextractor__imputer__n_components": [1, 6]}, cv=3
    )
    search.fit(X, y)
    # the target needs the second and fourth harmonics, not the first alone
    assert search.best_params_ == {"featureextractor__imputer__n_components": 6}
    fitted = search.best_estimator_[0]
    assert fitted.imputer_.n_components_ == 6
    copy = clone(fitted)
    assert copy.get_params()["imputer__n_components"] == 6
    assert not hasattr(copy, "imputer_")


def test_pandas_output_is_indexed_by_subject_with_named_columns(problem):
    X, y, X_test, _ = problem
    model = make_pipeline(fi.FeatureExtractor(PACE), LinearRegression())
    model.set_output(transform="pandas").fit(X, y)
    frame = model[0].transform(X_test)
    assert frame.index.tolist() == X_test.ids.tolist()
    assert frame.columns.tolist() == [f"score_{k}" for k in range(1, 7)]
    assert_array_equal(frame.to_numpy(), clone(PACE).fit(X).scores(X_test))
    assert model.predict(X_test).shape == (len(X_test),)
    assert clone(model[0])._output_container() == "pandas"


def test_wrong_kind_or_imputer_is_named():
    data = fi.simulate.sand_paper(n=20, n_obs=5, random_state=0).train.data
    with pytest.raises(TypeError, match=r"offers kind=\['curve'\]"):
        fi.FeatureExtractor(fi.KernelImputer(), kind="scores").fit(data)
    with pytest.raises(ValueError, match="kind"):
        fi.FeatureExtractor(kind="pcs").fit(data)
    with pytest.raises(TypeError, match="imputer"):
        fi.FeatureExtractor(imputer=LinearRegression()).fit(data)
    fitted = fi.FeatureExtractor(fi.KernelImputer(), kind="curve").fit(data)
    with pytest.raises(TypeError, match="encode"):
        fitted.set_params(kind="encoder").fit(data)
    assert not hasattr(fitted, "imputer_")


@pytest.mark.parametrize("cls", [fi.VTImputer, fi.SANDImputer])
def test_encoder_features_pool_each_subject_alone(cls, sim):
    params = _configs.TINY if cls is fi.VTImputer else _configs.SAND_TINY
    data = sim.train.data[:60]
    extractor = fi.FeatureExtractor(cls(**dict(params, max_epochs=1)), kind="encoder")
    extractor.set_output(transform="pandas").fit(data)
    test = sim.test.data[:7]
    frame = extractor.transform(test)
    assert frame.shape == (7, _configs.TINY_SIZES["d_model"])
    assert frame.columns[0] == "encoder_1" and frame.index.tolist() == test.ids.tolist()
    # subjects of other lengths in the batch (padding) change nothing
    alone = np.vstack([extractor.transform(test[[i]]).to_numpy() for i in range(7)])
    assert_allclose(frame.to_numpy(), alone, rtol=1e-5, atol=1e-6)
    assert np.ptp(frame.to_numpy(), axis=0).max() > 0


def test_output_columns_are_distinct_for_close_times_in_large_units():
    # times in Unix seconds a quarter second apart: ten significant digits
    # gave 19 grid times 5 labels, so out["t=1700000000"] held 3 columns
    from fdaimpute._core.columns import column_labels

    grid = 1.7e9 + np.arange(19) * 0.25
    subjects = [(grid[::2], np.sin(np.arange(10.0)) + k) for k in range(6)]
    imp = fi.KernelImputer(grid=grid).set_output(transform="pandas")
    out = imp.fit_transform(subjects)
    names = imp.get_feature_names_out()
    assert len(set(out.columns)) == grid.size
    assert list(out.columns) == list(names)
    several = column_labels(grid, ["a", "b"])
    assert len(set(several)) == 2 * grid.size
    # ordinary grids keep their labels
    assert list(column_labels(np.array([0.0, 0.5, 1.0]))) == ["t=0", "t=0.5", "t=1"]
