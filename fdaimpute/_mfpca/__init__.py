"""mFPCA's numerical core on arrays: basis, likelihood, Stiefel optimiser, fit."""
