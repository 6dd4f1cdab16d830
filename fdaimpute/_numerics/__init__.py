"""Numerical building blocks shared by every method.

Local-linear smoothing in one and two dimensions, interpolation (numpy),
batched linear algebra, the difference estimator of the noise variance and
the subject x time-bin matrix that MICE and GAIN fill. Imports only
:mod:`fdaimpute._core`.
"""
