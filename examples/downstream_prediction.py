"""
Imputed curves as features in a Pipeline
========================================

A Pipeline predicting a scalar from sparse data. The target is each subject's
average level over the middle of the interval, which no single observation
reveals. The imputer's settings are tuned by
cross-validation together with the regressor.

    python examples/downstream_prediction.py
"""

import numpy as np
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

import fdaimpute as fi

sim = fi.simulate.sand_paper(n=3000, n_obs="3-5", random_state=1)
target = sim.train.truth[:, 40:61].mean(axis=1)
test_target = sim.test.truth[:, 40:61].mean(axis=1)

pipe = make_pipeline(fi.KernelImputer(grid=np.linspace(0, 1, 26)), RidgeCV())
search = GridSearchCV(pipe, {"kernelimputer__shrinkage": [0.1, 1.0, "auto"]}, cv=3)
search.fit(sim.train.data, target)
print("best:", search.best_params_)
print(f"test R^2: {search.score(sim.test.data, test_target):.3f}")
