"""FACE's numerical core on arrays: pair moments and penalised fits.

The spline basis, the fitted model and its bands, which FACE shares with
mFPCA, live in :mod:`fdaimpute._fpca`.
"""
