"""
FPC scores or the whole imputed curve as features?
===================================================

A scalar outcome depends linearly on each subject's curve, which is seen only
at 5 to 8 noisy points. Two pipelines predict it from the sparse observations:

- ``FeatureExtractor(PACEImputer(), kind="scores")``: PACE's few functional
  principal component scores per subject;
- ``FeatureExtractor(PACEImputer(), kind="curve")``: the imputed curve on a
  101-point grid.

PACE's imputed curves are its mean plus its eigenfunctions weighted by the
scores, so both feature sets span the same linear functions of the curve: an
unpenalised regression gives the same predictions, and a ridge regression
nearly the same, from a handful of columns instead of a hundred. The imputer
is refitted inside each cross-validation fold, so no fold sees the subjects
it is scored on.

    python examples/features_vs_grid.py
"""

import numpy as np
from sklearn.linear_model import LinearRegression, RidgeCV
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import make_pipeline

import fdaimpute as fi

sim = fi.simulate.sand_paper(
    n=500, n_obs="5-8", n_harmonics=5, split=(0.9, 0.0, 0.1), random_state=0
)
X, truth, grid = sim.train.data, sim.train.truth, sim.grid

# the outcome: a weighted integral of the true curve, plus noise
weight = np.exp(-(((grid - 0.3) / 0.15) ** 2)) - 0.5 * grid
rng = np.random.default_rng(0)
signal = truth @ weight / grid.size
y = signal + rng.normal(0, 0.2 * signal.std(), signal.size)

pace = fi.PACEImputer(n_work_grid=51, random_state=0)
folds = KFold(5, shuffle=True, random_state=0)
print(f"{'features':<10}{'regressor':<18}{'columns':>8}{'R^2 (5-fold CV)':>20}")
for kind in ("scores", "curve"):
    for regressor in (LinearRegression(), RidgeCV(alphas=np.logspace(-3, 3, 13))):
        model = make_pipeline(fi.FeatureExtractor(pace, kind=kind), regressor)
        r2 = cross_val_score(model, X, y, cv=folds)
        columns = model.fit(X, y)[0].n_features_out_
        print(
            f"{kind:<10}{type(regressor).__name__:<18}{columns:>8}"
            f"{r2.mean():>14.3f} ± {r2.std():.3f}"
        )
