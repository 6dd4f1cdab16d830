"""
Regularizing a neural imputer
=============================

The SAND paper's VTP is the vanilla transformer with a curvature penalty on its
output (``Roughness``); ``tuning.select_regularizer_weight`` picks the weight
on validation subjects. Tiny settings, to run in seconds: 15 epochs on 300
subjects teach the network little (its MSE is close to that of the mean curve;
real fits train for 100 epochs or more, see the benchmarks), but the penalty's
effect on the roughness of the curves shows at once. The networks run alone
(``base=None``): with the default PACE base, 15 epochs would rarely beat PACE,
so both imputers would return PACE's curves.
"""

import numpy as np

import fdaimpute as fi
from fdaimpute.regularizers import Roughness
from fdaimpute.tuning import select_regularizer_weight

sim = fi.simulate.sand_paper(n=300, n_obs="8-12", random_state=0)
settings = dict(base=None, max_epochs=15, d_model=16, random_state=0, device="cpu")
vt = fi.VTImputer(grid=sim.grid, **settings)
vtp, results = select_regularizer_weight(
    fi.VTImputer(grid=sim.grid, regularizers=[Roughness()], **settings),
    sim.train.data,
    sim.validation.data,
    [100.0, 1000.0],
    truth=sim.validation.truth,
)
vt.fit(sim.train.data)
for name, imputer in [("VT", vt), (f"VTP ({vtp.regularizers[0].weight:g})", vtp)]:
    s = fi.metrics.summarize(sim.test.truth, imputer.transform(sim.test.data))
    print(f"{name:>12}: MSE x1000 {s['mse']:.0f}, TV x1000 {s['tv']:.0f}")

curves = {"VT": vt.transform(sim.test.data), "VTP": vtp.transform(sim.test.data)}
fig = fi.plotting.plot_curves(sim.test.data, curves, sim.grid, truth=sim.test.truth)
for name, c in curves.items():
    print(f"{name}: mean |second difference| {np.abs(np.diff(c, 2)).mean():.4f}")
