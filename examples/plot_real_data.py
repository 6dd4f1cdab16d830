"""
Real data: Framingham BMI, held-out visits
===========================================

Framingham BMI curves (889 participants, 3 to 11 visits) ship with the package.
Each participant hides a fifth of their visits (keeping at least two); the
imputers fit on the rest and predict the hidden visits, and PACE's bands plus
its noise variance give a 95% prediction interval for each.
"""

import numpy as np

import fdaimpute as fi
from fdaimpute.metrics import split_held_out

data = fi.datasets.load_framingham().data
print(data)
errors = {}
for name, imputer in [
    ("PACE", fi.PACEImputer(random_state=0)),
    ("FACE", fi.FACEImputer()),
    ("kernel", fi.KernelImputer()),
]:
    mse, errors[name] = fi.metrics.held_out_error(
        imputer, data, refit=True, min_keep=2, return_errors=True, random_state=0
    )
    print(f"{name:>6}: RMSE of the hidden visits {np.sqrt(mse):.3f}")

fig = fi.plotting.plot_comparison(errors, ylabel="squared error of a hidden visit")

# %%
# Coverage of PACE's 95% prediction interval for a hidden visit: the curve's
# band plus the measurement noise. The same split as above (same seed).

visible, hidden, rows = split_held_out(data, 0.2, min_keep=2, random_state=0)
pace = fi.PACEImputer(random_state=0).fit(visible)
grid = np.unique(hidden.times)
curves, sd = pace.transform(visible, grid=grid, return_std=True)
subject = np.repeat(rows, hidden.n_obs)
column = np.searchsorted(grid, hidden.times)
spread = np.sqrt(sd[subject, column] ** 2 + pace.noise_variance_)
inside = np.abs(hidden.values - curves[subject, column]) <= 1.96 * spread
print(f"95% intervals cover {inside.mean():.3f} of the hidden visits")

# %%
# UK electricity: half-hourly household use over two days, here with 8 to 12
# readings per household (``n_obs="8-12"``), 1,000 households. The readings are
# heavy-tailed (a kettle, a heater), which a smooth imputer cannot predict.

uk = fi.datasets.load_uk_electricity(n_obs="8-12").data
uk = uk.take(np.arange(1000))
for name, imputer in [
    ("PACE", fi.PACEImputer(random_state=0)),
    ("kernel", fi.KernelImputer()),
]:
    mse = fi.metrics.held_out_error(imputer, uk, refit=True, min_keep=2, random_state=0)
    print(f"{name:>6}: RMSE of the hidden readings {np.sqrt(mse):.3f} kWh")
