"""Features of each subject for downstream models: a scikit-learn transformer."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from fdaimpute._core.output import OutputMixin
from fdaimpute._core.params import Instance, Options, validate_params
from fdaimpute.base import BaseImputer

__all__ = ["FeatureExtractor"]

#: kind -> (the imputer's method that gives it, what the features are)
_KINDS = {
    "scores": ("scores", "functional principal component scores"),
    "encoder": ("encode", "the pooled encoder state of a neural imputer"),
    "curve": ("transform", "the imputed curve on the grid"),
}


class FeatureExtractor(
    OutputMixin, TransformerMixin, BaseEstimator, auto_wrap_output_keys=None
):
    """Fixed-length features of each subject from an imputer, for a Pipeline.

    Sparse, irregular subjects do not fit a regression or a classifier
    directly; this transformer fits an imputer and hands on one row of
    features per subject:

    - ``kind="scores"``: :class:`~fdaimpute.PACEImputer`'s
      conditional-expectation FPC scores (``n_components_`` columns). The
      imputed curves are the mean plus the eigenfunctions weighted by these
      scores, so a linear model on the scores is a linear model on the
      curves, in a few columns instead of a whole grid;
    - ``kind="encoder"``: a neural imputer's (:class:`~fdaimpute.VTImputer`,
      :class:`~fdaimpute.SANDImputer`, :class:`~fdaimpute.CNPImputer`)
      encoder tokens averaged over the
      subject's observations (``d_model`` columns), see their ``encode``;
    - ``kind="curve"``: the imputed curve on the imputer's grid (any
      imputer).

    Parameters
    ----------
    imputer : imputer, default=None
        The imputer to fit (it is cloned); ``None`` means
        ``PACEImputer()``. Its parameters are tunable in a grid search as
        ``imputer__<name>``.
    kind : {"scores", "encoder", "curve"}, default="scores"
        Which features (see above).

    Attributes
    ----------
    imputer_ : imputer
        The fitted clone of ``imputer``.
    n_features_out_ : int
        Number of feature columns.

    Examples
    --------
    >>> import numpy as np
    >>> import fdaimpute as fi
    >>> from sklearn.linear_model import RidgeCV
    >>> from sklearn.pipeline import make_pipeline
    >>> sim = fi.simulate.sand_paper(n=200, n_obs="8-12", random_state=0)
    >>> y = sim.train.truth.mean(axis=1)  # each curve's average level
    >>> model = make_pipeline(
    ...     fi.FeatureExtractor(fi.PACEImputer(random_state=0)), RidgeCV())
    >>> model.fit(sim.train.data, y).predict(sim.test.data).shape
    (10,)
    >>> model[0].get_feature_names_out()[:2].tolist()
    ['score_1', 'score_2']
    """

    _param_constraints = {
        "imputer": [Instance(BaseImputer, "an fdaimpute imputer"), None],
        "kind": [Options(*_KINDS)],
    }

    def __init__(self, imputer=None, kind="scores"):
        self.imputer = imputer
        self.kind = kind

    def _check_imputer(self):
        """A clone of the imputer, or a TypeError if it lacks this ``kind``."""
        from fdaimpute.pace import PACEImputer

        imputer = PACEImputer() if self.imputer is None else clone(self.imputer)
        method = _KINDS[self.kind][0]
        if not callable(getattr(imputer, method, None)):
            offered = [k for k, (m, _) in _KINDS.items() if hasattr(imputer, m)]
            raise TypeError(
                f"kind={self.kind!r} ({_KINDS[self.kind][1]}) needs an imputer with "
                f"a {method}() method; {type(imputer).__name__} offers "
                f"kind={offered}"
            )
        return imputer

    def fit(self, X, y=None):
        """Fit the imputer on ``X``.

        Parameters
        ----------
        X : IrregularData, DataFrame, list of (t, y) pairs, 2-D array or \
scikit-fda object
            Training subjects (see :class:`~fdaimpute.BaseImputer`).
        y : array-like, default=None
            Ignored here (the imputer is unsupervised); accepted so that the
            transformer sits in a supervised Pipeline.

        Returns
        -------
        self : object
        """
        try:
            validate_params(self)
            imputer = self._check_imputer()
            self.imputer_ = imputer.fit(X)
            self.n_features_out_ = len(self._names())
        except BaseException:
            # never half-fitted: no imputer_ left from an earlier fit
            for name in ("imputer_", "n_features_out_"):
                self.__dict__.pop(name, None)
            raise
        return self

    def transform(self, X):
        """Each subject's features.

        Parameters
        ----------
        X : IrregularData, DataFrame, list of (t, y) pairs, 2-D array or \
scikit-fda object
            Subjects.

        Returns
        -------
        ndarray or DataFrame of shape (n_subjects, n_features)
            One row per subject, in input order; a DataFrame indexed by
            subject id with the columns of :meth:`get_feature_names_out`
            after ``set_output(transform="pandas")``.
        """
        check_is_fitted(self, "imputer_")
        data = self.imputer_._check_transform_input(X)
        method = getattr(self.imputer_, _KINDS[self.kind][0])
        features = np.asarray(method(data), dtype=np.float64)
        return self._wrap(features, data, columns=self._names())

    @property
    def n_features_in_(self):
        """Number of columns of a dense ``X`` seen in fit (absent otherwise)."""
        return self.imputer_.n_features_in_

    @property
    def feature_names_in_(self):
        """Column names of a DataFrame ``X`` seen in fit (absent otherwise)."""
        return self.imputer_.feature_names_in_

    def _names(self):
        imputer = self.imputer_
        if self.kind == "curve":
            return np.asarray(imputer.get_feature_names_out(), dtype=object)
        if self.kind == "scores":
            count, prefix = imputer.n_components_, "score"
        else:
            count, prefix = imputer._n_encoder_features(), "encoder"
        return np.asarray([f"{prefix}_{k + 1}" for k in range(count)], dtype=object)

    def get_feature_names_out(self, input_features=None):
        """Names of the feature columns.

        ``score_1`` ... for scores, ``encoder_1`` ... for the encoder and
        ``t=<time>`` for each grid time of a curve.

        Parameters
        ----------
        input_features : None
            Ignored (the input has no fixed columns).

        Returns
        -------
        ndarray of str objects
        """
        check_is_fitted(self, "imputer_")
        return self._names()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.requires_fit = True
        return tags
