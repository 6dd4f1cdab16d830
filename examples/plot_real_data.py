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
visible, hidden, rows = split_held_out(data, 0.2, min_keep=2, random_state=0)
queries = [np.array([])] * len(visible)
for row, times in zip(rows, np.split(hidden.times, hidden.offsets[1:-1])):
    queries[row] = times

errors = {}
for name, imputer in [
    ("PACE", fi.PACEImputer(random_state=0)),
    ("FACE", fi.FACEImputer()),
    ("kernel", fi.KernelImputer()),
]:
    imputer.fit(visible)
    predicted = np.concatenate([imputer.predict_at(visible, queries)[r] for r in rows])
    errors[name] = (predicted - hidden.values) ** 2
    print(f"{name:>6}: RMSE of the hidden visits {np.sqrt(errors[name].mean()):.3f}")

fig = fi.plotting.plot_comparison(errors, ylabel="squared error of a hidden visit")

# %%
# Coverage of PACE's 95% prediction interval for a hidden visit: the curve's
# band plus the measurement noise.

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
visible, hidden, rows = split_held_out(uk, 0.2, min_keep=2, random_state=0)
queries = [np.array([])] * len(visible)
for row, times in zip(rows, np.split(hidden.times, hidden.offsets[1:-1])):
    queries[row] = times
for name, imputer in [
    ("PACE", fi.PACEImputer(random_state=0)),
    ("kernel", fi.KernelImputer()),
]:
    answers = imputer.fit(visible).predict_at(visible, queries)
    predicted = np.concatenate([answers[r] for r in rows])
    rmse = np.sqrt(np.mean((predicted - hidden.values) ** 2))
    print(f"{name:>6}: RMSE of the hidden readings {rmse:.3f} kWh")
