"""PACE's numerical core, split by concern.

- :mod:`.binning`: observations onto bins, binned raw-covariance sums;
- :mod:`.surface`: two-dimensional local-linear smoothers of the raw covariances;
- :mod:`.noise_variance`: the measurement-error variance from the raw variances;
- :mod:`.bandwidth`: bandwidth choice by (generalised) cross-validation;
- :mod:`.result`: the typed results passed between the steps;
- :mod:`.numerics`: our numerics and fdapace's, chosen once per fit;
- :mod:`.cv`: held-out-point cross-validation of the covariance bandwidths and ``K``;
- :mod:`.fit`: a whole fit on arrays, from bins to ``K``;
- :mod:`.chunked`: the same fit from chunks of subjects (and Dask partitions);
- :mod:`.joint`, :mod:`.multivariate`: several variables fitted jointly.

The eigen-analysis, scores, held-out folds and band calibration PACE shares
with FACE and mFPCA live in :mod:`fdaimpute._fpca`.
Everything here works on arrays; :class:`fdaimpute.pace.PACEImputer` wires it up.
"""
