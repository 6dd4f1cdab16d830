"""The functional-PCA core shared by PACE, FACE, mFPCA and the oracle.

Conditional-expectation scores and the predictor built on them, the
eigen-analysis and the choice of ``K``, held-out folds and the band
calibration on them, the spline basis and the spline FPCA model (FACE's and
mFPCA's fitted model), and the covariate-adjusted mean. Imports only
:mod:`fdaimpute._numerics` and :mod:`fdaimpute._core`.
"""
