"""
Curves with 95% bands, and their derivatives
=============================================

PACE and FACE give each subject's curve with a pointwise standard deviation.
The band ``curve ± 1.96 sd`` should cover the true curve at about 95% of the
grid points; on simulated data we can check it. Both also give the curve's
derivative.
"""

import matplotlib.pyplot as plt
import numpy as np

import fdaimpute as fi

sim = fi.simulate.sand_paper(n=600, n_obs="3-5", random_state=0)
curves, sds = {}, {}
for name, imputer in [
    ("PACE", fi.PACEImputer(grid=sim.grid, random_state=0)),
    ("FACE", fi.FACEImputer(grid=sim.grid)),
]:
    imputer.fit(sim.train.data)
    curves[name], sds[name] = imputer.transform(sim.test.data, return_std=True)
    covered = np.abs(curves[name] - sim.test.truth) <= 1.96 * sds[name]
    print(f"{name}: the 95% band covers {covered.mean():.3f} of the true curve")

fig = fi.plotting.plot_curves(
    sim.test.data, curves, sim.grid, truth=sim.test.truth, std=sds, subjects=4
)

# %%
# The derivative of PACE's curves is exact (the mean's and the eigenfunctions'
# slopes), not a finite difference of the grid.

pace = fi.PACEImputer(grid=sim.grid, random_state=0).fit(sim.train.data)
slopes = pace.derivative(sim.test.data[:3])
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(sim.grid, slopes.T)
ax.set(xlabel="t", ylabel="x'(t)", title="PACE: derivatives of three subjects")
